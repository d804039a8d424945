//! Running a task under a lock: [`LockingTaskExecutor`] and [`LockGuard`].

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::{Arc, OnceLock};
use std::task::Poll;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::Instrument;

use crate::config::{LockConfig, check_max, validate_name};
use crate::current::{self, LockHandle};
use crate::drain::{DrainState, Drained};
use crate::error::{Error, Result};
#[cfg(feature = "scheduler")]
use crate::fire::{Fire, FireClaim};
use crate::keepalive::{Lease, RenewPolicy, timed};
use crate::observe;
use crate::owner::{default_owner_id, validate_owner_id};
use crate::provider::{LockProvider, LockRecord};

mod acquire;
#[cfg(feature = "scheduler")]
pub(crate) mod batch;
#[cfg(all(test, feature = "scheduler"))]
mod batch_tests;
mod guard;
#[cfg(test)]
mod tests;

pub use guard::LockGuard;
use guard::finish;

/// The default per-call timeout of store calls made by the executor: 5 s.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(5);

static DEFAULT_EXECUTOR: OnceLock<LockingTaskExecutor> = OnceLock::new();

/// Runs tasks under locks. At most one replica runs a lock's task at a time, the others skip it.
///
/// It holds a [`LockProvider`], this process's owner id and a default `at_most`. Clones are cheap
/// and share everything.
///
/// ```
/// use std::time::Duration;
/// use shedlock_core::{InMemoryLockProvider, LockConfig, LockingTaskExecutor};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> shedlock_core::Result<()> {
/// let executor = LockingTaskExecutor::new(InMemoryLockProvider::new())?;
/// let cfg = LockConfig::builder("nightly-report")
///     .at_most(Duration::from_secs(600))
///     .at_least(Duration::from_secs(30))
///     .build()?;
///
/// match executor.execute(&cfg, async { 42 }).await? {
///     Some(answer) => assert_eq!(answer, 42),
///     None => println!("another replica holds the lock; skipped"),
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct LockingTaskExecutor {
    inner: Arc<Inner>,
}

struct Inner {
    provider: Arc<dyn LockProvider>,
    owner_id: String,
    default_at_most: Option<Duration>,
    default_at_least: Duration,
    call_timeout: Duration,
    drain: Arc<DrainState>,
    /// What `execute_fire`'s recorded releases have said, so each problem is
    /// logged once per executor.
    #[cfg(feature = "scheduler")]
    recording: Arc<crate::keepalive::RecordingLog>,
    /// The store's clock as `execute_fire`'s replies tell it, kept from one call to the next.
    #[cfg(feature = "scheduler")]
    fire_clock: crate::scheduler::StoreClock,
    /// Per lock name, `execute_fire`'s claims whose replies were lost and that no reply has
    /// settled yet. The next call of the lock settles them.
    #[cfg(feature = "scheduler")]
    unsettled: std::sync::Mutex<std::collections::HashMap<String, crate::scheduler::Unsettled>>,
    /// The batches of fire claims, for a store that takes them.
    #[cfg(feature = "scheduler")]
    batcher: Option<Arc<batch::Batcher<batch::Claims>>>,
    /// The batches of releases that record runs, for a store that takes them.
    #[cfg(feature = "scheduler")]
    releases: Option<Arc<batch::Batcher<batch::Releases>>>,
}

impl fmt::Debug for LockingTaskExecutor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockingTaskExecutor")
            .field("owner_id", &self.inner.owner_id)
            .field("default_at_most", &self.inner.default_at_most)
            .field("default_at_least", &self.inner.default_at_least)
            .field("call_timeout", &self.inner.call_timeout)
            .finish_non_exhaustive()
    }
}

/// Builds a [`LockingTaskExecutor`]. See [`LockingTaskExecutor::builder`].
#[must_use]
pub struct LockingTaskExecutorBuilder {
    provider: Arc<dyn LockProvider>,
    owner_id: Option<String>,
    default_at_most: Option<Duration>,
    default_at_least: Duration,
    call_timeout: Duration,
}

impl LockingTaskExecutorBuilder {
    /// This process's owner id, written to `locked_by`. Defaults to
    /// [`default_owner_id`](crate::owner::default_owner_id). It must be unique per process. Two
    /// executors with one id could release each other's locks.
    pub fn owner_id(mut self, owner_id: impl Into<String>) -> Self {
        self.owner_id = Some(owner_id.into());
        self
    }

    /// The `at_most` of locks whose config leaves it out. No default unless set.
    pub fn default_at_most(mut self, at_most: Duration) -> Self {
        self.default_at_most = Some(at_most);
        self
    }

    /// The `at_least` of locks whose config leaves it out: plain `execute`, `try_lock`, and
    /// `#[scheduled_lock]` without `at_least`. Defaults to zero. A `Scheduler`'s jobs keep their
    /// own, see `Job::at_least`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shedlock_core::{InMemoryLockProvider, LockConfig, LockingTaskExecutor};
    ///
    /// let executor = LockingTaskExecutor::builder(InMemoryLockProvider::new())
    ///     .default_at_most(Duration::from_secs(600))
    ///     .default_at_least(Duration::from_secs(30)) // replicas' timers drift up to a few seconds
    ///     .build()?;
    /// assert_eq!(executor.default_at_least(), Duration::from_secs(30));
    /// # Ok::<(), shedlock_core::Error>(())
    /// ```
    pub fn default_at_least(mut self, at_least: Duration) -> Self {
        self.default_at_least = at_least;
        self
    }

    /// How long one store call may take before it fails with [`Error::is_timeout`]. Store calls are
    /// acquire, extend and release. Defaults to [`DEFAULT_CALL_TIMEOUT`] (5 s).
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// Checks the settings and builds the executor.
    ///
    /// # Errors
    ///
    /// [`Error::is_invalid_config`] for an empty or over-long owner id, set in code or in
    /// `SHEDLOCK_OWNER_ID`, a zero or oversized `default_at_most` or call timeout, or an oversized
    /// `default_at_least` or one longer than `default_at_most`.
    pub fn build(self) -> Result<LockingTaskExecutor> {
        let owner_id = match self.owner_id {
            Some(id) => {
                validate_owner_id(&id)?;
                id
            }
            None => default_owner_id()?,
        };
        if let Some(at_most) = self.default_at_most {
            crate::config::validate_durations(at_most, Duration::ZERO)
                .map_err(|e| Error::invalid_config(format!("default_at_most: {e}")))?;
            if self.default_at_least > at_most {
                return Err(Error::invalid_config(format!(
                    "default_at_least ({}) is longer than default_at_most ({})",
                    shedlock_duration::format(self.default_at_least),
                    shedlock_duration::format(at_most)
                )));
            }
        }
        check_max("default_at_least", self.default_at_least)?;
        if self.call_timeout.is_zero() {
            return Err(Error::invalid_config("call_timeout is zero"));
        }
        check_max("call_timeout", self.call_timeout)?;
        #[cfg(feature = "scheduler")]
        let batcher = batch::Batcher::new(&self.provider, &owner_id);
        #[cfg(feature = "scheduler")]
        let releases = batch::Batcher::new(&self.provider, &owner_id);
        Ok(LockingTaskExecutor {
            inner: Arc::new(Inner {
                provider: self.provider,
                owner_id,
                default_at_most: self.default_at_most,
                default_at_least: self.default_at_least,
                call_timeout: self.call_timeout,
                drain: DrainState::new(),
                #[cfg(feature = "scheduler")]
                recording: Arc::default(),
                #[cfg(feature = "scheduler")]
                fire_clock: crate::scheduler::StoreClock::new(),
                #[cfg(feature = "scheduler")]
                unsettled: std::sync::Mutex::default(),
                #[cfg(feature = "scheduler")]
                batcher,
                #[cfg(feature = "scheduler")]
                releases,
            }),
        })
    }
}

/// What happened in one [`LockingTaskExecutor::execute_reported`] run that took the lock.
#[derive(Debug)]
#[non_exhaustive]
pub struct Execution<T> {
    /// The task's output.
    pub output: T,
    /// The fencing token of the acquisition the task ran under.
    pub fencing_token: Option<i64>,
    /// Whether the lock was lost before the task ended, by no extension in time or a takeover.
    /// Another replica may then have run the task concurrently.
    pub lock_lost: bool,
    /// Whether the task ran inside an outer run of the same lock (re-entrancy). The lock then stays
    /// with the outer run and is not released here.
    pub reentrant: bool,
    /// Why the release failed, if it did. The failure is also logged at ERROR and counted. The lock
    /// then ends at its `at_most`. The output is unaffected.
    pub release_error: Option<Error>,
}

impl LockingTaskExecutor {
    /// An executor over `provider` with the defaults of [`builder`](Self::builder).
    ///
    /// # Errors
    ///
    /// [`Error::is_invalid_config`] when `SHEDLOCK_OWNER_ID` is set to an invalid id.
    pub fn new(provider: impl LockProvider) -> Result<Self> {
        Self::builder(provider).build()
    }

    /// Starts an executor with custom settings.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shedlock_core::{InMemoryLockProvider, LockingTaskExecutor};
    ///
    /// let executor = LockingTaskExecutor::builder(InMemoryLockProvider::new())
    ///     .owner_id("billing-7f9c")
    ///     .default_at_most(Duration::from_secs(600))
    ///     .call_timeout(Duration::from_secs(3))
    ///     .build()?;
    /// assert_eq!(executor.owner_id(), "billing-7f9c");
    /// # Ok::<(), shedlock_core::Error>(())
    /// ```
    pub fn builder(provider: impl LockProvider) -> LockingTaskExecutorBuilder {
        LockingTaskExecutorBuilder {
            provider: Arc::new(provider),
            owner_id: None,
            default_at_most: None,
            default_at_least: Duration::ZERO,
            call_timeout: DEFAULT_CALL_TIMEOUT,
        }
    }

    /// The owner id written to `locked_by`.
    #[must_use]
    pub fn owner_id(&self) -> &str {
        &self.inner.owner_id
    }

    /// The default `at_most`, if set.
    #[must_use]
    pub fn default_at_most(&self) -> Option<Duration> {
        self.inner.default_at_most
    }

    /// The default `at_least`, which is zero unless set.
    #[must_use]
    pub fn default_at_least(&self) -> Duration {
        self.inner.default_at_least
    }

    /// The store.
    #[must_use]
    pub fn provider(&self) -> &Arc<dyn LockProvider> {
        &self.inner.provider
    }

    /// Whether the store answers within the call timeout and is set up to keep locks, without
    /// taking a lock. See [`LockProvider::check`]. Use it for a readiness probe, or to fail at
    /// start. `Scheduler::start` makes the same check.
    ///
    /// # Errors
    ///
    /// [`Error::is_missing_table`] or [`Error::is_schema`] when the store is set up wrong, which
    /// retrying will not fix. [`Error::is_backend`] or [`Error::is_timeout`] when it cannot be
    /// reached now.
    ///
    /// ```
    /// use shedlock_core::{InMemoryLockProvider, LockingTaskExecutor};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> shedlock_core::Result<()> {
    /// let executor = LockingTaskExecutor::new(InMemoryLockProvider::new())?;
    /// // In a readiness handler: ready iff the lock store answers.
    /// let ready = match executor.check().await {
    ///     Ok(()) => true,
    ///     Err(error) => {
    ///         tracing::warn!(%error, "not ready: the lock store");
    ///         false
    ///     }
    /// };
    /// assert!(ready);
    /// # Ok(()) }
    /// ```
    pub async fn check(&self) -> Result<()> {
        timed(
            "check",
            self.inner.call_timeout,
            self.inner.provider.check(),
        )
        .await
    }

    /// Installs this executor as the process-wide default, used by `#[scheduled_lock]` functions
    /// that name no `executor`. Call it once at startup.
    ///
    /// # Errors
    ///
    /// [`Error::is_already_installed`] if a default is already installed. That one is kept.
    ///
    /// ```no_run
    /// use shedlock_core::{InMemoryLockProvider, LockingTaskExecutor};
    /// LockingTaskExecutor::new(InMemoryLockProvider::new())?.install_default()?;
    /// assert!(shedlock_core::default_executor().is_ok());
    /// # Ok::<(), shedlock_core::Error>(())
    /// ```
    pub fn install_default(&self) -> Result<()> {
        DEFAULT_EXECUTOR
            .set(self.clone())
            .map_err(|_| Error::already_installed())
    }

    /// Tries to take the lock, without running anything. Answers `Ok(None)` if another holder has
    /// it. The lock is released when the guard is released or dropped, honouring `at_least`. With
    /// `keep_alive`, it is extended in the background until then.
    /// # Errors
    ///
    /// Invalid configuration, such as no `at_most` and no default or a name too long for this
    /// store, a store failure, or a timed-out call, which may still have taken the lock, see
    /// [`Error::is_timeout`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use shedlock_core::{InMemoryLockProvider, LockConfig, LockingTaskExecutor};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> shedlock_core::Result<()> {
    /// let executor = LockingTaskExecutor::new(InMemoryLockProvider::new())?;
    /// let cfg = LockConfig::new("rebuild-index", Duration::from_secs(300))?;
    /// if let Some(guard) = executor.try_lock(&cfg).await? {
    ///     // ... the work ...
    ///     guard.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_lock(&self, cfg: &LockConfig) -> Result<Option<LockGuard>> {
        self.lock(cfg, true).await
    }

    /// [`try_lock`](Self::try_lock), logging a store failure at WARN if `warn`. A scheduler's job
    /// logs its own, once per outage.
    pub(crate) async fn lock(&self, cfg: &LockConfig, warn: bool) -> Result<Option<LockGuard>> {
        self.inner.drain.check_running("lock")?;
        // Until the lock is registered (or given back), a drain waits for this call.
        let _in_flight = self.inner.drain.begin_acquire();
        // Checked here, before the store is asked; `hold` applies the same at_least.
        let (at_most, _) =
            cfg.effective(self.inner.default_at_most, self.inner.default_at_least)?;
        let name = cfg.name();
        validate_name(name, self.inner.provider.max_name_len())?;
        observe::attempt(name);
        tracing::trace!(lock = name, "attempting to lock");
        let sent_at = Instant::now();
        let record = match self.acquire(name, at_most).await {
            Ok(Some(record)) => record,
            Ok(None) => {
                tracing::debug!(lock = name, "lock held elsewhere; skipped");
                observe::skipped(name);
                return Ok(None);
            }
            Err(error) => {
                if warn {
                    tracing::warn!(
                        lock = name,
                        error = &error as &dyn std::error::Error,
                        "could not acquire lock"
                    );
                }
                observe::error(name, "acquire");
                return Err(error);
            }
        };
        self.hold(record, sent_at, at_most, cfg).await.map(Some)
    }

    /// Turns a record this executor's store just granted into a guard. An acquire or a fire claim
    /// sent at `sent_at` granted it. The guard brings the local deadline, keep-alive, and the
    /// drain's registration.
    pub(crate) async fn hold(
        &self,
        record: LockRecord,
        sent_at: Instant,
        at_most: Duration,
        cfg: &LockConfig,
    ) -> Result<LockGuard> {
        let at_least = cfg.at_least_if_set().unwrap_or(self.inner.default_at_least);
        let name = cfg.name();
        let lease = Lease::new(
            self.inner.provider.clone(),
            self.inner.call_timeout,
            record,
            sent_at,
            at_most,
        );
        #[cfg(feature = "scheduler")]
        if let Some(releases) = &self.inner.releases {
            lease.batch_releases(releases);
        }
        if lease.is_lost() {
            // The reply came back after at_most had passed: another replica may hold it by now.
            tracing::warn!(lock = name, "lock acquired too late to use; releasing it");
            observe::error(name, "acquire");
            let _ = lease.release(Duration::ZERO).await;
            return Err(Error::timeout("acquire", at_most));
        }
        let keeper = cfg.keep_alive().then(|| {
            lease.spawn_renewal(RenewPolicy {
                lease: at_most,
                renew_every: at_most / 2,
                retry_every: (at_most / 10).max(Duration::from_millis(100)),
                valid_for: at_most,
            })
        });
        let registration = match self.inner.drain.register(
            &lease,
            at_least,
            keeper.as_ref().map(JoinHandle::abort_handle),
        ) {
            Ok(registration) => registration,
            Err(shutdown) => {
                // The drain began while the acquire was in flight: give the lock back.
                tracing::debug!(lock = name, "shutting down; releasing a lock just acquired");
                let _ = finish(lease, keeper, Duration::ZERO).await;
                return Err(shutdown);
            }
        };
        tracing::debug!(lock = name, token = ?lease.record().fencing_token(), "lock acquired");
        observe::acquired(name);
        Ok(LockGuard {
            handle: LockHandle::with_cancel(lease, registration.cancel_signal()),
            at_least,
            keeper,
            registration: Some(registration),
            released: false,
        })
    }

    /// One fire claim through this executor's store, with its owner id, call timeout and drain,
    /// sent in a batch with the claims that meet it where the store takes batches
    /// ([`batch`]). A claimed fire comes back as a guard if `take` says the caller runs it. A claim it does not
    /// take is left as it is, because another job loop of this process runs it. The answer also has
    /// the local instants the call was sent and answered, from which a scheduler learns the store's
    /// clock.
    #[cfg(feature = "scheduler")]
    pub(crate) async fn claim_fire(
        &self,
        cfg: &LockConfig,
        fire: &Fire,
        take: impl FnOnce(&LockRecord) -> bool,
    ) -> Result<FireAttempt> {
        self.inner.drain.check_running("fire claim")?;
        let _in_flight = self.inner.drain.begin_acquire();
        let (at_most, _) = cfg.effective(self.inner.default_at_most, Duration::ZERO)?;
        let name = cfg.name();
        let timeout = self.inner.call_timeout.min(at_most);
        let (reply, sent, received) = if let Some(batcher) = &self.inner.batcher {
            let answer = batcher.claim(name, fire, at_most, timeout).await;
            (answer.reply, answer.sent, answer.received)
        } else {
            let sent = Instant::now();
            let reply = timed(
                "claim_fire",
                timeout,
                self.inner
                    .provider
                    .claim_fire(name, fire, at_most, &self.inner.owner_id),
            )
            .await;
            (reply, sent, Instant::now())
        };
        let reply = reply.inspect_err(|error| {
            if !error.is_unsupported() {
                observe::error(name, "claim_fire");
            }
        })?;
        let guard = match &reply {
            FireClaim::Claimed(record) if take(record) => {
                Some(self.hold(record.clone(), sent, at_most, cfg).await?)
            }
            _ => None,
        };
        Ok(FireAttempt {
            reply,
            guard,
            sent,
            received,
        })
    }

    /// One trigger claim through this executor's store, as [`claim_fire`](Self::claim_fire) is for
    /// fires, under this executor's owner id marked [`TRIGGER_MARK`](crate::admin::TRIGGER_MARK): a
    /// claimed trigger comes back as a guard, with the instants the call was sent and answered.
    #[cfg(feature = "scheduler")]
    pub(crate) async fn claim_trigger(
        &self,
        cfg: &LockConfig,
        id: i64,
    ) -> Result<(
        crate::trigger::TriggerClaim,
        Option<LockGuard>,
        Instant,
        Instant,
    )> {
        self.inner.drain.check_running("trigger claim")?;
        let _in_flight = self.inner.drain.begin_acquire();
        let (at_most, _) = cfg.effective(self.inner.default_at_most, Duration::ZERO)?;
        let name = cfg.name();
        let owner = crate::admin::trigger_owner(&self.inner.owner_id);
        let sent = Instant::now();
        let reply = timed(
            "claim_trigger",
            self.inner.call_timeout.min(at_most),
            self.inner.provider.claim_trigger(name, id, at_most, &owner),
        )
        .await;
        let received = Instant::now();
        let reply = reply.inspect_err(|_| observe::error(name, "claim_trigger"))?;
        let guard = match &reply {
            crate::trigger::TriggerClaim::Claimed(record) => {
                Some(self.hold(record.clone(), sent, at_most, cfg).await?)
            }
            _ => None,
        };
        Ok((reply, guard, sent, received))
    }

    /// Takes over `record`, a claim of this executor whose reply was lost, as a guard. The
    /// scheduler has checked that it is one (see docs/guarantees.md, "Lost replies"). The guard's
    /// local deadline counts from `since`, when the first uncertain claim was sent. So it is never
    /// later than the store's.
    #[cfg(feature = "scheduler")]
    pub(crate) async fn adopt_claim(
        &self,
        cfg: &LockConfig,
        record: LockRecord,
        since: Instant,
    ) -> Result<LockGuard> {
        self.inner.drain.check_running("fire claim")?;
        let _in_flight = self.inner.drain.begin_acquire();
        let (at_most, _) = cfg.effective(self.inner.default_at_most, Duration::ZERO)?;
        self.hold(record, since, at_most, cfg).await
    }

    /// Who holds `name` now, read within the call timeout. Used for a claim whose reply was lost.
    #[cfg(feature = "scheduler")]
    pub(crate) async fn holder(&self, name: &str) -> Result<Option<LockRecord>> {
        timed(
            "holder",
            self.inner.call_timeout,
            self.inner.provider.holder(name),
        )
        .await
    }

    /// Releases `record` at once, with `at_least` 0, within the call timeout. `record` is a claim
    /// of this executor whose reply was lost and whose fire is not run.
    #[cfg(feature = "scheduler")]
    pub(crate) async fn release_unrun(&self, record: &LockRecord) -> Result<bool> {
        timed(
            "release",
            self.inner.call_timeout,
            self.inner.provider.release(record, Duration::ZERO),
        )
        .await
    }

    /// The per-call timeout of store calls.
    #[cfg(feature = "scheduler")]
    pub(crate) fn call_timeout(&self) -> Duration {
        self.inner.call_timeout
    }

    /// The store's clock as this executor's fire runs learned it.
    #[cfg(feature = "scheduler")]
    pub(crate) fn fire_clock(&self) -> &crate::scheduler::StoreClock {
        &self.inner.fire_clock
    }

    /// Keeps `unsettled`, the lost claims of a fire of `name`, for a later call to settle, in place
    /// of any kept before.
    #[cfg(feature = "scheduler")]
    pub(crate) fn keep_unsettled(&self, name: &str, unsettled: crate::scheduler::Unsettled) {
        self.inner
            .unsettled
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(name.to_owned(), unsettled);
    }

    /// Takes the lost claims of `name` kept for settling, if any.
    #[cfg(feature = "scheduler")]
    pub(crate) fn take_unsettled(&self, name: &str) -> Option<crate::scheduler::Unsettled> {
        self.inner
            .unsettled
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(name)
    }

    /// Sleeps `wait`, or less if the drain begins. Returns whether it slept it all with the
    /// executor still running.
    #[cfg(feature = "scheduler")]
    pub(crate) async fn sleep_unless_draining(&self, wait: Duration) -> bool {
        let phase = self.inner.drain.phase();
        tokio::select! {
            () = tokio::time::sleep(wait) => !self.is_shutting_down(),
            () = crate::drain::reached(phase, crate::drain::DrainPhase::Draining) => false,
        }
    }

    /// What this executor's recorded releases have logged.
    #[cfg(feature = "scheduler")]
    pub(crate) fn recording(&self) -> &Arc<crate::keepalive::RecordingLog> {
        &self.inner.recording
    }

    /// Shuts the executor down gracefully, all its clones too. It returns once every lock it handed
    /// out is released, or its release has failed. The steps:
    ///
    /// 1. At once, new runs are refused. [`execute`](Self::execute) and
    ///    [`try_lock`](Self::try_lock) return an error with [`Error::is_shutdown`]. They never
    ///    return `Ok(None)`, which would read as "held elsewhere". Runs in flight are told:
    ///    [`LockHandle::stopping`] resolves and [`LockHandle::is_stopping`] turns true.
    /// 2. Runs and [`LockGuard`]s in flight get up to `grace` to finish and release as usual.
    /// 3. Then the rest are cancelled. [`LockHandle::cancelled`] resolves and
    ///    [`LockHandle::is_cancelled`] turns true. A task reaches them through
    ///    [`current_lock`](crate::current_lock). A cancelled run gets a stop window of one second,
    ///    or the call timeout if shorter, to stop and release its own lock. So work that stops when
    ///    told never goes on after its lock was given back. The executor then releases the locks
    ///    still held itself, honouring each `at_least`, and their handles report the lock lost.
    /// 4. It waits for those releases and for releases running in the background, such as a dropped
    ///    guard's. Each is bounded by the call timeout.
    ///
    /// So it returns within `grace` plus the stop window plus about two call timeouts even when the
    /// store hangs, because a failed background release is tried once more. With a store that
    /// answers, it returns within `grace` plus one call. A deploy never leaves a lock held to its
    /// `at_most`. A task that ignores the signal is not stopped and goes on, without its lock,
    /// until the process exits. Calling it again, or on a clone, waits for the same drain.
    ///
    /// With a [`LeaderLatch`](crate::LeaderLatch) or a `Scheduler`, use
    /// [`Shutdown`](crate::Shutdown), which hands leadership over at once.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shedlock_core::{InMemoryLockProvider, LockConfig, LockingTaskExecutor};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> shedlock_core::Result<()> {
    /// let executor = LockingTaskExecutor::new(InMemoryLockProvider::new())?;
    /// let cfg = LockConfig::new("report", Duration::from_secs(60))?;
    /// let guard = executor.try_lock(&cfg).await?.expect("free");
    /// tokio::spawn(async move {
    ///     tokio::time::sleep(Duration::from_secs(2)).await;
    ///     guard.release().await // finishes within the grace
    /// });
    /// let drained = executor.shutdown(Duration::from_secs(10)).await;
    /// assert_eq!((drained.finished, drained.cancelled), (1, 0));
    /// assert!(executor.try_lock(&cfg).await.unwrap_err().is_shutdown());
    /// # Ok(()) }
    /// ```
    pub async fn shutdown(&self, grace: Duration) -> Drained {
        self.inner.drain.drain(grace, self.inner.call_timeout).await
    }

    /// Begins the drain without waiting (see [`Shutdown`](crate::Shutdown)). New runs are refused
    /// and runs in flight see [`LockHandle::stopping`] at once.
    pub(crate) fn begin_shutdown(&self) {
        self.inner.drain.begin();
    }

    /// Whether `other` is this executor or a clone of it.
    pub(crate) fn same_as(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Whether [`shutdown`](Self::shutdown) has begun. New runs are then refused.
    #[must_use]
    pub fn is_shutting_down(&self) -> bool {
        self.inner.drain.is_stopping()
    }

    /// Runs `task` if the lock is free and answers `Ok(Some(output))`, with a task's own error
    /// inside, as `Ok(Some(Err(e)))`. Answers `Ok(None)` if another holder has the lock. The task
    /// is then skipped, not queued.
    ///
    /// The lock is released when the task completes, fails or panics, or when this future is
    /// dropped. A failed release is logged and never loses the output. Inside the task,
    /// [`current_lock`](crate::current_lock) and [`assert_locked`](crate::current::assert_locked)
    /// work. A nested run of a lock the task already holds runs directly (re-entrancy). For the
    /// lost-lock and release details, use [`execute_reported`](Self::execute_reported).
    ///
    /// # Errors
    ///
    /// As [`try_lock`](Self::try_lock). The task did not run.
    ///
    /// # Panics
    ///
    /// Resumes the task's panic, after releasing the lock.
    pub async fn execute<F: Future>(&self, cfg: &LockConfig, task: F) -> Result<Option<F::Output>> {
        Ok(self
            .execute_reported(cfg, task)
            .await?
            .map(|execution| execution.output))
    }

    /// [`execute`](Self::execute), reporting whether the lock was lost during the run and how the
    /// release went.
    ///
    /// # Errors
    ///
    /// As [`try_lock`](Self::try_lock).
    ///
    /// # Panics
    ///
    /// Resumes the task's panic, after releasing the lock.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shedlock_core::{InMemoryLockProvider, LockConfig, LockingTaskExecutor};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> shedlock_core::Result<()> {
    /// let executor = LockingTaskExecutor::new(InMemoryLockProvider::new())?;
    /// let cfg = LockConfig::new("sync", Duration::from_secs(60))?;
    /// let run = executor.execute_reported(&cfg, async { "done" }).await?.expect("free");
    /// assert_eq!(run.output, "done");
    /// assert!(!run.lock_lost && run.release_error.is_none());
    /// # Ok(()) }
    /// ```
    pub async fn execute_reported<F: Future>(
        &self,
        cfg: &LockConfig,
        task: F,
    ) -> Result<Option<Execution<F::Output>>> {
        let span = tracing::info_span!("shedlock", lock = cfg.name());
        self.run(cfg, task).instrument(span).await
    }

    async fn run<F: Future>(
        &self,
        cfg: &LockConfig,
        task: F,
    ) -> Result<Option<Execution<F::Output>>> {
        if let Some(outer) = current::holds(cfg.name(), &self.inner.provider) {
            tracing::trace!("lock already held by this task; running re-entrantly");
            let output = task.await;
            return Ok(Some(Execution {
                output,
                fencing_token: outer.fencing_token(),
                lock_lost: outer.is_lost(),
                reentrant: true,
                release_error: None,
            }));
        }
        let Some(guard) = self.try_lock(cfg).await? else {
            return Ok(None);
        };
        Ok(Some(run_under(guard, task, |_| {}).await))
    }
}

/// How a task ended: its output, or the panic it raised.
pub(crate) type Ended<T> = std::result::Result<T, Box<dyn Any + Send>>;

/// Runs `task` under `guard`, with the lock as its current one, then releases the lock. Before the
/// release, `ended` sees how the task ended, so a fire's release can record it. A panic resumes
/// after the release.
pub(crate) async fn run_under<F: Future>(
    guard: LockGuard,
    task: F,
    ended: impl FnOnce(&Ended<F::Output>),
) -> Execution<F::Output> {
    let handle = guard.handle.clone();
    let started = Instant::now();
    let outcome = current::scope(handle.clone(), catch_unwind_future(task)).await;
    observe::task_duration(handle.name(), started.elapsed());
    ended(&outcome);
    let lock_lost = handle.is_lost();
    if lock_lost {
        tracing::warn!("the lock was lost while the task ran; another replica may have run it too");
    }
    let release_error = guard.release().await.err();
    match outcome {
        Ok(output) => Execution {
            output,
            fencing_token: handle.fencing_token(),
            lock_lost,
            reentrant: false,
            release_error,
        },
        Err(panic) => resume_unwind(panic),
    }
}

/// A fire claim's reply, the guard if it claimed, and when it was sent and answered.
#[cfg(feature = "scheduler")]
pub(crate) struct FireAttempt {
    pub(crate) reply: FireClaim,
    pub(crate) guard: Option<LockGuard>,
    pub(crate) sent: Instant,
    pub(crate) received: Instant,
}

/// The process-wide default executor installed with [`LockingTaskExecutor::install_default`].
///
/// # Errors
///
/// [`Error::is_no_executor`] when none is installed. The message says how to install one.
///
/// ```
/// // Before `install_default`, asking is an error, never a panic:
/// let missing = shedlock_core::default_executor().unwrap_err();
/// assert!(missing.is_no_executor());
/// ```
pub fn default_executor() -> Result<&'static LockingTaskExecutor> {
    DEFAULT_EXECUTOR.get().ok_or_else(Error::no_executor)
}

/// Runs `task`, turning a panic into `Err` so the lock can be released before the panic resumes.
pub(crate) async fn catch_unwind_future<F: Future>(
    task: F,
) -> std::result::Result<F::Output, Box<dyn Any + Send>> {
    let mut task = std::pin::pin!(task);
    std::future::poll_fn(move |cx| {
        match catch_unwind(AssertUnwindSafe(|| task.as_mut().poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(output)) => Poll::Ready(Ok(output)),
            Err(panic) => Poll::Ready(Err(panic)),
        }
    })
    .await
}
