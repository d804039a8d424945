//! Dead pooled connections cost lock callers at most one failed acquire each, and no failed
//! extend, release or read.
//!
//! After a database restart every idle connection in a provider's pool is dead, and each would
//! fail its next statement. shedlock-sqlx closes such a connection, and runs an extend, a release
//! or a read again on another one, within the call's deadline. An acquire (or a fire claim) is
//! not run again: its statement may have committed before the connection died (a lost reply,
//! which the driver cannot tell from a statement that never arrived), and a repeat would answer
//! `Ok(None)` for a lock this very call holds. It fails instead, with an error saying the reply
//! was lost (docs/guarantees.md: at most one failed acquire or claim per dead connection). These
//! tests warm a provider's pool to its 4 connections, kill them all, and then check that:
//!
//! - every extend, release and read succeeds with the right answer, and the retries really
//!   happened (counted from the provider's log);
//! - every acquire either succeeds or fails with the lost-reply error, never answers `Ok(None)`
//!   for a free lock, and succeeds when tried again;
//! - each dead connection was met exactly once: retries plus failed acquires = 4 (none was
//!   offered twice).
//!
//! The scenarios:
//!
//! - private Postgres and MariaDB servers (`Throwaway`), restarted in immediate mode (Postgres
//!   `pg_ctl -m immediate`, MariaDB `SIGKILL`), after which locks taken before are renewed one
//!   call after another (as a leader's renewals): they meet the dead connections and are
//!   retried; and cleanly (Postgres `-m fast`, MariaDB `SIGTERM`), after which 4 acquires run at
//!   once: they meet the dead connections and fail once each. And a call made while the server
//!   is down (an extend), which waits for it;
//! - the shared servers, whose connections are killed one by one (`pg_terminate_backend`,
//!   `KILL`): the database's own farewell ("terminating connection due to administrator
//!   command", "Connection was killed") is what the renewals meet there;
//! - a connection killed while its statement waits for a row lock: an extend runs again, an
//!   acquire fails saying its reply was lost (and had not committed), a cancelled statement is
//!   the statement's own failure, never retried.
//!
//! The private-server tests need the database binaries (skipped without them unless
//! `SHEDLOCK_REQUIRE_DB=1`); the shared-server ones need `SHEDLOCK_PG_URL` /
//! `SHEDLOCK_MYSQL_URL`.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use shedlock_core::provider::{LockProvider, LockRecord};
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

/// Whether `error` is the provider's error for an acquire whose connection died after its
/// statement was sent (a lost reply), naming the lock.
fn is_lost_reply(error: &shedlock_core::Error, name: &str) -> bool {
    let text = error.to_string();
    error.is_backend()
        && text.contains("reply was lost")
        && text.contains(&format!("{name:?}"))
        && text.contains("may be held by this owner")
}

/// Acquires `name`, which is free, trying again after each failure: every failure must be a
/// lost reply (the acquire met a dead connection and was not repeated), never `Ok(None)`, and
/// there can be at most [`POOL`] of them. Returns the record and how many acquires failed.
async fn acquire_past_dead_connections(
    provider: &dyn LockProvider,
    name: &str,
) -> (LockRecord, usize) {
    let mut lost = 0;
    loop {
        match provider.acquire(name, AT_MOST, OWNER).await {
            Ok(Some(record)) => return (record, lost),
            Ok(None) => panic!(
                "acquire {name}: Ok(None) for a free lock (a failed acquire was repeated, or \
                 committed after all)"
            ),
            Err(e) => {
                assert!(is_lost_reply(&e, name), "acquire {name}: {e}");
                lost += 1;
                assert!(
                    lost <= POOL as usize,
                    "acquire {name} failed {lost} times: more than one per dead connection"
                );
            }
        }
    }
}

/// Acquires each of `names` (free) before a fault, on live connections.
async fn acquire_all(provider: &dyn LockProvider, names: &[String]) -> Vec<LockRecord> {
    let mut held = Vec::new();
    for name in names {
        held.push(
            provider
                .acquire(name, AT_MOST, OWNER)
                .await
                .unwrap_or_else(|e| panic!("acquire {name}: {e}"))
                .unwrap_or_else(|| panic!("{name} is free")),
        );
    }
    held
}

/// Extends, reads and releases each of `held`, one call after another (as a leader's renewals
/// come): calls that run again after a lost connection, so every one must succeed with the
/// right answer.
async fn renewals_in_a_row(provider: &dyn LockProvider, held: &[LockRecord]) {
    for record in held {
        let name = record.name();
        let extended = provider
            .extend(record, AT_MOST)
            .await
            .unwrap_or_else(|e| panic!("extend {name}: {e}"))
            .unwrap_or_else(|| panic!("{name} is still ours"));
        assert_eq!(extended.fencing_token(), record.fencing_token());
        let holder = provider
            .holder(name)
            .await
            .unwrap_or_else(|e| panic!("holder {name}: {e}"));
        assert_eq!(holder.as_ref(), Some(&extended), "{name} is held by us");
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
}

/// Acquires each of `names` (free) one call after another, then renews and releases it.
/// Returns how many acquires failed (lost replies on dead connections) and how long the first
/// call took.
async fn acquires_in_a_row(provider: &dyn LockProvider, names: &[String]) -> (usize, Duration) {
    let started = Instant::now();
    let mut first = None;
    let mut lost = 0;
    for name in names {
        let (record, failed) = acquire_past_dead_connections(provider, name).await;
        first.get_or_insert(started.elapsed());
        lost += failed;
        renewals_in_a_row(provider, &[record]).await;
    }
    (lost, first.unwrap_or_default())
}

/// `names.len()` acquires at once (each tried again after a lost reply), then an extend and a
/// release of each, one after another. Returns how many acquires failed.
async fn acquires_at_once(provider: &Arc<dyn LockProvider>, names: &[String]) -> usize {
    let mut acquires = JoinSet::new();
    for name in names {
        let (provider, name) = (provider.clone(), name.clone());
        acquires.spawn(async move { acquire_past_dead_connections(&*provider, &name).await });
    }
    let mut records = Vec::new();
    let mut lost = 0;
    while let Some(joined) = acquires.join_next().await {
        let (record, failed) = joined.expect("the acquire task");
        records.push(record);
        lost += failed;
    }
    renewals_in_a_row(&**provider, &records).await;
    lost
}

fn names(prefix: &str, n: u32) -> Vec<String> {
    (0..n)
        .map(|i| testing::unique_lock_name(&format!("{prefix}{i}")))
        .collect()
}

/// Asserts that the calls since `before` met each of the `POOL` dead connections exactly once
/// (and, through the bound on attempts, that none was offered twice): the retries logged since
/// then plus the `lost` acquires that failed. Returns what sqlx reported for the retries.
fn assert_each_dead_connection_met_once(
    log: &Log,
    before: usize,
    lost: usize,
    scenario: &str,
) -> Vec<String> {
    let retries = log.retries();
    let new = retries.get(before..).unwrap_or_default().to_vec();
    assert_eq!(
        new.len() + lost,
        POOL as usize,
        "{scenario}: expected one retry or failed acquire per dead connection ({POOL}); {lost} \
         acquires failed and the log says:\n{}",
        new.join("\n")
    );
    new
}

/// The part of a retry line that says what failed.
fn error_of(line: &str) -> &str {
    line.split_once("error=").map_or(line, |(_, e)| e)
}

/// One scenario on a private server: locks taken, the pool warmed, `outage`, then calls. In a
/// row: the locks taken before are renewed first (they meet the dead connections and are
/// retried; none may fail), then acquires on fresh connections (none may fail). At once:
/// acquires first (each may meet a dead connection and fail once, with a lost reply), then the
/// renewals. Either way each dead connection is met once.
async fn after_outage<DB: sqlx::Database>(
    scenario: &str,
    provider: &Arc<dyn LockProvider>,
    pool: &sqlx::Pool<DB>,
    log: &Log,
    outage: impl Future<Output = io::Result<()>>,
    at_once: bool,
) {
    let held = acquire_all(&**provider, &names("held", POOL)).await;
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
    let started = Instant::now();
    let lost = if at_once {
        let lost = acquires_at_once(provider, &names).await;
        renewals_in_a_row(&**provider, &held).await;
        lost
    } else {
        renewals_in_a_row(&**provider, &held).await;
        let renewals = log.retries().len() - before;
        assert_eq!(
            renewals, POOL as usize,
            "{scenario}: the renewals met every dead connection, and were retried"
        );
        let (lost, _) = acquires_in_a_row(&**provider, &names).await;
        assert_eq!(
            lost, 0,
            "{scenario}: the acquires came after the dead connections"
        );
        lost
    };
    let first_call = started.elapsed();
    let met = assert_each_dead_connection_met_once(log, before, lost, scenario);
    eprintln!(
        "{scenario}: outage {outage_took:?}; {} renewals and acquires, {lost} acquires failed \
         (lost replies), no renewal failed; calls took {first_call:?} (reconnecting included); \
         sqlx reported the dead connections met by renewals as: {:?}",
        4 * held.len() + 5 * names.len(),
        met.iter().map(|l| error_of(l)).collect::<Vec<_>>()
    );
    // Afterwards the pool is healthy: no more retries, no failed acquire.
    let settled = log.retries().len();
    let (lost, _) = acquires_in_a_row(&**provider, &self::names("fresh", 2)).await;
    assert_eq!(lost, 0, "{scenario}: failed acquires on fresh connections");
    assert_eq!(
        log.retries().len(),
        settled,
        "{scenario}: retries on fresh connections"
    );
}

/// The lock [`call_while_down`] extends, taken before the pool is warmed: over a sqlx pool the
/// connection an acquire used is given back with a ping in the background, and a server stopped
/// meanwhile would close it there, leaving fewer dead connections for the call to meet.
async fn lock_for_call_while_down(provider: &dyn LockProvider) -> LockRecord {
    provider
        .acquire(&testing::unique_lock_name("down"), AT_MOST, OWNER)
        .await
        .expect("acquire")
        .expect("free")
}

/// A call made while the server is down succeeds once the server is back (within the call's
/// deadline): an extend (a repeatable call) of `record` meets the dead connections, then waits
/// for a new one. (An acquire would fail at the first dead connection, as after any restart.)
/// The pool must hold its warm connections idle when it starts.
async fn call_while_down(
    scenario: &str,
    server: &Throwaway,
    provider: &dyn LockProvider,
    log: &Log,
    record: LockRecord,
) {
    let before = log.retries().len();
    server
        .stop_immediate()
        .await
        .unwrap_or_else(|e| panic!("{scenario}: stop: {e}"));
    let began = Instant::now();
    // The call starts while the server is down; the start runs alongside it.
    let (extended, started) = tokio::join!(provider.extend(&record, AT_MOST), async {
        let outcome = server.start().await;
        (outcome, began.elapsed())
    });
    let (start, start_took) = started;
    start.unwrap_or_else(|e| panic!("{scenario}: start: {e}"));
    let extended = extended
        .unwrap_or_else(|e| panic!("{scenario}: the extend failed: {e}"))
        .expect("the lock is still ours");
    let call_took = began.elapsed();
    assert!(
        log.retries().len() - before >= POOL as usize,
        "{scenario}: the call met the dead connections first"
    );
    assert!(
        provider
            .release(&extended, Duration::ZERO)
            .await
            .expect("release")
    );
    eprintln!(
        "{scenario}: the server took {start_took:?} to start; the extend made while it was \
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
async fn postgres_restarts_cost_no_failed_renewal_and_one_failed_acquire_per_dead_connection() {
    let test =
        "postgres_restarts_cost_no_failed_renewal_and_one_failed_acquire_per_dead_connection";
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
    let record = lock_for_call_while_down(&*provider).await;
    warm(&pool, async |_| ()).await;
    call_while_down(
        "postgres, call while down",
        &server,
        &*provider,
        &log,
        record,
    )
    .await;
}

#[tokio::test]
async fn mariadb_restarts_cost_no_failed_renewal_and_one_failed_acquire_per_dead_connection() {
    let test = "mariadb_restarts_cost_no_failed_renewal_and_one_failed_acquire_per_dead_connection";
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
    let record = lock_for_call_while_down(&*provider).await;
    warm(&pool, async |_| ()).await;
    call_while_down(
        "mariadb, call while down",
        &server,
        &*provider,
        &log,
        record,
    )
    .await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn postgres_terminated_connections_cost_renewals_no_failed_calls() {
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let (log, _guard) = Log::capture();
    let table = testing::unique_table_name("shedlock_stale");
    let (provider, pool) = pg_provider(&url, &table).await;
    let held = acquire_all(&*provider, &names("terminated", POOL)).await;
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
    renewals_in_a_row(&*provider, &held).await;
    let (failed_acquires, _) = acquires_in_a_row(&*provider, &names("after", POOL)).await;
    assert_eq!(
        failed_acquires, 0,
        "the renewals met every dead connection first"
    );
    let met =
        assert_each_dead_connection_met_once(&log, 0, failed_acquires, "pg_terminate_backend");
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
async fn mariadb_killed_connections_cost_renewals_no_failed_calls() {
    let Some(url) = testing::mysql_url() else {
        return;
    };
    let (log, _guard) = Log::capture();
    let table = testing::unique_table_name("shedlock_stale");
    let (provider, pool) = mysql_provider(&url, &table).await;
    let held = acquire_all(&*provider, &names("killed", POOL)).await;
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
    renewals_in_a_row(&*provider, &held).await;
    let (failed_acquires, _) = acquires_in_a_row(&*provider, &names("after", POOL)).await;
    assert_eq!(
        failed_acquires, 0,
        "the renewals met every dead connection first"
    );
    let met = assert_each_dead_connection_met_once(&log, 0, failed_acquires, "KILL CONNECTION");
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

/// The backend of a lock call on `table` whose statement waits for a row lock (an admin
/// transaction's), other than `not`.
async fn pg_waiting(admin: &sqlx::PgPool, table: &str, not: Option<i32>) -> Option<i32> {
    sqlx::query_scalar::<_, i32>(
        "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' \
         AND query LIKE '%' || $1 || '%' AND pid <> pg_backend_pid() \
         AND pid IS DISTINCT FROM $2 LIMIT 1",
    )
    .bind(table)
    .bind(not)
    .fetch_optional(admin)
    .await
    .expect("read pg_stat_activity")
}

/// A connection terminated while its statement waits for a row lock: an extend runs again on
/// another connection (which waits in turn, and succeeds once the row is free); an acquire
/// fails saying its reply was lost, not repeated, and had not committed; a cancelled statement
/// (57014) is the statement's own failure on a live connection, not retried.
#[tokio::test]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn postgres_terminated_mid_statement_an_extend_is_retried_an_acquire_fails_a_cancel_is_not_retried()
 {
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let (log, _guard) = Log::capture();
    let table = testing::unique_table_name("shedlock_stale");
    let (provider, _pool) = pg_provider(&url, &table).await;
    let admin = sqlx::PgPool::connect(&url).await.expect("an admin pool");
    let name = testing::unique_lock_name("midway");
    let lock_row = format!("SELECT 1 FROM \"{table}\" WHERE name = $1 FOR UPDATE");
    let waiting = async |not: Option<i32>| pg_waiting(&admin, &table, not).await;
    let terminate = async |pid: i32| {
        let _: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
            .bind(pid)
            .fetch_one(&admin)
            .await
            .expect("terminate the waiting connection");
    };
    let lock_the_row = async || {
        let mut tx = admin.begin().await.expect("begin");
        sqlx::query(sqlx::AssertSqlSafe(lock_row.clone()))
            .bind(&name)
            .execute(&mut *tx)
            .await
            .expect("lock the row");
        tx
    };

    // An extend terminated while its statement waits: it runs again on another connection,
    // which waits in turn and succeeds once the row is free.
    let record = provider
        .acquire(&name, AT_MOST, OWNER)
        .await
        .expect("acquire")
        .expect("free");
    let tx = lock_the_row().await;
    let (extended, ()) = tokio::join!(provider.extend(&record, AT_MOST), async {
        let pid = blocked("waiting extend", async || waiting(None).await).await;
        terminate(pid).await;
        blocked("second waiting extend", async || waiting(Some(pid)).await).await;
        tx.commit().await.expect("commit");
    });
    let extended = extended
        .expect("the terminated extend was retried")
        .expect("the lock is still ours");
    let retries = log.retries();
    assert_eq!(retries.len(), 1, "one retry: {retries:#?}");
    assert!(
        retries[0].contains("terminating connection due to administrator command"),
        "{}",
        retries[0]
    );
    assert!(
        provider
            .release(&extended, Duration::ZERO)
            .await
            .expect("release")
    );

    // An acquire terminated while its statement waits (the row is expired: it would take it):
    // not repeated, an error that says its reply was lost. It had not committed.
    let tx = lock_the_row().await;
    let (acquired, ()) = tokio::join!(provider.acquire(&name, AT_MOST, OWNER), async {
        let pid = blocked("waiting acquire", async || waiting(None).await).await;
        terminate(pid).await;
    });
    let lost = acquired.expect_err("an acquire whose connection died is not repeated");
    assert!(is_lost_reply(&lost, &name), "{lost}");
    assert_eq!(log.retries().len(), 1, "no retry for an acquire");
    tx.rollback().await.expect("rollback");
    assert_eq!(
        provider.holder(&name).await.expect("holder"),
        None,
        "the terminated acquire had not committed"
    );
    expired_row(&*provider, &name).await;

    // Cancelled (57014): the statement's own failure, on a live connection — not retried.
    let tx = lock_the_row().await;
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
    assert!(
        !is_lost_reply(&err, &name),
        "a cancel is no lost reply: {err}"
    );
    assert_eq!(log.retries().len(), 1, "no retry for a cancelled statement");
    tx.rollback().await.expect("rollback");
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP TABLE \"{table}\"")))
        .execute(&admin)
        .await
        .expect("drop the table");
    eprintln!(
        "terminated mid-statement: extend retried after {}; acquire: {lost}; cancelled: {err:?}",
        error_of(&retries[0])
    );
}

/// A connection killed while its statement waits for a row lock: an extend runs again on
/// another connection; an acquire fails saying its reply was lost, not repeated, and had not
/// committed; `KILL QUERY` (1317, SQLSTATE 70100 like 1927) is the statement's own failure on a
/// live connection, not retried.
#[tokio::test]
#[cfg_attr(not(shedlock_mysql), ignore = "needs SHEDLOCK_MYSQL_URL (MySQL)")]
async fn mariadb_killed_mid_statement_an_extend_is_retried_an_acquire_fails_a_killed_query_is_not_retried()
 {
    let Some(url) = testing::mysql_url() else {
        return;
    };
    let (log, _guard) = Log::capture();
    let table = testing::unique_table_name("shedlock_stale");
    let (provider, _pool) = mysql_provider(&url, &table).await;
    let admin = sqlx::MySqlPool::connect(&url).await.expect("an admin pool");
    let name = testing::unique_lock_name("midway");
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
    let kill = async |what: &str, id: u64| {
        sqlx::query(sqlx::AssertSqlSafe(format!("KILL {what} {id}")))
            .execute(&admin)
            .await
            .expect("kill the waiting statement or connection");
    };
    let lock_the_row = async || {
        let mut tx = admin.begin().await.expect("begin");
        sqlx::query(sqlx::AssertSqlSafe(lock_row.clone()))
            .bind(&name)
            .execute(&mut *tx)
            .await
            .expect("lock the row");
        tx
    };

    // An extend killed while its statement waits: it runs again on another connection.
    let record = provider
        .acquire(&name, AT_MOST, OWNER)
        .await
        .expect("acquire")
        .expect("free");
    let tx = lock_the_row().await;
    let (extended, ()) = tokio::join!(provider.extend(&record, AT_MOST), async {
        let id = blocked("waiting extend", async || waiting(None).await).await;
        kill("CONNECTION", id).await;
        blocked("second waiting extend", async || waiting(Some(id)).await).await;
        tx.commit().await.expect("commit");
    });
    let extended = extended
        .expect("the killed extend was retried")
        .expect("the lock is still ours");
    let retries = log.retries();
    assert_eq!(retries.len(), 1, "one retry: {retries:#?}");
    assert!(
        provider
            .release(&extended, Duration::ZERO)
            .await
            .expect("release")
    );

    // An acquire killed while its statement waits (the row is expired: it would take it): not
    // repeated, an error that says its reply was lost. It had not committed.
    let tx = lock_the_row().await;
    let (acquired, ()) = tokio::join!(provider.acquire(&name, AT_MOST, OWNER), async {
        let id = blocked("waiting acquire", async || waiting(None).await).await;
        kill("CONNECTION", id).await;
    });
    let lost = acquired.expect_err("an acquire whose connection died is not repeated");
    assert!(is_lost_reply(&lost, &name), "{lost}");
    assert_eq!(log.retries().len(), 1, "no retry for an acquire");
    tx.rollback().await.expect("rollback");
    assert_eq!(
        provider.holder(&name).await.expect("holder"),
        None,
        "the killed acquire had not committed"
    );
    expired_row(&*provider, &name).await;

    // KILL QUERY: the statement's failure, on a live connection — not retried.
    let tx = lock_the_row().await;
    let (acquired, ()) = tokio::join!(provider.acquire(&name, AT_MOST, OWNER), async {
        let id = blocked("waiting acquire", async || waiting(None).await).await;
        kill("QUERY", id).await;
    });
    let err = acquired.expect_err("a killed query fails the call");
    assert!(err.is_backend(), "{err}");
    assert!(
        !is_lost_reply(&err, &name),
        "a killed query is no lost reply: {err}"
    );
    assert_eq!(log.retries().len(), 1, "no retry for a killed query");
    tx.rollback().await.expect("rollback");
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP TABLE `{table}`")))
        .execute(&admin)
        .await
        .expect("drop the table");
    eprintln!(
        "killed mid-statement: extend retried after {}; acquire: {lost}; killed query: {err:?}",
        error_of(&retries[0])
    );
}
