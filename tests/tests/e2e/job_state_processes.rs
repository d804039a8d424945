//! Job state across real replica processes (issue 27): three replicas of the `replica` program
//! run a job that fails every run and one that succeeds, on Postgres, MariaDB, SQLite and Redis,
//! with a history of 5 runs per job. What the store then tells an operator, read through
//! `LockAdmin` and `JobView::collect` (what `shedlock jobs --json` prints; the command itself is
//! tested in shedlock-cli's tests):
//!
//! - the failing job's consecutive failures equal the failed runs the replicas reported, its last
//!   error is the text its last run returned, and it never succeeded; the other job has no
//!   failures and a last success; every store tells the same;
//! - the history holds exactly the 5 newest runs, newest first, after more than three times as
//!   many runs, each with its own error text;
//! - the definitions of all three replicas are listed, agreeing, with the schedule in words;
//! - on SQL, the history table dropped while the replicas run: each replica logs the error once
//!   (twice at most, when a write also failed while the drop waited), not once per run, with the
//!   database's own words, and the locks keep being released (the runs go on, recorded in the
//!   lock rows).
//!
//! Stores from `SHEDLOCK_PG_URL`, `SHEDLOCK_MYSQL_URL`, `SHEDLOCK_REDIS_URL` (skipped visibly
//! without them, failing under `SHEDLOCK_REQUIRE_DB=1`); SQLite is a file of the test's own.

use std::sync::Arc;
use std::time::Duration;

use shedlock_core::admin::model::JobView;
use shedlock_core::admin::{LockAdmin, LockEntry};
use shedlock_demo::event::Event;
use shedlock_demo::replica::failure_text;

use crate::fault_support::{Cluster, Stamped};

/// Runs kept per job.
const KEEP: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Store {
    Postgres,
    MariaDb,
    Sqlite,
    Redis,
}

fn cluster(store: Store) -> Option<Cluster> {
    let jobs = [
        "flaky,every=1s,work=10ms..40ms,fail",
        "steady,every=1s,work=10ms..40ms",
    ];
    let mut cluster = match store {
        Store::Redis => {
            Cluster::on_kv_store(&shedlock_redis::testing::redis_url()?, "jobstate", &jobs)
        }
        Store::Postgres => {
            Cluster::new(&shedlock_sqlx::testing::postgres_url()?, "jobstate", &jobs)
        }
        Store::MariaDb => Cluster::new(&shedlock_sqlx::testing::mysql_url()?, "jobstate", &jobs),
        Store::Sqlite => {
            let mut cluster = Cluster::new("sqlite::memory:", "jobstate", &jobs);
            let file = cluster.logs.path().join("store.db");
            cluster.url = format!("sqlite://{}", file.display());
            cluster
        }
    };
    cluster.extra_args = vec!["--history".into(), KEEP.to_string()];
    Some(cluster)
}

/// The admin side of the cluster's store.
async fn admin(store: Store, cluster: &Cluster) -> Arc<dyn LockAdmin> {
    match store {
        Store::Redis => Arc::new(
            shedlock_redis::RedisLockProvider::builder(cluster.url.as_str())
                .key_prefix(&cluster.lock_table)
                .connect()
                .await
                .expect("connect to Redis"),
        ),
        Store::Postgres => Arc::new(
            shedlock_sqlx::PgLockProvider::from_url(&cluster.url)
                .table(&cluster.lock_table)
                .connect()
                .await
                .expect("connect to Postgres"),
        ),
        Store::MariaDb => Arc::new(
            shedlock_sqlx::MySqlLockProvider::from_url(&cluster.url)
                .table(&cluster.lock_table)
                .connect()
                .await
                .expect("connect to MariaDB"),
        ),
        Store::Sqlite => Arc::new(
            shedlock_sqlx::SqliteLockProvider::from_url(&cluster.url)
                .table(&cluster.lock_table)
                .connect()
                .await
                .expect("open the SQLite file"),
        ),
    }
}

/// Runs of `job` the replicas reported done (the failing job fails right after).
fn done(events: &[Stamped], job: &str) -> usize {
    events
        .iter()
        .filter(|s| matches!(&s.event, Event::Done { job: j, .. } if j == job))
        .count()
}

async fn jobs(admin: &dyn LockAdmin) -> Vec<JobView> {
    let definitions = admin.definitions().await.expect("definitions");
    let entries = admin.list().await.expect("list");
    let now = entries.first().map_or_else(
        shedlock_core::provider::chrono::Utc::now,
        LockEntry::store_now,
    );
    JobView::collect(&definitions, &entries, now)
}

fn job<'a>(jobs: &'a [JobView], name: &str) -> &'a JobView {
    jobs.iter()
        .find(|j| j.job == name)
        .unwrap_or_else(|| panic!("job {name:?} is listed: {jobs:#?}"))
}

/// What the store tells about the two jobs, as facts every store must agree on.
#[derive(Debug, PartialEq)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "one yes-or-no fact per field, compared whole across stores"
)]
struct Told {
    flaky_failures_match_the_runs: bool,
    flaky_last_error_is_its_last_runs: bool,
    flaky_never_succeeded: bool,
    steady_has_no_failures_and_a_success: bool,
    replicas: (usize, usize),
    disagreeing: bool,
    schedule: (Option<String>, Option<String>),
    history_len: usize,
    history_newest_first_with_own_errors: bool,
}

async fn scenario(store: Store) -> Option<Told> {
    let cluster = cluster(store)?;
    cluster.create_schema().await;
    let admin = admin(store, &cluster).await;
    let mut replicas = Vec::new();
    for label in ["a", "b", "c"] {
        replicas.push(cluster.start(label).await);
    }
    // More than three times the history's bound of failed runs.
    let enough = 3 * KEEP + 2;
    cluster
        .events
        .wait_for(
            &format!("{enough} runs of flaky"),
            Duration::from_mins(1),
            |all| done(all, "flaky") >= enough,
        )
        .await;
    // The definitions, while every replica runs and publishes.
    let running = jobs(&*admin).await;
    let flaky = job(&running, "flaky");
    let replicas_listed = (flaky.replicas.len(), job(&running, "steady").replicas.len());
    let disagreeing = flaky.disagreeing || job(&running, "steady").disagreeing;
    let schedule = (
        flaky.schedule.schedule.clone(),
        flaky.schedule.schedule_words.clone(),
    );
    let history = admin
        .history(&flaky.lock_name, 100)
        .await
        .expect("flaky's history");
    let newest_first = history.windows(2).all(|w| w[0].fire > w[1].fire)
        && history
            .iter()
            .all(|r| r.outcome.error() == Some(failure_text("flaky", r.fire).as_str()));

    if store != Store::Redis {
        history_table_dropped(&cluster, &admin, store).await;
    }

    cluster.stop_all(replicas).await;
    let events = cluster.events.all();
    let stopped = jobs(&*admin).await;
    let flaky = job(&stopped, "flaky");
    let steady = job(&stopped, "steady");
    let last = flaky.last_run.as_ref().expect("flaky's last run");
    Some(Told {
        flaky_failures_match_the_runs: usize::try_from(flaky.consecutive_failures).ok()
            == Some(done(&events, "flaky")),
        flaky_last_error_is_its_last_runs: last.error.as_deref()
            == Some(failure_text("flaky", last.fire).as_str()),
        flaky_never_succeeded: flaky.last_success.is_none(),
        steady_has_no_failures_and_a_success: steady.consecutive_failures == 0
            && steady.last_success.is_some(),
        replicas: replicas_listed,
        disagreeing,
        schedule,
        history_len: history.len(),
        history_newest_first_with_own_errors: newest_first,
    })
}

/// SQL: drops the history table while the replicas run, waits for more runs, and checks that
/// each replica logged the error once (see below) and the locks were released all along.
async fn history_table_dropped(cluster: &Cluster, admin: &Arc<dyn LockAdmin>, store: Store) {
    let table = format!("{}_history", cluster.lock_table);
    cluster
        .runlog()
        .await
        .drop_table(&table)
        .await
        .unwrap_or_else(|e| panic!("drop {table}: {e}"));
    let dropped = tokio::time::Instant::now();
    let before = done(&cluster.events.all(), "flaky");
    cluster
        .events
        .wait_for("eight more runs of flaky", Duration::from_secs(30), |all| {
            done(all, "flaky") >= before + 8
        })
        .await;
    // Every run released its lock: the lock row holds each new run's state.
    let runs = admin.list().await.expect("list");
    let flaky = runs
        .iter()
        .find(|e| e.record().name().ends_with("flaky"))
        .expect("flaky's row");
    let failures = flaky.state().expect("state").consecutive_failures;
    assert!(
        usize::try_from(failures).unwrap_or(0) >= before + 3,
        "runs after the drop were recorded in the row ({failures} failures, {before} runs before)"
    );
    // A replica that ran after the drop logs the history error once, not once per run: at most
    // twice, as a write can also time out while the drop waits for its lock, before the table is
    // gone, and each new kind of failure is logged again. Every replica ran several times after
    // the drop (16 runs of the two jobs).
    let after_drop: Vec<String> = cluster
        .events
        .all()
        .iter()
        .filter(|s| s.at > dropped && matches!(s.event, Event::Done { .. }))
        .map(|s| s.event.replica().to_owned())
        .collect();
    // The line carries the database's own words (the error's sources), not only ours.
    let database_says = match store {
        Store::Postgres => "relation",
        Store::MariaDb => "doesn't exist",
        Store::Sqlite => "no such table",
        Store::Redis => unreachable!("SQL stores only"),
    };
    let mut logged = 0;
    let mut with_cause = 0;
    for label in ["a", "b", "c"] {
        let path = cluster.logs.path().join(format!("{label}.0.log"));
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("ERROR") && l.contains("run history write failed"))
            .collect();
        let errors = lines.len();
        with_cause += lines.iter().filter(|l| l.contains(database_says)).count();
        let runs = after_drop.iter().filter(|r| *r == label).count();
        assert!(
            errors <= 2 && (runs == 0 || errors >= 1),
            "replica {label} ({runs} runs after the drop) logged {errors} history errors:\n{text}"
        );
        logged += errors;
    }
    assert!(
        logged >= 1,
        "no replica logged the history error:\n{}",
        cluster.log_tails()
    );
    assert!(
        with_cause >= 1,
        "no history error line says {database_says:?}:\n{}",
        cluster.log_tails()
    );
}

async fn run(store: Store) {
    let Some(told) = scenario(store).await else {
        return;
    };
    let expected = Told {
        flaky_failures_match_the_runs: true,
        flaky_last_error_is_its_last_runs: true,
        flaky_never_succeeded: true,
        steady_has_no_failures_and_a_success: true,
        replicas: (3, 3),
        disagreeing: false,
        schedule: (Some("every 1s".into()), Some("every second".into())),
        history_len: KEEP,
        history_newest_first_with_own_errors: true,
    };
    assert_eq!(told, expected, "{store:?}");
}

#[tokio::test]
async fn job_state_on_postgres() {
    run(Store::Postgres).await;
}

#[tokio::test]
async fn job_state_on_mariadb() {
    run(Store::MariaDb).await;
}

#[tokio::test]
async fn job_state_on_sqlite() {
    run(Store::Sqlite).await;
}

#[tokio::test]
async fn job_state_on_redis() {
    run(Store::Redis).await;
}
