//! The tower layer (`shedlock-tower`) under axum, with real servers.
//!
//! - `three_web_replicas_*` (Postgres): three `web_replica` processes serve the same routes under
//!   the layer over one lock table. Bursts of concurrent requests to all three at once: exactly one
//!   runs per lock window, every other request gets 409. Then a steady stream of requests to all
//!   three for a few seconds: every answer is 200 or 409, and the runs, recorded by the handler
//!   in a table of their own with the database's clock, never overlap and carry increasing
//!   fencing tokens.
//! - `axum_streamed_body_*` (in process, in-memory store): a streamed body goes on after the lock
//!   is released, as the crate docs say: the lock is free while the body still streams.
//! - `axum_client_gone_*` (in process): a client that closes its connection while the handler runs
//!   frees the lock at once, as hyper drops the handler's future.
//!
//! Every wait has a deadline; nothing sleeps to synchronise. The replicas' logs are in a
//! temporary directory, shown when a check fails.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::routing::get;
use bytes::Bytes;
use http_body_util::channel::{Channel, Sender};
use http_body_util::{BodyExt as _, Empty};
use hyper::StatusCode;
use hyper::header::RETRY_AFTER;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use shedlock_core::{InMemoryLockProvider, LockConfig, LockingTaskExecutor};
use shedlock_sqlx::{PgLockProvider, testing};
use shedlock_tower::{HttpRefusals, LockLayer};
use sqlx::{AssertSqlSafe, Connection as _, PgConnection};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::oneshot;
use tokio::time::Instant;

type HttpClient = Client<HttpConnector, Empty<Bytes>>;

/// How long a replica may take to start and print its port.
const START_WAIT: Duration = Duration::from_secs(30);
/// How long one request may take, a 2-core machine shared by several test runs included.
const REQUEST_WAIT: Duration = Duration::from_secs(20);

fn client() -> HttpClient {
    Client::builder(TokioExecutor::new()).build_http()
}

/// One answer: the status, the `Retry-After` header if any, the body.
#[derive(Debug)]
struct Answer {
    status: StatusCode,
    retry_after: Option<u64>,
    body: String,
}

async fn get_answer(client: &HttpClient, url: &str) -> Answer {
    let uri: hyper::Uri = url.parse().expect("a valid URL");
    let response = tokio::time::timeout(REQUEST_WAIT, client.get(uri))
        .await
        .unwrap_or_else(|_| panic!("GET {url}: no answer within {REQUEST_WAIT:?}"))
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let status = response.status();
    let retry_after = response
        .headers()
        .get(RETRY_AFTER)
        .map(|v| v.to_str().expect("ASCII").parse().expect("whole seconds"));
    let body = response
        .into_body()
        .collect()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: the body: {e}"))
        .to_bytes();
    Answer {
        status,
        retry_after,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// One `web_replica` process and its port.
struct Replica {
    _child: Child,
    port: u16,
    log: PathBuf,
}

impl Replica {
    async fn start(label: &str, url: &str, table: &str, runs: &str, logs: &Path) -> Self {
        let log = logs.join(format!("{label}.log"));
        let stderr = std::fs::File::create(&log).expect("a log file");
        let mut child = Command::new(env!("CARGO_BIN_EXE_web_replica"))
            .args(["--url", url, "--table", table, "--runs", runs])
            .args(["--owner", &format!("{label}-{}", std::process::id())])
            .args(["--work-ms", "100"])
            .env(
                "RUST_LOG",
                std::env::var("WEB_REPLICA_LOG").unwrap_or_else(|_| "info".to_owned()),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .expect("start web_replica");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = BufReader::new(stdout).lines();
        let line = tokio::time::timeout(START_WAIT, lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("{label}: no port within {START_WAIT:?}:\n{}", tail(&log)))
            .expect("read the replica's output")
            .unwrap_or_else(|| panic!("{label} exited before printing its port:\n{}", tail(&log)));
        let port = line
            .strip_prefix("{\"port\":")
            .and_then(|rest| rest.strip_suffix('}'))
            .and_then(|port| port.parse().ok())
            .unwrap_or_else(|| panic!("{label}: not a port line: {line}"));
        Self {
            _child: child,
            port,
            log,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// Sends `per_replica` requests of `path` to every replica at once; the answers.
async fn burst(
    client: &HttpClient,
    replicas: &[Replica],
    path: &str,
    per_replica: usize,
) -> Vec<Answer> {
    let mut calls = tokio::task::JoinSet::new();
    for replica in replicas {
        for _ in 0..per_replica {
            let (client, url) = (client.clone(), replica.url(path));
            calls.spawn(async move { get_answer(&client, &url).await });
        }
    }
    calls.join_all().await.into_iter().collect::<Vec<Answer>>()
}

/// Two requests at a time to each replica, back to back, for `window`: the answers.
async fn steady_stream(client: &HttpClient, replicas: &[Replica], window: Duration) -> Vec<Answer> {
    let until = Instant::now() + window;
    let mut streams = tokio::task::JoinSet::new();
    for replica in replicas {
        for _ in 0..2 {
            let (client, url) = (client.clone(), replica.url("/run/steady"));
            streams.spawn(async move {
                let mut answers = Vec::new();
                while Instant::now() < until {
                    answers.push(get_answer(&client, &url).await);
                }
                answers
            });
        }
    }
    streams.join_all().await.into_iter().flatten().collect()
}

/// One run recorded by a replica's handler, by the database's clock (microseconds).
#[derive(Debug)]
struct Run {
    job: String,
    owner: String,
    token: Option<i64>,
    started: i64,
    finished: Option<i64>,
}

/// A row of the runs table: job, owner, token, started, finished.
type RunRow = (String, String, Option<i64>, i64, Option<i64>);

async fn runs(conn: &mut PgConnection, table: &str) -> Vec<Run> {
    let rows: Vec<RunRow> = sqlx::query_as(AssertSqlSafe(format!(
        "SELECT job, owner, token, \
                    (extract(epoch FROM started) * 1000000)::bigint, \
                    (extract(epoch FROM finished) * 1000000)::bigint \
             FROM {table} ORDER BY job, started, id"
    )))
    .fetch_all(conn)
    .await
    .expect("read the runs");
    rows.into_iter()
        .map(|(job, owner, token, started, finished)| Run {
            job,
            owner,
            token,
            started,
            finished,
        })
        .collect()
}

/// A burst of 4 requests to each replica at once on `/once/r{round}`: one runs, 11 get 409.
async fn once_burst(
    client: &HttpClient,
    replicas: &[Replica],
    round: usize,
    logs_of: &dyn Fn() -> String,
) {
    let answers = burst(client, replicas, &format!("/once/r{round}"), 4).await;
    let ran = answers
        .iter()
        .filter(|a| a.status == StatusCode::OK)
        .count();
    let held = answers
        .iter()
        .filter(|a| a.status == StatusCode::CONFLICT)
        .count();
    assert_eq!(
        (ran, held),
        (1, 11),
        "round {round}: {answers:?}\n{}",
        logs_of()
    );
    assert!(
        answers
            .iter()
            .filter(|a| a.status == StatusCode::CONFLICT)
            .all(|a| a.retry_after.is_none() && a.body.contains("is held")),
        "409 without Retry-After by default: {answers:?}"
    );
}

/// The runs of one job, in order of start: each starts after the previous one finished (the
/// database's clock), with a higher fencing token.
fn check_sequential(runs: &[&Run], logs_of: &dyn Fn() -> String) {
    for pair in runs.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        let a_end = a.finished.expect("every answered run finished");
        assert!(
            b.started >= a_end,
            "overlapping runs: {a:?} and {b:?}\n{}",
            logs_of()
        );
        assert!(
            b.token > a.token,
            "fencing tokens must increase: {a:?}, {b:?}"
        );
    }
}

/// The steady stream's answers: only 200 and 409, a few runs, some skips, and `Retry-After` on at
/// least one 409, within the lock's `at_most`. The number of runs.
fn check_steady(answers: &[Answer], logs_of: &dyn Fn() -> String) -> usize {
    let ran = answers
        .iter()
        .filter(|a| a.status == StatusCode::OK)
        .count();
    let others: Vec<&Answer> = answers
        .iter()
        .filter(|a| a.status != StatusCode::OK && a.status != StatusCode::CONFLICT)
        .collect();
    assert!(
        others.is_empty(),
        "only 200 and 409: {others:?}\n{}",
        logs_of()
    );
    assert!(ran >= 3, "{ran} runs in 3 s of 100 ms runs");
    assert!(
        answers.len() > ran,
        "some requests met a held lock: {} answers, {ran} runs",
        answers.len()
    );
    // Retry-After, when the holder could still be read: at most the lock's at_most of 30 s. The
    // holder is read right after the skip, while a 100 ms run holds the lock, so at least one 409
    // of the stream carries it.
    let retry_afters: Vec<u64> = answers.iter().filter_map(|a| a.retry_after).collect();
    assert!(
        !retry_afters.is_empty(),
        "no 409 carried Retry-After: {answers:?}\n{}",
        logs_of()
    );
    assert!(
        retry_afters.iter().all(|&s| s <= 30),
        "Retry-After beyond at_most: {answers:?}"
    );
    assert!(
        answers
            .iter()
            .filter(|a| a.retry_after.is_some())
            .all(|a| a.status == StatusCode::CONFLICT),
        "Retry-After only on a 409: {answers:?}"
    );
    ran
}

#[tokio::test]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn three_web_replicas_run_each_request_once_answer_409_otherwise_and_never_overlap() {
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let table = testing::unique_table_name("shedlock_web");
    let runs_table = testing::unique_table_name("shedlock_web_runs");
    // The lock table before the replicas start, so that they do not race to create it.
    let provider = PgLockProvider::from_url(&url)
        .table(&table)
        .connect()
        .await
        .expect("connect");
    provider
        .create_table_if_not_exists()
        .await
        .expect("the lock table");
    let mut conn = PgConnection::connect(&url).await.expect("connect");
    sqlx::query(AssertSqlSafe(format!(
        "CREATE TABLE {runs_table} (id bigserial PRIMARY KEY, job text NOT NULL, \
         owner text NOT NULL, token bigint, started timestamptz NOT NULL, finished timestamptz)"
    )))
    .execute(&mut conn)
    .await
    .expect("the runs table");

    let logs = tempfile::tempdir().expect("a log directory");
    let mut replicas = Vec::new();
    for label in ["web-a", "web-b", "web-c"] {
        replicas.push(Replica::start(label, &url, &table, &runs_table, logs.path()).await);
    }
    let client = client();
    let logs_of = || {
        replicas
            .iter()
            .map(|r| format!("{}:\n{}", r.log.display(), tail(&r.log)))
            .collect::<Vec<_>>()
            .join("\n")
    };

    // Bursts: `/once/…` holds its lock 60 s at least, and each request of a burst is answered
    // within REQUEST_WAIT (20 s) of the burst's start or the test fails, so the whole burst falls
    // in one window however loaded the machine is. The database's runs table says one ran.
    for round in 0..3 {
        once_burst(&client, &replicas, round, &logs_of).await;
    }
    // A job outside the replica's known set names no lock: 404, and nothing runs.
    let unknown = get_answer(&client, &replicas[0].url("/once/not.a.job")).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND, "{unknown:?}");

    // A steady stream to all three, `at_least` 0: runs follow each other, never overlapping.
    let answers = steady_stream(&client, &replicas, Duration::from_secs(3)).await;
    let ran = check_steady(&answers, &logs_of);

    // The runs as the database saw them.
    let runs = runs(&mut conn, &runs_table).await;
    for round in 0..3 {
        let job = format!("once-r{round}");
        assert_eq!(
            runs.iter().filter(|r| r.job == job).count(),
            1,
            "{job}: {runs:?}"
        );
    }
    let steady: Vec<&Run> = runs.iter().filter(|r| r.job == "run-steady").collect();
    assert_eq!(steady.len(), ran, "one recorded run per 200");
    check_sequential(&steady, &logs_of);
    println!(
        "tower layer: {} answers, {ran} runs by {} replica(s)",
        answers.len(),
        steady
            .iter()
            .map(|r| r.owner.as_str())
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    );

    drop(replicas);
    for t in [&table, &runs_table] {
        let _ = sqlx::query(AssertSqlSafe(format!("DROP TABLE IF EXISTS {t}")))
            .execute(&mut conn)
            .await;
    }
}

/// The streamed route's state: where the handler leaves its body's sender, for the test to finish.
type Senders = Arc<Mutex<Vec<Sender<Bytes>>>>;

async fn stream(State(senders): State<Senders>) -> Body {
    let (mut tx, body) = Channel::<Bytes>::new(4);
    tx.send_data(Bytes::from_static(b"first\n"))
        .await
        .expect("the body is open");
    senders
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(tx);
    Body::new(body)
}

#[tokio::test]
async fn axum_streamed_body_streams_after_the_lock_is_released() {
    let executor = LockingTaskExecutor::new(InMemoryLockProvider::new()).expect("an executor");
    let layer = LockLayer::builder(
        executor.clone(),
        |_: &Request| Some("stream"),
        HttpRefusals::new(),
    )
    .at_most(Duration::from_mins(1))
    .build()
    .expect("valid");
    let senders = Senders::default();
    let app = Router::new()
        .route("/stream", get(stream))
        .route_layer(layer)
        .with_state(Arc::clone(&senders));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("an address").port();
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .await
    });

    let client = client();
    let uri: hyper::Uri = format!("http://127.0.0.1:{port}/stream")
        .parse()
        .expect("a URL");
    let response = tokio::time::timeout(REQUEST_WAIT, client.get(uri))
        .await
        .expect("headers in time")
        .expect("a response");
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();
    let first = body
        .frame()
        .await
        .expect("a frame")
        .expect("no error")
        .into_data()
        .expect("data");
    assert_eq!(first, "first\n");
    // The body is still open (its sender is held below), and the lock is already free.
    let cfg = LockConfig::new("stream", Duration::from_mins(1)).expect("valid");
    let guard = executor
        .try_lock(&cfg)
        .await
        .expect("the store answers")
        .expect("free while the body streams");
    guard.release().await.expect("released");
    let mut tx = senders
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .pop()
        .expect("the handler's sender");
    tx.send_data(Bytes::from_static(b"last\n"))
        .await
        .expect("the body is open");
    drop(tx);
    let rest = body.collect().await.expect("the rest").to_bytes();
    assert_eq!(rest, "last\n");
    let _ = stop.send(());
    server.await.expect("no panic").expect("served");
}

/// A handler that never returns: tells the test it started, then waits forever.
async fn forever(State(started): State<Arc<tokio::sync::Notify>>) -> &'static str {
    started.notify_one();
    std::future::pending::<()>().await;
    "unreachable"
}

#[tokio::test]
async fn axum_client_gone_frees_the_lock_at_once() {
    let executor = LockingTaskExecutor::new(InMemoryLockProvider::new()).expect("an executor");
    let layer = LockLayer::builder(
        executor.clone(),
        |_: &Request| Some("gone"),
        HttpRefusals::new(),
    )
    .at_most(Duration::from_mins(1))
    .build()
    .expect("valid");
    let started = Arc::new(tokio::sync::Notify::new());
    let app = Router::new()
        .route("/forever", get(forever))
        .route_layer(layer)
        .with_state(Arc::clone(&started));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("an address").port();
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    // A client on a connection of its own, closed while the handler runs.
    let mut connection = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    connection
        .write_all(b"GET /forever HTTP/1.1\r\nhost: localhost\r\n\r\n")
        .await
        .expect("send the request");
    tokio::time::timeout(REQUEST_WAIT, started.notified())
        .await
        .expect("the handler started");
    let cfg = LockConfig::new("gone", Duration::from_mins(1)).expect("valid");
    assert!(
        executor.try_lock(&cfg).await.expect("answers").is_none(),
        "held while the handler runs"
    );
    drop(connection);
    // The connection closes; the server drops the handler's future and the guard releases.
    let deadline = Instant::now() + REQUEST_WAIT;
    loop {
        if let Some(guard) = executor.try_lock(&cfg).await.expect("answers") {
            guard.release().await.expect("released");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the lock was not freed after the client left"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    server.abort();
}
