//! [`RedisLockProvider`]: the lock contract, fire claims and the admin surface on Redis.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use redis::{Script, Value};
use shedlock_core::{
    Error, Result,
    admin::{LockAdmin, LockEntry},
    provider::{
        Fire, FireClaim, LockProvider, LockRecord, validate_at_least, validate_at_most,
        validate_name,
    },
};

use crate::builder::{RedisLockProviderBuilder, Settings};
use crate::connection::{Connection, Resend};
use crate::key::{lock_key, name_of, scan_pattern};
use crate::script;

/// How many keys one `SCAN` step of [`LockAdmin::list`] asks for.
const SCAN_COUNT: usize = 500;

/// A [`LockProvider`] (and [`LockAdmin`]) on Redis: one hash per lock, decided by one Lua script
/// per operation with the server's clock (`TIME`). See the [crate docs](crate) for the
/// guarantees and what a Redis without persistence, or a failover, means for them.
///
/// ```no_run
/// # async fn example() -> shedlock_core::Result<()> {
/// use std::time::Duration;
/// use shedlock_core::provider::LockProvider;
/// use shedlock_redis::RedisLockProvider;
///
/// let provider = RedisLockProvider::connect("redis://127.0.0.1:6379").await?;
/// if let Some(record) = provider.acquire("report", Duration::from_secs(60), "me").await? {
///     // ... the work, passing record.fencing_token() along with its writes ...
///     provider.release(&record, Duration::ZERO).await?;
/// }
/// # Ok(()) }
/// ```
pub struct RedisLockProvider {
    connection: Connection,
    settings: Settings,
}

impl RedisLockProvider {
    pub(crate) fn new(connection: Connection, settings: Settings) -> Self {
        Self {
            connection,
            settings,
        }
    }

    /// A builder for the server at `server` (`redis://[user:password@]host[:port][/db]`,
    /// `rediss://…` needs a TLS feature of the `redis` crate, `unix:///path`, or a
    /// [`redis::ConnectionInfo`]).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> shedlock_core::Result<()> {
    /// let provider = shedlock_redis::RedisLockProvider::builder("redis://127.0.0.1:6379")
    ///     .key_prefix("myapp:locks:")
    ///     .build()?; // no I/O yet
    /// # Ok(()) }
    /// ```
    pub fn builder(server: impl redis::IntoConnectionInfo) -> RedisLockProviderBuilder {
        RedisLockProviderBuilder::new(server)
    }

    /// Connects to `server` with the default settings (key prefix `shedlock:`, names up to 64
    /// characters, 5 s per call); see [`RedisLockProviderBuilder::connect`].
    ///
    /// # Errors
    ///
    /// A malformed address ([`Error::is_invalid_config`]), or a server that cannot be reached
    /// within 5 s ([`Error::is_backend`], [`Error::is_timeout`]).
    pub async fn connect(server: impl redis::IntoConnectionInfo) -> Result<Self> {
        Self::builder(server).connect().await
    }

    /// The key prefix of this provider's lock keys.
    #[must_use]
    pub fn key_prefix(&self) -> &str {
        &self.settings.key_prefix
    }

    /// The Redis key of lock `name` (the prefix followed by the name's UTF-8 bytes), for
    /// operators: `redis-cli HGETALL` shows the record.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> shedlock_core::Result<()> {
    /// let provider = shedlock_redis::RedisLockProvider::builder("redis://127.0.0.1").build()?;
    /// assert_eq!(provider.key("report"), b"shedlock:report");
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn key(&self, name: &str) -> Vec<u8> {
        lock_key(&self.settings.key_prefix, name)
    }

    /// `PING`, then the eviction check of [`RedisLockProviderBuilder::connect`].
    pub(crate) async fn check_server(&self) -> Result<()> {
        let server = self.connection.server().to_owned();
        let what = || "connect".to_owned();
        self.connection
            .run("connect", Resend::AfterDrop, &what, |mut conn| async move {
                redis::cmd("PING").query_async::<()>(&mut conn).await
            })
            .await?;
        let policy = self
            .connection
            .run("connect", Resend::AfterDrop, &what, |mut conn| async move {
                redis::cmd("CONFIG")
                    .arg("GET")
                    .arg("maxmemory-policy")
                    .query_async::<Vec<String>>(&mut conn)
                    .await
            })
            .await;
        match policy.as_deref() {
            Ok([_, policy]) if policy.starts_with("allkeys-") => tracing::warn!(
                server,
                policy = policy.as_str(),
                "this Redis may evict any key when it runs out of memory (maxmemory-policy \
                 {policy}): an evicted lock key frees a held lock and forgets the job's \
                 recorded fire; use noeviction or a volatile-* policy (lock keys have no TTL, \
                 so volatile-* policies never evict them)"
            ),
            Ok(_) => {}
            Err(error) => tracing::debug!(
                server,
                %error,
                "could not read maxmemory-policy (CONFIG GET refused?); not checking eviction"
            ),
        }
        Ok(())
    }

    fn check_name(&self, name: &str) -> Result<()> {
        validate_name(name, self.settings.max_name_len)
    }

    /// Runs `script` on `name`'s key with `name` and `args` as `ARGV`: one `EVALSHA` (plus a
    /// `SCRIPT LOAD` and a second `EVALSHA` when the server does not know the script yet).
    /// `resend` says whether it runs again after a dropped connection.
    async fn eval(
        &self,
        op: &'static str,
        resend: Resend,
        script: &Script,
        name: &str,
        args: &[Vec<u8>],
    ) -> Result<Value> {
        let key = self.key(name);
        let what = || format!("{op} lock {name:?}");
        self.connection
            .run(op, resend, &what, |mut conn| {
                let mut invocation = script.key(key.as_slice());
                invocation.arg(name);
                for arg in args {
                    invocation.arg(arg.as_slice());
                }
                async move { invocation.invoke_async::<Value>(&mut conn).await }
            })
            .await
    }

    fn token_of(record: &LockRecord) -> Result<i64> {
        record.fencing_token().ok_or_else(|| {
            Error::invalid_config(format!(
                "the record of {:?} has no fencing token; it was not acquired through a Redis \
                 lock provider",
                record.name()
            ))
        })
    }

    /// Runs `script` (extend or release) for `record`'s acquisition: `ARGV = name, owner,
    /// token, duration µs`.
    async fn on_record(
        &self,
        op: &'static str,
        script: &Script,
        record: &LockRecord,
        duration: Duration,
    ) -> Result<Value> {
        let name = record.name();
        self.check_name(name)?;
        let token = Self::token_of(record)?;
        let args = [
            record.owner().as_bytes().to_vec(),
            num(token),
            num(micros_ceil(duration)),
        ];
        self.eval(op, Resend::AfterDrop, script, name, &args).await
    }

    /// The record of `name` as the read script returns it, with the server's now.
    async fn read(&self, op: &'static str, name: &str) -> Result<Read> {
        self.check_name(name)?;
        let reply = self
            .eval(op, Resend::AfterDrop, &script::READ, name, &[])
            .await?;
        let items = Reply::new(op, name, reply)?;
        let now = items.time(0)?;
        if items.len() == 1 {
            return Ok(Read { now, entry: None });
        }
        let entry = items.entry(name, 0)?;
        Ok(Read {
            now,
            entry: Some(entry),
        })
    }
}

/// What the read script found.
struct Read {
    now: DateTime<Utc>,
    entry: Option<LockEntry>,
}

#[async_trait]
impl LockProvider for RedisLockProvider {
    /// One `EVALSHA`. Not repeated after a dropped connection: redis-rs cannot tell a request
    /// that never left from one whose reply was lost after the script ran, and a repeat of one
    /// that ran would find the lock held by this very call and answer `Ok(None)`. The call
    /// fails instead, with an error saying the reply was lost: the lock may then be held by this
    /// owner until `at_most`. A refused reconnection (nothing sent) is retried.
    async fn acquire(
        &self,
        name: &str,
        at_most: Duration,
        owner: &str,
    ) -> Result<Option<LockRecord>> {
        self.check_name(name)?;
        validate_at_most(at_most)?;
        check_owner(owner)?;
        let reply = self
            .eval(
                "acquire",
                Resend::OnlyIfRefused,
                &script::ACQUIRE,
                name,
                &[num(micros_ceil(at_most)), owner.as_bytes().to_vec()],
            )
            .await?;
        if reply == Value::Nil {
            return Ok(None);
        }
        let items = Reply::new("acquire", name, reply)?;
        Ok(Some(
            LockRecord::new(name, owner, items.time(0)?, items.time(1)?)
                .with_fencing_token(Some(items.int(2)?)),
        ))
    }

    async fn extend(&self, record: &LockRecord, at_most: Duration) -> Result<Option<LockRecord>> {
        validate_at_most(at_most)?;
        match self
            .on_record("extend", &script::EXTEND, record, at_most)
            .await?
        {
            Value::Nil => Ok(None),
            Value::Int(until) => Ok(Some(record.clone().with_lock_until(time(until)?))),
            other => Err(unexpected("extend", record.name(), &other)),
        }
    }

    async fn release(&self, record: &LockRecord, at_least: Duration) -> Result<bool> {
        validate_at_least(at_least)?;
        match self
            .on_record("release", &script::RELEASE, record, at_least)
            .await?
        {
            Value::Int(done) => Ok(done == 1),
            other => Err(unexpected("release", record.name(), &other)),
        }
    }

    /// One `EVALSHA`, read-only.
    async fn holder(&self, name: &str) -> Result<Option<LockRecord>> {
        let read = self.read("holder", name).await?;
        Ok(read
            .entry
            .filter(|entry| entry.record().lock_until() > read.now)
            .map(|entry| entry.record().clone()))
    }

    /// One `EVALSHA`: decides with the server's `TIME` in `FireClaim`'s order and writes only
    /// when it claims; a claim that did not win carries the record as the script read it
    /// (`holder`). The recorded fire lives in the lock's hash (`last_fire`), which no release,
    /// expiry or unlock removes. Not repeated after a dropped connection (see `acquire`).
    async fn claim_fire(
        &self,
        name: &str,
        fire: &Fire,
        at_most: Duration,
        owner: &str,
    ) -> Result<FireClaim> {
        self.check_name(name)?;
        validate_at_most(at_most)?;
        check_owner(owner)?;
        let reply = self
            .eval(
                "claim_fire",
                Resend::OnlyIfRefused,
                &script::CLAIM_FIRE,
                name,
                &[
                    num(fire.at().timestamp_micros()),
                    num(fire.next().timestamp_micros()),
                    num(micros_ceil(at_most)),
                    owner.as_bytes().to_vec(),
                ],
            )
            .await?;
        let items = Reply::new("claim_fire", name, reply)?;
        let now = items.time(1)?;
        Ok(match items.int(0)? {
            0 => FireClaim::Claimed(
                LockRecord::new(name, owner, now, items.time(2)?)
                    .with_fencing_token(Some(items.int(3)?)),
            ),
            1 => FireClaim::TooEarly { now },
            2 => FireClaim::WindowPassed { now },
            3 => FireClaim::ClaimedElsewhere {
                now,
                recorded: items.time(6)?,
                holder: items.holder(name)?,
            },
            4 => FireClaim::Held {
                now,
                holder: items.holder(name)?,
            },
            _ => return Err(items.unexpected()),
        })
    }

    /// As configured with [`RedisLockProviderBuilder::max_name_len`] (64 by default).
    fn max_name_len(&self) -> usize {
        self.settings.max_name_len
    }
}

#[async_trait]
impl LockAdmin for RedisLockProvider {
    /// `SCAN`s the key prefix (hashes only, glob characters of the prefix escaped) and reads
    /// each lock with the server's `TIME` (one pipelined round trip per `SCAN` step); each round
    /// trip has the call timeout. Keys under the prefix that do not hold a lock record of their
    /// own name (another program's hash, a provider with an overlapping prefix) are left out.
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

    /// One `EVALSHA`: frees iff the record still has `expected`'s owner, `locked_at` and token,
    /// and is held by the server's clock; sets `lock_until` to now, nothing else.
    async fn unlock(&self, expected: &LockRecord) -> Result<bool> {
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
    async fn force_unlock(&self, name: &str) -> Result<Option<LockEntry>> {
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

    /// Redis has no table to create: a lock's hash is created by its first acquire. Returns
    /// `Ok(())` without touching the server.
    async fn create_table(&self) -> Result<()> {
        Ok(())
    }
}

impl fmt::Debug for RedisLockProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisLockProvider")
            .field("server", &self.connection.server())
            .field("key_prefix", &self.settings.key_prefix)
            .field("max_name_len", &self.settings.max_name_len)
            .field("call_timeout", &self.settings.call_timeout)
            .finish_non_exhaustive()
    }
}

fn check_owner(owner: &str) -> Result<()> {
    if owner.is_empty() {
        return Err(Error::invalid_config("the owner id is empty"));
    }
    Ok(())
}

/// `d` in whole microseconds, rounded up (a lock is never shorter than asked).
fn micros_ceil(d: Duration) -> i64 {
    i64::try_from(d.as_nanos().div_ceil(1_000)).unwrap_or(i64::MAX)
}

/// An integer argument, as decimal text.
fn num(n: i64) -> Vec<u8> {
    n.to_string().into_bytes()
}

fn time(micros: i64) -> Result<DateTime<Utc>> {
    DateTime::from_timestamp_micros(micros)
        .ok_or_else(|| Error::backend_message(format!("read an out-of-range time ({micros} µs)")))
}

fn unexpected(op: &str, name: &str, reply: &Value) -> Error {
    Error::backend_message(format!(
        "{op} lock {name:?}: the script's reply was not understood ({reply:?})"
    ))
}

/// A script's array reply, read field by field.
struct Reply<'a> {
    op: &'static str,
    name: &'a str,
    items: Vec<Value>,
}

impl<'a> Reply<'a> {
    fn new(op: &'static str, name: &'a str, reply: Value) -> Result<Self> {
        match reply {
            Value::Array(items) if !items.is_empty() => Ok(Self { op, name, items }),
            other => Err(unexpected(op, name, &other)),
        }
    }

    fn len(&self) -> usize {
        self.items.len()
    }

    fn unexpected(&self) -> Error {
        unexpected(self.op, self.name, &Value::Array(self.items.clone()))
    }

    fn int(&self, i: usize) -> Result<i64> {
        match self.items.get(i) {
            Some(Value::Int(n)) => Ok(*n),
            _ => Err(self.unexpected()),
        }
    }

    fn opt_int(&self, i: usize) -> Result<Option<i64>> {
        match self.items.get(i) {
            Some(Value::Nil) | None => Ok(None),
            Some(Value::Int(n)) => Ok(Some(*n)),
            _ => Err(self.unexpected()),
        }
    }

    fn time(&self, i: usize) -> Result<DateTime<Utc>> {
        time(self.int(i)?)
    }

    fn text(&self, i: usize) -> Result<String> {
        match self.items.get(i) {
            Some(Value::BulkString(bytes)) => {
                String::from_utf8(bytes.clone()).map_err(|_| self.unexpected())
            }
            Some(Value::SimpleString(s)) => Ok(s.clone()),
            _ => Err(self.unexpected()),
        }
    }

    /// The record in a fire claim's reply that did not claim: `{case, now, lock_until,
    /// locked_at, locked_by, token, …}`.
    fn holder(&self, name: &str) -> Result<LockRecord> {
        Ok(
            LockRecord::new(name, self.text(4)?, self.time(3)?, self.time(2)?)
                .with_fencing_token(Some(self.int(5)?)),
        )
    }

    /// `{now, [skip…], lock_until, locked_at, locked_by, token, last_fire}` with `skip` extra
    /// items after `now`.
    fn entry(&self, name: &str, skip: usize) -> Result<LockEntry> {
        let at = |i: usize| 1 + skip + i;
        let record = LockRecord::new(
            name,
            self.text(at(2))?,
            self.time(at(1))?,
            self.time(at(0))?,
        )
        .with_fencing_token(Some(self.int(at(3))?));
        let last_fire = self.opt_int(at(4))?.map(time).transpose()?;
        Ok(LockEntry::new(record, self.time(0)?, last_fire))
    }
}
