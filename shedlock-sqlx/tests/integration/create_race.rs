//! Replicas that start together all call `create_table_if_not_exists()` at once: every call
//! succeeds and the table works. (Postgres answers a `CREATE TABLE IF NOT EXISTS` that races
//! another with a unique violation or "type … already exists" from its catalog; found by the
//! drain tests' two replicas starting together.)

use std::time::Duration;

use shedlock_core::provider::LockProvider as _;
use shedlock_sqlx::sqlx;
use shedlock_sqlx::{MySqlLockProvider, PgLockProvider, testing};

/// Concurrent creators per round, and rounds (each on a fresh table).
const CREATORS: u32 = 8;
const ROUNDS: usize = 5;

macro_rules! race {
    ($(#[$test:meta])* $name:ident, $url:path, $pool:ty, $provider:ty) => {
        #[tokio::test]
        $(#[$test])*
        async fn $name() {
            let Some(url) = $url() else {
                return;
            };
            let pool = <$pool>::new()
                .max_connections(CREATORS)
                .connect(&url)
                .await
                .expect("connect to the test database");
            for round in 0..ROUNDS {
                let table = testing::unique_table_name("shedlock_create_race");
                let provider = <$provider>::builder(pool.clone())
                    .table(&table)
                    .build()
                    .expect("valid settings");
                let mut creators = tokio::task::JoinSet::new();
                for _ in 0..CREATORS {
                    let provider = provider.clone();
                    creators.spawn(async move { provider.create_table_if_not_exists().await });
                }
                while let Some(result) = creators.join_next().await {
                    let result = result.expect("a creator task");
                    assert!(result.is_ok(), "round {round}: {result:?}");
                }
                let lock = provider
                    .acquire("after-the-race", Duration::from_secs(10), "test")
                    .await;
                assert!(lock.is_ok_and(|l| l.is_some()), "the table works");
                // The definitions and history tables too, so each round races for all three.
                for suffix in ["", "_jobs", "_history"] {
                    let drop = format!("DROP TABLE {table}{suffix}");
                    sqlx::raw_sql(sqlx::AssertSqlSafe(drop))
                        .execute(&pool)
                        .await
                        .expect("drop the table");
                }
            }
        }
    };
}

race!(
    #[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
    postgres_concurrent_creates_of_one_table_all_succeed,
    testing::postgres_url,
    sqlx::postgres::PgPoolOptions,
    PgLockProvider
);
race!(
    #[cfg_attr(not(shedlock_mysql), ignore = "needs SHEDLOCK_MYSQL_URL (MySQL)")]
    mysql_concurrent_creates_of_one_table_all_succeed,
    testing::mysql_url,
    sqlx::mysql::MySqlPoolOptions,
    MySqlLockProvider
);
