//! One job's loop. It waits for each fire by the store's clock, claims it, and runs the body if
//! claimed. It counts the fires met held, missed or claimed elsewhere.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;
use tracing::Instrument;

use super::lost::{self, LostClaims};
use super::span::{self, FireEnd};
use super::status::Counters;
use super::{
    Entry, LastRun, MODE_CLAIMS, MODE_PLAIN, OnHeld, RunContext, RunOutcome, Shared, ledger,
};
use crate::current;
use crate::drain::stop_window;
use crate::error::Error;
use crate::executor::{LockGuard, catch_unwind_future};
use crate::fire::{Fire, FireClaim};
use crate::jobs::RunReport;
use crate::latch::LeaderTerm;
use crate::observe;
use crate::outage::millis;
use crate::provider::LockRecord;

/// The shortest wait between two claims of one fire after a store error.
const RETRY_FLOOR: Duration = Duration::from_millis(50);

/// One job's life: wait for each fire by the store's clock, claim it, run it if claimed. `start`
/// is the store's time when the loop was spawned: its first fire (or catch-up fire) follows from
/// it, whenever the task is first polled.
pub(super) async fn job_loop(shared: Arc<Shared>, job: Arc<Entry>, start: DateTime<Utc>) {
    let mut cursor = start;
    if job.catch_up && shared.mode.load(Ordering::SeqCst) == MODE_PLAIN {
        // Without recorded fires nothing tells whether a replica already ran the fire.
        tracing::warn!(
            job = %job.name,
            "catch-up needs a store that records fires; this job does not catch up"
        );
    } else if let Some(fire) = catch_up_fire(&shared, &job, start) {
        set_next_fire(&job, Some(fire.at()));
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
            tracing::debug!(
                job = %job.name,
                fire = %fire.at(),
                "fire missed: this replica reached it after its window"
            );
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

/// Handles `fire`. If it ran, it deals with the fires met while it held the lock. Each is counted
/// held. Under [`OnHeld::RunLate`] with fire claims, the latest one, whose window is still open, is
/// claimed at once instead. The same goes after that run. Returns the last fire dealt with, from
/// which the next fire follows. `None` if `fire` did not run.
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

/// The fire a job that catches up claims first when it starts at `start`, by the store's clock. It
/// is the latest one before `start`, if the job catches up and the store records fires.
fn catch_up_fire(shared: &Shared, job: &Entry, start: DateTime<Utc>) -> Option<Fire> {
    if !job.catch_up || shared.mode.load(Ordering::SeqCst) == MODE_PLAIN {
        return None;
    }
    job.schedule
        .fire_containing(start)
        .filter(|fire| fire.at() < start)
}

/// The first fire a job's loop decides when it starts at `start`: its catch-up fire, or else its
/// next fire. [`JobStatus::next_fire`](super::JobStatus::next_fire) shows it from the moment the
/// job is started.
pub(super) fn first_fire(
    shared: &Shared,
    job: &Entry,
    start: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    catch_up_fire(shared, job, start)
        .map(|fire| fire.at())
        .or_else(|| job.schedule.next_after(start))
}

fn set_next_fire(job: &Entry, at: Option<DateTime<Utc>>) {
    job.counters.set_next_fire(at);
}

/// After a run that started at `fire`, the fires met while it held the lock are counted held. They
/// are never queued. Returns the last of them, from which the next fire follows. With `open_one`,
/// the last of them is not counted if its window is still open. It is then returned with its window
/// too, to be claimed late.
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

/// Claims `fire` and runs it if claimed. Returns whether it ran. Within the fire's window, it
/// retries while too early or on store errors. All of it happens in the fire's span, which says how
/// the fire ended here.
async fn handle_fire(shared: &Shared, job: &Entry, fire: Fire, catch_up: bool) -> bool {
    let fire_span = span::run_span(&job.name, Some(&job.schedule), fire.at(), None);
    let recorded = fire_span.clone();
    async move {
        // This loop's claims of the fire whose replies were lost (a timeout, a cut connection):
        // they may have committed (see `lost`).
        let mut lost: Option<LostClaims> = None;
        let end = claim_and_run(shared, job, fire, catch_up, &mut lost).await;
        span::record_claim(&recorded, end);
        let ran = end == FireEnd::Ran;
        if let (false, Some(lost)) = (ran, lost) {
            // Settled when a later claim's reply names the holder (or at the loop's end).
            *job.unsettled.lock().unwrap_or_else(PoisonError::into_inner) =
                Some(lost::Unsettled::new(fire, lost));
        }
        ran
    }
    .instrument(fire_span)
    .await
}

/// The leader term a fire of `job` runs in: `None` for a job that is not leader-only, and
/// [`FireEnd::NotLeader`] when this replica does not lead.
fn leading_term(job: &Entry) -> Result<Option<LeaderTerm>, FireEnd> {
    let Some(latch) = &job.leader else {
        return Ok(None);
    };
    let term = latch.current_term().filter(LeaderTerm::is_active);
    if term.is_none() {
        tracing::trace!("not leading: the fire is the leader's");
        return Err(FireEnd::NotLeader);
    }
    Ok(term)
}

/// [`handle_fire`]'s loop. Claims whose replies were lost are noted in `lost`. They are left there
/// when the fire is not run for them, and the caller then settles them.
async fn claim_and_run(
    shared: &Shared,
    job: &Entry,
    fire: Fire,
    catch_up: bool,
    lost: &mut Option<LostClaims>,
) -> FireEnd {
    // Under OnHeld::RunLate, whether a claim that met the lock held was made once more.
    let mut claimed_again = false;
    loop {
        if shared.stopping() {
            return FireEnd::Shutdown;
        }
        let term = match leading_term(job) {
            Ok(term) => term,
            Err(end) => return end,
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
                store_answered(job, Some(&attempt.reply));
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
                            return FireEnd::ClaimedElsewhere;
                        };
                        *lost = None;
                        let start = Start::fire(catch_up, attempt.received);
                        run(shared, job, fire, guard, term, start).await;
                        return FireEnd::Ran;
                    }
                    FireClaim::TooEarly { now } => {
                        let early = (fire.at() - now).to_std().unwrap_or_default();
                        tracing::debug!(
                            early_ms = early.as_millis(),
                            "claimed before F by the store's clock; waiting the difference"
                        );
                        if !shared.wait(early.max(Duration::from_millis(1))).await {
                            return FireEnd::Shutdown;
                        }
                    }
                    FireClaim::WindowPassed { now } => {
                        missed_at_the_store(job, &fire, now);
                        return FireEnd::Missed;
                    }
                    FireClaim::Paused { until, .. } => return paused_at_the_store(job, until),
                    FireClaim::ClaimedElsewhere {
                        recorded, holder, ..
                    } => {
                        let by = holder.owner().to_owned();
                        if let Some(uncertain) = lost.take()
                            && recorded == fire.at()
                            && let Some(guard) =
                                lost::adopt(shared, job, &fire, &uncertain, holder).await
                        {
                            let start = Start::fire(catch_up, attempt.received);
                            run(shared, job, fire, guard, term, start).await;
                            return FireEnd::Ran;
                        }
                        // The recorded claim is not one of this loop's lost ones (or another
                        // loop of this process runs it): nothing of this loop is left to settle.
                        tracing::debug!(by, %recorded, "fire claimed by another replica");
                        Counters::bump(&job.counters.claimed_elsewhere);
                        observe::fire(&job.name, "claimed_elsewhere");
                        return FireEnd::ClaimedElsewhere;
                    }
                    FireClaim::Held { holder, .. } => {
                        // Had a lost claim of this loop committed, the fire would be recorded
                        // (ClaimedElsewhere): none did.
                        *lost = None;
                        if lost::release_if_ours(shared, job, &holder).await {
                            continue; // an earlier fire's lost claim held it: claim again
                        }
                        if let Some(end) =
                            met_held(shared, job, &fire, &holder, !claimed_again).await
                        {
                            return end;
                        }
                        claimed_again = true;
                    }
                }
            }
            Err(e) if e.is_unsupported() => shared.switch_to_plain(&e),
            Err(e) if e.is_shutdown() => return FireEnd::Shutdown,
            Err(error) => {
                LostClaims::note(lost, sent, Instant::now());
                if let Some(end) = retry_after_error(shared, job, &fire, &error).await {
                    return end;
                }
            }
        }
    }
}

/// A claim of `fire` reached the store after the window. The store's clock read `now`. The fire is
/// counted missed.
fn missed_at_the_store(job: &Entry, fire: &Fire, now: DateTime<Utc>) {
    tracing::info!(
        store_now = %now,
        window_end = %fire.next(),
        "fire missed: its window passed before it was claimed"
    );
    Counters::bump(&job.counters.missed);
    observe::fire(&job.name, "missed");
}

/// A claim met an operator's pause, which ends at `until` (`None`: when resumed). The fire is counted
/// paused, not missed. The store looks at the pause before the recorded fire, so a lost claim of
/// the loop stays uncertain, for the caller to settle.
fn paused_at_the_store(job: &Entry, until: Option<DateTime<Utc>>) -> FireEnd {
    if let Some(until) = until {
        tracing::info!(%until, "fire not run: the job is paused");
    } else {
        tracing::info!("fire not run: the job is paused until resumed");
    }
    Counters::bump(&job.counters.paused);
    observe::fire(&job.name, "paused");
    FireEnd::Paused
}

/// A claim of `fire` met the lock held by `holder`. Under [`OnHeld::RunLate`], the first time
/// (`first`), the lock may free inside the window. It then waits until then and answers `None`, to
/// claim once more, or [`FireEnd::Shutdown`] if shutdown began meanwhile. The wait adds how far the
/// estimate of the store's clock may be off, so the store sees the lock free. Otherwise the fire is
/// counted held, and it answers [`FireEnd::Held`].
async fn met_held(
    shared: &Shared,
    job: &Entry,
    fire: &Fire,
    holder: &LockRecord,
    first: bool,
) -> Option<FireEnd> {
    let until = holder.lock_until();
    if first && job.on_held == OnHeld::RunLate && until < fire.next() {
        tracing::debug!(holder = holder.owner(), %until, "fire met while the lock is held; claiming again when it frees");
        let error = chrono::Duration::from_std(shared.clock.error()).unwrap_or_default();
        let at = until.checked_add_signed(error).unwrap_or(until);
        let waited = shared.wait_until(shared.clock.instant_for(at)).await;
        return (!waited).then_some(FireEnd::Shutdown);
    }
    tracing::info!(
        holder = holder.owner(),
        %until,
        "fire met while the lock is held: counted, not queued"
    );
    Counters::bump(&job.counters.held);
    observe::fire(&job.name, "held");
    Some(FireEnd::Held)
}

/// A store call of `job` failed. The first failure of an outage, or of a new cause, is logged at
/// WARN. The rest are logged at DEBUG until [`store_answered`].
fn store_failed(job: &Entry, operation: &'static str, error: &Error) {
    let mut outage = job.outage.lock().unwrap_or_else(PoisonError::into_inner);
    if outage.failed(error).is_some() {
        tracing::warn!(
            error = error as &dyn std::error::Error,
            operation,
            "the lock store failed; this job retries within each fire's window and logs further \
             failures at DEBUG until the store answers again"
        );
    } else {
        tracing::debug!(
            error = error as &dyn std::error::Error,
            operation,
            failures = outage.failures(),
            "lock store still failing"
        );
    }
}

/// A store call of `job` was answered. It ends an outage, logging how many calls failed and for how
/// long.
fn store_answered(job: &Entry, reply: Option<&FireClaim>) {
    // Only a reply the store decided after looking at the pause tells whether the job is paused.
    if let Some(reply) = reply.filter(|r| {
        !matches!(
            r,
            FireClaim::TooEarly { .. } | FireClaim::WindowPassed { .. }
        )
    }) {
        let paused = matches!(reply, FireClaim::Paused { .. });
        job.counters.note_paused(&job.name, paused);
    }
    let ended = job
        .outage
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .recovered();
    if let Some((failures, lasted)) = ended {
        tracing::info!(
            failures,
            outage_ms = millis(lasted),
            "the lock store answers again"
        );
    }
}

/// After a failed claim of `fire`, counts it and waits before the next try. It does not wait once
/// the window has passed, and the fire is then counted missed. It does not wait once shutdown
/// began. Returns `None` to try again, or how the fire ended.
async fn retry_after_error(
    shared: &Shared,
    job: &Entry,
    fire: &Fire,
    error: &Error,
) -> Option<FireEnd> {
    Counters::bump(&job.counters.store_errors);
    observe::fire(&job.name, "error");
    store_failed(job, "claim_fire", error);
    let now = shared.clock.store_now();
    if now >= fire.next() {
        tracing::debug!("fire missed: the lock store failed until its window passed");
        Counters::bump(&job.counters.missed);
        observe::fire(&job.name, "missed");
        return Some(FireEnd::Missed);
    }
    // Half the window left, at most a second, at least RETRY_FLOOR: close to the window's end a
    // failing store is not hammered.
    let left = (fire.next() - now).to_std().unwrap_or_default();
    let wait = (left / 2).clamp(RETRY_FLOOR, Duration::from_secs(1));
    (!shared.wait(wait).await).then_some(FireEnd::Shutdown)
}

/// A fire on a store without fire claims. It takes a plain lock, whose `at_least` keeps replicas
/// apart.
async fn plain_fire(shared: &Shared, job: &Entry, fire: Fire, term: Option<LeaderTerm>) -> FireEnd {
    let locked = shared.executor.lock(&job.cfg, false).await;
    let answered = Instant::now();
    if locked.is_ok() {
        store_answered(job, None);
    }
    match locked {
        Ok(Some(guard)) => {
            let start = Start::fire(false, answered);
            run(shared, job, fire, guard, term, start).await;
            FireEnd::Ran
        }
        Ok(None) => {
            tracing::debug!("lock held elsewhere; fire skipped");
            Counters::bump(&job.counters.claimed_elsewhere);
            observe::fire(&job.name, "claimed_elsewhere");
            FireEnd::ClaimedElsewhere
        }
        Err(e) if e.is_shutdown() => FireEnd::Shutdown,
        Err(error) => {
            store_failed(job, "acquire", &error);
            Counters::bump(&job.counters.store_errors);
            observe::fire(&job.name, "error");
            FireEnd::StoreError
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

/// How a run came about: a catch-up or not, an operator's trigger or a fire, and when the store's
/// answer that let it start arrived.
#[derive(Debug, Clone, Copy)]
pub(super) struct Start {
    catch_up: bool,
    trigger: Option<i64>,
    answered: Instant,
}

impl Start {
    /// A scheduled fire's run (a catch-up if `catch_up`), started by an answer at `answered`.
    pub(super) fn fire(catch_up: bool, answered: Instant) -> Self {
        Self {
            catch_up,
            trigger: None,
            answered,
        }
    }

    /// The run of trigger `id` ("run now"), started by an answer at `answered`.
    pub(super) fn trigger(id: i64, answered: Instant) -> Self {
        Self {
            catch_up: false,
            trigger: Some(id),
            answered,
        }
    }

    /// What the body of the run of `fire` under `lock` is told.
    fn context(
        self,
        fire: Fire,
        lock: current::LockHandle,
        term: Option<LeaderTerm>,
    ) -> RunContext {
        RunContext {
            fire,
            lock,
            term,
            catch_up: self.catch_up,
            trigger: self.trigger,
            answered: self.answered.into_std(),
        }
    }
}

/// Runs the body under `guard`. It is stopped when the leader term ends or shutdown cancels it.
pub(super) async fn run(
    shared: &Shared,
    job: &Entry,
    fire: Fire,
    guard: LockGuard,
    term: Option<LeaderTerm>,
    start: Start,
) {
    let catch_up = start.catch_up;
    let handle = guard.handle();
    let ctx = start.context(fire, handle.clone(), term.clone());
    let started = shared.clock.store_now();
    let started_at = Instant::now();
    // Until the body ends, a release (the drain's) records the run as cancelled.
    handle.lease().set_run(
        RunReport::new(fire.at(), RunOutcome::Cancelled),
        &shared.recording,
    );
    Counters::bump(&job.counters.runs);
    observe::fire(&job.name, "run");
    // The fire's span (`handle_fire`'s) is the current one: the run is part of its future.
    let fire_span = tracing::Span::current();
    span::record_token(&fire_span, handle.fencing_token());
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
    span::record_outcome(&fire_span, &outcome);
    observe::task_duration(handle.name(), took);
    handle.lease().set_run(
        RunReport::new(fire.at(), outcome.clone()),
        &shared.recording,
    );
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
    let ended = shared.clock.store_now();
    let failures = &job.counters.consecutive_failures;
    let failed = match &outcome {
        RunOutcome::Succeeded => {
            failures.store(0, Ordering::Relaxed);
            0
        }
        outcome if outcome.is_failure() => failures.fetch_add(1, Ordering::Relaxed) + 1,
        _ => failures.load(Ordering::Relaxed),
    };
    #[allow(
        clippy::cast_precision_loss,
        reason = "Unix seconds with their fraction"
    )]
    let succeeded_at =
        (outcome == RunOutcome::Succeeded).then(|| ended.timestamp_micros() as f64 / 1e6);
    observe::run_ended(&job.name, outcome.kind(), took, failed, succeeded_at);
    *job.counters
        .last_run
        .lock()
        .unwrap_or_else(PoisonError::into_inner) = Some(LastRun {
        fire: fire.at(),
        started,
        ended,
        outcome,
    });
}
