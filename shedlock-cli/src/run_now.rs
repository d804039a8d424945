//! `trigger`: run a job now, once, on one of its replicas, and with `--wait` say which one ran it
//! and how it ended. The rules are in docs/operating.md, "Run now".

use std::fmt::Write as _;
use std::time::Duration;

use chrono::{DateTime, Utc};
use shedlock_core::{
    admin::{LockEntry, TRIGGER_MARK},
    trigger::{Trigger, TriggerAnswer},
};

use crate::command::{Output, check_job_name, read_jobs};
use crate::failure::Failure;
use crate::render;
use crate::steer::{Target, failure, resolve};
use crate::store::Store;

/// How often `--wait` reads the lock row.
const POLL: Duration = Duration::from_millis(200);

pub(crate) async fn trigger(
    store: &Store,
    name: &str,
    expires: Duration,
    wait: bool,
    output: &mut Output<'_>,
) -> Result<(), Failure> {
    check_job_name(name)?;
    let (definitions, entries, now) = read_jobs(store).await?;
    let target = resolve(store, name, &definitions, &entries, now)?;
    if !definitions
        .iter()
        .any(|d| d.definition.lock_name == target.lock)
    {
        return Err(Failure::refused(format!(
            "refused: no replica runs {} now (none publishes it), so none could take a trigger; \
             nothing triggered",
            target.words()
        )));
    }
    let answer = store
        .admin
        .trigger(&target.lock, &store.actor, expires)
        .await
        .map_err(|e| failure(store, &e, "trigger"))?;
    let trigger = match answer {
        TriggerAnswer::Requested(trigger) => trigger,
        TriggerAnswer::Held(holder) => {
            return Err(Failure::refused(format!(
                "refused: {} is running now (held by {} until {}); nothing triggered",
                target.words(),
                render::cell(holder.owner()),
                render::timestamp(holder.lock_until())
            )));
        }
        TriggerAnswer::Paused(pause) => {
            return Err(Failure::refused(format!(
                "refused: {} is {}; resume it first; nothing triggered",
                target.words(),
                render::pause_note(&pause, now)
            )));
        }
        TriggerAnswer::Pending(pending) => {
            return Err(Failure::refused(format!(
                "refused: a trigger of {} asked by {} is waiting for a replica until {}; nothing \
                 triggered",
                target.words(),
                render::cell(&pending.by),
                render::timestamp(pending.expires)
            )));
        }
        other => {
            return Err(Failure::refused(format!(
                "refused: {}: {other:?}; nothing triggered",
                target.words()
            )));
        }
    };
    output.print(&format!(
        "triggered {} (trigger {}); it expires at {} unless a replica takes it\n",
        target.words(),
        trigger.id,
        render::timestamp(trigger.expires)
    ))?;
    if wait {
        wait_for(store, &target, &trigger, output).await
    } else {
        Ok(())
    }
}

/// Reads the row until the trigger was taken and its run recorded or its lock freed, or the
/// trigger expired untaken.
async fn wait_for(
    store: &Store,
    target: &Target,
    trigger: &Trigger,
    output: &mut Output<'_>,
) -> Result<(), Failure> {
    let mut taken_said = false;
    // Whether the last read found the run's lock gone with no outcome recorded; twice ends the
    // wait (a release records the run in the same step, so one more read settles it).
    let mut unrecorded = false;
    loop {
        tokio::time::sleep(POLL).await;
        let entry = store
            .admin
            .entry(&target.lock)
            .await
            .map_err(|e| store.failure(&e))?
            .ok_or_else(|| {
                Failure::refused(format!(
                    "the row of {} was deleted while waiting",
                    target.words()
                ))
            })?;
        let now = entry.store_now();
        let Some(seen) = entry.trigger().filter(|t| t.id == trigger.id) else {
            return Err(Failure::refused(format!(
                "the trigger of {} was replaced while waiting",
                target.words()
            )));
        };
        let Some(taker) = seen.taken_by.clone() else {
            if now >= seen.expires {
                return Err(Failure::refused(format!(
                    "nobody picked up the trigger of {} before it expired at {}: no replica of \
                     it is up, none is 0.2.0 or later, or for a leader-only job none leads; \
                     nothing ran",
                    target.words(),
                    render::timestamp(seen.expires)
                )));
            }
            continue;
        };
        // The replica's owner id, without the mark of its trigger claims.
        let by = render::cell(taker.strip_suffix(TRIGGER_MARK).unwrap_or(&taker));
        if !std::mem::replace(&mut taken_said, true) {
            output.print(&format!(
                "taken by {by} at {}\n",
                render::timestamp(seen.taken_at.unwrap_or(now))
            ))?;
        }
        match ended(&entry, trigger.requested_at, &taker, &by) {
            Ended::Yes(line) => return output.print(&line),
            Ended::Unrecorded if std::mem::replace(&mut unrecorded, true) => {
                return Err(Failure::refused(format!(
                    "{} was taken by {by}, but its run left no outcome: it was cut off (a crash,                      a lost lock, a shutdown) before it could record one",
                    target.words()
                )));
            }
            Ended::Unrecorded | Ended::No => {}
        }
    }
}

/// Whether the trigger's run has ended, by the row.
enum Ended {
    /// It ended: the line to print.
    Yes(String),
    /// The lock is no longer the run's, and no outcome of it is recorded.
    Unrecorded,
    /// It still runs.
    No,
}

/// How the trigger's run ended, once the row shows it: its run recorded (the fire is the trigger's
/// instant, the runner `taker`, the replica that took it), or, on a table without job state, its
/// lock free. `by` is the taker as printed.
fn ended(entry: &LockEntry, fire: DateTime<Utc>, taker: &str, by: &str) -> Ended {
    let run_holds_lock = entry.is_held() && entry.record().owner() == taker;
    let Some(state) = entry.state() else {
        return if run_holds_lock {
            Ended::No
        } else {
            Ended::Yes(format!(
                "ran on {by}; its lock is free again (this store records no outcomes)\n"
            ))
        };
    };
    match state.last_run.as_ref() {
        Some(run) if run.fire == fire && run.runner == taker => {
            let took = (run.ended - run.started).to_std().unwrap_or_default();
            let mut line = format!(
                "ran on {by}: {} in {}",
                run.outcome.kind(),
                render::human(took)
            );
            if let Some(error) = run.outcome.error() {
                let _ = write!(line, ": {}", render::one_line(error));
            }
            line.push('\n');
            Ended::Yes(line)
        }
        _ if run_holds_lock => Ended::No,
        _ => Ended::Unrecorded,
    }
}
