//! Bad input (issue 8, item 5; issue 3, item 8): property tests over lock names, durations and
//! table/column configuration, through real providers (SQLite always; the shared Postgres and
//! MariaDB when their URLs are set). For every input:
//!
//! - it either works or is rejected with [`Error::is_invalid_config`] before any SQL runs, exactly
//!   when an independent oracle says it is invalid; nothing panics;
//! - nothing reaches SQL as text: a lock name is stored and read back **byte for byte** (read
//!   from the table by the acquisition's unique owner, not by the name itself), whatever quotes,
//!   semicolons, backslashes or unicode it holds, and table and column names come out in the
//!   database's catalogue exactly as given;
//! - a valid `at_most` yields a lock of exactly that length, and `at_least` holds it after the
//!   release;
//! - a table configuration the oracle accepts for a database (plain identifiers, distinct
//!   columns, none of the names that database reserves) creates a table whose catalogue lists
//!   exactly the configured names, and locks work on it; one it rejects fails at `build()`. The
//!   only database error tolerated is a schema-qualified table whose schema does not exist
//!   (that is the database's state, not the input's fault).
//!
//! The number of cases per property is `PROPTEST_CASES` where set (proptest's variable).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use shedlock_core::{
    LockConfig, LockingTaskExecutor,
    provider::{LockProvider, MAX_DURATION},
};
use shedlock_sqlx::sqlx::{self, AssertSqlSafe, Row as _};
use shedlock_sqlx::{MySqlLockProvider, PgLockProvider, SqliteLockProvider, testing};
use tokio::runtime::Runtime;

const MAX_NAME: usize = 64;
/// Locks at least this long must work on a local database; shorter ones may expire before the
/// acquire's reply arrives.
const SHORTEST_USABLE: Duration = Duration::from_secs(1);
const MAX_IDENT: usize = 63;

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

fn new_runner(default_cases: u32) -> TestRunner {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_cases);
    TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    })
}

/// An owner id no other case uses, so the stored row can be found without the name.
fn owner() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "prop:{}:{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

// ---------------------------------------------------------------------------------------------
// Oracles, written independently of the code under test.

/// A lock name is valid iff it is not empty, has at most 64 characters, no leading or trailing
/// white space and no NUL.
fn name_is_valid(name: &str, max: usize) -> bool {
    !name.is_empty()
        && name.chars().count() <= max
        && !name.starts_with(char::is_whitespace)
        && !name.ends_with(char::is_whitespace)
        && !name.contains('\0')
}

/// A plain identifier: `[A-Za-z_][A-Za-z0-9_]*`, at most 63 bytes.
fn ident_is_valid(s: &str) -> bool {
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= MAX_IDENT
        && (bytes[0].is_ascii_alphabetic() || bytes[0] == b'_')
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'_')
}

/// The databases, for the names each reserves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Engine {
    Sqlite,
    Postgres,
    MariaDb,
}

impl Engine {
    fn label(self) -> &'static str {
        match self {
            Engine::Sqlite => "SQLite",
            Engine::Postgres => "Postgres",
            Engine::MariaDb => "MariaDB",
        }
    }

    /// Whether this database refuses `column` as a column name of an ordinary table, quoted.
    /// Postgres: its system columns (documented in "System Columns"; `oid` stopped being one in
    /// Postgres 12), matched exactly because a quoted name is case-sensitive. MariaDB/MySQL:
    /// the hidden columns of `InnoDB` tables, in any letter case (MySQL's "`InnoDB` Limits":
    /// `Incorrect column name`).
    fn reserves_column(self, column: &str) -> bool {
        match self {
            Engine::Sqlite => false,
            Engine::Postgres => matches!(
                column,
                "tableoid" | "xmin" | "cmin" | "xmax" | "cmax" | "ctid"
            ),
            Engine::MariaDb => {
                let upper = column.to_ascii_uppercase();
                upper == "DB_ROW_ID" || upper == "DB_TRX_ID" || upper == "DB_ROLL_PTR"
            }
        }
    }

    /// Whether this database refuses `table` (the part after any schema) as a table name.
    /// SQLite: "object name reserved for internal use" for any name starting with `sqlite_`,
    /// compared without regard to ASCII case.
    fn reserves_table(self, table: &str) -> bool {
        self == Engine::Sqlite && table.to_ascii_lowercase().starts_with("sqlite_")
    }
}

/// `table` or `schema.table`.
fn table_is_valid(s: &str) -> bool {
    match s.split_once('.') {
        Some((schema, table)) => ident_is_valid(schema) && ident_is_valid(table),
        None => ident_is_valid(s),
    }
}

/// Durations are valid iff `0 < at_most <= 365 days` and `at_least <= at_most`.
fn durations_are_valid(at_most: Duration, at_least: Duration) -> bool {
    !at_most.is_zero() && at_most <= MAX_DURATION && at_least <= at_most
}

// ---------------------------------------------------------------------------------------------
// Strategies.

/// Names that attack SQL, quoting, encodings and the length limit.
fn names() -> impl Strategy<Value = String> {
    let nasty = prop::sample::select(vec![
        "'",
        "''",
        "\"",
        "`",
        "\\",
        "\\'",
        "%",
        "_",
        "'; DROP TABLE shedlock; --",
        "Robert'); DROP TABLE students;--",
        "x' OR '1'='1",
        "$1",
        "?",
        ":name",
        "NULL",
        "\0",
        "a\0b",
        " a",
        "a ",
        "\ta",
        "a\n",
        "a\nb",
        "ä",
        "🦀",
        "\u{FEFF}bom",
        "e\u{301}",
        "\u{202E}rtl",
        "日本語の名前",
    ])
    .prop_map(str::to_owned);
    prop_oneof![
        any::<String>(),
        "[ -~]{0,70}",
        "\\PC{1,66}",
        prop::collection::vec(any::<char>(), 60..70).prop_map(String::from_iter),
        (0_usize..3).prop_map(|extra| "n".repeat(MAX_NAME - 1 + extra)),
        Just("x".repeat(1000)),
        Just("é".repeat(1000)),
        nasty,
    ]
}

fn durations() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::ZERO),
        (1_u64..5_000).prop_map(Duration::from_millis),
        (1_u64..=400 * 86_400).prop_map(Duration::from_secs),
        Just(MAX_DURATION),
        Just(MAX_DURATION + Duration::from_nanos(1)),
        Just(Duration::MAX),
        any::<u64>().prop_map(Duration::from_nanos),
        (0_u32..1_000_000_000).prop_map(|n| Duration::new(0, n)),
    ]
}

/// Table or column names: mostly plausible identifiers (reserved words, case, length limit),
/// some junk and injection attempts.
fn idents() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[A-Za-z_][A-Za-z0-9_]{0,12}",
        1 => "[A-Za-z_][A-Za-z0-9_]{60,64}",
        1 => prop::sample::select(vec![
            "select", "order", "user", "table", "Name", "NAME", "lock_until", "x1", "_", "__",
        ])
        .prop_map(str::to_owned),
        1 => system_names(),
        1 => prop::sample::select(vec![
            "", "1abc", "a b", "a-b", "a\"b", "a`b", "a'b", "a;b", "é", "a.b", "\0", " x",
            "x; DROP TABLE t; --",
        ])
        .prop_map(str::to_owned),
        1 => any::<String>(),
    ]
}

#[derive(Debug, Clone)]
struct TableConfig {
    schema: Option<String>,
    table: String,
    columns: [String; 5],
}

impl TableConfig {
    fn table_name(&self) -> String {
        match &self.schema {
            Some(schema) => format!("{schema}.{}", self.table),
            None => self.table.clone(),
        }
    }

    /// Valid for `db` iff the table name and every column name are plain identifiers, the
    /// columns differ (ignoring ASCII case: MySQL and SQLite compare column names so), and none
    /// of the names is one `db` reserves.
    fn is_valid(&self, db: Engine) -> bool {
        self.is_plain() && !self.uses_reserved(db)
    }

    /// Plain identifiers and distinct columns, whatever the database.
    fn is_plain(&self) -> bool {
        let distinct = self.columns.iter().enumerate().all(|(i, a)| {
            self.columns[i + 1..]
                .iter()
                .all(|b| !a.eq_ignore_ascii_case(b))
        });
        table_is_valid(&self.table_name())
            && self.columns.iter().all(|c| ident_is_valid(c))
            && distinct
    }

    /// Whether a name is one `db` reserves.
    fn uses_reserved(&self, db: Engine) -> bool {
        let full = self.table_name();
        let table = full.rsplit_once('.').map_or(full.as_str(), |(_, t)| t);
        db.reserves_table(table) || self.columns.iter().any(|c| db.reserves_column(c))
    }

    /// The schema a qualified name refers to, when it is not one of `existing`: a table name
    /// `a.b` (the strategy's `a.b` junk) names schema `a`, which nobody created.
    fn missing_schema(&self, existing: &[String]) -> Option<String> {
        let full = self.table_name();
        let (schema, _) = full.split_once('.')?;
        (!existing.iter().any(|e| e == schema)).then(|| schema.to_owned())
    }

    fn apply<DB: sqlx::Database>(
        &self,
        builder: shedlock_sqlx::LockProviderBuilder<DB>,
    ) -> shedlock_sqlx::LockProviderBuilder<DB> {
        let [name, until, at, by, token] = self.columns.clone();
        builder
            .table(self.table_name())
            .name_column(name)
            .lock_until_column(until)
            .locked_at_column(at)
            .locked_by_column(by)
            .fencing_token_column(token)
    }
}

/// Plain identifiers (case, reserved words, the length limit), now and then one that a
/// database keeps for itself (or that looks like one but is not: `XMIN`, `DB_MIX_ID`, …).
fn plain_idents() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => "[A-Za-z_][A-Za-z0-9_]{0,12}",
        2 => "[A-Za-z_][A-Za-z0-9_]{58,62}",
        2 => prop::sample::select(vec![
            "select", "order", "user", "table", "Name", "lock_until", "x1", "_", "__", "Ä_not",
        ])
        .prop_map(|s| s.replace('Ä', "A")),
        1 => system_names(),
    ]
}

/// Names some database reserves, and near misses.
fn system_names() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "xmin",
        "ctid",
        "tableoid",
        "cmax",
        "XMIN",
        "Ctid",
        "oid",
        "db_row_id",
        "DB_TRX_ID",
        "Db_Roll_Ptr",
        "DB_MIX_ID",
        "sqlite_x",
        "SQLITE_locks",
        "Sqlite_",
        "sqlitex",
    ])
    .prop_map(str::to_owned)
}

/// Table configurations; `schemas` are the schema names that exist for this database. Half are
/// built from valid identifiers only (so that many cases reach the database), half from
/// anything.
fn table_configs(schemas: Vec<String>) -> impl Strategy<Value = TableConfig> {
    let schema = prop_oneof![
        4 => Just(None),
        1 => prop::sample::select(schemas).prop_map(Some),
        1 => idents().prop_map(|s| Some(format!("{s}x").replace(['.'], "_") + "!")),
    ];
    let table = prop_oneof![8 => plain_idents(), 1 => system_names()];
    let valid_parts = (table, prop::array::uniform5(plain_idents()));
    let any_parts = (idents(), prop::array::uniform5(idents()));
    let parts = prop_oneof![valid_parts, any_parts];
    (schema, parts).prop_map(|(schema, (table, columns))| TableConfig {
        schema,
        table,
        columns,
    })
}

// ---------------------------------------------------------------------------------------------
// The stores.

/// A provider and a way to read a row back by owner (the name as stored, bytes).
#[derive(Clone)]
enum Store {
    Sqlite(SqliteLockProvider, sqlx::SqlitePool, String),
    Pg(PgLockProvider, sqlx::PgPool, String),
    My(MySqlLockProvider, sqlx::MySqlPool, String),
}

impl Store {
    fn provider(&self) -> &dyn LockProvider {
        match self {
            Store::Sqlite(p, ..) => p,
            Store::Pg(p, ..) => p,
            Store::My(p, ..) => p,
        }
    }

    fn label(&self) -> &'static str {
        match self {
            Store::Sqlite(..) => "SQLite",
            Store::Pg(..) => "Postgres",
            Store::My(..) => "MariaDB",
        }
    }

    /// The names stored for `owner`, as the database returns them (bytes, not compared in SQL).
    async fn names_of(&self, owner: &str) -> Vec<Vec<u8>> {
        match self {
            Store::Sqlite(_, pool, table) => {
                let sql = format!("SELECT CAST(name AS BLOB) FROM \"{table}\" WHERE locked_by = ?");
                sqlx::query_scalar(AssertSqlSafe(sql))
                    .bind(owner)
                    .fetch_all(pool)
                    .await
                    .expect("read back")
            }
            Store::Pg(_, pool, table) => {
                let sql = format!(
                    "SELECT convert_to(name, 'UTF8') FROM \"{table}\" WHERE locked_by = $1"
                );
                sqlx::query_scalar(AssertSqlSafe(sql))
                    .bind(owner)
                    .fetch_all(pool)
                    .await
                    .expect("read back")
            }
            Store::My(_, pool, table) => {
                let sql = format!("SELECT CAST(name AS BINARY) FROM `{table}` WHERE locked_by = ?");
                sqlx::query_scalar(AssertSqlSafe(sql))
                    .bind(owner)
                    .fetch_all(pool)
                    .await
                    .expect("read back")
            }
        }
    }

    async fn drop_table(&self) {
        let result = match self {
            Store::Sqlite(..) => Ok(()),
            Store::Pg(_, pool, table) => {
                sqlx::query(AssertSqlSafe(format!("DROP TABLE IF EXISTS \"{table}\"")))
                    .execute(pool)
                    .await
                    .map(drop)
            }
            Store::My(_, pool, table) => {
                sqlx::query(AssertSqlSafe(format!("DROP TABLE IF EXISTS `{table}`")))
                    .execute(pool)
                    .await
                    .map(drop)
            }
        };
        if let Err(error) = result {
            eprintln!("could not drop a test table: {error}");
        }
    }
}

async fn sqlite_store(dir: &tempfile::TempDir) -> Store {
    let url = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("names.db").display()
    );
    let pool = SqliteLockProvider::pool_options()
        .connect(&url)
        .await
        .expect("open SQLite");
    let table = testing::unique_table_name("prop_names");
    let p = SqliteLockProvider::builder(pool.clone())
        .table(&table)
        .build()
        .expect("valid settings");
    p.create_table_if_not_exists().await.expect("create");
    Store::Sqlite(p, pool, table)
}

async fn stores(dir: &tempfile::TempDir) -> Vec<Store> {
    let mut stores = vec![sqlite_store(dir).await];
    if let Some(url) = testing::postgres_url() {
        let pool = PgLockProvider::pool_options()
            .connect(&url)
            .await
            .expect("connect to Postgres");
        let table = testing::unique_table_name("prop_names");
        let p = PgLockProvider::builder(pool.clone())
            .table(&table)
            .build()
            .expect("valid settings");
        p.create_table_if_not_exists().await.expect("create");
        stores.push(Store::Pg(p, pool, table));
    }
    if let Some(url) = testing::mysql_url() {
        let pool = MySqlLockProvider::pool_options()
            .connect(&url)
            .await
            .expect("connect to MariaDB");
        let table = testing::unique_table_name("prop_names");
        let p = MySqlLockProvider::builder(pool.clone())
            .table(&table)
            .build()
            .expect("valid settings");
        p.create_table_if_not_exists().await.expect("create");
        stores.push(Store::My(p, pool, table));
    }
    stores
}

fn fail(message: String) -> TestCaseError {
    TestCaseError::fail(message)
}

// ---------------------------------------------------------------------------------------------
// Properties.

/// One name through one store: validation exactly per the oracle (config and store agree); a
/// valid name is acquired, stored byte for byte, seen by `holder`, released.
async fn check_name(store: &Store, name: &str) -> Result<(), TestCaseError> {
    let db = store.label();
    let valid = name_is_valid(name, MAX_NAME);
    let cfg = LockConfig::new(name, Duration::from_secs(30));
    if cfg.is_ok() != valid {
        return Err(fail(format!(
            "LockConfig accepted={} for {name:?}",
            cfg.is_ok()
        )));
    }
    if let Err(error) = &cfg
        && !error.is_invalid_config()
    {
        return Err(fail(format!("{name:?}: not a validation error: {error:?}")));
    }
    let p = store.provider();
    let owner = owner();
    // The store checks names itself too, before any SQL (callers may bypass LockConfig).
    match p.acquire(name, Duration::from_secs(30), &owner).await {
        Err(error) if !valid && error.is_invalid_config() => {
            if !store.names_of(&owner).await.is_empty() {
                return Err(fail(format!("{db}: a rejected name {name:?} was stored")));
            }
            Ok(())
        }
        Err(error) => Err(fail(format!(
            "{db}: {name:?} (valid: {valid}) failed: {error:?}"
        ))),
        Ok(_) if !valid => Err(fail(format!(
            "{db}: the invalid name {name:?} was accepted"
        ))),
        Ok(None) => Err(fail(format!("{db}: {name:?} is held by someone else"))),
        Ok(Some(record)) => {
            let stored = store.names_of(&owner).await;
            if stored != [name.as_bytes().to_vec()] {
                return Err(fail(format!(
                    "{db}: stored {:?} for {name:?}",
                    stored
                        .iter()
                        .map(|b| String::from_utf8_lossy(b).into_owned())
                        .collect::<Vec<_>>()
                )));
            }
            if record.name() != name {
                return Err(fail(format!("{db}: the record names {:?}", record.name())));
            }
            let holder = p
                .holder(name)
                .await
                .map_err(|e| fail(format!("{db}: holder({name:?}): {e:?}")))?;
            if holder
                .as_ref()
                .map(shedlock_core::provider::LockRecord::owner)
                != Some(owner.as_str())
            {
                return Err(fail(format!("{db}: holder({name:?}) = {holder:?}")));
            }
            let released = p
                .release(&record, Duration::ZERO)
                .await
                .map_err(|e| fail(format!("{db}: release({name:?}): {e:?}")))?;
            if !released {
                return Err(fail(format!("{db}: release({name:?}) found the lock gone")));
            }
            Ok(())
        }
    }
}

#[test]
fn any_lock_name_works_or_is_rejected_and_is_stored_byte_for_byte() {
    let rt = runtime();
    let dir = tempfile::tempdir().expect("a temp dir");
    let stores = rt.block_on(stores(&dir));
    let started = std::time::Instant::now();
    let mut runner = new_runner(512);
    let result = runner.run(&names(), |name| {
        rt.block_on(async {
            for store in &stores {
                check_name(store, &name).await?;
            }
            Ok(())
        })
    });
    rt.block_on(async {
        for store in &stores {
            store.drop_table().await;
        }
    });
    if let Err(error) = result {
        panic!("{error}");
    }
    eprintln!(
        "names: {} cases on {:?} in {:?}",
        runner.config().cases,
        stores.iter().map(Store::label).collect::<Vec<_>>(),
        started.elapsed()
    );
}

/// One pair of durations through the executor: validation exactly per the oracle; a valid
/// `at_most` gives a lock of that length (store clock), `at_least` keeps it after release.
async fn check_durations(
    store: &Store,
    at_most: Duration,
    at_least: Duration,
) -> Result<(), TestCaseError> {
    let db = store.label();
    let valid = durations_are_valid(at_most, at_least);
    let name = testing::unique_lock_name("prop-dur");
    let cfg = LockConfig::builder(&name)
        .at_most(at_most)
        .at_least(at_least)
        .build();
    let cfg = match (cfg, valid) {
        (Ok(cfg), true) => cfg,
        (Err(error), false) if error.is_invalid_config() => return Ok(()),
        (outcome, _) => {
            return Err(fail(format!(
                "at_most {at_most:?}, at_least {at_least:?} (valid: {valid}): {outcome:?}"
            )));
        }
    };
    let executor = LockingTaskExecutor::builder(store.provider_arc())
        .owner_id(owner())
        .build()
        .map_err(|e| fail(format!("executor: {e:?}")))?;
    let guard = match executor.try_lock(&cfg).await {
        Ok(Some(guard)) => guard,
        Ok(None) => return Err(fail(format!("{db}: a fresh lock was held"))),
        // A lock shorter than the round trip has expired before its reply arrives: the
        // executor refuses to run under it (a timeout), rightly. Anything longer must work.
        Err(error) if error.is_timeout() && at_most < SHORTEST_USABLE => return Ok(()),
        Err(error) => return Err(fail(format!("{db}: try_lock({at_most:?}): {error:?}"))),
    };
    let record = guard.handle().record();
    let length = (record.lock_until() - record.locked_at())
        .to_std()
        .map_err(|e| fail(format!("{db}: negative lock length: {e}")))?;
    // Stores keep microseconds (MariaDB: milliseconds) and round up.
    let tolerance = Duration::from_millis(1);
    if length < at_most || length > at_most + tolerance {
        return Err(fail(format!(
            "{db}: asked for {at_most:?}, the lock lasts {length:?}"
        )));
    }
    guard
        .release()
        .await
        .map_err(|e| fail(format!("{db}: release: {e:?}")))?;
    let held = store
        .provider()
        .holder(&name)
        .await
        .map_err(|e| fail(format!("{db}: holder: {e:?}")))?;
    if at_least >= Duration::from_secs(5) && held.is_none() {
        return Err(fail(format!(
            "{db}: at_least {at_least:?} did not keep the lock after release"
        )));
    }
    if at_least.is_zero() && held.is_some() {
        return Err(fail(format!("{db}: released with at_least 0, still held")));
    }
    Ok(())
}

impl Store {
    fn provider_arc(&self) -> std::sync::Arc<dyn LockProvider> {
        match self {
            Store::Sqlite(p, ..) => std::sync::Arc::new(p.clone()),
            Store::Pg(p, ..) => std::sync::Arc::new(p.clone()),
            Store::My(p, ..) => std::sync::Arc::new(p.clone()),
        }
    }
}

#[test]
fn any_durations_work_or_are_rejected() {
    let rt = runtime();
    let dir = tempfile::tempdir().expect("a temp dir");
    let stores = rt.block_on(stores(&dir));
    let started = std::time::Instant::now();
    let mut runner = new_runner(256);
    let result = runner.run(&(durations(), durations()), |(at_most, at_least)| {
        rt.block_on(async {
            for store in &stores {
                check_durations(store, at_most, at_least).await?;
                // The provider called directly with any duration (no executor to validate it)
                // must not panic: it answers, or fails with an error.
                let name = testing::unique_lock_name("prop-raw");
                let _ = store.provider().acquire(&name, at_most, "raw").await;
            }
            Ok(())
        })
    });
    rt.block_on(async {
        for store in &stores {
            store.drop_table().await;
        }
    });
    if let Err(error) = result {
        panic!("{error}");
    }
    eprintln!(
        "durations: {} cases on {:?} in {:?}",
        runner.config().cases,
        stores.iter().map(Store::label).collect::<Vec<_>>(),
        started.elapsed()
    );
}

/// The columns of `table` as the catalogue lists them.
async fn sqlite_columns(pool: &sqlx::SqlitePool, config: &TableConfig) -> Vec<String> {
    let schema = config.schema.as_deref().unwrap_or("main");
    sqlx::query("SELECT name FROM pragma_table_info(?1, ?2)")
        .bind(&config.table)
        .bind(schema)
        .fetch_all(pool)
        .await
        .expect("read the catalogue")
        .iter()
        .map(|row| row.get::<String, _>(0))
        .collect()
}

async fn pg_columns(pool: &sqlx::PgPool, schema: &str, config: &TableConfig) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT column_name::text FROM information_schema.columns \
         WHERE table_schema = $1 AND table_name = $2",
    )
    .bind(config.schema.as_deref().unwrap_or(schema))
    .bind(&config.table)
    .fetch_all(pool)
    .await
    .expect("read the catalogue")
}

async fn mariadb_columns(
    pool: &sqlx::MySqlPool,
    database: &str,
    config: &TableConfig,
) -> Vec<String> {
    // `BINARY`: table names are case-sensitive here, the catalogue's collation is not.
    sqlx::query_scalar(
        "SELECT CAST(column_name AS CHAR) FROM information_schema.columns \
         WHERE table_schema = ? AND BINARY table_name = ?",
    )
    .bind(config.schema.as_deref().unwrap_or(database))
    .bind(&config.table)
    .fetch_all(pool)
    .await
    .expect("read the catalogue")
}

/// Whether `error` (with its sources) says that schema `schema` does not exist: Postgres
/// `schema "a" does not exist` (sqlx adds ` at line N`), SQLite `unknown database "a"`,
/// MariaDB `Unknown database 'a'` (compared without quotes and case, as whole words).
fn names_missing_schema(error: &shedlock_core::Error, schema: &str) -> bool {
    let mut text = String::new();
    let mut next: Option<&dyn std::error::Error> = Some(error);
    while let Some(e) = next {
        text.push_str(&e.to_string());
        text.push('\n');
        next = e.source();
    }
    let text = text.to_lowercase().replace(['"', '\'', '`'], "");
    let schema = schema.to_lowercase();
    let says = |phrase: String| {
        text.match_indices(&phrase).any(|(at, _)| {
            !text[at + phrase.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
        })
    };
    says(format!("schema {schema} does not exist")) || says(format!("unknown database {schema}"))
}

/// A configuration works (the table is created with exactly these names and locks work on it)
/// or is rejected as invalid at `build()`, exactly when the oracle says it is invalid for `db`.
/// `schemas` are the schemas that exist.
async fn check_config<DB: sqlx::Database>(
    db: Engine,
    schemas: &[String],
    config: &TableConfig,
    builder: shedlock_sqlx::LockProviderBuilder<DB>,
    build: impl FnOnce(
        shedlock_sqlx::LockProviderBuilder<DB>,
    ) -> shedlock_core::Result<std::sync::Arc<dyn LockProvider>>,
    create: impl AsyncFnOnce() -> shedlock_core::Result<()>,
    columns: impl AsyncFnOnce() -> Vec<String>,
) -> Result<bool, TestCaseError> {
    let valid = config.is_valid(db);
    let db = db.label();
    let provider = match (build(config.apply(builder)), valid) {
        (Ok(p), true) => p,
        (Err(e), false) if e.is_invalid_config() => return Ok(false),
        (Err(e), _) => return Err(fail(format!("{db}: {config:?} (valid: {valid}): {e:?}"))),
        (Ok(_), false) => return Err(fail(format!("{db}: accepted the invalid {config:?}"))),
    };
    if let Err(error) = create().await {
        // Every name the database refuses is refused by validation; the one thing it cannot
        // know is whether a schema exists. `a.b` is a valid schema-qualified name whose schema
        // `a` was never created: a database error naming it.
        if let Some(schema) = config.missing_schema(schemas)
            && error.is_backend()
            && names_missing_schema(&error, &schema)
        {
            return Ok(false);
        }
        return Err(fail(format!(
            "{db}: create table for {config:?}: {error:?}"
        )));
    }
    let mut listed = columns().await;
    listed.sort();
    // Our DDL adds the recorded fire's column, the job state's, the pause's and last action's, and
    // the trigger's columns under their own fixed names.
    let mut expected = config.columns.to_vec();
    expected.extend(
        [
            "last_fire",
            "last_run_fire",
            "last_run_by",
            "last_run_started",
            "last_run_ended",
            "last_run_outcome",
            "last_run_error",
            "last_success",
            "consecutive_failures",
            "paused_at",
            "paused_until",
            "paused_by",
            "paused_reason",
            "last_action",
            "last_action_by",
            "last_action_at",
            "trigger_id",
            "trigger_at",
            "trigger_expires",
            "trigger_by",
            "trigger_taken_by",
            "trigger_taken_at",
        ]
        .map(str::to_owned),
    );
    expected.sort();
    if listed != expected {
        return Err(fail(format!("{db}: {config:?} created columns {listed:?}")));
    }
    let owner = owner();
    let record = provider
        .acquire("config-check", Duration::from_secs(30), &owner)
        .await
        .map_err(|e| fail(format!("{db}: acquire on {config:?}: {e:?}")))?
        .ok_or_else(|| fail(format!("{db}: a fresh table held the lock")))?;
    if record.fencing_token().is_none() {
        return Err(fail(format!("{db}: no fencing token on {config:?}")));
    }
    let again = provider
        .acquire("config-check", Duration::from_secs(30), "other")
        .await
        .map_err(|e| fail(format!("{db}: second acquire: {e:?}")))?;
    if again.is_some() {
        return Err(fail(format!("{db}: {config:?}: the lock was taken twice")));
    }
    let released = provider
        .release(&record, Duration::ZERO)
        .await
        .map_err(|e| fail(format!("{db}: release: {e:?}")))?;
    if !released {
        return Err(fail(format!("{db}: {config:?}: release did not act")));
    }
    Ok(true)
}

#[test]
fn any_table_configuration_works_or_is_rejected_on_sqlite() {
    let rt = runtime();
    let dir = tempfile::tempdir().expect("a temp dir");
    let started = std::time::Instant::now();
    // A fresh database file per case, so every valid name can be created.
    let case = AtomicU64::new(0);
    let created = AtomicU64::new(0);
    let reserved = AtomicU64::new(0);
    let mut runner = new_runner(256);
    let schemas = vec!["main".to_owned()];
    let result = runner.run(&table_configs(schemas.clone()), |config| {
        rt.block_on(async {
            let n = case.fetch_add(1, Ordering::Relaxed);
            let url = format!(
                "sqlite://{}?mode=rwc",
                dir.path().join(format!("c{n}.db")).display()
            );
            let pool = SqliteLockProvider::pool_options()
                .connect(&url)
                .await
                .expect("open SQLite");
            let built = std::sync::OnceLock::new();
            let outcome = check_config(
                Engine::Sqlite,
                &schemas,
                &config,
                SqliteLockProvider::builder(pool.clone()),
                |b| {
                    let p = b.build()?;
                    let _ = built.set(p.clone());
                    Ok(std::sync::Arc::new(p))
                },
                async || match built.get() {
                    Some(p) => p.create_table_if_not_exists().await,
                    None => Ok(()),
                },
                async || sqlite_columns(&pool, &config).await,
            )
            .await;
            pool.close().await;
            if outcome? {
                created.fetch_add(1, Ordering::Relaxed);
            } else if config.is_plain() && config.uses_reserved(Engine::Sqlite) {
                reserved.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        })
    });
    if let Err(error) = result {
        panic!("{error}");
    }
    eprintln!(
        "table configuration: {} cases on SQLite ({} valid ones created and used, {} \
         refused for a reserved name) in {:?}",
        runner.config().cases,
        created.load(Ordering::Relaxed),
        reserved.load(Ordering::Relaxed),
        started.elapsed()
    );
}

#[test]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
fn any_table_configuration_works_or_is_rejected_on_postgres() {
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let rt = runtime();
    let started = std::time::Instant::now();
    // A schema of this run's own; unqualified tables land there (search_path).
    let schema = testing::unique_table_name("prop_schema");
    let admin = rt
        .block_on(sqlx::PgPool::connect(&url))
        .expect("connect to Postgres");
    rt.block_on(sqlx::query(AssertSqlSafe(format!("CREATE SCHEMA \"{schema}\""))).execute(&admin))
        .expect("create a schema");
    let options: sqlx::postgres::PgConnectOptions = url.parse().expect("a Postgres URL");
    let options = options.options([("search_path", schema.as_str())]);
    let pool = rt
        .block_on(PgLockProvider::pool_options().connect_with(options))
        .expect("connect to Postgres");
    let created = AtomicU64::new(0);
    let reserved = AtomicU64::new(0);
    let mut runner = new_runner(96);
    let schemas = vec![schema.clone()];
    let result = runner.run(&table_configs(schemas.clone()), |config| {
        rt.block_on(async {
            let built = std::sync::OnceLock::new();
            let outcome = check_config(
                Engine::Postgres,
                &schemas,
                &config,
                PgLockProvider::builder(pool.clone()),
                |b| {
                    let p = b.build()?;
                    let _ = built.set(p.clone());
                    Ok(std::sync::Arc::new(p))
                },
                async || match built.get() {
                    Some(p) => p.create_table_if_not_exists().await,
                    None => Ok(()),
                },
                async || pg_columns(&pool, &schema, &config).await,
            )
            .await;
            // The next case starts without this table (names may repeat).
            if config.is_valid(Engine::Postgres) && !config.table.contains('.') {
                let table = format!(
                    "\"{}\".\"{}\"",
                    config.schema.as_deref().unwrap_or(&schema),
                    config.table
                );
                let _ = sqlx::query(AssertSqlSafe(format!("DROP TABLE IF EXISTS {table}")))
                    .execute(&pool)
                    .await;
            }
            if outcome? {
                created.fetch_add(1, Ordering::Relaxed);
            } else if config.is_plain() && config.uses_reserved(Engine::Postgres) {
                reserved.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        })
    });
    rt.block_on(
        sqlx::query(AssertSqlSafe(format!("DROP SCHEMA \"{schema}\" CASCADE"))).execute(&admin),
    )
    .expect("drop the schema");
    if let Err(error) = result {
        panic!("{error}");
    }
    eprintln!(
        "table configuration: {} cases on Postgres ({} valid ones created and used, {} \
         refused for a reserved name) in {:?}",
        runner.config().cases,
        created.load(Ordering::Relaxed),
        reserved.load(Ordering::Relaxed),
        started.elapsed()
    );
}

#[test]
#[cfg_attr(not(shedlock_mysql), ignore = "needs SHEDLOCK_MYSQL_URL (MySQL)")]
fn any_table_configuration_works_or_is_rejected_on_mariadb() {
    let Some(url) = testing::mysql_url() else {
        return;
    };
    let rt = runtime();
    let started = std::time::Instant::now();
    // A database of this run's own; unqualified tables land there (the pool's default).
    let database = testing::unique_table_name("prop_db");
    let admin = rt
        .block_on(sqlx::MySqlPool::connect(&url))
        .expect("connect to MariaDB");
    rt.block_on(
        sqlx::query(AssertSqlSafe(format!("CREATE DATABASE `{database}`"))).execute(&admin),
    )
    .expect("create a database");
    let options: sqlx::mysql::MySqlConnectOptions = url.parse().expect("a MySQL URL");
    let pool = rt
        .block_on(MySqlLockProvider::pool_options().connect_with(options.database(&database)))
        .expect("connect to MariaDB");
    let created = AtomicU64::new(0);
    let reserved = AtomicU64::new(0);
    // Each case creates and drops an InnoDB table: 96 cases take two or three seconds.
    let mut runner = new_runner(96);
    let schemas = vec![database.clone()];
    let result = runner.run(&table_configs(schemas.clone()), |config| {
        rt.block_on(async {
            let built = std::sync::OnceLock::new();
            let outcome = check_config(
                Engine::MariaDb,
                &schemas,
                &config,
                MySqlLockProvider::builder(pool.clone()),
                |b| {
                    let p = b.build()?;
                    let _ = built.set(p.clone());
                    Ok(std::sync::Arc::new(p))
                },
                async || match built.get() {
                    Some(p) => p.create_table_if_not_exists().await,
                    None => Ok(()),
                },
                async || mariadb_columns(&pool, &database, &config).await,
            )
            .await;
            // The next case starts without this table (names may repeat).
            if config.is_valid(Engine::MariaDb) && config.missing_schema(&schemas).is_none() {
                let table = format!(
                    "`{}`.`{}`",
                    config.schema.as_deref().unwrap_or(&database),
                    config.table
                );
                let _ = sqlx::query(AssertSqlSafe(format!("DROP TABLE IF EXISTS {table}")))
                    .execute(&pool)
                    .await;
            }
            if outcome? {
                created.fetch_add(1, Ordering::Relaxed);
            } else if config.is_plain() && config.uses_reserved(Engine::MariaDb) {
                reserved.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        })
    });
    rt.block_on(pool.close());
    rt.block_on(sqlx::query(AssertSqlSafe(format!("DROP DATABASE `{database}`"))).execute(&admin))
        .expect("drop the database");
    if let Err(error) = result {
        panic!("{error}");
    }
    eprintln!(
        "table configuration: {} cases on MariaDB ({} valid ones created and used, {} \
         refused for a reserved name) in {:?}",
        runner.config().cases,
        created.load(Ordering::Relaxed),
        reserved.load(Ordering::Relaxed),
        started.elapsed()
    );
}

#[test]
fn oracles_agree_with_plain_examples() {
    assert!(name_is_valid("report-eu", MAX_NAME));
    assert!(!name_is_valid("", MAX_NAME));
    assert!(!name_is_valid(" a", MAX_NAME));
    assert!(!name_is_valid(&"n".repeat(65), MAX_NAME));
    assert!(name_is_valid(&"é".repeat(64), MAX_NAME));
    assert!(ident_is_valid("shedlock"));
    assert!(!ident_is_valid("1x"));
    assert!(!ident_is_valid(&"a".repeat(64)));
    assert!(table_is_valid("ops.locks"));
    assert!(!table_is_valid("a.b.c"));
    let config = |table: &str, column: &str| TableConfig {
        schema: None,
        table: table.to_owned(),
        columns: [column, "b", "c", "d", "e"].map(str::to_owned),
    };
    for db in [Engine::Sqlite, Engine::Postgres, Engine::MariaDb] {
        assert!(config("locks", "a").is_valid(db));
        assert!(config("locks", "XMIN").is_valid(db));
        assert!(config("locks", "oid").is_valid(db));
        assert!(config("locks", "DB_MIX_ID").is_valid(db));
        assert!(config("sqlitex", "a").is_valid(db));
        assert!(config("my_sqlite_x", "a").is_valid(db));
        assert!(
            !config("locks", "B").is_valid(db),
            "columns differ only in case"
        );
    }
    assert!(!config("locks", "xmin").is_valid(Engine::Postgres));
    assert!(!config("locks", "tableoid").is_valid(Engine::Postgres));
    assert!(config("locks", "xmin").is_valid(Engine::MariaDb));
    assert!(config("locks", "xmin").is_valid(Engine::Sqlite));
    assert!(!config("locks", "db_row_id").is_valid(Engine::MariaDb));
    assert!(!config("locks", "Db_Roll_Ptr").is_valid(Engine::MariaDb));
    assert!(config("locks", "db_row_id").is_valid(Engine::Postgres));
    assert!(!config("sqlite_x", "a").is_valid(Engine::Sqlite));
    assert!(!config("SQLite_", "a").is_valid(Engine::Sqlite));
    assert!(!config("main.Sqlite_x", "a").is_valid(Engine::Sqlite));
    assert!(config("sqlite_x", "a").is_valid(Engine::Postgres));
    assert!(config("sqlite_x", "a").is_valid(Engine::MariaDb));
    assert_eq!(
        config("a.b", "a").missing_schema(&["main".to_owned()]),
        Some("a".to_owned())
    );
    assert_eq!(
        config("main.b", "a").missing_schema(&["main".to_owned()]),
        None
    );
    assert_eq!(config("b", "a").missing_schema(&[]), None);
    assert!(durations_are_valid(Duration::from_secs(1), Duration::ZERO));
    assert!(!durations_are_valid(Duration::ZERO, Duration::ZERO));
    assert!(!durations_are_valid(
        Duration::from_secs(1),
        Duration::from_secs(2)
    ));
}
