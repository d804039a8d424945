//! Metrics through the `metrics` facade (feature `metrics`); no-ops without it.
//!
//! | metric | kind | labels |
//! |---|---|---|
//! | `shedlock_attempts_total` | counter | `lock` |
//! | `shedlock_acquired_total` | counter | `lock` |
//! | `shedlock_skipped_total` | counter | `lock` |
//! | `shedlock_extended_total` | counter | `lock` |
//! | `shedlock_lost_total` | counter | `lock` |
//! | `shedlock_errors_total` | counter | `lock`, `operation` |
//! | `shedlock_release_failures_total` | counter | `lock` |
//! | `shedlock_task_duration_seconds` | histogram | `lock` |
//! | `shedlock_fires_total` | counter | `job`, `outcome` (`run`, `claimed_elsewhere`, `held`, `missed`, `error`) |
//!
//! The `lock` label is the full lock name, so a templated name (`"report-{tenant}"`) makes one
//! series per value: keep templated names to a bounded set, or leave the feature off.

use std::time::Duration;

fn count(metric: &'static str, lock: &str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(metric, "lock" => lock.to_owned()).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = (metric, lock);
}

pub(crate) fn attempt(lock: &str) {
    count("shedlock_attempts_total", lock);
}

pub(crate) fn acquired(lock: &str) {
    count("shedlock_acquired_total", lock);
}

pub(crate) fn skipped(lock: &str) {
    count("shedlock_skipped_total", lock);
}

pub(crate) fn extended(lock: &str) {
    count("shedlock_extended_total", lock);
}

pub(crate) fn lost(lock: &str) {
    count("shedlock_lost_total", lock);
}

pub(crate) fn release_failed(lock: &str) {
    count("shedlock_release_failures_total", lock);
}

pub(crate) fn error(lock: &str, operation: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!("shedlock_errors_total", "lock" => lock.to_owned(), "operation" => operation)
        .increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = (lock, operation);
}

pub(crate) fn task_duration(lock: &str, duration: Duration) {
    #[cfg(feature = "metrics")]
    metrics::histogram!("shedlock_task_duration_seconds", "lock" => lock.to_owned())
        .record(duration.as_secs_f64());
    #[cfg(not(feature = "metrics"))]
    let _ = (lock, duration);
}

/// One fire of a scheduled job and what became of it.
#[cfg(feature = "scheduler")]
pub(crate) fn fire(job: &str, outcome: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!("shedlock_fires_total", "job" => job.to_owned(), "outcome" => outcome)
        .increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = (job, outcome);
}
