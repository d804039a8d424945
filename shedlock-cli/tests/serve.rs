//! `shedlock serve` end to end: the built binary serves the dashboard over each store, on a free
//! port of 127.0.0.1, and is stopped with SIGTERM or SIGINT. Requests go over a plain TCP
//! connection, HTTP/1.0, one per request.
//!
//! SQLite always runs, on a file of its own. Postgres, MariaDB, Redis and etcd come from
//! `SHEDLOCK_PG_URL`, `SHEDLOCK_MYSQL_URL`, `SHEDLOCK_REDIS_URL` and `SHEDLOCK_ETCD_URL`
//! (skipped with a notice without them, failed under `SHEDLOCK_REQUIRE_DB=1`). Every test uses a
//! table or key prefix of its own.

#![cfg(unix)]

use std::io::{BufRead as _, BufReader, Read as _};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use shedlock_core::admin::LockAdmin;
use shedlock_core::admin::model::JobView;
use shedlock_core::jobs::{Definition, RunOutcome, RunReport, VERSION};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

const MIN: Duration = Duration::from_mins(1);
const ALICE: &str = "alice-token-0123456789";
const BOB: &str = "bob-token-9876543210ab";
const READER: &str = "reader-token-abcdefghij";

/// A running `shedlock serve`.
struct Server {
    child: Child,
    /// `IP:PORT`, as printed.
    address: String,
    /// Its first line.
    banner: String,
}

impl Server {
    /// Starts `shedlock serve --listen 127.0.0.1:0` with `args`, `DATABASE_URL` = `url`, and waits
    /// for its first line.
    fn start(url: &str, args: &[&str]) -> Self {
        Self::start_on("127.0.0.1:0", url, args)
    }

    fn start_on(listen: &str, url: &str, args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_shedlock"))
            .args(["serve", "--listen", listen])
            .args(args)
            .env("DATABASE_URL", url)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start shedlock serve");
        let mut banner = String::new();
        let stdout = child.stdout.take().expect("its stdout");
        BufReader::new(stdout)
            .read_line(&mut banner)
            .expect("read its first line");
        if banner.is_empty() {
            let mut stderr = String::new();
            let _ = child
                .stderr
                .take()
                .map(|mut e| e.read_to_string(&mut stderr));
            let _ = child.wait();
            panic!("shedlock serve printed nothing; stderr: {stderr}");
        }
        let Some((address, _)) = banner
            .split("dashboard on http://")
            .nth(1)
            .and_then(|rest| rest.split_once("/ over "))
        else {
            panic!("no address in {banner:?}");
        };
        let address = address.to_owned();
        Self {
            child,
            address,
            banner,
        }
    }

    /// Sends `signal` (`TERM`, `INT`) and waits for the exit; returns its code and stderr.
    fn stop(mut self, signal: &str) -> (i32, String) {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &pid])
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -{signal} {pid}");
        let deadline = Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait for serve") {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "shedlock serve did not stop within 10 s of SIG{signal}"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut stderr = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            e.read_to_string(&mut stderr).expect("read its stderr");
        }
        (status.code().unwrap_or(-1), stderr)
    }

    async fn call(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
    ) -> (u16, String) {
        call(&self.address, method, path, headers, body).await
    }

    async fn jobs(&self, headers: &[(&str, &str)]) -> Vec<JobView> {
        let (status, body) = self.call("GET", "/api/jobs", headers, None).await;
        assert_eq!(status, 200, "{body}");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"))
    }
}

/// A test that failed before stopping its server leaves no process behind.
impl Drop for Server {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `method path` to `address` with `headers` and a JSON `body`; the status and the body. The
/// `Host` is `address` unless `headers` has one.
async fn call(
    address: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> (u16, String) {
    let body = body.unwrap_or_default();
    let mut lines = vec![format!("{method} {path} HTTP/1.0")];
    if !headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("host"))
    {
        lines.push(format!("Host: {address}"));
    }
    lines.extend(
        headers
            .iter()
            .map(|(name, value)| format!("{name}: {value}")),
    );
    if method == "POST" {
        lines.push("Content-Type: application/json".to_owned());
        lines.push(format!("Content-Length: {}", body.len()));
    }
    let request = format!("{}\r\n\r\n{body}", lines.join("\r\n"));
    let mut stream = TcpStream::connect(&address)
        .await
        .expect("connect to the dashboard");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("send the request");
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut response))
        .await
        .expect("an answer within 10 s")
        .expect("read the answer");
    let response = String::from_utf8_lossy(&response).into_owned();
    let (head, body) = response
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no end of headers in {response:?}"));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    (status, body.to_owned())
}

/// A file in `dir` holding `text`; its path.
fn file(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, text).expect("write a token file");
    path.display().to_string()
}

/// Records a run of the job `report` (lock `report-lock`) and publishes it.
async fn record_job(admin: &dyn LockAdmin) {
    let record = admin
        .acquire("report-lock", MIN, "serve-test:1:aa")
        .await
        .expect("acquire")
        .expect("free");
    let report = RunReport::new(chrono::Utc::now(), RunOutcome::Succeeded);
    assert!(
        admin
            .release_run(&record, Duration::ZERO, &report)
            .await
            .expect("release_run")
    );
    let definition = Definition::new(
        "report",
        "report-lock",
        r#"{"name":"report","lock_name":"report-lock","every":"5m"}"#,
    );
    admin
        .publish_definitions("serve-test:1:aa", VERSION, &[definition], MIN)
        .await
        .expect("publish");
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// The job `report` of `jobs`.
fn report(jobs: &[JobView]) -> &JobView {
    jobs.iter()
        .find(|j| j.job == "report")
        .unwrap_or_else(|| panic!("no job report in {jobs:?}"))
}

/// Everything over the store at `url` (`scope`: `--table` or `--key-prefix`), whose provider is
/// `admin`; the table (if any) made with `shedlock create-table` before.
async fn serve_store(url: &str, scope: &[&str], admin: Arc<dyn LockAdmin>) {
    record_job(&*admin).await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    read_only(url, scope).await;
    with_tokens(url, scope, &dir).await;
    with_a_read_token(url, scope, &dir).await;
}

/// Read-only: every POST is refused, with or without a token, and nothing changes; a loopback
/// bind refuses another host; the pages and the metrics answer.
async fn read_only(url: &str, scope: &[&str]) {
    let server = Server::start(url, scope);
    assert!(
        server
            .banner
            .contains("read-only (pass --token-file to allow actions)"),
        "{}",
        server.banner
    );
    assert!(!server.banner.contains(ALICE), "{}", server.banner);
    let (status, body) = server
        .call(
            "POST",
            "/api/jobs/report/pause",
            &[("Authorization", &bearer(ALICE))],
            Some("{}"),
        )
        .await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(report(&server.jobs(&[]).await).paused, None);
    // A loopback bind answers only requests for a loopback host (DNS rebinding).
    let (status, _) = server
        .call("GET", "/api/jobs", &[("Host", "evil.example")], None)
        .await;
    assert!((400..500).contains(&status), "evil.example got {status}");
    let (status, _) = server
        .call("GET", "/api/jobs", &[("Host", "localhost")], None)
        .await;
    assert_eq!(status, 200);
    let (status, metrics) = server.call("GET", "/metrics", &[], None).await;
    assert_eq!(status, 200, "{metrics}");
    assert!(metrics.contains("shedlock_store_"), "{metrics}");
    let (status, page) = server.call("GET", "/", &[], None).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("data-job=\"report\""), "{page}");
    let (code, stderr) = server.stop("TERM");
    assert_eq!(code, 0, "stderr: {stderr}");
    assert!(
        stderr.is_empty(),
        "a loopback bind warns of nothing: {stderr}"
    );
}

/// With tokens: no token or a wrong one is 401 and changes nothing; bob's pause is bob's, and
/// alice's resume alice's.
async fn with_tokens(url: &str, scope: &[&str], dir: &tempfile::TempDir) {
    let tokens = file(
        dir,
        "tokens",
        &format!("# who may act\nalice:{ALICE}\n\nbob: {BOB}\n"),
    );
    let server = Server::start(url, &[scope, &["--token-file", &tokens]].concat());
    assert!(
        server
            .banner
            .contains("actions allowed for tokens: alice, bob"),
        "{}",
        server.banner
    );
    for headers in [
        &[][..],
        &[("Authorization", "Bearer not-a-token-of-the-file")],
    ] {
        let (status, body) = server
            .call("POST", "/api/jobs/report/pause", headers, Some("{}"))
            .await;
        assert_eq!(status, 401, "{headers:?}: {body}");
    }
    assert_eq!(report(&server.jobs(&[]).await).paused, None);
    let (status, body) = server
        .call(
            "POST",
            "/api/jobs/report/pause",
            &[("Authorization", &bearer(BOB))],
            Some(r#"{"for":"30m","reason":"upstream down"}"#),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let job = server.jobs(&[]).await;
    let paused = report(&job).paused.as_ref().expect("paused");
    assert_eq!(
        (paused.by.as_str(), paused.reason.as_deref()),
        ("bob", Some("upstream down"))
    );
    let (status, body) = server
        .call(
            "POST",
            "/api/jobs/report/resume",
            &[("Authorization", &bearer(ALICE))],
            Some("{}"),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let job = server.jobs(&[]).await;
    assert_eq!(report(&job).paused, None);
    let action = report(&job).last_action.as_ref().expect("recorded");
    assert_eq!(action.by, "alice");
    let (code, stderr) = server.stop("INT");
    assert_eq!(code, 0, "stderr: {stderr}");
}

/// A read token: reading needs it too.
async fn with_a_read_token(url: &str, scope: &[&str], dir: &tempfile::TempDir) {
    let read = file(dir, "read", &format!("{READER}\n"));
    let server = Server::start(url, &[scope, &["--read-token-file", &read]].concat());
    let (status, _) = server.call("GET", "/api/jobs", &[], None).await;
    assert_eq!(status, 401);
    assert_eq!(
        report(&server.jobs(&[("Authorization", &bearer(READER))]).await).paused,
        None
    );
    let (code, stderr) = server.stop("TERM");
    assert_eq!(code, 0, "stderr: {stderr}");
}

/// A SQL store's table, made by `shedlock create-table`.
fn create_table(url: &str, table: &str) {
    let output = Command::new(env!("CARGO_BIN_EXE_shedlock"))
        .args(["create-table", "--table", table])
        .env("DATABASE_URL", url)
        .output()
        .expect("run create-table");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A table name of this test process.
fn table(store: &str) -> String {
    format!("serve_{store}_{}", std::process::id())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_sqlite() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("locks.db").display()
    );
    let table = table("lite");
    create_table(&url, &table);
    let admin = shedlock_sqlx::SqliteLockProvider::from_url(&url)
        .table(&table)
        .connect()
        .await
        .expect("open SQLite");
    serve_store(&url, &["--table", &table], Arc::new(admin)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn serves_postgres() {
    let Some(url) = shedlock_sqlx::testing::postgres_url() else {
        return;
    };
    let table = table("pg");
    create_table(&url, &table);
    let admin = shedlock_sqlx::PgLockProvider::from_url(&url)
        .table(&table)
        .connect()
        .await
        .expect("connect to Postgres");
    serve_store(&url, &["--table", &table], Arc::new(admin)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_mysql), ignore = "needs SHEDLOCK_MYSQL_URL (MySQL)")]
async fn serves_mariadb() {
    let Some(url) = shedlock_sqlx::testing::mysql_url() else {
        return;
    };
    let table = table("my");
    create_table(&url, &table);
    let admin = shedlock_sqlx::MySqlLockProvider::from_url(&url)
        .table(&table)
        .connect()
        .await
        .expect("connect to MariaDB");
    serve_store(&url, &["--table", &table], Arc::new(admin)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn serves_redis() {
    let Some(url) = shedlock_redis::testing::redis_url() else {
        return;
    };
    let prefix = shedlock_redis::testing::unique_prefix("cli-serve");
    let admin = shedlock_redis::RedisLockProvider::builder(url.as_str())
        .key_prefix(&prefix)
        .connect()
        .await
        .expect("redis");
    serve_store(&url, &["--key-prefix", &prefix], Arc::new(admin)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_etcd), ignore = "needs SHEDLOCK_ETCD_URL (etcd)")]
async fn serves_etcd() {
    let Some(url) = shedlock_etcd::testing::etcd_url() else {
        return;
    };
    let prefix = shedlock_etcd::testing::unique_prefix();
    let admin = shedlock_etcd::EtcdLockProvider::builder(url.as_str())
        .prefix(&prefix)
        .build()
        .expect("etcd");
    serve_store(&url, &["--key-prefix", &prefix], Arc::new(admin)).await;
}

/// Token file mistakes, a port in use, a wide bind: each a clear message, exit 2 or a warning;
/// never a token printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mistakes_and_a_bind_beyond_loopback() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("l.db").display());
    create_table(&url, "shedlock");
    let serve = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_shedlock"))
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .env("DATABASE_URL", &url)
            .output()
            .expect("run serve");
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        assert!(stderr.starts_with("shedlock: "), "{stderr}");
        assert!(output.stdout.is_empty(), "nothing served");
        stderr
    };
    let missing = dir.path().join("nope").display().to_string();
    let err = serve(&["--token-file", &missing]);
    assert!(
        err.contains("cannot read the token file") && err.contains("nope"),
        "{err}"
    );
    let empty = file(&dir, "empty", "# nobody yet\n\n");
    let err = serve(&["--token-file", &empty]);
    assert!(err.contains("has no token"), "{err}");
    let bad = file(&dir, "bad", &format!("alice:{ALICE}\n{BOB}\n"));
    let err = serve(&["--token-file", &bad]);
    assert!(err.contains("line 2 has no `:`"), "{err}");
    assert!(!err.contains(BOB) && !err.contains(ALICE), "{err}");
    let short = file(&dir, "short", "alice:abc123\n");
    let err = serve(&["--token-file", &short]);
    assert!(err.contains("line 1"), "{err}");
    assert!(!err.contains("abc123"), "{err}");
    let read_empty = file(&dir, "read-empty", "\n");
    let err = serve(&["--read-token-file", &read_empty]);
    assert!(err.contains("has no token"), "{err}");

    // A port in use: one line, exit 2.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let address = taken.local_addr().expect("its address").to_string();
    let output = Command::new(env!("CARGO_BIN_EXE_shedlock"))
        .args(["serve", "--listen", &address])
        .env("DATABASE_URL", &url)
        .output()
        .expect("run serve");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with(&format!("shedlock: cannot listen on {address}: "))
            && stderr.lines().count() == 1,
        "{stderr}"
    );

    // Every address: a warning on stderr, and any Host is answered.
    let server = Server::start_on("0.0.0.0:0", &url, &[]);
    assert!(
        server
            .banner
            .starts_with("shedlock serve: dashboard on http://0.0.0.0:"),
        "{}",
        server.banner
    );
    let port = server
        .address
        .rsplit_once(':')
        .map(|(_, p)| p.to_owned())
        .expect("a port");
    let (status, _) = call(
        &format!("127.0.0.1:{port}"),
        "GET",
        "/api/jobs",
        &[("Host", "dashboard.example")],
        None,
    )
    .await;
    assert_eq!(status, 200);
    let (code, stderr) = server.stop("TERM");
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("warning: ") && stderr.contains("reachable from the network"),
        "{stderr}"
    );
}

/// Behind a reverse proxy on the same machine that passes the browser's `Host` on: that name is
/// allowed, others still refused, and an action from the proxy's page is taken.
#[tokio::test]
async fn a_proxys_host_is_allowed_on_loopback() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("p.db").display());
    create_table(&url, "shedlock");
    let tokens = file(&dir, "tokens", &format!("alice:{ALICE}\n"));
    let server = Server::start(
        &url,
        &["--token-file", &tokens, "--allow-host", "dash.example"],
    );
    let (status, body) = server
        .call("GET", "/api/locks", &[("Host", "dash.example")], None)
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, _) = server
        .call("GET", "/api/locks", &[("Host", "evil.example")], None)
        .await;
    assert_eq!(status, 403);
    let (status, body) = server
        .call(
            "POST",
            "/api/jobs/report/pause",
            &[
                ("Host", "dash.example"),
                ("Origin", "https://dash.example"),
                ("Authorization", &bearer(ALICE)),
            ],
            Some("{}"),
        )
        .await;
    // No job "report" and no row: the action passed the Host and Origin checks to the store.
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("there is no job named"), "{body}");
    let (code, stderr) = server.stop("TERM");
    assert_eq!(code, 0, "{stderr}");
}

/// What the dashboard would refuse in the token files is refused before any connection: here to
/// a port nobody serves, so a connection would fail first.
#[test]
fn token_mistakes_are_refused_before_connecting() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    // The dashboard's own refusals come before any connection: here to a port nobody serves.
    let unreachable = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_shedlock"))
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .env("DATABASE_URL", "postgres://postgres@127.0.0.1:1/nowhere")
            .output()
            .expect("run serve");
        assert_eq!(output.status.code(), Some(2));
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let short = file(&dir, "short", "alice:abc123\n");
    let err = unreachable(&["--token-file", &short]);
    assert!(
        err.contains("at least 16") && !err.contains("connect"),
        "{err}"
    );
    let spaced = file(&dir, "spaced", "alice:has spaces in the token\n");
    let err = unreachable(&["--token-file", &spaced]);
    assert!(
        err.contains("without spaces") && !err.contains("connect"),
        "{err}"
    );
    let same = file(&dir, "same", &format!("{ALICE}\n"));
    let actions = file(&dir, "actions", &format!("alice:{ALICE}\n"));
    let err = unreachable(&["--token-file", &actions, "--read-token-file", &same]);
    assert!(err.contains("holds an action token"), "{err}");
    assert!(!err.contains(ALICE), "{err}");
    // A byte order mark before a comment is no part of the file's lines.
    let bom = file(
        &dir,
        "bom",
        &format!("{}# ops\nalice:{ALICE}\n", "\u{feff}"),
    );
    let err = unreachable(&["--token-file", &bom]);
    assert!(err.contains("cannot connect"), "the file was read: {err}");
}
