//! Clock independence (issue 8, item 4): three replicas compete for four locked jobs on
//! Postgres; two of them run under libfaketime (Debian's `faketime`), one 5 hours ahead and one
//! 3 hours behind. Then:
//!
//! - each replica really saw its clock: its `Ready` event carries its own wall time, which must
//!   be off by the configured skew (so the test cannot pass by accident, e.g. if the preload
//!   silently did nothing);
//! - no two runs of one job overlapped (database clock), and every job kept running;
//! - every lock record the skewed replicas got carries the database's time (its `locked_at` is
//!   within seconds of the database clock when the run started), never their own;
//! - the skewed replicas took part: each ran jobs and was refused locks others held.
//!
//! Runs on the shared Postgres (`SHEDLOCK_PG_URL`). Needs libfaketime; without it the test is
//! skipped, or fails under `SHEDLOCK_REQUIRE_DB=1` (`.ci/run` installs `faketime`).

use crate::fault_support;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fault_support::{Cluster, JOBS, assert_liveness, assert_no_overlaps, db_now_us, tally};
use shedlock_demo::database::Database;
use shedlock_demo::event::Event;
use tokio::time::Instant;

const SLACK: Duration = Duration::from_secs(2);
/// The replicas and their clock offsets (seconds).
const SKEWS: [(&str, i64, &str); 3] = [
    ("r1", 0, ""),
    ("r2", 5 * 3600, "+5h"),
    ("r3", -3 * 3600, "-3h"),
];

fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn skewed_wall_clocks_cannot_break_exclusion() {
    let test = "skewed_wall_clocks_cannot_break_exclusion";
    let Some(url) = fault_support::postgres_url() else {
        return;
    };
    let Some(lib) = fault_support::libfaketime() else {
        assert!(
            !fault_support::required(),
            "{test}: SHEDLOCK_REQUIRE_DB=1 but libfaketime is not installed (apt-get install faketime)"
        );
        eprintln!("SKIPPED {test}: libfaketime is not installed (apt-get install faketime)");
        return;
    };
    let length = fault_support::seconds_from_env("SHEDLOCK_CLOCK_SECS", 15);
    let wall = Instant::now();
    let cluster = Cluster::new(&url, "clock", &JOBS);
    let db = Database::connect(&url).await.expect("connect");
    cluster.create_schema().await;

    let mut replicas = Vec::new();
    for (label, _, offset) in SKEWS {
        let env: Vec<(&str, String)> = if offset.is_empty() {
            Vec::new()
        } else {
            vec![
                ("LD_PRELOAD", lib.display().to_string()),
                ("FAKETIME", offset.to_owned()),
                // Tokio's timers run on the monotonic clock: leave it alone.
                ("FAKETIME_DONT_FAKE_MONOTONIC", "1".to_owned()),
            ]
        };
        replicas.push(cluster.start_with(label, &url, &env).await);
    }
    let from_us = db_now_us(&db).await;
    tokio::time::sleep(length).await; // the run's length, not a synchronisation
    let to_us = db_now_us(&db).await;
    for replica in replicas {
        let label = replica.label.clone();
        assert!(
            replica.stop(Duration::from_secs(20)).await,
            "{label} did not stop cleanly; logs:\n{}",
            cluster.log_tails()
        );
    }

    let events = cluster.events.all();
    let records = cluster.records(&db).await;
    let counts = tally(&events);

    // 1. The skew was real: each replica's own wall time, as it reported it.
    let mut seen_skew = Vec::new();
    for (label, skew_s, _) in SKEWS {
        let ready = events
            .iter()
            .find_map(|s| match &s.event {
                Event::Ready {
                    replica,
                    wall_ms: w,
                    ..
                } if replica == label => Some((*w, s.at)),
                _ => None,
            })
            .unwrap_or_else(|| panic!("{label} never reported ready"));
        // Our wall clock when we read the event, corrected back to when we received it.
        let ours = wall_ms() - i64::try_from(ready.1.elapsed().as_millis()).unwrap_or(0);
        let offset_ms = ready.0 - ours;
        assert!(
            (offset_ms - skew_s * 1000).abs() < 60_000,
            "{label} should see its clock {skew_s} s off, but its wall clock was {offset_ms} ms off"
        );
        seen_skew.push((label, offset_ms / 1000));
    }

    // 2. Exclusion and liveness, by the database's clock.
    assert_no_overlaps(&records);
    let worst = assert_liveness(&cluster, &records, from_us, to_us, SLACK);
    let errors: Vec<_> = events
        .iter()
        .filter(|s| matches!(s.event, Event::Error { .. }))
        .collect();
    assert!(errors.is_empty(), "errors: {errors:#?}");

    // 3. Every lock record is on the database's clock, whoever took it.
    for run in &records {
        let drift = (run.locked_at_us - run.started_us).abs();
        assert!(
            drift < 5_000_000,
            "run {run:?}: its lock's locked_at is {drift} µs away from the database clock"
        );
    }

    // 4. The skewed replicas took part: they ran jobs and were refused held locks.
    for (label, skew_s, _) in SKEWS {
        let (ran, skipped, _) = counts.get(label).copied().unwrap_or_default();
        let logged = records.iter().filter(|r| r.replica == label).count();
        assert!(
            ran >= 1 && logged >= 1 && skipped >= 1,
            "{label} (clock {skew_s} s off) did not take part: ran {ran} (logged {logged}), \
             skipped {skipped}"
        );
    }

    eprintln!(
        "{test}: {length:?} run; replicas' clock offsets (s) {seen_skew:?}; {} runs; events per \
         replica (ran, skipped, errors) {counts:?}; worst gap per job (ms) {:?}; total {:?}",
        records.len(),
        worst
            .iter()
            .map(|(j, us)| (j.as_str(), us / 1000))
            .collect::<Vec<_>>(),
        wall.elapsed()
    );
    cluster.drop_tables(&db).await;
}
