//! The admin surface of [`RedisLockProvider`]: listing, unlocking, pausing, and the job state an
//! operator reads (definitions, history, forget).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use redis::Value;
use serde::Deserialize;
use shedlock_core::{
    Error, Result,
    admin::{LockAdmin, LockEntry},
    jobs::{Definition, DefinitionEntry, RunEntry, RunOutcome},
    pause::{Pause, PauseFor, validate_actor, validate_reason},
    provider::{LockRecord, validate_name},
    trigger::TriggerAnswer,
};

use crate::connection::Resend;
use crate::key::{name_of, scan_pattern};
use crate::provider::{
    RedisLockProvider, Reply, definition_field, micros_ceil, num, time, unexpected,
};
use crate::script;

/// How many keys one `SCAN` step of [`LockAdmin::list`] asks for.
const SCAN_COUNT: usize = 500;

#[async_trait]
impl LockAdmin for RedisLockProvider {
    /// `SCAN`s the key prefix for hashes, with the prefix's glob characters escaped, and reads each
    /// lock with the server's `TIME`, one pipelined round trip with the call timeout per step. Keys
    /// that do not hold a lock record of their own name, another program's hash or a provider's
    /// with an overlapping prefix, are left out.
    async fn list(&self) -> Result<Vec<LockEntry>> {
        let prefix = &self.settings.key_prefix;
        let pattern = scan_pattern(prefix);
        let what = || format!("list the locks under the key prefix {prefix:?}");
        let mut entries = Vec::new();
        let mut cursor: u64 = 0;
        loop {
            let (next, keys) = self
                .connection
                .run("list", Resend::AfterDrop, &what, |mut conn| {
                    let mut cmd = redis::cmd("SCAN");
                    cmd.arg(cursor)
                        .arg("MATCH")
                        .arg(pattern.as_slice())
                        .arg("COUNT")
                        .arg(SCAN_COUNT)
                        .arg("TYPE")
                        .arg("hash");
                    async move { cmd.query_async::<(u64, Vec<Vec<u8>>)>(&mut conn).await }
                })
                .await?;
            let named: Vec<(&str, &[u8])> = keys
                .iter()
                .filter_map(|key| {
                    let name = name_of(prefix, key)?;
                    validate_name(name, self.settings.max_name_len)
                        .is_ok()
                        .then_some((name, key.as_slice()))
                })
                .collect();
            if !named.is_empty() {
                let replies = self
                    .connection
                    .run("list", Resend::AfterDrop, &what, |mut conn| {
                        let mut pipe = redis::pipe();
                        for (_, key) in &named {
                            pipe.cmd("EVAL").arg(script::LIST_READ).arg(1).arg(*key);
                        }
                        async move { pipe.query_async::<Vec<Value>>(&mut conn).await }
                    })
                    .await?;
                for ((name, _), reply) in named.iter().zip(replies) {
                    let items = Reply::new("list", name, reply)?;
                    // A key whose hash is not this name's lock record is not ours.
                    if items.len() > 1 && items.text(1).ok().as_deref() == Some(name) {
                        entries.push(items.entry(name, 1)?);
                    }
                }
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
        entries.sort_by(|a, b| a.record().name().cmp(b.record().name()));
        // SCAN may return a key more than once.
        entries.dedup_by(|a, b| a.record().name() == b.record().name());
        Ok(entries)
    }

    /// One `EVALSHA`, read-only.
    async fn entry(&self, name: &str) -> Result<Option<LockEntry>> {
        Ok(self.read("entry", name).await?.entry)
    }

    /// One `EVALSHA` that frees the lock by setting `lock_until` to now, only if it is held by the
    /// server's clock and the record still has `expected`'s owner, `locked_at` and token. The same
    /// `HSET` records `actor` as the last action (`unlocked`), by the server's clock.
    async fn unlock(&self, expected: &LockRecord, actor: &str) -> Result<bool> {
        validate_actor(actor)?;
        let name = expected.name();
        self.check_name(name)?;
        let token = Self::token_of(expected)?;
        let reply = self
            .eval(
                "unlock",
                Resend::AfterDrop,
                &script::UNLOCK,
                name,
                &[
                    expected.owner().as_bytes().to_vec(),
                    num(expected.locked_at().timestamp_micros()),
                    num(token),
                    actor.as_bytes().to_vec(),
                ],
            )
            .await?;
        match reply {
            Value::Int(done) => Ok(done == 1),
            other => Err(unexpected("unlock", name, &other)),
        }
    }

    /// One `EVALSHA`: frees `name` if held (`lock_until` = now), recording `actor` as the last
    /// action (`unlocked`), and returns the entry as it was.
    async fn force_unlock(&self, name: &str, actor: &str) -> Result<Option<LockEntry>> {
        validate_actor(actor)?;
        self.check_name(name)?;
        let reply = self
            .eval(
                "force_unlock",
                Resend::AfterDrop,
                &script::FORCE_UNLOCK,
                name,
                &[actor.as_bytes().to_vec()],
            )
            .await?;
        if reply == Value::Nil {
            return Ok(None);
        }
        Ok(Some(
            Reply::new("force_unlock", name, reply)?.entry(name, 0)?,
        ))
    }

    /// Redis has no schema: `None`.
    fn ddl(&self) -> Option<String> {
        None
    }

    /// Redis has no schema, so job state, history and definitions need nothing created: `Ok(None)`
    /// without touching the server.
    async fn missing_ddl(&self) -> Result<Option<String>> {
        Ok(None)
    }

    /// One `EVALSHA`, read-only: the entries of the definitions hash whose `expires` is after the
    /// server's now, sorted by job, then replica. An entry that is not such JSON is left out.
    async fn definitions(&self) -> Result<Vec<DefinitionEntry>> {
        let op = "definitions";
        let reply = self
            .on_definitions(op, &script::READ_DEFINITIONS, b"", &[])
            .await?;
        let items = Reply::new(op, "(definitions)", reply)?;
        let mut entries = Vec::with_capacity(items.len() - 1);
        for i in 1..items.len() {
            let text = items.text(i)?;
            match serde_json::from_str::<StoredDefinition>(&text) {
                Ok(stored) => entries.push(DefinitionEntry::new(
                    Definition::new(stored.job, stored.lock_name, stored.spec),
                    stored.replica,
                    stored.version,
                    time(stored.published)?,
                    time(stored.expires)?,
                )),
                Err(error) => {
                    tracing::debug!(
                        error = &error as &dyn std::error::Error,
                        text,
                        "not a published definition; left out"
                    );
                }
            }
        }
        entries
            .sort_by(|a, b| (&a.definition.job, &a.replica).cmp(&(&b.definition.job, &b.replica)));
        Ok(entries)
    }

    /// One `LRANGE` of the lock's [history list](RedisLockProvider::history_key), newest first,
    /// whether or not this provider writes history. An entry that is not a run's JSON is left out.
    async fn history(&self, lock_name: &str, limit: usize) -> Result<Vec<RunEntry>> {
        self.check_name(lock_name)?;
        if limit == 0 {
            return Ok(Vec::new());
        }
        let key = self.history_key(lock_name);
        let stop = isize::try_from(limit).unwrap_or(isize::MAX) - 1;
        let what = || format!("history of lock {lock_name:?}");
        let items = self
            .connection
            .run("history", Resend::AfterDrop, &what, |mut conn| {
                let mut cmd = redis::cmd("LRANGE");
                cmd.arg(key.as_slice()).arg(0).arg(stop);
                async move { cmd.query_async::<Vec<Vec<u8>>>(&mut conn).await }
            })
            .await?;
        let mut runs = Vec::with_capacity(items.len());
        for item in items {
            match serde_json::from_slice::<StoredRun>(&item) {
                Ok(stored) => {
                    let Some(outcome) =
                        RunOutcome::from_parts(&stored.outcome, stored.error.as_deref())
                    else {
                        continue;
                    };
                    runs.push(RunEntry::new(
                        lock_name,
                        time(stored.fire)?,
                        stored.runner,
                        time(stored.started)?,
                        time(stored.ended)?,
                        outcome,
                    ));
                }
                Err(error) => {
                    tracing::debug!(
                        lock = lock_name,
                        error = &error as &dyn std::error::Error,
                        "not a recorded run; left out"
                    );
                }
            }
        }
        Ok(runs)
    }

    /// One `EVALSHA` on the definitions hash: removes the entries of `job`, every replica's.
    async fn forget(&self, job: &str) -> Result<u64> {
        let prefix = definition_field(job, "");
        match self
            .on_definitions("forget", &script::FORGET, &prefix, &[])
            .await?
        {
            Value::Int(n) => Ok(u64::try_from(n).unwrap_or_default()),
            other => Err(unexpected("forget", "(definitions)", &other)),
        }
    }

    /// Redis has no table to create: a lock's hash is created by its first acquire. Returns
    /// `Ok(())` without touching the server.
    async fn create_table(&self) -> Result<()> {
        Ok(())
    }

    /// One `EVALSHA` that computes the end on the server's clock and, when it is after the
    /// server's now, sets `paused_at`, `paused_until`, `paused_by` and `paused_reason` in the
    /// lock's hash and records `actor` as the last action (`paused`). An end not after the
    /// server's now writes nothing and is refused. A missing record is created as a free lock, with
    /// token 0, so the next acquisition takes a fresh token as usual.
    async fn pause(
        &self,
        name: &str,
        how_long: PauseFor,
        reason: Option<&str>,
        actor: &str,
    ) -> Result<Pause> {
        self.check_name(name)?;
        validate_actor(actor)?;
        if let Some(reason) = reason {
            validate_reason(reason)?;
        }
        let (kind, amount): (&[u8], i64) = match how_long {
            PauseFor::UntilResumed => (b"none", 0),
            PauseFor::For(length) => {
                // Refuses a length of zero or above MAX_DURATION, whatever the now.
                how_long.until(DateTime::UNIX_EPOCH)?;
                (b"for", micros_ceil(length))
            }
            // Rounded up, so an end the script finds after its now is after it to the ns.
            PauseFor::Until(until) => (b"until", micros_ceil_at(until)),
        };
        let mut args = vec![actor.as_bytes().to_vec(), kind.to_vec(), num(amount)];
        if let Some(reason) = reason {
            args.push(reason.as_bytes().to_vec());
        }
        let op = "pause";
        let reply = self
            .eval(op, Resend::AfterDrop, &script::PAUSE, name, &args)
            .await?;
        let items = Reply::new(op, name, reply)?;
        let now = items.time(1)?;
        match items.int(0)? {
            1 => Ok(Pause::new(now, items.opt_time(2)?, actor, reason)),
            0 => Err(how_long.until(now).err().unwrap_or_else(|| {
                Error::invalid_config(format!(
                    "a pause must end in the future: the end is not after the store's now \
                     ({now}); nothing was paused"
                ))
            })),
            _ => Err(items.unexpected()),
        }
    }

    /// One `EVALSHA` that removes the pause fields of the lock's hash and records `actor` as the
    /// last action (`resumed`). Without a pause it writes nothing and answers `Ok(None)`. It is not
    /// sent again after a dropped connection, as the repeat would answer `Ok(None)` from its own
    /// effect: the call fails saying the reply was lost, and the pause may be gone.
    async fn resume(&self, name: &str, actor: &str) -> Result<Option<Pause>> {
        self.check_name(name)?;
        validate_actor(actor)?;
        let op = "resume";
        let reply = self
            .eval(
                op,
                Resend::OnlyIfRefused,
                &script::RESUME,
                name,
                &[actor.as_bytes().to_vec()],
            )
            .await?;
        Reply::new(op, name, reply)?.pause(1)
    }

    /// One `EVALSHA` on the lock's hash that decides with the server's `TIME`: refused, writing
    /// nothing, while a pause holds, then while the lock is held, then while another trigger is
    /// pending. Otherwise it writes the trigger fields and records `actor` as the last action
    /// (`triggered`), creating a missing record as a free lock. A second `EVALSHA`, on the
    /// [triggers index](RedisLockProvider::triggers_key), then adds the entry and publishes the
    /// lock's name on the triggers channel; an answer `Pending` writes that entry again, healing
    /// one that was lost. Both are sent again after a dropped connection: the first knows its own
    /// id and answers its own trigger rather than a pending one. See the crate README, "Run now".
    ///
    /// # Errors
    ///
    /// As the trait says, and [`Error::is_backend`] when the trigger is written but its index entry
    /// could not be: schedulers then miss it until `trigger` is asked again or it expires.
    async fn trigger(
        &self,
        name: &str,
        actor: &str,
        expires_in: std::time::Duration,
    ) -> Result<TriggerAnswer> {
        self.request_trigger(name, actor, expires_in).await
    }
}

/// `at` in whole µs since the Unix epoch, rounded up.
fn micros_ceil_at(at: DateTime<Utc>) -> i64 {
    let micros = at.timestamp_micros();
    if at.timestamp_subsec_nanos().is_multiple_of(1_000) {
        micros
    } else {
        micros.saturating_add(1)
    }
}

/// A published definition as the script writes it.
#[derive(Deserialize)]
struct StoredDefinition {
    job: String,
    lock_name: String,
    spec: String,
    replica: String,
    version: String,
    published: i64,
    expires: i64,
}

/// A history entry as the script writes it.
#[derive(Deserialize)]
struct StoredRun {
    fire: i64,
    runner: String,
    started: i64,
    ended: i64,
    outcome: String,
    error: Option<String>,
}
