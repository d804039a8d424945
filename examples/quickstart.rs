//! The minimum: a lock store, an executor, one locked job.
//! `cargo run -p shedlock-examples --example quickstart`
//!
//! Every replica of your service runs the same code; whichever replica takes the lock first runs
//! the job, the others skip it. Here the database is a SQLite file (replicas on one host); for
//! replicas on several hosts, use `PgLockProvider` or `MySqlLockProvider` on a shared server:
//!
//! ```ignore
//! let provider = PgLockProvider::connect("postgres://app@db/app").await?;
//! ```

use shedlock_core::{LockingTaskExecutor, scheduled_lock};
use shedlock_sqlx::SqliteLockProvider;
use shedlock_sqlx::sqlx::sqlite::SqliteConnectOptions;

/// The job: at most one replica runs it at a time. If the replica dies mid-run, the lock frees
/// itself after `at_most`; a fast run still holds it `at_least`, so replicas whose timers fire a
/// little apart do not run it twice.
#[scheduled_lock(name = "send-invoices", at_most = "5m", at_least = "10s")]
async fn send_invoices(batch: usize) -> usize {
    // ... the real work ...
    batch
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;

    // 1. The lock store on the database the replicas share (connections of its own), on Java
    //    ShedLock's table layout (`shedlock`); create the table once, or run the migration
    //    shipped with shedlock-sqlx.
    let options = SqliteConnectOptions::new()
        .filename(dir.path().join("app.db"))
        .create_if_missing(true);
    let provider = SqliteLockProvider::from_options(options).connect().await?;
    provider.create_table_if_not_exists().await?;

    // 2. The executor, installed as the default that `#[scheduled_lock]` functions use.
    LockingTaskExecutor::new(provider)?.install_default()?;

    // 3. Call the job from your scheduler, on every replica. `Ok(None)` means "skipped".
    match send_invoices(100).await? {
        Some(sent) => println!("this replica ran the job: sent {sent} invoices"),
        None => println!("another replica holds the lock: skipped"),
    }
    // A second attempt within `at_least` (10 s) is skipped, as another replica's would be.
    let again = send_invoices(100).await?;
    println!(
        "second attempt: {}",
        if again.is_some() {
            "ran"
        } else {
            "skipped (at_least holds the lock)"
        }
    );
    assert!(again.is_none());
    Ok(())
}
