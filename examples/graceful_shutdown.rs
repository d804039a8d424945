//! A scheduled job, stopped gracefully: on Ctrl-C or SIGTERM (here also after a few seconds, so
//! the example ends by itself) the scheduler stops claiming fires, lets the run in flight finish
//! within the grace period, releases every lock and only then lets `main` return, so the next
//! replica runs the next fire on time instead of waiting for `at_most`.
//! `cargo run -p shedlock-examples --example graceful_shutdown`

use std::time::Duration;

use shedlock_core::{Job, LockConfig, LockingTaskExecutor, Schedule, Scheduler, Shutdown};
use shedlock_sqlx::SqliteLockProvider;
use shedlock_sqlx::sqlx::sqlite::SqliteConnectOptions;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let dir = tempfile::tempdir()?;
    let options = SqliteConnectOptions::new()
        .filename(dir.path().join("app.db"))
        .create_if_missing(true);
    let provider = SqliteLockProvider::from_options(options).connect().await?;
    provider.create_table_if_not_exists().await?;
    let provider = std::sync::Arc::new(provider);

    let executor = LockingTaskExecutor::builder(provider.clone())
        .default_at_most(Duration::from_mins(1))
        .build()?;
    let scheduler = Scheduler::new(executor);
    // Every 2 s, a run of 1.5 s. (A store without fire claims falls back to plain locks, with
    // a warning; `at_least` then keeps replicas whose clocks differ from each running a fire.)
    scheduler.add(
        Job::new(
            "export",
            Schedule::every(Duration::from_secs(2))?,
            |run| async move {
                tracing::info!(fire = %run.fire().at(), "exporting");
                tokio::time::sleep(Duration::from_millis(1500)).await;
                Ok::<(), std::io::Error>(())
            },
        )
        .at_least(Duration::from_millis(500)),
    )?;
    scheduler.start().await?;

    // In a service: `shedlock_core::shutdown_signal().await?;` alone.
    tokio::select! {
        signal = shedlock_core::shutdown_signal() => println!("received {}", signal?),
        () = tokio::time::sleep(Duration::from_secs(5)) => println!("stopping (demo timeout)"),
    }
    // With leader-only jobs, their latch would step down here at once too.
    let drained = Shutdown::new(Duration::from_secs(10))
        .scheduler(&scheduler)
        .run()
        .await
        .drained;
    let status = scheduler.status("export").ok_or("the job is registered")?;
    println!(
        "drained: {} finished, {} cancelled, {} release failures; runs {}, errors {}",
        drained.finished, drained.cancelled, drained.release_failures, status.runs, status.errors
    );

    // Another replica could take the lock now (once `at_least` has passed), not after `at_most`.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let next = LockingTaskExecutor::builder(provider)
        .owner_id("next-replica")
        .build()?;
    let cfg = LockConfig::new("export", Duration::from_mins(1))?;
    let taken = next.try_lock(&cfg).await?;
    println!(
        "the next replica {} the lock",
        if taken.is_some() {
            "got"
        } else {
            "did not get"
        }
    );
    if let Some(guard) = taken {
        guard.release().await?;
    } else {
        return Err("the lock was left held".into());
    }
    Ok(())
}
