//! Failure behaviour of the SQL stores (issue 3, item 8), on private throwaway servers:
//!
//! - a database that is **down** yields an `Err` within the call timeout, never a hang, a panic
//!   or a skip, and locking works again once it is back, with no action;
//! - a **black-holed** database (a proxy that forwards nothing) yields a timeout error within the
//!   call timeout; the timed-out connections are closed, never reused: right after the network
//!   heals, the next call works;
//! - an **immediate-mode restart** (no checkpoint, every connection broken) or a **reset** of every
//!   connection costs at most one failed statement per pooled connection, then recovery by itself;
//! - a **killed** server (`SIGKILL` to all its processes) is like a down one, and after its crash
//!   recovery the locks taken before are intact.
//!
//! Every scenario runs on Postgres and on MariaDB, each test with its own server (started from
//! the installed binaries; skipped without them unless `SHEDLOCK_REQUIRE_DB=1`).

use crate::fault_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use shedlock_core::{
    LockConfig, LockingTaskExecutor, Result,
    provider::{LockProvider, LockRecord},
};
use shedlock_sqlx::{MySqlLockProvider, PgLockProvider};
use shedlock_tests::proxy::Proxy;
use shedlock_tests::throwaway::{Flavor, Throwaway};
use tokio::time::Instant;

/// The stores' per-call timeout in these tests.
const CALL_TIMEOUT: Duration = Duration::from_secs(1);
/// Scheduling slack on top of a timeout (CI machines are loaded).
const SLACK: Duration = Duration::from_millis(1500);
/// The lock pool's size.
const POOL: u32 = 4;
/// A lock that outlives every test.
const LONG: Duration = Duration::from_mins(2);
const OWNER: &str = "fault-store:1:test";

/// A provider of either kind (with its connection counters).
#[derive(Clone)]
enum Store {
    Pg(PgLockProvider),
    My(MySqlLockProvider),
}

impl Store {
    /// A provider on `url` with at most [`POOL`] connections, [`CALL_TIMEOUT`] per call and
    /// its own table (created here).
    async fn connect(flavor: Flavor, url: &str) -> Self {
        let table = format!("fault_store_{}", fault_support::suffix());
        let store = match flavor {
            Flavor::Postgres => {
                // The provider as the README builds it: connections of its own.
                Store::Pg(
                    PgLockProvider::from_url(url)
                        .max_connections(POOL)
                        .table(&table)
                        .call_timeout(CALL_TIMEOUT)
                        .build()
                        .expect("valid settings"),
                )
            }
            Flavor::MariaDb => {
                // The provider as the README builds it: connections of its own.
                Store::My(
                    MySqlLockProvider::from_url(url)
                        .max_connections(POOL)
                        .table(&table)
                        .call_timeout(CALL_TIMEOUT)
                        .build()
                        .expect("valid settings"),
                )
            }
            _ => unreachable!("no other flavors"),
        };
        match &store {
            Store::Pg(p) => p.create_table_if_not_exists().await,
            Store::My(p) => p.create_table_if_not_exists().await,
        }
        .expect("create the lock table");
        store
    }

    fn provider(&self) -> Arc<dyn LockProvider> {
        match self {
            Store::Pg(p) => Arc::new(p.clone()),
            Store::My(p) => Arc::new(p.clone()),
        }
    }

    /// Connections open (idle or in use).
    fn size(&self) -> u32 {
        match self {
            Store::Pg(p) => p.connection_stats().open,
            Store::My(p) => p.connection_stats().open,
        }
    }

    /// Idle connections.
    fn idle(&self) -> usize {
        let idle = match self {
            Store::Pg(p) => p.connection_stats().idle,
            Store::My(p) => p.connection_stats().idle,
        };
        idle as usize
    }

    /// Opens all [`POOL`] connections (by [`POOL`] calls at once: none finds another's
    /// connection idle while they all wait for theirs to open), so that every one of them
    /// meets the fault. They are idle as soon as the calls return.
    async fn warm_up(&self) {
        let deadline = Instant::now() + SLACK;
        while self.size() < POOL {
            assert!(
                Instant::now() < deadline,
                "the provider should have {POOL} connections open, has {}",
                self.size()
            );
            let mut calls = tokio::task::JoinSet::new();
            for i in 0..POOL {
                let provider = self.provider();
                calls.spawn(async move { provider.holder(&format!("warm-up-{i}")).await });
            }
            while let Some(done) = calls.join_next().await {
                done.expect("the call ran").expect("a warm-up call");
            }
        }
        assert_eq!(
            self.idle(),
            POOL as usize,
            "every connection went back at once"
        );
    }
}

async fn server(flavor: Flavor, test: &str) -> Option<Throwaway> {
    let server = match flavor {
        Flavor::Postgres => Throwaway::postgres_or_skip(test).await,
        _ => Throwaway::mariadb_or_skip(test).await,
    }?;
    eprintln!(
        "{test}: private {flavor} server up in {:?}",
        server.setup_time()
    );
    Some(server)
}

fn fresh(what: &str) -> String {
    format!("{what}-{}", fault_support::suffix())
}

/// A timeout: the provider's call deadline, or the pool's wait for a connection (the same
/// deadline here, so either may fire first).
fn is_timeout(error: &shedlock_core::Error) -> bool {
    error.is_timeout()
        || std::error::Error::source(error)
            .and_then(|s| s.downcast_ref::<shedlock_sqlx::sqlx::Error>())
            .is_some_and(|e| matches!(e, shedlock_sqlx::sqlx::Error::PoolTimedOut))
}

/// Runs `call`, checks that it failed (not a skip, not a panic) within the call timeout plus
/// slack, and returns the error and how long it took.
async fn fails_in_time<T: std::fmt::Debug>(
    what: &str,
    call: impl Future<Output = Result<T>>,
) -> (shedlock_core::Error, Duration) {
    let started = Instant::now();
    let outcome = tokio::time::timeout(CALL_TIMEOUT + SLACK + SLACK, call).await;
    let elapsed = started.elapsed();
    let outcome = outcome.unwrap_or_else(|_| panic!("{what} hung for {elapsed:?}"));
    let error = match outcome {
        Ok(value) => panic!("{what} must fail, got Ok({value:?})"),
        Err(error) => error,
    };
    assert!(
        elapsed <= CALL_TIMEOUT + SLACK,
        "{what} failed only after {elapsed:?}: {error}"
    );
    assert!(
        error.is_backend() || error.is_timeout(),
        "{what} failed with an unexpected kind of error: {error:?}"
    );
    (error, elapsed)
}

/// Every operation of the trait, and the executor, against a store that cannot answer: each
/// fails in time; the executor never runs the task.
async fn every_call_fails(store: &Store, held: &LockRecord) -> Duration {
    let p = store.provider();
    let mut slowest = Duration::ZERO;
    let (_, t) = fails_in_time("acquire", p.acquire(&fresh("a"), LONG, OWNER)).await;
    slowest = slowest.max(t);
    let (_, t) = fails_in_time("extend", p.extend(held, LONG)).await;
    slowest = slowest.max(t);
    let (_, t) = fails_in_time("release", p.release(held, Duration::ZERO)).await;
    slowest = slowest.max(t);
    let (_, t) = fails_in_time("holder", p.holder(held.name())).await;
    slowest = slowest.max(t);

    // The executor's own timeout is longer: the store's must be the one that answers.
    let executor = LockingTaskExecutor::builder(p.clone())
        .owner_id(OWNER)
        .call_timeout(Duration::from_secs(30))
        .build()
        .expect("an executor");
    let cfg = LockConfig::new(fresh("job"), LONG).expect("a valid config");
    let ran = Arc::new(AtomicBool::new(false));
    let flag = ran.clone();
    let (_, t) = fails_in_time(
        "execute",
        executor.execute(&cfg, async move { flag.store(true, Ordering::SeqCst) }),
    )
    .await;
    slowest = slowest.max(t);
    assert!(!ran.load(Ordering::SeqCst), "a task ran without its lock");
    slowest
}

/// Calls `holder` until it succeeds; returns how many calls failed first.
async fn failures_until_ok(store: &Store, name: &str, limit: u32) -> u32 {
    let p = store.provider();
    let mut failures = 0;
    loop {
        let started = Instant::now();
        match p.holder(name).await {
            Ok(_) => return failures,
            Err(error) => {
                assert!(
                    started.elapsed() <= CALL_TIMEOUT + SLACK,
                    "a failing call took {:?}",
                    started.elapsed()
                );
                failures += 1;
                assert!(
                    failures <= limit,
                    "still failing after {failures} calls (at most {limit} allowed): {error}"
                );
            }
        }
    }
}

/// After recovery, a run of calls all work, and the lock taken before the fault is intact.
async fn works_again(store: &Store, held: &LockRecord) {
    let p = store.provider();
    for i in 0..10 {
        let name = fresh(&format!("after-{i}"));
        let record = p
            .acquire(&name, LONG, OWNER)
            .await
            .expect("acquire after recovery")
            .expect("a fresh lock is free");
        assert!(p.release(&record, Duration::ZERO).await.expect("release"));
    }
    let holder = p
        .holder(held.name())
        .await
        .expect("holder after recovery")
        .expect("the lock taken before the fault is still held");
    assert_eq!(holder.owner(), OWNER);
    assert!(
        p.release(held, Duration::ZERO)
            .await
            .expect("release after recovery"),
        "the lock taken before the fault is still ours"
    );
}

async fn database_down(flavor: Flavor, test: &str) {
    let Some(server) = server(flavor, test).await else {
        return;
    };
    let store = Store::connect(flavor, &server.url()).await;
    let p = store.provider();
    let held = p
        .acquire(&fresh("held"), LONG, OWNER)
        .await
        .expect("acquire")
        .expect("free");
    store.warm_up().await;

    server.stop().await.expect("stop the server");
    // Twice: first on the pooled connections the server closed, then on new connections that
    // are refused.
    let first = every_call_fails(&store, &held).await;
    let second = every_call_fails(&store, &held).await;

    server.start().await.expect("start the server again");
    let failures = failures_until_ok(&store, held.name(), POOL).await;
    works_again(&store, &held).await;
    eprintln!(
        "{test}: down: slowest failing call {first:?} / {second:?}; {failures} failed calls \
         after the restart"
    );
}

async fn black_holed(flavor: Flavor, test: &str) {
    let Some(server) = server(flavor, test).await else {
        return;
    };
    let proxy = Proxy::to_local_port(server.port())
        .await
        .expect("start a proxy");
    let store = Store::connect(flavor, &server.url_via(proxy.port())).await;
    let p = store.provider();
    let held = p
        .acquire(&fresh("held"), LONG, OWNER)
        .await
        .expect("acquire")
        .expect("free");
    store.warm_up().await;

    proxy.blackhole();
    // Every call times out in time. Go on until every pooled connection has been tried (and, if
    // the provider is right, closed): the black-holed connections stay dead even after the
    // proxy heals, so one put back into the pool would hang the first call after healing.
    let mut rounds = 0;
    let mut slowest = Duration::ZERO;
    loop {
        slowest = slowest.max(every_call_fails(&store, &held).await);
        rounds += 1;
        if store.idle() == 0 {
            break;
        }
        assert!(
            rounds <= POOL,
            "the pool still has {} idle connections after {rounds} rounds",
            store.idle()
        );
    }
    let (error, _) = fails_in_time("acquire", p.acquire(&fresh("bh"), LONG, OWNER)).await;
    assert!(
        is_timeout(&error),
        "a black hole is a timeout, got {error:?}"
    );

    proxy.heal();
    let started = Instant::now();
    let holder = p
        .holder(held.name())
        .await
        .expect("the first call after healing works: no timed-out connection was reused");
    let first_call = started.elapsed();
    assert!(
        first_call <= CALL_TIMEOUT,
        "the first call took {first_call:?}"
    );
    assert_eq!(
        holder.map(|h| h.owner().to_owned()).as_deref(),
        Some(OWNER),
        "nothing reached the server during the black hole: the lock is still held"
    );
    works_again(&store, &held).await;
    eprintln!(
        "{test}: black hole: {rounds} rounds of failing calls, slowest {slowest:?}; first call \
         after healing {first_call:?}; {} connections through the proxy",
        proxy.accepted()
    );
}

async fn restarted(flavor: Flavor, test: &str) {
    let Some(server) = server(flavor, test).await else {
        return;
    };
    let store = Store::connect(flavor, &server.url()).await;
    let p = store.provider();
    let held = p
        .acquire(&fresh("held"), LONG, OWNER)
        .await
        .expect("acquire")
        .expect("free");
    store.warm_up().await;
    let open = store.size();

    let started = Instant::now();
    server
        .restart_immediate()
        .await
        .expect("restart the server in immediate mode");
    let restart = started.elapsed();
    let failures = failures_until_ok(&store, held.name(), open).await;
    works_again(&store, &held).await;
    eprintln!(
        "{test}: immediate restart took {restart:?}; {failures} failed calls for {open} pooled \
         connections"
    );
}

async fn reset(flavor: Flavor, test: &str) {
    let Some(server) = server(flavor, test).await else {
        return;
    };
    let proxy = Proxy::to_local_port(server.port())
        .await
        .expect("start a proxy");
    let store = Store::connect(flavor, &server.url_via(proxy.port())).await;
    let p = store.provider();
    let held = p
        .acquire(&fresh("held"), LONG, OWNER)
        .await
        .expect("acquire")
        .expect("free");
    store.warm_up().await;
    let open = store.size();

    tokio::time::timeout(SLACK, proxy.cut())
        .await
        .expect("the proxy resets its connections promptly");
    let failures = failures_until_ok(&store, held.name(), open).await;
    works_again(&store, &held).await;
    eprintln!("{test}: reset: {failures} failed calls for {open} pooled connections");
}

/// The server and all its processes `SIGKILL`ed (the OOM killer, a crashed host process):
/// calls fail in time, and work again once it is started (crash recovery); dropping the
/// throwaway server stops it and removes its directory.
async fn killed(flavor: Flavor, test: &str) {
    let Some(server) = server(flavor, test).await else {
        return;
    };
    let store = Store::connect(flavor, &server.url()).await;
    let p = store.provider();
    let held = p
        .acquire(&fresh("held"), LONG, OWNER)
        .await
        .expect("acquire")
        .expect("free");
    store.warm_up().await;
    let open = store.size();

    server.kill().await.expect("kill the server");
    assert!(!server.is_running());
    let slowest = every_call_fails(&store, &held).await;
    let started = Instant::now();
    server.start().await.expect("start after the kill");
    let recovery = started.elapsed();
    let failures = failures_until_ok(&store, held.name(), open).await;
    works_again(&store, &held).await;

    let dir = server.dir().to_path_buf();
    let port = server.port();
    drop(store);
    drop(server);
    assert!(!dir.exists(), "{} was left behind", dir.display());
    assert!(
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err(),
        "the server still listens on {port} after drop"
    );
    eprintln!(
        "{test}: killed: slowest failing call {slowest:?}; start with crash recovery took \
         {recovery:?}; {failures} failed calls after it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_killed_fails_in_time_recovers_and_cleans_up() {
    killed(
        Flavor::Postgres,
        "postgres_killed_fails_in_time_recovers_and_cleans_up",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_killed_fails_in_time_recovers_and_cleans_up() {
    killed(
        Flavor::MariaDb,
        "mariadb_killed_fails_in_time_recovers_and_cleans_up",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_down_fails_in_time_and_recovers() {
    database_down(Flavor::Postgres, "postgres_down_fails_in_time_and_recovers").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_down_fails_in_time_and_recovers() {
    database_down(Flavor::MariaDb, "mariadb_down_fails_in_time_and_recovers").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_black_hole_times_out_and_heals() {
    black_holed(Flavor::Postgres, "postgres_black_hole_times_out_and_heals").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_black_hole_times_out_and_heals() {
    black_holed(Flavor::MariaDb, "mariadb_black_hole_times_out_and_heals").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_immediate_restart_fails_once_per_connection() {
    restarted(
        Flavor::Postgres,
        "postgres_immediate_restart_fails_once_per_connection",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_immediate_restart_fails_once_per_connection() {
    restarted(
        Flavor::MariaDb,
        "mariadb_immediate_restart_fails_once_per_connection",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_reset_connections_fail_once_each() {
    reset(
        Flavor::Postgres,
        "postgres_reset_connections_fail_once_each",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_reset_connections_fail_once_each() {
    reset(Flavor::MariaDb, "mariadb_reset_connections_fail_once_each").await;
}
