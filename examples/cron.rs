//! A locked job under `tokio-cron-scheduler`.
//! `cargo run -p shedlock-examples --example cron` (about 7 s).
//!
//! Two replicas (here two executors with their own owner ids in one process; in production, one
//! per process) share a SQLite lock table and fire the same cron job every two seconds. On every
//! tick one of them runs it and the other skips. `tokio-cron-scheduler` does the scheduling; the
//! lock only decides who runs.

use std::time::Duration;

use shedlock_core::{LockingTaskExecutor, scheduled_lock};
use shedlock_sqlx::SqliteLockProvider;
use tokio_cron_scheduler::{Job, JobScheduler};

/// The error type of `main`.
type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The job. `executor = executor` picks the replica's executor from the argument (instead of the
/// process-wide default), which lets two replicas live in one example process.
#[scheduled_lock(name = "purge-expired-sessions", at_most = "1m", at_least = "1s", executor = executor)]
async fn purge_expired_sessions(executor: &LockingTaskExecutor, replica: &str) {
    println!("{replica}: purging expired sessions");
}

/// A cron job that tries the locked function on every tick, as `replica`.
fn cron_job(executor: LockingTaskExecutor, replica: &'static str) -> Result<Job, BoxError> {
    Ok(Job::new_async("*/2 * * * * *", move |_id, _scheduler| {
        let executor = executor.clone();
        Box::pin(async move {
            match purge_expired_sessions(&executor, replica).await {
                Ok(Some(())) => {}
                Ok(None) => println!("{replica}: skipped, the lock is held elsewhere"),
                Err(error) => eprintln!("{replica}: could not try the lock: {error}"),
            }
        })
    })?)
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    // Logs to standard error (`RUST_LOG`, default `warn`), so the library's warnings show.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    // A SQLite file in a temporary directory stands in for the database the replicas share.
    let dir = tempfile::tempdir()?;
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("app.db").display());
    let provider = SqliteLockProvider::connect(&url).await?;
    provider.create_table_if_not_exists().await?;
    let provider = std::sync::Arc::new(provider);

    let scheduler = JobScheduler::new().await?;
    for replica in ["replica-a", "replica-b"] {
        let executor = LockingTaskExecutor::builder(provider.clone())
            .owner_id(replica)
            .build()?;
        scheduler.add(cron_job(executor, replica)?).await?;
    }
    let mut scheduler = scheduler;
    scheduler.start().await?;
    println!("two replicas, one cron job every 2 s; watch one run and one skip per tick");
    tokio::time::sleep(Duration::from_secs(7)).await;
    scheduler.shutdown().await?;
    Ok(())
}
