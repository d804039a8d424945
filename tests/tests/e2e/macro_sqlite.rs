//! `#[scheduled_lock]` over `SqliteLockProvider`: three replicas, each with its own provider and
//! connection pool (as three processes would have) on one database file.
//!
//! The scenarios are the macro tests' own (`macro-tests/`, whose in-memory tests run the same
//! ones); this file lives here so that the macro tests need no SQL store among their
//! dev-dependencies, which keeps their trybuild UI test (which checks every dev-dependency) small.

#[path = "../../../macro-tests/tests/behaviour/common.rs"]
mod common;

use common::{Replica, replicas};
use shedlock_sqlx::SqliteLockProvider;
use tempfile::TempDir;

/// Three replicas on a fresh database file; keep the directory alive while they run.
async fn sqlite_replicas() -> (TempDir, [Replica; 3]) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("locks.db").display()
    );
    let mut providers = Vec::new();
    for _ in 0..3 {
        providers.push(
            SqliteLockProvider::connect(&url)
                .await
                .expect("database opens"),
        );
    }
    providers[0]
        .create_table_if_not_exists()
        .await
        .expect("table created");
    let providers: [SqliteLockProvider; 3] = providers.try_into().expect("three providers");
    (dir, replicas(providers))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_one_replica_runs_per_round() {
    let (_dir, replicas) = sqlite_replicas().await;
    common::exactly_one_runs_per_round(&replicas, "sqlite", 5).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_come_back_inside_and_release_the_lock() {
    let (_dir, replicas) = sqlite_replicas().await;
    common::errors_propagate_and_release(&replicas, "sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panics_release_the_lock() {
    let (_dir, replicas) = sqlite_replicas().await;
    common::panics_release(&replicas, "sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn templated_names_lock_independently() {
    let (_dir, replicas) = sqlite_replicas().await;
    common::templated_names_lock_independently(&replicas, "sqlite").await;
}
