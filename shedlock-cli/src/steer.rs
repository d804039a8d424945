//! `pause` and `resume`: steering a job's fires on every replica, recorded with who did it (`--as`,
//! or user@host). The rules are in docs/operating.md, "Pause, resume".

use chrono::{DateTime, Utc};
use shedlock_core::{
    admin::{
        LockEntry,
        model::{JobTarget, JobView},
    },
    jobs::DefinitionEntry,
    pause::{PauseFor, honours_pause},
};

use crate::command::{Output, check_job_name, job_failure, read_jobs, unknown_job};
use crate::failure::Failure;
use crate::render;
use crate::store::Store;

/// The job a command names and the lock its fires take.
pub(crate) struct Target {
    pub(crate) job: String,
    pub(crate) lock: String,
}

impl Target {
    /// `"job"`, or `"job" (lock "name")` when they differ.
    pub(crate) fn words(&self) -> String {
        if self.job == self.lock {
            format!("{:?}", self.job)
        } else {
            format!("{:?} (lock {:?})", self.job, self.lock)
        }
    }
}

/// The job `name` names ([`JobTarget::resolve`]). Anything else is refused with the names there
/// are.
pub(crate) fn resolve(
    store: &Store,
    name: &str,
    definitions: &[DefinitionEntry],
    entries: &[LockEntry],
    now: DateTime<Utc>,
) -> Result<Target, Failure> {
    if let Some(target) = JobTarget::resolve(definitions, entries, name) {
        return Ok(Target {
            job: target.job,
            lock: target.lock,
        });
    }
    let known: Vec<String> = JobView::collect(definitions, entries, now)
        .into_iter()
        .map(|j| j.job)
        .collect();
    Err(unknown_job(store, name, &known))
}

/// A store's refusal to `what` (pause, resume, trigger) a job: bad input says what to fix, a table
/// without the columns what to run.
pub(crate) fn failure(store: &Store, error: &shedlock_core::Error, what: &str) -> Failure {
    if error.is_invalid_config() {
        Failure::usage(format!(
            "{}; nothing changed",
            crate::failure::causes(error)
        ))
    } else if error.is_unsupported() {
        Failure::usage(format!(
            "this store cannot {what} jobs ({}); nothing changed",
            crate::failure::causes(error)
        ))
    } else {
        job_failure(store, error)
    }
}

pub(crate) async fn pause(
    store: &Store,
    name: &str,
    how_long: PauseFor,
    reason: Option<&str>,
    output: &mut Output<'_>,
) -> Result<(), Failure> {
    check_job_name(name)?;
    let (definitions, entries, now) = read_jobs(store).await?;
    let target = resolve(store, name, &definitions, &entries, now)?;
    let pause = store
        .admin
        .pause(&target.lock, how_long, reason, &store.actor)
        .await
        .map_err(|e| failure(store, &e, "pause"))?;
    let mut old: Vec<String> = definitions
        .iter()
        .filter(|d| d.definition.lock_name == target.lock && !honours_pause(&d.version))
        .map(|d| {
            format!(
                "{} ({})",
                render::cell(&d.replica),
                render::cell(&d.version)
            )
        })
        .collect();
    old.sort();
    old.dedup();
    if !old.is_empty() {
        output.warn(&format!(
            "these replicas predate pauses and will still run {}: {}",
            target.words(),
            old.join(", ")
        ));
    }
    output.print(&format!(
        "{} {}; a run in progress continues\n",
        target.words(),
        render::pause_note(&pause, pause.since)
    ))
}

pub(crate) async fn resume(
    store: &Store,
    name: &str,
    output: &mut Output<'_>,
) -> Result<(), Failure> {
    check_job_name(name)?;
    let (definitions, entries, now) = read_jobs(store).await?;
    let target = resolve(store, name, &definitions, &entries, now)?;
    let ended = store
        .admin
        .resume(&target.lock, &store.actor)
        .await
        .map_err(|e| failure(store, &e, "resume"))?;
    let Some(pause) = ended else {
        return Err(Failure::refused(format!(
            "refused: {} is not paused; nothing changed",
            target.words()
        )));
    };
    let was = match pause.until {
        Some(until) if until <= now => format!(
            "its pause by {} had ended at {} already",
            render::cell(&pause.by),
            render::timestamp(until)
        ),
        _ => format!("it was {}", render::pause_note(&pause, now)),
    };
    output.print(&format!(
        "resumed {}: {was}; its next fire runs as scheduled\n",
        target.words()
    ))
}
