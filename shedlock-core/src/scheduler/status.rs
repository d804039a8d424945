//! What a scheduler knows about each job: [`JobStatus`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::JobSpec;
pub use crate::jobs::RunOutcome;

/// The last run of a job on this replica.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LastRun {
    /// The fire it ran.
    pub fire: DateTime<Utc>,
    /// When it started, by the store's clock as this replica estimates it.
    pub started: DateTime<Utc>,
    /// When it ended, by the same clock.
    pub ended: DateTime<Utc>,
    /// How it ended.
    #[serde(flatten)]
    pub outcome: RunOutcome,
}

/// One job's state on this replica: see [`Scheduler::status`](crate::Scheduler::status).
///
/// The counts are of this replica's fires. Across replicas, each fire is run by at most one of
/// them. The others count it `claimed_elsewhere` or `held`.
///
/// It implements [`serde::Serialize`] and `Deserialize`, for a `/status` endpoint. The fields below
/// keep these names. Times are RFC 3339 (UTC). `spec` is as [`JobSpec`] writes it. `last_run` has
/// its outcome flattened (see [`RunOutcome`]). `cargo run -p shedlock-examples --example
/// config_file` serves and prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct JobStatus {
    /// The job's name.
    pub name: String,
    /// The job's settings, as registered.
    pub spec: JobSpec,
    /// The fire this replica decides next. It changes once that fire is decided. It is set when the
    /// job starts, so right after [`Scheduler::start`](crate::Scheduler::start) returns. For a job
    /// that catches up, it is first its catch-up fire, which is past. It is `None` before the job
    /// starts, and after its schedule ends or the scheduler shuts down.
    pub next_fire: Option<DateTime<Utc>>,
    /// The last run on this replica.
    pub last_run: Option<LastRun>,
    /// Fires this replica ran.
    pub runs: u64,
    /// Fires another replica had already claimed. With plain locks, these are fires whose lock was
    /// taken.
    pub claimed_elsewhere: u64,
    /// Fires met while the lock was held by a previous run still going, this replica's included.
    /// They are counted, never queued.
    pub held: u64,
    /// Fires whose window passed before this replica could claim them, and that no replica had
    /// claimed by then. This replica was busy or paused, or the store was down.
    pub missed: u64,
    /// Fires refused because an operator paused the job (see [`pause`](crate::pause)). They are
    /// not missed, and no replica ran them.
    #[serde(default)]
    pub paused: u64,
    /// Runs that returned an `Err` or panicked.
    pub errors: u64,
    /// Fire claims or acquires the store failed. They are logged, and retried within the fire's
    /// window.
    pub store_errors: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) runs: AtomicU64,
    pub(crate) claimed_elsewhere: AtomicU64,
    pub(crate) held: AtomicU64,
    pub(crate) missed: AtomicU64,
    pub(crate) paused: AtomicU64,
    /// Whether this replica's last claim met a pause, for the gauge.
    pub(crate) paused_now: std::sync::atomic::AtomicBool,
    pub(crate) errors: AtomicU64,
    pub(crate) store_errors: AtomicU64,
    pub(crate) next_fire: Mutex<Option<DateTime<Utc>>>,
    pub(crate) last_run: Mutex<Option<LastRun>>,
    /// This replica's failed runs since its last success, for the metric.
    pub(crate) consecutive_failures: AtomicU64,
}

impl Counters {
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Notes whether this replica's last claim met a pause, and moves the gauge when it changes.
    pub(crate) fn note_paused(&self, job: &str, paused: bool) {
        if self.paused_now.swap(paused, Ordering::Relaxed) != paused {
            crate::observe::paused(job, paused);
        }
    }

    pub(crate) fn set_next_fire(&self, at: Option<DateTime<Utc>>) {
        *self
            .next_fire
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = at;
    }

    pub(crate) fn snapshot(&self, spec: &JobSpec) -> JobStatus {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        JobStatus {
            name: spec.name.clone(),
            spec: spec.clone(),
            next_fire: *self
                .next_fire
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
            last_run: self
                .last_run
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
            runs: get(&self.runs),
            claimed_elsewhere: get(&self.claimed_elsewhere),
            held: get(&self.held),
            missed: get(&self.missed),
            paused: get(&self.paused),
            errors: get(&self.errors),
            store_errors: get(&self.store_errors),
        }
    }
}
