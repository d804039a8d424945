//! [`RedisLockProvider`]: the lock contract, fire claims and job state on Redis (the admin
//! surface is in `admin.rs`).

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use redis::{Script, Value};
use shedlock_core::{
    Error, Result,
    admin::{ActionKind, AdminAction, LockEntry},
    jobs::{Definition, JobState, RunEntry, RunOutcome, RunReport},
    pause::Pause,
    provider::{
        ClaimRequest, Fire, FireClaim, LockProvider, LockRecord, MAX_DURATION, check_claims,
        validate_at_least, validate_at_most, validate_name,
    },
    trigger::{PendingTrigger, Trigger, TriggerClaim, TriggerWake},
};

use crate::builder::{RedisLockProviderBuilder, Settings};
use crate::connection::{Connection, Resend};
use crate::key::{definitions_key, history_key, lock_key};
use crate::script;

/// A [`LockProvider`] (and [`LockAdmin`](shedlock_core::admin::LockAdmin)) on Redis: one hash per lock, decided by one Lua script
/// per operation with the server's clock (`TIME`). See the [crate docs](crate) for the guarantees
/// and what a Redis without persistence, or a failover, means for them.
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
    pub(crate) connection: Connection,
    pub(crate) settings: Settings,
    /// Whether the last history write failed. A failure is logged once, until a write succeeds
    /// again.
    pub(crate) history_failing: AtomicBool,
}

impl RedisLockProvider {
    pub(crate) fn new(connection: Connection, settings: Settings) -> Self {
        Self {
            connection,
            settings,
            history_failing: AtomicBool::new(false),
        }
    }

    /// A builder for the server at `server`: `redis://[user:password@]host[:port][/db]`,
    /// `rediss://…` (needs a TLS feature of the `redis` crate), `unix:///path`, or a
    /// [`redis::ConnectionInfo`].
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

    /// Connects to `server` with the default settings: the key prefix `shedlock:`, names up to 64
    /// characters and 5 s per call (see [`RedisLockProviderBuilder::connect`]).
    ///
    /// # Errors
    ///
    /// [`Error::is_invalid_config`] for a malformed address. [`Error::is_backend`] or
    /// [`Error::is_timeout`] for a server that cannot be reached within 5 s.
    pub async fn connect(server: impl redis::IntoConnectionInfo) -> Result<Self> {
        Self::builder(server).connect().await
    }

    /// The key prefix of this provider's lock keys.
    #[must_use]
    pub fn key_prefix(&self) -> &str {
        &self.settings.key_prefix
    }

    /// The Redis key of lock `name`, for operators: the prefix followed by the name's UTF-8 bytes.
    /// `redis-cli HGETALL` shows the record.
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

    /// The Redis key of the run history of lock `name`, for operators: a list, newest run first, of
    /// JSON objects, which `redis-cli LRANGE` shows. It is in [`key`](Self::key)'s Redis Cluster
    /// hash slot, and contains a NUL byte, so it is never a lock's key.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> shedlock_core::Result<()> {
    /// let provider = shedlock_redis::RedisLockProvider::builder("redis://127.0.0.1").build()?;
    /// assert_eq!(provider.history_key("report"), b"shedlock:report\0history{shedlock:report}");
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn history_key(&self, name: &str) -> Vec<u8> {
        history_key(&self.key(name))
    }

    /// The Redis key of the job definitions replicas published: one hash per key prefix, the prefix
    /// followed by `\0definitions`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> shedlock_core::Result<()> {
    /// let provider = shedlock_redis::RedisLockProvider::builder("redis://127.0.0.1").build()?;
    /// assert_eq!(provider.definitions_key(), b"shedlock:\0definitions");
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn definitions_key(&self) -> Vec<u8> {
        definitions_key(&self.settings.key_prefix)
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
                error = error as &dyn std::error::Error,
                "could not read maxmemory-policy (CONFIG GET refused?); not checking eviction"
            ),
        }
        Ok(())
    }

    pub(crate) fn check_name(&self, name: &str) -> Result<()> {
        validate_name(name, self.settings.max_name_len)
    }

    /// Runs `script` on `name`'s key with `name` and `args` as `ARGV`, in one `EVALSHA`, plus a
    /// `SCRIPT LOAD` and a second `EVALSHA` when the server does not know it yet. `resend` says
    /// whether it runs again after a dropped connection.
    pub(crate) async fn eval(
        &self,
        op: &'static str,
        resend: Resend,
        script: &Script,
        name: &str,
        args: &[Vec<u8>],
    ) -> Result<Value> {
        let key = self.key(name);
        let what = || format!("{op} lock {name:?}");
        self.invoke(op, resend, &what, script, &[key], name.as_bytes(), args)
            .await
    }

    /// Runs `script` with `keys`, and with `first` then `args` as `ARGV`. It is one `EVALSHA`, as
    /// in [`eval`](Self::eval).
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn invoke(
        &self,
        op: &'static str,
        resend: Resend,
        what: &(dyn Fn() -> String + Sync),
        script: &Script,
        keys: &[Vec<u8>],
        first: &[u8],
        args: &[Vec<u8>],
    ) -> Result<Value> {
        self.connection
            .run(op, resend, what, |mut conn| {
                let mut invocation = script.prepare_invoke();
                for key in keys {
                    invocation.key(key.as_slice());
                }
                invocation.arg(first);
                for arg in args {
                    invocation.arg(arg.as_slice());
                }
                async move { invocation.invoke_async::<Value>(&mut conn).await }
            })
            .await
    }

    /// Runs `script` on the definitions hash with `args` as `ARGV`.
    pub(crate) async fn on_definitions(
        &self,
        op: &'static str,
        script: &Script,
        first: &[u8],
        args: &[Vec<u8>],
    ) -> Result<Value> {
        let prefix = &self.settings.key_prefix;
        let what = || format!("{op}: the job definitions under the key prefix {prefix:?}");
        self.invoke(
            op,
            Resend::AfterDrop,
            &what,
            script,
            &[self.definitions_key()],
            first,
            args,
        )
        .await
    }

    /// Logs a history write that failed, once until one succeeds again.
    pub(crate) fn history_written(&self, name: &str, failure: Option<String>) {
        match failure {
            Some(error) => {
                if !self.history_failing.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        lock = name,
                        error,
                        "could not write the run history (the release and the job state were \
                         recorded); logged once until a history write succeeds again"
                    );
                }
            }
            None => {
                if self.history_failing.swap(false, Ordering::Relaxed) {
                    tracing::info!(lock = name, "the run history is written again");
                }
            }
        }
    }

    pub(crate) fn token_of(record: &LockRecord) -> Result<i64> {
        record.fencing_token().ok_or_else(|| {
            Error::invalid_config(format!(
                "the record of {:?} has no fencing token; it was not acquired through a Redis \
                 lock provider",
                record.name()
            ))
        })
    }

    /// Runs the extend or release `script` for `record`'s acquisition. `ARGV` is `name, owner,
    /// token, duration µs`.
    pub(crate) async fn on_record(
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
    pub(crate) async fn read(&self, op: &'static str, name: &str) -> Result<Read> {
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

    /// Sends `claims`, valid and of distinct names, in one pipeline (see `claim_fires`): a
    /// `SCRIPT LOAD` of the fire claim's script, whose reply is ignored, then one `EVALSHA` per
    /// claim. One answer per claim, in their order.
    async fn claim_in_pipeline(
        &self,
        claims: &[&ClaimRequest<'_>],
        owner: &str,
    ) -> Result<Vec<Result<FireClaim>>> {
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        pipe.load_script(&script::CLAIM_FIRE).ignore();
        for claim in claims {
            let mut invocation = script::CLAIM_FIRE.prepare_invoke();
            invocation
                .key(self.key(claim.name))
                .arg(claim.name.as_bytes());
            for arg in claim_fire_args(claim.fire, claim.at_most, owner) {
                invocation.arg(arg);
            }
            pipe.invoke_script(&invocation);
        }
        let what = || {
            format!(
                "claim_fires of {} locks in one pipeline ({:?} first)",
                claims.len(),
                claims.first().map_or("", |claim| claim.name)
            )
        };
        let pipe = &pipe;
        let replies = self
            .connection
            .run(
                "claim_fires",
                Resend::OnlyIfRefused,
                &what,
                |mut conn| async move {
                    pipe.query_async::<Vec<redis::RedisResult<Value>>>(&mut conn)
                        .await
                },
            )
            .await?;
        if replies.len() != claims.len() {
            return Err(Error::backend_message(format!(
                "{} (Redis at {}): {} replies to {} claims",
                what(),
                self.connection.server(),
                replies.len(),
                claims.len()
            )));
        }
        Ok(claims
            .iter()
            .zip(replies)
            .map(|(claim, reply)| match reply {
                Ok(reply) => fire_claim(claim.name, owner, reply),
                Err(error) => Err(self
                    .connection
                    .error(&format!("claim_fire lock {:?}", claim.name), error)),
            })
            .collect())
    }
}

/// What the read script found.
pub(crate) struct Read {
    pub(crate) now: DateTime<Utc>,
    pub(crate) entry: Option<LockEntry>,
}

#[async_trait]
impl LockProvider for RedisLockProvider {
    /// One `EVALSHA`, not repeated after a dropped connection: redis-rs cannot tell a request that
    /// never left from one whose reply was lost after the script ran, and a repeat would find the
    /// lock held by this very call. The call fails instead, saying the reply was lost, and the lock
    /// may be held by this owner until `at_most`. A refused reconnection sent nothing, so it is
    /// retried.
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

    /// One `EVALSHA` that decides with the server's `TIME`, in `FireClaim`'s order, writing only
    /// when it claims. A pause kept in the lock's hash that holds at the server's now answers
    /// `FireClaim::Paused`, after the window's checks and before the recorded fire's. A claim that
    /// did not win carries the record as the script read it, as `holder`. The recorded fire,
    /// `last_fire` in the lock's hash, outlives every release, expiry and unlock. It is not
    /// repeated after a dropped connection (see `acquire`).
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
                &claim_fire_args(fire, at_most, owner),
            )
            .await?;
        fire_claim(name, owner, reply)
    }

    /// Claims in one round trip: one pipeline on the shared connection, not a transaction. It is
    /// a `SCRIPT LOAD` of [`claim_fire`](Self::claim_fire)'s script, whose reply is ignored, so a
    /// server that lost its script cache never answers `NOSCRIPT`, then one `EVALSHA` per claim
    /// with exactly the key and arguments [`claim_fire`](Self::claim_fire) sends. Each script
    /// touches its own lock's key only, so each claim is decided on its own, atomically, and a
    /// Redis Cluster could route each one. Other clients' commands may run between two claims.
    ///
    /// A claim with an invalid name or `at_most`, or whose name came earlier in the batch, is
    /// answered [`Error::is_invalid_config`] and not sent. A script's error reply, as for a key
    /// that holds another lock's record or something that is not a lock record, fails its claim
    /// only, with the error [`claim_fire`](Self::claim_fire) gives. A batch with one claim to
    /// send is sent as [`claim_fire`](Self::claim_fire) sends it, one `EVALSHA`.
    ///
    /// The pipeline has the call's deadline and, as a single claim, is not sent again after a
    /// dropped connection, when any of its claims may have been made: the call then fails as a
    /// whole, saying the reply was lost. More than [`fire_batch_limit`](Self::fire_batch_limit)
    /// claims go in one pipeline per that many, one after the other.
    ///
    /// # Errors
    ///
    /// [`Error::is_invalid_config`] for an empty `owner`. The call failed as a whole: it timed
    /// out, the connection dropped, or the server answered something other than one reply per
    /// claim.
    async fn claim_fires(
        &self,
        claims: &[ClaimRequest<'_>],
        owner: &str,
    ) -> Result<Vec<Result<FireClaim>>> {
        check_owner(owner)?;
        let mut answers: Vec<Option<Result<FireClaim>>> =
            check_claims(claims, |name| self.check_name(name))
                .into_iter()
                .map(|refused| refused.map(Err))
                .collect();
        let valid: Vec<usize> = (0..claims.len())
            .filter(|&i| answers[i].is_none())
            .collect();
        match valid.as_slice() {
            [] => {}
            &[i] => {
                let claim = &claims[i];
                answers[i] = Some(
                    self.claim_fire(claim.name, claim.fire, claim.at_most, owner)
                        .await,
                );
            }
            several => {
                // More than the limit, from a caller that does not split its claims: one
                // pipeline per `FIRE_BATCH_LIMIT` claims, one after the other.
                for (n, chunk) in several.chunks(FIRE_BATCH_LIMIT).enumerate() {
                    let batch: Vec<&ClaimRequest<'_>> = chunk.iter().map(|&i| &claims[i]).collect();
                    match self.claim_in_pipeline(&batch, owner).await {
                        Ok(replies) => {
                            for (&i, reply) in chunk.iter().zip(replies) {
                                answers[i] = Some(reply);
                            }
                        }
                        Err(error) if n == 0 => return Err(error),
                        Err(error) => {
                            // The earlier pipelines' claims keep their answers; those not yet
                            // answered fail, as after a lost reply.
                            let open: Vec<usize> = several
                                .iter()
                                .copied()
                                .filter(|&i| answers[i].is_none())
                                .collect();
                            for (i, error) in open.iter().zip(error.shared(open.len())) {
                                answers[*i] = Some(Err(error));
                            }
                            break;
                        }
                    }
                }
            }
        }
        Ok(answers
            .into_iter()
            .map(|answer| {
                answer.unwrap_or_else(|| {
                    Err(Error::backend_message("claim fires: a claim was not sent"))
                })
            })
            .collect())
    }

    /// 1000 claims. A batch is one pipeline, so this bounds its request and its reply, a few
    /// hundred bytes per claim each, and the time the server spends on it. Each claim is a short
    /// script on one key, so a full batch keeps the server busy for milliseconds, well within the
    /// call's deadline, and other clients' commands wait no longer than that.
    fn fire_batch_limit(&self) -> usize {
        FIRE_BATCH_LIMIT
    }

    /// One `EVALSHA` with [`release`](Self::release)'s guard, writing nothing when the lock is no
    /// longer this acquisition's. It also sets the job state fields of the lock's hash by the
    /// server's clock and, with [`history`](RedisLockProviderBuilder::history) on, pushes the run
    /// onto the lock's history list and prunes it. A history that cannot be written, as when the
    /// key holds another type or the server is out of memory, never fails the release and is logged
    /// once until a write succeeds again. The call is sent again after a dropped connection, and a
    /// run already recorded for the acquisition's token is not recorded twice.
    async fn release_run(
        &self,
        record: &LockRecord,
        at_least: Duration,
        run: &RunReport,
    ) -> Result<bool> {
        validate_at_least(at_least)?;
        let name = record.name();
        self.check_name(name)?;
        let token = Self::token_of(record)?;
        let outcome = run.outcome.clone().capped();
        let mut keys = vec![self.key(name)];
        let (keep, max_age) = match self.settings.history {
            Some(policy) => {
                keys.push(history_key(&keys[0]));
                (policy.keep, policy.max_age.map_or(-1, micros_ceil))
            }
            None => (0, -1),
        };
        let args = [
            record.owner().as_bytes().to_vec(),
            num(token),
            num(micros_ceil(at_least)),
            num(run.fire.timestamp_micros()),
            outcome.kind().as_bytes().to_vec(),
            outcome.error().unwrap_or_default().as_bytes().to_vec(),
            keep.to_string().into_bytes(),
            num(max_age),
        ];
        let what = || format!("release_run lock {name:?}");
        let reply = self
            .invoke(
                "release_run",
                Resend::AfterDrop,
                &what,
                &script::RELEASE_RUN,
                &keys,
                name.as_bytes(),
                &args,
            )
            .await?;
        let items = Reply::new("release_run", name, reply)?;
        match items.int(0)? {
            0 => Ok(false),
            1 => {
                if keys.len() > 1 {
                    self.history_written(name, items.opt_text(1)?);
                }
                Ok(true)
            }
            _ => Err(items.unexpected()),
        }
    }

    /// One `EVALSHA` on the [definitions hash](Self::definitions_key) that removes every expired
    /// entry, of any replica, then writes one JSON entry per definition under the field
    /// `<job's length in bytes>:<job>\0<replica>`, with `published` and `expires` in µs by the
    /// server's clock.
    ///
    /// # Errors
    ///
    /// [`Error::is_invalid_config`] for an empty `replica` or a `ttl` of zero or above 365 days.
    /// The server's errors are passed on.
    async fn publish_definitions(
        &self,
        replica: &str,
        version: &str,
        definitions: &[Definition],
        ttl: Duration,
    ) -> Result<()> {
        check_owner(replica)?;
        if ttl.is_zero() || ttl > MAX_DURATION {
            return Err(Error::invalid_config(format!(
                "the definitions' ttl is {ttl:?}; use a positive duration of at most 365 days"
            )));
        }
        let mut args = vec![replica.as_bytes().to_vec(), version.as_bytes().to_vec()];
        for definition in definitions {
            args.push(definition_field(&definition.job, replica));
            args.push(definition.job.as_bytes().to_vec());
            args.push(definition.lock_name.as_bytes().to_vec());
            args.push(definition.spec.as_bytes().to_vec());
        }
        match self
            .on_definitions(
                "publish_definitions",
                &script::PUBLISH_DEFINITIONS,
                &num(micros_ceil(ttl)),
                &args,
            )
            .await?
        {
            Value::Int(_) => Ok(()),
            other => Err(unexpected("publish_definitions", "(definitions)", &other)),
        }
    }

    /// One `EVALSHA` on the [triggers index](Self::triggers_key), whatever the number of locks:
    /// it removes the expired entries and answers the others, by the server's clock. The index is a
    /// hint kept beside the locks: an entry may name a trigger taken meanwhile, which the claim
    /// answers `Gone`. See the crate README, "Run now".
    async fn pending_triggers(&self) -> Result<Vec<PendingTrigger>> {
        self.read_pending_triggers().await
    }

    /// One `EVALSHA` on the lock's hash that decides with the server's `TIME`, in `TriggerClaim`'s
    /// order, writing only when it claims: the lock as `acquire` takes it and the trigger marked
    /// taken, never `last_fire`. It is not repeated after a dropped connection (see `acquire`). A
    /// claimed or gone trigger is then removed from the triggers index by a second `EVALSHA`.
    async fn claim_trigger(
        &self,
        name: &str,
        id: i64,
        at_most: Duration,
        owner: &str,
    ) -> Result<TriggerClaim> {
        self.take_trigger(name, id, at_most, owner).await
    }

    /// A pub/sub connection of its own (`SUBSCRIBE` to the [triggers channel](Self::triggers_key)),
    /// with the provider's address, credentials and TLS. Each `trigger` publishes there. It ends
    /// when the connection drops, and the scheduler then polls and watches again.
    async fn watch_triggers(&self) -> Result<TriggerWake> {
        self.watch().await
    }

    /// As configured with [`RedisLockProviderBuilder::max_name_len`] (64 by default).
    fn max_name_len(&self) -> usize {
        self.settings.max_name_len
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

/// The field of `job`'s definition by `replica` in the definitions hash: the job's length in bytes,
/// `:`, the job, NUL, the replica. The length makes the job part unambiguous, so the fields of one
/// job are exactly those starting with `<length>:<job>\0`.
pub(crate) fn definition_field(job: &str, replica: &str) -> Vec<u8> {
    format!("{}:{job}\0{replica}", job.len()).into_bytes()
}

pub(crate) fn check_owner(owner: &str) -> Result<()> {
    if owner.is_empty() {
        return Err(Error::invalid_config("the owner id is empty"));
    }
    Ok(())
}

/// The most claims [`RedisLockProvider::claim_fires`] takes in one call (see its
/// `fire_batch_limit`).
const FIRE_BATCH_LIMIT: usize = 1000;

/// The `ARGV` of a fire claim after the name: `F µs, next µs, at_most µs, owner`.
fn claim_fire_args(fire: &Fire, at_most: Duration, owner: &str) -> [Vec<u8>; 4] {
    [
        num(fire.at().timestamp_micros()),
        num(fire.next().timestamp_micros()),
        num(micros_ceil(at_most)),
        owner.as_bytes().to_vec(),
    ]
}

/// The claim of lock `name` by `owner` that a fire claim script's `reply` answers, the same for a
/// single claim and a batch: `{case, now, …}`, see [`script::CLAIM_FIRE`].
fn fire_claim(name: &str, owner: &str, reply: Value) -> Result<FireClaim> {
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
        5 => FireClaim::Paused {
            now,
            until: items.opt_time(2)?,
        },
        _ => return Err(items.unexpected()),
    })
}

/// `d` in whole microseconds, rounded up. So a lock is never shorter than asked.
pub(crate) fn micros_ceil(d: Duration) -> i64 {
    i64::try_from(d.as_nanos().div_ceil(1_000)).unwrap_or(i64::MAX)
}

/// An integer argument, as decimal text.
pub(crate) fn num(n: i64) -> Vec<u8> {
    n.to_string().into_bytes()
}

pub(crate) fn time(micros: i64) -> Result<DateTime<Utc>> {
    DateTime::from_timestamp_micros(micros)
        .ok_or_else(|| Error::backend_message(format!("read an out-of-range time ({micros} µs)")))
}

pub(crate) fn unexpected(op: &str, name: &str, reply: &Value) -> Error {
    Error::backend_message(format!(
        "{op} lock {name:?}: the script's reply was not understood ({reply:?})"
    ))
}

/// A script's array reply, read field by field.
pub(crate) struct Reply<'a> {
    op: &'static str,
    name: &'a str,
    items: Vec<Value>,
}

impl<'a> Reply<'a> {
    pub(crate) fn new(op: &'static str, name: &'a str, reply: Value) -> Result<Self> {
        match reply {
            Value::Array(items) if !items.is_empty() => Ok(Self { op, name, items }),
            other => Err(unexpected(op, name, &other)),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    pub(crate) fn unexpected(&self) -> Error {
        unexpected(self.op, self.name, &Value::Array(self.items.clone()))
    }

    pub(crate) fn int(&self, i: usize) -> Result<i64> {
        match self.items.get(i) {
            Some(Value::Int(n)) => Ok(*n),
            _ => Err(self.unexpected()),
        }
    }

    pub(crate) fn opt_int(&self, i: usize) -> Result<Option<i64>> {
        match self.items.get(i) {
            Some(Value::Nil) | None => Ok(None),
            Some(Value::Int(n)) => Ok(Some(*n)),
            _ => Err(self.unexpected()),
        }
    }

    pub(crate) fn time(&self, i: usize) -> Result<DateTime<Utc>> {
        time(self.int(i)?)
    }

    pub(crate) fn opt_time(&self, i: usize) -> Result<Option<DateTime<Utc>>> {
        self.opt_int(i)?.map(time).transpose()
    }

    pub(crate) fn opt_text(&self, i: usize) -> Result<Option<String>> {
        match self.items.get(i) {
            Some(Value::Nil) | None => Ok(None),
            _ => self.text(i).map(Some),
        }
    }

    pub(crate) fn text(&self, i: usize) -> Result<String> {
        match self.items.get(i) {
            Some(Value::BulkString(bytes)) => {
                String::from_utf8(bytes.clone()).map_err(|_| self.unexpected())
            }
            Some(Value::SimpleString(s)) => Ok(s.clone()),
            _ => Err(self.unexpected()),
        }
    }

    /// The record in a fire claim's reply that did not claim: `{case, now, lock_until, locked_at,
    /// locked_by, token, …}`.
    pub(crate) fn holder(&self, name: &str) -> Result<LockRecord> {
        Ok(
            LockRecord::new(name, self.text(4)?, self.time(3)?, self.time(2)?)
                .with_fencing_token(Some(self.int(5)?)),
        )
    }

    /// `{now, [skip…], lock_until, locked_at, locked_by, token, last_fire, <job state: 8>, <pause:
    /// 4>, <last action: 3>, <trigger: 6>}` with `skip` extra items after `now`, in the order of the
    /// scripts' `READ_FIELDS`.
    pub(crate) fn entry(&self, name: &str, skip: usize) -> Result<LockEntry> {
        let at = |i: usize| 1 + skip + i;
        let record = LockRecord::new(
            name,
            self.text(at(2))?,
            self.time(at(1))?,
            self.time(at(0))?,
        )
        .with_fencing_token(Some(self.int(at(3))?));
        let last_fire = self.opt_time(at(4))?;
        let state = self.state(name, at(5))?;
        Ok(LockEntry::new(record, self.time(0)?, last_fire)
            .with_state(state)
            .with_pause(self.pause(at(13))?)
            .with_last_action(self.last_action(at(17))?)
            .with_trigger(self.trigger(at(20))?))
    }

    /// The trigger at `i..i + 6`: `trigger_id` (text), `trigger_at`, `trigger_expires`,
    /// `trigger_by`, `trigger_taken_by`, `trigger_taken_at`. `None` with the id, the request time
    /// or the expiry missing or garbled.
    pub(crate) fn trigger(&self, i: usize) -> Result<Option<Trigger>> {
        let id = self.opt_text(i)?.and_then(|id| id.parse::<i64>().ok());
        let (Some(id), Some(requested_at), Some(expires)) =
            (id, self.opt_time(i + 1)?, self.opt_time(i + 2)?)
        else {
            return Ok(None);
        };
        Ok(Some(Trigger {
            id,
            requested_at,
            expires,
            by: self.opt_text(i + 3)?.unwrap_or_default(),
            taken_by: self.opt_text(i + 4)?,
            taken_at: self.opt_time(i + 5)?,
        }))
    }

    /// The pause at `i..i + 4`: `paused_at`, `paused_until`, `paused_by`, `paused_reason`. `None`
    /// without `paused_at`.
    pub(crate) fn pause(&self, i: usize) -> Result<Option<Pause>> {
        let Some(since) = self.opt_time(i)? else {
            return Ok(None);
        };
        let reason = self.opt_text(i + 3)?;
        Ok(Some(Pause::new(
            since,
            self.opt_time(i + 1)?,
            self.opt_text(i + 2)?.unwrap_or_default(),
            reason.as_deref(),
        )))
    }

    /// The last action at `i..i + 3`: `last_action`, `last_action_by`, `last_action_at`. `None`
    /// with a part missing, or a word this version does not know.
    pub(crate) fn last_action(&self, i: usize) -> Result<Option<AdminAction>> {
        Ok(
            match (
                self.opt_text(i)?,
                self.opt_text(i + 1)?,
                self.opt_time(i + 2)?,
            ) {
                (Some(kind), Some(by), Some(at)) => {
                    ActionKind::parse(&kind).map(|kind| AdminAction::new(kind, by, at))
                }
                _ => None,
            },
        )
    }

    /// The job state at `i..i + 8`, in the script's `STATE` order. A last run with a part missing,
    /// or an outcome this version does not know, is left out.
    pub(crate) fn state(&self, name: &str, i: usize) -> Result<JobState> {
        let last_run = match (
            self.opt_time(i)?,
            self.opt_text(i + 1)?,
            self.opt_time(i + 2)?,
            self.opt_time(i + 3)?,
            self.opt_text(i + 4)?,
        ) {
            (Some(fire), Some(runner), Some(started), Some(ended), Some(kind)) => {
                let error = self.opt_text(i + 5)?;
                RunOutcome::from_parts(&kind, error.as_deref())
                    .map(|outcome| RunEntry::new(name, fire, runner, started, ended, outcome))
            }
            _ => None,
        };
        let failures = self.opt_int(i + 7)?.unwrap_or_default().max(0);
        Ok(JobState::new(
            last_run,
            self.opt_time(i + 6)?,
            u32::try_from(failures).unwrap_or(u32::MAX),
        ))
    }
}
