//! apalis-cron workers in real processes on real Postgres: three `apalis_worker` processes (the
//! package's binary, an apalis-cron worker ticking every second) record each run they make in a
//! table of runs, with the tick, the replica, the claim's `locked_at` and the database's clock.
//!
//! - `three_apalis_workers_under_the_layer_run_each_tick_once`: with shedlock-apalis's
//!   `CronFireLayer` claiming the ticks in a Postgres lock table, no tick is recorded twice,
//!   every tick between the first and the last recorded is recorded (the three replicas are free
//!   throughout), and none ran before its instant by the database's clock.
//! - `three_apalis_workers_without_the_layer_run_each_tick_three_times`: the same workers without
//!   the layer, the contrast: every tick all three were up for ran three times.
//!
//! The workers stop on their own after their `--seconds`; the test waits for them with a deadline
//! and reads the table. Their logs (`RUST_LOG`, set with `APALIS_WORKER_LOG`, default `info`) are
//! shown when a check fails. Needs `SHEDLOCK_PG_URL`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::Stdio;
use std::str::FromStr as _;
use std::time::Duration;

use chrono::{DateTime, Utc};
use shedlock_apalis::FireSchedule as _;
use shedlock_sqlx::testing;
use sqlx::{AssertSqlSafe, PgPool};
use tokio::process::Command;

/// How long each worker works.
const SECONDS: u64 = 9;

/// One recorded run.
#[derive(Debug)]
struct Run {
    fire: DateTime<Utc>,
    replica: String,
    locked_at: Option<DateTime<Utc>>,
    ran_at: DateTime<Utc>,
}

/// A test's tables and the workers' logs.
struct Setup {
    url: String,
    lock_table: String,
    runs_table: String,
    logs: tempfile::TempDir,
}

impl Setup {
    fn new(url: String) -> Self {
        Self {
            url,
            lock_table: testing::unique_table_name("apalis_lock"),
            runs_table: testing::unique_table_name("apalis_runs"),
            logs: tempfile::tempdir().expect("a temporary directory"),
        }
    }

    fn worker(&self, replica: &str, seconds: u64, extra: &[&str]) -> Command {
        let log = std::fs::File::create(self.log(replica)).expect("a log file");
        let mut command = Command::new(env!("CARGO_BIN_EXE_apalis_worker"));
        command
            .args(["--url", &self.url])
            .args(["--lock-table", &self.lock_table])
            .args(["--runs-table", &self.runs_table])
            .args(["--replica", replica])
            .args(["--seconds", &seconds.to_string()])
            .args(extra)
            .env(
                "RUST_LOG",
                std::env::var("APALIS_WORKER_LOG").unwrap_or_else(|_| "info".to_owned()),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true);
        command
    }

    fn log(&self, replica: &str) -> std::path::PathBuf {
        self.logs.path().join(format!("{replica}.log"))
    }

    /// Creates the tables (one worker with `--seconds 0`), then runs three workers to their end,
    /// and answers the runs they recorded, by tick.
    async fn run_three(&self, extra: &[&str]) -> Vec<Run> {
        let created = self
            .worker("setup", 0, &[])
            .status()
            .await
            .expect("start the worker");
        assert!(created.success(), "{}", self.logs("creating the tables"));
        let mut workers: Vec<_> = ["r1", "r2", "r3"]
            .iter()
            .map(|replica| {
                self.worker(replica, SECONDS, extra)
                    .spawn()
                    .expect("start a worker")
            })
            .collect();
        let deadline = Duration::from_secs(SECONDS + 30);
        for worker in &mut workers {
            let status = tokio::time::timeout(deadline, worker.wait())
                .await
                .unwrap_or_else(|_| panic!("a worker ran past {deadline:?}{}", self.logs("")))
                .expect("wait for a worker");
            assert!(
                status.success(),
                "a worker failed: {status}{}",
                self.logs("")
            );
        }
        let pool = PgPool::connect(&self.url).await.expect("connect");
        let rows =
            sqlx::query_as::<_, (DateTime<Utc>, String, Option<DateTime<Utc>>, DateTime<Utc>)>(
                AssertSqlSafe(format!(
                    "SELECT fire, replica, locked_at, ran_at FROM {} ORDER BY fire, ran_at",
                    self.runs_table
                )),
            )
            .fetch_all(&pool)
            .await
            .expect("read the runs");
        rows.into_iter()
            .map(|(fire, replica, locked_at, ran_at)| Run {
                fire,
                replica,
                locked_at,
                ran_at,
            })
            .collect()
    }

    /// The workers' logs, to show with a failure.
    fn logs(&self, when: &str) -> String {
        let mut all = format!("\n{when}");
        for replica in ["setup", "r1", "r2", "r3"] {
            let log = std::fs::read_to_string(self.log(replica)).unwrap_or_default();
            let _ = write!(all, "\n--- {replica}:\n{}", tail(&log));
        }
        all
    }

    async fn cleanup(&self) {
        if let Ok(pool) = PgPool::connect(&self.url).await {
            for table in [&self.lock_table, &self.runs_table] {
                let _ = sqlx::query(AssertSqlSafe(format!("DROP TABLE IF EXISTS {table}")))
                    .execute(&pool)
                    .await;
            }
        }
    }
}

fn tail(log: &str) -> &str {
    let lines: Vec<_> = log.match_indices('\n').collect();
    match lines.len().checked_sub(40) {
        Some(i) => &log[lines[i].0 + 1..],
        None => log,
    }
}

/// The runs by tick.
fn by_fire(runs: &[Run]) -> BTreeMap<DateTime<Utc>, Vec<&Run>> {
    let mut by_fire: BTreeMap<_, Vec<_>> = BTreeMap::new();
    for run in runs {
        by_fire.entry(run.fire).or_default().push(run);
    }
    by_fire
}

fn every_second() -> cron::Schedule {
    cron::Schedule::from_str("* * * * * *").expect("a cron expression")
}

#[tokio::test]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn three_apalis_workers_under_the_layer_run_each_tick_once() {
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let setup = Setup::new(url);
    let runs = setup.run_three(&[]).await;
    let logs = || setup.logs("");
    let by_fire = by_fire(&runs);
    for (fire, runs) in &by_fire {
        assert_eq!(runs.len(), 1, "tick {fire} ran twice: {runs:?}{}", logs());
    }
    let fires: Vec<_> = by_fire.keys().copied().collect();
    assert!(
        fires.len() + 3 >= usize::try_from(SECONDS).unwrap_or(usize::MAX),
        "too few ticks ran in {SECONDS} s: {fires:?}{}",
        logs()
    );
    let schedule = every_second();
    for pair in fires.windows(2) {
        assert_eq!(
            schedule.next_after(pair[0]),
            Some(pair[1]),
            "the tick after {} did not run{}",
            pair[0],
            logs()
        );
    }
    for run in &runs {
        let locked_at = run.locked_at.expect("every run is under the claim");
        assert!(locked_at >= run.fire, "claimed before its tick: {run:?}");
        assert!(run.ran_at >= run.fire, "ran before its tick: {run:?}");
    }
    let mut per_replica: BTreeMap<&str, usize> = BTreeMap::new();
    for run in &runs {
        *per_replica.entry(&run.replica).or_default() += 1;
    }
    let late = runs
        .iter()
        .filter_map(|run| (run.locked_at? - run.fire).to_std().ok())
        .max()
        .unwrap_or_default();
    println!(
        "apalis under the layer: {} ticks, each once; by replica {per_replica:?}; latest claim {late:?} after its tick",
        fires.len()
    );
    setup.cleanup().await;
}

#[tokio::test]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn three_apalis_workers_without_the_layer_run_each_tick_three_times() {
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let setup = Setup::new(url);
    let runs = setup.run_three(&["--no-lock"]).await;
    // The ticks all three workers were up for: from the latest first tick to the earliest last.
    let mut spans: BTreeMap<&str, (DateTime<Utc>, DateTime<Utc>)> = BTreeMap::new();
    for run in &runs {
        let span = spans.entry(&run.replica).or_insert((run.fire, run.fire));
        span.0 = span.0.min(run.fire);
        span.1 = span.1.max(run.fire);
    }
    assert_eq!(
        spans.len(),
        3,
        "every worker ran: {spans:?}{}",
        setup.logs("")
    );
    let from = spans
        .values()
        .map(|span| span.0)
        .max()
        .expect("three spans");
    let to = spans
        .values()
        .map(|span| span.1)
        .min()
        .expect("three spans");
    let common: Vec<_> = by_fire(&runs)
        .into_iter()
        .filter(|(fire, _)| (from..=to).contains(fire))
        .collect();
    assert!(common.len() >= 3, "{common:?}{}", setup.logs(""));
    for (fire, runs) in &common {
        assert_eq!(runs.len(), 3, "tick {fire}: {runs:?}{}", setup.logs(""));
    }
    println!(
        "apalis without the layer: each of the {} ticks all three workers were up for ran three times",
        common.len()
    );
    setup.cleanup().await;
}
