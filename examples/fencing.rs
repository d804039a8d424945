//! A fencing token protecting a downstream write. `cargo run -p shedlock-examples --example fencing` (2 s).
//!
//! A lease-based lock cannot stop a holder that is paused (a long GC pause, a frozen VM, a
//! laptop lid) past its `at_most`: meanwhile another replica takes the lock, and when the paused
//! one wakes it still believes it holds it. Each acquisition carries a fencing token that strictly
//! increases per lock name; pass it along with the write, and let the downstream system refuse a
//! token lower than the highest it has seen. The stale holder's write is then rejected.
//!
//! Here the downstream system is a table in the same SQLite database; the check is part of the
//! write (`WHERE fencing_token < ?`), so it is atomic. Use `<=` instead of `<` to also refuse a
//! second write under one acquisition.

use std::time::Duration;

use shedlock_core::{LockConfig, LockingTaskExecutor};
use shedlock_sqlx::SqliteLockProvider;
use shedlock_sqlx::sqlx::{self, SqlitePool};

/// The error type of `main`.
type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Writes the report iff `token` is newer than the one of the last accepted write.
async fn write_report(pool: &SqlitePool, content: &str, token: i64) -> Result<bool, BoxError> {
    let done = sqlx::query(
        "UPDATE report SET content = ?, fencing_token = ? WHERE id = 1 AND fencing_token < ?",
    )
    .bind(content)
    .bind(token)
    .bind(token)
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
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
    // One pool for the example's own table and the lock store (the lock table is `shedlock`).
    let pool = SqlitePool::connect(&url).await?;
    let provider = SqliteLockProvider::builder(pool.clone()).build()?;
    provider.create_table_if_not_exists().await?;
    sqlx::query("CREATE TABLE report (id INTEGER PRIMARY KEY, content TEXT NOT NULL, fencing_token BIGINT NOT NULL)")
        .execute(&pool)
        .await?;
    sqlx::query("INSERT INTO report VALUES (1, 'nothing yet', 0)")
        .execute(&pool)
        .await?;

    let provider = std::sync::Arc::new(provider);
    let replica_a = LockingTaskExecutor::builder(provider.clone())
        .owner_id("replica-a")
        .build()?;
    let replica_b = LockingTaskExecutor::builder(provider)
        .owner_id("replica-b")
        .build()?;
    let cfg = LockConfig::new("daily-report", Duration::from_millis(500))?;

    let a = replica_a
        .try_lock(&cfg)
        .await?
        .ok_or("the lock is free at first")?;
    let token_a = a
        .fencing_token()
        .ok_or("this table has no fencing_token column")?;
    println!(
        "a: took the lock, token {token_a}; now a long pause (longer than at_most = 500ms)..."
    );
    tokio::time::sleep(Duration::from_secs(1)).await;

    let b = replica_b
        .try_lock(&cfg)
        .await?
        .ok_or("a's lock has expired")?;
    let token_b = b.fencing_token().ok_or("no token")?;
    println!("b: took the expired lock, token {token_b}");
    let accepted = write_report(&pool, "report by b", token_b).await?;
    println!(
        "b: write with token {token_b}: {}",
        if accepted { "accepted" } else { "REJECTED" }
    );
    b.release().await?;

    // a could check `a.is_lost()` first, but a pause can strike between that check and the
    // write; the token check is part of the write itself.
    println!(
        "a: wakes up and writes its report (is_lost: {})",
        a.is_lost()
    );
    let accepted_a = write_report(&pool, "report by a (stale)", token_a).await?;
    println!(
        "a: write with token {token_a}: {}",
        if accepted_a {
            "ACCEPTED (bad!)"
        } else {
            "rejected: a newer token has written"
        }
    );
    // Its release finds the lock in b's hands and changes nothing (the library logs a warning).
    let released = a.release().await?;
    println!(
        "a: release: {}",
        if released {
            "released"
        } else {
            "nothing to release, the lock had passed on"
        }
    );

    let (content,): (String,) = sqlx::query_as("SELECT content FROM report WHERE id = 1")
        .fetch_one(&pool)
        .await?;
    println!("the report says: {content:?}");
    assert!(accepted && !accepted_a && content == "report by b");
    Ok(())
}
