//! Records the metrics named in [`crate::metrics`] (feature `metrics`). Without it, these are
//! no-ops.

use std::time::Duration;

use crate::metrics as name;

fn count(metric: &'static str, lock: &str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(metric, "lock" => lock.to_owned()).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = (metric, lock);
}

pub(crate) fn attempt(lock: &str) {
    count(name::ATTEMPTS, lock);
}

pub(crate) fn acquired(lock: &str) {
    count(name::ACQUIRED, lock);
}

pub(crate) fn skipped(lock: &str) {
    count(name::SKIPPED, lock);
}

pub(crate) fn extended(lock: &str) {
    count(name::EXTENDED, lock);
}

pub(crate) fn lost(lock: &str) {
    count(name::LOST, lock);
}

pub(crate) fn release_failed(lock: &str) {
    count(name::RELEASE_FAILURES, lock);
}

pub(crate) fn error(lock: &str, operation: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(name::ERRORS, "lock" => lock.to_owned(), "operation" => operation)
        .increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = (lock, operation);
}

pub(crate) fn task_duration(lock: &str, duration: Duration) {
    #[cfg(feature = "metrics")]
    metrics::histogram!(name::TASK_DURATION, "lock" => lock.to_owned())
        .record(duration.as_secs_f64());
    #[cfg(not(feature = "metrics"))]
    let _ = (lock, duration);
}

/// One fire of a scheduled job and what became of it.
#[cfg(feature = "scheduler")]
pub(crate) fn fire(job: &str, outcome: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(name::FIRES, "job" => job.to_owned(), "outcome" => outcome).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = (job, outcome);
}

/// A fire of `job` whose window passed, or which met a pause, as `reply` says.
#[cfg(feature = "scheduler")]
pub(crate) fn not_run(job: &str, reply: &crate::provider::FireClaim) {
    let paused = matches!(reply, crate::provider::FireClaim::Paused { .. });
    self::paused(job, paused);
    fire(job, if paused { "paused" } else { "missed" });
}

/// This replica's last fire claim of `job` met a pause (`true`) or was answered otherwise.
#[cfg(feature = "scheduler")]
pub(crate) fn paused(job: &str, paused: bool) {
    #[cfg(feature = "metrics")]
    metrics::gauge!(name::JOB_PAUSED, "job" => job.to_owned()).set(if paused { 1.0 } else { 0.0 });
    #[cfg(not(feature = "metrics"))]
    let _ = (job, paused);
}

/// A run of a scheduled job ended. It is counted by outcome and timed. This replica's last success
/// and consecutive failures are set. `failures` is this replica's count after the run. `ended` is
/// the run's end in Unix seconds, for a success.
#[cfg(feature = "scheduler")]
pub(crate) fn run_ended(
    job: &str,
    outcome: &'static str,
    duration: Duration,
    failures: u64,
    succeeded_at: Option<f64>,
) {
    #[cfg(feature = "metrics")]
    {
        metrics::counter!(name::JOB_RUNS, "job" => job.to_owned(), "outcome" => outcome)
            .increment(1);
        metrics::histogram!(name::JOB_RUN_DURATION, "job" => job.to_owned())
            .record(duration.as_secs_f64());
        #[allow(clippy::cast_precision_loss, reason = "a count far below 2^52")]
        metrics::gauge!(name::JOB_CONSECUTIVE_FAILURES, "job" => job.to_owned())
            .set(failures as f64);
        if let Some(at) = succeeded_at {
            metrics::gauge!(name::JOB_LAST_SUCCESS, "job" => job.to_owned()).set(at);
        }
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (job, outcome, duration, failures, succeeded_at);
}

/// Whether this instance leads the election `election`: 1 if so, 0 if not.
pub(crate) fn leader(election: &str, leading: bool) {
    #[cfg(feature = "metrics")]
    metrics::gauge!(name::LEADER, "election" => election.to_owned()).set(if leading {
        1.0
    } else {
        0.0
    });
    #[cfg(not(feature = "metrics"))]
    let _ = (election, leading);
}
