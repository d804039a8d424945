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
//! The series below are the cluster's, read from the store by shedlock-web's `/metrics` (and
//! `shedlock serve`): any one instance tells them for every replica, so scrape one. shedlock-core
//! records none of them. Their own prefix keeps them apart from each replica's series above. A
//! job's series carry its lock's name too, so two jobs of one name on different locks, as during a
//! rename, stay two series.
//!
//! | metric | kind | labels | tells |
//! |---|---|---|---|
//! | `shedlock_store_job_last_success_timestamp_seconds` ([`STORE_JOB_LAST_SUCCESS`]) | gauge | `job`, `lock` | when the job's last successful run on any replica ended (Unix seconds, store clock); absent until one is recorded |
//! | `shedlock_store_job_consecutive_failures` ([`STORE_JOB_CONSECUTIVE_FAILURES`]) | gauge | `job`, `lock` | the job's runs that failed or panicked since its last success, across replicas |
//! | `shedlock_store_job_paused` ([`STORE_JOB_PAUSED`]) | gauge | `job`, `lock` | 1 while an operator's pause of the job holds |
//! | `shedlock_store_job_seconds_since_last_run` ([`STORE_JOB_SINCE_LAST_RUN`]) | gauge | `job`, `lock` | seconds from the end of the job's last recorded run to the store's now; absent until one is recorded |
//! | `shedlock_store_lock_held` ([`STORE_LOCK_HELD`]) | gauge | `lock` | 1 while the lock is held, by the store's clock; election rows are left out |
//! | `shedlock_store_lock_seconds_left` ([`STORE_LOCK_SECONDS_LEFT`]) | gauge | `lock` | seconds until the lock's hold ends, 0 when free |
//! | `shedlock_store_leader_present` ([`STORE_LEADER_PRESENT`]) | gauge | `election` | 1 while the election's row is held: it has a leader |
//!
//! ```
//! // "The nightly job has not succeeded anywhere in 25 h", and "nobody leads":
//! use shedlock_core::metrics::{STORE_JOB_LAST_SUCCESS, STORE_LEADER_PRESENT};
//! let stale = format!("time() - {STORE_JOB_LAST_SUCCESS}{{job=\"nightly-report\"}} > 25 * 3600");
//! let leaderless = format!("{STORE_LEADER_PRESENT} == 0");
//! # assert!(stale.starts_with("time() - shedlock_store_") && leaderless.ends_with("== 0"));
//! ```
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

/// Gauge, Unix seconds: the end of a job's last successful run on any replica, from the store.
/// Labels `job`, `lock`.
pub const STORE_JOB_LAST_SUCCESS: &str = "shedlock_store_job_last_success_timestamp_seconds";
/// Gauge: a job's failed runs since its last success, across replicas, from the store. Labels `job`, `lock`.
pub const STORE_JOB_CONSECUTIVE_FAILURES: &str = "shedlock_store_job_consecutive_failures";
/// Gauge: 1 while a job's pause holds, from the store. Labels `job`, `lock`.
pub const STORE_JOB_PAUSED: &str = "shedlock_store_job_paused";
/// Gauge: seconds since a job's last recorded run ended, from the store. Labels `job`, `lock`.
pub const STORE_JOB_SINCE_LAST_RUN: &str = "shedlock_store_job_seconds_since_last_run";
/// Gauge: 1 while a lock is held, from the store. Label `lock`.
pub const STORE_LOCK_HELD: &str = "shedlock_store_lock_held";
/// Gauge: seconds until a lock's hold ends, 0 when free, from the store. Label `lock`.
pub const STORE_LOCK_SECONDS_LEFT: &str = "shedlock_store_lock_seconds_left";
/// Gauge: 1 while an election has a leader, from the store. Label `election`.
pub const STORE_LEADER_PRESENT: &str = "shedlock_store_leader_present";

/// Every metric name a replica records, in the first table's order.
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

/// Every metric name read from the store, in the second table's order.
pub const STORE_ALL: [&str; 7] = [
    STORE_JOB_LAST_SUCCESS,
    STORE_JOB_CONSECUTIVE_FAILURES,
    STORE_JOB_PAUSED,
    STORE_JOB_SINCE_LAST_RUN,
    STORE_LOCK_HELD,
    STORE_LOCK_SECONDS_LEFT,
    STORE_LEADER_PRESENT,
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
            .filter(|line| !line.starts_with("//! | `shedlock_store_"))
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

    /// The same for the series read from the store.
    #[test]
    fn the_store_table_lists_every_store_name_beside_its_constant() {
        let source = include_str!("metrics.rs");
        let rows: Vec<&str> = source
            .lines()
            .filter(|line| line.starts_with("//! | `shedlock_store_"))
            .collect();
        let constants = [
            ("STORE_JOB_LAST_SUCCESS", super::STORE_JOB_LAST_SUCCESS),
            (
                "STORE_JOB_CONSECUTIVE_FAILURES",
                super::STORE_JOB_CONSECUTIVE_FAILURES,
            ),
            ("STORE_JOB_PAUSED", super::STORE_JOB_PAUSED),
            ("STORE_JOB_SINCE_LAST_RUN", super::STORE_JOB_SINCE_LAST_RUN),
            ("STORE_LOCK_HELD", super::STORE_LOCK_HELD),
            ("STORE_LOCK_SECONDS_LEFT", super::STORE_LOCK_SECONDS_LEFT),
            ("STORE_LEADER_PRESENT", super::STORE_LEADER_PRESENT),
        ];
        assert_eq!(
            rows.len(),
            super::STORE_ALL.len(),
            "one row per metric: {rows:#?}"
        );
        for ((row, (constant, name)), listed) in rows.iter().zip(constants).zip(super::STORE_ALL) {
            assert_eq!(name, listed, "STORE_ALL follows the table's order");
            assert!(
                row.starts_with(&format!("//! | `{name}` ([`{constant}`]) |")),
                "row for {constant}: {row}"
            );
        }
    }
}
