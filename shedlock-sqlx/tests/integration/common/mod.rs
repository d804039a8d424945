//! Helpers shared by the database tests: a TCP proxy that can black-hole its connections, a
//! server that never answers, and polling with a deadline.
#![allow(dead_code)]

pub(crate) mod pause;
pub(crate) mod suite;
pub(crate) mod trigger;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use shedlock_sqlx::sqlx;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

/// A listener that accepts connections and never sends a byte (a black-holed server).
pub(crate) async fn silent_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket); // keep it open, never answer
        }
    });
    addr
}

/// A TCP proxy in front of a database. [`blackhole`](Self::blackhole) freezes every connection
/// (open ones stop forwarding in both directions, new ones are accepted but never connected);
/// [`heal`](Self::heal) lets new connections through again.
pub(crate) struct Proxy {
    pub(crate) addr: SocketAddr,
    state: Arc<ProxyState>,
}

struct ProxyState {
    blackholed: AtomicBool,
    healed: Notify,
    connections: AtomicUsize,
    /// Client-to-server chunks forwarded (about one per request flight).
    requests: AtomicUsize,
}

impl Proxy {
    pub(crate) async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let state = Arc::new(ProxyState {
            blackholed: AtomicBool::new(false),
            healed: Notify::new(),
            connections: AtomicUsize::new(0),
            requests: AtomicUsize::new(0),
        });
        let shared = state.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let state = shared.clone();
                tokio::spawn(async move {
                    if state.blackholed.load(Ordering::SeqCst) {
                        // Accepted, never served: hold the socket until healed.
                        state.healed.notified().await;
                        drop(client);
                        return;
                    }
                    let Ok(server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    state.connections.fetch_add(1, Ordering::SeqCst);
                    let (cr, cw) = client.into_split();
                    let (sr, sw) = server.into_split();
                    let up = tokio::spawn(pipe(cr, sw, state.clone(), true));
                    let down = tokio::spawn(pipe(sr, cw, state.clone(), false));
                    let _ = tokio::join!(up, down);
                });
            }
        });
        Self { addr, state }
    }

    /// Stops all traffic; sockets stay open.
    pub(crate) fn blackhole(&self) {
        self.state.blackholed.store(true, Ordering::SeqCst);
    }

    /// New connections work again (frozen ones stay frozen).
    pub(crate) fn heal(&self) {
        self.state.blackholed.store(false, Ordering::SeqCst);
        self.state.healed.notify_waiters();
    }

    /// How many client-to-server chunks were forwarded so far (one per request flight, as the
    /// drivers write a request in one go).
    pub(crate) fn requests(&self) -> usize {
        self.state.requests.load(Ordering::SeqCst)
    }

    /// How many upstream connections were opened so far.
    pub(crate) fn connections(&self) -> usize {
        self.state.connections.load(Ordering::SeqCst)
    }
}

async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    state: Arc<ProxyState>,
    upstream: bool,
) {
    let mut buf = vec![0_u8; 16 * 1024];
    loop {
        let Ok(n) = from.read(&mut buf).await else {
            return;
        };
        if n == 0 {
            return;
        }
        if state.blackholed.load(Ordering::SeqCst) {
            // Swallow this and everything after: the connection is frozen for good.
            std::future::pending::<()>().await;
        }
        if upstream {
            state.requests.fetch_add(1, Ordering::SeqCst);
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// The host:port of a database URL (`scheme://user@host:port/db`).
pub(crate) fn url_addr(url: &str) -> SocketAddr {
    use std::net::ToSocketAddrs as _;
    let after_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = after_scheme.split('/').next().unwrap_or_default();
    let host_port = authority.rsplit('@').next().unwrap_or_default();
    host_port
        .to_socket_addrs()
        .expect("resolvable host:port in the database URL")
        .next()
        .expect("an address")
}

/// `url` with its host:port replaced by `addr`.
pub(crate) fn url_via(url: &str, addr: SocketAddr) -> String {
    let (scheme, rest) = url.split_once("://").expect("a URL with a scheme");
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let user = authority
        .rsplit_once('@')
        .map(|(user, _)| format!("{user}@"))
        .unwrap_or_default();
    format!("{scheme}://{user}{addr}/{path}")
}

/// Polls `check` every 20 ms until it returns true or `limit` passes.
pub(crate) async fn eventually<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if check().await {
            return true;
        }
        if tokio::time::Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `record` (held by `east`'s zone) is released; a 300 ms lock that `west` takes then refuses
/// `east` and expires for it by the server's clock (polled with a deadline).
pub(crate) async fn a_short_lock_expires_for_both(
    west: &impl shedlock_core::provider::LockProvider,
    east: &impl shedlock_core::provider::LockProvider,
    record: &shedlock_core::provider::LockRecord,
) {
    const MIN: Duration = Duration::from_mins(1);
    assert!(east.release(record, Duration::ZERO).await.unwrap());
    let short = west
        .acquire("tz", Duration::from_millis(300), "west")
        .await
        .unwrap()
        .unwrap();
    assert!(east.acquire("tz", MIN, "east").await.unwrap().is_none());
    assert!(
        eventually(Duration::from_secs(5), || async {
            east.acquire("tz", MIN, "east").await.unwrap().is_some()
        })
        .await,
        "{short} never expired for the other zone"
    );
}

/// Lock names that must work or be rejected as invalid input, never reach SQL as text.
pub(crate) fn odd_names() -> Vec<String> {
    vec![
        "x'; DROP TABLE shedlock; --".to_owned(),
        "\"quoted\" and `backticked`".to_owned(),
        "back\\slash and %percent_".to_owned(),
        "ünïcödé 🔒 名前".to_owned(),
        "?$1:name".to_owned(),
        "é".repeat(64),
    ]
}

/// Names every store must reject before SQL: empty, padded, NUL, 1,000 characters.
pub(crate) fn invalid_names() -> Vec<String> {
    vec![
        String::new(),
        " padded".to_owned(),
        "nul\0byte".to_owned(),
        "n".repeat(1_000),
        "é".repeat(65),
    ]
}

/// Holds 100 locks at once through `provider`, whose pool has one connection: every task keeps
/// its lock until all 100 hold theirs, which is only possible if no task keeps the connection
/// while its lock is held. Panics unless all 100 ran within a minute.
pub(crate) async fn hundred_locks_held_at_once(
    provider: impl shedlock_core::provider::LockProvider,
) {
    use shedlock_core::{LockConfig, LockingTaskExecutor};
    let executor = Arc::new(LockingTaskExecutor::new(provider).unwrap());
    let all_held = Arc::new(tokio::sync::Barrier::new(100));
    let tasks: Vec<_> = (0..100)
        .map(|i| {
            let (executor, all_held) = (executor.clone(), all_held.clone());
            tokio::spawn(async move {
                let cfg = LockConfig::new(format!("held-{i}"), Duration::from_mins(1)).unwrap();
                executor
                    .execute(&cfg, async move {
                        all_held.wait().await;
                        i
                    })
                    .await
            })
        })
        .collect();
    let finished = tokio::time::timeout(Duration::from_mins(1), async {
        let mut sum = 0;
        for task in tasks {
            sum += task.await.unwrap().unwrap().expect("every lock was free");
        }
        sum
    })
    .await
    .expect("all 100 tasks progressed");
    assert_eq!(finished, (0..100).sum::<i32>());
}

/// The application's jobs hold every connection of the application's pool `app` (a further
/// checkout times out), while `provider`, on a pool of its own as the README tells users to
/// build it (`connect(url)` / `pool_options()`), acquires, extends and releases a lock, and an
/// executor over it runs a task and releases its lock.
///
/// Why this fails on a shared pool: every lock call needs a pooled connection for its
/// statement. Were `provider` built on `app`, its first acquire would wait for a connection that
/// no job gives back and end with a timeout error after `call_timeout` (or the pool's
/// `acquire_timeout`), so the `expect`s below would panic. `app` should have a short
/// `acquire_timeout` (the assertion that it is exhausted waits for it).
///
/// `on_app` is the control: a provider built on `app` itself (with a short call timeout), whose
/// acquire must time out while the jobs hold the pool.
pub(crate) async fn locks_work_while_the_app_pool_is_exhausted<DB: sqlx::Database>(
    app: &sqlx::Pool<DB>,
    provider: impl shedlock_core::provider::LockProvider + Clone,
    on_app: impl shedlock_core::provider::LockProvider,
) {
    use shedlock_core::{LockConfig, LockingTaskExecutor};
    const MIN: Duration = Duration::from_mins(1);
    let size = app.options().get_max_connections();
    let mut jobs = Vec::new();
    for _ in 0..size {
        jobs.push(app.acquire().await.expect("a job takes an app connection"));
    }
    assert!(
        matches!(app.acquire().await, Err(sqlx::Error::PoolTimedOut)),
        "the application's pool is exhausted by its jobs"
    );
    let starved = on_app
        .acquire("exhausted-app-control", MIN, "me")
        .await
        .expect_err("a provider on the exhausted application pool cannot lock");
    assert!(starved.is_timeout(), "{starved}");

    let record = provider
        .acquire("exhausted-app", MIN, "me")
        .await
        .expect("acquire works on the provider's own pool")
        .expect("the lock is free");
    let extended = provider
        .extend(&record, MIN * 2)
        .await
        .expect("extend works on the provider's own pool")
        .expect("still ours");
    assert!(extended.lock_until() > record.lock_until());
    let holder = provider.holder("exhausted-app").await.unwrap().unwrap();
    assert_eq!(holder.owner(), "me");
    assert!(
        provider
            .release(&extended, Duration::ZERO)
            .await
            .expect("release works on the provider's own pool"),
        "released"
    );

    let executor = LockingTaskExecutor::new(provider.clone()).unwrap();
    let cfg = LockConfig::new("exhausted-app-job", MIN).unwrap();
    let ran = executor
        .execute(&cfg, async { app.try_acquire().is_none() })
        .await
        .expect("the executor's acquire and release work")
        .expect("the lock was free");
    assert!(ran, "the app's pool stayed exhausted while the task ran");
    // The executor released its lock: it is free again, still with every app connection held.
    let again = provider
        .acquire("exhausted-app-job", MIN, "me")
        .await
        .unwrap()
        .expect("the executor released its lock");
    assert!(provider.release(&again, Duration::ZERO).await.unwrap());
    assert_eq!(jobs.len(), size as usize);
    drop(jobs);
}

/// `builder` with the custom column names of the schema-qualified tests: `lock_name`, `until`,
/// `since`, `owner`, `token`.
pub(crate) fn custom_columns<DB: sqlx::Database>(
    builder: shedlock_sqlx::LockProviderBuilder<DB>,
) -> shedlock_sqlx::LockProviderBuilder<DB> {
    builder
        .name_column("lock_name")
        .lock_until_column("until")
        .locked_at_column("since")
        .locked_by_column("owner")
        .fencing_token_column("token")
}

/// A provider of custom names (see [`custom_columns`]) creates its table, twice (the second a
/// no-op), and takes `name` for "me" with a token, then extends it to two minutes to a later
/// `lock_until`; the extended record.
pub(crate) async fn a_custom_table_takes_a_lock(
    provider: &impl shedlock_core::admin::LockAdmin,
    name: &str,
) -> shedlock_core::provider::LockRecord {
    provider.create_table().await.unwrap();
    provider.create_table().await.unwrap(); // idempotent
    let minute = Duration::from_mins(1);
    let record = provider.acquire(name, minute, "me").await.unwrap().unwrap();
    assert!(record.fencing_token().is_some());
    let extended = provider.extend(&record, minute * 2).await.unwrap().unwrap();
    assert!(extended.lock_until() > record.lock_until());
    extended
}

/// Two providers on one table whose pools' sessions are in different time zones agree on one
/// lock: `east` takes it, `west` is refused and sees the same times; `stored` (the row's
/// `locked_at` as a UTC session reads it, and the server's UTC now) is the acquisition's
/// time, near the server's clock; and a short lock expires by the server's clock for both.
pub(crate) async fn zones_agree<P: shedlock_core::provider::LockProvider>(
    east: &P,
    west: &P,
    stored: impl AsyncFn() -> (chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>),
) {
    let ten = Duration::from_mins(10);
    let record = east.acquire("tz", ten, "east").await.unwrap().unwrap();
    assert!(west.acquire("tz", ten, "west").await.unwrap().is_none());
    let seen = west.holder("tz").await.unwrap().expect("held");
    assert_eq!(seen.locked_at(), record.locked_at());
    assert_eq!(seen.lock_until(), record.lock_until());

    let (stored, db_now) = stored().await;
    assert_eq!(stored, record.locked_at());
    let skew = (db_now - record.locked_at()).num_seconds().abs();
    assert!(
        skew < 60,
        "locked_at is {skew} s away from the server's UTC time"
    );
    a_short_lock_expires_for_both(west, east, &record).await;
}
