//! The scheduler across real replica processes (issue 11's multi-process tests), each replica
//! the package's `replica` program running its jobs on `shedlock_core::Scheduler`, on real
//! stores:
//!
//! - three replicas whose clocks are 2 s behind, right and 2 s ahead (libfaketime), one job
//!   every second for about 20 s: no fire ran twice; every fire ran once or a replica reported
//!   it missed, with its reason; no run's lock was taken before its fire `F` by the store's
//!   clock, nor after its window (Redis, Postgres, MariaDB; SQLite, whose clock is each
//!   process's own, with one clock);
//! - `kill -9` of the replica running a fire, then its restart: that fire is not run again, the
//!   no fire is claimed before the dead run's `lock_until`, the first fire at or after it runs;
//! - catch-up: every replica down across a fire, then two start together: the fire runs once,
//!   late; with catch-up off it does not run;
//! - a leader-only job runs only on the leader of the replicas' latch, and across a failover
//!   (`kill -9` of the leader) no fire runs twice.
//!
//! Stores from `SHEDLOCK_REDIS_URL`, `SHEDLOCK_PG_URL`, `SHEDLOCK_MYSQL_URL` (skipped visibly
//! without them, failing under `SHEDLOCK_REQUIRE_DB=1`); SQLite is a file of the test's own.
//! Every wait polls the replicas' events or the run log against a deadline.

use crate::fault_support;

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fault_support::{Cluster, Replica, Stamped};
use shedlock_demo::event::Event;
use shedlock_demo::runlog::{RunRecord, fires_run_twice};
use tokio::time::Instant;

/// The stores these tests run on.
#[derive(Debug, Clone, Copy)]
enum Store {
    Redis,
    Postgres,
    MariaDb,
    Sqlite,
}

/// A cluster of `jobs` on `store`, or `None` (after a skip notice) without its URL.
fn cluster(store: Store, name: &str, jobs: &[&str]) -> Option<Cluster> {
    Some(match store {
        Store::Redis => Cluster::on_kv_store(&shedlock_redis::testing::redis_url()?, name, jobs),
        Store::Postgres => Cluster::new(&shedlock_sqlx::testing::postgres_url()?, name, jobs),
        Store::MariaDb => Cluster::new(&shedlock_sqlx::testing::mysql_url()?, name, jobs),
        Store::Sqlite => {
            let mut cluster = Cluster::new("sqlite::memory:", name, jobs);
            let file = cluster.logs.path().join("store.db");
            cluster.url = format!("sqlite://{}", file.display());
            cluster
        }
    })
}

pub(crate) fn wall_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

pub(crate) fn period_us(cluster: &Cluster) -> i64 {
    i64::try_from(cluster.jobs[0].every.as_micros()).unwrap_or(i64::MAX)
}

/// The fires some replica reported missed, with their reasons: (job, tick) → reasons.
fn missed(events: &[Stamped]) -> BTreeMap<(String, u64), Vec<String>> {
    let mut missed: BTreeMap<(String, u64), Vec<String>> = BTreeMap::new();
    for s in events {
        if let Event::Missed {
            job, tick, reason, ..
        } = &s.event
        {
            missed
                .entry((job.clone(), *tick))
                .or_default()
                .push(reason.clone());
        }
    }
    missed
}

/// Asserts what holds for every run on a store that records fires: no fire ran twice, each
/// run's lock was taken inside its fire's window by the store's clock.
fn assert_once_per_fire(cluster: &Cluster, records: &[RunRecord]) {
    let twice = fires_run_twice(records);
    assert!(twice.is_empty(), "fires run twice: {twice:?}");
    let period = period_us(cluster);
    for run in records {
        assert!(
            run.fire_us <= run.locked_at_us,
            "a claim before its fire by the store's clock: {run:?}"
        );
        assert!(
            run.locked_at_us < run.fire_us + period,
            "a claim after its fire's window: {run:?}"
        );
    }
}

/// Waits until a run of `job` for a fire at or after `tick` is in the events.
async fn wait_for_run_from(cluster: &Cluster, job: &str, tick: u64, within: Duration) {
    let job = job.to_owned();
    cluster
        .events
        .wait_for(
            &format!("a run of {job} at tick ≥ {tick}"),
            within,
            |all| {
                all.iter().any(|s| {
                matches!(&s.event, Event::Ran { job: j, tick: t, .. } if *j == job && *t >= tick)
            })
            },
        )
        .await;
}

// ---------------------------------------------------------------------------------------------
// Three replicas, three clocks.

/// The replicas and their clocks (libfaketime offsets; empty: the real clock).
pub(crate) const SKEWS: [(&str, &str, i64); 3] =
    [("r1", "-2", -2_000), ("r2", "", 0), ("r3", "+2", 2_000)];

/// The store recorded fires: no replica fell back to plain locks (their logs say so).
pub(crate) fn assert_no_fall_back(cluster: &Cluster) {
    for entry in std::fs::read_dir(cluster.logs.path())
        .expect("the replicas' logs")
        .flatten()
    {
        let log = std::fs::read_to_string(entry.path()).unwrap_or_default();
        assert!(
            !log.contains("does not record fires"),
            "{}: a replica fell back to plain locks:\n{log}",
            entry.path().display()
        );
    }
}

/// The clocks were really skewed: each replica's own wall clock when it was ready.
pub(crate) fn assert_skews_were_real(events: &[Stamped]) {
    for (label, _, skew_ms) in SKEWS {
        let (wall, at) = events
            .iter()
            .find_map(|s| match &s.event {
                Event::Ready {
                    replica, wall_ms, ..
                } if replica == label => Some((*wall_ms, s.at)),
                _ => None,
            })
            .unwrap_or_else(|| panic!("{label} never reported ready"));
        let ours = wall_us() / 1000 - i64::try_from(at.elapsed().as_millis()).unwrap_or(0);
        let off = wall - ours;
        assert!(
            (off - skew_ms).abs() < 1_000,
            "{label} should see its clock {skew_ms} ms off, saw {off} ms"
        );
    }
}

async fn skewed_replicas_run_each_fire_at_most_once(store: Store, skewed: bool) {
    let test = format!("skewed_replicas_run_each_fire_at_most_once on {store:?}");
    let Some(cluster) = cluster(
        store,
        "skew",
        &["tick,every=1s,at_most=5s,work=50ms..300ms"],
    ) else {
        return;
    };
    let lib = if skewed {
        let Some(lib) = fault_support::libfaketime() else {
            assert!(
                !fault_support::required(),
                "{test}: SHEDLOCK_REQUIRE_DB=1 but libfaketime is not installed"
            );
            eprintln!("SKIPPED {test}: libfaketime is not installed (apt-get install faketime)");
            return;
        };
        Some(lib)
    } else {
        None
    };
    let length = fault_support::seconds_from_env("SHEDLOCK_SCHEDULER_SECS", 20);
    cluster.create_schema().await;
    let mut replicas = Vec::new();
    for (label, offset, _) in SKEWS {
        let env: Vec<(&str, String)> = match (&lib, offset.is_empty()) {
            (Some(lib), false) => vec![
                ("LD_PRELOAD", lib.display().to_string()),
                ("FAKETIME", offset.to_owned()),
                ("FAKETIME_DONT_FAKE_MONOTONIC", "1".to_owned()),
            ],
            _ => Vec::new(),
        };
        replicas.push(cluster.start_with(label, &cluster.url, &env).await);
    }
    let from_us = wall_us();
    tokio::time::sleep(length).await; // the run's length, not a synchronisation
    let to_us = wall_us();
    cluster.stop_all(replicas).await;

    let events = cluster.events.all();
    let db = cluster.runlog().await;
    let records = cluster.records(&db).await;

    if skewed {
        assert_skews_were_real(&events);
    }
    assert_no_fall_back(&cluster);
    assert_once_per_fire(&cluster, &records);

    // Every fire of the run (with a period's margin at each end: replicas starting, stopping)
    // ran once, or a replica reported it missed with a reason.
    let period = period_us(&cluster);
    let missed = missed(&events);
    let mut fires = 0;
    let mut first = (from_us / period + 2) * period;
    while first < to_us - period {
        let tick = u64::try_from(first / period).unwrap_or(0);
        let runs = records.iter().filter(|r| r.fire_us == first).count();
        let reasons = missed.get(&("tick".to_owned(), tick));
        assert!(
            runs == 1 || reasons.is_some_and(|r| r.iter().all(|r| !r.is_empty())),
            "fire {first} µs: {runs} runs and no replica reported it missed; missed: {missed:?}"
        );
        fires += 1;
        first += period;
    }
    assert!(fires >= 5, "{test}: only {fires} fires checked");
    // Every replica took part: it ran fires or was told another had claimed them.
    for (label, ..) in SKEWS {
        assert!(
            events.iter().any(|s| s.event.replica() == label
                && matches!(s.event, Event::Ran { .. } | Event::Skipped { .. })),
            "{label} decided no fire; logs:\n{}",
            cluster.log_tails()
        );
    }
    let per_replica: BTreeMap<&str, usize> = records.iter().fold(BTreeMap::new(), |mut m, r| {
        *m.entry(r.replica.as_str()).or_default() += 1;
        m
    });
    eprintln!(
        "{test}: {fires} fires checked, {} runs {per_replica:?}, {} reported missed",
        records.len(),
        missed.len()
    );
    cluster.drop_tables(&db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn skewed_replicas_run_each_fire_at_most_once_on_redis() {
    skewed_replicas_run_each_fire_at_most_once(Store::Redis, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn skewed_replicas_run_each_fire_at_most_once_on_postgres() {
    skewed_replicas_run_each_fire_at_most_once(Store::Postgres, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_mysql), ignore = "needs SHEDLOCK_MYSQL_URL (MySQL)")]
async fn skewed_replicas_run_each_fire_at_most_once_on_mariadb() {
    skewed_replicas_run_each_fire_at_most_once(Store::MariaDb, true).await;
}

/// SQLite's clock is each process's own: the replicas share one clock here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_run_each_fire_at_most_once_on_sqlite() {
    skewed_replicas_run_each_fire_at_most_once(Store::Sqlite, false).await;
}

// ---------------------------------------------------------------------------------------------
// kill -9 of the replica running a fire.

async fn killed_runner_fire_is_not_run_again(store: Store) {
    let Some(cluster) = cluster(
        store,
        "kill",
        &["kr,every=1s,at_most=3s,work=600ms..900ms,catch_up"],
    ) else {
        return;
    };
    cluster.create_schema().await;
    let db = cluster.runlog().await;
    let mut replicas: BTreeMap<String, Replica> = BTreeMap::new();
    for label in ["r1", "r2"] {
        replicas.insert(label.to_owned(), cluster.start(label).await);
    }
    // Kill the replica of the next run the moment it is reported; again if it had finished.
    let mut dead = None;
    for _ in 0..5 {
        let since = Instant::now();
        cluster
            .events
            .wait_for("a run", Duration::from_secs(30), |all| {
                all.iter()
                    .any(|s| s.at > since && matches!(s.event, Event::Ran { .. }))
            })
            .await;
        let all = cluster.events.all();
        let Some((victim, tick)) = all.iter().find_map(|s| match &s.event {
            Event::Ran { replica, tick, .. } if s.at > since => Some((replica.clone(), *tick)),
            _ => None,
        }) else {
            continue;
        };
        if let Some(replica) = replicas.remove(&victim) {
            replica.kill().await;
        }
        let record = cluster
            .records(&db)
            .await
            .into_iter()
            .find(|r| r.replica == victim && u64::try_from(r.tick).ok() == Some(tick));
        replicas.insert(victim.clone(), cluster.start(&victim).await);
        if let Some(record) = record
            && record.ended_us.is_none()
        {
            dead = Some(record);
            break;
        }
    }
    let dead = dead.expect("a replica killed mid-run within five tries");
    let period = period_us(&cluster);
    // The first fire at or after the dead run's lock_until.
    let after = (dead.lock_until_us + period - 1) / period * period;
    let after_tick = u64::try_from(after / period).unwrap_or(0);
    // The restarted replica caught up at start (catch_up): it must not run the dead fire.
    wait_for_run_from(&cluster, "kr", after_tick + 1, Duration::from_secs(30)).await;
    cluster.stop_all(replicas.into_values().collect()).await;

    let records = cluster.records(&db).await;
    assert_once_per_fire(&cluster, &records);
    let runs_of = |fire: i64| records.iter().filter(|r| r.fire_us == fire).count();
    assert_eq!(runs_of(dead.fire_us), 1, "the dead run's fire ran again");
    // The dead run's lock held to its lock_until: no later fire was claimed before it (a fire
    // just before lock_until may run, claimed once the lock had freed itself).
    let inside: Vec<_> = records
        .iter()
        .filter(|r| r.fire_us > dead.fire_us && r.locked_at_us < dead.lock_until_us)
        .collect();
    assert!(
        inside.is_empty(),
        "fires claimed before the dead run's lock_until: {inside:?}; the dead run {dead:?}"
    );
    assert_eq!(
        runs_of(after),
        1,
        "the first fire at or after the dead run's lock_until ({after} µs) did not run: {records:#?}"
    );
    cluster.drop_tables(&db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn killed_runner_fire_is_not_run_again_on_redis() {
    killed_runner_fire_is_not_run_again(Store::Redis).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn killed_runner_fire_is_not_run_again_on_postgres() {
    killed_runner_fire_is_not_run_again(Store::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_mysql), ignore = "needs SHEDLOCK_MYSQL_URL (MySQL)")]
async fn killed_runner_fire_is_not_run_again_on_mariadb() {
    killed_runner_fire_is_not_run_again(Store::MariaDb).await;
}

// ---------------------------------------------------------------------------------------------
// Catch-up.

async fn catch_up_after_an_outage(store: Store, catch_up: bool) {
    let spec = if catch_up {
        "cu,every=4s,at_most=3s,work=100ms..200ms,catch_up"
    } else {
        "cu,every=4s,at_most=3s,work=100ms..200ms"
    };
    let Some(cluster) = cluster(store, "catchup", &[spec]) else {
        return;
    };
    cluster.create_schema().await;
    let db = cluster.runlog().await;
    let period = period_us(&cluster);
    // One fire is recorded, then every replica is down.
    let first = cluster.start("r1").await;
    cluster
        .events
        .wait_for("a first run", Duration::from_secs(30), |all| {
            all.iter().any(|s| matches!(s.event, Event::Done { .. }))
        })
        .await;
    cluster.stop_all(vec![first]).await;
    // The next fire passes with nobody up; both replicas start half a second into its window.
    let missed_fire = (wall_us() / period + 1) * period;
    let start_at = missed_fire + 500_000;
    let wait = u64::try_from(start_at - wall_us()).unwrap_or(0);
    tokio::time::sleep(Duration::from_micros(wait)).await; // the scenario's timing
    let restarted_us = wall_us();
    assert!(
        restarted_us < missed_fire + period / 2,
        "the test was too slow to restart inside the missed fire's window"
    );
    let (r1, r2) = tokio::join!(cluster.start("r1"), cluster.start("r2"));
    let tick = u64::try_from(missed_fire / period).unwrap_or(0);
    // The next regular fire runs either way.
    wait_for_run_from(&cluster, "cu", tick + 1, Duration::from_secs(30)).await;
    cluster.stop_all(vec![r1, r2]).await;

    let records = cluster.records(&db).await;
    assert_once_per_fire_late_ok(&records);
    let runs: Vec<_> = records
        .iter()
        .filter(|r| r.fire_us == missed_fire)
        .collect();
    if catch_up {
        assert_eq!(runs.len(), 1, "the missed fire runs once: {records:#?}");
        assert!(
            runs[0].locked_at_us >= restarted_us,
            "it runs late, after the restart: {:?}",
            runs[0]
        );
    } else {
        assert!(
            runs.is_empty(),
            "without catch-up the missed fire does not run: {runs:?}"
        );
    }
    cluster.drop_tables(&db).await;
}

/// As [`assert_once_per_fire`], but a catch-up run is late by design: only "never before F".
fn assert_once_per_fire_late_ok(records: &[RunRecord]) {
    let twice = fires_run_twice(records);
    assert!(twice.is_empty(), "fires run twice: {twice:?}");
    for run in records {
        assert!(run.fire_us <= run.locked_at_us, "a claim before F: {run:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn catch_up_runs_a_missed_fire_once_late_on_redis() {
    catch_up_after_an_outage(Store::Redis, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn without_catch_up_a_missed_fire_does_not_run_on_redis() {
    catch_up_after_an_outage(Store::Redis, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn catch_up_runs_a_missed_fire_once_late_on_postgres() {
    catch_up_after_an_outage(Store::Postgres, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_mysql), ignore = "needs SHEDLOCK_MYSQL_URL (MySQL)")]
async fn catch_up_runs_a_missed_fire_once_late_on_mariadb() {
    catch_up_after_an_outage(Store::MariaDb, true).await;
}

// ---------------------------------------------------------------------------------------------
// Leader-only jobs.

/// Whether `replica` led (an `Elected` received before `at`, with no `SteppedDown` after it and
/// before `at`).
fn led_at(events: &[Stamped], replica: &str, at: Instant) -> bool {
    let mut leading = false;
    for s in events
        .iter()
        .filter(|s| s.event.replica() == replica && s.at <= at)
    {
        match s.event {
            Event::Elected { .. } => leading = true,
            Event::SteppedDown { .. } => leading = false,
            _ => {}
        }
    }
    leading
}

async fn leader_only_job_runs_only_on_the_leader(store: Store) {
    let Some(mut cluster) = cluster(
        store,
        "leader",
        &["lo,every=1s,at_most=3s,work=100ms..300ms,leader_only"],
    ) else {
        return;
    };
    cluster.extra_args = [
        "--lease",
        "2s",
        "--renew",
        "500ms",
        "--renew-deadline",
        "1500ms",
        "--acquire",
        "250ms",
        "--call-timeout",
        "250ms",
    ]
    .map(str::to_owned)
    .to_vec();
    cluster.create_schema().await;
    let db = cluster.runlog().await;
    let mut replicas: BTreeMap<String, Replica> = BTreeMap::new();
    for label in ["r1", "r2", "r3"] {
        replicas.insert(label.to_owned(), cluster.start(label).await);
    }
    let runs_by = |all: &[Stamped], who: &str, since: Instant| {
        all.iter()
            .filter(|s| s.at > since && s.event.replica() == who)
            .filter(|s| matches!(s.event, Event::Ran { .. }))
            .count()
    };
    // The first leader runs a few fires; then it is killed.
    let started = Instant::now();
    cluster
        .events
        .wait_for(
            "three runs by one replica",
            Duration::from_secs(30),
            |all| {
                ["r1", "r2", "r3"]
                    .iter()
                    .any(|r| runs_by(all, r, started) >= 3)
            },
        )
        .await;
    let all = cluster.events.all();
    let leader = ["r1", "r2", "r3"]
        .into_iter()
        .find(|r| runs_by(&all, r, started) >= 3)
        .expect("a leader")
        .to_owned();
    if let Some(replica) = replicas.remove(&leader) {
        replica.kill().await;
    }
    let killed = Instant::now();
    // Another replica is elected and runs fires.
    cluster
        .events
        .wait_for(
            "three runs by a new leader",
            Duration::from_secs(30),
            |all| {
                ["r1", "r2", "r3"]
                    .iter()
                    .any(|r| *r != leader && runs_by(all, r, killed) >= 3)
            },
        )
        .await;
    cluster.stop_all(replicas.into_values().collect()).await;

    let events = cluster.events.all();
    let records = cluster.records(&db).await;
    assert_once_per_fire(&cluster, &records);
    for s in &events {
        if let Event::Ran { replica, tick, .. } = &s.event {
            assert!(
                led_at(&events, replica, s.at),
                "{replica} ran tick {tick} while not leading"
            );
            assert!(
                *replica != leader || s.at <= killed,
                "the killed leader ran after its death"
            );
        }
    }
    let new_leaders: Vec<&str> = records
        .iter()
        .map(|r| r.replica.as_str())
        .filter(|r| *r != leader)
        .collect();
    assert!(!new_leaders.is_empty(), "nobody took over: {records:#?}");
    cluster.drop_tables(&db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn leader_only_job_runs_only_on_the_leader_across_a_failover_on_redis() {
    leader_only_job_runs_only_on_the_leader(Store::Redis).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn leader_only_job_runs_only_on_the_leader_across_a_failover_on_postgres() {
    leader_only_job_runs_only_on_the_leader(Store::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_mysql), ignore = "needs SHEDLOCK_MYSQL_URL (MySQL)")]
async fn leader_only_job_runs_only_on_the_leader_across_a_failover_on_mariadb() {
    leader_only_job_runs_only_on_the_leader(Store::MariaDb).await;
}
