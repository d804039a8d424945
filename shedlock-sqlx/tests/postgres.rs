//! `PgLockProvider` against a real Postgres (`SHEDLOCK_PG_URL`; skipped without it unless
//! `SHEDLOCK_REQUIRE_DB=1`). Each test uses a table of its own.

mod common;

use std::time::Duration;

use shedlock_core::LockProvider;
use shedlock_sqlx::sqlx::postgres::{PgPool, PgPoolOptions};
use shedlock_sqlx::sqlx::{self, Executor as _};
use shedlock_sqlx::{PgLockProvider, testing};

const MIN: Duration = Duration::from_mins(1);

async fn pool(url: &str) -> PgPool {
    PgLockProvider::pool_options()
        .connect(url)
        .await
        .expect("connect to Postgres")
}

/// A provider on a fresh table of our DDL.
async fn fresh(url: &str) -> (PgLockProvider, String) {
    let table = testing::unique_table_name("shedlock_pg");
    let provider = PgLockProvider::builder(pool(url).await)
        .table(&table)
        .build()
        .expect("valid settings");
    provider
        .create_table_if_not_exists()
        .await
        .expect("create table");
    (provider, table)
}

async fn drop_table(pool: &PgPool, table: &str) {
    pool.execute(sqlx::AssertSqlSafe(format!("DROP TABLE IF EXISTS {table}")))
        .await
        .expect("drop table");
}

common::suite::server_store! {
    /// Postgres for the shared cases.
    Pg(PgLockProvider), url: testing::postgres_url, tables: "shedlock_pg_suite",
    migrations: "postgres",
    tests: #[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
}

/// Java ShedLock's DDL (no token column) for `table`.
fn java_ddl(table: &str) -> String {
    format!(
        "CREATE TABLE {table}(name VARCHAR(64) NOT NULL, lock_until TIMESTAMP NOT NULL, \
         locked_at TIMESTAMP NOT NULL, locked_by VARCHAR(255) NOT NULL, PRIMARY KEY (name))"
    )
}

#[tokio::test]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn a_held_lock_is_one_statement_that_writes_nothing() {
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let (provider, table) = fresh(&url).await;
    let held = provider.acquire("job", MIN, "a").await.unwrap().unwrap();
    // xmin changes with every new row version and xmax with every row lock: a skipped acquire
    // must change neither (an `INSERT … ON CONFLICT DO UPDATE … WHERE` would lock the row).
    let versions = || async {
        sqlx::query_as::<_, (String, String)>(sqlx::AssertSqlSafe(format!(
            "SELECT xmin::text, xmax::text FROM {table} WHERE name = 'job'"
        )))
        .fetch_one(provider.pool())
        .await
        .unwrap()
    };
    let before = versions().await;
    for _ in 0..5 {
        assert!(provider.acquire("job", MIN, "b").await.unwrap().is_none());
    }
    assert_eq!(
        versions().await,
        before,
        "a skipped acquire wrote to the row"
    );
    assert!(provider.release(&held, Duration::ZERO).await.unwrap());
    drop_table(provider.pool(), &table).await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn a_row_deleted_by_hand_comes_back_and_tokens_keep_increasing() {
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let (provider, table) = fresh(&url).await;
    let first = provider.acquire("job", MIN, "a").await.unwrap().unwrap();
    provider
        .pool()
        .execute(sqlx::AssertSqlSafe(format!("DELETE FROM {table}")))
        .await
        .unwrap();
    let second = provider.acquire("job", MIN, "b").await.unwrap().unwrap();
    assert!(
        second.fencing_token() > first.fencing_token(),
        "{second} after {first}: the sequence must not restart"
    );
    // The old holder cannot release the new holder's lock.
    assert!(!provider.release(&first, Duration::ZERO).await.unwrap());
    assert!(provider.acquire("job", MIN, "c").await.unwrap().is_none());
    drop_table(provider.pool(), &table).await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn the_session_time_zone_changes_nothing() {
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let table = testing::unique_table_name("shedlock_pg_tz");
    let zoned = |zone: &'static str| {
        PgPoolOptions::new()
            .max_connections(2)
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    conn.execute(sqlx::AssertSqlSafe(format!("SET TIME ZONE '{zone}'")))
                        .await?;
                    Ok(())
                })
            })
            .connect(&url)
    };
    let east = PgLockProvider::builder(zoned("Pacific/Kiritimati").await.unwrap())
        .table(&table)
        .build()
        .unwrap();
    let west = PgLockProvider::builder(zoned("America/Los_Angeles").await.unwrap())
        .table(&table)
        .build()
        .unwrap();
    east.create_table_if_not_exists().await.unwrap();

    let record = east.acquire("tz", MIN * 10, "east").await.unwrap().unwrap();
    assert!(
        west.acquire("tz", MIN * 10, "west")
            .await
            .unwrap()
            .is_none()
    );
    let seen = west.holder("tz").await.unwrap().expect("held");
    assert_eq!(seen.locked_at(), record.locked_at());
    assert_eq!(seen.lock_until(), record.lock_until());

    // The stored values are UTC wall-clock times, whatever the writer's session zone.
    let utc = pool(&url).await;
    let (stored, db_now): (chrono::NaiveDateTime, chrono::DateTime<chrono::Utc>) =
        sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT locked_at, now() FROM {table} WHERE name = 'tz'"
        )))
        .fetch_one(&utc)
        .await
        .unwrap();
    assert_eq!(stored.and_utc(), record.locked_at());
    let skew = (db_now - record.locked_at()).num_seconds().abs();
    assert!(
        skew < 60,
        "locked_at is {skew} s away from the server's UTC time"
    );

    // A short lock expires by the server's clock for both.
    assert!(east.release(&record, Duration::ZERO).await.unwrap());
    let short = west
        .acquire("tz", Duration::from_millis(300), "west")
        .await
        .unwrap()
        .unwrap();
    assert!(east.acquire("tz", MIN, "east").await.unwrap().is_none());
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            east.acquire("tz", MIN, "east").await.unwrap().is_some()
        })
        .await,
        "{short} never expired for the other zone"
    );
    drop_table(&utc, &table).await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn locks_work_while_the_apps_own_pool_is_exhausted() {
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let table = testing::unique_table_name("shedlock_pg_app");
    // The application's pool, all of whose connections its jobs will hold.
    let app = PgPoolOptions::new()
        .max_connections(2)
        .acquire_timeout(Duration::from_millis(200))
        .connect(&url)
        .await
        .unwrap();
    // The provider as the README builds it: a pool of its own (`connect` = `pool_options()`,
    // here with a table of this test's own).
    let provider = PgLockProvider::builder(pool(&url).await)
        .table(&table)
        .build()
        .unwrap();
    provider.create_table_if_not_exists().await.unwrap();
    let on_app = PgLockProvider::builder(app.clone())
        .table(&table)
        .call_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    common::locks_work_while_the_app_pool_is_exhausted(&app, provider.clone(), on_app).await;
    drop_table(provider.pool(), &table).await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn wrong_column_types_are_schema_errors() {
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let pool = pool(&url).await;
    let cases = [
        (
            "name VARCHAR(64) PRIMARY KEY, lock_until TIMESTAMPTZ NOT NULL, \
             locked_at TIMESTAMP NOT NULL, locked_by VARCHAR(255) NOT NULL",
            "lock_until is timestamp with time zone",
        ),
        (
            "name VARCHAR(64) NOT NULL, lock_until TIMESTAMP NOT NULL, \
             locked_at TIMESTAMP NOT NULL, locked_by VARCHAR(255) NOT NULL",
            "not the primary key",
        ),
        (
            "name VARCHAR(64) PRIMARY KEY, lock_until TIMESTAMP NOT NULL, \
             locked_at TIMESTAMP NOT NULL, locked_by VARCHAR(255) NOT NULL, \
             fencing_token INTEGER NOT NULL DEFAULT 0",
            "fencing_token is integer, expected BIGINT",
        ),
        (
            "name VARCHAR(64) PRIMARY KEY, lock_until TIMESTAMP NOT NULL, \
             locked_by VARCHAR(255) NOT NULL",
            "locked_at is missing",
        ),
        (
            "name VARCHAR(32) PRIMARY KEY, lock_until TIMESTAMP NOT NULL, \
             locked_at TIMESTAMP NOT NULL, locked_by VARCHAR(255) NOT NULL",
            "holds 32 characters but max_name_len is 64",
        ),
    ];
    for (columns, expected) in cases {
        let table = testing::unique_table_name("shedlock_pg_bad");
        pool.execute(sqlx::AssertSqlSafe(format!(
            "CREATE TABLE {table} ({columns})"
        )))
        .await
        .unwrap();
        let provider = PgLockProvider::builder(pool.clone())
            .table(&table)
            .build()
            .unwrap();
        let err = provider.acquire("job", MIN, "me").await.unwrap_err();
        assert!(err.is_schema(), "{err}");
        assert!(err.to_string().contains(expected), "{err}");
        drop_table(&pool, &table).await;
    }
}

#[tokio::test]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn odd_names_are_bound_never_spliced() {
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let (provider, table) = fresh(&url).await;
    for name in common::odd_names() {
        let record = provider.acquire(&name, MIN, "me").await.unwrap().unwrap();
        let holder = provider.holder(&name).await.unwrap().unwrap();
        assert_eq!(holder.name(), name);
        assert!(provider.release(&record, Duration::ZERO).await.unwrap());
    }
    for name in common::invalid_names() {
        let err = provider.acquire(&name, MIN, "me").await.unwrap_err();
        assert!(err.is_invalid_config(), "{name:?}: {err}");
    }
    let rows: i64 =
        sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {table}")))
            .fetch_one(provider.pool())
            .await
            .unwrap();
    assert_eq!(rows, i64::try_from(common::odd_names().len()).unwrap());
    drop_table(provider.pool(), &table).await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn schema_qualified_tables_and_custom_columns_work() {
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let pool = pool(&url).await;
    let schema = testing::unique_table_name("locks");
    pool.execute(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .await
        .unwrap();
    let provider = PgLockProvider::builder(pool.clone())
        .table(format!("{schema}.Job_Locks"))
        .name_column("lock_name")
        .lock_until_column("until")
        .locked_at_column("since")
        .locked_by_column("owner")
        .fencing_token_column("token")
        .max_name_len(100)
        .build()
        .unwrap();
    provider.create_table_if_not_exists().await.unwrap();
    provider.create_table_if_not_exists().await.unwrap(); // idempotent
    let long = "n".repeat(100);
    let record = provider.acquire(&long, MIN, "me").await.unwrap().unwrap();
    assert!(record.fencing_token().is_some());
    let extended = provider.extend(&record, MIN * 2).await.unwrap().unwrap();
    assert!(extended.lock_until() > record.lock_until());
    assert!(provider.release(&extended, Duration::ZERO).await.unwrap());
    let owner: String = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT owner FROM {schema}.\"Job_Locks\" WHERE lock_name = $1"
    )))
    .bind(&long)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(owner, "me");
    pool.execute(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
        .await
        .unwrap();
}

#[tokio::test]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn owner_ids_longer_than_the_column_are_rejected() {
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let (provider, table) = fresh(&url).await;
    let err = provider
        .acquire("job", MIN, &"o".repeat(256))
        .await
        .unwrap_err();
    assert!(err.is_invalid_config(), "{err}");
    drop_table(provider.pool(), &table).await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn a_black_holed_call_times_out_and_its_connection_is_closed() {
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let (direct, table) = fresh(&url).await;
    let proxy = common::Proxy::start(common::url_addr(&url)).await;
    // One connection, so the pool's size shows whether the frozen one went back.
    let pool = PgLockProvider::pool_options()
        .max_connections(1)
        .min_connections(0)
        .connect(&common::url_via(&url, proxy.addr))
        .await
        .unwrap();
    let timeout = Duration::from_millis(500);
    let provider = PgLockProvider::builder(pool.clone())
        .table(&table)
        .call_timeout(timeout)
        .build()
        .unwrap();
    let record = provider.acquire("job", MIN, "me").await.unwrap().unwrap();
    // sqlx pings a connection when it goes back to the pool (in the background); let that
    // finish, or the ping itself would hang in the black hole and keep the slot.
    assert!(common::eventually(Duration::from_secs(5), || async { pool.num_idle() == 1 }).await);

    proxy.blackhole();
    let started = tokio::time::Instant::now();
    let err = provider.release(&record, Duration::ZERO).await.unwrap_err();
    assert!(err.is_timeout(), "{err}");
    assert!(
        started.elapsed() < timeout * 3,
        "took {:?}",
        started.elapsed()
    );
    // The frozen connection was closed, not returned: the pool holds nothing.
    assert_eq!(
        pool.size(),
        0,
        "the timed-out connection went back to the pool"
    );
    // New connections hang too, and still fail within the timeout.
    let started = tokio::time::Instant::now();
    let err = provider.acquire("other", MIN, "me").await.unwrap_err();
    assert!(err.is_timeout(), "{err}");
    assert!(
        started.elapsed() < timeout * 3,
        "took {:?}",
        started.elapsed()
    );

    proxy.heal();
    // Back to normal without any action: the release that timed out never reached the server,
    // so the lock is still held; the holder releases it.
    assert!(
        common::eventually(Duration::from_secs(10), || async {
            provider
                .release(&record, Duration::ZERO)
                .await
                .is_ok_and(|released| released)
        })
        .await,
        "the provider did not recover"
    );
    assert!(
        provider
            .acquire("job", MIN, "other")
            .await
            .unwrap()
            .is_some()
    );
    drop_table(direct.pool(), &table).await;
}

#[tokio::test]
async fn an_unresponsive_server_fails_within_the_timeout() {
    // No database needed: a listener that accepts and never answers.
    let addr = common::silent_server().await;
    let pool = PgLockProvider::pool_options()
        .min_connections(0)
        .connect_lazy(&format!("postgres://nobody@{addr}/none"))
        .unwrap();
    let provider = PgLockProvider::builder(pool)
        .call_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let started = tokio::time::Instant::now();
    let err = provider.acquire("job", MIN, "me").await.unwrap_err();
    assert!(err.is_timeout(), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn a_skipped_acquire_costs_one_round_trip_on_the_callers_path() {
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let (direct, table) = fresh(&url).await;
    let proxy = common::Proxy::start(common::url_addr(&url)).await;
    // Ours (no ping on checkout) and sqlx's default (ping on checkout).
    for (test_before_acquire, expected) in [(false, 1), (true, 2)] {
        let pool = PgLockProvider::pool_options()
            .max_connections(1)
            .test_before_acquire(test_before_acquire)
            .connect(&common::url_via(&url, proxy.addr))
            .await
            .unwrap();
        let provider = PgLockProvider::builder(pool.clone())
            .table(&table)
            .build()
            .unwrap();
        let held = provider.acquire("rt", MIN, "a").await.unwrap().unwrap();
        assert!(provider.acquire("rt", MIN, "b").await.unwrap().is_none()); // statement prepared
        let idle = || async { pool.num_idle() == 1 };
        assert!(common::eventually(Duration::from_secs(5), idle).await);
        let before = proxy.requests();
        assert!(provider.acquire("rt", MIN, "b").await.unwrap().is_none());
        // Read before yielding: sqlx's check of the returned connection has not started yet
        // (this test runs on a single-threaded runtime).
        let on_path = proxy.requests() - before;
        assert!(common::eventually(Duration::from_secs(5), idle).await);
        let in_background = proxy.requests() - before - on_path;
        assert_eq!(
            on_path, expected,
            "test_before_acquire({test_before_acquire})"
        );
        assert_eq!(in_background, 1, "sqlx pings the connection it takes back");
        assert!(provider.release(&held, Duration::ZERO).await.unwrap());
    }
    drop_table(direct.pool(), &table).await;
}
