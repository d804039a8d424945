//! [`Shutdown`]: one graceful stop of a process's schedulers, executors and leader latches. The
//! order hands leadership over first.

use std::time::Duration;

use tokio::task::JoinHandle;

use crate::drain::Drained;
use crate::error::Error;
use crate::executor::LockingTaskExecutor;
use crate::latch::LeaderLatch;
#[cfg(feature = "scheduler")]
use crate::scheduler::Scheduler;

/// Shuts down, in one call, the schedulers, executors and leader latches it is given. The latches
/// step down at once, so another replica leads while this one lets its runs finish.
/// [`run`](Self::run) does, in this order:
///
/// 1. At once, before anything waits: every scheduler stops claiming fires. Every executor refuses
///    new runs and tells the runs in flight
///    ([`LockHandle::stopping`](crate::current::LockHandle::stopping)). Every latch steps down: its
///    [`LeaderTerm`](crate::latch::LeaderTerm) ends and [`is_leader`](LeaderLatch::is_leader) turns
///    false.
/// 2. Then, side by side:
///    - each latch closes as [`LeaderLatch::close`] does;
///    - a scheduler's runs of `leader_only` jobs stop as at any end of a term, with a stop
///      window, not the grace;
///    - each executor drains as [`LockingTaskExecutor::shutdown`] does, and the other runs get
///      `grace`.
/// 3. It returns once every latch has stopped, every release is done or failed, and every
///    scheduler's job tasks have ended.
///
/// A scheduler brings its executor and the latches its leader-only jobs follow. Give the others,
/// such as an executor of `#[scheduled_lock]` functions or a latch with
/// [`spawn_leader_work`](LeaderLatch::spawn_leader_work), with [`executor`](Self::executor) and
/// [`latch`](Self::latch). A part given twice, or a clone of one, is shut down once.
///
/// Compared with `Scheduler::shutdown` followed by [`LeaderLatch::close`], leadership moves at the
/// start of the grace instead of at its end.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use shedlock_core::{
///     InMemoryLockProvider, Job, LeaderLatch, LeaderLatchConfig, LockingTaskExecutor, Schedule,
///     Scheduler, Shutdown,
/// };
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> shedlock_core::Result<()> {
/// let store = Arc::new(InMemoryLockProvider::new());
/// let latch = LeaderLatch::start(store.clone(), LeaderLatchConfig::new("jobs")?)?;
/// let scheduler = Scheduler::new(LockingTaskExecutor::new(store)?);
/// let every_minute = Schedule::every(Duration::from_secs(60))?;
/// let queue = Job::new("queue", every_minute.clone(), |_| async {}).leader_only(latch.clone());
/// scheduler.add(queue.at_most(Duration::from_secs(30)))?;
/// scheduler.add(Job::new("report", every_minute, |run| async move {
///     // A long run: told at the start of the drain, it checkpoints and returns.
///     run.lock().stopping().await;
/// }).at_most(Duration::from_secs(600)))?;
/// scheduler.start().await?;
/// tokio::time::sleep(Duration::from_secs(70)).await; // "report" is running
///
/// // On SIGTERM (`shedlock_core::shutdown_signal().await?`):
/// let report = Shutdown::new(Duration::from_secs(20)).scheduler(&scheduler).run().await;
/// assert!(!latch.is_leader());
/// assert_eq!((report.drained.finished, report.drained.cancelled), (1, 0));
/// assert!(report.latch_errors.is_empty());
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "nothing is shut down until `run` is awaited"]
pub struct Shutdown {
    grace: Duration,
    #[cfg(feature = "scheduler")]
    schedulers: Vec<Scheduler>,
    executors: Vec<LockingTaskExecutor>,
    latches: Vec<LeaderLatch>,
}

/// What a [`Shutdown`] did.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// The executors' drains, added up.
    pub drained: Drained,
    /// The latches whose row could not be released. Each row expires by itself at the end of its
    /// lease (see [`LeaderLatch::close`]).
    pub latch_errors: Vec<Error>,
}

impl Shutdown {
    /// A shutdown that gives runs in flight `grace` to finish. Add the parts to stop.
    pub fn new(grace: Duration) -> Self {
        Self {
            grace,
            #[cfg(feature = "scheduler")]
            schedulers: Vec::new(),
            executors: Vec::new(),
            latches: Vec::new(),
        }
    }

    /// Stops `scheduler`, drains its executor and closes the latches its leader-only jobs follow.
    #[cfg(feature = "scheduler")]
    pub fn scheduler(mut self, scheduler: &Scheduler) -> Self {
        self = self.executor(scheduler.executor());
        for latch in scheduler.latches() {
            self = self.latch(&latch);
        }
        self.schedulers.push(scheduler.clone());
        self
    }

    /// Drains `executor` (see [`LockingTaskExecutor::shutdown`]).
    pub fn executor(mut self, executor: &LockingTaskExecutor) -> Self {
        if !self.executors.iter().any(|e| e.same_as(executor)) {
            self.executors.push(executor.clone());
        }
        self
    }

    /// Closes `latch` (see [`LeaderLatch::close`]), stepping down at once.
    pub fn latch(mut self, latch: &LeaderLatch) -> Self {
        if !self.latches.iter().any(|l| l.same_as(latch)) {
            self.latches.push(latch.clone());
        }
        self
    }

    /// Shuts everything down in the order [`Shutdown`] gives and reports what the drains and closes
    /// did. It returns within `grace` plus the executors' bound, see
    /// [`LockingTaskExecutor::shutdown`], or the latches' own bound if longer, plus up to one call
    /// timeout while the schedulers' job tasks end.
    pub async fn run(self) -> ShutdownReport {
        // Step 1: nothing here waits.
        #[cfg(feature = "scheduler")]
        for scheduler in &self.schedulers {
            scheduler.begin_shutdown();
        }
        // The executors first: each counts the locks it holds as its drain begins, before a
        // latch's step-down can end a leader-only run (on another worker thread) and release
        // its lock uncounted.
        for executor in &self.executors {
            executor.begin_shutdown();
        }
        for latch in &self.latches {
            latch.begin_close();
        }
        tracing::info!(
            executors = self.executors.len(),
            latches = self.latches.len(),
            grace = %shedlock_duration::format(self.grace),
            "shutting down: latches stepped down; runs in flight told to stop"
        );
        // Step 2, each part in a task of its own: side by side, and carried to its end even if
        // this future is dropped (a drain left halfway would keep its locks to `at_most`).
        let grace = self.grace;
        let closes: Vec<JoinHandle<Result<(), Error>>> = self
            .latches
            .iter()
            .cloned()
            .map(|latch| tokio::spawn(async move { latch.close().await }))
            .collect();
        let drains: Vec<JoinHandle<Drained>> = self
            .executors
            .iter()
            .cloned()
            .map(|executor| tokio::spawn(async move { executor.shutdown(grace).await }))
            .collect();
        let mut report = ShutdownReport::default();
        for close in closes {
            match close.await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => report.latch_errors.push(error),
                Err(error) => tracing::error!(
                    error = &error as &dyn std::error::Error,
                    "closing a leader latch did not finish"
                ),
            }
        }
        for drain in drains {
            match drain.await {
                Ok(drained) => {
                    report.drained.finished += drained.finished;
                    report.drained.cancelled += drained.cancelled;
                    report.drained.release_failures += drained.release_failures;
                }
                Err(error) => tracing::error!(
                    error = &error as &dyn std::error::Error,
                    "an executor's drain did not finish"
                ),
            }
        }
        // Step 3.
        #[cfg(feature = "scheduler")]
        for scheduler in &self.schedulers {
            scheduler.join_tasks().await;
        }
        report
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tokio::time::Instant;

    use super::*;
    use crate::current::current_lock;
    use crate::{InMemoryLockProvider, Job, LeaderLatchConfig, LockConfig, RunContext, Schedule};

    const SEC: Duration = Duration::from_secs(1);

    fn latch(store: &Arc<InMemoryLockProvider>, owner: &str) -> LeaderLatch {
        let cfg = LeaderLatchConfig::builder("leader")
            .owner_id(owner)
            .acquire_interval(Duration::from_millis(500))
            .acquire_jitter(Duration::ZERO)
            .build()
            .unwrap();
        LeaderLatch::start(store.clone(), cfg).unwrap()
    }

    fn executor(store: &Arc<InMemoryLockProvider>, owner: &str) -> LockingTaskExecutor {
        LockingTaskExecutor::builder(store.clone())
            .owner_id(owner)
            .default_at_most(600 * SEC)
            .call_timeout(SEC)
            .build()
            .unwrap()
    }

    /// When each of a run's signals fired, counted from the start of the shutdown.
    #[derive(Debug, Default)]
    struct Signals {
        stopping: Option<Instant>,
        cancelled: Option<Instant>,
    }

    /// A run that notes when each signal fires, and returns when cancelled. `stopping` fires when
    /// the drain begins. `cancelled` fires only when the grace is over.
    #[tokio::test(start_paused = true)]
    async fn stopping_fires_when_the_drain_begins_and_cancelled_when_the_grace_ends() {
        let store = Arc::new(InMemoryLockProvider::new());
        let executor = executor(&store, "a");
        let signals = Arc::new(Mutex::new(Signals::default()));
        let (started, has_started) = tokio::sync::oneshot::channel();
        let run = tokio::spawn({
            let (executor, signals) = (executor.clone(), signals.clone());
            async move {
                let cfg = LockConfig::new("import", 600 * SEC).unwrap();
                executor
                    .execute(&cfg, async move {
                        let lock = current_lock().unwrap();
                        assert!(!lock.is_stopping() && !lock.is_cancelled());
                        let _ = started.send(());
                        lock.stopping().await;
                        assert!(lock.is_stopping() && !lock.is_cancelled());
                        signals.lock().unwrap().stopping = Some(Instant::now());
                        lock.cancelled().await;
                        assert!(lock.is_stopping() && lock.is_cancelled());
                        signals.lock().unwrap().cancelled = Some(Instant::now());
                    })
                    .await
            }
        });
        has_started.await.unwrap();
        tokio::time::sleep(SEC).await;
        let begun = Instant::now();
        let report = Shutdown::new(10 * SEC).executor(&executor).run().await;
        assert!(
            run.await.unwrap().unwrap().is_some(),
            "it returned when cancelled"
        );
        let signals = signals.lock().unwrap();
        assert_eq!(
            signals.stopping,
            Some(begun),
            "stopping: at the drain's start"
        );
        assert_eq!(
            signals.cancelled,
            Some(begun + 10 * SEC),
            "cancelled: when the grace is over"
        );
        assert_eq!((report.drained.finished, report.drained.cancelled), (0, 1));
    }

    /// Two replicas, one latch election. Replica A leads, runs a leader-only job and a long other
    /// job, and is shut down. B leads at A's step-down, long before A's drained run ends. A's
    /// leader-only run stops when its term ends. The other run gets the grace and finishes.
    #[tokio::test(start_paused = true)]
    async fn the_latch_is_handed_over_before_the_drained_run_ends() {
        let store = Arc::new(InMemoryLockProvider::new());
        let a_latch = latch(&store, "a");
        a_latch.wait_for_leadership().await.unwrap();
        let b_latch = latch(&store, "b");
        let a = Scheduler::new(executor(&store, "a"));
        let every_minute = Schedule::every(60 * SEC).unwrap();
        // (when it was told to stop, when it ended)
        let report_run: Arc<Mutex<(Option<Instant>, Option<Instant>)>> = Arc::default();
        let (started, has_started) = tokio::sync::mpsc::unbounded_channel();
        let leader_started = started.clone();
        a.add(
            Job::new("queue", every_minute.clone(), move |_: RunContext| {
                let _ = leader_started.send("queue");
                std::future::pending::<()>()
            })
            .leader_only(a_latch.clone()),
        )
        .unwrap();
        a.add(Job::new("report", every_minute, {
            let report_run = report_run.clone();
            move |run: RunContext| {
                let (report_run, started) = (report_run.clone(), started.clone());
                async move {
                    let _ = started.send("report");
                    run.lock().stopping().await;
                    report_run.lock().unwrap().0 = Some(Instant::now());
                    tokio::time::sleep(5 * SEC).await; // a checkpoint, then it returns
                    report_run.lock().unwrap().1 = Some(Instant::now());
                }
            }
        }))
        .unwrap();
        a.start().await.unwrap();
        let mut has_started = has_started;
        for _ in 0..2 {
            has_started.recv().await.unwrap();
        }
        assert!(!b_latch.is_leader());

        let begun = Instant::now();
        let shutdown = tokio::spawn({
            let a = a.clone();
            async move { Shutdown::new(60 * SEC).scheduler(&a).run().await }
        });
        b_latch.wait_for_leadership().await.unwrap();
        let b_leads = Instant::now();
        let report = shutdown.await.unwrap();

        let (told, ended) = *report_run.lock().unwrap();
        assert_eq!(
            told,
            Some(begun),
            "the run is told at the start of the drain"
        );
        assert_eq!(
            ended,
            Some(begun + 5 * SEC),
            "and finishes within the grace"
        );
        assert!(!a_latch.is_leader());
        assert!(
            b_leads < begun + 5 * SEC,
            "B leads ({:?} after the shutdown began) before A's drained run ends (5 s)",
            b_leads - begun
        );
        // A's release at once, then B's next attempt (every 500 ms).
        assert!(b_leads - begun <= Duration::from_millis(500));
        let outcome = |job| a.status(job).unwrap().last_run.unwrap().outcome;
        assert_eq!(outcome("report"), crate::scheduler::RunOutcome::Succeeded);
        assert_eq!(outcome("queue"), crate::scheduler::RunOutcome::Cancelled);
        // Both runs held their locks when the drain began; neither was left to the cancel.
        assert_eq!(
            (report.drained.finished, report.drained.cancelled),
            (2, 0),
            "{report:?}"
        );
        assert!(report.latch_errors.is_empty());
        b_latch.close().await.unwrap();
    }

    /// A part given twice, such as the scheduler's executor or a clone, is drained once. Its runs
    /// are counted once.
    #[tokio::test(start_paused = true)]
    async fn a_part_given_twice_is_shut_down_once() {
        let store = Arc::new(InMemoryLockProvider::new());
        let executor = executor(&store, "a");
        let scheduler = Scheduler::new(executor.clone());
        let latch = latch(&store, "a");
        let guard = executor
            .try_lock(&LockConfig::new("held", 60 * SEC).unwrap())
            .await
            .unwrap()
            .unwrap();
        tokio::spawn(async move {
            tokio::time::sleep(SEC).await;
            guard.release().await
        });
        let report = Shutdown::new(10 * SEC)
            .executor(&executor)
            .scheduler(&scheduler)
            .executor(&executor.clone())
            .latch(&latch)
            .latch(&latch.clone())
            .run()
            .await;
        assert_eq!((report.drained.finished, report.drained.cancelled), (1, 0));
        assert!(latch.state() == crate::latch::LeaderState::Stopped);
    }
}
