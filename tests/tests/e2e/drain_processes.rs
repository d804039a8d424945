//! Graceful drain with real processes and a real store (issue 11, item 4: "SIGTERM during a
//! run"). Each test starts the package's `drainer` program (a [`Scheduler`] over the store,
//! drained with `Scheduler::shutdown(grace)` on SIGTERM; see `shedlock_tests::drainer`), sends
//! it SIGTERM with `kill` while a run is in flight, and checks what its JSON lines and the store
//! say:
//!
//! - `grace_longer_than_the_run_*`: the run completes (not cancelled), the process exits, and a
//!   second replica runs the **next** fire on time — not after `at_most` (2 min, thirty periods),
//!   which is when it would run had the lock been left held;
//! - `grace_shorter_than_the_run_*`: the run sees the cancel signal through its `RunContext` and
//!   through `current_lock()`, no earlier than the grace; the process exits within grace + one
//!   call timeout of the SIGTERM; the lock is released (read back from the store: not held by
//!   its clock, `lock_until <= now`);
//! - `hundred_locks_*`: the same exit bound with 100 jobs' locks held at once, and all 100
//!   released;
//! - in both, every cancelled run observed the cancel before it was dropped.
//!
//! On Postgres, MySQL/MariaDB and Redis (`SHEDLOCK_PG_URL`, `SHEDLOCK_MYSQL_URL`,
//! `SHEDLOCK_REDIS_URL`; each skips visibly without its URL, and fails under
//! `SHEDLOCK_REQUIRE_DB=1`). Every wait polls the processes' lines (stamped on receipt) or the
//! store, with a deadline; nothing sleeps to synchronise. The drainers' logs (`RUST_LOG`, set
//! with `DRAIN_REPLICA_LOG`, default `info`) are shown when a check fails.
//!
//! [`Scheduler`]: shedlock_core::Scheduler

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use shedlock_core::admin::LockAdmin;
use shedlock_demo::database::Database;
use shedlock_tests::drainer::{DrainEvent, open_store};
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};
use tokio::time::Instant;

/// The per-call timeout of the drainers' executor and store.
const CALL_TIMEOUT: Duration = Duration::from_secs(2);
/// Far beyond every period, so a lock left held would show.
const AT_MOST: Duration = Duration::from_mins(2);
/// How late a fire may start and still be on time (scheduling, process and store latency).
const ON_TIME: Duration = Duration::from_secs(1);

/// Where a test's locks live: a store URL and a table (SQL) or key prefix (Redis) of its own.
struct Target {
    url: String,
    namespace: String,
    sql: bool,
}

impl Target {
    fn sql(url: String) -> Self {
        let namespace = shedlock_sqlx::testing::unique_table_name("shedlock_drain");
        Self {
            url,
            namespace,
            sql: true,
        }
    }

    fn redis(url: String) -> Self {
        let namespace = shedlock_redis::testing::unique_prefix("drain");
        Self {
            url,
            namespace,
            sql: false,
        }
    }

    async fn store(&self) -> Arc<dyn LockAdmin> {
        open_store(&self.url, &self.namespace, CALL_TIMEOUT)
            .await
            .expect("open the store under test")
    }

    async fn cleanup(&self) {
        if self.sql
            && let Ok(db) = Database::connect(&self.url).await
        {
            let _ = db.drop_table(&self.namespace).await;
        }
    }
}

type Lines = Arc<Mutex<Vec<(Instant, DrainEvent)>>>;

/// One `drainer` process and the lines it printed, each stamped when received.
struct Drainer {
    label: String,
    child: Child,
    pid: u32,
    lines: Lines,
    /// Reads the process's standard output into `lines` until it closes.
    reader: Option<tokio::task::JoinHandle<()>>,
    log: PathBuf,
}

impl Drainer {
    fn spawn(label: &str, target: &Target, logs: &Path, args: &[&str]) -> Self {
        let log = logs.join(format!("{label}.log"));
        let stderr = std::fs::File::create(&log).expect("a log file");
        let mut child = Command::new(env!("CARGO_BIN_EXE_drainer"))
            .args(["--url", &target.url, "--namespace", &target.namespace])
            .args(["--call-timeout", "2s", "--at-most", "2m"])
            .args(["--owner", &format!("{label}-{}", std::process::id())])
            .args(args)
            .env(
                "RUST_LOG",
                std::env::var("DRAIN_REPLICA_LOG").unwrap_or_else(|_| "info".to_owned()),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .expect("start the drainer");
        let pid = child.id().expect("a running child");
        let lines = Lines::default();
        let stdout = child.stdout.take().expect("piped stdout");
        let sink = lines.clone();
        let reader = tokio::spawn(async move {
            let mut reader = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                if let Some(event) = DrainEvent::parse(&line) {
                    sink.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push((Instant::now(), event));
                }
            }
        });
        Self {
            label: label.to_owned(),
            child,
            pid,
            lines,
            reader: Some(reader),
            log,
        }
    }

    fn events(&self) -> Vec<DrainEvent> {
        self.lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(_, e)| e.clone())
            .collect()
    }

    /// Polls this process's lines until `found` picks something, or fails after `within`.
    async fn wait_for<T>(
        &self,
        what: &str,
        within: Duration,
        found: impl Fn(&[DrainEvent]) -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + within;
        loop {
            if let Some(value) = found(&self.events()) {
                return value;
            }
            assert!(
                Instant::now() < deadline,
                "{}: timed out after {within:?} waiting for {what}; lines: {:?}\nlog:\n{}",
                self.label,
                self.events(),
                tail(&self.log)
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Sends SIGTERM with `kill`; returns the instant just before.
    fn sigterm(&self) -> Instant {
        let sent = Instant::now();
        let status = std::process::Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -TERM {} failed", self.pid);
        sent
    }

    /// Waits for the process to exit (failing after `within`): its status and when.
    /// Every line the process printed has been read by then (its standard output is read to
    /// the end), so the events are complete.
    async fn exit(&mut self, within: Duration) -> (ExitStatus, Instant) {
        match tokio::time::timeout(within, self.child.wait()).await {
            Ok(status) => {
                let exited = Instant::now();
                if let Some(reader) = self.reader.take() {
                    tokio::time::timeout(within, reader)
                        .await
                        .expect("the drainer's output ends when it exits")
                        .expect("the output reader did not panic");
                }
                (status.expect("wait for the drainer"), exited)
            }
            Err(elapsed) => panic!(
                "{}: still running {within:?} after SIGTERM ({elapsed}); lines: {:?}\nlog:\n{}",
                self.label,
                self.events(),
                tail(&self.log)
            ),
        }
    }

    fn drained(&self) -> (usize, usize, usize) {
        self.events()
            .iter()
            .find_map(|e| match e {
                DrainEvent::Drained {
                    finished,
                    cancelled,
                    release_failures,
                    ..
                } => Some((*finished, *cancelled, *release_failures)),
                _ => None,
            })
            .unwrap_or_else(|| {
                panic!(
                    "{}: no drained line; lines: {:?}\nlog:\n{}",
                    self.label,
                    self.events(),
                    tail(&self.log)
                )
            })
    }
}

fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    for line in &lines[lines.len().saturating_sub(40)..] {
        let _ = writeln!(out, "  {line}");
    }
    out
}

fn ready_at(events: &[DrainEvent]) -> Option<i64> {
    events.iter().find_map(|e| match e {
        DrainEvent::Ready { wall_ms, .. } => Some(*wall_ms),
        _ => None,
    })
}

/// The first run started for a fire after `after_ms`: (job, fire).
fn run_started_after(events: &[DrainEvent], after_ms: i64) -> Option<(String, i64)> {
    events.iter().find_map(|e| match e {
        DrainEvent::RunStarted { job, fire_ms, .. } if *fire_ms > after_ms => {
            Some((job.clone(), *fire_ms))
        }
        _ => None,
    })
}

fn signal_ms(events: &[DrainEvent]) -> i64 {
    events
        .iter()
        .find_map(|e| match e {
            DrainEvent::Signal { wall_ms, .. } => Some(*wall_ms),
            _ => None,
        })
        .expect("a signal line")
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).expect("a short duration")
}

/// Grace 10 s, runs of 2 s every 4 s, two replicas: the replica running a fire is stopped; its
/// run completes, and the other replica runs the next fire on time.
async fn grace_longer_than_the_run(target: Target) {
    let logs = tempfile::tempdir().expect("a log directory");
    let args = [
        "--every", "4s", "--run", "2s", "--grace", "10s", "--jobs", "1",
    ];
    let mut a = Drainer::spawn("a", &target, logs.path(), &args);
    let mut b = Drainer::spawn("b", &target, logs.path(), &args);
    let both_ready = {
        let a_ready = a.wait_for("ready", Duration::from_secs(20), ready_at).await;
        let b_ready = b.wait_for("ready", Duration::from_secs(20), ready_at).await;
        a_ready.max(b_ready)
    };
    // The first fire after both are up, whoever runs it.
    let deadline = Instant::now() + Duration::from_secs(10);
    let (runner, other, job, fire) = loop {
        if let Some((job, fire)) = run_started_after(&a.events(), both_ready) {
            break (&mut a, &mut b, job, fire);
        }
        if let Some((job, fire)) = run_started_after(&b.events(), both_ready) {
            break (&mut b, &mut a, job, fire);
        }
        assert!(Instant::now() < deadline, "no run started within 10 s");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let sent = runner.sigterm();
    let (status, exited) = runner.exit(Duration::from_secs(10)).await;
    let events = runner.events();
    assert!(status.success(), "{}: {status}", runner.label);
    let signal = signal_ms(&events);
    let ended = events
        .iter()
        .find_map(|e| match e {
            DrainEvent::RunEnded {
                job: j,
                fire_ms,
                wall_ms,
            } if *j == job && *fire_ms == fire => Some(*wall_ms),
            _ => None,
        })
        .unwrap_or_else(|| panic!("the run of fire {fire} did not complete: {events:?}"));
    assert!(
        signal < ended,
        "SIGTERM ({signal}) must land during the run (ended {ended}) for this test to mean anything"
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, DrainEvent::CancelSeen { .. })),
        "a run within the grace is not cancelled: {events:?}"
    );
    assert_eq!(runner.drained(), (1, 0, 0), "finished, cancelled, failed");
    assert!(
        events.iter().any(|e| matches!(e,
            DrainEvent::LastRun { outcome, fire_ms, .. } if outcome == "succeeded" && *fire_ms == fire)),
        "{events:?}"
    );
    // The process waited for the run, and no longer than the run plus a call timeout.
    let took = exited - sent;
    assert!(
        took < Duration::from_secs(2) + CALL_TIMEOUT,
        "exit {took:?} after SIGTERM"
    );

    // The other replica runs the next fire, on time: the lock was released, not left to at_most.
    let next = fire + 4_000;
    let started = other
        .wait_for(
            "the next fire's run",
            Duration::from_secs(10),
            |events: &[DrainEvent]| {
                events.iter().find_map(|e| match e {
                    DrainEvent::RunStarted {
                        job: j,
                        fire_ms,
                        wall_ms,
                    } if *j == job && *fire_ms == next => Some(*wall_ms),
                    _ => None,
                })
            },
        )
        .await;
    let late = started - next;
    eprintln!(
        "{}: next fire ran {late} ms after its instant (at_most would be {} ms); \
         {} exited {took:?} after SIGTERM",
        other.label,
        ms(AT_MOST),
        runner.label
    );
    assert!(
        (0..ms(ON_TIME)).contains(&late),
        "the next fire started {late} ms after its instant"
    );
    assert!(
        !other.events().iter().any(|e| matches!(e,
            DrainEvent::RunStarted { fire_ms, .. } if *fire_ms == fire)),
        "fire {fire} ran on both replicas"
    );
    other.sigterm();
    let (status, _) = other.exit(Duration::from_secs(10)).await;
    assert!(status.success(), "{}: {status}", other.label);
    target.cleanup().await;
}

/// Grace 1 s, `jobs` jobs whose runs take 60 s: all are cancelled and their locks released; the
/// process exits within grace + one call timeout of the SIGTERM. Every run sees the cancel,
/// through both its `RunContext` and `current_lock()`, and no earlier than the grace.
async fn grace_shorter_than_the_run(target: Target, jobs: usize) {
    const GRACE: Duration = Duration::from_secs(1);
    let logs = tempfile::tempdir().expect("a log directory");
    let count = jobs.to_string();
    let args = [
        "--every", "2s", "--run", "60s", "--grace", "1s", "--jobs", &count,
    ];
    let mut drainer = Drainer::spawn("d", &target, logs.path(), &args);
    drainer
        .wait_for("ready", Duration::from_secs(20), ready_at)
        .await;
    let fire = drainer
        .wait_for(
            "every job's run to start",
            Duration::from_secs(20),
            |events: &[DrainEvent]| {
                let started: Vec<i64> = events
                    .iter()
                    .filter_map(|e| match e {
                        DrainEvent::RunStarted { fire_ms, .. } => Some(*fire_ms),
                        _ => None,
                    })
                    .collect();
                (started.len() >= jobs).then(|| started[0])
            },
        )
        .await;
    let sent = drainer.sigterm();
    let (status, exited) = drainer.exit(GRACE + CALL_TIMEOUT + ON_TIME).await;
    let took = exited - sent;
    let events = drainer.events();
    assert!(status.success(), "{status}");
    let started: Vec<&DrainEvent> = events
        .iter()
        .filter(|e| matches!(e, DrainEvent::RunStarted { .. }))
        .collect();
    assert_eq!(started.len(), jobs, "one run per job: {started:?}");
    let signal = signal_ms(&events);
    let cancels: Vec<(i64, bool)> = events
        .iter()
        .filter_map(|e| match e {
            DrainEvent::CancelSeen {
                fire_ms,
                current_lock_cancelled,
                wall_ms,
                ..
            } => {
                assert_eq!(*fire_ms, fire);
                Some((*wall_ms, *current_lock_cancelled))
            }
            _ => None,
        })
        .collect();
    // Every cancelled run saw the signal before it was dropped (the scheduler polls a cancelled
    // body for the stop window).
    assert_eq!(cancels.len(), jobs, "every run saw the cancel: {events:?}");
    for (at, through_current_lock) in &cancels {
        assert!(through_current_lock, "current_lock() says cancelled too");
        assert!(
            *at >= signal + ms(GRACE),
            "cancelled {} ms after the signal, before the grace of {GRACE:?}",
            at - signal
        );
    }
    assert_eq!(
        drainer.drained(),
        (0, jobs, 0),
        "finished, cancelled, failed"
    );
    let cancelled_runs = events
        .iter()
        .filter(|e| matches!(e, DrainEvent::LastRun { outcome, .. } if outcome == "cancelled"))
        .count();
    assert_eq!(cancelled_runs, jobs, "{events:?}");
    eprintln!(
        "{jobs} lock(s): exit {took:?} after SIGTERM (grace {GRACE:?}, call timeout \
         {CALL_TIMEOUT:?}: {:.2} of the bound)",
        took.as_secs_f64() / (GRACE + CALL_TIMEOUT).as_secs_f64()
    );
    assert!(
        took >= GRACE,
        "exit {took:?} after SIGTERM: the grace was not given"
    );
    assert!(
        took < GRACE + CALL_TIMEOUT,
        "exit {took:?} after SIGTERM, beyond grace + one call timeout"
    );

    assert_all_released(&target, jobs).await;
    target.cleanup().await;
}

/// Every lock of the `jobs` jobs is free by the store's clock: the drain released it, not
/// `at_most`.
async fn assert_all_released(target: &Target, jobs: usize) {
    let store = target.store().await;
    let entries = store.list().await.expect("list the locks");
    let ours: Vec<_> = entries
        .iter()
        .filter(|e| e.record().name().starts_with("drain-"))
        .collect();
    assert_eq!(ours.len(), jobs, "one row per job: {entries:?}");
    for entry in ours {
        assert!(
            entry.record().lock_until() <= entry.store_now() && !entry.is_held(),
            "left held: {entry:?}"
        );
    }
}

macro_rules! per_store {
    ($($(#[$attr:meta])* $name:ident: $scenario:expr;)*) => {
        mod postgres {
            use super::*;
            $(
                $(#[$attr])*
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                #[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
                async fn $name() {
                    let Some(url) = shedlock_sqlx::testing::postgres_url() else { return };
                    ($scenario)(Target::sql(url)).await;
                }
            )*
        }
        mod mariadb {
            use super::*;
            $(
                $(#[$attr])*
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                #[cfg_attr(not(shedlock_mysql), ignore = "needs SHEDLOCK_MYSQL_URL (MySQL)")]
                async fn $name() {
                    let Some(url) = shedlock_sqlx::testing::mysql_url() else { return };
                    ($scenario)(Target::sql(url)).await;
                }
            )*
        }
        mod redis {
            use super::*;
            $(
                $(#[$attr])*
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                #[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
                async fn $name() {
                    let Some(url) = shedlock_redis::testing::redis_url() else { return };
                    ($scenario)(Target::redis(url)).await;
                }
            )*
        }
    };
}

per_store! {
    grace_longer_than_the_run_completes_it_and_the_next_fire_runs_on_time_elsewhere:
        grace_longer_than_the_run;
    grace_shorter_than_the_run_cancels_it_releases_the_lock_and_exits_within_grace_and_a_call:
        |t| grace_shorter_than_the_run(t, 1);
    hundred_locks_are_all_released_within_grace_and_a_call:
        |t| grace_shorter_than_the_run(t, 100);
}
