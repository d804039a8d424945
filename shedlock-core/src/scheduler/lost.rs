//! Fire claims whose replies were lost, by a timeout or a cut connection. Such a claim may have
//! committed, and this replica then holds the fire's lock with nobody running it. This is the code
//! of docs/guarantees.md, "Lost replies".
//!
//! A committed claim is recognised by its row, never by the owner id alone, which a restarted pod
//! or a second scheduler of this process may share. The row's owner is this executor's, and its
//! `locked_at` falls, on the store's clock, between the send of this job loop's first lost claim of
//! the fire and the failure of its last. The claim is then run, if the fire is still claimable by
//! this loop. Once its window has passed, the claim is released unrun when the next claim's reply
//! names it as the lock's holder, or at shutdown, by exactly one job loop of the process, see
//! [`ledger`](super::ledger).

use std::time::Duration;

use tokio::time::Instant;

use super::clock::StoreClock;
use super::{Entry, Shared, ledger};
use crate::config::LockConfig;
use crate::executor::{LockGuard, LockingTaskExecutor};
use crate::fire::Fire;
use crate::provider::LockRecord;

/// Added to the clock estimate's own error when placing a `locked_at` in the span. Stores keep
/// times to the millisecond, as MySQL `TIMESTAMP(3)` and SQLite do. So a `locked_at` may read up to
/// a millisecond off the instant the store decided.
const STORE_PRECISION: Duration = Duration::from_millis(2);

/// One job loop's claims of one fire whose replies were lost. It keeps the local instants from the
/// send of the first to the failure of the last.
#[derive(Debug, Clone, Copy)]
pub(super) struct LostClaims {
    first_sent: Instant,
    last_failed: Instant,
}

impl LostClaims {
    /// Notes a claim sent at `sent` that failed at `failed`.
    pub(super) fn note(lost: &mut Option<Self>, sent: Instant, failed: Instant) {
        match lost {
            Some(lost) => lost.last_failed = failed,
            None => {
                *lost = Some(Self {
                    first_sent: sent,
                    last_failed: failed,
                });
            }
        }
    }

    /// Whether `record` may be one of these claims. It must be `owner`'s. No guard of this process
    /// may hold it, such as a plain lock or another loop's run under the same owner id. Its
    /// `locked_at` must fall between the first send and the last failure on the store's clock,
    /// widened by how far the clock estimate may be off. It is never so before a reply told the
    /// store's clock, because the span would be on this process's clock alone.
    pub(super) fn may_be(&self, record: &LockRecord, owner: &str, clock: &StoreClock) -> bool {
        if record.owner() != owner
            || clock.known_offset().is_none()
            || crate::drain::is_held_in_process(record)
        {
            return false;
        }
        let slack = chrono::Duration::from_std(clock.error().saturating_add(STORE_PRECISION))
            .unwrap_or(chrono::Duration::MAX);
        let from = clock.store_at(self.first_sent).checked_sub_signed(slack);
        let to = clock.store_at(self.last_failed).checked_add_signed(slack);
        let at = record.locked_at();
        from.is_none_or(|from| from <= at) && to.is_none_or(|to| at <= to)
    }
}

/// The fire was found recorded after claims of this loop were lost. If `holder` is one of them, the
/// fire is this loop's to run, and it takes the lock over. `None` otherwise: another replica's
/// claim, another loop of this process runs it, or the drain began.
pub(super) async fn adopt(
    shared: &Shared,
    job: &Entry,
    fire: &Fire,
    lost: &LostClaims,
    holder: LockRecord,
) -> Option<LockGuard> {
    adopt_with(
        &shared.executor,
        &shared.clock,
        &job.cfg,
        fire,
        lost,
        holder,
    )
    .await
}

/// [`adopt`] for any caller that claims fires through `executor`, with its estimate of the store's
/// clock, such as [`LockingTaskExecutor::execute_fire`].
pub(super) async fn adopt_with(
    executor: &LockingTaskExecutor,
    clock: &StoreClock,
    cfg: &LockConfig,
    fire: &Fire,
    lost: &LostClaims,
    holder: LockRecord,
) -> Option<LockGuard> {
    let owner = executor.owner_id().to_owned();
    adopt_as(executor, clock, cfg, fire, (lost, &owner), holder).await
}

/// [`adopt_with`] for claims sent under `owner`: the executor's owner id, or its trigger claims'
/// (`admin::TRIGGER_MARK`).
pub(super) async fn adopt_as(
    executor: &LockingTaskExecutor,
    clock: &StoreClock,
    cfg: &LockConfig,
    fire: &Fire,
    (lost, owner): (&LostClaims, &str),
    holder: LockRecord,
) -> Option<LockGuard> {
    let now = clock.store_now();
    if holder.lock_until() <= now || !lost.may_be(&holder, owner, clock) {
        return None;
    }
    let left = (fire.next() - now).to_std().unwrap_or_default();
    if !ledger::adopt(&holder, fire.at(), left) {
        tracing::debug!("a claim whose reply was lost is run by another job loop of this process");
        return None;
    }
    match executor
        .adopt_claim(cfg, holder.clone(), lost.first_sent)
        .await
    {
        Ok(guard) => {
            tracing::info!("a claim whose reply was lost had committed: running the fire");
            Some(guard)
        }
        Err(error) => {
            // Shutdown began, or the claim came back too late to use: it is this loop's, and
            // nobody runs it, so it is given back rather than left held to at_most.
            tracing::warn!(
                error = &error as &dyn std::error::Error,
                "could not take over a claim whose reply was lost; releasing it"
            );
            if let Err(error) = executor.release_unrun(&holder).await {
                tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    "could not release it either; its lock ends at at_most"
                );
            }
            None
        }
    }
}

/// Claims of a fire this loop will not run, because its window passed while their replies were
/// lost. One of them may have committed and hold the job's lock, unrun.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Unsettled {
    fire: Fire,
    lost: LostClaims,
}

impl Unsettled {
    pub(super) fn new(fire: Fire, lost: LostClaims) -> Self {
        Self { fire, lost }
    }
}

/// A claim of a later fire met the lock held by `holder`. If that is one of the job's unsettled
/// lost claims, it releases it unrun and answers `true`, so the caller claims again at once, with
/// no extra read since the store's reply named the holder. The job's unsettled claims are dropped
/// either way, because that reply says whether they hold the lock.
pub(super) async fn release_if_ours(shared: &Shared, job: &Entry, holder: &LockRecord) -> bool {
    let Some(unsettled) = job.take_unsettled() else {
        return false;
    };
    release_if_ours_with(&shared.executor, &shared.clock, &unsettled, holder).await
}

/// [`release_if_ours`] for any caller that keeps its unsettled claims itself, such as
/// [`LockingTaskExecutor::execute_fire`].
pub(super) async fn release_if_ours_with(
    executor: &LockingTaskExecutor,
    clock: &StoreClock,
    unsettled: &Unsettled,
    holder: &LockRecord,
) -> bool {
    if !unsettled.lost.may_be(holder, executor.owner_id(), clock)
        || !ledger::adopt(holder, unsettled.fire.at(), Duration::ZERO)
    {
        return false;
    }
    match executor.release_unrun(holder).await {
        Ok(released) => {
            tracing::info!(
                fire = %unsettled.fire.at(),
                "a claim whose reply was lost had committed after all; its fire was not run (its \
                 window had passed), and its lock is released"
            );
            released
        }
        Err(error) => {
            tracing::warn!(
                error = &error as &dyn std::error::Error,
                "could not release a claim whose reply was lost; its lock ends at at_most"
            );
            false
        }
    }
}

/// The job loop ends, by shutdown or the schedule's end, with unsettled lost claims. It reads the
/// lock's holder once. If that is one of them, it releases it, so a deploy does not leave it held
/// to `at_most`. Each call is bounded by the call timeout.
pub(super) async fn settle_on_exit(shared: &Shared, job: &Entry) {
    let Some(unsettled) = job.take_unsettled() else {
        return;
    };
    settle(&shared.executor, &shared.clock, job.cfg.name(), &unsettled).await;
}

/// Reads the holder of `name` once and releases it if it is one of `unsettled`'s claims. Returns
/// whether that was decided: `false` when the holder could not be read.
pub(super) async fn settle(
    executor: &LockingTaskExecutor,
    clock: &StoreClock,
    name: &str,
    unsettled: &Unsettled,
) -> bool {
    match executor.holder(name).await {
        Ok(Some(record))
            if unsettled.lost.may_be(&record, executor.owner_id(), clock)
                && ledger::adopt(&record, unsettled.fire.at(), Duration::ZERO) =>
        {
            if let Err(error) = executor.release_unrun(&record).await {
                tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    "could not release a claim whose reply was lost; its lock ends at at_most"
                );
            }
            true
        }
        Ok(_) => true,
        Err(error) => {
            tracing::warn!(
                error = &error as &dyn std::error::Error,
                "could not tell whether a claim whose reply was lost committed; if it did, its \
                 lock ends at at_most"
            );
            false
        }
    }
}
