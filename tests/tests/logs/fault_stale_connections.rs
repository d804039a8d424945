//! Dead pooled connections cost lock callers no failed calls.
//!
//! After a database restart every idle connection in a provider's pool is dead, and each would
//! fail its next statement. shedlock-sqlx closes such a connection and runs the call again on
//! another one, within the call's deadline; these tests warm a provider's pool to its 4
//! connections, kill them all, and then check that every following call succeeds with the right
//! answer, and that the retries really happened (each dead connection was met once and closed,
//! counted from the provider's log):
//!
//! - private Postgres and MariaDB servers (`Throwaway`), restarted in immediate mode (Postgres
//!   `pg_ctl -m immediate`, MariaDB `SIGKILL`) and cleanly (Postgres `-m fast`, MariaDB
//!   `SIGTERM`); calls one after another (as a leader's renewals) and 4 at once; and a call made
//!   while the server is down, which waits for it;
//! - the shared servers, whose connections are killed one by one (`pg_terminate_backend`,
//!   `KILL`): the database's own farewell ("terminating connection due to administrator
//!   command", "Connection was killed") is what the calls meet there.
//!
//! The private-server tests need the database binaries (skipped without them unless
//! `SHEDLOCK_REQUIRE_DB=1`); the shared-server ones need `SHEDLOCK_PG_URL` /
//! `SHEDLOCK_MYSQL_URL`.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use shedlock_core::LockProvider;
use shedlock_sqlx::{MySqlLockProvider, PgLockProvider, sqlx, testing};
use shedlock_tests::log_capture::LogCapture;
use shedlock_tests::throwaway::Throwaway;
use sqlx::Connection as _;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// The provider's pool size (`pool_options()`'s default).
const POOL: u32 = 4;
const OWNER: &str = "stale-connections-test";
const AT_MOST: Duration = Duration::from_mins(1);
/// The provider's call timeout: the default (5 s), long enough for a restart to be over.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the pool may take to take its connections back (a background ping each).
const SETTLE: Duration = Duration::from_secs(10);

/// What the provider logs at info level, captured for this test's thread.
struct Log(LogCapture);

impl Log {
    /// Captures this thread's events (the tests run on a current-thread runtime, so the
    /// provider's calls log here) until the guard is dropped.
    fn capture() -> (Self, tracing::subscriber::DefaultGuard) {
        let (log, guard) = LogCapture::capture(tracing::Level::INFO);
        (Self(log), guard)
    }

    /// The provider's "connection lost; trying again" lines so far.
    fn retries(&self) -> Vec<String> {
        self.0
            .text()
            .lines()
            .filter(|l| l.contains("lock-store connection") && l.contains("trying again"))
            .map(str::to_owned)
            .collect()
    }
}

/// Polls `done` every 10 ms until it holds; fails the test after `within`.
async fn wait_until(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "{what} did not happen within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Checks out all of `pool`'s connections at once, runs `id` on each (which also proves it
/// works), gives them back and waits until all are idle. Returns the ids.
async fn warm<DB, T, F>(pool: &sqlx::Pool<DB>, mut id: F) -> Vec<T>
where
    DB: sqlx::Database,
    F: AsyncFnMut(&mut DB::Connection) -> T,
{
    let mut held = Vec::new();
    for _ in 0..POOL {
        held.push(pool.acquire().await.expect("a pooled connection"));
    }
    let mut ids = Vec::new();
    for conn in &mut held {
        conn.ping().await.expect("a live connection");
        ids.push(id(conn).await);
    }
    drop(held);
    wait_until("the pool to hold its warm connections idle", SETTLE, || {
        pool.size() == POOL && pool.num_idle() == POOL as usize
    })
    .await;
    ids
}

/// Acquire, extend, release and read each of `names`, one call after another (as a leader's
/// renewals come): every call must succeed with the right answer. Returns how long the first
/// call took.
async fn calls_in_a_row(provider: &dyn LockProvider, names: &[String]) -> Duration {
    let started = Instant::now();
    let mut first = None;
    for name in names {
        let record = provider
            .acquire(name, AT_MOST, OWNER)
            .await
            .unwrap_or_else(|e| panic!("acquire {name}: {e}"))
            .unwrap_or_else(|| panic!("{name} is free"));
        first.get_or_insert(started.elapsed());
        let extended = provider
            .extend(&record, AT_MOST)
            .await
            .unwrap_or_else(|e| panic!("extend {name}: {e}"))
            .unwrap_or_else(|| panic!("{name} is still ours"));
        assert_eq!(extended.fencing_token(), record.fencing_token());
        let released = provider
            .release(&extended, Duration::ZERO)
            .await
            .unwrap_or_else(|e| panic!("release {name}: {e}"));
        assert!(released, "{name} was ours to release");
        let holder = provider
            .holder(name)
            .await
            .unwrap_or_else(|e| panic!("holder {name}: {e}"));
        assert!(holder.is_none(), "{name} was released: {holder:?}");
    }
    first.unwrap_or_default()
}

/// `names.len()` acquires at once, then an extend and a release of each, one after another.
async fn calls_at_once(provider: &Arc<dyn LockProvider>, names: &[String]) {
    let mut acquires = JoinSet::new();
    for name in names {
        let (provider, name) = (provider.clone(), name.clone());
        acquires.spawn(async move {
            let outcome = provider.acquire(&name, AT_MOST, OWNER).await;
            (name, outcome)
        });
    }
    let mut records = Vec::new();
    while let Some(joined) = acquires.join_next().await {
        let (name, outcome) = joined.expect("the acquire task");
        let record = outcome
            .unwrap_or_else(|e| panic!("acquire {name}: {e}"))
            .unwrap_or_else(|| panic!("{name} is free"));
        records.push(record);
    }
    for record in records {
        let name = record.name().to_owned();
        let extended = provider
            .extend(&record, AT_MOST)
            .await
            .unwrap_or_else(|e| panic!("extend {name}: {e}"))
            .unwrap_or_else(|| panic!("{name} is still ours"));
        assert!(
            provider
                .release(&extended, Duration::ZERO)
                .await
                .unwrap_or_else(|e| panic!("release {name}: {e}")),
            "{name} was ours to release"
        );
    }
}

fn names(prefix: &str, n: u32) -> Vec<String> {
    (0..n)
        .map(|i| testing::unique_lock_name(&format!("{prefix}{i}")))
        .collect()
}

/// Asserts that the calls since `before` met each of the `POOL` dead connections exactly once
/// (and, through the bound on attempts, that none was offered twice), and returns what sqlx
/// reported for them.
fn assert_each_dead_connection_met_once(log: &Log, before: usize, scenario: &str) -> Vec<String> {
    let retries = log.retries();
    let new = retries.get(before..).unwrap_or_default().to_vec();
    assert_eq!(
        new.len(),
        POOL as usize,
        "{scenario}: expected one retry per dead connection ({POOL}); the log says:\n{}",
        new.join("\n")
    );
    new
}

/// The part of a retry line that says what failed.
fn error_of(line: &str) -> &str {
    line.split_once("error=").map_or(line, |(_, e)| e)
}

/// One scenario on a private server: warm the pool, `outage`, then calls (in a row, or at once)
/// that must all succeed, each dead connection met once.
async fn after_outage<DB: sqlx::Database>(
    scenario: &str,
    provider: &Arc<dyn LockProvider>,
    pool: &sqlx::Pool<DB>,
    log: &Log,
    outage: impl Future<Output = io::Result<()>>,
    at_once: bool,
) {
    warm(pool, async |_| ()).await;
    let before = log.retries().len();
    let began = Instant::now();
    outage.await.unwrap_or_else(|e| panic!("{scenario}: {e}"));
    let outage_took = began.elapsed();
    assert_eq!(
        pool.size(),
        POOL,
        "the pool does not know its connections died"
    );
    let names = names("stale", POOL);
    let first_call = if at_once {
        let started = Instant::now();
        calls_at_once(provider, &names).await;
        started.elapsed()
    } else {
        calls_in_a_row(&**provider, &names).await
    };
    let met = assert_each_dead_connection_met_once(log, before, scenario);
    eprintln!(
        "{scenario}: outage {outage_took:?}; {} calls, none failed; first call {first_call:?} \
         (reconnecting included); sqlx reported the dead connections as: {:?}",
        if at_once {
            3 * names.len()
        } else {
            4 * names.len()
        },
        met.iter().map(|l| error_of(l)).collect::<Vec<_>>()
    );
    // Afterwards the pool is healthy: no more retries.
    let settled = log.retries().len();
    calls_in_a_row(&**provider, &self::names("fresh", 2)).await;
    assert_eq!(
        log.retries().len(),
        settled,
        "{scenario}: retries on fresh connections"
    );
}

/// A call made while the server is down succeeds once the server is back (within the call's
/// deadline): it meets the dead connections, then waits for a new one.
async fn call_while_down(
    scenario: &str,
    server: &Throwaway,
    provider: &dyn LockProvider,
    log: &Log,
) {
    let before = log.retries().len();
    server
        .stop_immediate()
        .await
        .unwrap_or_else(|e| panic!("{scenario}: stop: {e}"));
    let name = testing::unique_lock_name("down");
    let began = Instant::now();
    // The call starts while the server is down; the start runs alongside it.
    let (acquired, started) = tokio::join!(provider.acquire(&name, AT_MOST, OWNER), async {
        let outcome = server.start().await;
        (outcome, began.elapsed())
    });
    let (start, start_took) = started;
    start.unwrap_or_else(|e| panic!("{scenario}: start: {e}"));
    let record = acquired
        .unwrap_or_else(|e| panic!("{scenario}: the acquire failed: {e}"))
        .expect("the lock is free");
    let call_took = began.elapsed();
    assert!(
        log.retries().len() - before >= POOL as usize,
        "{scenario}: the call met the dead connections first"
    );
    assert!(
        provider
            .release(&record, Duration::ZERO)
            .await
            .expect("release")
    );
    eprintln!(
        "{scenario}: the server took {start_took:?} to start; the acquire made while it was \
         down succeeded after {call_took:?}"
    );
}

async fn pg_provider(url: &str, table: &str) -> (Arc<dyn LockProvider>, sqlx::PgPool) {
    let pool = PgLockProvider::pool_options()
        .connect(url)
        .await
        .expect("connect to Postgres");
    let provider = PgLockProvider::builder(pool.clone())
        .table(table)
        .call_timeout(CALL_TIMEOUT)
        .build()
        .expect("valid settings");
    provider
        .create_table_if_not_exists()
        .await
        .expect("create the lock table");
    (Arc::new(provider), pool)
}

async fn mysql_provider(url: &str, table: &str) -> (Arc<dyn LockProvider>, sqlx::MySqlPool) {
    let pool = MySqlLockProvider::pool_options()
        .connect(url)
        .await
        .expect("connect to MariaDB");
    let provider = MySqlLockProvider::builder(pool.clone())
        .table(table)
        .call_timeout(CALL_TIMEOUT)
        .build()
        .expect("valid settings");
    provider
        .create_table_if_not_exists()
        .await
        .expect("create the lock table");
    (Arc::new(provider), pool)
}

#[tokio::test]
async fn postgres_restarts_cost_lock_callers_no_failed_calls() {
    let test = "postgres_restarts_cost_lock_callers_no_failed_calls";
    let Some(server) = Throwaway::postgres_or_skip(test).await else {
        return;
    };
    let (log, _guard) = Log::capture();
    let (provider, pool) = pg_provider(&server.url(), "shedlock").await;
    after_outage(
        "postgres immediate restart, calls in a row",
        &provider,
        &pool,
        &log,
        server.restart_immediate(),
        false,
    )
    .await;
    after_outage(
        "postgres fast (clean) restart, calls at once",
        &provider,
        &pool,
        &log,
        async {
            server.stop().await?;
            server.start().await
        },
        true,
    )
    .await;
    warm(&pool, async |_| ()).await;
    call_while_down("postgres, call while down", &server, &*provider, &log).await;
}

#[tokio::test]
async fn mariadb_restarts_cost_lock_callers_no_failed_calls() {
    let test = "mariadb_restarts_cost_lock_callers_no_failed_calls";
    let Some(server) = Throwaway::mariadb_or_skip(test).await else {
        return;
    };
    let (log, _guard) = Log::capture();
    let (provider, pool) = mysql_provider(&server.url(), "shedlock").await;
    after_outage(
        "mariadb SIGKILL restart, calls in a row",
        &provider,
        &pool,
        &log,
        server.restart_immediate(),
        false,
    )
    .await;
    after_outage(
        "mariadb SIGTERM (clean) restart, calls at once",
        &provider,
        &pool,
        &log,
        async {
            server.stop().await?;
            server.start().await
        },
        true,
    )
    .await;
    warm(&pool, async |_| ()).await;
    call_while_down("mariadb, call while down", &server, &*provider, &log).await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn postgres_terminated_connections_cost_lock_callers_no_failed_calls() {
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let (log, _guard) = Log::capture();
    let table = testing::unique_table_name("shedlock_stale");
    let (provider, pool) = pg_provider(&url, &table).await;
    let pids = warm(&pool, async |conn| {
        sqlx::query_scalar::<_, i32>("SELECT pg_backend_pid()")
            .fetch_one(conn)
            .await
            .expect("the backend's pid")
    })
    .await;
    let admin = sqlx::PgPool::connect(&url)
        .await
        .expect("an admin connection");
    for pid in &pids {
        let done: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
            .bind(pid)
            .fetch_one(&admin)
            .await
            .expect("terminate a pooled connection");
        assert!(done, "backend {pid} terminated");
    }
    let gone = async || {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)")
            .bind(&pids)
            .fetch_one(&admin)
            .await
            .expect("read pg_stat_activity")
            == 0
    };
    let deadline = Instant::now() + SETTLE;
    while !gone().await {
        assert!(
            Instant::now() < deadline,
            "the terminated backends did not exit"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    calls_in_a_row(&*provider, &names("terminated", POOL)).await;
    let met = assert_each_dead_connection_met_once(&log, 0, "pg_terminate_backend");
    for line in &met {
        assert!(
            line.contains("terminating connection due to administrator command"),
            "Postgres's farewell (57P01) was what the call met: {line}"
        );
    }
    eprintln!(
        "pg_terminate_backend ×{POOL}: sqlx reported {:?}",
        met.iter().map(|l| error_of(l)).collect::<Vec<_>>()
    );
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP TABLE \"{table}\"")))
        .execute(&admin)
        .await
        .expect("drop the table");
}

#[tokio::test]
#[cfg_attr(not(shedlock_mysql), ignore = "needs SHEDLOCK_MYSQL_URL (MySQL)")]
async fn mariadb_killed_connections_cost_lock_callers_no_failed_calls() {
    let Some(url) = testing::mysql_url() else {
        return;
    };
    let (log, _guard) = Log::capture();
    let table = testing::unique_table_name("shedlock_stale");
    let (provider, pool) = mysql_provider(&url, &table).await;
    let ids = warm(&pool, async |conn| {
        sqlx::query_scalar::<_, u64>("SELECT CONNECTION_ID()")
            .fetch_one(conn)
            .await
            .expect("the connection's id")
    })
    .await;
    let admin = sqlx::MySqlPool::connect(&url)
        .await
        .expect("an admin connection");
    for id in &ids {
        sqlx::query(sqlx::AssertSqlSafe(format!("KILL CONNECTION {id}")))
            .execute(&admin)
            .await
            .expect("kill a pooled connection");
    }
    let list = ids.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    let gone = async || {
        sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(format!(
            "SELECT COUNT(*) FROM information_schema.processlist WHERE id IN ({list})"
        )))
        .fetch_one(&admin)
        .await
        .expect("read the process list")
            == 0
    };
    let deadline = Instant::now() + SETTLE;
    while !gone().await {
        assert!(
            Instant::now() < deadline,
            "the killed connections did not go"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    calls_in_a_row(&*provider, &names("killed", POOL)).await;
    let met = assert_each_dead_connection_met_once(&log, 0, "KILL CONNECTION");
    eprintln!(
        "KILL CONNECTION ×{POOL}: sqlx reported {:?}",
        met.iter().map(|l| error_of(l)).collect::<Vec<_>>()
    );
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP TABLE `{table}`")))
        .execute(&admin)
        .await
        .expect("drop the table");
}

/// Frees `name`'s row (acquire, then release with no `at_least`), so the next acquire must lock
/// and update it.
async fn expired_row(provider: &dyn LockProvider, name: &str) {
    let record = provider
        .acquire(name, AT_MOST, OWNER)
        .await
        .expect("acquire")
        .expect("free");
    assert!(
        provider
            .release(&record, Duration::ZERO)
            .await
            .expect("release")
    );
}

/// Polls `find` until it returns an id (a blocked statement's connection), with a deadline.
async fn blocked<T>(what: &str, mut find: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + SETTLE;
    loop {
        if let Some(id) = find().await {
            return id;
        }
        assert!(Instant::now() < deadline, "no {what} within {SETTLE:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn postgres_a_connection_terminated_mid_statement_is_retried_a_cancelled_statement_is_not() {
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let (log, _guard) = Log::capture();
    let table = testing::unique_table_name("shedlock_stale");
    let (provider, _pool) = pg_provider(&url, &table).await;
    let admin = sqlx::PgPool::connect(&url).await.expect("an admin pool");
    let name = testing::unique_lock_name("midway");
    expired_row(&*provider, &name).await;
    let lock_row = format!("SELECT 1 FROM \"{table}\" WHERE name = $1 FOR UPDATE");
    // A lock call's statement waiting for the row lock an admin transaction holds.
    let waiting = async |not: Option<i32>| {
        sqlx::query_scalar::<_, i32>(
            "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' \
             AND query LIKE '%' || $1 || '%' AND pid <> pg_backend_pid() \
             AND pid IS DISTINCT FROM $2 LIMIT 1",
        )
        .bind(&table)
        .bind(not)
        .fetch_optional(&admin)
        .await
        .expect("read pg_stat_activity")
    };

    // Terminated while its statement waits: the call runs again on another connection, which
    // waits in turn and succeeds once the row is free.
    let mut tx = admin.begin().await.expect("begin");
    sqlx::query(sqlx::AssertSqlSafe(lock_row.clone()))
        .bind(&name)
        .execute(&mut *tx)
        .await
        .expect("lock the row");
    let (acquired, ()) = tokio::join!(provider.acquire(&name, AT_MOST, OWNER), async {
        let pid = blocked("waiting acquire", async || waiting(None).await).await;
        let _: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
            .bind(pid)
            .fetch_one(&admin)
            .await
            .expect("terminate the waiting connection");
        blocked("second waiting acquire", async || waiting(Some(pid)).await).await;
        tx.commit().await.expect("commit");
    });
    let record = acquired
        .expect("the terminated statement was retried")
        .expect("the row was free");
    let retries = log.retries();
    assert_eq!(retries.len(), 1, "one retry: {retries:#?}");
    assert!(
        retries[0].contains("terminating connection due to administrator command"),
        "{}",
        retries[0]
    );
    assert!(
        provider
            .release(&record, Duration::ZERO)
            .await
            .expect("release")
    );

    // Cancelled (57014): the statement's own failure, on a live connection — not retried.
    let mut tx = admin.begin().await.expect("begin");
    sqlx::query(sqlx::AssertSqlSafe(lock_row))
        .bind(&name)
        .execute(&mut *tx)
        .await
        .expect("lock the row");
    let (acquired, ()) = tokio::join!(provider.acquire(&name, AT_MOST, OWNER), async {
        let pid = blocked("waiting acquire", async || waiting(None).await).await;
        let _: bool = sqlx::query_scalar("SELECT pg_cancel_backend($1)")
            .bind(pid)
            .fetch_one(&admin)
            .await
            .expect("cancel the waiting statement");
    });
    let err = acquired.expect_err("a cancelled statement fails the call");
    assert!(err.is_backend(), "{err}");
    assert_eq!(log.retries().len(), 1, "no retry for a cancelled statement");
    tx.rollback().await.expect("rollback");
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP TABLE \"{table}\"")))
        .execute(&admin)
        .await
        .expect("drop the table");
    eprintln!(
        "terminated mid-statement: {}; cancelled: {err:?}",
        error_of(&retries[0])
    );
}

#[tokio::test]
#[cfg_attr(not(shedlock_mysql), ignore = "needs SHEDLOCK_MYSQL_URL (MySQL)")]
async fn mariadb_a_connection_killed_mid_statement_is_retried_a_killed_query_is_not() {
    let Some(url) = testing::mysql_url() else {
        return;
    };
    let (log, _guard) = Log::capture();
    let table = testing::unique_table_name("shedlock_stale");
    let (provider, _pool) = mysql_provider(&url, &table).await;
    let admin = sqlx::MySqlPool::connect(&url).await.expect("an admin pool");
    let name = testing::unique_lock_name("midway");
    expired_row(&*provider, &name).await;
    let lock_row = format!("SELECT 1 FROM `{table}` WHERE name = ? FOR UPDATE");
    // A lock call's statement waiting for the row lock an admin transaction holds. (From the
    // process list: `innodb_trx` is a cache that polling keeps from refreshing.)
    let waiting = async |not: Option<u64>| {
        sqlx::query_scalar::<_, u64>(sqlx::AssertSqlSafe(format!(
            "SELECT CAST(id AS UNSIGNED) FROM information_schema.processlist \
             WHERE command = 'Execute' AND info LIKE '%UPDATE%{table}%' \
             AND id <> CONNECTION_ID() AND NOT id <=> ? LIMIT 1"
        )))
        .bind(not)
        .fetch_optional(&admin)
        .await
        .expect("read the process list")
    };

    // Killed while its statement waits: the call runs again on another connection.
    let mut tx = admin.begin().await.expect("begin");
    sqlx::query(sqlx::AssertSqlSafe(lock_row.clone()))
        .bind(&name)
        .execute(&mut *tx)
        .await
        .expect("lock the row");
    let (acquired, ()) = tokio::join!(provider.acquire(&name, AT_MOST, OWNER), async {
        let id = blocked("waiting acquire", async || waiting(None).await).await;
        sqlx::query(sqlx::AssertSqlSafe(format!("KILL CONNECTION {id}")))
            .execute(&admin)
            .await
            .expect("kill the waiting connection");
        blocked("second waiting acquire", async || waiting(Some(id)).await).await;
        tx.commit().await.expect("commit");
    });
    let record = acquired
        .expect("the killed statement was retried")
        .expect("the row was free");
    let retries = log.retries();
    assert_eq!(retries.len(), 1, "one retry: {retries:#?}");
    assert!(
        provider
            .release(&record, Duration::ZERO)
            .await
            .expect("release")
    );

    // KILL QUERY (1317, SQLSTATE 70100 like 1927): the statement's failure, on a live
    // connection — not retried.
    let mut tx = admin.begin().await.expect("begin");
    sqlx::query(sqlx::AssertSqlSafe(lock_row))
        .bind(&name)
        .execute(&mut *tx)
        .await
        .expect("lock the row");
    let (acquired, ()) = tokio::join!(provider.acquire(&name, AT_MOST, OWNER), async {
        let id = blocked("waiting acquire", async || waiting(None).await).await;
        sqlx::query(sqlx::AssertSqlSafe(format!("KILL QUERY {id}")))
            .execute(&admin)
            .await
            .expect("kill the waiting statement");
    });
    let err = acquired.expect_err("a killed query fails the call");
    assert!(err.is_backend(), "{err}");
    assert_eq!(log.retries().len(), 1, "no retry for a killed query");
    tx.rollback().await.expect("rollback");
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP TABLE `{table}`")))
        .execute(&admin)
        .await
        .expect("drop the table");
    eprintln!(
        "killed mid-statement: {}; killed query: {err:?}",
        error_of(&retries[0])
    );
}
