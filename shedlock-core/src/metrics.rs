//! The names of the metrics shedlock-core records (feature `metrics`), through the
//! [`metrics`](https://docs.rs/metrics) facade. Install any recorder and they appear, such as
//! Prometheus, OpenTelemetry or a `StatsD` exporter. Without the feature nothing is recorded.
//!
//! | metric | kind | labels | counts |
//! |---|---|---|---|
//! | `shedlock_attempts_total` ([`ATTEMPTS`]) | counter | `lock` | calls that tried to take the lock |
//! | `shedlock_acquired_total` ([`ACQUIRED`]) | counter | `lock` | attempts that took it |
//! | `shedlock_skipped_total` ([`SKIPPED`]) | counter | `lock` | attempts that found it held |
//! | `shedlock_extended_total` ([`EXTENDED`]) | counter | `lock` | extensions, by keep-alive or `LockHandle::extend` |
//! | `shedlock_lost_total` ([`LOST`]) | counter | `lock` | holds lost while their task ran: the store refused an extension, or none succeeded before the deadline |
//! | `shedlock_errors_total` ([`ERRORS`]) | counter | `lock`, `operation` | store calls that failed or timed out, by `operation`: `acquire`, `claim_fire`, `extend`, `release` |
//! | `shedlock_release_failures_total` ([`RELEASE_FAILURES`]) | counter | `lock` | releases that failed: the lock stays held until its `at_most` |
//! | `shedlock_task_duration_seconds` ([`TASK_DURATION`]) | histogram | `lock` | how long each locked task ran |
//! | `shedlock_fires_total` ([`FIRES`]) | counter | `job`, `outcome` | fires of a scheduled job, by what became of them: `run`, `claimed_elsewhere`, `held`, `missed`, `paused`, `error` |
//! | `shedlock_job_runs_total` ([`JOB_RUNS`]) | counter | `job`, `outcome` | this replica's runs of a job, by how they ended: `succeeded`, `failed`, `panicked`, `cancelled` |
//! | `shedlock_job_run_duration_seconds` ([`JOB_RUN_DURATION`]) | histogram | `job` | how long this replica's runs of a job took |
//! | `shedlock_job_last_success_timestamp_seconds` ([`JOB_LAST_SUCCESS`]) | gauge | `job` | when this replica's last successful run of a job ended (Unix seconds, by the store's clock as the replica estimates it) |
//! | `shedlock_job_consecutive_failures` ([`JOB_CONSECUTIVE_FAILURES`]) | gauge | `job` | this replica's runs of a job that failed or panicked since its last success there (cancelled runs count nothing) |
//! | `shedlock_job_paused` ([`JOB_PAUSED`]) | gauge | `job` | 1 while this replica's last fire claim of a job was refused because an operator paused it, 0 once a claim is answered otherwise |
//! | `shedlock_leader` ([`LEADER`]) | gauge | `election` | 1 while this instance's latch leads the election, 0 otherwise |
//!
//! The `lock` label is the full lock name. So a templated name (`"report-{tenant}"`) makes one
//! series per value. Keep templated names to a bounded set, or leave the feature off.
//!
//! The job series are each replica's own view. The cluster's view is in the store
//! ([`jobs`](crate::jobs)), where operators' tools read it. It has the last success anywhere and
//! the failures counted across replicas.
//!
//! ```
//! // Alert on locks that are never released cleanly:
//! let query = format!("rate({}[5m]) > 0", shedlock_core::metrics::RELEASE_FAILURES);
//! assert_eq!(query, "rate(shedlock_release_failures_total[5m]) > 0");
//! ```

/// Counter: calls that tried to take the lock. Label `lock`.
pub const ATTEMPTS: &str = "shedlock_attempts_total";
/// Counter: attempts that took the lock. Label `lock`.
pub const ACQUIRED: &str = "shedlock_acquired_total";
/// Counter: attempts that found the lock held. Label `lock`.
pub const SKIPPED: &str = "shedlock_skipped_total";
/// Counter: extensions of a held lock. Label `lock`.
pub const EXTENDED: &str = "shedlock_extended_total";
/// Counter: holds that ended before their task. Label `lock`.
pub const LOST: &str = "shedlock_lost_total";
/// Counter: failed or timed-out store calls. Labels `lock`, `operation`.
pub const ERRORS: &str = "shedlock_errors_total";
/// Counter: releases that failed. Label `lock`.
pub const RELEASE_FAILURES: &str = "shedlock_release_failures_total";
/// Histogram, in seconds: how long each locked task ran. Label `lock`.
pub const TASK_DURATION: &str = "shedlock_task_duration_seconds";
/// Counter: fires of a scheduled job. Labels `job`, `outcome`.
pub const FIRES: &str = "shedlock_fires_total";
/// Counter: this replica's runs of a job by how they ended. Labels `job`, `outcome`.
pub const JOB_RUNS: &str = "shedlock_job_runs_total";
/// Histogram, in seconds: how long this replica's runs of a job took. Label `job`.
pub const JOB_RUN_DURATION: &str = "shedlock_job_run_duration_seconds";
/// Gauge, Unix seconds: the end of this replica's last successful run of a job. Label `job`.
pub const JOB_LAST_SUCCESS: &str = "shedlock_job_last_success_timestamp_seconds";
/// Gauge: this replica's failed runs of a job since its last success there. Label `job`.
pub const JOB_CONSECUTIVE_FAILURES: &str = "shedlock_job_consecutive_failures";
/// Gauge: 1 while this replica's last fire claim of a job met a pause, 0 otherwise. Label `job`.
pub const JOB_PAUSED: &str = "shedlock_job_paused";
/// Gauge: 1 while this instance leads the election, 0 otherwise. Label `election`.
pub const LEADER: &str = "shedlock_leader";

/// Every metric name above, in the table's order.
pub const ALL: [&str; 15] = [
    ATTEMPTS,
    ACQUIRED,
    SKIPPED,
    EXTENDED,
    LOST,
    ERRORS,
    RELEASE_FAILURES,
    TASK_DURATION,
    FIRES,
    JOB_RUNS,
    JOB_RUN_DURATION,
    JOB_LAST_SUCCESS,
    JOB_CONSECUTIVE_FAILURES,
    JOB_PAUSED,
    LEADER,
];

#[cfg(test)]
mod tests {
    /// The table in this module's docs lists exactly the names in `ALL`, in order. Each is beside
    /// the constant that holds it. So the docs cannot drift from what is recorded.
    #[test]
    fn the_table_lists_every_name_beside_its_constant() {
        let source = include_str!("metrics.rs");
        let rows: Vec<&str> = source
            .lines()
            .filter(|line| line.starts_with("//! | `shedlock_"))
            .collect();
        assert_eq!(
            rows.len(),
            super::ALL.len(),
            "one row per metric: {rows:#?}"
        );
        let constants = [
            ("ATTEMPTS", super::ATTEMPTS),
            ("ACQUIRED", super::ACQUIRED),
            ("SKIPPED", super::SKIPPED),
            ("EXTENDED", super::EXTENDED),
            ("LOST", super::LOST),
            ("ERRORS", super::ERRORS),
            ("RELEASE_FAILURES", super::RELEASE_FAILURES),
            ("TASK_DURATION", super::TASK_DURATION),
            ("FIRES", super::FIRES),
            ("JOB_RUNS", super::JOB_RUNS),
            ("JOB_RUN_DURATION", super::JOB_RUN_DURATION),
            ("JOB_LAST_SUCCESS", super::JOB_LAST_SUCCESS),
            ("JOB_CONSECUTIVE_FAILURES", super::JOB_CONSECUTIVE_FAILURES),
            ("JOB_PAUSED", super::JOB_PAUSED),
            ("LEADER", super::LEADER),
        ];
        for ((row, (constant, name)), listed) in rows.iter().zip(constants).zip(super::ALL) {
            assert_eq!(name, listed, "ALL follows the table's order");
            assert!(
                row.starts_with(&format!("//! | `{name}` ([`{constant}`]) |")),
                "row for {constant}: {row}"
            );
        }
    }
}
