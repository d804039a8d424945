//! The demo's two jobs, as a service would write them: `async fn`s under `#[scheduled_lock]`.
//!
//! - [`report`]: short runs (50–250 ms) every second, with `at_least = "500ms"`: replicas whose
//!   timers fire a little apart (up to the replicas' jitter) find the lock still held after a
//!   fast run, so one tick is never run twice.
//! - [`sync`]: runs of 0.3–1.8 s every second, so it sometimes outlives its tick: the next tick
//!   finds the lock held (even on the replica still running it) and is skipped, never queued.
//!   Its `at_most = "3s"` frees the lock 3 s after a replica dies holding it.

use std::time::Duration;

use shedlock_core::scheduled_lock;

use crate::database::BoxError;
use crate::job::JobSpec;
use crate::replica::{Job, Outcome, RunContext, Runner};

/// The settings of [`report`], as its attribute declares them, plus its work range.
#[must_use]
pub fn report_spec() -> JobSpec {
    JobSpec {
        at_most: Duration::from_secs(3),
        at_least: Duration::from_millis(500),
        work: (Duration::from_millis(50), Duration::from_millis(250)),
        ..JobSpec::new("report")
    }
}

/// The settings of [`sync`], as its attribute declares them, plus its work range.
#[must_use]
pub fn sync_spec() -> JobSpec {
    JobSpec {
        at_most: Duration::from_secs(3),
        at_least: Duration::ZERO,
        work: (Duration::from_millis(300), Duration::from_millis(1800)),
        ..JobSpec::new("sync")
    }
}

/// The demo's jobs: [`report`] and [`sync`].
#[must_use]
pub fn jobs() -> Vec<Job> {
    vec![
        Job {
            spec: report_spec(),
            runner: Runner::DemoReport,
        },
        Job {
            spec: sync_spec(),
            runner: Runner::DemoSync,
        },
    ]
}

/// A short job that holds its lock at least 500 ms (lock `<prefix>report`).
///
/// The attribute turns `Result<Outcome, BoxError>` into
/// `Result<Option<Result<Outcome, BoxError>>, shedlock_core::Error>`: `Ok(None)` when another
/// replica holds the lock, `Err` when it could not be tried.
#[scheduled_lock(name = "{prefix}report", at_most = "3s", at_least = "500ms", executor = ctx.executor())]
pub async fn report(prefix: &str, ctx: &RunContext, tick: u64) -> Result<Outcome, BoxError> {
    ctx.work(&report_spec(), tick).await
}

/// A job that sometimes outlives its one-second tick (lock `<prefix>sync`).
///
/// Returns as [`report`] does.
#[scheduled_lock(name = "{prefix}sync", at_most = "3s", executor = ctx.executor())]
pub async fn sync(prefix: &str, ctx: &RunContext, tick: u64) -> Result<Outcome, BoxError> {
    ctx.work(&sync_spec(), tick).await
}

#[cfg(test)]
mod tests {
    use shedlock_core::LockingTaskExecutor;
    use tokio::sync::mpsc;

    use super::*;
    use crate::database::Database;
    use crate::event::Event;
    use crate::runlog::RunLog;

    /// The attributes' durations are the specs' (the board and the docs describe the specs), and
    /// each run is recorded under its lock.
    #[tokio::test]
    async fn the_attributes_match_the_specs() -> Result<(), BoxError> {
        let dir = tempfile::tempdir()?;
        let db =
            Database::connect(&format!("sqlite://{}", dir.path().join("t.db").display())).await?;
        db.create_lock_table(None).await?;
        let log = RunLog::new(&db, "runs")?;
        log.create_table().await?;
        let executor = LockingTaskExecutor::new(db.lock_provider(None, None).await?)?;
        let (events, mut received) = mpsc::unbounded_channel();
        let ctx = RunContext::new("r1", "s1", "t-", log.clone(), executor, events);

        let started = std::time::Instant::now();
        let report_run = report("t-", &ctx, 1).await?.ok_or("free")??;
        assert!(report_run.elapsed >= report_spec().work.0);
        // A fast run keeps the lock for at_least (taken at or after `started`): an attempt
        // inside that window is skipped. On a machine so loaded that the window had passed, the
        // attempt runs, and the run log must show it started at least at_least after the first.
        let at_least = report_spec().at_least;
        let second = report("t-", &ctx, 2).await?;
        // Measured after the attempt: if even now less than at_least has passed since
        // `started`, the attempt was made inside the first lock's at_least window.
        let inside = started.elapsed() < at_least;
        assert!(
            second.is_none() || !inside,
            "ran inside at_least of the first run"
        );
        sync("t-", &ctx, 1).await?.ok_or("free")??;

        let records = log.records("s1").await?;
        assert_eq!(
            records.len(),
            2 + usize::from(second.is_some()),
            "{records:?}"
        );
        if second.is_some() {
            let reports: Vec<_> = records.iter().filter(|r| r.job == "report").collect();
            let gap_us = reports[1].locked_at_us - reports[0].locked_at_us;
            assert!(
                u128::try_from(gap_us)? >= at_least.as_micros(),
                "the second run took the lock {gap_us} µs after the first: inside at_least"
            );
        }
        for (job, spec) in [("report", report_spec()), ("sync", sync_spec())] {
            let record = records.iter().find(|r| r.job == job).ok_or(job)?;
            let held_us = record.lock_until_us - record.locked_at_us;
            assert_eq!(
                u128::try_from(held_us)?,
                spec.at_most.as_micros(),
                "{job}'s at_most"
            );
            let ended = record.ended_us.ok_or("the run's end is recorded")?;
            assert!(record.locked_at_us <= record.started_us && record.started_us <= ended);
        }
        assert!(
            matches!(received.recv().await, Some(Event::Ran { job, tick: 1, .. }) if job == "report")
        );
        Ok(())
    }
}
