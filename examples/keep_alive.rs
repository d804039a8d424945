//! Keep-alive for a job that may outlive its `at_most`. `cargo run -p shedlock-examples --example keep_alive` (6 s).
//!
//! `at_most` is the safety net for a replica that dies: its lock frees itself after that long.
//! A job whose length is hard to bound would need a huge `at_most`, which also delays the
//! takeover after a crash. With `keep_alive`, the lock is extended every `at_most / 2` while the
//! job runs: a short `at_most` (fast takeover after a crash) and no limit on a live job's length.
//!
//! If extensions keep failing (the database is unreachable), the lock counts as lost before
//! another replica could take it; the job is told through `current_lock().lost()` and should
//! stop, as this one does.

use std::time::Duration;

use shedlock_core::{LockingTaskExecutor, current_lock, scheduled_lock};
use shedlock_sqlx::SqliteLockProvider;

/// The error type of `main`.
type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Five one-second batches under a lock with `at_most = "2s"`, kept alive.
#[scheduled_lock(name = "rebuild-search-index", at_most = "2s", keep_alive, executor = executor)]
async fn rebuild_search_index(executor: &LockingTaskExecutor) -> Result<u32, &'static str> {
    let lock = current_lock().ok_or("not under a lock")?;
    for batch in 1..=5 {
        tokio::select! {
            () = lock.lost() => return Err("lock lost: another replica may run this now; stopping"),
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
        println!(
            "  a: batch {batch}/5 done, lock valid until {}",
            lock.record().lock_until().format("%H:%M:%S%.3f")
        );
    }
    Ok(5)
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
    let replica_a = LockingTaskExecutor::builder(provider.clone())
        .owner_id("replica-a")
        .build()?;
    let replica_b = LockingTaskExecutor::builder(provider)
        .owner_id("replica-b")
        .build()?;

    println!("a: starting a 5 s job under a lock with at_most = 2s and keep_alive");
    let job = tokio::spawn(async move { rebuild_search_index(&replica_a).await });

    // Replica b tries every second, also after at_most has passed: the lock is still held.
    for second in 1..=4 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let ran = rebuild_search_index(&replica_b).await?;
        println!(
            "b: attempt at {second} s: {}",
            if ran.is_some() {
                "RAN (the lock was not kept alive!)"
            } else {
                "skipped, a holds the lock"
            }
        );
        assert!(ran.is_none());
    }
    let batches = job.await??.ok_or("a was skipped")??;
    println!("a: done, {batches} batches; the lock is released");
    Ok(())
}
