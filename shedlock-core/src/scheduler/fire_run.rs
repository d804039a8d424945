//! One fire, claimed and run on request: [`LockingTaskExecutor::execute_fire`], for schedulers
//! other than [`Scheduler`](super::Scheduler) that know their fires, such as a cron stream.
//!
//! It is the claim of one [`Scheduler`](super::Scheduler) fire without the loop around it: the
//! same claim, the same wait when the store says "too early", the same retries within the window
//! and the same handling of lost replies (docs/guarantees.md, "Lost replies").

use std::panic::resume_unwind;
use std::time::Duration;

use tokio::time::Instant;
use tracing::Instrument;

use super::clock::StoreClock;
use super::ledger;
use super::lost::{self, LostClaims, Unsettled};
use super::span::{self, FireEnd};
use crate::config::LockConfig;
use crate::current;
use crate::error::Result;
use crate::executor::{Execution, LockGuard, LockingTaskExecutor, catch_unwind_future};
use crate::fire::{Fire, FireClaim};
use crate::jobs::{RunOutcome, RunReport, TaskOutcome};
use crate::observe;
use crate::provider::LockRecord;

/// The shortest wait between two claims of one fire after a store error.
const RETRY_FLOOR: Duration = Duration::from_millis(50);

/// What [`LockingTaskExecutor::execute_fire`] did with a fire.
#[derive(Debug)]
#[non_exhaustive]
pub enum FireRun<T> {
    /// This replica claimed the fire and ran the task.
    Ran(Execution<T>),
    /// The fire was not run here. The store's answer says why:
    /// [`WindowPassed`](FireClaim::WindowPassed), [`ClaimedElsewhere`](FireClaim::ClaimedElsewhere)
    /// or [`Held`](FireClaim::Held). It is [`Claimed`](FireClaim::Claimed) in one rare case:
    /// another caller in this process took over the same claim after its own reply was lost, and
    /// runs it.
    NotRun(FireClaim),
}

impl<T> FireRun<T> {
    /// The task's output, if it ran here.
    #[must_use]
    pub fn output(self) -> Option<T> {
        match self {
            Self::Ran(execution) => Some(execution.output),
            Self::NotRun(_) => None,
        }
    }
}

impl LockingTaskExecutor {
    /// Claims `fire` of the job `cfg` names and runs `task` if this replica wins it: the fire runs
    /// at most once across replicas. Feature `scheduler`.
    ///
    /// This is what a [`Scheduler`](crate::Scheduler) does at each fire, for code that has its
    /// own schedule, such as a cron stream. Every replica names the fire the same way, from the
    /// schedule: its instant and the next fire's, see [`Fire`]. Then:
    /// - a claim the store finds too early, by its clock, is sent again once the store's clock
    ///   reaches the fire, so the task never starts early;
    /// - a store error is retried within the fire's window, at most every second;
    /// - a claim whose reply was lost is recognised by its row and run if it committed, or
    ///   released unrun, as docs/guarantees.md says under "Lost replies".
    ///
    /// The run releases the lock when the task ends, with `at_least` from `cfg`. The release
    /// records the run's outcome in the store's job state, as a scheduler's does. The task's
    /// output tells the outcome through [`TaskOutcome`]: `()` succeeds, a `Result` fails with its
    /// error. Inside the task [`current_lock`](crate::current_lock) works.
    ///
    /// # Errors
    ///
    /// - [`Error::is_unsupported`](crate::Error::is_unsupported): the store does not record
    ///   fires, such as a SQL table without `last_fire`. Use [`execute`](Self::execute) with an
    ///   `at_least` instead.
    /// - The store's last error when it failed until the window ended, and
    ///   [`Error::is_shutdown`](crate::Error::is_shutdown) once the executor drains. The task
    ///   did not run.
    ///
    /// # Panics
    ///
    /// Resumes the task's panic, after releasing the lock.
    ///
    /// ```
    /// use std::time::Duration;
    /// use chrono::{TimeZone, Utc};
    /// use shedlock_core::provider::{Fire, FireClaim};
    /// use shedlock_core::scheduler::FireRun;
    /// use shedlock_core::{InMemoryLockProvider, LockConfig, LockingTaskExecutor};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> shedlock_core::Result<()> {
    /// let store = std::sync::Arc::new(InMemoryLockProvider::new());
    /// let a = LockingTaskExecutor::builder(store.clone()).owner_id("a").build()?;
    /// let b = LockingTaskExecutor::builder(store).owner_id("b").build()?;
    /// let cfg = LockConfig::new("report", Duration::from_secs(60))?;
    /// // A fire whose window is open now: it started a second ago and lasts a minute.
    /// let at = Utc::now() - chrono::Duration::seconds(1);
    /// let fire = Fire::new(at, at + chrono::Duration::minutes(1))?;
    /// let send = || async { Ok::<_, std::io::Error>("sent") };
    /// let ran = a.execute_fire(&cfg, &fire, send()).await?;
    /// assert_eq!(ran.output().and_then(Result::ok), Some("sent"));
    /// // The other replica's claim of the same fire finds it claimed.
    /// let again = b.execute_fire(&cfg, &fire, send()).await?;
    /// assert!(matches!(again, FireRun::NotRun(FireClaim::ClaimedElsewhere { .. })));
    /// # Ok(()) }
    /// ```
    pub async fn execute_fire<F>(
        &self,
        cfg: &LockConfig,
        fire: &Fire,
        task: F,
    ) -> Result<FireRun<F::Output>>
    where
        F: Future,
        F::Output: TaskOutcome,
    {
        // The scheduler's span of a fire, with its OpenTelemetry attributes. No schedule is known
        // here, so it has no `faas.cron` or `shedlock.schedule`.
        let span = span::run_span(cfg.name(), None, fire.at());
        let run = self
            .claim_then_run(cfg, fire, task)
            .instrument(span.clone())
            .await;
        let end = match &run {
            Ok(FireRun::Ran(_)) => FireEnd::Ran,
            Ok(FireRun::NotRun(FireClaim::WindowPassed { .. })) => FireEnd::Missed,
            Ok(FireRun::NotRun(FireClaim::Held { .. })) => FireEnd::Held,
            Ok(FireRun::NotRun(_)) => FireEnd::ClaimedElsewhere,
            Err(error) if error.is_shutdown() => FireEnd::Shutdown,
            Err(_) => FireEnd::StoreError,
        };
        span::record_claim(&span, end);
        run
    }

    async fn claim_then_run<F>(
        &self,
        cfg: &LockConfig,
        fire: &Fire,
        task: F,
    ) -> Result<FireRun<F::Output>>
    where
        F: Future,
        F::Output: TaskOutcome,
    {
        let clock = self.fire_clock();
        // This call's claims whose replies were lost: they may have committed.
        let mut lost: Option<LostClaims> = None;
        let claimed = loop {
            let sent = Instant::now();
            let take = |record: &LockRecord| {
                let left = (fire.next() - record.locked_at())
                    .to_std()
                    .unwrap_or_default();
                ledger::claimed(record, fire.at(), left)
            };
            let attempt = match self.claim_fire(cfg, fire, take).await {
                Ok(attempt) => attempt,
                Err(error) if error.is_unsupported() || error.is_shutdown() => {
                    self.settle(clock, cfg, fire, lost).await;
                    return Err(error);
                }
                Err(error) => {
                    LostClaims::note(&mut lost, sent, Instant::now());
                    let now = clock.store_now();
                    if now >= fire.next() || self.is_shutting_down() {
                        self.settle(clock, cfg, fire, lost).await;
                        return Err(error);
                    }
                    let left = (fire.next() - now).to_std().unwrap_or_default();
                    let wait = (left / 2).clamp(RETRY_FLOOR, Duration::from_secs(1));
                    tracing::debug!(%error, wait_ms = wait.as_millis(), "fire claim failed; retrying");
                    tokio::time::sleep(wait).await;
                    continue;
                }
            };
            clock.observe(attempt.reply.store_now(), attempt.sent, attempt.received);
            match attempt.reply {
                FireClaim::Claimed(_) => match attempt.guard {
                    Some(guard) => break guard,
                    None => return Ok(FireRun::NotRun(attempt.reply)),
                },
                FireClaim::TooEarly { now } => {
                    let early = (fire.at() - now).to_std().unwrap_or_default();
                    tracing::debug!(
                        early_ms = early.as_millis(),
                        "claimed before F by the store's clock; waiting the difference"
                    );
                    tokio::time::sleep(early.max(Duration::from_millis(1))).await;
                }
                FireClaim::ClaimedElsewhere {
                    recorded,
                    ref holder,
                    ..
                } if recorded == fire.at() && lost.is_some() => {
                    let uncertain = lost.take();
                    if let Some(uncertain) = uncertain
                        && let Some(guard) =
                            lost::adopt_with(self, clock, cfg, fire, &uncertain, holder.clone())
                                .await
                    {
                        break guard;
                    }
                    observe::fire(cfg.name(), "claimed_elsewhere");
                    return Ok(FireRun::NotRun(attempt.reply));
                }
                reply => {
                    observe::fire(cfg.name(), reply_kind(&reply));
                    if matches!(reply, FireClaim::WindowPassed { .. }) {
                        // The store looks at the window first, so this answer does not tell
                        // whether a lost claim of this call committed and holds the lock, unrun.
                        // `Held` does: a committed claim would have recorded the fire.
                        self.settle(clock, cfg, fire, lost).await;
                    }
                    return Ok(FireRun::NotRun(reply));
                }
            }
        };
        Ok(FireRun::Ran(self.run_fire(fire, claimed, task).await))
    }

    /// Runs `task` under `guard`, the claim of `fire`, and releases it with the run's outcome.
    async fn run_fire<F>(&self, fire: &Fire, guard: LockGuard, task: F) -> Execution<F::Output>
    where
        F: Future,
        F::Output: TaskOutcome,
    {
        let handle = guard.handle();
        // Until the task ends, a release (the drain's) records the run as cancelled.
        handle.lease().set_run(
            RunReport::new(fire.at(), RunOutcome::Cancelled),
            self.recording(),
        );
        observe::fire(handle.name(), "run");
        span::record_token(&tracing::Span::current(), handle.fencing_token());
        tracing::info!(token = ?handle.fencing_token(), "running");
        let started = Instant::now();
        let outcome = current::scope(handle.clone(), catch_unwind_future(task)).await;
        observe::task_duration(handle.name(), started.elapsed());
        let run = match &outcome {
            Ok(output) => output.outcome(),
            Err(_) => RunOutcome::Panicked,
        };
        tracing::info!(outcome = run.kind(), "run ended");
        span::record_outcome(&tracing::Span::current(), &run);
        handle
            .lease()
            .set_run(RunReport::new(fire.at(), run), self.recording());
        let lock_lost = handle.is_lost();
        if lock_lost {
            tracing::warn!(
                "the lock was lost while the task ran; another replica may have run it too"
            );
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

    /// The fire is not run by this call. If claims of it were lost, one may hold its lock: read the
    /// holder once and release it if it is one of them.
    async fn settle(
        &self,
        clock: &StoreClock,
        cfg: &LockConfig,
        fire: &Fire,
        lost: Option<LostClaims>,
    ) {
        if let Some(lost) = lost {
            lost::settle(self, clock, cfg.name(), &Unsettled::new(*fire, lost)).await;
        }
    }
}

/// The name a fire's outcome is counted under, as the scheduler counts it.
fn reply_kind(reply: &FireClaim) -> &'static str {
    match reply {
        FireClaim::WindowPassed { .. } => "missed",
        FireClaim::Held { .. } => "held",
        _ => "claimed_elsewhere",
    }
}
