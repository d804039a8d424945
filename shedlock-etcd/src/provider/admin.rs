//! The provider's [`LockAdmin`] operations.
//!
//! They list the locks, read one, and unlock or force-unlock one. They pause and resume a job's
//! fires. They also list and forget published job definitions.

use async_trait::async_trait;
use shedlock_core::{
    Result,
    admin::{ActionKind, LockAdmin, LockEntry},
    jobs::{Definition, DefinitionEntry},
    pause::{Pause, PauseFor, validate_actor, validate_reason},
    provider::LockRecord,
    trigger::TriggerAnswer,
};

use super::record::{
    ActionValue, DefinitionValue, PauseValue, RecValue, decode_value, encode_value,
};
use super::{EtcdLockProvider, Read, from_millis, micros_ceil, now};
use crate::gateway::Txn;
use crate::key::{self, ACTION, FIRE, HOLD, PAUSE, REC, TRIGGER};

#[async_trait]
impl LockAdmin for EtcdLockProvider {
    /// One range read over the prefix.
    ///
    /// Times are the writers' clock estimates, because etcd has no wall clock. Whether a lock is
    /// held is etcd's own answer. Each entry carries its recorded fire, its job state, a default
    /// one when no run was recorded, its pause, its last action and its last trigger.
    async fn list(&self) -> Result<Vec<LockEntry>> {
        let deadline = self.deadline();
        let prefix = self.prefix.as_bytes();
        let answer = self
            .gateway
            .range(prefix, Some(&key::prefix_end(prefix)), deadline)
            .await
            .map_err(|e| self.failed("list", "*", e))?;
        let store_now = now();
        let mut reads = std::collections::BTreeMap::<String, Read>::new();
        for kv in answer.kvs {
            let Some((name, which)) = key::parse_key(&self.prefix, &kv.key.0) else {
                continue; // not a key this provider writes
            };
            let read = reads.entry(name).or_default();
            if which == REC {
                if let Ok(value) = decode_value(&kv) {
                    read.rec = Some((kv, value));
                }
            } else if which == HOLD {
                if let Ok(value) = decode_value(&kv) {
                    read.hold = Some((kv, value));
                }
            } else if which == PAUSE {
                if let Ok(value) = decode_value(&kv) {
                    read.pause = Some((kv, value));
                }
            } else if which == FIRE {
                read.fire = decode_value(&kv).ok().map(|value| (kv, value));
            } else if which == ACTION {
                read.action = decode_value(&kv).ok();
            } else if which == TRIGGER {
                read.take_trigger(&kv);
            } else {
                read.state.take(which, &kv);
            }
        }
        Ok(reads
            .into_iter()
            .filter_map(|(name, read)| Self::entry_of(name, read, store_now))
            .collect())
    }

    /// One range read of the lock's keys, with its recorded fire, job state, pause, last action and
    /// last trigger.
    async fn entry(&self, name: &str) -> Result<Option<LockEntry>> {
        let keys = self.lock_keys(name)?;
        let read = self
            .read(&keys, self.deadline())
            .await
            .map_err(|e| self.failed("read", name, e))?;
        Ok(Self::entry_of(name.to_owned(), read, now()))
    }

    /// A read, then one transaction.
    ///
    /// The read's owner and `locked_at` must match `expected`. The transaction is `if the record is
    /// still that acquisition's and the hold present then delete the hold, put the last action`.
    async fn unlock(&self, expected: &LockRecord, actor: &str) -> Result<bool> {
        validate_actor(actor)?;
        let name = expected.name();
        let keys = self.lock_keys(name)?;
        let token = Self::token(expected, "unlock")?;
        let deadline = self.deadline();
        let run = async {
            let read = self.read(&keys, deadline).await?;
            let matches = read.hold.is_some()
                && read.rec.as_ref().is_some_and(|(kv, rec)| {
                    kv.mod_revision.0 == token
                        && rec.owner == expected.owner()
                        && rec.locked_at_ms == expected.locked_at().timestamp_millis()
                });
            if !matches {
                return Ok(false);
            }
            let txn = Txn::default()
                .mod_is(&keys.rec, token)
                .present(&keys.hold)
                .then_get(&keys.rec)
                .then_delete(&keys.hold)
                .then_set(&keys.action, &unlocked(actor), None);
            let answer = self.gateway.txn(&txn, deadline).await?;
            if answer.succeeded {
                self.revoke_previous(&answer, None, deadline).await;
            }
            Ok(answer.succeeded)
        };
        run.await.map_err(|e| self.failed("unlock", name, e))
    }

    /// A read, then one transaction that deletes the hold, and puts the last action, if neither
    /// key changed since. It is repeated while the lock keeps changing under it, at most five
    /// times.
    async fn force_unlock(&self, name: &str, actor: &str) -> Result<Option<LockEntry>> {
        validate_actor(actor)?;
        let keys = self.lock_keys(name)?;
        let deadline = self.deadline();
        let run = async {
            for _ in 0..5 {
                let read = self.read(&keys, deadline).await?;
                let Some((hold_kv, _)) = &read.hold else {
                    return Ok(None);
                };
                // 0: the record is missing (deleted by hand), and must stay so.
                let rec_revision = read.rec.as_ref().map_or(0, |(kv, _)| kv.mod_revision.0);
                let txn = Txn::default()
                    .mod_is(&keys.hold, hold_kv.mod_revision.0)
                    .mod_is(&keys.rec, rec_revision)
                    .then_get(&keys.rec)
                    .then_delete(&keys.hold)
                    .then_set(&keys.action, &unlocked(actor), None);
                let answer = self.gateway.txn(&txn, deadline).await?;
                if answer.succeeded {
                    self.revoke_previous(&answer, None, deadline).await;
                    return Ok(Self::entry_of(name.to_owned(), read, now()));
                }
            }
            Ok(None)
        };
        run.await.map_err(|e| self.failed("force_unlock", name, e))
    }

    /// The definitions replicas published that their leases still hold, in one range read.
    ///
    /// They are sorted by job, then replica. `published` and `expires` are the publishing replica's
    /// clock estimates. The entry ends with its lease, on the etcd leader's clock.
    async fn definitions(&self) -> Result<Vec<DefinitionEntry>> {
        let start = key::definitions_prefix(&self.prefix);
        let answer = self
            .gateway
            .range(&start, Some(&key::prefix_end(&start)), self.deadline())
            .await
            .map_err(|e| self.failed_at("definitions", "list the job definitions", e))?;
        let mut entries: Vec<DefinitionEntry> = answer
            .kvs
            .iter()
            .filter_map(|kv| decode_value::<DefinitionValue>(kv).ok())
            .map(|v| {
                DefinitionEntry::new(
                    Definition::new(v.job, v.lock_name, v.spec),
                    v.replica,
                    v.version,
                    from_millis(v.published_ms),
                    from_millis(v.expires_ms),
                )
            })
            .collect();
        entries
            .sort_by(|a, b| (&a.definition.job, &a.replica).cmp(&(&b.definition.job, &b.replica)));
        Ok(entries)
    }

    /// One delete of the range of `job`'s definition keys, those of every replica.
    ///
    /// The count is etcd's. A delete whose reply was lost is sent again to another member. It then
    /// counts only what was left.
    async fn forget(&self, job: &str) -> Result<u64> {
        let start = key::job_definitions_prefix(&self.prefix, job);
        let deleted = self
            .gateway
            .delete_range(&start, &key::prefix_end(&start), self.deadline())
            .await
            .map_err(|e| {
                self.failed_at(
                    "forget",
                    &format!("forget the definitions of job {job:?}"),
                    e,
                )
            })?;
        Ok(u64::try_from(deleted).unwrap_or(0))
    }

    /// etcd has no schema: `None`.
    fn ddl(&self) -> Option<String> {
        None
    }

    /// Nothing to create: a lock's keys are written by its first acquire. Always `Ok(())`.
    async fn create_table(&self) -> Result<()> {
        Ok(())
    }

    /// One transaction: `put pause, put last action`, and, nested, `if record absent then put a
    /// free record`. The pause and its end are on this client's clock, the end rounded up to whole
    /// microseconds (see [Pauses](crate#pauses)).
    async fn pause(
        &self,
        name: &str,
        how_long: PauseFor,
        reason: Option<&str>,
        actor: &str,
    ) -> Result<Pause> {
        let keys = self.lock_keys(name)?;
        validate_actor(actor)?;
        if let Some(reason) = reason {
            validate_reason(reason)?;
        }
        let since = now();
        let until = how_long.until(since)?.map(micros_ceil);
        let pause = Pause::new(since, until, actor, reason);
        // A job paused before its first run gets a free record, which its first acquire replaces.
        let free = Txn::default().absent(&keys.rec).then_set(
            &keys.rec,
            &encode_value(&RecValue::never_held(since)),
            None,
        );
        let txn = Txn::default()
            .then_set(&keys.pause, &encode_value(&PauseValue::of(&pause)), None)
            .then_set(
                &keys.action,
                &encode_value(&ActionValue::new(ActionKind::Paused, actor, since)),
                None,
            )
            .then_txn(&free);
        // Safe to send again: a repeat writes the same values.
        self.gateway
            .txn(&txn, self.deadline())
            .await
            .map_err(|e| self.failed("pause", name, e))?;
        Ok(pause)
    }

    /// One transaction: `if pause present then delete pause, put last action`. It answers the pause
    /// it deleted, and writes nothing when there is none. Sent once: a repeat would find no pause
    /// and answer `None` for its own effect.
    async fn resume(&self, name: &str, actor: &str) -> Result<Option<Pause>> {
        let keys = self.lock_keys(name)?;
        validate_actor(actor)?;
        let txn = Txn::default()
            .present(&keys.pause)
            .then_delete(&keys.pause)
            .then_set(
                &keys.action,
                &encode_value(&ActionValue::new(ActionKind::Resumed, actor, now())),
                None,
            );
        let answer = self
            .gateway
            .txn_once(&txn, self.deadline())
            .await
            .map_err(|e| self.failed("resume", name, e))?;
        if !answer.succeeded {
            return Ok(None);
        }
        // A pause value that cannot be read (not this provider's) is removed all the same.
        Ok(answer
            .previous()
            .and_then(|kv| decode_value::<PauseValue>(kv).ok())
            .map(PauseValue::into_pause))
    }

    /// One range read of the lock's keys, deciding on this client's clock. Refused with nothing
    /// written while the lock is held, the job paused or a trigger pending. Else a lease grant of
    /// `expires_in` and one transaction: `if the hold is absent and the pause and trigger keys are
    /// as read then put the trigger, its pending copy on the lease, the last action`, and, nested,
    /// `if record absent then put a free record`. Sent once. See [Run now](crate#run-now).
    async fn trigger(
        &self,
        name: &str,
        actor: &str,
        expires_in: std::time::Duration,
    ) -> Result<TriggerAnswer> {
        self.do_trigger(name, actor, expires_in).await
    }
}

/// The last action's value of an unlock by `actor`, now.
fn unlocked(actor: &str) -> Vec<u8> {
    encode_value(&ActionValue::new(ActionKind::Unlocked, actor, now()))
}
