//! `MySqlLockProvider` against a real MySQL/MariaDB (`SHEDLOCK_MYSQL_URL`; skipped without it
//! unless `SHEDLOCK_REQUIRE_DB=1`). Each test uses a table of its own.

mod common;

use std::str::FromStr as _;
use std::time::Duration;

use shedlock_core::LockProvider;
use shedlock_core::testkit::ConformanceSuite;
use shedlock_sqlx::sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};
use shedlock_sqlx::sqlx::{self, Executor as _};
use shedlock_sqlx::{MySqlLockProvider, testing};

const MIN: Duration = Duration::from_mins(1);

async fn pool(url: &str) -> MySqlPool {
    MySqlLockProvider::pool_options()
        .connect(url)
        .await
        .expect("connect to MySQL/MariaDB")
}

/// A provider on a fresh table of our DDL.
async fn fresh(url: &str) -> (MySqlLockProvider, String) {
    let table = testing::unique_table_name("shedlock_my");
    let provider = MySqlLockProvider::builder(pool(url).await)
        .table(&table)
        .build()
        .expect("valid settings");
    provider
        .create_table_if_not_exists()
        .await
        .expect("create table");
    (provider, table)
}

async fn drop_table(pool: &MySqlPool, table: &str) {
    pool.execute(sqlx::AssertSqlSafe(format!("DROP TABLE IF EXISTS {table}")))
        .await
        .expect("drop table");
}

common::suite::server_store! {
    /// MySQL/MariaDB for the shared cases.
    My(MySqlLockProvider), url: testing::mysql_url, tables: "shedlock_my_suite",
    migrations: "mysql",
    tests: #[cfg_attr(not(shedlock_mysql), ignore = "needs SHEDLOCK_MYSQL_URL (MySQL)")]
}

/// Java ShedLock's DDL for MySQL/MariaDB (no token column, default collation) for `table`.
fn java_ddl(table: &str) -> String {
    format!(
        "CREATE TABLE {table}(name VARCHAR(64) NOT NULL, lock_until TIMESTAMP(3) NOT NULL, \
         locked_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), \
         locked_by VARCHAR(255) NOT NULL, PRIMARY KEY (name))"
    )
}

/// A pool whose sessions use `zone` (set by the user's connect options and `after_connect`).
async fn zoned_pool(url: &str, zone: &'static str) -> MySqlPool {
    let options = MySqlConnectOptions::from_str(url)
        .unwrap()
        .timezone(Some(zone.to_owned()));
    MySqlPoolOptions::new()
        .max_connections(2)
        .after_connect(move |conn, _| {
            Box::pin(async move {
                conn.execute(sqlx::AssertSqlSafe(format!("SET time_zone = '{zone}'")))
                    .await?;
                Ok(())
            })
        })
        .connect_with(options)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_mysql), ignore = "needs SHEDLOCK_MYSQL_URL (MySQL)")]
async fn conformance_suite_passes_on_a_pool_in_another_time_zone() {
    let Some(url) = testing::mysql_url() else {
        return;
    };
    let (direct, table) = fresh(&url).await;
    let provider = MySqlLockProvider::builder(zoned_pool(&url, "+05:00").await)
        .table(&table)
        .build()
        .unwrap();
    ConformanceSuite::new(provider).run().await;
    drop_table(direct.pool(), &table).await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_mysql), ignore = "needs SHEDLOCK_MYSQL_URL (MySQL)")]
async fn session_time_zones_change_nothing() {
    let Some(url) = testing::mysql_url() else {
        return;
    };
    let (direct, table) = fresh(&url).await;
    // The user's pools: one in UTC+13, one in UTC-8 (as a server default or the user's own
    // connect options and after_connect would leave them); the provider pins every statement.
    let east = MySqlLockProvider::builder(zoned_pool(&url, "+13:00").await)
        .table(&table)
        .build()
        .unwrap();
    let west = MySqlLockProvider::builder(zoned_pool(&url, "-08:00").await)
        .table(&table)
        .build()
        .unwrap();
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

    // Stored as UTC wall-clock values, as a UTC session (Java's, pinned) reads them.
    let (stored, db_now): (chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>) =
        sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT locked_at, UTC_TIMESTAMP(3) FROM {table} WHERE name = 'tz'"
        )))
        .fetch_one(direct.pool())
        .await
        .unwrap();
    assert_eq!(stored, record.locked_at());
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
    drop_table(direct.pool(), &table).await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_mysql), ignore = "needs SHEDLOCK_MYSQL_URL (MySQL)")]
async fn the_dedicated_pool_pins_its_sessions_to_utc() {
    let Some(url) = testing::mysql_url() else {
        return;
    };
    let options = MySqlConnectOptions::from_str(&url)
        .unwrap()
        .timezone(Some("+05:00".to_owned()));
    let pool = MySqlLockProvider::pool_options()
        .connect_with(options)
        .await
        .unwrap();
    let zone: String = sqlx::query_scalar("SELECT CAST(@@session.time_zone AS CHAR)")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(zone, "+00:00");
}

#[tokio::test]
#[cfg_attr(not(shedlock_mysql), ignore = "needs SHEDLOCK_MYSQL_URL (MySQL)")]
async fn a_held_lock_is_one_statement_that_writes_nothing() {
    let Some(url) = testing::mysql_url() else {
        return;
    };
    let table = testing::unique_table_name("shedlock_my_nowrite");
    let single = MySqlLockProvider::pool_options()
        .max_connections(1)
        .connect(&url)
        .await
        .unwrap();
    let provider = MySqlLockProvider::builder(single.clone())
        .table(&table)
        .build()
        .unwrap();
    provider.create_table_if_not_exists().await.unwrap();
    let held = provider.acquire("job", MIN, "a").await.unwrap().unwrap();
    // The session's handler counters of the pool's one connection: rows updated and rows
    // written (reading them writes a temporary table, so writes are compared to a baseline).
    let counters = || async {
        sqlx::query_as::<_, (String, String)>(
            "SELECT CAST(VARIABLE_NAME AS CHAR), CAST(VARIABLE_VALUE AS CHAR) \
             FROM information_schema.SESSION_STATUS \
             WHERE VARIABLE_NAME IN ('HANDLER_UPDATE', 'HANDLER_WRITE', 'COM_UPDATE', \
             'COM_INSERT') ORDER BY VARIABLE_NAME",
        )
        .fetch_all(&single)
        .await
        .unwrap()
        .into_iter()
        .map(|(name, value)| (name, value.parse::<i64>().unwrap()))
        .collect::<Vec<_>>()
    };
    let delta = |a: &[(String, i64)], b: &[(String, i64)], name: &str| {
        let get = |v: &[(String, i64)]| v.iter().find(|(n, _)| n == name).unwrap().1;
        get(b) - get(a)
    };
    let first = counters().await;
    let baseline = counters().await;
    assert!(provider.acquire("job", MIN, "b").await.unwrap().is_none());
    let after = counters().await;
    let writes_of_a_read = delta(&first, &baseline, "HANDLER_WRITE");
    assert_eq!(
        delta(&baseline, &after, "HANDLER_UPDATE"),
        0,
        "a row was updated"
    );
    assert_eq!(
        delta(&baseline, &after, "HANDLER_WRITE"),
        writes_of_a_read,
        "a row was written"
    );
    assert_eq!(
        delta(&baseline, &after, "COM_UPDATE"),
        1,
        "one UPDATE statement"
    );
    assert_eq!(
        delta(&baseline, &after, "COM_INSERT"),
        0,
        "no INSERT statement"
    );
    assert!(provider.release(&held, Duration::ZERO).await.unwrap());
    drop_table(&single, &table).await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_mysql), ignore = "needs SHEDLOCK_MYSQL_URL (MySQL)")]
async fn a_row_deleted_by_hand_comes_back_and_tokens_keep_increasing() {
    let Some(url) = testing::mysql_url() else {
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
    assert!(!provider.release(&first, Duration::ZERO).await.unwrap());
    assert!(provider.acquire("job", MIN, "c").await.unwrap().is_none());
    drop_table(provider.pool(), &table).await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_mysql), ignore = "needs SHEDLOCK_MYSQL_URL (MySQL)")]
async fn locks_work_while_the_apps_own_pool_is_exhausted() {
    let Some(url) = testing::mysql_url() else {
        return;
    };
    let table = testing::unique_table_name("shedlock_my_app");
    // The application's pool, all of whose connections its jobs will hold.
    let app = MySqlPoolOptions::new()
        .max_connections(2)
        .acquire_timeout(Duration::from_millis(200))
        .connect(&url)
        .await
        .unwrap();
    // The provider as the README builds it: a pool of its own (`connect` = `pool_options()`,
    // here with a table of this test's own).
    let provider = MySqlLockProvider::builder(pool(&url).await)
        .table(&table)
        .build()
        .unwrap();
    provider.create_table_if_not_exists().await.unwrap();
    let on_app = MySqlLockProvider::builder(app.clone())
        .table(&table)
        .call_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    common::locks_work_while_the_app_pool_is_exhausted(&app, provider.clone(), on_app).await;
    drop_table(provider.pool(), &table).await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_mysql), ignore = "needs SHEDLOCK_MYSQL_URL (MySQL)")]
async fn wrong_column_types_are_schema_errors() {
    let Some(url) = testing::mysql_url() else {
        return;
    };
    let pool = pool(&url).await;
    let cases = [
        (
            "name VARCHAR(64) PRIMARY KEY, lock_until TIMESTAMP NOT NULL DEFAULT \
             CURRENT_TIMESTAMP, locked_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), \
             locked_by VARCHAR(255) NOT NULL",
            "lock_until is timestamp(0), which drops milliseconds",
        ),
        (
            "name VARCHAR(64) PRIMARY KEY, lock_until TIMESTAMP(3) NOT NULL DEFAULT \
             CURRENT_TIMESTAMP(3), locked_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) \
             ON UPDATE CURRENT_TIMESTAMP(3), locked_by VARCHAR(255) NOT NULL",
            "it must keep the acquisition time",
        ),
        (
            "name VARCHAR(64) NOT NULL, lock_until TIMESTAMP(3) NOT NULL DEFAULT \
             CURRENT_TIMESTAMP(3), locked_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), \
             locked_by VARCHAR(255) NOT NULL",
            "not the primary key",
        ),
        (
            "name VARCHAR(64) PRIMARY KEY, lock_until BIGINT NOT NULL, \
             locked_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), \
             locked_by VARCHAR(255) NOT NULL",
            "lock_until is bigint, expected TIMESTAMP(3)",
        ),
        (
            "name VARCHAR(64) PRIMARY KEY, lock_until TIMESTAMP(3) NOT NULL DEFAULT \
             CURRENT_TIMESTAMP(3), locked_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), \
             locked_by VARCHAR(255) NOT NULL, fencing_token INT NOT NULL DEFAULT 0",
            "fencing_token is int, expected BIGINT",
        ),
        (
            "name VARCHAR(32) PRIMARY KEY, lock_until TIMESTAMP(3) NOT NULL DEFAULT \
             CURRENT_TIMESTAMP(3), locked_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), \
             locked_by VARCHAR(255) NOT NULL",
            "holds 32 characters but max_name_len is 64",
        ),
    ];
    for (columns, expected) in cases {
        let table = testing::unique_table_name("shedlock_my_bad");
        pool.execute(sqlx::AssertSqlSafe(format!(
            "CREATE TABLE {table} ({columns})"
        )))
        .await
        .unwrap();
        let provider = MySqlLockProvider::builder(pool.clone())
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
#[cfg_attr(not(shedlock_mysql), ignore = "needs SHEDLOCK_MYSQL_URL (MySQL)")]
async fn odd_names_are_bound_never_spliced_and_compare_exactly() {
    let Some(url) = testing::mysql_url() else {
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
    // Binary collation: names differing in case or accents are different locks.
    let upper = provider.acquire("Report", MIN, "a").await.unwrap();
    let lower = provider.acquire("report", MIN, "b").await.unwrap();
    let accent = provider.acquire("répört", MIN, "c").await.unwrap();
    assert!(upper.is_some() && lower.is_some() && accent.is_some());
    drop_table(provider.pool(), &table).await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_mysql), ignore = "needs SHEDLOCK_MYSQL_URL (MySQL)")]
async fn schema_qualified_tables_and_custom_columns_work() {
    let Some(url) = testing::mysql_url() else {
        return;
    };
    let pool = pool(&url).await;
    let database: String = sqlx::query_scalar("SELECT DATABASE()")
        .fetch_one(&pool)
        .await
        .unwrap();
    let table = testing::unique_table_name("Job_Locks");
    let provider = MySqlLockProvider::builder(pool.clone())
        .table(format!("{database}.{table}"))
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
    let stored: chrono::DateTime<chrono::Utc> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT `until` FROM `{table}` WHERE lock_name = ?"
    )))
    .bind(&long)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        stored,
        extended.lock_until(),
        "extend reports the stored lock_until"
    );
    assert!(provider.release(&extended, Duration::ZERO).await.unwrap());
    drop_table(&pool, &format!("`{table}`")).await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_mysql), ignore = "needs SHEDLOCK_MYSQL_URL (MySQL)")]
async fn owner_ids_longer_than_the_column_are_rejected() {
    let Some(url) = testing::mysql_url() else {
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
#[cfg_attr(not(shedlock_mysql), ignore = "needs SHEDLOCK_MYSQL_URL (MySQL)")]
async fn a_black_holed_call_times_out_and_its_connection_is_closed() {
    let Some(url) = testing::mysql_url() else {
        return;
    };
    let (direct, table) = fresh(&url).await;
    let proxy = common::Proxy::start(common::url_addr(&url)).await;
    let pool = MySqlLockProvider::pool_options()
        .max_connections(1)
        .min_connections(0)
        .connect(&common::url_via(&url, proxy.addr))
        .await
        .unwrap();
    let timeout = Duration::from_millis(500);
    let provider = MySqlLockProvider::builder(pool.clone())
        .table(&table)
        .call_timeout(timeout)
        .build()
        .unwrap();
    let record = provider.acquire("job", MIN, "me").await.unwrap().unwrap();
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
    assert_eq!(
        pool.size(),
        0,
        "the timed-out connection went back to the pool"
    );

    proxy.heal();
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
    let addr = common::silent_server().await;
    let pool = MySqlLockProvider::pool_options()
        .min_connections(0)
        .connect_lazy(&format!("mysql://nobody@{addr}/none"))
        .unwrap();
    let provider = MySqlLockProvider::builder(pool)
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
#[cfg_attr(not(shedlock_mysql), ignore = "needs SHEDLOCK_MYSQL_URL (MySQL)")]
async fn a_skipped_acquire_costs_one_round_trip_on_the_callers_path() {
    let Some(url) = testing::mysql_url() else {
        return;
    };
    let (direct, table) = fresh(&url).await;
    let proxy = common::Proxy::start(common::url_addr(&url)).await;
    for (test_before_acquire, expected) in [(false, 1), (true, 2)] {
        let pool = MySqlLockProvider::pool_options()
            .max_connections(1)
            .test_before_acquire(test_before_acquire)
            .connect(&common::url_via(&url, proxy.addr))
            .await
            .unwrap();
        let provider = MySqlLockProvider::builder(pool.clone())
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
