//! The admin suite (`shedlock_core::testkit::AdminSuite`) on every SQL store, on our DDL and on
//! Java ShedLock's four-column table; and the `last_fire` column read where the table has it.

use std::time::Duration;

use shedlock_core::admin::LockAdmin;
use shedlock_core::testkit::AdminSuite;
use shedlock_sqlx::sqlx::{self, Executor as _};
use shedlock_sqlx::{MySqlLockProvider, PgLockProvider, SqliteLockProvider, testing};

/// Java ShedLock's DDL (no token column) for `table`, with `ts` as the time type.
fn java_ddl(table: &str, ts: &str) -> String {
    format!(
        "CREATE TABLE {table}(name VARCHAR(64) NOT NULL, lock_until {ts} NOT NULL, \
         locked_at {ts} NOT NULL, locked_by VARCHAR(255) NOT NULL, PRIMARY KEY (name))"
    )
}

/// The admin suite on a database server's `pool`: on our DDL, on Java's (`ts` its time type),
/// and the `last_fire` column read; `provider` makes one on a table, `five_minutes_ago` is the
/// server's SQL for that time. Drops its tables.
async fn server_passes_the_admin_suite<DB, P>(
    pool: &sqlx::Pool<DB>,
    ts: &str,
    five_minutes_ago: &str,
    provider: impl Fn(&str) -> P,
    create_ours: impl AsyncFn(&P),
) where
    DB: sqlx::Database,
    for<'c> &'c sqlx::Pool<DB>: sqlx::Executor<'c, Database = DB>,
    P: LockAdmin + 'static,
{
    let ours = testing::unique_table_name("shedlock_admin");
    let on_ours = provider(&ours);
    create_ours(&on_ours).await;
    AdminSuite::new(on_ours).run().await;

    let java = testing::unique_table_name("shedlock_admin_java");
    pool.execute(sqlx::AssertSqlSafe(java_ddl(&java, ts)))
        .await
        .expect("java table");
    AdminSuite::new(provider(&java)).run().await;

    let fired = testing::unique_table_name("shedlock_admin_fire");
    last_fire_is_listed(pool, &fired, five_minutes_ago, provider(&fired)).await;
    for table in [ours, java, fired] {
        pool.execute(sqlx::AssertSqlSafe(format!("DROP TABLE {table}")))
            .await
            .expect("drop");
        // The definitions and history tables `create_table` made with ours.
        for suffix in ["_jobs", "_history"] {
            pool.execute(sqlx::AssertSqlSafe(format!(
                "DROP TABLE IF EXISTS {table}{suffix}"
            )))
            .await
            .expect("drop");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn postgres_passes_the_admin_suite() {
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let pool = PgLockProvider::pool_options()
        .connect(&url)
        .await
        .expect("connect");
    server_passes_the_admin_suite(
        &pool,
        "TIMESTAMP",
        "timezone('UTC', now()) - interval '5 minutes'",
        |table| {
            PgLockProvider::builder(pool.clone())
                .table(table)
                .build()
                .expect("valid")
        },
        async |p: &PgLockProvider| p.create_table_if_not_exists().await.expect("create"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_mysql), ignore = "needs SHEDLOCK_MYSQL_URL (MySQL)")]
async fn mysql_passes_the_admin_suite() {
    let Some(url) = testing::mysql_url() else {
        return;
    };
    let pool = MySqlLockProvider::pool_options()
        .connect(&url)
        .await
        .expect("connect");
    server_passes_the_admin_suite(
        &pool,
        "TIMESTAMP(3)",
        "TIMESTAMPADD(MINUTE, -5, UTC_TIMESTAMP(3))",
        |table| {
            MySqlLockProvider::builder(pool.clone())
                .table(table)
                .build()
                .expect("valid")
        },
        async |p: &MySqlLockProvider| p.create_table_if_not_exists().await.expect("create"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_passes_the_admin_suite() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("admin.db").display()
    );
    let pool = SqliteLockProvider::pool_options()
        .connect(&url)
        .await
        .expect("open");
    let provider = SqliteLockProvider::new(pool.clone());
    provider.create_table_if_not_exists().await.expect("create");
    AdminSuite::new(provider).run().await;

    pool.execute(sqlx::AssertSqlSafe(java_ddl("java_locks", "TIMESTAMP")))
        .await
        .expect("java table");
    let provider = SqliteLockProvider::builder(pool.clone())
        .table("java_locks")
        .build()
        .expect("valid");
    AdminSuite::new(provider).run().await;

    last_fire_is_listed(
        &pool,
        "fired_locks",
        "strftime('%Y-%m-%d %H:%M:%f', 'now', '-5 minutes')",
        SqliteLockProvider::builder(pool.clone())
            .table("fired_locks")
            .build()
            .expect("valid"),
    )
    .await;
}

/// A table with the `last_fire` column (our DDL's): `list`
/// and `entry` report it, and freeing the lock leaves it as it was.
async fn last_fire_is_listed<DB, P>(
    pool: &sqlx::Pool<DB>,
    table: &str,
    five_minutes_ago: &str,
    provider: P,
) where
    DB: sqlx::Database,
    for<'c> &'c sqlx::Pool<DB>: sqlx::Executor<'c, Database = DB>,
    P: LockAdmin,
{
    provider.create_table().await.expect("create");
    let (fired, never) = (
        testing::unique_lock_name("fired"),
        testing::unique_lock_name("never"),
    );
    let record = provider
        .acquire(&fired, Duration::from_mins(1), "me")
        .await
        .expect("acquire")
        .expect("free");
    provider
        .acquire(&never, Duration::from_mins(1), "me")
        .await
        .expect("acquire")
        .expect("free");
    pool.execute(sqlx::AssertSqlSafe(format!(
        "UPDATE {table} SET last_fire = {five_minutes_ago} WHERE name = '{fired}'"
    )))
    .await
    .expect("record a fire");
    let listed = provider.list().await.expect("list");
    let entry = |name: &str| {
        listed
            .iter()
            .find(|e| e.record().name() == name)
            .unwrap_or_else(|| panic!("{name} listed"))
    };
    let fire = entry(&fired).last_fire().expect("the recorded fire");
    let ago = entry(&fired).store_now() - fire;
    assert!(
        ago >= chrono::Duration::minutes(5) && ago < chrono::Duration::minutes(6),
        "{fire} is {ago} before the store's now"
    );
    assert_eq!(entry(&never).last_fire(), None);
    assert!(provider.unlock(&record, "test").await.expect("unlock"));
    let after = provider.entry(&fired).await.expect("entry").expect("a row");
    assert!(!after.is_held());
    assert_eq!(
        after.last_fire(),
        Some(fire),
        "freeing keeps the recorded fire"
    );
}
