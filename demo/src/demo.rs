//! The demo's two jobs, both every second on the replica's [`shedlock_core::Scheduler`]:
//!
//! - `report`: short runs (50–250 ms) with `at_least = 500ms`. With a store that records fires
//!   the fire claim alone keeps one fire from running twice and `at_least` changes nothing; on a
//!   store without fire claims (a lock table without `last_fire`) the scheduler falls back to
//!   plain locks, and `at_least` is what keeps a replica whose timer fires a little late from
//!   running the fire again.
//! - `sync`: runs of 0.3–1.8 s, so it sometimes outlives its one-second period: the next fire
//!   finds the lock held (even on the replica still running it) and is counted held and skipped,
//!   never queued. Its `at_most = 3s` frees the lock 3 s after a replica dies holding it.
//!
//! Each is registered as a closure through [`shedlock_core::Job::new`]
//! ([`crate::replica::scheduled_job`]), not as a `#[scheduled_lock(every = "1s")]` function:
//! its body needs the replica's context (the run log, the event channel) and the fire it runs,
//! and its lock name carries the `--prefix`; the macro schedules only functions without
//! arguments.

use std::time::Duration;

use crate::job::JobSpec;

/// The settings of `report`.
#[must_use]
pub fn report_spec() -> JobSpec {
    JobSpec {
        at_most: Duration::from_secs(3),
        at_least: Duration::from_millis(500),
        work: (Duration::from_millis(50), Duration::from_millis(250)),
        ..JobSpec::new("report")
    }
}

/// The settings of `sync`.
#[must_use]
pub fn sync_spec() -> JobSpec {
    JobSpec {
        at_most: Duration::from_secs(3),
        at_least: Duration::ZERO,
        work: (Duration::from_millis(300), Duration::from_millis(1800)),
        ..JobSpec::new("sync")
    }
}

/// The demo's jobs: `report` and `sync`.
#[must_use]
pub fn jobs() -> Vec<JobSpec> {
    vec![report_spec(), sync_spec()]
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use shedlock_core::{LockingTaskExecutor, Scheduler};
    use tokio::sync::mpsc;

    use super::*;
    use crate::database::{BoxError, Database};
    use crate::event::Event;
    use crate::replica::{RunContext, scheduled_job, tick_of};
    use crate::runlog::RunLog;

    /// The demo's jobs on a scheduler: each run is recorded under its lock with its fire, the
    /// lock held for the job's `at_most`, taken inside the fire's window.
    #[tokio::test]
    async fn the_demo_jobs_run_on_the_scheduler_and_record_their_fires() -> Result<(), BoxError> {
        let dir = tempfile::tempdir()?;
        let db =
            Database::connect(&format!("sqlite://{}", dir.path().join("t.db").display())).await?;
        db.create_lock_table(None).await?;
        let log = RunLog::new(&db, "runs")?;
        log.create_table().await?;
        let executor = LockingTaskExecutor::new(db.lock_provider(None, None).await?)?;
        let (events, mut received) = mpsc::unbounded_channel();
        let ctx = Arc::new(RunContext::new("r1", "s1", log.clone(), events));
        let scheduler = Scheduler::new(executor);
        for spec in jobs() {
            scheduler.add(scheduled_job(&spec, "t-", &ctx)?)?;
        }
        scheduler.start().await?;
        // Polls the scheduler's counts until each job ran twice (a deadline, not a sleep).
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while scheduler.statuses().iter().any(|s| s.runs < 2) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{:?}",
                scheduler.statuses()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        scheduler.shutdown(Duration::from_secs(5)).await;

        let records = log.records("s1").await?;
        for spec in jobs() {
            let runs: Vec<_> = records.iter().filter(|r| r.job == spec.name).collect();
            assert!(runs.len() >= 2, "{records:?}");
            for record in runs {
                let held_us = record.lock_until_us - record.locked_at_us;
                assert_eq!(
                    u128::try_from(held_us)?,
                    spec.at_most.as_micros(),
                    "{}'s at_most",
                    spec.name
                );
                // The fire is a whole second (the schedule's), its tick the same number.
                assert_eq!(record.fire_us % 1_000_000, 0, "{record:?}");
                let fire = shedlock_core::provider::chrono::DateTime::from_timestamp_micros(
                    record.fire_us,
                )
                .ok_or("a fire instant")?;
                assert_eq!(u64::try_from(record.tick)?, tick_of(&spec, fire));
                // Taken inside the fire's window (one host: the store's clock is ours).
                assert!(
                    record.fire_us <= record.locked_at_us
                        && record.locked_at_us < record.fire_us + 1_000_000,
                    "{record:?}"
                );
                let ended = record.ended_us.ok_or("the run's end is recorded")?;
                assert!(record.locked_at_us <= record.started_us && record.started_us <= ended);
            }
        }
        assert!(matches!(received.recv().await, Some(Event::Ran { .. })));
        Ok(())
    }
}
