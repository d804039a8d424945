//! What the fault tests share: replica processes driven from a test (spawn, `kill -9`, restart,
//! graceful stop), their events stamped with the time the test received them, the run log's
//! checks (overlaps, liveness gaps), and the database URLs with skip/require semantics.
#![allow(dead_code)] // each test file uses a different part

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use shedlock_demo::database::{Database, Pool};
use shedlock_demo::event::Event;
use shedlock_demo::job::JobSpec;
use shedlock_demo::runlog::{RunLog, RunRecord, overlaps};
use shedlock_sqlx::sqlx;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::time::Instant;

/// The four jobs of the multi-process tests: different periods, holds and run lengths. Each
/// `at_most` leaves seconds of margin over the longest run (work plus the run-log writes), so a
/// stall of the loaded CI machine does not make a run outlive its lock (which no lease can
/// survive: see docs/guarantees.md); runs are long enough that a kill often hits a holder.
pub(crate) const JOBS: [&str; 4] = [
    "alpha,every=1s,at_most=5s,work=300ms..900ms",
    "beta,every=1s,at_most=4s,at_least=500ms,work=100ms..400ms",
    "gamma,every=2s,at_most=6s,work=500ms..1500ms",
    "delta,every=500ms,at_most=4s,work=100ms..400ms",
];

/// Whether a missing server or tool must fail the test (`SHEDLOCK_REQUIRE_DB=1`).
pub(crate) fn required() -> bool {
    shedlock_sqlx::testing::db_required()
}

/// The shared Postgres URL (`SHEDLOCK_PG_URL`), or `None` after a skip notice; a failure under
/// `SHEDLOCK_REQUIRE_DB=1`.
pub(crate) fn postgres_url() -> Option<String> {
    shedlock_sqlx::testing::postgres_url()
}

/// libfaketime's multi-threaded library, where Debian installs it.
pub(crate) fn libfaketime() -> Option<PathBuf> {
    let roots = ["/usr/lib", "/usr/local/lib", "/usr/lib64"];
    for root in roots {
        let mut dirs = vec![PathBuf::from(root).join("faketime")];
        if let Ok(entries) = std::fs::read_dir(root) {
            dirs.extend(entries.flatten().map(|e| e.path().join("faketime")));
        }
        for dir in dirs {
            let lib = dir.join("libfaketimeMT.so.1");
            if lib.is_file() {
                return Some(lib);
            }
        }
    }
    None
}

/// A random lowercase suffix for table and lock names, so tests can run in parallel and again.
pub(crate) fn suffix() -> String {
    use std::hash::{BuildHasher as _, Hasher as _};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    hasher.write_u32(std::process::id());
    format!("{:012x}", hasher.finish() & 0xffff_ffff_ffff)
}

/// A random number in `0..bound` (`0` when `bound` is zero), from the standard library's random
/// hash keys.
pub(crate) fn random_below(bound: u64) -> u64 {
    use std::hash::{BuildHasher as _, Hasher as _};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(0x5eed);
    if bound == 0 {
        0
    } else {
        hasher.finish() % bound
    }
}

/// A random duration in `low..=high` (millisecond steps).
pub(crate) fn random_between(low: Duration, high: Duration) -> Duration {
    let span = u64::try_from(high.saturating_sub(low).as_millis()).unwrap_or(0);
    low + Duration::from_millis(random_below(span + 1))
}

/// One event as the test received it.
#[derive(Debug, Clone)]
pub(crate) struct Stamped {
    /// When the test read the line (its own monotonic clock).
    pub(crate) at: Instant,
    /// Which process incarnation printed it (incremented on every restart of a label).
    pub(crate) incarnation: u32,
    pub(crate) event: Event,
}

/// The events of every replica of one test, in the order received.
#[derive(Debug, Clone, Default)]
pub(crate) struct Events(Arc<Mutex<Vec<Stamped>>>);

impl Events {
    fn push(&self, stamped: Stamped) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(stamped);
    }

    pub(crate) fn all(&self) -> Vec<Stamped> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn of(&self, replica: &str) -> Vec<Stamped> {
        self.all()
            .into_iter()
            .filter(|s| s.event.replica() == replica)
            .collect()
    }

    /// Polls (every 20 ms) until `done` holds for the events so far, or fails at `deadline`.
    pub(crate) async fn wait_for(
        &self,
        what: &str,
        within: Duration,
        done: impl Fn(&[Stamped]) -> bool,
    ) {
        let deadline = Instant::now() + within;
        loop {
            if done(&self.all()) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "timed out after {within:?} waiting for {what}; events: {:#?}",
                self.all().iter().rev().take(20).collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// How to start replicas: the database, tables, session, jobs and options they share.
#[derive(Debug, Clone)]
pub(crate) struct Cluster {
    pub(crate) url: String,
    pub(crate) lock_table: String,
    pub(crate) runs_table: String,
    pub(crate) session: String,
    pub(crate) prefix: String,
    /// The run log's database when the store is Redis or etcd (a SQLite file of the test's;
    /// `lock_table` is then the key prefix).
    pub(crate) runlog_url: Option<String>,
    /// More arguments for every replica (e.g. the leader latch's timings).
    pub(crate) extra_args: Vec<String>,
    pub(crate) jobs: Vec<JobSpec>,
    pub(crate) call_timeout: Duration,
    pub(crate) events: Events,
    pub(crate) logs: Arc<tempfile::TempDir>,
}

impl Cluster {
    /// A cluster on `url` with fresh table names, running `jobs` (`--job` specs).
    pub(crate) fn new(url: &str, name: &str, jobs: &[&str]) -> Self {
        let id = suffix();
        Self {
            url: url.to_owned(),
            lock_table: format!("fault_locks_{id}"),
            runs_table: format!("fault_runs_{id}"),
            session: format!("{name}-{id}"),
            prefix: format!("{name}-{id}-"),
            runlog_url: None,
            extra_args: Vec::new(),
            jobs: jobs
                .iter()
                .map(|spec| spec.parse().expect("a valid job spec"))
                .collect(),
            call_timeout: Duration::from_secs(1),
            events: Events::default(),
            logs: Arc::new(tempfile::tempdir().expect("a temp dir for replica logs")),
        }
    }

    /// A cluster on the Redis or etcd store at `url`, its run log in a SQLite file of its own.
    pub(crate) fn on_kv_store(url: &str, name: &str, jobs: &[&str]) -> Self {
        let mut cluster = Self::new(url, name, jobs);
        let file = cluster.logs.path().join("runlog.db");
        cluster.runlog_url = Some(format!("sqlite://{}", file.display()));
        cluster.lock_table = format!("{}:", cluster.lock_table);
        cluster
    }

    /// The run log's database (the store's, when SQL).
    pub(crate) async fn runlog(&self) -> Database {
        Database::connect(self.runlog_url.as_deref().unwrap_or(&self.url))
            .await
            .expect("connect to the run log's database")
    }

    /// The longest `at_most` and the longest period of the cluster's jobs.
    pub(crate) fn max_at_most_and_every(&self) -> (Duration, Duration) {
        let at_most = self.jobs.iter().map(|j| j.at_most).max();
        let every = self.jobs.iter().map(|j| j.every).max();
        (at_most.unwrap_or_default(), every.unwrap_or_default())
    }

    /// Stops every replica and asserts each one stopped cleanly.
    pub(crate) async fn stop_all(&self, replicas: Vec<Replica>) {
        for replica in replicas {
            let label = replica.label.clone();
            assert!(
                replica.stop(Duration::from_secs(20)).await,
                "{label} did not stop cleanly; logs:\n{}",
                self.log_tails()
            );
        }
    }

    /// Whether every job of the cluster reported a run received after `since`.
    pub(crate) fn all_jobs_ran_after(&self, since: Instant) -> impl Fn(&[Stamped]) -> bool + use<> {
        let names: Vec<String> = self.jobs.iter().map(|j| j.name.clone()).collect();
        move |all: &[Stamped]| {
            names.iter().all(|name| {
                all.iter().any(|s| {
                    s.at > since && matches!(&s.event, Event::Ran { job, .. } if job == name)
                })
            })
        }
    }

    /// Creates the lock table and the run log with the replica program's `schema` command.
    pub(crate) async fn create_schema(&self) {
        let status = Command::new(env!("CARGO_BIN_EXE_replica"))
            .arg("schema")
            .arg("--lock-table")
            .arg(&self.lock_table)
            .arg("--runs-table")
            .arg(&self.runs_table)
            .args(self.runlog_url.iter().flat_map(|u| ["--runlog-url", u]))
            .env("DATABASE_URL", &self.url)
            .stdin(Stdio::null())
            .status()
            .await
            .expect("run `replica schema`");
        assert!(status.success(), "`replica schema` failed: {status}");
    }

    /// Starts replica `label`, talking to the database at `url` (the cluster's URL, or a proxy
    /// in front of it), with `env` added (e.g. libfaketime's). Waits until it reports ready.
    pub(crate) async fn start_with(
        &self,
        label: &str,
        url: &str,
        env: &[(&str, String)],
    ) -> Replica {
        let incarnation = {
            let all = self.events.all();
            u32::try_from(
                all.iter()
                    .filter(|s| s.event.replica() == label)
                    .filter(|s| matches!(s.event, Event::Ready { .. }))
                    .count(),
            )
            .unwrap_or(u32::MAX)
        };
        let log_path = self.logs.path().join(format!("{label}.{incarnation}.log"));
        let log = std::fs::File::create(&log_path).expect("a replica log file");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_replica"));
        cmd.arg("run")
            .args(["--replica", label])
            .args(["--session", &self.session])
            .args(["--prefix", &self.prefix])
            .args(["--lock-table", &self.lock_table])
            .args(["--runs-table", &self.runs_table])
            .arg("--call-timeout")
            .arg(format!("{}ms", self.call_timeout.as_millis()))
            .arg("--stop-on-eof")
            .args(self.runlog_url.iter().flat_map(|u| ["--runlog-url", u]))
            .args(&self.extra_args)
            .env("DATABASE_URL", url)
            .env(
                "RUST_LOG",
                std::env::var("FAULT_REPLICA_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .kill_on_drop(true);
        for job in &self.jobs {
            cmd.arg("--job").arg(job.to_string());
        }
        for (key, value) in env {
            cmd.env(key, value);
        }
        let mut child = cmd.spawn().expect("spawn a replica");
        let stdout = child.stdout.take().expect("piped stdout");
        let events = self.events.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(event) = Event::parse(&line) {
                    events.push(Stamped {
                        at: Instant::now(),
                        incarnation,
                        event,
                    });
                }
            }
        });
        let stdin = child.stdin.take();
        let replica = Replica {
            label: label.to_owned(),
            incarnation,
            child,
            stdin,
        };
        let want = incarnation + 1;
        let label_owned = label.to_owned();
        self.events
            .wait_for(
                &format!("{label} to be ready"),
                Duration::from_secs(30),
                |all| {
                    let ready = all
                        .iter()
                        .filter(|s| s.event.replica() == label_owned)
                        .filter(|s| matches!(s.event, Event::Ready { .. }))
                        .count();
                    usize::try_from(want).is_ok_and(|want| ready >= want)
                },
            )
            .await;
        replica
    }

    /// [`start_with`](Self::start_with) on the cluster's own URL, no extra environment.
    pub(crate) async fn start(&self, label: &str) -> Replica {
        self.start_with(label, &self.url, &[]).await
    }

    /// The run log of this cluster's session.
    pub(crate) async fn records(&self, db: &Database) -> Vec<RunRecord> {
        RunLog::new(db, &self.runs_table)
            .expect("a valid table name")
            .records(&self.session)
            .await
            .expect("read the run log")
    }

    /// Drops the cluster's tables (tests on a shared server clean up after themselves).
    pub(crate) async fn drop_tables(&self, db: &Database) {
        if self.runlog_url.is_some() {
            return; // the run log is the test's own file; Redis/etcd keys carry the prefix
        }
        for table in [&self.runs_table, &self.lock_table] {
            if let Err(error) = db.drop_table(table).await {
                eprintln!("could not drop {table}: {error}");
            }
        }
    }

    /// The tail of every replica log, for failure messages.
    pub(crate) fn log_tails(&self) -> String {
        let mut out = String::new();
        let mut paths: Vec<PathBuf> = std::fs::read_dir(self.logs.path())
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .collect();
        paths.sort();
        for path in paths {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let tail: String = text
                .lines()
                .rev()
                .take(15)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n");
            let _ = writeln!(out, "--- {}\n{tail}", path.display());
        }
        out
    }
}

/// One replica process.
#[derive(Debug)]
pub(crate) struct Replica {
    pub(crate) label: String,
    pub(crate) incarnation: u32,
    child: Child,
    stdin: Option<ChildStdin>,
}

impl Replica {
    /// `kill -9`, then reaps the process.
    pub(crate) async fn kill(mut self) {
        self.child.start_kill().expect("SIGKILL a replica");
        let _ = self.child.wait().await;
    }

    /// Sends SIGTERM (with `kill`), as a deploy does; returns the instant just before.
    pub(crate) fn sigterm(&self) -> Instant {
        let pid = self.child.id().expect("a running replica");
        let sent = Instant::now();
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -TERM {pid} failed");
        sent
    }

    /// Asks the replica to stop (closes its standard input) and waits for it to exit, at most
    /// `within`. Returns whether it exited successfully in time (it is killed otherwise).
    pub(crate) async fn stop(mut self, within: Duration) -> bool {
        drop(self.stdin.take());
        if let Ok(Ok(status)) = tokio::time::timeout(within, self.child.wait()).await {
            status.success()
        } else {
            let _ = self.child.start_kill();
            let _ = self.child.wait().await;
            false
        }
    }
}

/// Replicas that have a run in flight now (a `Ran` of their current incarnation without its
/// `Done` or `Error`), by label.
pub(crate) fn running_replicas(events: &[Stamped]) -> Vec<String> {
    let mut open: BTreeMap<(String, u32, String, u64), i32> = BTreeMap::new();
    for s in events {
        match &s.event {
            Event::Ran {
                replica, job, tick, ..
            } => {
                *open
                    .entry((replica.clone(), s.incarnation, job.clone(), *tick))
                    .or_default() += 1;
            }
            Event::Done {
                replica, job, tick, ..
            }
            | Event::Error {
                replica, job, tick, ..
            } => {
                *open
                    .entry((replica.clone(), s.incarnation, job.clone(), *tick))
                    .or_default() -= 1;
            }
            _ => {}
        }
    }
    let mut labels: Vec<String> = open
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|((replica, ..), _)| replica)
        .collect();
    labels.dedup();
    labels
}

/// The database's clock now, in µs since the Unix epoch.
pub(crate) async fn db_now_us(db: &Database) -> i64 {
    match db.pool() {
        Pool::Postgres(pool) => sqlx::query_scalar(
            "SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT",
        )
        .fetch_one(pool)
        .await
        .expect("read the database clock"),
        Pool::MySql(pool) => sqlx::query_scalar(
            "SELECT CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) AS SIGNED)",
        )
        .fetch_one(pool)
        .await
        .expect("read the database clock"),
        _ => panic!("the fault tests run on Postgres or MariaDB"),
    }
}

/// Asserts that no two runs of one job overlapped (database clock).
pub(crate) fn assert_no_overlaps(records: &[RunRecord]) {
    let found = overlaps(records);
    assert!(
        found.is_empty(),
        "{} overlapping runs, e.g. {:#?}",
        found.len(),
        found.first()
    );
}

/// The longest time (µs) each job went without a run starting, measured from the previous
/// run's `locked_at` (the lock frees itself by `locked_at + at_most` whatever happens to its
/// holder, so a job must start again within `at_most` + one tick + slack of it), over
/// `[from_us, to_us]` (database clock). Checks the bound and returns the worst gap per job.
pub(crate) fn assert_liveness(
    cluster: &Cluster,
    records: &[RunRecord],
    from_us: i64,
    to_us: i64,
    slack: Duration,
) -> BTreeMap<String, i64> {
    assert_liveness_from(cluster, records, from_us, to_us, slack, |job| job.every)
}

/// [`assert_liveness`] where each job's first run in the window must start within
/// `first_within(job)` + slack of `from_us` (e.g. `at_most` + one tick after an outage, when
/// locks taken before it may still be held).
pub(crate) fn assert_liveness_from(
    cluster: &Cluster,
    records: &[RunRecord],
    from_us: i64,
    to_us: i64,
    slack: Duration,
    first_within: impl Fn(&JobSpec) -> Duration,
) -> BTreeMap<String, i64> {
    let slack_us = i64::try_from(slack.as_micros()).unwrap_or(i64::MAX);
    let mut worst = BTreeMap::new();
    for job in &cluster.jobs {
        let bound_us = i64::try_from((job.at_most + job.every).as_micros()).unwrap_or(i64::MAX);
        let mut runs: Vec<&RunRecord> = records.iter().filter(|r| r.job == job.name).collect();
        runs.sort_by_key(|r| r.started_us);
        assert!(!runs.is_empty(), "job {} never ran", job.name);
        // From the start of the window to the first run.
        let first_us = i64::try_from(first_within(job).as_micros()).unwrap_or(i64::MAX);
        let first = runs[0].started_us - from_us;
        assert!(
            first <= first_us + slack_us,
            "job {} first ran {first} µs after the start",
            job.name
        );
        let mut max_gap = first;
        for pair in runs.windows(2) {
            let gap = pair[1].started_us - pair[0].locked_at_us;
            assert!(
                gap <= bound_us + slack_us,
                "job {} went unrun for {gap} µs after the run {:?} (bound {bound_us} µs + slack)",
                job.name,
                pair[0]
            );
            max_gap = max_gap.max(gap);
        }
        if let Some(last) = runs.last() {
            let tail = to_us - last.locked_at_us;
            assert!(
                tail <= bound_us + slack_us,
                "job {} went unrun for the last {tail} µs (after {last:?})",
                job.name
            );
            max_gap = max_gap.max(tail);
        }
        worst.insert(job.name.clone(), max_gap);
    }
    worst
}

/// Counts of each kind of event per replica label: (ran, skipped, errors).
pub(crate) fn tally(events: &[Stamped]) -> BTreeMap<String, (usize, usize, usize)> {
    let mut counts: BTreeMap<String, (usize, usize, usize)> = BTreeMap::new();
    for s in events {
        let entry = counts.entry(s.event.replica().to_owned()).or_default();
        match s.event {
            Event::Ran { .. } => entry.0 += 1,
            Event::Skipped { .. } => entry.1 += 1,
            Event::Error { .. } => entry.2 += 1,
            _ => {}
        }
    }
    counts
}

/// A duration from an environment variable in seconds, else `default`.
pub(crate) fn seconds_from_env(var: &str, default: u64) -> Duration {
    Duration::from_secs(
        std::env::var(var)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default),
    )
}
