//! `MySqlLockProvider` against a real MySQL/MariaDB (`SHEDLOCK_MYSQL_URL`; skipped without it
//! unless `SHEDLOCK_REQUIRE_DB=1`). Each test uses a table of its own.

use crate::common;

use std::str::FromStr as _;
use std::time::Duration;

use shedlock_core::provider::LockProvider;
use shedlock_core::testkit::ConformanceSuite;
use shedlock_sqlx::sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};
use shedlock_sqlx::sqlx::{self, Executor as _};
use shedlock_sqlx::{MySqlLockProvider, testing};

const MIN: Duration = Duration::from_mins(1);

common::suite::server_store! {
    /// MySQL/MariaDB for the shared cases.
    My(MySqlLockProvider), url: testing::mysql_url, pool: MySqlPool, tables: "shedlock_my_suite",
    migrations: "mysql", cycle_statements: 3,
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
    let (_direct, table) = fresh(&url).await;
    let provider = MySqlLockProvider::builder(zoned_pool(&url, "+05:00").await)
        .table(&table)
        .build()
        .unwrap();
    ConformanceSuite::new(provider).run().await;
    drop_table(&url, &table).await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_mysql), ignore = "needs SHEDLOCK_MYSQL_URL (MySQL)")]
async fn session_time_zones_change_nothing() {
    let Some(url) = testing::mysql_url() else {
        return;
    };
    let (_direct, table) = fresh(&url).await;
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
    // Stored as UTC wall-clock values, as a UTC session (Java's, pinned) reads them.
    common::zones_agree(&east, &west, async || {
        sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT locked_at, UTC_TIMESTAMP(3) FROM {table} WHERE name = 'tz'"
        )))
        .fetch_one(&pool(&url).await)
        .await
        .unwrap()
    })
    .await;
    drop_table(&url, &table).await;
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
    let (single, provider, table) = on_one_connection(&url).await;
    let held = provider.acquire("job", MIN, "a").await.unwrap().unwrap();
    let counters = || session_counters(&single);
    let first = counters().await;
    let baseline = counters().await;
    assert!(provider.acquire("job", MIN, "b").await.unwrap().is_none());
    let after = counters().await;
    let writes_of_a_read = delta(&first, &baseline, "HANDLER_WRITE");
    // One UPDATE, and the counters' own SELECT.
    assert_no_row_written(
        &baseline,
        &after,
        writes_of_a_read,
        (1, 1),
        "a held acquire",
    );
    assert!(provider.release(&held, Duration::ZERO).await.unwrap());
    drop_table(&url, &table).await;
}

/// A pool of one connection (whose session counters are the provider's), and a provider on a
/// fresh table over it; the table's name.
async fn on_one_connection(url: &str) -> (MySqlPool, MySqlLockProvider, String) {
    let table = testing::unique_table_name("shedlock_my_single");
    let single = MySqlLockProvider::pool_options()
        .max_connections(1)
        .connect(url)
        .await
        .unwrap();
    let provider = MySqlLockProvider::builder(single.clone())
        .table(&table)
        .build()
        .unwrap();
    provider.create_table_if_not_exists().await.unwrap();
    (single, provider, table)
}

/// The session's handler and statement counters of `single`'s one connection: rows updated,
/// rows written (reading them writes a temporary table, so writes are compared to a baseline),
/// and statements run.
async fn session_counters(single: &MySqlPool) -> Vec<(String, i64)> {
    sqlx::query_as::<_, (String, String)>(
        "SELECT CAST(VARIABLE_NAME AS CHAR), CAST(VARIABLE_VALUE AS CHAR) \
         FROM information_schema.SESSION_STATUS \
         WHERE VARIABLE_NAME IN ('HANDLER_UPDATE', 'HANDLER_WRITE', 'COM_UPDATE', \
         'COM_INSERT', 'COM_SELECT') ORDER BY VARIABLE_NAME",
    )
    .fetch_all(single)
    .await
    .unwrap()
    .into_iter()
    .map(|(name, value)| (name, value.parse::<i64>().unwrap()))
    .collect()
}

/// How much the counter `name` grew from `a` to `b`.
fn delta(a: &[(String, i64)], b: &[(String, i64)], name: &str) -> i64 {
    let get = |v: &[(String, i64)]| v.iter().find(|(n, _)| n == name).unwrap().1;
    get(b) - get(a)
}

/// Between the counters `before` and `after`: no row updated, no row written beyond what the
/// counters' own read writes, no INSERT, and `(updates, selects)` statements of those kinds.
fn assert_no_row_written(
    before: &[(String, i64)],
    after: &[(String, i64)],
    writes_of_a_read: i64,
    (updates, selects): (i64, i64),
    what: &str,
) {
    let d = |name: &str| delta(before, after, name);
    assert_eq!(d("HANDLER_UPDATE"), 0, "{what}: a row was updated");
    assert_eq!(
        d("HANDLER_WRITE"),
        writes_of_a_read,
        "{what}: a row was written"
    );
    assert_eq!(d("COM_INSERT"), 0, "{what}: an INSERT statement");
    assert_eq!(d("COM_UPDATE"), updates, "{what}: UPDATE statements");
    assert_eq!(d("COM_SELECT"), selects, "{what}: SELECT statements");
}

/// A fire claim that does not claim (claimed elsewhere, held, too early) is one `SELECT` and
/// updates or inserts no row.
#[tokio::test]
#[cfg_attr(not(shedlock_mysql), ignore = "needs SHEDLOCK_MYSQL_URL (MySQL)")]
async fn a_fire_claim_that_does_not_claim_is_one_select_that_writes_nothing() {
    use shedlock_core::provider::{Fire, FireClaim};
    let Some(url) = testing::mysql_url() else {
        return;
    };
    let (single, provider, table) = on_one_connection(&url).await;
    let now: chrono::NaiveDateTime = sqlx::query_scalar("SELECT UTC_TIMESTAMP(3)")
        .fetch_one(&single)
        .await
        .unwrap();
    let at = now.and_utc() - chrono::Duration::seconds(1);
    let fire = Fire::new(at, at + chrono::Duration::minutes(1)).unwrap();
    let later = Fire::new(
        at + chrono::Duration::days(1),
        at + chrono::Duration::days(2),
    )
    .unwrap();
    let claimed = provider.claim_fire("fired", &fire, MIN, "a").await.unwrap();
    let claimed = claimed.claimed().expect("the first claim wins").clone();
    assert!(provider.release(&claimed, Duration::ZERO).await.unwrap());
    let held = provider.acquire("held", MIN, "a").await.unwrap().unwrap();
    let first = session_counters(&single).await;
    let baseline = session_counters(&single).await;
    let writes_of_a_read = delta(&first, &baseline, "HANDLER_WRITE");
    for (name, fire) in [("fired", fire), ("fired", later), ("held", fire)] {
        let before = session_counters(&single).await;
        let reply = provider.claim_fire(name, &fire, MIN, "b").await.unwrap();
        assert!(
            matches!(
                reply,
                FireClaim::ClaimedElsewhere { .. }
                    | FireClaim::TooEarly { .. }
                    | FireClaim::Held { .. }
            ),
            "{reply:?}"
        );
        let after = session_counters(&single).await;
        // The look, and the counters' own SELECT.
        let what = format!("{reply:?}");
        assert_no_row_written(&before, &after, writes_of_a_read, (0, 2), &what);
    }
    assert!(provider.release(&held, Duration::ZERO).await.unwrap());
    drop_table(&url, &table).await;
}

/// Tables that do not fit (columns, lengths, keys) and what the schema error says for each.
fn wrong_tables() -> Vec<(&'static str, &'static str)> {
    vec![
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
        (
            "name VARCHAR(64) PRIMARY KEY, lock_until TIMESTAMP(3) NOT NULL DEFAULT \
             CURRENT_TIMESTAMP(3), locked_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), \
             locked_by VARCHAR(255) NOT NULL, last_fire TIMESTAMP NULL DEFAULT NULL",
            "last_fire is timestamp(0), which drops milliseconds",
        ),
    ]
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
    let provider = common::custom_columns(
        MySqlLockProvider::builder(pool.clone()).table(format!("{database}.{table}")),
    )
    .max_name_len(100)
    .build()
    .unwrap();
    let long = "n".repeat(100);
    let extended = common::a_custom_table_takes_a_lock(&provider, &long).await;
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
    drop_table(&url, &format!("`{table}`")).await;
}

/// `transaction_pooler(true)` (each statement unnamed inside `BEGIN` … `COMMIT`) keeps the
/// contract on MySQL/MariaDB too: its acquire's two statements, `LAST_INSERT_ID` and the
/// read-back each run in a transaction of their own. Fewer fuzz runs than the default: on
/// MySQL/MariaDB every acquire, a skip too, locks the row until its `COMMIT`, two round trips
/// later, so the fuzz case's eight spinning acquirers queue behind each other (about 80 s for
/// the default 100 runs, 6 s without the setting).
#[tokio::test]
#[cfg_attr(not(shedlock_mysql), ignore = "needs SHEDLOCK_MYSQL_URL (MySQL)")]
async fn the_conformance_suite_passes_in_transaction_pooler_mode() {
    let Some(url) = testing::mysql_url() else {
        return;
    };
    let table = testing::unique_table_name("shedlock_my_pooler");
    let provider = MySqlLockProvider::from_url(&url)
        .table(&table)
        .transaction_pooler(true)
        .build()
        .unwrap();
    provider.create_table_if_not_exists().await.unwrap();
    let report = ConformanceSuite::new(provider)
        .require_fire_claims(true)
        .fuzz_runs(20)
        .run()
        .await;
    assert!(
        report.failed().is_empty() && report.skipped().is_empty(),
        "{report}"
    );
    drop_table(&url, &table).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_mysql), ignore = "needs SHEDLOCK_MYSQL_URL (MySQL)")]
async fn a_pause_committed_between_the_look_and_the_claim_is_honoured() {
    let Some(url) = testing::mysql_url() else {
        return;
    };
    let (_, table) = fresh(&url).await;
    let provider = MySqlLockProvider::from_url(&url)
        .table(&table)
        .call_timeout(Duration::from_secs(30))
        .build()
        .expect("valid settings");
    let pool = pool(&url).await;
    common::pause::a_pause_committed_during_a_claim_is_honoured(
        &pool,
        provider,
        &table,
        "UTC_TIMESTAMP(3)",
        // The claim's `UPDATE` in progress: it cannot finish while the row is locked.
        "SELECT CAST(COUNT(*) AS SIGNED) FROM information_schema.processlist \
         WHERE info LIKE ? AND info LIKE '%UPDATE%' AND info NOT LIKE '%processlist%'",
    )
    .await;
    drop_table(&url, &table).await;
}
