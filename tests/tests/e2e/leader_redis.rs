//! Leader election with real processes on a real Redis (`SHEDLOCK_REDIS_URL`; skipped without
//! it, failing under `SHEDLOCK_REQUIRE_DB=1`).
//!
//! Three `replica leader` processes (the package's one binary, with a `redis://` URL) compete
//! for one election under a key prefix of the test's own, with the Postgres leader tests' short
//! timings (lease 3 s, renew every 1 s, renew deadline 2 s, followers every 500 ms + up to
//! 125 ms). Twice, the leader is killed with `kill -9` right after a renew; another replica must
//! lead within `lease + acquire_interval + jitter` (plus scheduling slack), never before the dead
//! leader's lock expired by the Redis clock, and with a greater fencing token. Every wait polls
//! with a deadline.

use std::fmt::Write as _;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use shedlock_core::provider::{LockProvider, LockRecord};
use shedlock_demo::event::Event;
use shedlock_redis::redis::{self, AsyncCommands as _};
use shedlock_redis::{RedisLockProvider, testing};
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};
use tokio::time::Instant;

const LEASE: Duration = Duration::from_secs(3);
const RENEW: Duration = Duration::from_secs(1);
const ACQUIRE: Duration = Duration::from_millis(500);
const JITTER: Duration = Duration::from_millis(125);
const CALL_TIMEOUT: Duration = Duration::from_millis(500);
/// Scheduling and round-trip allowance on a loaded machine, added to upper bounds.
const SLACK: Duration = Duration::from_millis(500);

type Reports = Arc<Mutex<Vec<(Instant, Event)>>>;

fn spawn(label: &str, url: &str, prefix: &str, reports: &Reports, logs: &std::path::Path) -> Child {
    let ms = |d: Duration| format!("{}ms", d.as_millis());
    let log = std::fs::File::create(logs.join(format!("{label}.log"))).expect("a log file");
    let mut child = Command::new(env!("CARGO_BIN_EXE_replica"))
        .arg("leader")
        .args([
            "--replica",
            label,
            "--election",
            "leader",
            "--lock-table",
            prefix,
        ])
        .args(["--lease", &ms(LEASE), "--renew", &ms(RENEW)])
        .args(["--renew-deadline", "2000ms", "--acquire", &ms(ACQUIRE)])
        .args([
            "--acquire-jitter",
            &ms(JITTER),
            "--call-timeout",
            &ms(CALL_TIMEOUT),
        ])
        .arg("--stop-on-eof")
        .env("DATABASE_URL", url)
        .env("RUST_LOG", "info")
        .env_remove("SHEDLOCK_OWNER_ID")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .expect("spawn a replica");
    let stdout = child.stdout.take().expect("piped stdout");
    let reports = Arc::clone(reports);
    tokio::spawn(async move {
        let mut lines = BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(event) = Event::parse(&line) {
                reports
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push((Instant::now(), event));
            }
        }
    });
    child
}

/// The last lines of each replica's log, for a failure message.
fn log_tails(logs: &std::path::Path) -> String {
    let mut text = String::new();
    for label in ["r1", "r2", "r3"] {
        let log = std::fs::read_to_string(logs.join(format!("{label}.log"))).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        let tail = lines[lines.len().saturating_sub(10)..].join("\n");
        let _ = writeln!(text, "--- {label}\n{tail}");
    }
    text
}

/// Polls `find` every 20 ms until it answers; panics after `within`.
async fn wait_for<T>(what: &str, within: Duration, mut find: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(found) = find().await {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The first `elected` report received after `after`: (replica, token, received at).
fn elected_after(reports: &Reports, after: Instant) -> Option<(String, Option<i64>, Instant)> {
    reports
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .find_map(|(at, event)| match event {
            Event::Elected { replica, token, .. } if *at > after => {
                Some((replica.clone(), *token, *at))
            }
            _ => None,
        })
}

#[tokio::test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn kill_9_of_the_leader_fails_over_within_lease_and_one_attempt() {
    let Some(url) = testing::redis_url() else {
        return;
    };
    let prefix = testing::unique_prefix("leader");
    let store = RedisLockProvider::builder(url.as_str())
        .key_prefix(prefix.clone())
        .connect()
        .await
        .expect("connect to SHEDLOCK_REDIS_URL");
    let logs = tempfile::tempdir().expect("a log directory");
    let reports = Reports::default();
    let mut procs: Vec<(String, Child)> = ["r1", "r2", "r3"]
        .iter()
        .map(|label| {
            (
                (*label).to_owned(),
                spawn(label, &url, &prefix, &reports, logs.path()),
            )
        })
        .collect();
    let start = Instant::now();
    let (mut leader, mut token, _) =
        wait_for("a first leader", Duration::from_secs(20), async || {
            elected_after(&reports, start)
        })
        .await;
    let bound = LEASE + ACQUIRE + JITTER + SLACK;
    for round in 0..2 {
        // Right after a renew: the row's lock_until moves on with the same token.
        let first = store
            .holder("leader")
            .await
            .unwrap()
            .expect("the leader's row");
        assert_eq!(first.fencing_token(), token, "round {round}: {first}");
        let renewed: LockRecord = wait_for("a renew", RENEW + CALL_TIMEOUT + SLACK, async || {
            store
                .holder("leader")
                .await
                .ok()
                .flatten()
                .filter(|r| r.fencing_token() == token && r.lock_until() > first.lock_until())
        })
        .await;
        let (_, child) = procs
            .iter_mut()
            .find(|(label, _)| *label == leader)
            .expect("the leader's process");
        let killed = Instant::now();
        child.start_kill().expect("SIGKILL the leader");
        let _ = child.wait().await;

        let (next, next_token, at) = wait_for("the next leader", bound, async || {
            elected_after(&reports, killed).filter(|(who, _, _)| *who != leader)
        })
        .await;
        let failover = at - killed;
        let row = store
            .holder("leader")
            .await
            .unwrap()
            .expect("the new leader's row");
        eprintln!(
            "round {round}: {next} leads {failover:?} after kill -9 of {leader} \
             ({:.2} leases, {:.2} acquire intervals)",
            failover.as_secs_f64() / LEASE.as_secs_f64(),
            failover.as_secs_f64() / ACQUIRE.as_secs_f64()
        );
        assert!(
            failover < bound,
            "failover took {failover:?}; logs:\n{}",
            log_tails(logs.path())
        );
        assert!(
            row.locked_at() >= renewed.lock_until(),
            "taken over at {} before the dead leader's lock ended at {} (Redis clock)",
            row.locked_at(),
            renewed.lock_until()
        );
        assert!(
            next_token > token,
            "tokens must increase: {next_token:?} after {token:?}"
        );
        (leader, token) = (next, next_token);
    }

    // Stop the survivors (standard input closes), then delete this test's keys.
    for (_, child) in &mut procs {
        drop(child.stdin.take());
        let _ = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
    }
    let mut conn = redis::Client::open(url.as_str())
        .expect("a valid URL")
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let _: () = conn.del(store.key("leader")).await.expect("DEL");
}
