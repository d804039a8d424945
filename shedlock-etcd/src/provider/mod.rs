//! [`EtcdLockProvider`]: the lock contract on etcd leases and transactions.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, SubsecRound as _, Utc};
use shedlock_core::{
    Error, Result,
    admin::LockEntry,
    jobs::{JobState, RunEntry, RunOutcome},
    provider::{
        Definition, Fire, FireClaim, LockProvider, LockRecord, PendingTrigger, RunReport,
        TriggerClaim, TriggerWake, fire_decision, validate_at_least, validate_at_most,
        validate_name,
    },
    trigger::Trigger,
};
use tokio::time::Instant;

use crate::endpoint::Endpoints;
use crate::gateway::{Gateway, GatewayError, KeyValue, Txn};
use crate::key::{self, LockKeys, REC};

mod admin;
mod builder;
mod record;
#[cfg(test)]
mod tests;
mod trigger;

pub use builder::EtcdLockProviderBuilder;
use record::{
    ActionValue, DefinitionValue, FireValue, HoldValue, PauseValue, RecValue, RunValue,
    SuccessValue, TriggerValue, decode_value, encode_value, hold_value,
};

/// The key prefix when none is set.
pub const DEFAULT_PREFIX: &str = "shedlock/";

/// The owner shown for a lock whose hold exists but whose record was deleted by hand. Nobody can
/// release or extend such a lock. It ends with its lease, or with
/// [`force_unlock`](shedlock_core::admin::LockAdmin::force_unlock).
pub const UNKNOWN_OWNER: &str = "(unknown: the lock record was deleted)";

/// The longest lock name [`EtcdLockProviderBuilder::max_name_len`] accepts, in characters.
pub const MAX_NAME_LEN_LIMIT: usize = 1024;

/// etcd's smallest lease TTL with its default `--election-timeout` of 1 s. Leases asked for less
/// are granted this long, as etcd raises them to 1.5 election timeouts, rounded up.
pub const ETCD_MIN_TTL: Duration = Duration::from_secs(2);

/// A [`LockProvider`] and [`LockAdmin`](shedlock_core::admin::LockAdmin) on etcd v3: expiry by
/// lease TTL on the etcd leader's clock, one transaction per decision, fencing tokens from
/// revisions. See the crate docs for the key layout, round trips and whole-second leases.
///
/// Build one with [`EtcdLockProvider::new`] or [`EtcdLockProvider::builder`], cheaply and
/// synchronously. The first call connects.
///
/// ```
/// use shedlock_etcd::EtcdLockProvider;
///
/// let provider = EtcdLockProvider::new("etcd://127.0.0.1:2379")?;
/// assert_eq!(provider.prefix(), "shedlock/");
/// # Ok::<(), shedlock_core::Error>(())
/// ```
pub struct EtcdLockProvider {
    gateway: Gateway,
    prefix: String,
    call_timeout: Duration,
    max_name_len: usize,
}

impl fmt::Debug for EtcdLockProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The endpoints show the user, never the password.
        f.debug_struct("EtcdLockProvider")
            .field("endpoints", self.gateway.endpoints())
            .field("prefix", &self.prefix)
            .field("call_timeout", &self.call_timeout)
            .field("max_name_len", &self.max_name_len)
            .finish_non_exhaustive()
    }
}

/// A lock's keys as read.
#[derive(Default)]
struct Read {
    rec: Option<(KeyValue, RecValue)>,
    hold: Option<(KeyValue, HoldValue)>,
    fire: Option<(KeyValue, FireValue)>,
    /// The job state's keys (see [`release_run`](LockProvider::release_run)). A value that cannot
    /// be read counts as absent.
    state: StateRead,
    /// An operator's pause (see [Pauses](crate#pauses)).
    pause: Option<(KeyValue, PauseValue)>,
    /// Why a pause key's value could not be read. The fire claim fails on it, never ignoring a
    /// pause; readers of the entry see no pause.
    pause_unreadable: Option<GatewayError>,
    /// The last pause, resume, unlock or trigger. A value that cannot be read counts as absent.
    action: Option<ActionValue>,
    /// The last trigger (see [Run now](crate#run-now)). A value that cannot be read counts as
    /// absent.
    trigger: Option<Trigger>,
    /// The trigger key's `mod_revision`, 0 when it is absent.
    trigger_revision: i64,
}

impl Read {
    /// Takes the trigger key as read: its revision, and its value if it can be read.
    fn take_trigger(&mut self, kv: &KeyValue) {
        self.trigger_revision = kv.mod_revision.0;
        self.trigger = decode_value::<TriggerValue>(kv)
            .ok()
            .map(TriggerValue::into_trigger);
    }
}

/// A lock's job state keys as read.
#[derive(Default)]
struct StateRead {
    run: Option<RunValue>,
    /// The failures key's version: the consecutive failures.
    failures: i64,
    success: Option<SuccessValue>,
}

impl StateRead {
    /// Takes `kv` if it is one of the state keys. `which` names them as [`key::parse_key`] does.
    fn take(&mut self, which: &[u8], kv: &KeyValue) {
        if which == key::RUN {
            self.run = decode_value(kv).ok();
        } else if which == key::FAILURES {
            self.failures = kv.version.0;
        } else if which == key::SUCCESS {
            self.success = decode_value(kv).ok();
        }
    }

    fn state(self, name: &str) -> JobState {
        let last_run = self.run.and_then(|run| {
            let outcome = RunOutcome::from_parts(&run.outcome, run.error.as_deref())?;
            Some(RunEntry::new(
                name,
                DateTime::from_timestamp_micros(run.fire_us)?,
                run.runner,
                from_millis(run.started_ms),
                from_millis(run.ended_ms),
                outcome,
            ))
        });
        JobState::new(
            last_run,
            self.success.map(|s| from_millis(s.at_ms)),
            u32::try_from(self.failures.max(0)).unwrap_or(u32::MAX),
        )
    }
}

/// An acquisition about to be made: see [`EtcdLockProvider::taking`].
struct Taking {
    lease: i64,
    locked_at: DateTime<Utc>,
    lock_until: DateTime<Utc>,
    txn: Txn,
}

/// What one look-and-claim of a fire came to.
enum Claim {
    /// The answer.
    Answer(FireClaim),
    /// The keys changed between the look and the transaction: look again.
    Changed,
}

impl EtcdLockProvider {
    /// The members this provider talks to.
    #[must_use]
    pub fn endpoints(&self) -> &Endpoints {
        self.gateway.endpoints()
    }

    /// The key prefix.
    #[must_use]
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The etcd keys of lock `name`: its record and its hold (see
    /// [the key layout](crate#how-the-contract-maps-onto-etcd)).
    ///
    /// ```
    /// let provider = shedlock_etcd::EtcdLockProvider::new("etcd://127.0.0.1:2379")?;
    /// let (rec, hold) = provider.keys("tenant/42 report")?;
    /// assert_eq!(rec, b"shedlock/tenant%2F42%20report/rec");
    /// assert_eq!(hold, b"shedlock/tenant%2F42%20report/hold");
    /// # Ok::<(), shedlock_core::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::is_invalid_config`] for a name the provider refuses, such as an empty or too long
    /// one.
    pub fn keys(&self, name: &str) -> Result<(Vec<u8>, Vec<u8>)> {
        let keys = self.lock_keys(name)?;
        Ok((keys.rec, keys.hold))
    }

    fn lock_keys(&self, name: &str) -> Result<LockKeys> {
        validate_name(name, self.max_name_len)?;
        Ok(key::lock_keys(&self.prefix, name))
    }

    fn deadline(&self) -> Instant {
        Instant::now() + self.call_timeout
    }

    fn failed(&self, op: &'static str, name: &str, error: GatewayError) -> Error {
        self.failed_at(op, &format!("{op} lock {name:?}"), error)
    }

    /// The error of operation `op`, described as `what` (`"release lock \"x\""`).
    fn failed_at(&self, op: &'static str, what: &str, error: GatewayError) -> Error {
        match error {
            GatewayError::Timeout => Error::timeout(op, self.call_timeout),
            GatewayError::ReplyLost { .. } => {
                // What it means differs: a failed acquire revokes its lease (whatever it took is
                // given back); a fire claim keeps it, so that its scheduler can run the claim; a
                // resume may have removed the pause.
                let meaning = match op {
                    "acquire" => "its lease was revoked, so whatever it took is given back",
                    "resume" => "the pause may be removed; the lock's entry shows whether it is",
                    "trigger" => "the trigger may be written; the lock's entry shows whether it is",
                    _ => "so the lock may be held by this owner until at_most",
                };
                Error::backend_message(format!("{what} on etcd: {error}: {meaning}"))
            }
            // Unreachable members (TLS failures among them) and authentication failures say all
            // in one line: what is wrong, on which member, what to change.
            error if error.says_all() => Error::backend_message(format!("{what} on etcd: {error}")),
            error => Error::backend(format!("{what} on etcd"), error),
        }
    }

    /// Revokes a lease that holds nothing any more. A failure only leaves it to expire.
    async fn cleanup(&self, lease: i64, deadline: Instant) {
        if let Err(error) = self.gateway.revoke(lease, deadline).await {
            tracing::debug!(
                lease,
                error = &error as &dyn std::error::Error,
                "could not revoke a spare etcd lease; it expires by itself"
            );
        }
    }

    /// Reads the keys of a lock in one range, from `{prefix}{name}/` up to its end. A record, hold
    /// or fire that cannot be read fails it. A pause that cannot be read is kept as
    /// [`Read::pause_unreadable`].
    async fn read(&self, keys: &LockKeys, deadline: Instant) -> Result<Read, GatewayError> {
        let base = &keys.rec[..=keys.rec.len() - REC.len()]; // up to and with the `/`
        let answer = self
            .gateway
            .range(base, Some(&key::prefix_end(base)), deadline)
            .await?;
        let mut read = Read::default();
        for kv in answer.kvs {
            if kv.key.0 == keys.rec {
                read.rec = Some(decode_value(&kv)?).map(|v| (kv, v));
            } else if kv.key.0 == keys.hold {
                read.hold = Some(decode_value(&kv)?).map(|v| (kv, v));
            } else if kv.key.0 == keys.fire {
                read.fire = Some(decode_value(&kv)?).map(|v| (kv, v));
            } else if kv.key.0 == keys.pause {
                match decode_value(&kv) {
                    Ok(value) => read.pause = Some((kv, value)),
                    Err(error) => read.pause_unreadable = Some(error),
                }
            } else if kv.key.0 == keys.action {
                read.action = decode_value(&kv).ok();
            } else if kv.key.0 == keys.trigger {
                read.take_trigger(&kv);
            } else if let Some(which) = kv
                // The job state's keys: what follows `{prefix}{name}` (`/last-run`, …).
                .key
                .0
                .strip_prefix(base.strip_suffix(b"/").unwrap_or(base))
            {
                read.state.take(which, &kv);
            }
        }
        Ok(read)
    }

    fn token(record: &LockRecord, op: &'static str) -> Result<i64> {
        record.fencing_token().ok_or_else(|| {
            Error::invalid_config(format!(
                "cannot {op} lock {:?}: the record has no fencing token, so it did not come \
                 from an etcd store",
                record.name()
            ))
        })
    }

    /// A new acquisition of the lock by `owner` for `at_most`: a lease, and the transaction that
    /// takes the lock if its hold is absent, putting the record and the hold on the lease. A caller
    /// adds its own compares and writes to it.
    async fn taking(
        &self,
        keys: &LockKeys,
        at_most: Duration,
        owner: &str,
        deadline: Instant,
    ) -> Result<Taking, GatewayError> {
        let locked_at = now();
        let lease = self.gateway.grant(ttl_secs(at_most), deadline).await?;
        let lock_until = locked_at + chrono_duration(at_most);
        let rec = RecValue {
            owner: owner.to_owned(),
            locked_at_ms: locked_at.timestamp_millis(),
            lease: lease.id,
            ttl: lease.ttl,
        };
        let txn = Txn::default()
            .absent(&keys.hold)
            .then_put(&keys.rec, &encode_value(&rec), None)
            .then_put(&keys.hold, &hold_value(lock_until), Some(lease.id));
        Ok(Taking {
            lease: lease.id,
            locked_at,
            lock_until,
            txn,
        })
    }

    async fn do_acquire(
        &self,
        name: &str,
        keys: &LockKeys,
        at_most: Duration,
        owner: &str,
        deadline: Instant,
    ) -> Result<Option<LockRecord>, GatewayError> {
        // Read first: a held lock costs one read and writes nothing.
        let held = self
            .gateway
            .range(&keys.hold, None, deadline)
            .await?
            .kvs
            .into_iter()
            .next()
            .is_some();
        if held {
            return Ok(None);
        }
        let Taking {
            lease,
            locked_at,
            lock_until,
            txn,
        } = self.taking(keys, at_most, owner, deadline).await?;
        // Sent once: a repeat of an applied copy would find its own hold and answer "held".
        let answer = match self.gateway.txn_once(&txn, deadline).await {
            Ok(answer) => answer,
            Err(error) => {
                // Applied or not, revoking the lease ends any hold it made.
                self.cleanup(lease, deadline).await;
                return Err(error);
            }
        };
        if !answer.succeeded {
            // Someone took it between the read and the transaction: leave no lease behind.
            self.cleanup(lease, deadline).await;
            return Ok(None);
        }
        Ok(Some(
            LockRecord::new(name, owner, locked_at, lock_until)
                .with_fencing_token(Some(answer.header.revision.0)),
        ))
    }

    async fn do_extend(
        &self,
        record: &LockRecord,
        keys: &LockKeys,
        token: i64,
        at_most: Duration,
        deadline: Instant,
    ) -> Result<Option<LockRecord>, GatewayError> {
        let start = now();
        let lease = self.gateway.grant(ttl_secs(at_most), deadline).await?;
        let lock_until = start + chrono_duration(at_most);
        let txn = Txn::default()
            .mod_is(&keys.rec, token)
            .present(&keys.hold)
            .then_get(&keys.rec)
            .then_put(&keys.hold, &hold_value(lock_until), Some(lease.id));
        let answer = match self.gateway.txn(&txn, deadline).await {
            Ok(answer) => answer,
            Err(error) => {
                // Not knowing whether the hold moved to the new lease, keep that lease: the
                // lock then ends at the later of the two, never earlier than before.
                return Err(error);
            }
        };
        if !answer.succeeded {
            self.cleanup(lease.id, deadline).await;
            return Ok(None);
        }
        self.revoke_previous(&answer, Some(lease.id), deadline)
            .await;
        Ok(Some(record.clone().with_lock_until(lock_until)))
    }

    /// The release. With `state`, the job state's writes ride in its transaction, nested (see
    /// [`state_txn`](Self::state_txn)).
    async fn do_release(
        &self,
        keys: &LockKeys,
        token: i64,
        at_least: Duration,
        state: Option<&Txn>,
        deadline: Instant,
    ) -> Result<bool, GatewayError> {
        let with_state = |txn: Txn| match state {
            Some(state) => txn.then_txn(state),
            None => txn,
        };
        let mut hold_for = Duration::ZERO;
        if !at_least.is_zero() {
            // How long ago the acquisition was, by the etcd leader's clock: its first lease's
            // granted TTL minus the whole seconds left (rounded so as to hold longer).
            let read = self.read(keys, deadline).await?;
            let Some((_, rec)) = read.rec.filter(|(kv, _)| kv.mod_revision.0 == token) else {
                return Ok(false);
            };
            let elapsed = match self.gateway.time_to_live(rec.lease, deadline).await? {
                Some((granted, left)) => secs((granted - left - 1).max(0)),
                None => secs(rec.ttl.max(0)), // the first lease ran out: at least its TTL ago
            };
            hold_for = at_least.saturating_sub(elapsed);
        }
        if hold_for.is_zero() {
            let txn = with_state(
                Txn::default()
                    .mod_is(&keys.rec, token)
                    .then_get(&keys.rec)
                    .then_delete(&keys.hold),
            );
            let answer = self.gateway.txn(&txn, deadline).await?;
            if answer.succeeded {
                self.revoke_previous(&answer, None, deadline).await;
            }
            return Ok(answer.succeeded);
        }
        let start = now();
        let lease = self.gateway.grant(ttl_secs(hold_for), deadline).await?;
        let until = start + chrono_duration(hold_for);
        let txn = with_state(
            Txn::default()
                .mod_is(&keys.rec, token)
                .then_get(&keys.rec)
                .then_put(&keys.hold, &hold_value(until), Some(lease.id)),
        );
        let answer = self.gateway.txn(&txn, deadline).await?;
        if answer.succeeded {
            self.revoke_previous(&answer, Some(lease.id), deadline)
                .await;
        } else {
            self.cleanup(lease.id, deadline).await;
        }
        Ok(answer.succeeded)
    }

    /// The writes of a run's job state, as a transaction nested in the release's, which holds them
    /// to its guard: `if last-run was not written since the acquisition then put last-run`, plus
    /// `delete failures, put last-success` for a success or `put failures` for a failure or a
    /// panic. The version of `failures` is the count of puts since its last delete. As the record
    /// was written at revision `token`, a last-run written since is this acquisition's, so a repeat
    /// of an applied release records nothing twice.
    fn state_txn(keys: &LockKeys, token: i64, record: &LockRecord, run: &RunReport) -> Txn {
        let outcome = run.outcome.clone().capped();
        let ended = now();
        let value = RunValue {
            fire_us: run.fire.timestamp_micros(),
            runner: record.owner().to_owned(),
            started_ms: record.locked_at().timestamp_millis(),
            ended_ms: ended.timestamp_millis(),
            outcome: outcome.kind().to_owned(),
            error: outcome.error().map(str::to_owned),
        };
        let txn = Txn::default().mod_below(&keys.run, token).then_set(
            &keys.run,
            &encode_value(&value),
            None,
        );
        match outcome {
            RunOutcome::Succeeded => txn.then_remove(&keys.failures).then_set(
                &keys.success,
                &encode_value(&SuccessValue {
                    at_ms: ended.timestamp_millis(),
                }),
                None,
            ),
            outcome if outcome.is_failure() => txn.then_set(&keys.failures, b"", None),
            _ => txn,
        }
    }

    /// One look at the lock's keys, then, when the fire is claimable by this replica's clock, one
    /// transaction that claims it if none of what the look saw changed: the fire, the hold and the
    /// pause.
    async fn look_and_claim(
        &self,
        name: &str,
        keys: &LockKeys,
        fire: &Fire,
        at_most: Duration,
        owner: &str,
        deadline: Instant,
    ) -> Result<Claim, GatewayError> {
        let mut read = self.read(keys, deadline).await?;
        if let Some(error) = read.pause_unreadable.take() {
            return Err(error); // a pause is never ignored
        }
        let store_now = now();
        let recorded = read
            .fire
            .as_ref()
            .and_then(|(_, f)| DateTime::from_timestamp_micros(f.at_us));
        let fire_revision = read.fire.as_ref().map_or(0, |(kv, _)| kv.mod_revision.0);
        // 0: no pause. A pause committed after the read then fails the transaction.
        let pause_revision = read.pause.as_ref().map_or(0, |(kv, _)| kv.mod_revision.0);
        let entry = Self::entry_of(name.to_owned(), read, store_now);
        let row = entry.as_ref().map(LockEntry::record);
        let pause = entry.as_ref().and_then(LockEntry::pause);
        if let Some(answer) = fire_decision(fire, store_now, row, recorded, pause) {
            return Ok(Claim::Answer(answer));
        }
        let Taking {
            lease,
            locked_at,
            lock_until,
            txn,
        } = self.taking(keys, at_most, owner, deadline).await?;
        let txn = txn
            .mod_is(&keys.fire, fire_revision)
            .mod_is(&keys.pause, pause_revision)
            .then_put(
                &keys.fire,
                &encode_value(&FireValue {
                    at_us: fire.at().timestamp_micros(),
                }),
                None,
            );
        // Sent once, and its lease kept on error: if it was applied, this replica holds the lock
        // and its scheduler recognises the claim (its owner and `locked_at`) and runs it; if not,
        // the spare lease expires by itself.
        let answer = self.gateway.txn_once(&txn, deadline).await?;
        if !answer.succeeded {
            self.cleanup(lease, deadline).await;
            return Ok(Claim::Changed);
        }
        Ok(Claim::Answer(FireClaim::Claimed(
            LockRecord::new(name, owner, locked_at, lock_until)
                .with_fencing_token(Some(answer.header.revision.0)),
        )))
    }

    /// After a transaction that moved or deleted the hold, revokes the hold's previous lease,
    /// except the acquisition's first, kept as its clock until it expires, and the lease just
    /// attached.
    async fn revoke_previous(
        &self,
        answer: &crate::gateway::TxnResponse,
        attached: Option<i64>,
        deadline: Instant,
    ) {
        let first = answer
            .got()
            .and_then(|kv| decode_value::<RecValue>(kv).ok())
            .map(|rec| rec.lease);
        if let Some(previous) = answer.previous().map(|kv| kv.lease.0)
            && previous != 0
            && Some(previous) != first
            && Some(previous) != attached
        {
            self.cleanup(previous, deadline).await;
        }
    }

    /// The entry of a lock as read, or `None` when it has no record and no hold. While the hold
    /// exists, the lock is held, as etcd answers, with the writer's estimated `lock_until`, kept
    /// after `store_now`. A free lock ends at `store_now`, or, never held (a pause wrote its
    /// record), at the record's `locked_at`. A hold whose record was deleted by hand still shows,
    /// so that operators see what blocks the name, with the owner [`UNKNOWN_OWNER`] and no token.
    /// The entry carries the recorded fire, the job state its keys keep, a default one when no run
    /// was recorded, the pause, the last action and the last trigger.
    fn entry_of(name: String, read: Read, store_now: DateTime<Utc>) -> Option<LockEntry> {
        let state = read.state.state(&name);
        let last_fire = read
            .fire
            .as_ref()
            .and_then(|(_, fire)| DateTime::from_timestamp_micros(fire.at_us));
        let pause = read.pause.map(|(_, pause)| pause.into_pause());
        let last_action = read.action.and_then(ActionValue::into_action);
        let has_hold = read.hold.is_some();
        let lock_until = match (&read.hold, &read.rec) {
            (Some((_, hold)), _) => {
                from_millis(hold.until_ms).max(store_now + chrono::Duration::milliseconds(1))
            }
            (None, Some((_, rec))) if rec.is_never_held() => {
                from_millis(rec.locked_at_ms).min(store_now)
            }
            (None, _) => store_now,
        };
        let record = match read.rec {
            // A record a pause wrote under a hold whose record was deleted by hand names no one.
            Some((kv, rec)) if !(has_hold && rec.is_never_held()) => {
                LockRecord::new(name, rec.owner, from_millis(rec.locked_at_ms), lock_until)
                    .with_fencing_token(Some(kv.mod_revision.0))
            }
            _ if has_hold => LockRecord::new(name, UNKNOWN_OWNER, store_now, lock_until),
            _ => return None,
        };
        Some(
            LockEntry::new(record, store_now, last_fire)
                .with_state(state)
                .with_pause(pause)
                .with_last_action(last_action)
                .with_trigger(read.trigger),
        )
    }
}

#[async_trait]
impl LockProvider for EtcdLockProvider {
    /// One range read, which is the skip path and writes nothing. When the lock is free, a lease
    /// grant and one transaction `if hold absent then put record, put hold on the lease` follow. A
    /// lost race revokes the lease.
    async fn acquire(
        &self,
        name: &str,
        at_most: Duration,
        owner: &str,
    ) -> Result<Option<LockRecord>> {
        let keys = self.lock_keys(name)?;
        validate_at_most(at_most)?;
        let deadline = self.deadline();
        self.do_acquire(name, &keys, at_most, owner, deadline)
            .await
            .map_err(|e| self.failed("acquire", name, e))
    }

    /// A lease grant and one transaction, `if record is this acquisition's and hold present then
    /// move hold to the new lease`. The replaced lease is then revoked, except the acquisition's
    /// first.
    async fn extend(&self, record: &LockRecord, at_most: Duration) -> Result<Option<LockRecord>> {
        let keys = self.lock_keys(record.name())?;
        validate_at_most(at_most)?;
        let token = Self::token(record, "extend")?;
        let deadline = self.deadline();
        self.do_extend(record, &keys, token, at_most, deadline)
            .await
            .map_err(|e| self.failed("extend", record.name(), e))
    }

    /// With `at_least` zero: one transaction (`if record is this acquisition's then delete hold`).
    /// Otherwise a read, the first lease's time to live, then either that transaction or a grant
    /// and `… then put hold on a lease of the rest of at_least`.
    async fn release(&self, record: &LockRecord, at_least: Duration) -> Result<bool> {
        let keys = self.lock_keys(record.name())?;
        validate_at_least(at_least)?;
        let token = Self::token(record, "release")?;
        let deadline = self.deadline();
        self.do_release(&keys, token, at_least, None, deadline)
            .await
            .map_err(|e| self.failed("release", record.name(), e))
    }

    /// The release, with the run's job state written by a transaction nested in the release's, at
    /// the same round trips (see [Job state](crate#job-state)). There is no history.
    async fn release_run(
        &self,
        record: &LockRecord,
        at_least: Duration,
        run: &RunReport,
    ) -> Result<bool> {
        let keys = self.lock_keys(record.name())?;
        validate_at_least(at_least)?;
        let token = Self::token(record, "release")?;
        let state = Self::state_txn(&keys, token, record, run);
        let deadline = self.deadline();
        self.do_release(&keys, token, at_least, Some(&state), deadline)
            .await
            .map_err(|e| self.failed("release", record.name(), e))
    }

    /// A lease grant of `ttl`, whole seconds rounded up and at least etcd's minimum, and one
    /// transaction per 64 definitions that puts their keys on it. See
    /// [the crate docs](crate#job-state) for how entries expire.
    async fn publish_definitions(
        &self,
        replica: &str,
        version: &str,
        definitions: &[Definition],
        ttl: Duration,
    ) -> Result<()> {
        /// Puts per transaction, well below etcd's default `--max-txn-ops` (128).
        const CHUNK: usize = 64;
        if definitions.is_empty() {
            return Ok(());
        }
        let deadline = self.deadline();
        let run = async {
            let published = now();
            let lease = self.gateway.grant(ttl_secs(ttl), deadline).await?;
            let expires = published + chrono::Duration::seconds(lease.ttl.max(ttl_secs(ttl)));
            // One entry per job: a later duplicate replaces an earlier one (etcd refuses a
            // transaction that puts one key twice).
            let entries: std::collections::BTreeMap<Vec<u8>, Vec<u8>> = definitions
                .iter()
                .map(|d| {
                    let value = DefinitionValue {
                        job: d.job.clone(),
                        lock_name: d.lock_name.clone(),
                        spec: d.spec.clone(),
                        replica: replica.to_owned(),
                        version: version.to_owned(),
                        published_ms: published.timestamp_millis(),
                        expires_ms: expires.timestamp_millis(),
                    };
                    (
                        key::definition_key(&self.prefix, &d.job, replica),
                        encode_value(&value),
                    )
                })
                .collect();
            let entries: Vec<_> = entries.into_iter().collect();
            for chunk in entries.chunks(CHUNK) {
                let txn = chunk.iter().fold(Txn::default(), |txn, (k, v)| {
                    txn.then_set(k, v, Some(lease.id))
                });
                debug_assert!(txn.ops() <= CHUNK);
                self.gateway.txn(&txn, deadline).await?;
            }
            Ok(())
        };
        run.await.map_err(|e| {
            self.failed_at(
                "publish_definitions",
                &format!("publish the definitions of replica {replica:?}"),
                e,
            )
        })
    }

    /// One range read of the lock's keys, the pause among them. When the fire is claimable by
    /// this replica's clock, a lease grant and one transaction follow: `if the fire key, the hold
    /// and the pause are as read then put record, hold on the lease, and the fire`. A claim that
    /// lost a race looks again, at most 4 times. See
    /// [the crate docs](crate#how-the-contract-maps-onto-etcd) on the clocks.
    async fn claim_fire(
        &self,
        name: &str,
        fire: &Fire,
        at_most: Duration,
        owner: &str,
    ) -> Result<FireClaim> {
        const LOOKS: usize = 4;
        let keys = self.lock_keys(name)?;
        validate_at_most(at_most)?;
        // The fire as the fire key holds it: whole microseconds, rounded up (never before F).
        let fire = &Fire::new(micros_ceil(fire.at()), micros_ceil(fire.next()))?;
        let deadline = self.deadline();
        for _ in 0..LOOKS {
            match self
                .look_and_claim(name, &keys, fire, at_most, owner, deadline)
                .await
                .map_err(|e| self.failed("claim a fire of", name, e))?
            {
                Claim::Answer(answer) => return Ok(answer),
                Claim::Changed => {
                    tracing::debug!(name, %fire, "the lock changed during a fire claim; looking again");
                }
            }
        }
        Err(Error::backend_message(format!(
            "claim a fire of lock {name:?} on etcd: the keys changed under each of {LOOKS} attempts"
        )))
    }

    /// One range read of the pending triggers' keys, `{prefix}!trigger/`, whatever the number of
    /// locks (see [Run now](crate#run-now)).
    async fn pending_triggers(&self) -> Result<Vec<PendingTrigger>> {
        self.do_pending_triggers().await
    }

    /// One range read of the lock's keys. When the trigger is still pending, the job not paused
    /// and the lock free by this replica's clock, a lease grant and one transaction follow: `if
    /// the hold is absent and the trigger and pause keys are as read then put record, hold on the
    /// lease, the trigger taken, and delete its pending copy`. The fire key is never written. A
    /// claim that lost a race looks again, at most 4 times. Its transaction is sent once.
    async fn claim_trigger(
        &self,
        name: &str,
        id: i64,
        at_most: Duration,
        owner: &str,
    ) -> Result<TriggerClaim> {
        self.do_claim_trigger(name, id, at_most, owner).await
    }

    /// An etcd watch of the puts under `{prefix}!trigger/`, one streamed HTTP request that a task
    /// reads (see [Run now](crate#run-now)).
    async fn watch_triggers(&self) -> Result<TriggerWake> {
        self.do_watch_triggers().await
    }

    /// One range read of the lock's two keys.
    async fn holder(&self, name: &str) -> Result<Option<LockRecord>> {
        let keys = self.lock_keys(name)?;
        let deadline = self.deadline();
        let read = self
            .read(&keys, deadline)
            .await
            .map_err(|e| self.failed("holder", name, e))?;
        if read.hold.is_none() {
            return Ok(None);
        }
        Ok(Self::entry_of(name.to_owned(), read, now()).map(|entry| entry.record().clone()))
    }

    fn max_name_len(&self) -> usize {
        self.max_name_len
    }
}

// ---- small helpers ----------------------------------------------------------------------

/// The client's clock, in whole milliseconds. Records are stored with that precision.
fn now() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(3)
}

/// `t` rounded up to whole microseconds.
pub(super) fn micros_ceil(t: DateTime<Utc>) -> DateTime<Utc> {
    let down = DateTime::from_timestamp_micros(t.timestamp_micros()).unwrap_or(t);
    if down < t {
        down + chrono::Duration::microseconds(1)
    } else {
        down
    }
}

pub(super) fn from_millis(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or(DateTime::<Utc>::UNIX_EPOCH)
}

fn secs(s: i64) -> Duration {
    Duration::from_secs(u64::try_from(s).unwrap_or(0))
}

/// A lease TTL for `d`: whole seconds, rounded up, at least 1. etcd raises it to its minimum.
pub(crate) fn ttl_secs(d: Duration) -> i64 {
    let whole = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    i64::try_from(whole.max(1)).unwrap_or(i64::MAX)
}

fn chrono_duration(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}
