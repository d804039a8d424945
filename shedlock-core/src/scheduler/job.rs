//! A scheduled job: [`Job`], its body's output ([`JobOutput`]) and what a run is told
//! ([`RunContext`]).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use super::{JobSpec, OnHeld};
use crate::current::LockHandle;
use crate::fire::Fire;
use crate::latch::{LeaderLatch, LeaderTerm};
use crate::schedule::Schedule;

pub(crate) type BoxedBody = Arc<
    dyn Fn(RunContext) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send>> + Send + Sync,
>;

/// What a job body may return: `()`, or `Result<(), E>` with a displayable error. An `Err` is
/// logged at ERROR and counted in [`JobStatus::errors`](crate::scheduler::JobStatus::errors). It is
/// never retried. The next fire runs as scheduled.
pub trait JobOutput: Send + 'static {
    /// `Err(message)` for a failed run.
    ///
    /// # Errors
    ///
    /// The run failed. The message is the error's `Display`.
    fn into_result(self) -> Result<(), String>;
}

impl JobOutput for () {
    fn into_result(self) -> Result<(), String> {
        Ok(())
    }
}

impl<E: fmt::Display + Send + 'static> JobOutput for Result<(), E> {
    fn into_result(self) -> Result<(), String> {
        self.map_err(|e| e.to_string())
    }
}

/// What one run of a job is told: which fire it runs, and its lock. A leader-only job is also told
/// the leader term it runs in.
#[derive(Debug, Clone)]
pub struct RunContext {
    pub(crate) fire: Fire,
    pub(crate) lock: LockHandle,
    pub(crate) term: Option<LeaderTerm>,
    pub(crate) catch_up: bool,
    pub(crate) trigger: Option<i64>,
    pub(crate) answered: std::time::Instant,
}

impl RunContext {
    /// The fire this run is for: its scheduled instant `F` and the end of its window.
    #[must_use]
    pub fn fire(&self) -> Fire {
        self.fire
    }

    /// The run's lock, with its fencing token, lost and cancel signals, and extension. It is also
    /// reachable through [`current_lock`](crate::current_lock).
    #[must_use]
    pub fn lock(&self) -> &LockHandle {
        &self.lock
    }

    /// The leader term of a [`leader_only`](Job::leader_only) job's run. `None` otherwise.
    #[must_use]
    pub fn term(&self) -> Option<&LeaderTerm> {
        self.term.as_ref()
    }

    /// Whether this run is a catch-up: a fire missed while no replica ran, claimed late at start.
    #[must_use]
    pub fn is_catch_up(&self) -> bool {
        self.catch_up
    }

    /// The trigger id of a run an operator asked for ("run now", see [`trigger`](crate::trigger)),
    /// `None` for a scheduled fire. Its [`fire`](Self::fire) is the instant the trigger was asked
    /// for.
    #[must_use]
    pub fn trigger(&self) -> Option<i64> {
        self.trigger
    }

    /// When this process received the store's answer that let this run start, on the monotonic
    /// clock: the fire claim's or trigger claim's reply, or, for a claim whose reply was lost, the
    /// later answer that showed it had committed. `answered_at().elapsed()` at the top of the
    /// body is the scheduler's dispatch, what it did between the answer and the body's start. On
    /// a store without fire claims it is when the plain lock was taken, after its lease was set
    /// up.
    #[must_use]
    pub fn answered_at(&self) -> std::time::Instant {
        self.answered
    }
}

/// A job: its settings, a [`JobSpec`] of a name, a [`Schedule`] and lock settings, and an async
/// body. Register it with [`Scheduler::add`](crate::Scheduler::add). Settings read from a
/// configuration file make a job with [`from_spec`](Self::from_spec).
///
/// ```
/// use std::time::Duration;
/// use shedlock_core::{Job, Schedule};
///
/// let job = Job::new("purge", Schedule::every(Duration::from_secs(3600))?, |run| async move {
///     tracing::info!(fire = %run.fire().at(), "purging");
///     Ok::<(), std::io::Error>(())
/// })
/// .at_most(Duration::from_secs(600))
/// .keep_alive(true);
/// assert_eq!(job.name(), "purge");
/// # Ok::<(), shedlock_core::Error>(())
/// ```
#[must_use]
pub struct Job {
    pub(crate) spec: JobSpec,
    pub(crate) body: BoxedBody,
    pub(crate) leader: Option<LeaderLatch>,
}

impl fmt::Debug for Job {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Job")
            .field("spec", &self.spec)
            .field("leader_only", &self.leader.is_some())
            .finish_non_exhaustive()
    }
}

impl Job {
    /// A job named `name` that runs `body` at each fire of `schedule` that this replica claims. The
    /// body gets a [`RunContext`] and returns `()` or `Result<(), E: Display>`.
    pub fn new<F, Fut>(name: impl Into<String>, schedule: Schedule, body: F) -> Self
    where
        F: Fn(RunContext) -> Fut + Send + Sync + 'static,
        Fut: Future + Send + 'static,
        Fut::Output: JobOutput,
    {
        Self::from_spec(JobSpec::new(name, schedule), body)
    }

    /// A job with the settings of `spec`, read from a configuration file, say, that runs `body`.
    /// The builder methods below change the settings further.
    ///
    /// ```
    /// use shedlock_core::{Job, scheduler::JobSpec};
    ///
    /// let spec: JobSpec = serde_json::from_str(r#"{ "name": "purge", "every": "1h", "at_most": "10m" }"#)?;
    /// let job = Job::from_spec(spec, |_run| async { Ok::<(), std::io::Error>(()) });
    /// assert_eq!(job.spec().at_most, Some(std::time::Duration::from_secs(600)));
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn from_spec<F, Fut>(spec: JobSpec, body: F) -> Self
    where
        F: Fn(RunContext) -> Fut + Send + Sync + 'static,
        Fut: Future + Send + 'static,
        Fut::Output: JobOutput,
    {
        let body: BoxedBody = Arc::new(move |ctx| {
            let run = body(ctx);
            Box::pin(async move { run.await.into_result() })
        });
        Self {
            spec,
            body,
            leader: None,
        }
    }

    /// The job's name. It is its lock's name too, unless [`lock_name`](Self::lock_name) is set.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The job's settings.
    #[must_use]
    pub fn spec(&self) -> &JobSpec {
        &self.spec
    }

    /// A lock name other than the job's name. Use it to share a row with a Java ShedLock job of
    /// that name, say.
    pub fn lock_name(mut self, name: impl Into<String>) -> Self {
        self.spec.lock_name = Some(name.into());
        self
    }

    /// The lock's `at_most`. If the replica dies, a run's lock frees itself this long after it was
    /// taken. Defaults to the executor's `default_at_most`. One of them is required.
    pub fn at_most(mut self, at_most: Duration) -> Self {
        self.spec.at_most = Some(at_most);
        self
    }

    /// The lock's `at_least`. Defaults to 0 where the store records fires, because the fire claim,
    /// not a minimum hold, keeps replicas from running one fire twice. Without fire claims, it is
    /// what keeps replicas whose clocks differ from each running a fire. Set it to more than their
    /// clock difference. It must be shorter than the schedule's shortest gap.
    pub fn at_least(mut self, at_least: Duration) -> Self {
        self.spec.at_least = Some(at_least);
        self
    }

    /// Extend the lock every `at_most / 2` while the body runs. Defaults to off.
    pub fn keep_alive(mut self, keep_alive: bool) -> Self {
        self.spec.keep_alive = keep_alive;
        self
    }

    /// Catch up on start: claim the latest fire at or before the store's now, once, if no replica
    /// has run it. Defaults to off. See the [`Scheduler`](crate::Scheduler) docs for what it can
    /// and cannot tell.
    pub fn catch_up(mut self, catch_up: bool) -> Self {
        self.spec.catch_up = catch_up;
        self
    }

    /// What to do with a fire met while the job's lock is held. See [`OnHeld`].
    pub fn on_held(mut self, on_held: OnHeld) -> Self {
        self.spec.on_held = on_held;
        self
    }

    /// Run only while this replica leads `latch`. Fires are still claimed, so a failover never
    /// repeats one. A run is stopped when the term ends: its future is dropped and its lock
    /// released. The run can read its [`LeaderTerm`] from [`RunContext::term`].
    pub fn leader_only(mut self, latch: LeaderLatch) -> Self {
        self.leader = Some(latch);
        self
    }
}
