//! `SqliteLockProvider` on a database file in a temporary directory (always runs).

use crate::common;

use std::str::FromStr as _;
use std::time::Duration;

use shedlock_core::provider::LockProvider;
use shedlock_sqlx::SqliteLockProvider;
use shedlock_sqlx::sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
};
use shedlock_sqlx::sqlx::{self, Executor as _};
use tempfile::TempDir;

const MIN: Duration = Duration::from_mins(1);

/// A database file of its own, in WAL mode.
struct Db {
    _dir: TempDir,
    options: SqliteConnectOptions,
}

impl Db {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("locks.db").display());
        let options = SqliteConnectOptions::from_str(&url)
            .unwrap()
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal);
        Self { _dir: dir, options }
    }

    async fn pool(&self, max: u32) -> SqlitePool {
        SqliteLockProvider::pool_options()
            .max_connections(max)
            .min_connections(0)
            .connect_with(self.options.clone())
            .await
            .unwrap()
    }

    async fn provider(&self) -> SqliteLockProvider {
        let provider = SqliteLockProvider::new(self.pool(4).await);
        provider.create_table_if_not_exists().await.unwrap();
        provider
    }
}

impl common::suite::Store for Db {
    type Provider = SqliteLockProvider;

    async fn open() -> Option<Self> {
        Some(Self::new())
    }

    async fn fresh(&self) -> (SqliteLockProvider, String) {
        let table = self.table_name();
        let provider = self.on_table(&table).await;
        provider.create_table_if_not_exists().await.unwrap();
        (provider, table)
    }

    async fn on_table(&self, table: &str) -> SqliteLockProvider {
        SqliteLockProvider::builder(self.pool(2).await)
            .table(table)
            .build()
            .unwrap()
    }

    async fn on_one_connection(&self, table: &str) -> SqliteLockProvider {
        let provider = SqliteLockProvider::builder(self.pool(1).await)
            .table(table)
            .call_timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        provider.create_table_if_not_exists().await.unwrap();
        provider
    }

    fn pool_size(provider: &SqliteLockProvider) -> u32 {
        provider.connection_stats().open
    }

    const MIGRATIONS: &'static str = "sqlite";
    const PROVIDER: &'static str = "SqliteLockProvider";

    async fn create_table(provider: &SqliteLockProvider) {
        provider.create_table_if_not_exists().await.unwrap();
    }

    fn table_name(&self) -> String {
        shedlock_sqlx::testing::unique_table_name("shedlock")
    }

    fn wrong_tables() -> Vec<(&'static str, &'static str)> {
        wrong_tables()
    }

    fn java_ddl(table: &str) -> String {
        format!(
            "CREATE TABLE {table}(name VARCHAR(64) NOT NULL PRIMARY KEY, \
             lock_until TIMESTAMP NOT NULL, locked_at TIMESTAMP NOT NULL, \
             locked_by VARCHAR(255) NOT NULL)"
        )
    }

    async fn execute(&self, sql: String) {
        self.pool(1)
            .await
            .execute(sqlx::AssertSqlSafe(sql))
            .await
            .unwrap();
    }

    async fn drop_table(&self, table: &str) {
        self.execute(format!("DROP TABLE IF EXISTS {table}")).await;
    }
}

common::suite::store_suite!(Db);

#[tokio::test]
async fn a_held_lock_writes_nothing() {
    let db = Db::new();
    let single = db.pool(1).await;
    let provider = SqliteLockProvider::new(single.clone());
    provider.create_table_if_not_exists().await.unwrap();
    let held = provider.acquire("job", MIN, "a").await.unwrap().unwrap();
    let changes = || async {
        sqlx::query_scalar::<_, i64>("SELECT total_changes()")
            .fetch_one(&single)
            .await
            .unwrap()
    };
    let before = changes().await;
    for _ in 0..5 {
        assert!(provider.acquire("job", MIN, "b").await.unwrap().is_none());
    }
    assert_eq!(changes().await, before, "a skipped acquire changed a row");
    assert!(provider.release(&held, Duration::ZERO).await.unwrap());
    assert_eq!(changes().await, before + 1);
}

#[tokio::test]
async fn locks_work_while_the_apps_own_pool_is_exhausted() {
    let db = Db::new();
    // The application's pool on the same file, all of whose connections its jobs will hold.
    let app = SqlitePoolOptions::new()
        .max_connections(2)
        .acquire_timeout(Duration::from_millis(200))
        .connect_with(db.options.clone())
        .await
        .unwrap();
    // The provider exactly as the README builds it: `connect(url)`, a pool of its own.
    let url = format!("sqlite://{}", db.options.get_filename().display());
    let provider = SqliteLockProvider::connect(&url).await.unwrap();
    provider.create_table_if_not_exists().await.unwrap();
    let on_app = SqliteLockProvider::builder(app.clone())
        .call_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    common::locks_work_while_the_app_pool_is_exhausted(&app, provider, on_app).await;
}

/// A write that finds SQLite's write lock taken waits up to the busy timeout or the call
/// timeout, whichever ends first; both end the call with an error, of its own kind.
#[tokio::test]
async fn a_locked_database_ends_the_call_at_the_busy_or_the_call_timeout() {
    let db = Db::new();
    let provider = db.provider().await;
    // Another process's write transaction holds the database's write lock.
    let mut writer = db.pool(1).await.acquire().await.unwrap();
    writer.execute("BEGIN IMMEDIATE").await.unwrap();

    // The busy timeout first: SQLite's own "database is locked", a backend error.
    let short_busy = SqliteLockProvider::pool_options()
        .connect_with(db.options.clone().busy_timeout(Duration::from_millis(100)))
        .await
        .unwrap();
    let err = SqliteLockProvider::new(short_busy)
        .acquire("busy", MIN, "me")
        .await
        .expect_err("the write lock is taken");
    assert!(err.is_backend(), "{err}");
    assert!(format!("{err:?}").contains("database is locked"), "{err:?}");

    // The call timeout first (sqlx's 5 s busy timeout): a timeout error.
    let short_call =
        SqliteLockProvider::builder(provider.pool().expect("a provider over a pool").clone())
            .call_timeout(Duration::from_millis(300))
            .build()
            .unwrap();
    let err = short_call
        .acquire("busy", MIN, "me")
        .await
        .expect_err("the write lock is taken");
    assert!(err.is_timeout(), "{err}");

    writer.execute("ROLLBACK").await.unwrap();
    assert!(provider.acquire("busy", MIN, "me").await.unwrap().is_some());
}

/// Tables that do not fit (columns, lengths, keys) and what the schema error says for each.
fn wrong_tables() -> Vec<(&'static str, &'static str)> {
    vec![
        (
            "name TEXT PRIMARY KEY, lock_until INTEGER NOT NULL, locked_at TEXT NOT NULL, \
             locked_by TEXT NOT NULL",
            "lock_until is INTEGER",
        ),
        (
            "name TEXT NOT NULL, lock_until TEXT NOT NULL, locked_at TEXT NOT NULL, \
             locked_by TEXT NOT NULL",
            "not the primary key",
        ),
        (
            "name TEXT PRIMARY KEY, lock_until TEXT NOT NULL, locked_by TEXT NOT NULL",
            "locked_at is missing",
        ),
        (
            "name TEXT PRIMARY KEY, lock_until TEXT NOT NULL, locked_at TEXT NOT NULL, \
             locked_by TEXT NOT NULL, fencing_token TEXT",
            "fencing_token is TEXT, expected INTEGER",
        ),
        (
            "name TEXT PRIMARY KEY, lock_until TEXT NOT NULL, locked_at TEXT NOT NULL, \
             locked_by TEXT NOT NULL, last_fire INTEGER",
            "column last_fire is INTEGER, expected text",
        ),
    ]
}

#[tokio::test]
async fn schema_qualified_tables_and_custom_columns_work() {
    let db = Db::new();
    let provider = common::custom_columns(
        SqliteLockProvider::builder(db.pool(2).await).table("main.Job_Locks"),
    )
    .build()
    .unwrap();
    let extended = common::a_custom_table_takes_a_lock(&provider, "job").await;
    let stored: String =
        sqlx::query_scalar("SELECT \"until\" FROM Job_Locks WHERE lock_name = 'job'")
            .fetch_one(provider.pool().expect("a provider over a pool"))
            .await
            .unwrap();
    assert_eq!(
        stored,
        extended
            .lock_until()
            .format("%Y-%m-%d %H:%M:%S%.3f")
            .to_string()
    );
    assert!(provider.release(&extended, Duration::ZERO).await.unwrap());
}

#[tokio::test]
async fn times_are_utc_from_sqlite_clock() {
    let db = Db::new();
    let provider = db.provider().await;
    let before = chrono::Utc::now();
    let record = provider.acquire("job", MIN, "me").await.unwrap().unwrap();
    let after = chrono::Utc::now();
    // Same host: SQLite's clock is ours (to the millisecond).
    let slack = chrono::Duration::milliseconds(5);
    assert!(record.locked_at() >= before - slack && record.locked_at() <= after + slack);
    assert_eq!(
        record.lock_until() - record.locked_at(),
        chrono::Duration::from_std(MIN).unwrap()
    );
}

#[tokio::test]
async fn an_exhausted_pool_is_a_timeout_not_a_backend_error() {
    let db = Db::new();
    let pool = SqliteLockProvider::pool_options()
        .max_connections(1)
        .min_connections(0)
        .acquire_timeout(Duration::from_millis(200))
        .connect_with(db.options.clone())
        .await
        .unwrap();
    let provider = SqliteLockProvider::builder(pool.clone())
        .call_timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    provider.create_table_if_not_exists().await.unwrap();
    let _only_connection = pool.acquire().await.unwrap();
    let err = provider
        .acquire("starved", MIN, "me")
        .await
        .expect_err("no connection can be had");
    assert!(err.is_timeout(), "{err}");
}

/// `transaction_pooler(true)` (each statement unnamed inside `BEGIN` … `COMMIT`) keeps the
/// contract on SQLite too.
#[tokio::test]
async fn the_conformance_suite_passes_in_transaction_pooler_mode() {
    let db = Db::new();
    let provider = SqliteLockProvider::from_options(db.options.clone())
        .transaction_pooler(true)
        .build()
        .unwrap();
    provider.create_table_if_not_exists().await.unwrap();
    let report = shedlock_core::testkit::ConformanceSuite::new(provider)
        .require_fire_claims(true)
        .run()
        .await;
    assert!(
        report.failed().is_empty() && report.skipped().is_empty(),
        "{report}"
    );
}
