//! `RedisLockProvider` against a private, throwaway `redis-server` of the test's own (free port,
//! temporary directory, no persistence), which the tests kill, restart and freeze (`SIGSTOP`):
//! the shared server is never touched. Skipped without `redis-server` on the `PATH`, failing
//! under `SHEDLOCK_REQUIRE_DB=1`.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use chrono::Utc;
use shedlock_core::provider::{ClaimRequest, Fire, FireClaim, LockProvider};
use shedlock_redis::redis;
use shedlock_redis::{RedisLockProvider, testing};
use tokio::time::Instant;

const CALL_TIMEOUT: Duration = Duration::from_secs(1);
/// Scheduling allowance on a loaded machine, added to upper bounds.
const SLACK: Duration = Duration::from_millis(700);

/// A `redis-server` of this test's own, killed (by its PID) when dropped, even on a panic.
struct PrivateRedis {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
    extra: Vec<String>,
}

impl PrivateRedis {
    /// Starts one on a free port, or `None` (after a skip notice) without `redis-server`.
    async fn start() -> Option<Self> {
        Self::start_with(&[]).await
    }

    /// [`start`](Self::start) with extra `redis-server` arguments.
    async fn start_with(extra: &[&str]) -> Option<Self> {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
            listener.local_addr().expect("its address").port()
        };
        let mut server = Self {
            child: None,
            port,
            dir: tempfile::tempdir().expect("a temporary directory"),
            extra: extra.iter().map(|&a| a.to_owned()).collect(),
        };
        match server.spawn() {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                assert!(
                    !testing::db_required(),
                    "redis-server is not installed, and {}=1 requires it",
                    testing::REQUIRE_DB_ENV
                );
                eprintln!("skipping: redis-server is not installed");
                return None;
            }
            Err(e) => panic!("cannot start redis-server: {e}"),
        }
        server.wait_ready().await;
        Some(server)
    }

    fn spawn(&mut self) -> std::io::Result<()> {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        self.child = Some(child);
        Ok(())
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Polls `PING` until it answers (10 s at most).
    async fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let client = redis::Client::open(self.url()).expect("a valid URL");
        loop {
            if let Ok(mut conn) = client.get_multiplexed_async_connection().await
                && redis::cmd("PING")
                    .query_async::<String>(&mut conn)
                    .await
                    .is_ok()
            {
                return;
            }
            assert!(Instant::now() < deadline, "redis-server did not start");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// `kill -9`, and waits until it is gone.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    async fn restart(&mut self) {
        self.kill();
        self.spawn().expect("restart redis-server");
        self.wait_ready().await;
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill {signal} failed");
    }

    async fn command(&self, cmd: &redis::Cmd) -> redis::Value {
        let client = redis::Client::open(self.url()).expect("a valid URL");
        let mut conn = client
            .get_multiplexed_async_connection()
            .await
            .expect("connect");
        cmd.query_async(&mut conn).await.expect("the command")
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        if let Some(child) = &self.child {
            // A frozen server dies of SIGKILL too; this is its own PID, nobody else's.
            let _ = Command::new("kill")
                .args(["-CONT", &child.id().to_string()])
                .status();
        }
        self.kill();
    }
}

async fn provider(server: &PrivateRedis) -> RedisLockProvider {
    RedisLockProvider::builder(server.url().as_str())
        .call_timeout(CALL_TIMEOUT)
        .connect()
        .await
        .expect("connect to the private server")
}

#[tokio::test]
async fn a_restart_forgets_locks_as_documented_keeps_tokens_increasing_and_reloads_scripts() {
    let Some(mut server) = PrivateRedis::start().await else {
        return;
    };
    let p = provider(&server).await;
    let minute = Duration::from_mins(1);
    let held = p
        .acquire("job", Duration::from_mins(10), "a")
        .await
        .unwrap()
        .expect("free");
    let now = Utc::now();
    let fire = Fire::new(
        now - chrono::Duration::seconds(5),
        now + chrono::Duration::minutes(5),
    )
    .unwrap();
    let claim = p.claim_fire("fired", &fire, minute, "a").await.unwrap();
    assert!(claim.claimed().is_some(), "{claim:?}");

    // Down: calls fail, each within its timeout.
    server.kill();
    for _ in 0..3 {
        let start = Instant::now();
        let err = p.acquire("job", minute, "b").await.unwrap_err();
        let took = start.elapsed();
        assert!(err.is_backend() || err.is_timeout(), "{err}");
        assert!(
            took < CALL_TIMEOUT + SLACK,
            "a call during the outage took {took:?}"
        );
    }

    // Back, empty (no persistence), without any script loaded: the very first call succeeds.
    server.restart().await;
    let scripts = server.command(redis::cmd("INFO").arg("memory")).await;
    let info = match scripts {
        redis::Value::BulkString(bytes) => String::from_utf8(bytes).unwrap(),
        redis::Value::VerbatimString { text, .. } => text,
        other => panic!("{other:?}"),
    };
    assert!(info.contains("number_of_cached_scripts:0"), "{info}");
    let taken = p
        .acquire("job", minute, "b")
        .await
        .expect("the first call after the restart")
        .expect("a restarted Redis without persistence has forgotten the held lock");
    assert!(
        taken.fencing_token() > held.fencing_token(),
        "tokens go on increasing: {taken} after {held}"
    );
    // The forgotten holder's late release and extend spare the new holder.
    assert!(!p.release(&held, Duration::ZERO).await.unwrap());
    assert!(p.extend(&held, minute).await.unwrap().is_none());
    assert_eq!(p.holder("job").await.unwrap().as_ref(), Some(&taken));
    // The recorded fire is forgotten too: the fire can be claimed again (documented).
    assert!(matches!(
        p.claim_fire("fired", &fire, minute, "b").await.unwrap(),
        FireClaim::Claimed(_)
    ));

    // Scripts flushed by hand: NOSCRIPT, loaded again, the call succeeds.
    server.command(redis::cmd("SCRIPT").arg("FLUSH")).await;
    assert!(p.release(&taken, Duration::ZERO).await.unwrap());
    let again = p.acquire("job", minute, "c").await.unwrap().expect("free");
    assert!(again.fencing_token() > taken.fencing_token());
}

#[tokio::test]
async fn a_frozen_server_times_calls_out_and_they_recover_after() {
    let Some(server) = PrivateRedis::start().await else {
        return;
    };
    let p = provider(&server).await;
    let minute = Duration::from_mins(1);
    let record = p.acquire("job", minute, "a").await.unwrap().expect("free");

    // SIGSTOP: the socket stays open, nothing answers (a black hole).
    server.signal("-STOP");
    let start = Instant::now();
    let err = p.extend(&record, minute).await.unwrap_err();
    let took = start.elapsed();
    assert!(err.is_timeout(), "{err}");
    assert!(
        took >= CALL_TIMEOUT && took < CALL_TIMEOUT + SLACK,
        "timed out after {took:?}"
    );
    let err = p.holder("job").await.unwrap_err();
    assert!(err.is_timeout(), "{err}");

    server.signal("-CONT");
    let deadline = Instant::now() + Duration::from_secs(10);
    let extended = loop {
        match p.extend(&record, minute).await {
            Ok(extended) => break extended,
            Err(e) => assert!(Instant::now() < deadline, "no recovery: {e}"),
        }
    };
    assert!(extended.is_some(), "the lock survived the freeze");
    assert!(p.release(&record, Duration::ZERO).await.unwrap());
}

/// The server's per-command call counts (`INFO commandstats`), without the commands of this
/// test's own inspection connection and of connection set-up.
async fn command_counts(server: &PrivateRedis) -> std::collections::BTreeMap<String, u64> {
    let info = match server.command(redis::cmd("INFO").arg("commandstats")).await {
        redis::Value::BulkString(bytes) => String::from_utf8(bytes).unwrap(),
        redis::Value::VerbatimString { text, .. } => text,
        other => panic!("{other:?}"),
    };
    info.lines()
        .filter_map(|line| {
            let (name, stats) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = stats.split(',').find_map(|s| s.strip_prefix("calls="))?;
            Some((name.to_owned(), calls.parse().ok()?))
        })
        .filter(|(name, _)| {
            !matches!(name.as_str(), "info" | "config|resetstat") && !name.starts_with("client|")
        })
        .collect()
}

/// Counted by the server itself: every operation is one `EVALSHA` and nothing else, once the
/// scripts are loaded; `list` is one `SCAN` step and one `EVAL` per key, pipelined.
#[tokio::test]
async fn each_operation_is_one_evalsha() {
    use shedlock_core::admin::LockAdmin;
    let Some(server) = PrivateRedis::start().await else {
        return;
    };
    let p = provider(&server).await;
    let minute = Duration::from_mins(1);
    let now = Utc::now();
    let fire = Fire::new(
        now - chrono::Duration::seconds(5),
        now + chrono::Duration::minutes(5),
    )
    .unwrap();
    // Load every script once (NOSCRIPT, SCRIPT LOAD, EVALSHA).
    let warm = p.acquire("warm", minute, "a").await.unwrap().expect("free");
    p.extend(&warm, minute).await.unwrap();
    p.holder("warm").await.unwrap();
    p.entry("warm").await.unwrap();
    p.claim_fire("warm", &fire, minute, "a").await.unwrap();
    p.unlock(&warm, "test").await.unwrap();
    p.force_unlock("warm", "test").await.unwrap();
    p.release(&warm, Duration::ZERO).await.unwrap();
    server.command(redis::cmd("CONFIG").arg("RESETSTAT")).await;

    let record = p.acquire("job", minute, "a").await.unwrap().expect("free");
    for _ in 0..5 {
        assert!(
            p.acquire("job", minute, "b").await.unwrap().is_none(),
            "a skip"
        );
    }
    assert!(p.extend(&record, minute).await.unwrap().is_some());
    assert!(p.holder("job").await.unwrap().is_some());
    assert!(p.entry("job").await.unwrap().is_some());
    assert!(matches!(
        p.claim_fire("job", &fire, minute, "b").await.unwrap(),
        FireClaim::Held { .. }
    ));
    assert!(p.release(&record, Duration::ZERO).await.unwrap());
    assert!(p.force_unlock("job", "test").await.unwrap().is_none());
    assert!(!p.unlock(&record, "test").await.unwrap());
    let counts = command_counts(&server).await;
    // What clients sent: 13 EVALSHA, nothing else. Inside the scripts: one TIME and one HMGET
    // each, EXISTS once (the key was missing), and HSET only for the three operations that
    // wrote (acquire, extend, release): the skips, reads and refusals wrote nothing.
    let expected = [
        ("evalsha", 13),
        ("time", 13),
        ("hmget", 13),
        ("exists", 1),
        ("hset", 3),
    ];
    assert_eq!(
        counts,
        expected
            .map(|(c, n)| (c.to_owned(), n))
            .into_iter()
            .collect(),
        "13 operations"
    );

    // A pause, the paused claim it refuses, and the resume: one EVALSHA each. Pausing until
    // resumed without a reason writes the pause and clears an old end and reason; the paused
    // claim reads and writes nothing.
    let pause = shedlock_core::pause::PauseFor::UntilResumed;
    p.pause("warm", pause, None, "test").await.unwrap();
    p.resume("warm", "test").await.unwrap();
    server.command(redis::cmd("CONFIG").arg("RESETSTAT")).await;
    p.pause("job", pause, None, "test").await.unwrap();
    assert!(matches!(
        p.claim_fire("job", &fire, minute, "b").await.unwrap(),
        FireClaim::Paused { .. }
    ));
    assert!(p.resume("job", "test").await.unwrap().is_some());
    let counts = command_counts(&server).await;
    assert_eq!(
        counts,
        [
            ("evalsha", 3),
            ("time", 3),
            ("hmget", 3),
            ("hset", 2),
            ("hdel", 2)
        ]
        .map(|(c, n)| (c.to_owned(), n))
        .into_iter()
        .collect(),
        "pause, paused claim, resume"
    );

    server.command(redis::cmd("CONFIG").arg("RESETSTAT")).await;
    assert_eq!(p.list().await.unwrap().len(), 2);
    let counts = command_counts(&server).await;
    assert_eq!(
        counts,
        [("scan", 1), ("eval", 2), ("time", 2), ("hmget", 2)]
            .map(|(c, n)| (c.to_owned(), n))
            .into_iter()
            .collect(),
        "list of two locks"
    );
}

/// The calls of each command that failed (`failed_calls` of `INFO commandstats`), as `NOSCRIPT`.
async fn failed_calls(server: &PrivateRedis) -> u64 {
    let info = match server.command(redis::cmd("INFO").arg("commandstats")).await {
        redis::Value::BulkString(bytes) => String::from_utf8(bytes).unwrap(),
        redis::Value::VerbatimString { text, .. } => text,
        other => panic!("{other:?}"),
    };
    info.lines()
        .filter_map(|line| {
            let stats = line.strip_prefix("cmdstat_")?.split_once(':')?.1;
            stats
                .split(',')
                .find_map(|s| s.strip_prefix("failed_calls="))?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// Counted by the server: a batch of fire claims is one `SCRIPT LOAD` and one `EVALSHA` per
/// claim, sent together in one pipeline, and nothing fails, even on a server whose script cache
/// was just flushed (no `NOSCRIPT`, no second `EVALSHA`). A batch with one claim to send is the
/// single claim's one `EVALSHA`.
#[tokio::test]
async fn a_batch_of_fire_claims_is_one_pipeline_even_after_a_script_flush() {
    let Some(server) = PrivateRedis::start().await else {
        return;
    };
    let p = provider(&server).await;
    let minute = Duration::from_mins(1);
    let now = Utc::now();
    let fire = Fire::new(
        now - chrono::Duration::seconds(5),
        now + chrono::Duration::minutes(5),
    )
    .unwrap();
    // Warm: the script is loaded, then flushed by hand.
    p.claim_fire("warm", &fire, minute, "a").await.unwrap();
    for round in ["a", "b"] {
        server.command(redis::cmd("SCRIPT").arg("FLUSH")).await;
        server.command(redis::cmd("CONFIG").arg("RESETSTAT")).await;
        let names: Vec<String> = (0..5).map(|i| format!("{round}-{i}")).collect();
        let claims: Vec<ClaimRequest<'_>> = names
            .iter()
            .map(|name| ClaimRequest::new(name, &fire, minute))
            .collect();
        let answers = p.claim_fires(&claims, "a").await.expect("the batch");
        for (name, answer) in names.iter().zip(&answers) {
            match answer {
                Ok(FireClaim::Claimed(record)) => assert_eq!(record.name(), name),
                other => panic!("{name}: {other:?}"),
            }
        }
        // Inside each script: one HMGET, EXISTS (the key was missing), TIME and HSET.
        let expected = [
            ("script|load", 1),
            ("evalsha", 5),
            ("hmget", 5),
            ("exists", 5),
            ("time", 5),
            ("hset", 5),
        ];
        assert_eq!(
            command_counts(&server).await,
            expected
                .map(|(c, n)| (c.to_owned(), n))
                .into_iter()
                .collect(),
            "round {round}"
        );
        assert_eq!(failed_calls(&server).await, 0, "round {round}");
    }

    // One claim to send (the other's name is invalid): the single claim's one EVALSHA.
    server.command(redis::cmd("CONFIG").arg("RESETSTAT")).await;
    let claims = [
        ClaimRequest::new("", &fire, minute),
        ClaimRequest::new("c", &fire, minute),
    ];
    let answers = p.claim_fires(&claims, "a").await.expect("the batch");
    assert!(
        answers[0]
            .as_ref()
            .is_err_and(shedlock_core::Error::is_invalid_config)
    );
    assert!(
        matches!(answers[1], Ok(FireClaim::Claimed(_))),
        "{answers:?}"
    );
    assert_eq!(
        command_counts(&server).await,
        [
            ("evalsha", 1),
            ("hmget", 1),
            ("exists", 1),
            ("time", 1),
            ("hset", 1)
        ]
        .map(|(c, n)| (c.to_owned(), n))
        .into_iter()
        .collect(),
    );
}

/// Counted by the server: a recorded release with history is one `EVALSHA` too; inside it one
/// `HMGET`, `TIME` and `HSET` (as the plain release), then `LPUSH`, `LTRIM` and, with a
/// `max_age`, one `LINDEX` for the oldest entry.
#[tokio::test]
async fn release_run_with_history_is_one_evalsha() {
    use shedlock_core::jobs::{HistoryPolicy, RunOutcome, RunReport};
    let Some(server) = PrivateRedis::start().await else {
        return;
    };
    let p = RedisLockProvider::builder(server.url().as_str())
        .call_timeout(CALL_TIMEOUT)
        .history(HistoryPolicy::keep(5).max_age(Duration::from_hours(1)))
        .connect()
        .await
        .expect("connect to the private server");
    let minute = Duration::from_mins(1);
    let run = RunReport::new(Utc::now(), RunOutcome::Failed("no".into()));
    // Load the scripts once (NOSCRIPT, SCRIPT LOAD, EVALSHA).
    let warm = p.acquire("job", minute, "a").await.unwrap().expect("free");
    assert!(p.release_run(&warm, Duration::ZERO, &run).await.unwrap());
    let record = p.acquire("job", minute, "a").await.unwrap().expect("free");
    server.command(redis::cmd("CONFIG").arg("RESETSTAT")).await;

    assert!(p.release_run(&record, Duration::ZERO, &run).await.unwrap());
    let expected = [
        ("evalsha", 1),
        ("hmget", 1),
        ("time", 1),
        ("hset", 1),
        ("lpush", 1),
        ("ltrim", 1),
        ("lindex", 1),
    ];
    assert_eq!(
        command_counts(&server).await,
        expected
            .map(|(c, n)| (c.to_owned(), n))
            .into_iter()
            .collect(),
    );
}

/// The server's own `CLUSTER KEYSLOT` (a private server with cluster mode on): each lock's
/// history key is in its lock key's hash slot, whatever braces the prefix and name hold.
#[tokio::test]
async fn history_keys_are_in_the_lock_keys_slot_by_the_servers_count() {
    let Some(server) = PrivateRedis::start_with(&["--cluster-enabled", "yes"]).await else {
        return;
    };
    let slot = |key: Vec<u8>| {
        let server = &server;
        async move {
            match server
                .command(redis::cmd("CLUSTER").arg("KEYSLOT").arg(key))
                .await
            {
                redis::Value::Int(n) => n,
                other => panic!("{other:?}"),
            }
        }
    };
    for prefix in ["shedlock:", "{jobs}:", "a{", "}x{", "{}", "p{}q{r}:"] {
        let p = RedisLockProvider::builder(server.url().as_str())
            .key_prefix(prefix)
            .build()
            .unwrap();
        for name in [
            "report", "{", "}", "{}", "}{", "a{b}c", "{{}}", "x}y", "{x", "ü{✓}",
        ] {
            assert_eq!(
                slot(p.history_key(name)).await,
                slot(p.key(name)).await,
                "{prefix:?} {name:?}"
            );
        }
    }
}

/// A `tracing` writer into a shared buffer, to read what `connect` logged.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        let bytes = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// What `connect` to a server started with `args` logs at WARN (on this thread).
async fn connect_warnings(args: &[&str]) -> Option<String> {
    let server = PrivateRedis::start_with(args).await?;
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    provider(&server).await;
    Some(captured.text())
}

#[tokio::test(flavor = "current_thread")]
async fn connect_warns_when_the_server_may_evict_lock_keys() {
    let Some(logged) = connect_warnings(&["--maxmemory-policy", "allkeys-lru"]).await else {
        return;
    };
    assert!(logged.contains("WARN"), "{logged}");
    assert!(logged.contains("maxmemory-policy allkeys-lru"), "{logged}");
    // Lock keys have no TTL: a volatile policy never evicts them.
    let logged = connect_warnings(&["--maxmemory-policy", "volatile-lru"])
        .await
        .unwrap();
    assert!(logged.is_empty(), "{logged}");
    // CONFIG refused (renamed away, as on managed services): connect works, says nothing.
    let logged = connect_warnings(&["--rename-command", "CONFIG", ""])
        .await
        .unwrap();
    assert!(logged.is_empty(), "{logged}");
}

/// Counted by the server: `pending_triggers` is one `EVALSHA` on the triggers index (inside it
/// `TIME`, `ZREMRANGEBYSCORE` and `ZRANGE`) at 1 and at 1,000 locks with a trigger; a trigger and
/// its claim are one `EVALSHA` on the lock's hash and one on the index each.
#[tokio::test]
async fn pending_triggers_is_one_evalsha_whatever_the_number_of_locks() {
    use shedlock_core::admin::LockAdmin;
    use shedlock_core::trigger::{TriggerAnswer, TriggerClaim};
    let Some(server) = PrivateRedis::start().await else {
        return;
    };
    let p = provider(&server).await;
    let minute = Duration::from_mins(1);
    let requested = |answer| match answer {
        TriggerAnswer::Requested(trigger) => trigger,
        other => panic!("trigger answered {other:?}"),
    };
    // Load every script once, and leave "warm" a free record without a pending trigger.
    let warm = requested(p.trigger("warm", "ann", minute).await.unwrap());
    p.pending_triggers().await.unwrap();
    let claimed = p.claim_trigger("warm", warm.id, minute, "a").await.unwrap();
    let TriggerClaim::Claimed(record) = claimed else {
        panic!("the claim answered {claimed:?}");
    };
    p.release(&record, Duration::ZERO).await.unwrap();

    server.command(redis::cmd("CONFIG").arg("RESETSTAT")).await;
    let trigger = requested(p.trigger("warm", "ann", minute).await.unwrap());
    assert_eq!(
        command_counts(&server).await,
        [
            ("evalsha", 2),
            ("time", 2),
            ("hmget", 1),
            ("hset", 1),
            ("hdel", 1),
            ("zremrangebyscore", 1),
            ("zadd", 1),
            ("publish", 1),
        ]
        .map(|(c, n)| (c.to_owned(), n))
        .into_iter()
        .collect(),
        "a trigger on an existing record"
    );
    server.command(redis::cmd("CONFIG").arg("RESETSTAT")).await;
    let claimed = p
        .claim_trigger("warm", trigger.id, minute, "a")
        .await
        .unwrap();
    assert!(matches!(claimed, TriggerClaim::Claimed(_)), "{claimed:?}");
    assert_eq!(
        command_counts(&server).await,
        [
            ("evalsha", 2),
            ("time", 2),
            ("hmget", 1),
            ("hset", 1),
            ("zremrangebyscore", 1),
            ("zrange", 1),
            ("zrem", 1),
        ]
        .map(|(c, n)| (c.to_owned(), n))
        .into_iter()
        .collect(),
        "a claim that takes the trigger"
    );

    let mut triggered = 0;
    for locks in [1, 1_000] {
        while triggered < locks {
            requested(
                p.trigger(&format!("job-{triggered}"), "ann", minute)
                    .await
                    .unwrap(),
            );
            triggered += 1;
        }
        server.command(redis::cmd("CONFIG").arg("RESETSTAT")).await;
        assert_eq!(p.pending_triggers().await.unwrap().len(), locks);
        assert_eq!(
            command_counts(&server).await,
            [
                ("evalsha", 1),
                ("time", 1),
                ("zremrangebyscore", 1),
                ("zrange", 1)
            ]
            .map(|(c, n)| (c.to_owned(), n))
            .into_iter()
            .collect(),
            "pending_triggers with {locks} locks triggered"
        );
    }
}

/// The push: a watch wakes at a trigger, ends (`None`) when the server restarts, so that the
/// scheduler polls and watches again, and a new watch wakes again.
#[tokio::test]
async fn a_trigger_watch_wakes_and_ends_when_the_server_restarts() {
    use shedlock_core::admin::LockAdmin;
    let Some(mut server) = PrivateRedis::start().await else {
        return;
    };
    let p = provider(&server).await;
    let minute = Duration::from_mins(1);
    let within = Duration::from_secs(5);
    let mut watch = p.watch_triggers().await.unwrap();
    p.trigger("job", "ann", minute).await.unwrap();
    assert_eq!(
        tokio::time::timeout(within, watch.next()).await,
        Ok(Some(())),
        "a trigger wakes the watch"
    );
    server.restart().await;
    assert_eq!(
        tokio::time::timeout(within, watch.next()).await,
        Ok(None),
        "a lost connection ends the watch"
    );
    let mut watch = p.watch_triggers().await.unwrap();
    p.trigger("job", "ann", minute).await.unwrap();
    assert_eq!(
        tokio::time::timeout(within, watch.next()).await,
        Ok(Some(())),
        "a new watch wakes after the restart"
    );
}
