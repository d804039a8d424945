//! The admin surface of [`RedisLockProvider`]: listing, unlocking, and the job state an
//! operator reads (definitions, history, forget).

use async_trait::async_trait;
use redis::Value;
use serde::Deserialize;
use shedlock_core::{
    Result,
    admin::{LockAdmin, LockEntry},
    jobs::{Definition, DefinitionEntry, RunEntry, RunOutcome},
    provider::{LockRecord, validate_name},
};

use crate::connection::Resend;
use crate::key::{name_of, scan_pattern};
use crate::provider::{RedisLockProvider, Reply, definition_field, num, time, unexpected};
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

    /// One `EVALSHA` that frees the lock by setting `lock_until` to now, and nothing else, only if
    /// it is held by the server's clock and the record still has `expected`'s owner, `locked_at`
    /// and token.
    async fn unlock(&self, expected: &LockRecord, actor: &str) -> Result<bool> {
        shedlock_core::pause::validate_actor(actor)?;
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
                ],
            )
            .await?;
        match reply {
            Value::Int(done) => Ok(done == 1),
            other => Err(unexpected("unlock", name, &other)),
        }
    }

    /// One `EVALSHA`: frees `name` if held (`lock_until` = now) and returns the entry as it was.
    async fn force_unlock(&self, name: &str, actor: &str) -> Result<Option<LockEntry>> {
        shedlock_core::pause::validate_actor(actor)?;
        self.check_name(name)?;
        let reply = self
            .eval(
                "force_unlock",
                Resend::AfterDrop,
                &script::FORCE_UNLOCK,
                name,
                &[],
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
                    tracing::debug!(%error, text, "not a published definition; left out");
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
                    tracing::debug!(lock = lock_name, %error, "not a recorded run; left out");
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
