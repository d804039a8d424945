//! A locked job under `tokio-cron-scheduler`: the shortest correct way, drain included.
//! `cargo run -p shedlock-examples --example cron` (about 7 s, or Ctrl-C).
//!
//! `tokio-cron-scheduler` fires the job on every replica; the lock decides which one runs it. At
//! shutdown the cron scheduler stops first, so no new tick starts, then the executor drains: a run
//! in progress finishes and its lock is released before the process exits.
//!
//! Every replica runs this same program against the same table. Here a SQLite file stands in for
//! the database the replicas share.

use std::time::Duration;

use shedlock_core::{LockingTaskExecutor, scheduled_lock, shutdown_signal};
use shedlock_sqlx::SqliteLockProvider;
use tokio_cron_scheduler::{Job, JobScheduler};

type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

#[scheduled_lock(name = "purge-expired-sessions", at_most = "1m", at_least = "1s")]
async fn purge_expired_sessions() {
    tracing::info!("purging expired sessions");
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let stop = shutdown_signal(); // installed now; awaited below
    let dir = tempfile::tempdir()?;
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("app.db").display());
    let provider = SqliteLockProvider::connect(&url).await?;
    provider.create_table_if_not_exists().await?;
    let executor = LockingTaskExecutor::new(provider)?;
    executor.install_default()?; // what `#[scheduled_lock]` functions use

    let mut cron = JobScheduler::new().await?;
    cron.add(Job::new_async("*/2 * * * * *", |_id, _cron| {
        Box::pin(async {
            // Ok(Some(())): ran here. Ok(None): another replica holds the lock, skipped.
            if let Err(error) = purge_expired_sessions().await {
                tracing::warn!(%error, "could not try the lock; the next tick tries again");
            }
        })
    })?)
    .await?;
    cron.start().await?;

    tokio::select! {
        signal = stop => { signal?; }
        () = tokio::time::sleep(Duration::from_secs(7)) => {} // the example ends by itself
    }
    cron.shutdown().await?; // no new ticks
    let drained = executor.shutdown(Duration::from_secs(30)).await; // runs end, locks released
    tracing::info!(?drained, "stopped");
    Ok(())
}
