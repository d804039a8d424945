//! Running jobs on a schedule, each fire at most once across replicas. Feature `scheduler`.
//!
//! It holds [`Scheduler`], [`Job`] and [`Schedule`]. A [`JobSpec`] is a job's settings as data.
//! [`JobStatus`] and [`RunOutcome`] are what a job reports.

mod clock;
mod fire_run;
#[cfg(test)]
mod fire_run_tests;
mod job;
mod job_loop;
mod ledger;
mod lost;
mod on_held;
mod publish;
pub(crate) mod span;
mod spec;
#[cfg(test)]
mod state_tests;
mod status;
#[cfg(test)]
mod tests;
mod trigger_loop;
#[cfg(test)]
mod trigger_tests;

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::DateTime;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep_until};

pub use fire_run::FireRun;
pub use job::{Job, JobOutput, RunContext};
pub use on_held::OnHeld;
pub use publish::{DEFINITIONS_HEARTBEAT, DEFINITIONS_TTL};
pub use spec::JobSpec;
pub use status::{JobStatus, LastRun, RunOutcome};
pub use trigger_loop::DEFAULT_TRIGGER_POLL;

pub use crate::schedule::Schedule;

use crate::config::LockConfig;
use crate::drain::Drained;
use crate::error::{Error, Result};
use crate::executor::LockingTaskExecutor;
use crate::fire::Fire;
use crate::keepalive::RecordingLog;
use crate::latch::LeaderLatch;
use crate::outage::{Cause, Outage};
pub(crate) use clock::StoreClock;
use job::BoxedBody;
use job_loop::job_loop;
pub(crate) use lost::Unsettled;
use status::Counters;

/// Fire claims not known to work yet, for lack of a reply so far.
const MODE_UNKNOWN: u8 = 0;
/// The store records fires.
const MODE_CLAIMS: u8 = 1;
/// The store has no fire claims: plain locks and `at_least`.
const MODE_PLAIN: u8 = 2;

/// Runs [`Job`]s on their [`Schedule`]s over a [`LockingTaskExecutor`], each fire at most once
/// across the replicas that share the executor's store.
///
/// A *fire* is a job's scheduled instant `F`, with the window `[F, next fire)`. At `F`, every
/// replica asks the store to claim the fire with [`LockProvider::claim_fire`]. The store checks the
/// window, the recorded fire and the lock in one atomic step on the **store's** clock. One replica
/// wins and runs the body. The others count the fire as claimed elsewhere, or as held.
///
/// Replicas time their claims by the store's clock, learned from the claims' replies, so a replica
/// whose clock is off still fires on time. No run starts before `F` by the store's clock. A claim
/// that arrives early is answered "too early, the store's now is …", and the replica waits the
/// difference and asks again.
///
/// # What is guaranteed
///
/// - **At most once per fire**, across replicas, with a store that records fires.
/// - **Once whenever a replica is up and free** inside the window.
/// - A fire whose run crashed is **not re-run**. Its lock holds until `at_most`, as always.
/// - A fire met while the previous run still holds the lock is **counted** as `held`, never queued.
///   The exception is a job that runs it late when the lock frees inside its window
///   ([`Job::on_held`], [`OnHeld::RunLate`]).
/// - A fire whose window passes before this replica could claim it is counted `missed` here.
///   Another replica may have run it.
/// - A claim's reply may be lost, by a timeout or a cut connection. This replica runs such a claim
///   if it committed and its window is still open. Otherwise the job's next claim releases it
///   unrun. It is never recognised by the owner id alone (see docs/guarantees.md, "Lost replies").
/// - With fire claims, `at_least` defaults to 0. The claim, not a minimum hold, keeps replicas
///   apart.
/// - Some stores have no fire claims: a SQL table without `last_fire`, or a custom store without
///   [`claim_fire`](crate::provider::LockProvider::claim_fire). On them, jobs fall back to plain
///   locks with their `at_least`. One warning is logged at start. One more is logged per job whose
///   `at_least` is 0, because replicas whose clocks differ may then each run a fire.
/// - Java services never record fires, so a job shared with a Java service is not once per fire.
///
/// # Catch-up
///
/// Off by default, per job ([`Job::catch_up`]). On start, the job claims the latest fire at or
/// before the store's now, once. It runs iff no replica recorded that fire or a later one, and the
/// lock is free. The store cannot tell "never recorded" from "recorded an older fire", so a job
/// that has never run anywhere also runs once at its first start.
///
/// # Leader-only jobs and shutdown
///
/// See [`Job::leader_only`], [`shutdown`](Self::shutdown) and [`Shutdown`](crate::Shutdown), which
/// also closes the jobs' latches at once.
///
/// ```
/// use std::time::Duration;
/// use shedlock_core::{InMemoryLockProvider, Job, LockingTaskExecutor, Schedule, Scheduler};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> shedlock_core::Result<()> {
/// let executor = LockingTaskExecutor::builder(InMemoryLockProvider::new())
///     .default_at_most(Duration::from_secs(60))
///     .build()?;
/// let scheduler = Scheduler::new(executor);
/// scheduler.add(Job::new("tick", Schedule::every(Duration::from_secs(10))?, |run| async move {
///     tracing::info!(fire = %run.fire().at(), "tick");
/// }))?;
/// scheduler.start().await?;
/// tokio::time::sleep(Duration::from_secs(60)).await;
/// let status = scheduler.status("tick").expect("registered");
/// assert!(status.runs >= 5);
/// scheduler.shutdown(Duration::from_secs(5)).await;
/// # Ok(()) }
/// ```
///
/// [`LockProvider::claim_fire`]: crate::provider::LockProvider::claim_fire
#[derive(Clone)]
pub struct Scheduler {
    shared: Arc<Shared>,
}

struct Shared {
    executor: LockingTaskExecutor,
    clock: StoreClock,
    jobs: Mutex<Vec<Arc<Entry>>>,
    mode: AtomicU8,
    started: AtomicBool,
    /// `start` has checked the store and spawned the jobs, so `add` spawns a new job at once. Set
    /// and read under `jobs`' lock.
    running: AtomicBool,
    /// [`Scheduler::require_store`].
    require_store: AtomicBool,
    stopping: watch::Sender<bool>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    /// What was said about recording the runs, each thing once.
    recording: Arc<RecordingLog>,
    /// [`Scheduler::trigger_poll`], in milliseconds.
    trigger_poll_ms: std::sync::atomic::AtomicU64,
    /// The triggers this scheduler is claiming or running, by id.
    triggers_in_flight: Mutex<std::collections::HashSet<i64>>,
}

struct Entry {
    name: String,
    /// The job's settings as registered, shown in its status.
    spec: JobSpec,
    cfg: LockConfig,
    schedule: Schedule,
    body: BoxedBody,
    catch_up: bool,
    on_held: OnHeld,
    leader: Option<LeaderLatch>,
    counters: Counters,
    /// Lost claims of a fire whose window passed unrun (see `lost`).
    unsettled: Mutex<Option<lost::Unsettled>>,
    /// The job's failing store calls, logged once per outage.
    outage: Mutex<Outage>,
}

impl Entry {
    fn take_unsettled(&self) -> Option<lost::Unsettled> {
        self.unsettled
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

impl fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let jobs: Vec<String> = self.jobs().iter().map(|j| j.name.clone()).collect();
        f.debug_struct("Scheduler")
            .field("executor", &self.shared.executor)
            .field("jobs", &jobs)
            .field("fire_claims", &self.uses_fire_claims())
            .finish_non_exhaustive()
    }
}

impl Scheduler {
    /// A scheduler that runs its jobs through `executor`. The executor gives the store, owner id,
    /// call timeout and default `at_most`. Add jobs, then [`start`](Self::start) it.
    #[must_use]
    pub fn new(executor: LockingTaskExecutor) -> Self {
        Self {
            shared: Arc::new(Shared {
                executor,
                clock: StoreClock::new(),
                jobs: Mutex::new(Vec::new()),
                mode: AtomicU8::new(MODE_UNKNOWN),
                started: AtomicBool::new(false),
                running: AtomicBool::new(false),
                require_store: AtomicBool::new(false),
                stopping: watch::channel(false).0,
                tasks: Mutex::new(Vec::new()),
                recording: Arc::new(RecordingLog::default()),
                trigger_poll_ms: std::sync::atomic::AtomicU64::new(
                    u64::try_from(DEFAULT_TRIGGER_POLL.as_millis()).unwrap_or(u64::MAX),
                ),
                triggers_in_flight: Mutex::new(std::collections::HashSet::new()),
            }),
        }
    }

    fn jobs(&self) -> Vec<Arc<Entry>> {
        self.shared
            .jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Registers a job. After [`start`](Self::start), it starts at once.
    ///
    /// # Errors
    ///
    /// [`Error::is_invalid_config`] when the job has no `at_most` and the executor no default, its
    /// lock settings are invalid, its schedule never fires again, another job has the same name or
    /// lock name, or its `at_least` is not shorter than the schedule's shortest gap, so every other
    /// fire would find the lock held.
    ///
    /// [`Error::is_shutdown`] after [`shutdown`](Self::shutdown).
    ///
    /// ```
    /// use std::time::Duration;
    /// use shedlock_core::{InMemoryLockProvider, Job, LockingTaskExecutor, Schedule, Scheduler};
    ///
    /// let scheduler = Scheduler::new(LockingTaskExecutor::new(InMemoryLockProvider::new())?);
    /// let minutely = Schedule::every(Duration::from_secs(60))?;
    /// let job = |name| Job::new(name, minutely.clone(), |_| async {}).at_most(Duration::from_secs(30));
    /// scheduler.add(job("sync"))?;
    /// assert!(scheduler.add(job("sync")).unwrap_err().is_invalid_config(), "one name, one job");
    /// let slow = job("slow").at_most(Duration::from_secs(120)).at_least(Duration::from_secs(60));
    /// assert!(scheduler.add(slow).unwrap_err().to_string().contains("shortest gap"));
    /// # Ok::<(), shedlock_core::Error>(())
    /// ```
    pub fn add(&self, job: Job) -> Result<()> {
        if *self.shared.stopping.borrow() {
            return Err(Error::shutdown("scheduler"));
        }
        let executor = &self.shared.executor;
        let spec = job.spec;
        let cfg = spec.lock_config(
            executor.default_at_most(),
            executor.provider().max_name_len(),
            self.shared.clock.store_now(),
        )?;
        if cfg.at_most().is_none() {
            return Err(Error::invalid_config(format!(
                "job {:?} has no at_most and the executor no default_at_most: set one",
                spec.name
            )));
        }
        let entry = Arc::new(Entry {
            name: spec.name.clone(),
            cfg,
            schedule: spec.schedule.clone(),
            body: job.body,
            catch_up: spec.catch_up,
            on_held: spec.on_held,
            spec,
            leader: job.leader,
            counters: Counters::default(),
            unsettled: Mutex::new(None),
            outage: Mutex::new(Outage::default()),
        });
        let spawn_now = {
            let mut jobs = self
                .shared
                .jobs
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if let Some(other) = jobs
                .iter()
                .find(|j| j.name == entry.name || j.cfg.name() == entry.cfg.name())
            {
                return Err(Error::invalid_config(if other.name == entry.name {
                    format!("a job named {:?} is already registered", entry.name)
                } else {
                    format!(
                        "jobs {:?} and {:?} use one lock name {:?}: give each job its own",
                        other.name,
                        entry.name,
                        entry.cfg.name()
                    )
                }));
            }
            jobs.push(entry.clone());
            // Read under the jobs' lock, where `start` sets it and takes its list: a job is
            // spawned either here or by `start`, never by both, and never before the store
            // checked out.
            self.shared.running.load(Ordering::SeqCst)
        };
        if spawn_now {
            if self.shared.mode.load(Ordering::SeqCst) == MODE_PLAIN {
                warn_plain_at_least(&entry);
            }
            self.spawn(entry);
        }
        Ok(())
    }

    /// Whether [`start`](Self::start) fails when the store cannot be reached. It is `false` by
    /// default: the jobs start and keep retrying. So a service starting while its database restarts
    /// does not crash-loop. A store that is set up wrong fails `start` either way.
    ///
    /// ```
    /// use shedlock_core::{InMemoryLockProvider, LockingTaskExecutor, Scheduler};
    ///
    /// let executor = LockingTaskExecutor::new(InMemoryLockProvider::new())?;
    /// let scheduler = Scheduler::new(executor).require_store(true);
    /// # Ok::<(), shedlock_core::Error>(())
    /// ```
    #[must_use]
    pub fn require_store(self, required: bool) -> Self {
        self.shared.require_store.store(required, Ordering::SeqCst);
        self
    }

    /// How often this scheduler reads the store's pending triggers ("run now", see
    /// [`trigger`](crate::trigger)) when the store has no push. One read per interval, whatever the
    /// number of jobs. Default [`DEFAULT_TRIGGER_POLL`] (2 s); at least 100 ms. Stores with a push
    /// (Postgres, Redis) are read when it wakes them, and every 30 s besides.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shedlock_core::{InMemoryLockProvider, LockingTaskExecutor, Scheduler};
    ///
    /// let executor = LockingTaskExecutor::new(InMemoryLockProvider::new())?;
    /// let scheduler = Scheduler::new(executor).trigger_poll(Duration::from_secs(5));
    /// # Ok::<(), shedlock_core::Error>(())
    /// ```
    #[must_use]
    pub fn trigger_poll(self, every: Duration) -> Self {
        let ms = u64::try_from(every.as_millis())
            .unwrap_or(u64::MAX)
            .max(100);
        self.shared.trigger_poll_ms.store(ms, Ordering::Relaxed);
        self
    }

    /// Starts every registered job, and any added later.
    ///
    /// It first asks the store whether it is set up, whether it records fires and what its clock
    /// reads, with a claim of a fire a year ahead that is always "too early" and writes nothing.
    /// Without jobs or fire claims, it checks the store as [`check`](Self::check) does.
    ///
    /// Once started, it publishes its jobs' definitions, [`JobSpec`]s, to the store under its owner
    /// id with [`LockProvider::publish_definitions`], and again every [`DEFINITIONS_HEARTBEAT`].
    /// Each entry stands for [`DEFINITIONS_TTL`]. So operators' tools such as `shedlock jobs` show
    /// the schedules without the application. A job added later is published at the next heartbeat.
    /// A store that keeps no definitions is skipped. One without the definitions table is told so
    /// once and asked again every 10 minutes. A failing publish never stops a job.
    ///
    /// [`LockProvider::publish_definitions`]: crate::provider::LockProvider::publish_definitions
    ///
    /// # Errors
    ///
    /// - A store that is set up wrong: [`Error::is_missing_table`] or [`Error::is_schema`]. Or
    ///   [`Error::is_invalid_config`] for a setting the store cannot hold, such as an owner id
    ///   longer than its column. No job starts. Fix the store and call `start` again.
    /// - A store that cannot be reached ([`Error::is_backend`], [`Error::is_timeout`]), only with
    ///   [`require_store(true)`](Self::require_store). By default one warning says so, and each job
    ///   keeps retrying, logging its failures once per outage.
    /// - [`Error::is_invalid_config`] if it was already started.
    /// - [`Error::is_shutdown`] after [`shutdown`](Self::shutdown).
    ///
    /// ```
    /// use std::time::Duration;
    /// use shedlock_core::testkit::{Fault, FaultyProvider, Operation};
    /// use shedlock_core::{InMemoryLockProvider, Job, LockingTaskExecutor, Schedule, Scheduler};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> shedlock_core::Result<()> {
    /// let store = std::sync::Arc::new(FaultyProvider::new(InMemoryLockProvider::new()));
    /// store.inject(Operation::ClaimFire, Fault::Fail); // the database is down
    /// let executor = LockingTaskExecutor::builder(store.clone())
    ///     .default_at_most(Duration::from_secs(60))
    ///     .build()?;
    /// let every = Schedule::every(Duration::from_secs(10))?;
    /// let strict = Scheduler::new(executor.clone()).require_store(true);
    /// strict.add(Job::new("sync", every.clone(), |_| async {}))?;
    /// assert!(strict.start().await.unwrap_err().is_backend());
    /// let lenient = Scheduler::new(executor);
    /// lenient.add(Job::new("sync", every, |_| async {}))?;
    /// lenient.start().await?; // starts, and retries until the store is back
    /// # Ok(()) }
    /// ```
    pub async fn start(&self) -> Result<()> {
        if *self.shared.stopping.borrow() {
            return Err(Error::shutdown("scheduler"));
        }
        if self.shared.started.swap(true, Ordering::SeqCst) {
            return Err(Error::invalid_config("the scheduler is already started"));
        }
        let first = self.jobs().first().map(|j| j.cfg.clone());
        if let Err(error) = self.shared.probe(first.as_ref()).await {
            // Not started: once the store is fixed, `start` may be called again.
            self.shared.started.store(false, Ordering::SeqCst);
            return Err(error);
        }
        // The jobs added while the store was checked are in this list; from here on `add`
        // spawns its job itself.
        let jobs = {
            let jobs = self
                .shared
                .jobs
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            self.shared.running.store(true, Ordering::SeqCst);
            jobs.clone()
        };
        for job in jobs {
            self.spawn(job);
        }
        let publishing = tokio::spawn(publish::publish_loop(self.shared.clone()));
        let triggers = tokio::spawn(trigger_loop::trigger_loop(self.shared.clone()));
        self.shared
            .tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend([publishing, triggers]);
        Ok(())
    }

    fn spawn(&self, job: Arc<Entry>) {
        // The fire the loop decides first, known from now on: a status read right after
        // `start` returns shows it (the loop sets it again as it goes). The loop starts from this
        // instant, not from when its task is first polled: on a busy runtime that may be after a
        // fire, which would otherwise be neither claimed nor counted.
        let start = self.shared.clock.store_now();
        job.counters
            .set_next_fire(job_loop::first_fire(&self.shared, &job, start));
        let handle = tokio::spawn(job_loop(self.shared.clone(), job, start));
        self.shared
            .tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(handle);
    }

    /// Whether the store answers and is set up, for a readiness probe. See its executor's
    /// [`check`](LockingTaskExecutor::check).
    ///
    /// # Errors
    ///
    /// As [`LockingTaskExecutor::check`].
    pub async fn check(&self) -> Result<()> {
        self.shared.executor.check().await
    }

    /// The state of the job `name`: next fire, last run, counts.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shedlock_core::{InMemoryLockProvider, Job, LockingTaskExecutor, Schedule, Scheduler};
    ///
    /// let scheduler = Scheduler::new(LockingTaskExecutor::new(InMemoryLockProvider::new())?);
    /// let every = Schedule::every(Duration::from_secs(60))?;
    /// scheduler.add(Job::new("sync", every, |_| async {}).at_most(Duration::from_secs(30)))?;
    /// let status = scheduler.status("sync").expect("registered");
    /// assert_eq!((status.runs, status.missed), (0, 0));
    /// assert!(scheduler.status("nope").is_none());
    /// # Ok::<(), shedlock_core::Error>(())
    /// ```
    #[must_use]
    pub fn status(&self, name: &str) -> Option<JobStatus> {
        self.jobs()
            .iter()
            .find(|j| j.name == name)
            .map(|j| j.counters.snapshot(&j.spec))
    }

    /// The state of every job, in registration order.
    #[must_use]
    pub fn statuses(&self) -> Vec<JobStatus> {
        self.jobs()
            .iter()
            .map(|j| j.counters.snapshot(&j.spec))
            .collect()
    }

    /// Whether the store records fires. `Some(true)` once a claim was answered. `Some(false)` when
    /// the store does not support them, so jobs use plain locks. `None` before any reply.
    #[must_use]
    pub fn uses_fire_claims(&self) -> Option<bool> {
        match self.shared.mode.load(Ordering::SeqCst) {
            MODE_CLAIMS => Some(true),
            MODE_PLAIN => Some(false),
            _ => None,
        }
    }

    /// How far the store's clock is from this process's clock, as store minus local. It is learned
    /// from fire-claim replies. `None` before the first.
    #[must_use]
    pub fn store_clock_offset(&self) -> Option<chrono::Duration> {
        self.shared.clock.known_offset()
    }

    /// Shuts down gracefully. No new fire is claimed from now on. Then the executor drains, as
    /// [`LockingTaskExecutor::shutdown`] describes, and refuses new runs for all its users. A run
    /// cancelled by the drain is recorded [`RunOutcome::Cancelled`]. This returns once every
    /// release is done or failed and every job's task has ended. Calling it again, or on a clone,
    /// waits for the same drain.
    ///
    /// It leaves the [`LeaderLatch`]es of [`leader_only`](Job::leader_only) jobs running.
    /// [`Shutdown`](crate::Shutdown) closes them at once, so another replica leads while this one
    /// drains.
    pub async fn shutdown(&self, grace: Duration) -> Drained {
        self.begin_shutdown();
        let drained = self.shared.executor.shutdown(grace).await;
        self.join_tasks().await;
        drained
    }

    /// Stops claiming fires, at once. The executor's drain is the caller's.
    pub(crate) fn begin_shutdown(&self) {
        self.shared.stopping.send_replace(true);
    }

    /// The executor the jobs run on.
    pub(crate) fn executor(&self) -> &LockingTaskExecutor {
        &self.shared.executor
    }

    /// The latches the [`leader_only`](Job::leader_only) jobs follow, each once.
    pub(crate) fn latches(&self) -> Vec<LeaderLatch> {
        let mut latches: Vec<LeaderLatch> = Vec::new();
        for job in self.jobs() {
            if let Some(latch) = &job.leader
                && !latches.iter().any(|l| l.same_as(latch))
            {
                latches.push(latch.clone());
            }
        }
        latches
    }

    /// Waits for every job's task to end, after the executor's drain.
    pub(crate) async fn join_tasks(&self) {
        let tasks: Vec<JoinHandle<()>> = std::mem::take(
            &mut *self
                .shared
                .tasks
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        // Each loop ends promptly now: waits and retries watch `stopping`, runs were cancelled
        // by the drain; a claim in flight ends within the call timeout.
        // One deadline for all of them (not one call timeout each, one after another).
        let deadline = Instant::now() + self.shared.executor.call_timeout();
        for task in tasks {
            let abort = task.abort_handle();
            if tokio::time::timeout_at(deadline, task).await.is_err() {
                abort.abort();
            }
        }
        // A loop aborted at the deadline did not clear its next fire: no fire is next now.
        for job in self.jobs() {
            job.counters.set_next_fire(None);
        }
    }
}

impl Shared {
    fn stopping(&self) -> bool {
        *self.stopping.borrow()
    }

    /// Waits `delay`. Returns `false` if shutdown began meanwhile.
    async fn wait(&self, delay: Duration) -> bool {
        self.wait_until(Instant::now() + delay).await
    }

    async fn wait_until(&self, at: Instant) -> bool {
        let mut stopping = self.stopping.subscribe();
        tokio::select! {
            () = sleep_until(at) => !self.stopping(),
            _ = stopping.wait_for(|s| *s) => false,
        }
    }

    /// Asks the store whether it is set up, whether it records fires, and what its clock reads. It
    /// asks with a claim of `cfg`'s lock. Without a job, it runs a [`LockingTaskExecutor::check`].
    /// Returns the error for which `start` fails (see there).
    async fn probe(&self, cfg: Option<&LockConfig>) -> Result<()> {
        let answer = match cfg {
            Some(cfg) => match self.probe_claims(cfg).await {
                Err(e) if e.is_unsupported() => {
                    self.switch_to_plain(&e);
                    self.executor.check().await
                }
                answer => answer,
            },
            None => self.executor.check().await,
        };
        let Err(error) = answer else {
            return Ok(());
        };
        if error.is_shutdown()
            || Cause::of(&error).is_misconfiguration()
            || self.require_store.load(Ordering::SeqCst)
        {
            return Err(error);
        }
        tracing::warn!(
            error = &error as &dyn std::error::Error,
            "the lock store cannot be reached at start; the jobs start anyway and retry \
             (Scheduler::require_store makes this an error)"
        );
        Ok(())
    }

    /// [`probe`](Self::probe)'s claim of a fire a year ahead.
    async fn probe_claims(&self, cfg: &LockConfig) -> Result<()> {
        let far = self.clock.store_now() + chrono::Duration::days(365);
        let far = DateTime::from_timestamp_millis(far.timestamp_millis()).unwrap_or(far);
        let Ok(fire) = Fire::new(far, far + chrono::Duration::milliseconds(1)) else {
            return Ok(());
        };
        match self.executor.claim_fire(cfg, &fire, |_| true).await {
            Ok(attempt) => {
                self.clock
                    .observe(attempt.reply.store_now(), attempt.sent, attempt.received);
                self.mode.store(MODE_CLAIMS, Ordering::SeqCst);
                if let Some(guard) = attempt.guard {
                    // Only a store whose clock is a year ahead gets here.
                    let _ = guard.release().await;
                }
                tracing::debug!(
                    offset_ms = self.clock.known_offset().map(|o| o.num_milliseconds()),
                    "the lock store records fires"
                );
                Ok(())
            }
            Err(error) => Err(error),
        }
    }

    fn switch_to_plain(&self, why: &Error) {
        if self.mode.swap(MODE_PLAIN, Ordering::SeqCst) != MODE_PLAIN {
            // `why` is the store's own account (a SQL store names its table and the ALTER TABLE
            // that adds the column).
            tracing::warn!(
                why = %why,
                "this lock store does not record fires (claim_fire is unsupported): scheduled \
                 jobs run under plain locks with their at_least, not once per fire (a SQL table \
                 without the last_fire column, such as Java ShedLock's, records none: add it \
                 with shedlock-sqlx's migration 0002_last_fire.sql and restart)"
            );
            for job in self
                .jobs
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
            {
                warn_plain_at_least(job);
            }
        }
    }
}

fn warn_plain_at_least(job: &Entry) {
    if job.on_held == OnHeld::RunLate {
        tracing::warn!(
            job = %job.name,
            "job has on_held RunLate on a store without fire claims: a late plain lock is the \
             duplicate at_least prevents, so it skips fires met while the lock is held"
        );
    }
    if job.cfg.at_least().is_zero() {
        tracing::warn!(
            job = %job.name,
            "job has at_least 0 on a store without fire claims: replicas whose clocks differ \
             may each run a fire; set at_least above their clock difference"
        );
    }
}
