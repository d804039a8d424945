//! End-to-end: the three-replica demo, through the package's `replica` binary (the `cluster`
//! example runs the same code), against SQLite, Postgres, MariaDB, Redis and etcd, and with a
//! replica killed mid-run.
//!
//! Every wait polls the demo's output against a deadline; nothing sleeps to synchronise.

use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead as _, BufReader};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::time::{Duration, Instant};

use shedlock_demo::cluster::Summary;
use shedlock_sqlx::testing;

const REPLICA: &str = env!("CARGO_BIN_EXE_replica");

/// How long any one wait may take: generous, CI machines are loaded (2 cores, other suites).
const DEADLINE: Duration = Duration::from_mins(1);

/// A running demo: its output lines as they come.
struct Demo {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
    /// The demo's (and its replicas') standard error, line by line.
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Demo {
    fn start(args: &[&str], database_url: Option<&str>) -> Self {
        let mut command = Command::new(REPLICA);
        command
            .arg("cluster")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .env_remove("DATABASE_URL");
        if let Some(url) = database_url {
            command.env("DATABASE_URL", url);
        }
        let mut child = command.spawn().expect("start the replica binary");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                println!("demo> {line}");
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr_pipe = child.stderr.take().expect("piped stderr");
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let collected = stderr.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr_pipe).lines().map_while(Result::ok) {
                eprintln!("demo! {line}");
                collected
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(line);
            }
        });
        let stdin = child.stdin.take();
        Self {
            child,
            stdin,
            lines,
            seen: Vec::new(),
            stderr,
        }
    }

    /// Waits for the next line that satisfies `pred` and returns it.
    fn wait_for(&mut self, what: &str, mut pred: impl FnMut(&str) -> bool) -> String {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if pred(&line) {
                        return line;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let _ = self.child.kill();
                    panic!(
                        "no {what} within {DEADLINE:?}; output so far:\n{}",
                        self.seen.join("\n")
                    );
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    panic!(
                        "the demo ended before {what}; output:\n{}",
                        self.seen.join("\n")
                    );
                }
            }
        }
    }

    /// Waits for the summary line and the process's exit; checks it exited with `code`.
    fn summary(&mut self, code: i32) -> Summary {
        let line = self.wait_for("summary line", |l| l.starts_with("summary:"));
        let summary: Summary = line.parse().expect("a well-formed summary");
        let deadline = Instant::now() + DEADLINE;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait for the demo") {
                break status;
            }
            // The summary is the last line; the exit follows at once. Poll for it.
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("the demo did not exit after its summary");
            }
            let _ = self.lines.recv_timeout(Duration::from_millis(50));
        };
        assert_eq!(
            status.code(),
            Some(code),
            "exit status; output:\n{}",
            self.seen.join("\n")
        );
        summary
    }

    /// Waits until all three replicas reported ready (in any order); returns their pids.
    fn wait_ready(&mut self) -> HashMap<String, u32> {
        let mut pids = HashMap::new();
        self.wait_for("three ready replicas", |line| {
            // `r2 ready: pid 4242, owner host:4242:0abc12`
            let words: Vec<&str> = line.split_whitespace().collect();
            if let [replica, "ready:", "pid", pid, ..] = words.as_slice()
                && let Ok(pid) = pid.trim_end_matches(',').parse()
            {
                pids.insert((*replica).to_owned(), pid);
            }
            pids.len() == 3
        });
        pids
    }

    /// Asserts that no replica fell back to plain locks: the store records fires.
    fn assert_records_fires(&self) {
        let stderr = self.stderr.lock().unwrap_or_else(PoisonError::into_inner);
        assert!(
            !stderr.iter().any(|l| l.contains(NO_FIRE_CLAIMS)),
            "the store records fires: no replica falls back\n{}",
            stderr.join("\n")
        );
    }

    /// Asks the demo to stop (its standard input closes).
    fn stop(&mut self) {
        self.stdin = None;
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        // A failed test must not leave the demo (and through its stdin pipe, its replicas) behind.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The words of a tick line (`  #3  sync     ran: r2 (token 5)   skipped: r1 r3`): job and
/// who ran it, or `None` for other lines.
fn tick_line(line: &str) -> Option<(String, String)> {
    let words: Vec<&str> = line.split_whitespace().collect();
    match words.as_slice() {
        [tick, job, "ran:", runner, ..] if tick.starts_with('#') => {
            Some(((*job).to_owned(), (*runner).to_owned()))
        }
        _ => None,
    }
}

fn assert_healthy(summary: &Summary, output: &[String]) {
    let output = output.join("\n");
    assert_eq!(
        summary.overlaps, 0,
        "two runs of one job overlapped:\n{output}"
    );
    assert_eq!(
        summary.fires_run_twice, 0,
        "a fire ran on two replicas:\n{output}"
    );
    // One host, a few seconds, nobody paused: every fire is claimed in its window.
    assert_eq!(summary.missed, 0, "{output}");
    assert_eq!(summary.errors, 0, "{output}");
    assert_eq!(summary.replicas, 3, "{output}");
    for job in ["report", "sync"] {
        assert!(
            summary.per_job.get(job).copied().unwrap_or(0) > 0,
            "{job} never ran:\n{output}"
        );
    }
    assert_eq!(
        summary.runs,
        summary.per_job.values().sum::<u64>(),
        "{output}"
    );
    // Three replicas claim every fire: one runs it, the other two skip it.
    assert!(
        summary.skipped >= summary.runs,
        "too few skips for three replicas:\n{output}"
    );
}

fn demo_on_server(url: &str) {
    let runs_table = testing::unique_table_name("e2e_runs");
    let lock_table = testing::unique_table_name("e2e_locks");
    let prefix = format!("{}-", testing::unique_lock_name("e2e"));
    let mut demo = Demo::start(
        &[
            "--seconds",
            "4",
            "--runs-table",
            &runs_table,
            "--lock-table",
            &lock_table,
            "--prefix",
            &prefix,
            "--cleanup",
        ],
        Some(url),
    );
    let summary = demo.summary(0);
    assert_healthy(&summary, &demo.seen);
    assert_eq!(summary.died, 0);
    demo.assert_records_fires();
}

/// The demo on a Redis or etcd store (`--lock-table` is then the key prefix; the run log is a
/// SQLite file of the demo's own). Returns the demo's standard error.
fn demo_on_kv_store(url: &str, key_prefix: &str) -> Vec<String> {
    let mut demo = Demo::start(
        &[
            "--seconds",
            "4",
            "--lock-table",
            key_prefix,
            "--database-url",
            url,
        ],
        None,
    );
    demo.wait_for("the run log's SQLite file", |l| {
        l.trim_start().starts_with("run log: sqlite://")
    });
    let summary = demo.summary(0);
    assert_healthy(&summary, &demo.seen);
    assert_eq!(summary.died, 0);
    // Redis and etcd record fires, and the run log says which fire each run was for.
    demo.stderr
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
}

/// The fall-back warning of a scheduler on a store without fire claims.
const NO_FIRE_CLAIMS: &str = "does not record fires (claim_fire is unsupported)";

#[test]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
fn demo_on_redis_records_fires() {
    let Some(url) = shedlock_redis::testing::redis_url() else {
        return;
    };
    let stderr = demo_on_kv_store(&url, &shedlock_redis::testing::unique_prefix("e2e"));
    assert!(
        !stderr.iter().any(|l| l.contains(NO_FIRE_CLAIMS)),
        "Redis records fires: no replica falls back\n{}",
        stderr.join("\n")
    );
}

#[test]
#[cfg_attr(not(shedlock_etcd), ignore = "needs SHEDLOCK_ETCD_URL (etcd)")]
fn demo_on_etcd_records_fires() {
    let Some(url) = shedlock_etcd::testing::etcd_url() else {
        return;
    };
    let stderr = demo_on_kv_store(&url, &shedlock_etcd::testing::unique_prefix());
    assert!(
        !stderr.iter().any(|l| l.contains(NO_FIRE_CLAIMS)),
        "etcd records fires: no replica falls back\n{}",
        stderr.join("\n")
    );
}

#[test]
fn demo_on_sqlite_runs_every_job_and_never_overlaps() {
    let mut demo = Demo::start(&["--seconds", "4"], None);
    let pids = demo.wait_ready();
    assert_eq!(
        pids.keys().collect::<BTreeSet<_>>(),
        BTreeSet::from([&"r1".into(), &"r2".into(), &"r3".into()])
    );
    let summary = demo.summary(0);
    assert_healthy(&summary, &demo.seen);
    assert_eq!((summary.died, summary.interrupted), (0, 0));
    demo.assert_records_fires();
    assert!(
        demo.seen.iter().any(|l| l.contains("(token ")),
        "the board shows fencing tokens"
    );
}

#[test]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
fn demo_on_postgres_runs_every_job_and_never_overlaps() {
    if let Some(url) = testing::postgres_url() {
        demo_on_server(&url);
    }
}

#[test]
#[cfg_attr(not(shedlock_mysql), ignore = "needs SHEDLOCK_MYSQL_URL (MySQL)")]
fn demo_on_mysql_runs_every_job_and_never_overlaps() {
    if let Some(url) = testing::mysql_url() {
        demo_on_server(&url);
    }
}

#[test]
fn killing_a_replica_mid_run_leaves_the_others_carrying_on() {
    // Runs until told to stop (stdin closes); --seconds is only a bound.
    let mut demo = Demo::start(&["--seconds", "50", "--stop-on-eof"], None);
    let pids = demo.wait_ready();

    // Kill whoever runs `sync` (runs of 0.3–1.8 s), as soon as the board shows it running.
    let line = demo.wait_for("a sync run", |l| {
        tick_line(l).is_some_and(|(job, r)| job == "sync" && r != "-")
    });
    let (_, victim) = tick_line(&line).expect("a tick line");
    let victim = victim.trim_end_matches(',').to_owned();
    let status = Command::new("kill")
        .args(["-KILL", &pids[&victim].to_string()])
        .status()
        .expect("run kill(1)");
    assert!(status.success(), "kill -KILL {}", pids[&victim]);
    demo.wait_for("the death notice", |l| {
        l.starts_with(&format!("{victim} died (killed by SIGKILL)"))
    });

    // Both jobs run again, on the survivors (sync after its lock's at_most, if the victim held it).
    let mut resumed = BTreeSet::new();
    demo.wait_for("both jobs run by survivors", |l| {
        if let Some((job, runner)) = tick_line(l)
            && runner != "-"
            && !runner.starts_with(&victim)
        {
            resumed.insert(job);
        }
        resumed.len() == 2
    });
    demo.stop();
    let summary = demo.summary(0);
    assert_eq!(summary.overlaps, 0, "{}", demo.seen.join("\n"));
    assert_eq!(summary.fires_run_twice, 0, "{}", demo.seen.join("\n"));
    assert_eq!(summary.died, 1, "{}", demo.seen.join("\n"));
    assert_eq!(summary.errors, 0, "{}", demo.seen.join("\n"));
    assert_eq!(summary.replicas, 3);
    assert!(
        summary.interrupted <= 2,
        "only the victim's runs can be unfinished"
    );
}

/// The overlap check can fail: two replicas that do not share a lock (each has its own lock
/// table) run the same job at the same time, and the run log shows it.
#[test]
fn the_overlap_check_catches_replicas_that_do_not_exclude_each_other() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let url = format!("sqlite://{}", dir.path().join("split.db").display());
    let replica = |args: &[&str]| {
        let mut command = Command::new(REPLICA);
        command
            .args(args)
            .env("DATABASE_URL", &url)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        command
    };
    for table in ["locks_a", "locks_b"] {
        let status = replica(&["schema", "--lock-table", table, "--runs-table", "runs"])
            .status()
            .expect("run replica schema");
        assert!(status.success());
    }
    let job = "split,every=200ms,at_most=2s,work=120ms..180ms";
    let children: Vec<Child> = ["locks_a", "locks_b"]
        .iter()
        .enumerate()
        .map(|(i, table)| {
            let label = format!("r{}", i + 1);
            replica(&[
                "run",
                "--replica",
                &label,
                "--session",
                "s",
                "--runs-table",
                "runs",
                "--lock-table",
                table,
                "--job",
                job,
                "--seconds",
                "1.5",
            ])
            .spawn()
            .expect("start a replica")
        })
        .collect();
    for child in children {
        let output = child
            .wait_with_output()
            .expect("the replica exits by itself");
        assert!(output.status.success(), "{output:?}");
    }
    let check = replica(&["check", "--session", "s", "--runs-table", "runs"])
        .output()
        .expect("run replica check");
    let stdout = String::from_utf8_lossy(&check.stdout);
    println!("{stdout}");
    assert_eq!(check.status.code(), Some(1), "check must fail:\n{stdout}");
    assert!(stdout.contains("OVERLAP in split: r"), "{stdout}");
    let summary = stdout.lines().last().unwrap_or_default();
    assert!(
        summary.starts_with("runlog: session=s ") && !summary.contains(" overlaps=0"),
        "{summary}"
    );
}
