//! One fire, claimed and run on request: [`LockingTaskExecutor::execute_fire`], for schedulers
//! other than [`Scheduler`](super::Scheduler) that know their fires, such as a cron stream.
//!
//! It is the claim of one [`Scheduler`](super::Scheduler) fire without the loop around it: the
//! same claim, the same wait when the store says "too early", the same retries within the window
//! and the same handling of lost replies (docs/guarantees.md, "Lost replies").

use std::time::Duration;

use tokio::time::Instant;
use tracing::Instrument;

use super::clock::StoreClock;
use super::ledger;
use super::lost::{self, LostClaims, Unsettled};
use super::span::{self, FireEnd};
use crate::config::LockConfig;
use crate::error::{Error, Result};
use crate::executor::{Execution, LockGuard, LockingTaskExecutor, run_under};
use crate::fire::{Fire, FireClaim};
use crate::jobs::{RunOutcome, RunReport, TaskOutcome};
use crate::observe;
use crate::outage::Cause;
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
    /// - a store error is retried within the fire's window, at least once a second and more
    ///   often as the window's end nears;
    /// - a claim whose reply was lost is recognised by its row and run if it committed, or
    ///   released unrun, as docs/guarantees.md says under "Lost replies". When the store cannot
    ///   tell before the window ends, or the call is dropped, the executor keeps the claim, and
    ///   the next call for the same lock releases it if it holds the lock. The claim is
    ///   recognised only once a reply has told the store's clock, which the executor keeps from
    ///   one call to the next. Before that, such a claim holds its lock to `at_most`.
    ///
    /// The run releases the lock when the task ends, with `at_least` from `cfg`. The release
    /// records the run's outcome in the store's job state, as a scheduler's does. The task's
    /// output tells the outcome through [`TaskOutcome`]: `()` succeeds, a `Result` fails with its
    /// error. Inside the task [`current_lock`](crate::current_lock) works.
    ///
    /// A [`shutdown`](Self::shutdown) ends a wait for the fire or for a retry at once. As with
    /// [`execute`](Self::execute), it does not stop a task that runs: the task is told through
    /// `current_lock()`, and when the grace is over its lock is released.
    ///
    /// # Errors
    ///
    /// - [`Error::is_unsupported`](crate::Error::is_unsupported): the store does not record
    ///   fires, such as a SQL table without `last_fire`. Use [`execute`](Self::execute) with an
    ///   `at_least` instead.
    /// - The store's error at once when it is set up wrong: a missing table or column, or a name
    ///   its column cannot hold.
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
        let span = span::run_span(cfg.name(), None, fire.at(), None);
        let run = self
            .claim_then_run(cfg, fire, task)
            .instrument(span.clone())
            .await;
        // A fire run here recorded its claim before the run, which may panic.
        let end = match &run {
            Ok(FireRun::Ran(_)) => None,
            Ok(FireRun::NotRun(FireClaim::WindowPassed { .. })) => Some(FireEnd::Missed),
            Ok(FireRun::NotRun(FireClaim::Held { .. })) => Some(FireEnd::Held),
            Ok(FireRun::NotRun(FireClaim::Paused { .. })) => Some(FireEnd::Paused),
            Ok(FireRun::NotRun(_)) => Some(FireEnd::ClaimedElsewhere),
            Err(error) if error.is_shutdown() => Some(FireEnd::Shutdown),
            Err(_) => Some(FireEnd::StoreError),
        };
        if let Some(end) = end {
            span::record_claim(&span, end);
        }
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
        let name = cfg.name();
        // This call's claims whose replies were lost: they may have committed. They are also kept
        // on the executor until settled, so that a later call settles them if this one cannot,
        // or if it is dropped.
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
                Err(error) if is_final(&error) => {
                    self.settle(clock, name).await;
                    return Err(error);
                }
                Err(error) => {
                    LostClaims::note(&mut lost, sent, Instant::now());
                    if let Some(lost) = lost {
                        self.keep_unsettled(name, Unsettled::new(*fire, lost));
                    }
                    observe::fire(name, "error");
                    let now = clock.store_now();
                    if now >= fire.next() {
                        observe::fire(name, "missed");
                        self.settle(clock, name).await;
                        return Err(error);
                    }
                    let left = (fire.next() - now).to_std().unwrap_or_default();
                    let wait = (left / 2).clamp(RETRY_FLOOR, Duration::from_secs(1));
                    tracing::debug!(%error, wait_ms = wait.as_millis(), "fire claim failed; retrying");
                    if !self.sleep_unless_draining(wait).await {
                        self.settle(clock, name).await;
                        return Err(Error::shutdown("fire claim"));
                    }
                    continue;
                }
            };
            clock.observe(attempt.reply.store_now(), attempt.sent, attempt.received);
            match attempt.reply {
                FireClaim::Claimed(_) => {
                    // The store recorded this claim, so no lost one of this call committed, and
                    // none kept from an earlier call holds the lock.
                    self.take_unsettled(name);
                    if let Some(guard) = attempt.guard {
                        break guard;
                    }
                    // Another caller in this process took this claim over, its reply lost, and
                    // runs it.
                    observe::fire(name, "claimed_elsewhere");
                    return Ok(FireRun::NotRun(attempt.reply));
                }
                FireClaim::TooEarly { now } => {
                    let early = (fire.at() - now).to_std().unwrap_or_default();
                    tracing::debug!(
                        early_ms = early.as_millis(),
                        "claimed before F by the store's clock; waiting the difference"
                    );
                    if !self
                        .sleep_unless_draining(early.max(Duration::from_millis(1)))
                        .await
                    {
                        self.settle(clock, name).await;
                        return Err(Error::shutdown("fire claim"));
                    }
                }
                FireClaim::ClaimedElsewhere {
                    recorded,
                    ref holder,
                    ..
                } => {
                    // The fire, or a later one, is recorded: whoever claimed it took the lock
                    // after any lost claim of this call or of an earlier one.
                    self.take_unsettled(name);
                    if recorded == fire.at()
                        && let Some(uncertain) = lost.take()
                        && let Some(guard) =
                            lost::adopt_with(self, clock, cfg, fire, &uncertain, holder.clone())
                                .await
                    {
                        break guard;
                    }
                    observe::fire(name, "claimed_elsewhere");
                    return Ok(FireRun::NotRun(attempt.reply));
                }
                FireClaim::Held { ref holder, .. } => {
                    // Had a lost claim of this call committed, the fire would be recorded. One of
                    // an earlier fire, kept unsettled, may be what holds the lock.
                    if let Some(kept) = self.take_unsettled(name)
                        && lost::release_if_ours_with(self, clock, &kept, holder).await
                    {
                        continue;
                    }
                    observe::fire(name, "held");
                    return Ok(FireRun::NotRun(attempt.reply));
                }
                reply => {
                    // The window passed, or the job is paused. The store looks at both before
                    // the recorded fire, so this does not tell whether a lost claim committed
                    // and holds the lock, unrun.
                    observe::not_run(name, &reply);
                    self.settle(clock, name).await;
                    return Ok(FireRun::NotRun(reply));
                }
            }
        };
        span::record_claim(&tracing::Span::current(), FireEnd::Ran);
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
        let recording = self.recording();
        run_under(guard, task, |ended| {
            let run = match ended {
                Ok(output) => output.outcome(),
                Err(_) => RunOutcome::Panicked,
            };
            tracing::info!(outcome = run.kind(), "run ended");
            span::record_outcome(&tracing::Span::current(), &run);
            handle
                .lease()
                .set_run(RunReport::new(fire.at(), run), recording);
        })
        .await
    }

    /// Settles the lost claims kept for `name`: reads the lock's holder once and releases it if
    /// it is one of them. They stay kept for the next call when the holder cannot be read.
    async fn settle(&self, clock: &StoreClock, name: &str) {
        if let Some(kept) = self.take_unsettled(name)
            && !lost::settle(self, clock, name, &kept).await
        {
            self.keep_unsettled(name, kept);
        }
    }
}

/// Whether retrying a failed claim cannot help: the store has no fire claims, the drain began, or
/// the store is set up wrong, such as a missing table or a name its column cannot hold. The store
/// refused these claims, so they did not commit.
fn is_final(error: &Error) -> bool {
    error.is_unsupported() || error.is_shutdown() || Cause::of(error).is_misconfiguration()
}
