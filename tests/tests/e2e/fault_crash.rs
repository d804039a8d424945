//! Crash test (issue 8, item 1): three replica processes run four locked jobs on Postgres while
//! replicas are killed with `kill -9` at random (preferably while they run a job) and restarted
//! after a moment. Every run is recorded in a run log with the database's clock; afterwards:
//!
//! - no two runs of one job overlapped (a run whose replica died counts until its lock's
//!   `lock_until`, the latest moment it could have been running under the lock);
//! - no job went unrun for longer than `at_most` + one tick (+ scheduling slack) after the
//!   `locked_at` of its previous run, so a lock whose holder died freed itself in time;
//! - the kills really hit holders mid-run (some runs have no end), so takeover was exercised;
//! - nothing failed: killing a replica is no error for the others.
//!
//! Runs on the shared Postgres (`SHEDLOCK_PG_URL`; skipped without it, failing under
//! `SHEDLOCK_REQUIRE_DB=1`). Its length is `SHEDLOCK_CRASH_SECS` (default 30 s).

use crate::fault_support;

use std::time::Duration;

use fault_support::{
    Cluster, JOBS, Replica, assert_liveness, assert_no_overlaps, db_now_us, random_below,
    random_between, running_replicas, seconds_from_env, tally,
};
use shedlock_demo::database::Database;
use shedlock_demo::event::Event;
use shedlock_demo::runlog::RunRecord;
use tokio::time::Instant;

/// Scheduling slack on top of `at_most` + one tick: tick jitter (150 ms), process scheduling on
/// a loaded 2-core machine, the database round trips.
const SLACK: Duration = Duration::from_secs(2);

const LABELS: [&str; 3] = ["r1", "r2", "r3"];

/// Kills a replica every 1.5–3.5 s (one that is running a job, if any), restarting it after
/// 0.3–1.2 s, for `length`; never more than one is down. Returns the replicas and the number of
/// kills, and of kills chosen while the victim was running a job.
async fn chaos(
    cluster: &Cluster,
    mut replicas: Vec<Replica>,
    length: Duration,
) -> (Vec<Replica>, u32, u32) {
    let started = Instant::now();
    let mut kills = 0;
    let mut kills_mid_run = 0;
    while started.elapsed() < length {
        // The chaos schedule (not synchronisation).
        tokio::time::sleep(random_between(
            Duration::from_millis(1500),
            Duration::from_millis(3500),
        ))
        .await;
        if started.elapsed() >= length {
            break;
        }
        let running = running_replicas(&cluster.events.all());
        let index = replicas
            .iter()
            .position(|r| running.contains(&r.label))
            .unwrap_or_else(|| usize::try_from(random_below(replicas.len() as u64)).unwrap_or(0));
        let victim = replicas.swap_remove(index);
        let label = victim.label.clone();
        if running.contains(&label) {
            kills_mid_run += 1;
        }
        victim.kill().await;
        kills += 1;
        tokio::time::sleep(random_between(
            Duration::from_millis(300),
            Duration::from_millis(1200),
        ))
        .await;
        replicas.push(cluster.start(&label).await);
    }
    (replicas, kills, kills_mid_run)
}

/// For runs cut short by a kill: the longest time (ms) from their lock's `lock_until` to the
/// start of the job's next run.
fn latest_takeover_ms(records: &[RunRecord]) -> i64 {
    let mut takeover_ms = 0;
    for dead in records.iter().filter(|r| r.ended_us.is_none()) {
        if let Some(next) = records
            .iter()
            .filter(|r| r.job == dead.job && r.started_us > dead.started_us)
            .min_by_key(|r| r.started_us)
        {
            takeover_ms = takeover_ms.max((next.started_us - dead.lock_until_us) / 1000);
        }
    }
    takeover_ms
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn replicas_killed_at_random_never_overlap_and_locks_free_themselves() {
    let test = "replicas_killed_at_random_never_overlap_and_locks_free_themselves";
    let Some(url) = fault_support::postgres_url() else {
        return;
    };
    let length = seconds_from_env("SHEDLOCK_CRASH_SECS", 30);
    let wall = Instant::now();
    let cluster = Cluster::new(&url, "crash", &JOBS);
    let db = Database::connect(&url).await.expect("connect");
    cluster.create_schema().await;

    let mut replicas = Vec::new();
    for label in LABELS {
        replicas.push(cluster.start(label).await);
    }
    let from_us = db_now_us(&db).await;
    let (replicas, kills, kills_mid_run) = chaos(&cluster, replicas, length).await;
    let to_us = db_now_us(&db).await;
    for replica in replicas {
        let label = replica.label.clone();
        assert!(
            replica.stop(Duration::from_secs(20)).await,
            "{label} did not stop cleanly; logs:\n{}",
            cluster.log_tails()
        );
    }

    let records = cluster.records(&db).await;
    let events = cluster.events.all();
    let unfinished = records.iter().filter(|r| r.ended_us.is_none()).count();
    let lost = events
        .iter()
        .filter(|s| {
            matches!(
                s.event,
                Event::Done {
                    lock_lost: true,
                    ..
                }
            )
        })
        .count();
    let errors: Vec<_> = events
        .iter()
        .filter(|s| matches!(s.event, Event::Error { .. }))
        .collect();

    assert_no_overlaps(&records);
    let worst = assert_liveness(&cluster, &records, from_us, to_us, SLACK);
    assert!(kills >= 3, "only {kills} kills in {length:?}");
    assert!(
        unfinished >= 1,
        "no kill hit a replica mid-run ({kills} kills, {kills_mid_run} chosen mid-run)"
    );
    assert!(errors.is_empty(), "replicas reported errors: {errors:#?}");
    assert_eq!(lost, 0, "a run lost its lock");
    let takeover_ms = latest_takeover_ms(&records);
    eprintln!(
        "{test}: {:?} run, {} runs, {kills} kills ({kills_mid_run} chosen mid-run, {unfinished} \
         runs cut short), latest takeover {takeover_ms} ms after lock_until, worst gap per job \
         (ms) {:?}, events per replica (ran, skipped, errors) {:?}, total {:?}",
        length,
        records.len(),
        worst
            .iter()
            .map(|(j, us)| (j.as_str(), us / 1000))
            .collect::<Vec<_>>(),
        tally(&events),
        wall.elapsed()
    );
    cluster.drop_tables(&db).await;
}
