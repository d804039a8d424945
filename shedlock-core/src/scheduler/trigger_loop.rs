//! The scheduler's side of "run now" (see [`trigger`](crate::trigger)): one loop per scheduler that
//! reads the pending triggers, in one store call whatever the number of jobs, and claims and runs
//! those of its own jobs. It reads at start, whenever the store's push wakes it, and at an
//! interval: [`Scheduler::trigger_poll`](super::Scheduler::trigger_poll) without a push, 30 s with
//! one (a missed push is then found late, never lost). The rules are in docs/operating.md, "Run
//! now".

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use tokio::time::Instant;
use tracing::Instrument;

use super::job_loop::Start;
use super::lost::LostClaims;
use super::{Entry, Shared, job_loop, span};
use crate::fire::Fire;
use crate::latch::LeaderTerm;
use crate::trigger::{PendingTrigger, TriggerClaim, TriggerWake};

/// How often pending triggers are read when the store has no push, unless
/// [`Scheduler::trigger_poll`](super::Scheduler::trigger_poll) says otherwise.
pub const DEFAULT_TRIGGER_POLL: Duration = Duration::from_secs(2);

/// How often they are read when the store pushes, in case a push was missed.
const WITH_PUSH: Duration = Duration::from_secs(30);

/// How often a store not set up for triggers (a table without the columns) is asked again.
const NOT_SET_UP: Duration = Duration::from_mins(10);

/// Runs until the scheduler stops. A store without triggers ends it at once, logged at DEBUG.
pub(super) async fn trigger_loop(shared: Arc<Shared>) {
    let mut stopping = shared.stopping.subscribe();
    let mut wake: Option<TriggerWake> = None;
    let mut pushes = true;
    let mut failing = false;
    let mut not_set_up = false;
    loop {
        if wake.is_none() && pushes {
            let watch = tokio::time::timeout(
                shared.executor.call_timeout(),
                shared.executor.provider().watch_triggers(),
            )
            .await;
            match watch {
                Ok(Ok(watch)) => wake = Some(watch),
                Ok(Err(error)) if error.is_unsupported() => pushes = false,
                Ok(Err(error)) => tracing::debug!(
                    error = &error as &dyn std::error::Error,
                    "cannot watch for triggers; polling"
                ),
                Err(_) => tracing::debug!("watching for triggers timed out; polling"),
            }
        }
        let mut wait = if wake.is_some() {
            WITH_PUSH
        } else {
            Duration::from_millis(shared.trigger_poll_ms.load(Ordering::Relaxed))
        };
        let pending = tokio::time::timeout(
            shared.executor.call_timeout(),
            shared.executor.provider().pending_triggers(),
        )
        .await;
        match pending {
            Ok(Ok(pending)) => {
                not_set_up = false;
                if std::mem::take(&mut failing) {
                    tracing::info!("pending triggers are read again");
                }
                for trigger in pending {
                    if shared.stopping() {
                        return;
                    }
                    take(&shared, trigger);
                }
            }
            Ok(Err(error)) if error.is_unsupported() => {
                tracing::debug!(
                    "the store keeps no triggers; `shedlock trigger` cannot reach this scheduler"
                );
                return;
            }
            Ok(Err(error))
                if error.is_missing_table() || error.is_schema() || error.is_invalid_config() =>
            {
                if !std::mem::replace(&mut not_set_up, true) {
                    tracing::info!(
                        error = &error as &dyn std::error::Error,
                        "the store is not set up for triggers (run now); asking again every {}",
                        shedlock_duration::format(NOT_SET_UP)
                    );
                }
                wait = NOT_SET_UP;
            }
            Ok(Err(error)) => {
                if !std::mem::replace(&mut failing, true) {
                    tracing::warn!(
                        error = &error as &dyn std::error::Error,
                        "cannot read pending triggers; retrying"
                    );
                }
            }
            Err(_) => {
                if !std::mem::replace(&mut failing, true) {
                    tracing::warn!("reading pending triggers timed out; retrying");
                }
            }
        }
        let woken = async {
            match wake.as_mut() {
                Some(watch) => watch.next().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = stopping.wait_for(|stop| *stop) => return,
            () = tokio::time::sleep(wait) => {}
            got = woken => {
                if got.is_none() {
                    // The push ended (a lost connection): poll, and watch again next round.
                    wake = None;
                }
            }
        }
    }
}

/// Starts the run of `trigger` if it is one of this scheduler's jobs, not already being claimed
/// here, and, for a leader-only job, this replica leads.
fn take(shared: &Arc<Shared>, trigger: PendingTrigger) {
    let Some(job) = shared
        .jobs
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .find(|job| job.cfg.name() == trigger.lock_name)
        .cloned()
    else {
        return;
    };
    let term = match &job.leader {
        None => None,
        Some(latch) => match latch.current_term().filter(LeaderTerm::is_active) {
            Some(term) => Some(term),
            None => return,
        },
    };
    if !shared
        .triggers_in_flight
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(trigger.id)
    {
        return;
    }
    let task_shared = shared.clone();
    let handle = tokio::spawn(async move {
        let id = trigger.id;
        claim_and_run(&task_shared, &job, trigger, term).await;
        task_shared
            .triggers_in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
    });
    let mut tasks = shared.tasks.lock().unwrap_or_else(PoisonError::into_inner);
    tasks.retain(|task| !task.is_finished());
    tasks.push(handle);
}

/// Claims `trigger` and runs the job once if this replica wins. A claim whose reply was lost is run
/// if the store shows it committed, as for fires (docs/guarantees.md, "Lost replies").
async fn claim_and_run(
    shared: &Shared,
    job: &Entry,
    trigger: PendingTrigger,
    term: Option<LeaderTerm>,
) {
    // The run's fire: the trigger's instant, its window until the trigger expires.
    let end = trigger
        .expires
        .max(trigger.requested_at + chrono::Duration::milliseconds(1));
    let Ok(fire) = Fire::new(trigger.requested_at, end) else {
        return;
    };
    let run_span = span::run_span(&job.name, None, fire.at(), Some(trigger.id));
    async {
        let sent = Instant::now();
        match shared.executor.claim_trigger(&job.cfg, trigger.id).await {
            Ok((reply, guard, sent, received)) => {
                shared.clock.observe(store_now(&reply), sent, received);
                match (reply, guard) {
                    (TriggerClaim::Claimed(_), Some(guard)) => {
                        tracing::info!(id = trigger.id, "running a trigger (run now)");
                        let start = Start::trigger(trigger.id, received);
                        job_loop::run(shared, job, fire, guard, term, start).await;
                    }
                    (reply, _) => tracing::debug!(?reply, "trigger not claimed here"),
                }
            }
            Err(error) if error.is_shutdown() => {}
            Err(error) => {
                let mut lost = None;
                LostClaims::note(&mut lost, sent, Instant::now());
                tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    id = trigger.id,
                    "trigger claim failed; checking whether it committed"
                );
                adopt_if_committed(shared, job, fire, term, lost, trigger.id).await;
            }
        }
    }
    .instrument(run_span)
    .await;
}

/// After a failed claim: if the lock's holder is this replica's claim of the trigger, run it.
async fn adopt_if_committed(
    shared: &Shared,
    job: &Entry,
    fire: Fire,
    term: Option<LeaderTerm>,
    lost: Option<LostClaims>,
    id: i64,
) {
    let Some(lost) = lost else { return };
    let Ok(Some(holder)) = shared.executor.holder(job.cfg.name()).await else {
        return;
    };
    let answered = Instant::now();
    // Only a claim of a trigger carries the trigger mark: a lost fire claim of this replica is
    // never taken for this one, nor this one for a fire's.
    let owner = crate::admin::trigger_owner(shared.executor.owner_id());
    if let Some(guard) = super::lost::adopt_as(
        &shared.executor,
        &shared.clock,
        &job.cfg,
        &fire,
        (&lost, &owner),
        holder,
    )
    .await
    {
        tracing::info!(
            id,
            "a trigger claim whose reply was lost had committed: running it"
        );
        let start = Start::trigger(id, answered);
        job_loop::run(shared, job, fire, guard, term, start).await;
    }
}

fn store_now(reply: &TriggerClaim) -> chrono::DateTime<chrono::Utc> {
    match reply {
        TriggerClaim::Claimed(record) => record.locked_at(),
        TriggerClaim::Gone { now }
        | TriggerClaim::Held { now, .. }
        | TriggerClaim::Paused { now } => *now,
    }
}
