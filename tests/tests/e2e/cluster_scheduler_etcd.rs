//! Fire claims on etcd across real replica processes (`replica run` on `etcd://` URLs), each
//! test on a private etcd of its own (shedlock-etcd's test support: free loopback ports, every
//! process killed at the end, also on panic), the run log in the shared Postgres
//! (`--runlog-url`), whose clock is the true one (replicas under libfaketime read it too):
//!
//! - a three-member cluster whose leader is killed (`kill -9`) while fires are being claimed:
//!   no fire ran twice, no runs overlapped, no replica fell back to plain locks, and every fire
//!   of the run ran once except fires reported missed, with a reason, around the kill;
//! - three replicas whose clocks are 2 s behind, right and 2 s ahead: etcd has no clock, so a
//!   claim's "not before `F`" and its window's end are each replica's own clock's, and a replica
//!   ahead runs fires early by the true clock (allowed, counted and printed); still no fire ran
//!   twice, no runs overlapped, each claim was inside its window by its replica's clock (the lock
//!   record's `locked_at`), and every fire ran once or was reported missed with a reason.
//!
//! Each prints one `SUMMARY` line: fires checked, runs, fires run twice, early runs (run started
//! before `F` by the database's clock), fires missed. Every wait polls the replicas' events
//! against a deadline; the sleeps are the scenario's length and timing.

#[path = "../../../shedlock-etcd/tests/integration/support/mod.rs"]
mod etcd_support;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use etcd_support::Cluster as Etcd;
use shedlock_demo::database::Database;
use shedlock_demo::event::Event;
use shedlock_demo::runlog::{RunRecord, fires_run_twice, overlaps};
use tokio::time::Instant;

use crate::cluster_scheduler::{
    SKEWS, assert_no_fall_back, assert_skews_were_real, missed, period_us, wall_us,
};
use crate::fault_support::{self, Cluster, Replica, Stamped};

/// Replicas on the etcd at `url`, running `jobs`, their run log in the shared Postgres; `None`
/// (after a skip notice) without `SHEDLOCK_PG_URL`.
fn cluster(url: &str, name: &str, jobs: &[&str]) -> Option<Cluster> {
    let runlog = fault_support::postgres_url()?;
    let mut cluster = Cluster::new(url, name, jobs);
    cluster.runlog_url = Some(runlog);
    // The lock table is the key prefix on etcd, which ends with '/'.
    cluster.lock_table.push('/');
    Some(cluster)
}

/// A private etcd of `size` members (`None` after a skip notice when there is no binary).
async fn private_etcd(size: usize) -> Option<Etcd> {
    let bin = etcd_support::etcd_binary()?;
    Some(
        tokio::task::spawn_blocking(move || Etcd::start(&bin, size))
            .await
            .expect("start a private etcd"),
    )
}

/// The replicas' events about `job`'s fires `tick - 2 ..= tick + 2`, one per line.
fn events_around(events: &[Stamped], job: &str, tick: u64) -> String {
    let near = |j: &str, t: u64| j == job && t.abs_diff(tick) <= 2;
    let mut out = String::new();
    for s in events {
        let shown = match &s.event {
            Event::Ran { job, tick, .. }
            | Event::Done { job, tick, .. }
            | Event::Skipped { job, tick, .. }
            | Event::Missed { job, tick, .. }
            | Event::Error { job, tick, .. } => near(job, *tick),
            _ => false,
        };
        if shown {
            let _ = writeln!(out, "  #{} {:?}", s.incarnation, s.event);
        }
    }
    out
}

/// Asserts that no fire ran twice (showing the events around each one that did) and that no
/// two runs of a job overlapped (database clock).
fn assert_once_and_apart(cluster: &Cluster, events: &[Stamped], records: &[RunRecord]) {
    let twice = fires_run_twice(records);
    if !twice.is_empty() {
        let period = period_us(cluster);
        let mut detail = String::new();
        for (job, fire, runs) in &twice {
            let tick = u64::try_from(fire / period).unwrap_or(0);
            let rows: Vec<&RunRecord> = records
                .iter()
                .filter(|r| r.job == *job && r.fire_us == *fire)
                .collect();
            let _ = writeln!(
                detail,
                "{job} fire {fire} µs (tick {tick}) ran {runs} times: {rows:#?}\nevents:\n{}",
                events_around(events, job, tick)
            );
        }
        panic!(
            "fires run twice:\n{detail}replica logs:\n{}",
            cluster.log_tails()
        );
    }
    let found = overlaps(records);
    assert!(
        found.is_empty(),
        "{} overlapping runs, e.g. {:#?}",
        found.len(),
        found.first()
    );
}

/// The fires of `job` due in `[from_us, to_us)` that did not run exactly once: (tick, F in µs,
/// runs).
fn unrun_fires(
    records: &[RunRecord],
    job: &str,
    period: i64,
    from_us: i64,
    to_us: i64,
) -> (usize, Vec<(u64, i64, usize)>) {
    let mut checked = 0;
    let mut unrun = Vec::new();
    let mut fire = (from_us + period - 1) / period * period;
    while fire < to_us {
        let runs = records
            .iter()
            .filter(|r| r.job == job && r.fire_us == fire)
            .count();
        if runs != 1 {
            unrun.push((u64::try_from(fire / period).unwrap_or(0), fire, runs));
        }
        checked += 1;
        fire += period;
    }
    (checked, unrun)
}

async fn drop_runs_table(cluster: &Cluster, db: &Database) {
    if let Err(error) = db.drop_table(&cluster.runs_table).await {
        eprintln!("could not drop {}: {error}", cluster.runs_table);
    }
}

// ---------------------------------------------------------------------------------------------
// A member killed while fires are claimed.

/// Kills (`kill -9`) the etcd cluster's leader a few milliseconds (0–20) after the next fire's
/// instant of a job every second, while the replicas' claims of that fire are on their way (a
/// committed claim whose reply is lost is one of the cases). Returns the member's index and the
/// wall clock (µs) just before and just after the kill.
async fn kill_the_leader_at_a_fire(etcd: &mut Etcd) -> (usize, i64, i64) {
    let leader = tokio::task::block_in_place(|| etcd.leader()).expect("the etcd leader");
    let period = 1_000_000;
    let now = wall_us();
    let jitter = i64::try_from(fault_support::random_below(20_000)).unwrap_or(0);
    let kill_at = (now / period + 1) * period + jitter;
    let wait = u64::try_from(kill_at - now).unwrap_or(0);
    tokio::time::sleep(Duration::from_micros(wait)).await; // the scenario's timing
    let before = wall_us();
    tokio::task::block_in_place(|| etcd.kill(leader));
    (leader, before, wall_us())
}

/// How long after the kill a fire may be missed: the surviving members elect a leader (etcd's
/// default election timeout is 1 s, randomised up to 2 s), replicas whose calls were in flight
/// time out (1 s here), and a claim whose reply the kill lost holds the job's lock at most
/// `at_most` (3 s) if its replica cannot tell it was its own.
const RECOVERY: Duration = Duration::from_secs(6);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(shedlock_etcd),
    ignore = "needs SHEDLOCK_ETCD_URL (etcd; starts private etcd processes of its own)"
)]
async fn killed_etcd_leader_while_fires_are_claimed_runs_no_fire_twice() {
    let test = "killed_etcd_leader_while_fires_are_claimed_runs_no_fire_twice";
    let Some(mut etcd) = private_etcd(3).await else {
        return;
    };
    let Some(cluster) = cluster(
        &etcd.url(),
        "etcdkill",
        &[
            "ka,every=1s,at_most=3s,work=50ms..200ms",
            "kb,every=1s,at_most=3s,work=50ms..200ms",
        ],
    ) else {
        return;
    };
    cluster.create_schema().await;
    let db = cluster.runlog().await;
    let mut replicas: Vec<Replica> = Vec::new();
    for label in ["r1", "r2", "r3"] {
        replicas.push(cluster.start(label).await);
    }
    let from_us = wall_us();
    let started = Instant::now();
    // Warm-up: both jobs run, a few fires each.
    cluster
        .events
        .wait_for("six runs", Duration::from_secs(30), |all| {
            all.iter()
                .filter(|s| s.at > started && matches!(s.event, Event::Ran { .. }))
                .count()
                >= 6
        })
        .await;
    let (leader, killed_from_us, killed_us) = kill_the_leader_at_a_fire(&mut etcd).await;
    let period = period_us(&cluster);
    let killed = Instant::now();
    tokio::time::sleep(Duration::from_secs(10)).await; // the run's length, not a synchronisation
    let to_us = wall_us();
    // The survivors elected a leader (the replicas may otherwise have missed fires for lack of
    // one, which is not what this test is about).
    let survivor_leader = tokio::task::block_in_place(|| etcd.leader());
    assert!(
        survivor_leader.is_some_and(|l| l != leader),
        "the surviving members elected no leader"
    );
    cluster.stop_all(replicas).await;

    let events = cluster.events.all();
    let records = cluster.records(&db).await;
    assert_no_fall_back(&cluster);
    assert_once_and_apart(&cluster, &events, &records);

    // Every fire of the run (a period's margin at each end: replicas starting, stopping) ran
    // once, or a replica reported it missed, with a reason, and it was due around the kill:
    // from the window the kill fell in to RECOVERY after it.
    let missed = missed(&events);
    let recovery_us = i64::try_from(RECOVERY.as_micros()).unwrap_or(i64::MAX);
    let kill_fire = killed_from_us / period * period;
    let (mut fires, mut unrun_total) = (0, Vec::new());
    for job in ["ka", "kb"] {
        let (checked, unrun) = unrun_fires(&records, job, period, from_us + period, to_us - period);
        fires += checked;
        for (tick, fire, runs) in unrun {
            assert_eq!(runs, 0, "{job} fire {fire} ran {runs} times");
            let reasons = missed.get(&(job.to_owned(), tick));
            assert!(
                reasons.is_some_and(|r| r.iter().all(|r| !r.is_empty())),
                "{job} fire {fire} µs (tick {tick}) did not run and no replica reported it \
                 missed with a reason (kill at {killed_us} µs); events:\n{}logs:\n{}",
                events_around(&events, job, tick),
                cluster.log_tails()
            );
            assert!(
                fire >= kill_fire && fire < killed_us + recovery_us,
                "{job} fire {fire} µs (tick {tick}) was missed ({reasons:?}) away from the kill \
                 at {killed_us} µs; events:\n{}",
                events_around(&events, job, tick)
            );
            unrun_total.push((job, fire - killed_us, reasons.cloned().unwrap_or_default()));
        }
    }
    assert!(fires >= 20, "{test}: only {fires} fires checked");
    // The replicas ran fires after the kill (not only before it).
    let runs_after = events
        .iter()
        .filter(|s| s.at > killed + RECOVERY && matches!(s.event, Event::Ran { .. }))
        .count();
    assert!(
        runs_after > 0,
        "no run after the recovery; logs:\n{}",
        cluster.log_tails()
    );
    let early = records.iter().filter(|r| r.started_us < r.fire_us).count();
    let errors = events
        .iter()
        .filter(|s| matches!(s.event, Event::Error { .. }))
        .count();
    let last_missed_ms = unrun_total.iter().map(|(_, d, _)| d / 1000).max();
    eprintln!(
        "SUMMARY {test}: fires={fires} runs={} twice=0 early={early} missed={} \
         (killed member m{leader}, the leader, {} ms into a fire's window; last missed fire \
         {last_missed_ms:?} ms after the kill; error events={errors}; missed: {unrun_total:?})",
        records.len(),
        unrun_total.len(),
        (killed_from_us - kill_fire) / 1000,
    );
    drop_runs_table(&cluster, &db).await;
}

// ---------------------------------------------------------------------------------------------
// Skewed replica clocks.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(shedlock_etcd),
    ignore = "needs SHEDLOCK_ETCD_URL (etcd; starts private etcd processes of its own)"
)]
async fn skewed_replicas_on_etcd_run_each_fire_at_most_once() {
    let test = "skewed_replicas_on_etcd_run_each_fire_at_most_once";
    let Some(lib) = fault_support::libfaketime() else {
        assert!(
            !fault_support::required(),
            "{test}: SHEDLOCK_REQUIRE_DB=1 but libfaketime is not installed"
        );
        eprintln!("SKIPPED {test}: libfaketime is not installed (apt-get install faketime)");
        return;
    };
    let Some(etcd) = private_etcd(1).await else {
        return;
    };
    let Some(cluster) = cluster(
        &etcd.url(),
        "etcdskew",
        &["tick,every=1s,at_most=5s,work=50ms..300ms"],
    ) else {
        return;
    };
    cluster.create_schema().await;
    let db = cluster.runlog().await;
    let mut replicas = Vec::new();
    for (label, offset, _) in SKEWS {
        let env: Vec<(&str, String)> = if offset.is_empty() {
            Vec::new()
        } else {
            vec![
                ("LD_PRELOAD", lib.display().to_string()),
                ("FAKETIME", offset.to_owned()),
                ("FAKETIME_DONT_FAKE_MONOTONIC", "1".to_owned()),
            ]
        };
        replicas.push(cluster.start_with(label, &cluster.url, &env).await);
    }
    let from_us = wall_us();
    tokio::time::sleep(Duration::from_secs(15)).await; // the run's length, not a synchronisation
    let to_us = wall_us();
    cluster.stop_all(replicas).await;

    let events = cluster.events.all();
    let records = cluster.records(&db).await;
    assert_skews_were_real(&events);
    assert_no_fall_back(&cluster);
    assert_once_and_apart(&cluster, &events, &records);
    // By the claiming replica's own clock (etcd's "now" in a claim; the lock record's
    // `locked_at`), each claim was inside its fire's window.
    let period = period_us(&cluster);
    for run in &records {
        assert!(
            run.fire_us <= run.locked_at_us && run.locked_at_us < run.fire_us + period,
            "a claim outside its fire's window by its replica's clock: {run:?}"
        );
    }
    // Every fire of the run (from two periods after the start, when the replica 2 s behind has
    // reached it, to a period before the end) ran once, or a replica reported it missed.
    let missed = missed(&events);
    let (fires, unrun) = unrun_fires(
        &records,
        "tick",
        period,
        from_us + 2 * period,
        to_us - period,
    );
    for (tick, fire, runs) in &unrun {
        assert_eq!(*runs, 0, "fire {fire} ran {runs} times");
        let reasons = missed.get(&("tick".to_owned(), *tick));
        assert!(
            reasons.is_some_and(|r| r.iter().all(|r| !r.is_empty())),
            "fire {fire} µs (tick {tick}) did not run and no replica reported it missed; \
             events:\n{}logs:\n{}",
            events_around(&events, "tick", *tick),
            cluster.log_tails()
        );
    }
    assert!(fires >= 10, "{test}: only {fires} fires checked");
    // Every replica took part: it ran fires or was told another had claimed them.
    for (label, ..) in SKEWS {
        assert!(
            events.iter().any(|s| s.event.replica() == label
                && matches!(s.event, Event::Ran { .. } | Event::Skipped { .. })),
            "{label} decided no fire; logs:\n{}",
            cluster.log_tails()
        );
    }
    // Early by the true clock: the run started (database clock) before its fire's instant, so
    // its claim was earlier still. Per replica, with the most.
    let mut early: BTreeMap<&str, (usize, i64)> = BTreeMap::new();
    for run in records.iter().filter(|r| r.started_us < r.fire_us) {
        let entry = early.entry(run.replica.as_str()).or_default();
        entry.0 += 1;
        entry.1 = entry.1.max((run.fire_us - run.started_us) / 1000);
    }
    let per_replica: BTreeMap<&str, usize> = records.iter().fold(BTreeMap::new(), |mut m, r| {
        *m.entry(r.replica.as_str()).or_default() += 1;
        m
    });
    eprintln!(
        "SUMMARY {test}: fires={fires} runs={} twice=0 early={} missed={} (runs per replica \
         {per_replica:?}; early per replica (count, most ms before F) {early:?}; missed ticks \
         {:?})",
        records.len(),
        early.values().map(|(n, _)| n).sum::<usize>(),
        unrun.len(),
        unrun.iter().map(|(t, ..)| t).collect::<Vec<_>>(),
    );
    drop_runs_table(&cluster, &db).await;
    drop(etcd);
}
