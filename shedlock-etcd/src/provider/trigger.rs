//! "Run now" on etcd (see [Run now](crate#run-now)): an operator's trigger, the pending triggers in
//! one range read, and a replica's claim of one.

use std::time::Duration;

use chrono::{DateTime, Utc};
use shedlock_core::{
    Error, Result,
    admin::{ActionKind, LockEntry},
    pause::{Pause, validate_actor},
    provider::{LockRecord, PendingTrigger, TriggerClaim, TriggerWake, validate_at_most},
    trigger::{Trigger, TriggerAnswer, TriggerWaker},
};
use tokio::time::Instant;

use super::record::{ActionValue, RecValue, TriggerValue, decode_value, encode_value};
use super::{EtcdLockProvider, Taking, chrono_duration, micros_ceil, now, ttl_secs};
use crate::gateway::{GatewayError, Txn, Watch};
use crate::key::{self, LockKeys};

/// How often a trigger, or its claim, looks again when the lock's keys changed between its read
/// and its transaction.
const LOOKS: usize = 4;

/// How often a watch looks whether its scheduler is gone, when no trigger came.
const WATCH_CHECK: Duration = Duration::from_secs(10);

/// How long a watch lasts before it ends by itself, and its scheduler reads the pending triggers
/// and watches again. It bounds how long a watch on a connection that died silently, a member
/// gone without a word, goes unnoticed.
const WATCH_MAX_AGE: Duration = Duration::from_mins(5);

/// What one look-and-write came to.
enum Look<T> {
    /// The answer.
    Answer(T),
    /// The keys changed between the look and the transaction: look again.
    Changed,
}

/// What one range read of a lock's keys showed a decision, whether or not the lock has a record.
struct Seen {
    /// The pause key's `mod_revision` as read, 0 when absent: the transaction compares it.
    pause_revision: i64,
    /// The trigger key's, likewise.
    trigger_revision: i64,
    /// The pause, also one whose end has passed.
    pause: Option<Pause>,
    /// The last trigger.
    trigger: Option<Trigger>,
    /// Who holds the lock, while its hold exists.
    holder: Option<LockRecord>,
    /// This client's clock after the read: the decision's now.
    now: DateTime<Utc>,
}

impl Seen {
    /// The pause, if it holds now.
    fn paused(&self) -> Option<&Pause> {
        self.pause.as_ref().filter(|pause| pause.holds_at(self.now))
    }

    /// The last trigger, if it is pending now.
    fn pending(&self) -> Option<&Trigger> {
        self.trigger.as_ref().filter(|t| t.is_pending(self.now))
    }
}

impl EtcdLockProvider {
    /// [`LockAdmin::trigger`](shedlock_core::admin::LockAdmin::trigger).
    pub(super) async fn do_trigger(
        &self,
        name: &str,
        actor: &str,
        expires_in: Duration,
    ) -> Result<TriggerAnswer> {
        let keys = self.lock_keys(name)?;
        validate_actor(actor)?;
        validate_at_most(expires_in)?;
        let deadline = self.deadline();
        for _ in 0..LOOKS {
            match self
                .look_and_trigger(name, &keys, actor, expires_in, deadline)
                .await
                .map_err(|e| self.failed("trigger", name, e))?
            {
                Look::Answer(answer) => return Ok(answer),
                Look::Changed => {
                    tracing::debug!(name, "the lock changed during a trigger; looking again");
                }
            }
        }
        Err(Error::backend_message(format!(
            "trigger lock {name:?} on etcd: the keys changed under each of {LOOKS} attempts"
        )))
    }

    /// One look at the lock's keys and, when nothing refuses the trigger, a lease to its expiry and
    /// one transaction that writes it if none of what the look saw changed.
    async fn look_and_trigger(
        &self,
        name: &str,
        keys: &LockKeys,
        actor: &str,
        expires_in: Duration,
        deadline: Instant,
    ) -> Result<Look<TriggerAnswer>, GatewayError> {
        let seen = self.look(name, keys, deadline).await?;
        if let Some(pause) = seen.paused() {
            return Ok(Look::Answer(TriggerAnswer::Paused(pause.clone())));
        }
        if let Some(holder) = &seen.holder {
            return Ok(Look::Answer(TriggerAnswer::Held(holder.clone())));
        }
        if let Some(pending) = seen.pending() {
            return Ok(Look::Answer(TriggerAnswer::Pending(pending.clone())));
        }
        self.write_trigger(keys, actor, expires_in, &seen, deadline)
            .await
    }

    /// The trigger's lease and transaction.
    async fn write_trigger(
        &self,
        keys: &LockKeys,
        actor: &str,
        expires_in: Duration,
        seen: &Seen,
        deadline: Instant,
    ) -> Result<Look<TriggerAnswer>, GatewayError> {
        let requested_at = now();
        // The pending copy's lease starts after `requested_at` and lasts at least `expires_in`
        // (whole seconds rounded up, at least etcd's minimum): it ends an expired copy, never a
        // pending one.
        let lease = self.gateway.grant(ttl_secs(expires_in), deadline).await?;
        let trigger = Trigger {
            id: Trigger::new_id(),
            requested_at,
            expires: micros_ceil(requested_at + chrono_duration(expires_in)),
            by: actor.to_owned(),
            taken_by: None,
            taken_at: None,
        };
        let value = encode_value(&TriggerValue::of(&trigger));
        // A job triggered before its first run gets a free record, which its first acquire
        // replaces, as a pause's does.
        let free = Txn::default().absent(&keys.rec).then_set(
            &keys.rec,
            &encode_value(&RecValue::never_held(requested_at)),
            None,
        );
        let txn = Txn::default()
            .absent(&keys.hold)
            .mod_is(&keys.pause, seen.pause_revision)
            .mod_is(&keys.trigger, seen.trigger_revision)
            .then_set(&keys.trigger, &value, None)
            .then_set(&keys.pending, &value, Some(lease.id))
            .then_set(
                &keys.action,
                &encode_value(&ActionValue::new(
                    ActionKind::Triggered,
                    actor,
                    requested_at,
                )),
                None,
            )
            .then_txn(&free);
        // Sent once: a repeat of an applied copy would find its own trigger pending. On error the
        // lease is kept, as the copy may hold it; it runs out by itself.
        let answer = self.gateway.txn_once(&txn, deadline).await?;
        if !answer.succeeded {
            self.cleanup(lease.id, deadline).await;
            return Ok(Look::Changed);
        }
        Ok(Look::Answer(TriggerAnswer::Requested(trigger)))
    }

    /// One range read of the lock's keys, and what it shows a decision. A pause that cannot be
    /// read fails it, as it fails a fire claim: a pause is never ignored.
    async fn look(
        &self,
        name: &str,
        keys: &LockKeys,
        deadline: Instant,
    ) -> Result<Seen, GatewayError> {
        let mut read = self.read(keys, deadline).await?;
        if let Some(error) = read.pause_unreadable.take() {
            return Err(error);
        }
        let now = now();
        let pause_revision = read.pause.as_ref().map_or(0, |(kv, _)| kv.mod_revision.0);
        let trigger_revision = read.trigger_revision;
        // Taken from the read, not the entry, which a lock without a record (deleted by hand)
        // lacks.
        let pause = read.pause.as_ref().map(|(_, p)| p.clone().into_pause());
        let trigger = read.trigger.clone();
        // The entry exists whenever the hold does, and then shows who holds the lock.
        let entry = Self::entry_of(name.to_owned(), read, now);
        Ok(Seen {
            pause_revision,
            trigger_revision,
            pause,
            trigger,
            holder: entry
                .filter(LockEntry::is_held)
                .map(|entry| entry.record().clone()),
            now,
        })
    }

    /// [`LockProvider::pending_triggers`](shedlock_core::provider::LockProvider::pending_triggers):
    /// one range read of the pending copies, those not expired by this client's clock, sorted by
    /// lock name. A value that cannot be read is left out.
    pub(super) async fn do_pending_triggers(&self) -> Result<Vec<PendingTrigger>> {
        let start = key::triggers_prefix(&self.prefix);
        let answer = self
            .gateway
            .range(&start, Some(&key::prefix_end(&start)), self.deadline())
            .await
            .map_err(|e| self.failed_at("pending_triggers", "read the pending triggers", e))?;
        let store_now = now();
        let mut pending: Vec<PendingTrigger> = answer
            .kvs
            .iter()
            .filter_map(|kv| {
                let lock_name = key::parse_pending_key(&self.prefix, &kv.key.0)?;
                let trigger = decode_value::<TriggerValue>(kv).ok()?.into_trigger();
                trigger.is_pending(store_now).then_some(PendingTrigger {
                    lock_name,
                    id: trigger.id,
                    requested_at: trigger.requested_at,
                    expires: trigger.expires,
                })
            })
            .collect();
        pending.sort_by(|a, b| a.lock_name.cmp(&b.lock_name));
        Ok(pending)
    }

    /// [`LockProvider::claim_trigger`](shedlock_core::provider::LockProvider::claim_trigger).
    pub(super) async fn do_claim_trigger(
        &self,
        name: &str,
        id: i64,
        at_most: Duration,
        owner: &str,
    ) -> Result<TriggerClaim> {
        let keys = self.lock_keys(name)?;
        validate_at_most(at_most)?;
        let deadline = self.deadline();
        for _ in 0..LOOKS {
            match self
                .look_and_claim_trigger(name, &keys, id, at_most, owner, deadline)
                .await
                .map_err(|e| self.failed("claim a trigger of", name, e))?
            {
                Look::Answer(answer) => return Ok(answer),
                Look::Changed => {
                    tracing::debug!(
                        name,
                        id,
                        "the lock changed during a trigger claim; looking again"
                    );
                }
            }
        }
        Err(Error::backend_message(format!(
            "claim a trigger of lock {name:?} on etcd: the keys changed under each of {LOOKS} \
             attempts"
        )))
    }

    /// One look at the lock's keys and, when trigger `id` is pending, the job not paused and the
    /// lock free, the acquisition's transaction, which also compares the trigger and pause keys
    /// as read, marks the trigger taken and deletes its pending copy. The fire key is not touched.
    async fn look_and_claim_trigger(
        &self,
        name: &str,
        keys: &LockKeys,
        id: i64,
        at_most: Duration,
        owner: &str,
        deadline: Instant,
    ) -> Result<Look<TriggerClaim>, GatewayError> {
        let seen = self.look(name, keys, deadline).await?;
        let now = seen.now;
        let Some(trigger) = seen.pending().filter(|t| t.id == id) else {
            return Ok(Look::Answer(TriggerClaim::Gone { now }));
        };
        if seen.paused().is_some() {
            return Ok(Look::Answer(TriggerClaim::Paused { now }));
        }
        if let Some(holder) = &seen.holder {
            return Ok(Look::Answer(TriggerClaim::Held {
                now,
                holder: holder.clone(),
            }));
        }
        let Taking {
            lease,
            locked_at,
            lock_until,
            txn,
        } = self.taking(keys, at_most, owner, deadline).await?;
        let taken = Trigger {
            taken_by: Some(owner.to_owned()),
            taken_at: Some(locked_at),
            ..trigger.clone()
        };
        let txn = txn
            .mod_is(&keys.trigger, seen.trigger_revision)
            .mod_is(&keys.pause, seen.pause_revision)
            .then_set(
                &keys.trigger,
                &encode_value(&TriggerValue::of(&taken)),
                None,
            )
            .then_remove(&keys.pending);
        // Sent once, and its lease kept on error, as a fire claim's: if it was applied, this
        // replica holds the lock and its scheduler recognises the claim and runs it.
        let answer = self.gateway.txn_once(&txn, deadline).await?;
        if !answer.succeeded {
            self.cleanup(lease, deadline).await;
            return Ok(Look::Changed);
        }
        Ok(Look::Answer(TriggerClaim::Claimed(
            LockRecord::new(name, owner, locked_at, lock_until)
                .with_fencing_token(Some(answer.header.revision.0)),
        )))
    }

    /// [`LockProvider::watch_triggers`](shedlock_core::provider::LockProvider::watch_triggers): an
    /// etcd watch of the puts under `{prefix}!trigger/`, created before it answers. A task reads
    /// its stream and wakes the scheduler at each put. It ends, and the scheduler then polls and
    /// watches again, when the stream ends, after [`WATCH_MAX_AGE`], or once the scheduler is
    /// gone.
    pub(super) async fn do_watch_triggers(&self) -> Result<TriggerWake> {
        let start = key::triggers_prefix(&self.prefix);
        let watch = self
            .gateway
            .watch(&start, &key::prefix_end(&start), self.deadline())
            .await
            .map_err(|e| self.failed_at("watch_triggers", "watch the pending triggers", e))?;
        let (waker, wake) = TriggerWake::channel();
        tokio::spawn(forward(watch, waker));
        Ok(wake)
    }
}

/// Wakes `waker` at each put `watch` reports, until the watch ends, [`WATCH_MAX_AGE`] passed, or
/// the scheduler is gone. Dropping the waker tells the scheduler that the push ended.
async fn forward(mut watch: Watch, waker: TriggerWaker) {
    let end = Instant::now() + WATCH_MAX_AGE;
    loop {
        let check = (Instant::now() + WATCH_CHECK).min(end);
        tokio::select! {
            put = watch.next_put() => {
                if put.is_none() || !waker.wake() {
                    return;
                }
            }
            () = tokio::time::sleep_until(check) => {
                if waker.is_closed() || Instant::now() >= end {
                    return;
                }
            }
        }
    }
}
