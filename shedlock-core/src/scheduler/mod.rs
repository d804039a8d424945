//! Running jobs on a schedule, each fire at most once across replicas: [`Scheduler`] (feature
//! `scheduler`).

mod clock;
mod job;
mod ledger;
mod lost;
mod on_held;
mod status;
#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep_until};
use tracing::Instrument;

pub use job::{Job, JobOutput, RunContext};
pub use on_held::OnHeld;
pub use status::{JobStatus, LastRun, RunOutcome};

use crate::config::{LockConfig, validate_name};
use crate::current;
use crate::drain::{Drained, stop_window};
use crate::error::{Error, Result};
use crate::executor::{LockGuard, LockingTaskExecutor, catch_unwind_future};
use crate::fire::{Fire, FireClaim};
use crate::latch::{LeaderLatch, LeaderTerm};
use crate::observe;
use crate::provider::LockRecord;
use crate::schedule::Schedule;
use clock::StoreClock;
use job::BoxedBody;
use lost::LostClaims;
use status::Counters;

/// Fire claims not known to work yet (no reply so far).
const MODE_UNKNOWN: u8 = 0;
/// The store records fires.
const MODE_CLAIMS: u8 = 1;
/// The store has no fire claims: plain locks and `at_least`.
const MODE_PLAIN: u8 = 2;

/// The shortest wait between two claims of one fire after a store error.
const RETRY_FLOOR: Duration = Duration::from_millis(50);

/// Runs [`Job`]s on their [`Schedule`]s over a [`LockingTaskExecutor`], each fire at most once
/// across the replicas that share the executor's store.
///
/// A *fire* is a job's scheduled instant `F`; its window is `[F, next fire)`. At `F`, every
/// replica asks the store to claim the fire ([`LockProvider::claim_fire`]): in one atomic step
/// on the **store's** clock the store checks that the window is open, that the fire is not
/// recorded yet, and that the lock is free, then records it and takes the lock. One replica
/// wins and runs the body; the others count the fire as claimed elsewhere (or held). Replicas
/// time their claims by the store's clock, learned from the claims' replies, so a replica whose
/// clock is behind or ahead still fires on time, and no run starts before `F` by the store's
/// clock (a claim that arrives early is answered "too early, the store's now is …"; the
/// replica waits the difference and asks again).
///
/// # What is guaranteed
///
/// - **At most once per fire**, across replicas, with a store that records fires.
/// - **Once whenever a replica is up and free** inside the window.
/// - A fire whose run crashed is **not re-run** (its lock holds until `at_most`, as always);
///   a fire met while the previous run still holds the lock is **counted** (`held`), never
///   queued, unless the job runs it late when the lock frees inside its window
///   ([`Job::on_held`], [`OnHeld::RunLate`]); a fire whose window passes before this replica
///   could claim it is counted `missed` (by this replica: another may have run it).
/// - A claim whose reply was lost (a timeout, a cut connection) is run by this replica if it
///   committed and its window is still open, or released unrun by the job's next claim; never
///   recognised by the owner id alone (docs/guarantees.md, "Lost replies").
/// - With fire claims, `at_least` defaults to 0: the claim, not a minimum hold, keeps replicas
///   apart.
/// - On a store without fire claims (a SQL table without `last_fire`; a custom store without
///   [`claim_fire`](crate::LockProvider::claim_fire)), jobs fall back to plain locks with their `at_least`, with one warning at
///   start (and one per job whose `at_least` is 0: replicas whose clocks differ may then each
///   run a fire). Java services never record fires: a job shared by a Java and a Rust service
///   is not once per fire.
///
/// # Catch-up
///
/// Off by default, per job ([`Job::catch_up`]). On start, the job claims the latest fire at or
/// before the store's now, once; it runs iff no replica recorded that fire (or a later one) and
/// the lock is free. The store's reply cannot tell "never recorded" from "recorded an older
/// fire", so a job that has never run anywhere also runs once at its first start with
/// catch-up on.
///
/// # Leader-only jobs
///
/// [`Job::leader_only`] jobs run only while this replica leads the latch. They still claim
/// their fires, so a failover never repeats one; a run is stopped when its term ends.
///
/// # Shutdown
///
/// [`shutdown`](Self::shutdown) stops claiming at once, then drains the executor
/// ([`LockingTaskExecutor::shutdown`]): runs get the grace period, the rest are cancelled and
/// their locks released, and it returns when every release is done. Close a leader latch after
/// it.
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
/// [`LockProvider::claim_fire`]: crate::LockProvider::claim_fire
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
    stopping: watch::Sender<bool>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

struct Entry {
    name: String,
    cfg: LockConfig,
    schedule: Schedule,
    body: BoxedBody,
    catch_up: bool,
    on_held: OnHeld,
    leader: Option<LeaderLatch>,
    counters: Counters,
    /// Lost claims of a fire whose window passed unrun (see `lost`).
    unsettled: Mutex<Option<lost::Unsettled>>,
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
    /// A scheduler that runs its jobs through `executor` (its store, owner id, call timeout and
    /// default `at_most`). Add jobs, then [`start`](Self::start) it.
    #[must_use]
    pub fn new(executor: LockingTaskExecutor) -> Self {
        Self {
            shared: Arc::new(Shared {
                executor,
                clock: StoreClock::new(),
                jobs: Mutex::new(Vec::new()),
                mode: AtomicU8::new(MODE_UNKNOWN),
                started: AtomicBool::new(false),
                stopping: watch::channel(false).0,
                tasks: Mutex::new(Vec::new()),
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

    /// Registers a job; after [`start`](Self::start), it starts at once.
    ///
    /// # Errors
    ///
    /// [`Error::is_invalid_config`] when the job has no `at_most` (and the executor no default),
    /// its lock settings are invalid, its `at_least` is not shorter than the schedule's
    /// shortest gap (every other fire would find the lock held), its schedule never fires
    /// again, or another job has the same name or lock name. [`Error::is_shutdown`] after
    /// [`shutdown`](Self::shutdown).
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
        let lock_name = job.lock_name.clone().unwrap_or_else(|| job.name.clone());
        validate_name(&lock_name, executor.provider().max_name_len())?;
        let Some(at_most) = job.at_most.or(executor.default_at_most()) else {
            return Err(Error::invalid_config(format!(
                "job {:?} has no at_most and the executor no default_at_most: set one",
                job.name
            )));
        };
        let at_least = job.at_least.unwrap_or(Duration::ZERO);
        let cfg = LockConfig::builder(lock_name.clone())
            .at_most(at_most)
            .at_least(at_least)
            .keep_alive(job.keep_alive)
            .build()
            .map_err(|e| Error::invalid_config(format!("job {:?}: {e}", job.name)))?;
        let now = self.shared.clock.store_now();
        if job.schedule.next_after(now).is_none() {
            return Err(Error::invalid_config(format!(
                "job {:?}: its schedule ({}) never fires again",
                job.name, job.schedule
            )));
        }
        let gap = job.schedule.shortest_gap(now);
        if !at_least.is_zero() && at_least >= gap {
            return Err(Error::invalid_config(format!(
                "job {:?}: at_least ({}) is not shorter than its schedule's shortest gap ({}): \
                 every other fire would find the lock still held",
                job.name,
                shedlock_duration::format(at_least),
                shedlock_duration::format(gap)
            )));
        }
        let entry = Arc::new(Entry {
            name: job.name,
            cfg,
            schedule: job.schedule,
            body: job.body,
            catch_up: job.catch_up,
            on_held: job.on_held,
            leader: job.leader,
            counters: Counters::default(),
            unsettled: Mutex::new(None),
        });
        {
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
        }
        if self.shared.started.load(Ordering::SeqCst) {
            if self.shared.mode.load(Ordering::SeqCst) == MODE_PLAIN {
                warn_plain_at_least(&entry);
            }
            self.spawn(entry);
        }
        Ok(())
    }

    /// Starts every registered job (and any added later). It first asks the store, with a
    /// claim of a fire a year ahead (always "too early", it writes nothing), whether it records
    /// fires and what its clock reads; a store without fire claims makes the jobs run under
    /// plain locks, with a warning.
    ///
    /// # Errors
    ///
    /// [`Error::is_invalid_config`] if it was already started; [`Error::is_shutdown`] after
    /// [`shutdown`](Self::shutdown). A failing store is not an error here: the jobs start and
    /// keep trying (each failure is logged and counted).
    pub async fn start(&self) -> Result<()> {
        if *self.shared.stopping.borrow() {
            return Err(Error::shutdown("scheduler"));
        }
        if self.shared.started.swap(true, Ordering::SeqCst) {
            return Err(Error::invalid_config("the scheduler is already started"));
        }
        let jobs = self.jobs();
        if let Some(first) = jobs.first() {
            self.shared.probe(&first.cfg).await;
        }
        for job in jobs {
            self.spawn(job);
        }
        Ok(())
    }

    fn spawn(&self, job: Arc<Entry>) {
        let handle = tokio::spawn(job_loop(self.shared.clone(), job));
        self.shared
            .tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(handle);
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
            .map(|j| j.counters.snapshot(&j.name))
    }

    /// The state of every job, in registration order.
    #[must_use]
    pub fn statuses(&self) -> Vec<JobStatus> {
        self.jobs()
            .iter()
            .map(|j| j.counters.snapshot(&j.name))
            .collect()
    }

    /// Whether the store records fires: `Some(true)` once a claim was answered, `Some(false)`
    /// when the store does not support them (plain locks), `None` before any reply.
    #[must_use]
    pub fn uses_fire_claims(&self) -> Option<bool> {
        match self.shared.mode.load(Ordering::SeqCst) {
            MODE_CLAIMS => Some(true),
            MODE_PLAIN => Some(false),
            _ => None,
        }
    }

    /// How far the store's clock is from this process's (store minus local), as learned from
    /// fire-claim replies; `None` before the first.
    #[must_use]
    pub fn store_clock_offset(&self) -> Option<chrono::Duration> {
        self.shared.clock.known_offset()
    }

    /// Shuts down gracefully: no new fire is claimed from now on, then the executor drains
    /// ([`LockingTaskExecutor::shutdown`]: runs get `grace`, the rest are cancelled — each
    /// body sees the signal and gets a stop window (a second, or the call timeout if shorter) to return, is then dropped, and
    /// is recorded [`RunOutcome::Cancelled`] — and every lock is released,
    /// honouring `at_least`). Returns once every release is done or failed, and every job's
    /// task has ended. The executor is shut down too (it refuses new runs for all its users).
    /// Calling it again, or on a clone, waits for the same drain.
    ///
    /// With a [`LeaderLatch`]: shut the scheduler down first, then close the latch (its own
    /// `shutdown_grace` then finds no leader-only run left).
    pub async fn shutdown(&self, grace: Duration) -> Drained {
        self.shared.stopping.send_replace(true);
        let drained = self.shared.executor.shutdown(grace).await;
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
        drained
    }
}

impl Shared {
    fn stopping(&self) -> bool {
        *self.stopping.borrow()
    }

    /// Waits `delay`; `false` if shutdown began meanwhile.
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

    /// Asks the store whether it records fires, and what its clock reads.
    async fn probe(&self, cfg: &LockConfig) {
        let far = self.clock.store_now() + chrono::Duration::days(365);
        let far = DateTime::from_timestamp_millis(far.timestamp_millis()).unwrap_or(far);
        let Ok(fire) = Fire::new(far, far + chrono::Duration::milliseconds(1)) else {
            return;
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
            }
            Err(e) if e.is_unsupported() => self.switch_to_plain(&e),
            Err(error) => tracing::warn!(
                %error,
                "could not ask the lock store about fire claims; the jobs start anyway and retry"
            ),
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

/// One job's life: wait for each fire by the store's clock, claim it, run it if claimed.
async fn job_loop(shared: Arc<Shared>, job: Arc<Entry>) {
    let start = shared.clock.store_now();
    let mut cursor = start;
    if job.catch_up && shared.mode.load(Ordering::SeqCst) == MODE_PLAIN {
        // Without recorded fires nothing tells whether a replica already ran the fire.
        tracing::warn!(
            job = %job.name,
            "catch-up needs a store that records fires; this job does not catch up"
        );
    } else if job.catch_up
        && let Some(fire) = job.schedule.fire_containing(start)
        && fire.at() < start
    {
        tracing::debug!(job = %job.name, fire = %fire.at(), "catching up on the latest fire");
        if let Some(after) = fire_and_after(&shared, &job, fire, true).await {
            cursor = after;
        }
    }
    loop {
        if shared.stopping() {
            break;
        }
        let Some(fire) = job.schedule.next_fire_after(cursor) else {
            tracing::info!(job = %job.name, "the schedule has no more fires; the job ends");
            break;
        };
        set_next_fire(&job, Some(fire.at()));
        if !shared.wait_until(shared.clock.instant_for(fire.at())).await {
            break;
        }
        cursor = fire.at();
        let error = chrono::Duration::from_std(shared.clock.error()).unwrap_or_default();
        if fire.next() + error <= shared.clock.store_now() {
            // This replica was not scheduled in the window (a paused process, a long previous
            // step): no claim can succeed now, even if the estimate of the store's clock is as
            // far off as it may be (otherwise the store decides).
            Counters::bump(&job.counters.missed);
            observe::fire(&job.name, "missed");
            continue;
        }
        if let Some(after) = fire_and_after(&shared, &job, fire, false).await {
            cursor = after;
        }
    }
    set_next_fire(&job, None);
    lost::settle_on_exit(&shared, &job).await;
}

/// Handles `fire`; if it ran, deals with the fires met while it held the lock: each counted
/// held, or, under [`OnHeld::RunLate`] with fire claims, the latest one, whose window is still
/// open, claimed at once (and so on after that run). Returns the last fire dealt with, from
/// which the next fire follows; `None` if `fire` did not run.
async fn fire_and_after(
    shared: &Shared,
    job: &Entry,
    fire: Fire,
    catch_up: bool,
) -> Option<DateTime<Utc>> {
    if !handle_fire(shared, job, fire, catch_up).await {
        return None;
    }
    let mut cursor = fire.at();
    loop {
        let run_late = job.on_held == OnHeld::RunLate
            && shared.mode.load(Ordering::SeqCst) == MODE_CLAIMS
            && !shared.stopping();
        let (last, open) = count_held_during_run(shared, job, cursor, run_late);
        cursor = last;
        let Some(late) = open else {
            return Some(cursor);
        };
        tracing::debug!(
            job = %job.name,
            fire = %late.at(),
            "the lock freed inside this fire's window: claiming it late"
        );
        if !handle_fire(shared, job, late, false).await {
            return Some(cursor);
        }
    }
}

fn set_next_fire(job: &Entry, at: Option<DateTime<Utc>>) {
    *job.counters
        .next_fire
        .lock()
        .unwrap_or_else(PoisonError::into_inner) = at;
}

/// After a run that started at `fire`: the fires met while it held the lock are counted held
/// (they are never queued); returns the last of them, from which the next fire follows. With
/// `open_one`, the last of them is not counted if its window is still open: it is returned
/// with its window too, to be claimed late.
fn count_held_during_run(
    shared: &Shared,
    job: &Entry,
    fire: DateTime<Utc>,
    open_one: bool,
) -> (DateTime<Utc>, Option<Fire>) {
    let now = shared.clock.store_now();
    let mut met = 0_usize;
    let mut cursor = fire;
    for _ in 0..100_000 {
        match job.schedule.next_after(cursor) {
            Some(next) if next <= now => {
                met += 1;
                cursor = next;
            }
            _ => break,
        }
    }
    // The last fire met (`cursor`, if any was met), when its window is still open.
    let open = (open_one && met > 0)
        .then(|| Fire::new(cursor, job.schedule.next_after(cursor)?).ok())
        .flatten()
        .filter(|late| now < late.next());
    for _ in 0..met - usize::from(open.is_some()) {
        Counters::bump(&job.counters.held);
        observe::fire(&job.name, "held");
    }
    (cursor, open)
}

/// Claims `fire` (retrying while too early or on store errors, within its window) and runs it if
/// claimed. Whether it ran.
async fn handle_fire(shared: &Shared, job: &Entry, fire: Fire, catch_up: bool) -> bool {
    let span = tracing::info_span!("shedlock_job", job = %job.name, fire = %fire.at());
    async {
        // This loop's claims of the fire whose replies were lost (a timeout, a cut connection):
        // they may have committed (see `lost`).
        let mut lost: Option<LostClaims> = None;
        let ran = claim_and_run(shared, job, fire, catch_up, &mut lost).await;
        if let (false, Some(lost)) = (ran, lost) {
            // Settled when a later claim's reply names the holder (or at the loop's end).
            *job.unsettled.lock().unwrap_or_else(PoisonError::into_inner) =
                Some(lost::Unsettled::new(fire, lost));
        }
        ran
    }
    .instrument(span)
    .await
}

/// [`handle_fire`]'s loop; claims whose replies were lost are noted in `lost`, and left there
/// when the fire is not run for them (the caller then settles them).
async fn claim_and_run(
    shared: &Shared,
    job: &Entry,
    fire: Fire,
    catch_up: bool,
    lost: &mut Option<LostClaims>,
) -> bool {
    // Under OnHeld::RunLate, whether a claim that met the lock held was made once more.
    let mut claimed_again = false;
    loop {
        if shared.stopping() {
            return false;
        }
        let term = match &job.leader {
            None => None,
            Some(latch) => {
                let Some(term) = latch.current_term().filter(LeaderTerm::is_active) else {
                    tracing::trace!("not leading: the fire is the leader's");
                    return false;
                };
                Some(term)
            }
        };
        if shared.mode.load(Ordering::SeqCst) == MODE_PLAIN {
            return plain_fire(shared, job, fire, term).await;
        }
        let sent = Instant::now();
        let take = |record: &LockRecord| {
            let left = (fire.next() - record.locked_at())
                .to_std()
                .unwrap_or_default();
            ledger::claimed(record, fire.at(), left)
        };
        match shared.executor.claim_fire(&job.cfg, &fire, take).await {
            Ok(attempt) => {
                let now = attempt.reply.store_now();
                shared.clock.observe(now, attempt.sent, attempt.received);
                shared.mode.store(MODE_CLAIMS, Ordering::SeqCst);
                match attempt.reply {
                    FireClaim::Claimed(_) => {
                        let Some(guard) = attempt.guard else {
                            // Another job loop of this process adopted this very claim (its
                            // own reply was lost) and runs it.
                            Counters::bump(&job.counters.claimed_elsewhere);
                            observe::fire(&job.name, "claimed_elsewhere");
                            return false;
                        };
                        *lost = None;
                        run(shared, job, fire, guard, term, catch_up).await;
                        return true;
                    }
                    FireClaim::TooEarly { now } => {
                        let early = (fire.at() - now).to_std().unwrap_or_default();
                        tracing::debug!(
                            early_ms = early.as_millis(),
                            "claimed before F by the store's clock; waiting the difference"
                        );
                        if !shared.wait(early.max(Duration::from_millis(1))).await {
                            return false;
                        }
                    }
                    FireClaim::WindowPassed { .. } => {
                        tracing::info!("fire missed: its window passed before it was claimed");
                        Counters::bump(&job.counters.missed);
                        observe::fire(&job.name, "missed");
                        return false;
                    }
                    FireClaim::ClaimedElsewhere {
                        recorded, holder, ..
                    } => {
                        if let Some(uncertain) = lost.take()
                            && recorded == fire.at()
                            && let Some(guard) =
                                lost::adopt(shared, job, &fire, &uncertain, holder).await
                        {
                            run(shared, job, fire, guard, term, catch_up).await;
                            return true;
                        }
                        // The recorded claim is not one of this loop's lost ones (or another
                        // loop of this process runs it): nothing of this loop is left to settle.
                        tracing::debug!("fire claimed by another replica");
                        Counters::bump(&job.counters.claimed_elsewhere);
                        observe::fire(&job.name, "claimed_elsewhere");
                        return false;
                    }
                    FireClaim::Held { holder, .. } => {
                        // Had a lost claim of this loop committed, the fire would be recorded
                        // (ClaimedElsewhere): none did.
                        *lost = None;
                        if lost::release_if_ours(shared, job, &holder).await {
                            continue; // an earlier fire's lost claim held it: claim again
                        }
                        let again = met_held(shared, job, &fire, &holder, !claimed_again).await;
                        if !again {
                            return false;
                        }
                        claimed_again = true;
                    }
                }
            }
            Err(e) if e.is_unsupported() => shared.switch_to_plain(&e),
            Err(e) if e.is_shutdown() => return false,
            Err(error) => {
                LostClaims::note(lost, sent, Instant::now());
                if !retry_after_error(shared, job, &fire, &error).await {
                    return false;
                }
            }
        }
    }
}

/// A claim of `fire` met the lock held by `holder`. Under [`OnHeld::RunLate`], the first time
/// (`first`), when the lock frees inside the window, waits until then (plus how far the estimate
/// of the store's clock may be off, so the store sees it free) and answers `true`: claim once
/// more. Otherwise the fire is counted held (`false`).
async fn met_held(
    shared: &Shared,
    job: &Entry,
    fire: &Fire,
    holder: &LockRecord,
    first: bool,
) -> bool {
    let until = holder.lock_until();
    if first && job.on_held == OnHeld::RunLate && until < fire.next() {
        tracing::debug!(holder = holder.owner(), %until, "fire met while the lock is held; claiming again when it frees");
        let error = chrono::Duration::from_std(shared.clock.error()).unwrap_or_default();
        let at = until.checked_add_signed(error).unwrap_or(until);
        return shared.wait_until(shared.clock.instant_for(at)).await;
    }
    tracing::info!(
        holder = holder.owner(),
        %until,
        "fire met while the lock is held: counted, not queued"
    );
    Counters::bump(&job.counters.held);
    observe::fire(&job.name, "held");
    false
}

/// After a failed claim of `fire`: counts it, and waits before the next try unless the window
/// has passed (then the fire is counted missed) or shutdown began. Whether to try again.
async fn retry_after_error(shared: &Shared, job: &Entry, fire: &Fire, error: &Error) -> bool {
    Counters::bump(&job.counters.store_errors);
    observe::fire(&job.name, "error");
    let now = shared.clock.store_now();
    if now >= fire.next() {
        tracing::warn!(%error, "fire claim failed and the window has passed");
        Counters::bump(&job.counters.missed);
        observe::fire(&job.name, "missed");
        return false;
    }
    tracing::warn!(%error, "fire claim failed; retrying within the window");
    // Half the window left, at most a second, at least RETRY_FLOOR: close to the window's end a
    // failing store is not hammered.
    let left = (fire.next() - now).to_std().unwrap_or_default();
    let wait = (left / 2).clamp(RETRY_FLOOR, Duration::from_secs(1));
    shared.wait(wait).await
}

/// A fire on a store without fire claims: a plain lock, its `at_least` keeping replicas apart.
async fn plain_fire(shared: &Shared, job: &Entry, fire: Fire, term: Option<LeaderTerm>) -> bool {
    match shared.executor.try_lock(&job.cfg).await {
        Ok(Some(guard)) => {
            run(shared, job, fire, guard, term, false).await;
            true
        }
        Ok(None) => {
            tracing::debug!("lock held elsewhere; fire skipped");
            Counters::bump(&job.counters.claimed_elsewhere);
            observe::fire(&job.name, "claimed_elsewhere");
            false
        }
        Err(e) if e.is_shutdown() => false,
        Err(error) => {
            tracing::warn!(%error, "could not lock the job");
            Counters::bump(&job.counters.store_errors);
            observe::fire(&job.name, "error");
            false
        }
    }
}

fn outcome_of(
    result: std::result::Result<std::result::Result<(), String>, Box<dyn std::any::Any + Send>>,
) -> RunOutcome {
    match result {
        Ok(Ok(())) => RunOutcome::Succeeded,
        Ok(Err(message)) => RunOutcome::Failed(message),
        Err(_) => RunOutcome::Panicked,
    }
}

/// Runs the body under `guard`; stopped when the leader term ends or shutdown cancels it.
async fn run(
    shared: &Shared,
    job: &Entry,
    fire: Fire,
    guard: LockGuard,
    term: Option<LeaderTerm>,
    catch_up: bool,
) {
    let handle = guard.handle();
    let ctx = RunContext {
        fire,
        lock: handle.clone(),
        term: term.clone(),
        catch_up,
    };
    let started = shared.clock.store_now();
    let started_at = Instant::now();
    Counters::bump(&job.counters.runs);
    observe::fire(&job.name, "run");
    tracing::info!(token = ?handle.fencing_token(), catch_up, "running");
    let body = (job.body)(ctx);
    let term_ended = async {
        match &term {
            Some(term) => term.ended().await,
            None => std::future::pending().await,
        }
    };
    let window = stop_window(shared.executor.call_timeout());
    // The outcome, and why a cancelled run was told to stop.
    let (outcome, stopped_because) = current::scope(handle.clone(), async {
        let body = catch_unwind_future(body);
        tokio::pin!(body);
        let told_to_stop = tokio::select! {
            result = &mut body => return (outcome_of(result), None),
            () = term_ended => "the leader term ended",
            () = handle.cancelled() => "shutdown cancelled it",
        };
        // Told to stop, with the lock still held: the body gets the stop window to see it
        // (`current_lock()`, `RunContext::lock().cancelled()`) and return, then it is dropped.
        // The drain waits as long before it releases the lock itself.
        if tokio::time::timeout(window, &mut body).await.is_err() {
            tracing::warn!(
                reason = told_to_stop,
                window = %shedlock_duration::format(window),
                "the run did not stop within the stop window: dropped"
            );
        }
        (RunOutcome::Cancelled, Some(told_to_stop))
    })
    .await;
    let took = started_at.elapsed();
    observe::task_duration(handle.name(), took);
    let _ = guard.release().await;
    let took_ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX);
    match &outcome {
        RunOutcome::Succeeded => tracing::info!(took_ms, "run finished"),
        RunOutcome::Failed(error) => {
            tracing::error!(%error, took_ms, "run failed (not retried)");
            Counters::bump(&job.counters.errors);
        }
        RunOutcome::Panicked => {
            tracing::error!(took_ms, "run panicked (not retried)");
            Counters::bump(&job.counters.errors);
        }
        RunOutcome::Cancelled => tracing::warn!(
            reason = stopped_because.unwrap_or("cancelled"),
            took_ms,
            "run cancelled"
        ),
    }
    *job.counters
        .last_run
        .lock()
        .unwrap_or_else(PoisonError::into_inner) = Some(LastRun {
        fire: fire.at(),
        started,
        ended: shared.clock.store_now(),
        outcome,
    });
}
