//! For store authors: the contract, [`LockProvider`], and what implementing it takes.
//!
//! [`LockRecord`] is what a store hands out. [`Fire`], [`FireClaim`] and [`fire_decision`] are the
//! optional fire claims. The `validate_*` functions and the limits check input the way the other
//! stores do. [`async_trait`](macro@async_trait) and [`chrono`] are re-exported, so a store needs
//! no more. `InMemoryLockProvider` at the crate root is a complete reference implementation.
//! `shedlock_core::testkit` (feature `testkit`) is the conformance suite.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// The `#[async_trait]` attribute [`LockProvider`] implementations need.
pub use async_trait::async_trait;
/// The `chrono` crate, whose `DateTime<Utc>` [`LockRecord`] and [`Fire`] carry.
pub use chrono;
use chrono::{DateTime, Utc};

pub use crate::config::{
    DEFAULT_MAX_NAME_LEN, MAX_DURATION, validate_at_least, validate_at_most, validate_name,
};
use crate::error::{Error, Result};
pub use crate::executor::DEFAULT_CALL_TIMEOUT;
pub use crate::fire::{Fire, FireClaim, fire_decision};
pub use crate::jobs::{Definition, RunReport};
pub use crate::trigger::{PendingTrigger, TriggerClaim, TriggerWake};

/// One acquisition of a lock, as the store recorded it.
///
/// Times are the **store's** UTC wall clock, the database server's for SQL stores.
/// [`LockProvider::extend`] and [`LockProvider::release`] act only while the row still belongs to
/// this acquisition, as [`LockProvider`] defines it, so a late release never frees another's lock.
///
/// ```
/// use chrono::{Duration, Utc};
/// use shedlock_core::provider::LockRecord;
///
/// let now = Utc::now();
/// let record = LockRecord::new("report", "host-a:42:x1", now, now + Duration::seconds(60))
///     .with_fencing_token(Some(7));
/// assert_eq!(record.fencing_token(), Some(7));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LockRecord {
    name: String,
    owner: String,
    locked_at: DateTime<Utc>,
    lock_until: DateTime<Utc>,
    fencing_token: Option<i64>,
}

impl LockRecord {
    /// A record without a fencing token. Add one with
    /// [`with_fencing_token`](Self::with_fencing_token).
    pub fn new(
        name: impl Into<String>,
        owner: impl Into<String>,
        locked_at: DateTime<Utc>,
        lock_until: DateTime<Utc>,
    ) -> Self {
        Self {
            name: name.into(),
            owner: owner.into(),
            locked_at,
            lock_until,
            fencing_token: None,
        }
    }

    /// Sets the fencing token. Stores without one pass `None`.
    #[must_use]
    pub fn with_fencing_token(mut self, token: Option<i64>) -> Self {
        self.fencing_token = token;
        self
    }

    /// The acquisition with a new `lock_until`, as [`extend`](LockProvider::extend) returns it.
    #[must_use]
    pub fn with_lock_until(mut self, lock_until: DateTime<Utc>) -> Self {
        self.lock_until = lock_until;
        self
    }

    /// The lock's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Who holds it: the owner id of the executor or latch.
    #[must_use]
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// When this acquisition took the lock (store clock, UTC).
    #[must_use]
    pub fn locked_at(&self) -> DateTime<Utc> {
        self.locked_at
    }

    /// When the lock frees itself unless extended (store clock, UTC).
    #[must_use]
    pub fn lock_until(&self) -> DateTime<Utc> {
        self.lock_until
    }

    /// The fencing token, strictly greater than every earlier acquisition's token for this name, or
    /// `None` when the store has none, as a Java ShedLock table without the `fencing_token` column.
    /// Pass it with writes to a downstream system that rejects a token lower than the highest it
    /// has seen, so a holder that paused past its lock's expiry cannot overwrite the next holder's
    /// work.
    #[must_use]
    pub fn fencing_token(&self) -> Option<i64> {
        self.fencing_token
    }
}

impl fmt::Display for LockRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} held by {:?} from {} until {}",
            self.name, self.owner, self.locked_at, self.lock_until
        )?;
        if let Some(token) = self.fencing_token {
            write!(f, " (token {token})")?;
        }
        Ok(())
    }
}

/// A store that keeps locks: one row per lock name, decided by the store's own clock.
///
/// This is the trait to implement for an in-house store. Run `testkit::ConformanceSuite` (feature
/// `testkit`) in its tests to check it. The built-in implementations are
/// [`InMemoryLockProvider`](crate::InMemoryLockProvider), and Postgres, MySQL/MariaDB and SQLite in
/// the `shedlock-sqlx` crate.
///
/// # What an implementation must guarantee
///
/// 1. **One clock, the store's.** Every method takes durations, never timestamps. The store reads
///    "now" itself in the same atomic step that decides, for SQL inside the statement with the
///    server's UTC clock. Callers' clocks never matter.
/// 2. **[`acquire`](Self::acquire)`(name, at_most, owner)`** is one atomic step. It succeeds iff no
///    row exists for `name` or its `lock_until <= now`. It then sets `lock_until = now + at_most`,
///    `locked_at = now`, `locked_by = owner` and, if the store has tokens, a new fencing token, and
///    returns the record. A lock held by anyone, the same owner included, returns `Ok(None)`, never
///    an error, and nothing is written. Of two concurrent acquires of one free name, exactly one
///    wins and the other gets `Ok(None)`, with no deadlock and no duplicate-key error. A missing
///    row, also one deleted by hand, is created.
///    acquisition and `lock_until > now`. "Belongs" means the same owner and the same token, or the
///    same `locked_at` where there is no token. It sets `lock_until = now + at_most` and returns
///    the updated record. Otherwise it answers `Ok(None)` and nothing changes.
/// 4. **[`release`](Self::release)`(record, at_least)`** acts iff the row still belongs to this
/// 4. **[`release`](Self::release)`(record, at_least)`** acts iff the row still belongs to this
///    acquisition, even after expiry while nobody else took the lock. It sets `lock_until =
///    max(now, locked_at + at_least)` and returns `Ok(true)`. It returns `Ok(false)`, touching
///    nothing, if the lock had already passed to someone else.
///    skip values. Stores that cannot provide them return `None` everywhere.
/// 6. **Errors are not skips.** A store failure is an `Err` naming what failed, such as
///    [`Error::backend`] or [`Error::missing_table`]. Only "held by someone else" is `Ok(None)`.
///    Names are always passed to the store as bound values, never spliced into a query. Names
///    longer than [`max_name_len`](Self::max_name_len) are rejected with
///    [`Error::is_invalid_config`] before the store is asked.
/// 7. **No caller state.** Each call stands alone. It must not join an ambient transaction nor keep
///    a connection while the lock is held. It may be cancelled (dropped) at any await point. A
///    cancelled acquire may or may not have taken the lock, which then ends at `at_most`.
/// 8. **A lost reply is an error, not a repeat.** An `acquire` or a `claim_fire` request may have
///    reached the store, for example over a connection that broke after it was sent. Do not send it
///    again, because the repeat would find the lock held, or the fire recorded, by the lost request
///    itself and answer `Ok(None)` or [`FireClaim::ClaimedElsewhere`] for the caller's own lock.
///    Return an error instead. A scheduler then recognises its own claim by the holder a later
///    claim reports, see docs/guarantees.md, "Lost replies". A request that never left, for lack of
///    a connection, may be retried, and so may extend, release and reads, whose repeats have the
///    same effect and answer.
///
/// The executor wraps every call in a timeout, so an implementation need not add its own. It should
/// close, not reuse, a connection whose call was cancelled mid-flight.
///
/// # Stores with their own expiry (TTL keys, leases)
///
/// Rules 3 and 4 need the record to outlive its `lock_until`. A release after expiry, while nobody
/// else took the lock, must still find the record and act, and a release called again for the same
/// record acts again or returns `Ok(false)`, never an error. So **never delete the record on
/// release or let the store drop it at `lock_until`**. Keep it, expired, and decide expiry by
/// comparing `lock_until` with the store's own now, or keep a second record without a TTL that
/// holds owner and token. The conformance suite checks both cases (`release_after_expiry_acts`,
/// `late_release_and_extend_spare_new_holder`).
///
/// # Example: a custom store
///
/// ```
/// use std::time::Duration;
/// use shedlock_core::{
///     InMemoryLockProvider, Result,
///     provider::{
///         ClaimRequest, Definition, Fire, FireClaim, LockProvider, LockRecord, ReleaseRequest, RunReport, async_trait,
///     },
/// };
///
/// /// A store that logs every call and delegates to another one. A wrapper forwards every
/// /// method, the optional ones too: the defaults would hide the inner store's `holder`,
/// /// `claim_fire` (a scheduler would fall back to plain locks), its batches of fire claims and
/// /// of releases, and the job state it records.
/// struct Logged<P>(P);
///
/// #[async_trait]
/// impl<P: LockProvider> LockProvider for Logged<P> {
///     async fn acquire(&self, name: &str, at_most: Duration, owner: &str) -> Result<Option<LockRecord>> {
///         tracing::info!(name, "acquire");
///         self.0.acquire(name, at_most, owner).await
///     }
///     async fn extend(&self, record: &LockRecord, at_most: Duration) -> Result<Option<LockRecord>> {
///         self.0.extend(record, at_most).await
///     }
///     async fn release(&self, record: &LockRecord, at_least: Duration) -> Result<bool> {
///         self.0.release(record, at_least).await
///     }
///     async fn holder(&self, name: &str) -> Result<Option<LockRecord>> {
///         self.0.holder(name).await
///     }
///     async fn claim_fire(&self, name: &str, fire: &Fire, at_most: Duration, owner: &str) -> Result<FireClaim> {
///         tracing::info!(name, %fire, "claim fire");
///         self.0.claim_fire(name, fire, at_most, owner).await
///     }
///     async fn claim_fires(&self, claims: &[ClaimRequest<'_>], owner: &str) -> Result<Vec<Result<FireClaim>>> {
///         self.0.claim_fires(claims, owner).await
///     }
///     fn fire_batch_limit(&self) -> usize {
///         self.0.fire_batch_limit()
///     }
///     async fn release_run(&self, record: &LockRecord, at_least: Duration, run: &RunReport) -> Result<bool> {
///         self.0.release_run(record, at_least, run).await
///     }
///     async fn release_runs(&self, releases: &[ReleaseRequest<'_>]) -> Result<Vec<Result<bool>>> {
///         self.0.release_runs(releases).await
///     }
///     fn release_batch_limit(&self) -> usize {
///         self.0.release_batch_limit()
///     }
///     async fn publish_definitions(
///         &self, replica: &str, version: &str, definitions: &[Definition], ttl: Duration,
///     ) -> Result<()> {
///         self.0.publish_definitions(replica, version, definitions, ttl).await
///     }
///     fn max_name_len(&self) -> usize {
///         self.0.max_name_len()
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> shedlock_core::Result<()> {
/// let store = Logged(InMemoryLockProvider::new());
/// let record = store.acquire("job", Duration::from_secs(10), "me").await?.expect("free");
/// assert!(store.acquire("job", Duration::from_secs(10), "you").await?.is_none());
/// assert!(store.release(&record, Duration::ZERO).await?);
/// // Fire claims reach the inner store:
/// let at = chrono::Utc::now() - chrono::Duration::seconds(1);
/// let fire = Fire::new(at, at + chrono::Duration::minutes(1))?;
/// assert!(store.claim_fire("nightly", &fire, Duration::from_secs(10), "me").await?.claimed().is_some());
/// # Ok(()) }
/// ```
#[async_trait]
pub trait LockProvider: Send + Sync + 'static {
    /// Takes the lock `name` for `at_most` if it is free. Answers `Ok(None)` if someone holds it.
    ///
    /// # Errors
    ///
    /// The store failed or the name is invalid for this store. Never because the lock is held.
    async fn acquire(
        &self,
        name: &str,
        at_most: Duration,
        owner: &str,
    ) -> Result<Option<LockRecord>>;

    /// Pushes `lock_until` to `now + at_most` if `record` still holds the lock. Answers `Ok(None)`
    /// if it does not: the lock expired, was released, or was taken by someone else.
    ///
    /// # Errors
    ///
    /// The store failed.
    async fn extend(&self, record: &LockRecord, at_most: Duration) -> Result<Option<LockRecord>>;

    /// Ends `record`'s hold: `lock_until = max(now, locked_at + at_least)`. Answers `Ok(false)`,
    /// and changes nothing, if the lock no longer belonged to this acquisition.
    ///
    /// # Errors
    ///
    /// The store failed. The lock then ends at its `lock_until`.
    async fn release(&self, record: &LockRecord, at_least: Duration) -> Result<bool>;

    /// Who holds `name` now, if anyone. It only reads. The default body answers
    /// [`Error::is_unsupported`]. Stores that can answer cheaply override it.
    ///
    /// # Errors
    ///
    /// The store failed, or does not support the query.
    async fn holder(&self, name: &str) -> Result<Option<LockRecord>> {
        let _ = name;
        Err(Error::unsupported("holder"))
    }

    /// Claims one fire of a scheduled job, in one atomic step on the store's clock.
    ///
    /// It succeeds iff `fire.at() <= now < fire.next()`, the fire recorded for `name` is absent or
    /// older than `fire.at()`, and the lock is free. It then records `fire.at()` and takes the lock
    /// as [`acquire`](Self::acquire) does, with `lock_until = now + at_most` and a new fencing
    /// token. It writes nothing unless it claims. It answers a [`FireClaim`], checked in the order
    /// listed there, whose holder is the lock's row read in the same step. [`fire_decision`] is
    /// that decision for stores that decide in their own code.
    ///
    /// The recorded fire survives release, expiry and an operator's unlock, so a fire is never run
    /// twice. The default body answers [`Error::is_unsupported`] and a scheduler then falls back to
    /// [`acquire`](Self::acquire) and `at_least`, with a warning.
    ///
    /// # Errors
    ///
    /// The store failed, the name is invalid, or the store does not record fires.
    async fn claim_fire(
        &self,
        name: &str,
        fire: &Fire,
        at_most: Duration,
        owner: &str,
    ) -> Result<FireClaim> {
        let _ = (name, fire, at_most, owner);
        Err(Error::unsupported("claim_fire"))
    }

    /// Claims several fires, of distinct lock names, in one call: each exactly as
    /// [`claim_fire`](Self::claim_fire) claims it, atomically and on its own. One claim's answer
    /// never decides another's, and a claim refused for its own input or row fails alone. It
    /// answers one result per claim, in their order. Schedulers send the fires due at one instant
    /// through it, in batches of at most [`fire_batch_limit`](Self::fire_batch_limit), when that
    /// is above 1 (docs/guarantees.md, "Many jobs at one instant").
    ///
    /// A store may leave a claim undecided when another transaction holds its row for longer
    /// than the batch waits, and answer it [`Error::busy`], having written nothing for it. The
    /// executor then sends that claim again on its own, through `claim_fire`, so that one held row
    /// holds up its own claim and not the batch's.
    ///
    /// The default body sends the claims one after the other through `claim_fire`. A store that
    /// overrides it to claim in fewer round trips also raises `fire_batch_limit`.
    ///
    /// # Errors
    ///
    /// The whole call failed. As with a `claim_fire` whose reply was lost, any of the claims may
    /// have committed: the caller must not send them again as new claims, and treats each as a
    /// lost reply (docs/guarantees.md, "Lost replies").
    async fn claim_fires(
        &self,
        claims: &[ClaimRequest<'_>],
        owner: &str,
    ) -> Result<Vec<Result<FireClaim>>> {
        let mut answers = Vec::with_capacity(claims.len());
        for claim in claims {
            answers.push(
                self.claim_fire(claim.name, claim.fire, claim.at_most, owner)
                    .await,
            );
        }
        Ok(answers)
    }

    /// The most claims [`claim_fires`](Self::claim_fires) takes in one call. The default, 1, says
    /// that the store has no batch: a scheduler then sends each claim on its own, concurrently.
    fn fire_batch_limit(&self) -> usize {
        1
    }

    /// [`release`](Self::release) that also records how the run ended, a [`RunReport`], in the
    /// lock's row, in the same guarded step. It records the job's last run, last success and
    /// consecutive failures, see [`jobs`](crate::jobs) for which outcomes count, and a history
    /// entry where the store keeps history. Nothing is recorded when the row no longer belongs to
    /// `record` and the answer is `Ok(false)`, so a run whose lock was taken over never overwrites
    /// the new holder's state. Sent again for the same acquisition after a lost reply, it releases
    /// again and records the run once.
    ///
    /// The default body answers [`Error::is_unsupported`] without touching the store, and so must a
    /// store that lacks the columns. The caller then runs the plain [`release`](Self::release). A
    /// history write that fails must not fail the release.
    ///
    /// # Errors
    ///
    /// As [`release`](Self::release). Or unsupported, having changed nothing.
    async fn release_run(
        &self,
        record: &LockRecord,
        at_least: Duration,
        run: &RunReport,
    ) -> Result<bool> {
        let _ = (record, at_least, run);
        Err(Error::unsupported("release_run"))
    }

    /// Several [`release_run`](Self::release_run)s, of distinct lock names, in one call: each
    /// released and recorded exactly as `release_run` does it, on its own. One release's answer
    /// never decides another's, and a release refused for its own input or row fails alone. It
    /// answers one result per release, in their order. When
    /// [`release_batch_limit`](Self::release_batch_limit) is above 1, schedulers send every
    /// release that records a run through it: a lone one as a batch of one, and those of runs that
    /// end while one is in flight together, up to that limit (docs/guarantees.md, "Many jobs at
    /// one instant").
    ///
    /// As in `claim_fires`, a store may answer a release [`Error::busy`] when another transaction
    /// held its row longer than the batch waits, having written nothing for it; the executor then
    /// sends it again on its own, through `release_run`.
    ///
    /// The default body sends the releases one after the other through `release_run`. A store
    /// that overrides it to release in fewer round trips also raises `release_batch_limit`.
    ///
    /// # Errors
    ///
    /// The whole call failed: any of the releases may have committed. A release is safe to send
    /// again (`release_run` records a run once), so the caller releases each again on its own.
    /// Or unsupported, as `release_run`, having changed nothing.
    async fn release_runs(&self, releases: &[ReleaseRequest<'_>]) -> Result<Vec<Result<bool>>> {
        let mut answers = Vec::with_capacity(releases.len());
        for release in releases {
            answers.push(
                self.release_run(release.record, release.at_least, release.run)
                    .await,
            );
        }
        Ok(answers)
    }

    /// The most releases [`release_runs`](Self::release_runs) takes in one call. The default, 1,
    /// says that the store has no batch of releases: each run's release goes on its own.
    fn release_batch_limit(&self) -> usize {
        1
    }

    /// Publishes the job definitions of the replica `replica`, which is its owner id. A scheduler
    /// calls it at start and then as a heartbeat. Each entry is written, or overwritten, with
    /// `published = now` and `expires = now + ttl` by the store's clock, and `version` beside it.
    /// Expired entries of any replica are removed in the same step, so dead replicas' entries go
    /// away by themselves. The default body answers [`Error::is_unsupported`].
    ///
    /// # Errors
    ///
    /// The store failed, is not set up for definitions, or does not support them.
    async fn publish_definitions(
        &self,
        replica: &str,
        version: &str,
        definitions: &[Definition],
        ttl: Duration,
    ) -> Result<()> {
        let _ = (replica, version, definitions, ttl);
        Err(Error::unsupported("publish_definitions"))
    }

    /// The triggers ("run now") pending in the store: not taken, not expired by the store's clock,
    /// in one read whatever the number of jobs. A scheduler calls it at an interval, and when
    /// [`watch_triggers`](Self::watch_triggers) wakes it. The default body answers
    /// [`Error::is_unsupported`], and a scheduler then never runs triggers.
    ///
    /// # Errors
    ///
    /// The store failed, is not set up for triggers (a table without the columns), or does not
    /// support them.
    async fn pending_triggers(&self) -> Result<Vec<PendingTrigger>> {
        Err(Error::unsupported("pending_triggers"))
    }

    /// Claims the trigger `id` of the lock `name`, in one atomic step on the store's clock. It
    /// succeeds iff the row's trigger is `id`, not taken and not expired, the job is not paused and
    /// the lock is free. It then takes the lock as [`acquire`](Self::acquire) does and marks the
    /// trigger taken by `owner`, at the store's now. It never writes the recorded fire. It writes
    /// nothing unless it claims. As with [`claim_fire`](Self::claim_fire), a lost reply is an
    /// error, never a repeat. The default body answers [`Error::is_unsupported`].
    ///
    /// # Errors
    ///
    /// The store failed, the name is invalid, or the store does not support triggers.
    async fn claim_trigger(
        &self,
        name: &str,
        id: i64,
        at_most: Duration,
        owner: &str,
    ) -> Result<TriggerClaim> {
        let _ = (name, id, at_most, owner);
        Err(Error::unsupported("claim_trigger"))
    }

    /// A push of the store that wakes a scheduler when a trigger is written, such as Postgres
    /// `LISTEN/NOTIFY` or Redis pub/sub, so a trigger runs within a round trip or two instead of
    /// the next poll. The default body answers [`Error::is_unsupported`]: the scheduler then polls
    /// [`pending_triggers`](Self::pending_triggers) only.
    ///
    /// # Errors
    ///
    /// The store failed to start watching, or has no push.
    async fn watch_triggers(&self) -> Result<TriggerWake> {
        Err(Error::unsupported("watch_triggers"))
    }

    /// Whether the store answers and is set up to keep locks, without taking one. This is the
    /// readiness check behind [`LockingTaskExecutor::check`](crate::LockingTaskExecutor::check).
    /// The default body reads the holder of the lock [`CHECK_NAME`], which a SQL store does after
    /// checking its table's columns. It answers `Ok` where [`holder`](Self::holder) is unsupported,
    /// which it cannot check. Override it where the store can tell more.
    ///
    /// # Errors
    ///
    /// What the store answered. [`Error::is_missing_table`] or [`Error::is_schema`] means a store
    /// that is set up wrong, and retrying will not help. [`Error::is_backend`] or
    /// [`Error::is_timeout`] means one that cannot be reached.
    async fn check(&self) -> Result<()> {
        let name: String = CHECK_NAME.chars().take(self.max_name_len()).collect();
        match self.holder(&name).await {
            Ok(_) => Ok(()),
            Err(error) if error.is_unsupported() => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// The longest name this store accepts, in characters. Defaults to [`DEFAULT_MAX_NAME_LEN`]
    /// (64, ShedLock's `VARCHAR(64)`).
    fn max_name_len(&self) -> usize {
        DEFAULT_MAX_NAME_LEN
    }
}

/// One fire claim of a [`LockProvider::claim_fires`] batch: the arguments of
/// [`claim_fire`](LockProvider::claim_fire) but the owner, which the batch shares.
///
/// ```
/// use std::time::Duration;
/// use shedlock_core::provider::{ClaimRequest, Fire};
///
/// let at = chrono::Utc::now();
/// let fire = Fire::new(at, at + chrono::Duration::minutes(1))?;
/// let claim = ClaimRequest::new("nightly", &fire, Duration::from_secs(60));
/// assert_eq!(claim.name, "nightly");
/// # Ok::<(), shedlock_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ClaimRequest<'a> {
    /// The lock's name.
    pub name: &'a str,
    /// The fire to claim.
    pub fire: &'a Fire,
    /// The lock's `at_most` if the claim wins.
    pub at_most: Duration,
}

impl<'a> ClaimRequest<'a> {
    /// The claim of `fire` of the lock `name`, held for `at_most` if it wins.
    #[must_use]
    pub fn new(name: &'a str, fire: &'a Fire, at_most: Duration) -> Self {
        Self {
            name,
            fire,
            at_most,
        }
    }
}

/// One release of a [`LockProvider::release_runs`] batch: the arguments of
/// [`release_run`](LockProvider::release_run).
///
/// ```
/// use std::time::Duration;
/// use shedlock_core::jobs::RunOutcome;
/// use shedlock_core::provider::{LockRecord, ReleaseRequest, RunReport};
///
/// let now = chrono::Utc::now();
/// let record = LockRecord::new("nightly", "me", now, now + chrono::Duration::minutes(1));
/// let run = RunReport::new(now, RunOutcome::Succeeded);
/// let release = ReleaseRequest::new(&record, Duration::ZERO, &run);
/// assert_eq!(release.record.name(), "nightly");
/// ```
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ReleaseRequest<'a> {
    /// The acquisition to release.
    pub record: &'a LockRecord,
    /// The lock's `at_least`.
    pub at_least: Duration,
    /// How the run ended.
    pub run: &'a RunReport,
}

impl<'a> ReleaseRequest<'a> {
    /// The release of `record`, kept until `at_least` after its start, recording `run`.
    #[must_use]
    pub fn new(record: &'a LockRecord, at_least: Duration, run: &'a RunReport) -> Self {
        Self {
            record,
            at_least,
            run,
        }
    }
}

/// What a store answers, before sending anything, to each claim of a
/// [`claim_fires`](LockProvider::claim_fires) batch: an error for a claim whose name `check_name`
/// refuses, whose `at_most` is invalid, or whose name came earlier in the batch; `None` for the
/// claims to send.
///
/// ```
/// use std::time::Duration;
/// use shedlock_core::provider::{ClaimRequest, Fire, check_claims, validate_name};
///
/// let at = chrono::Utc::now();
/// let fire = Fire::new(at, at + chrono::Duration::minutes(1))?;
/// let minute = Duration::from_secs(60);
/// let claims = [
///     ClaimRequest::new("a", &fire, minute),
///     ClaimRequest::new("", &fire, minute),
///     ClaimRequest::new("a", &fire, minute),
/// ];
/// let refused = check_claims(&claims, |name| validate_name(name, 64));
/// assert!(refused[0].is_none());
/// assert!(refused[1].as_ref().is_some_and(|e| e.is_invalid_config()));
/// assert!(refused[2].as_ref().is_some_and(|e| e.to_string().contains("twice")));
/// # Ok::<(), shedlock_core::Error>(())
/// ```
pub fn check_claims(
    claims: &[ClaimRequest<'_>],
    check_name: impl Fn(&str) -> Result<()>,
) -> Vec<Option<Error>> {
    let mut names = std::collections::HashSet::with_capacity(claims.len());
    claims
        .iter()
        .map(|claim| {
            check_name(claim.name)
                .and_then(|()| validate_at_most(claim.at_most))
                .and_then(|()| {
                    if names.insert(claim.name) {
                        Ok(())
                    } else {
                        Err(Error::invalid_config(format!(
                            "the lock {:?} is claimed twice in one batch of fire claims",
                            claim.name
                        )))
                    }
                })
                .err()
        })
        .collect()
}

/// The lock name whose holder [`LockProvider::check`]'s default body reads. It never takes it.
pub const CHECK_NAME: &str = "shedlock-check";

/// An `Arc` of a provider is a provider, so `Arc<dyn LockProvider>` can be shared between an
/// executor and a leader latch.
#[async_trait]
impl<P: LockProvider + ?Sized> LockProvider for Arc<P> {
    async fn acquire(
        &self,
        name: &str,
        at_most: Duration,
        owner: &str,
    ) -> Result<Option<LockRecord>> {
        (**self).acquire(name, at_most, owner).await
    }

    async fn extend(&self, record: &LockRecord, at_most: Duration) -> Result<Option<LockRecord>> {
        (**self).extend(record, at_most).await
    }

    async fn release(&self, record: &LockRecord, at_least: Duration) -> Result<bool> {
        (**self).release(record, at_least).await
    }

    async fn holder(&self, name: &str) -> Result<Option<LockRecord>> {
        (**self).holder(name).await
    }

    async fn claim_fire(
        &self,
        name: &str,
        fire: &Fire,
        at_most: Duration,
        owner: &str,
    ) -> Result<FireClaim> {
        (**self).claim_fire(name, fire, at_most, owner).await
    }

    async fn claim_fires(
        &self,
        claims: &[ClaimRequest<'_>],
        owner: &str,
    ) -> Result<Vec<Result<FireClaim>>> {
        (**self).claim_fires(claims, owner).await
    }

    fn fire_batch_limit(&self) -> usize {
        (**self).fire_batch_limit()
    }

    async fn release_run(
        &self,
        record: &LockRecord,
        at_least: Duration,
        run: &RunReport,
    ) -> Result<bool> {
        (**self).release_run(record, at_least, run).await
    }

    async fn release_runs(&self, releases: &[ReleaseRequest<'_>]) -> Result<Vec<Result<bool>>> {
        (**self).release_runs(releases).await
    }

    fn release_batch_limit(&self) -> usize {
        (**self).release_batch_limit()
    }

    async fn publish_definitions(
        &self,
        replica: &str,
        version: &str,
        definitions: &[Definition],
        ttl: Duration,
    ) -> Result<()> {
        (**self)
            .publish_definitions(replica, version, definitions, ttl)
            .await
    }

    async fn pending_triggers(&self) -> Result<Vec<PendingTrigger>> {
        (**self).pending_triggers().await
    }

    async fn claim_trigger(
        &self,
        name: &str,
        id: i64,
        at_most: Duration,
        owner: &str,
    ) -> Result<TriggerClaim> {
        (**self).claim_trigger(name, id, at_most, owner).await
    }

    async fn watch_triggers(&self) -> Result<TriggerWake> {
        (**self).watch_triggers().await
    }

    async fn check(&self) -> Result<()> {
        (**self).check().await
    }

    fn max_name_len(&self) -> usize {
        (**self).max_name_len()
    }
}
