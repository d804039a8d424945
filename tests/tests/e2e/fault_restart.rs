//! Database restart mid-run (issue 8, item 2): three replicas run four locked jobs on a private
//! Postgres, which is crash-stopped (`pg_ctl -m immediate`: no checkpoint, every connection
//! broken), kept down for a moment and started again. Then:
//!
//! - the outage is reported as errors (`Event::Error`), never as skips or runs: no replica took
//!   or skipped a lock while the database was down;
//! - no two runs of one job overlapped (database clock), across the restart;
//! - locking resumed by itself: every job ran again within `at_most` + one tick (+ slack) of the
//!   restart, and after that no errors at all;
//! - each replica's lock pool failed at most one statement per connection after the restart;
//! - every replica stayed up and stops cleanly.
//!
//! Needs only the Postgres binaries (private server; skipped without them unless
//! `SHEDLOCK_REQUIRE_DB=1`).

use crate::fault_support;

use std::time::Duration;

use fault_support::{
    Cluster, JOBS, Stamped, assert_liveness, assert_liveness_from, assert_no_overlaps, db_now_us,
    tally,
};
use shedlock_demo::database::Database;
use shedlock_demo::event::Event;
use shedlock_tests::throwaway::Throwaway;
use tokio::time::Instant;

const LABELS: [&str; 3] = ["r1", "r2", "r3"];
const SLACK: Duration = Duration::from_secs(2);
/// How long the database stays down.
const OUTAGE: Duration = Duration::from_secs(2);
/// The replicas' lock pool size (shedlock-sqlx's default).
const LOCK_POOL: usize = 4;
/// How long the replicas run after locking resumed, to show that nothing fails any more.
const QUIET: Duration = Duration::from_secs(4);

/// When things happened during the outage (the test's clock, as events are stamped).
struct Timeline {
    /// Just before the stop.
    stop: Instant,
    /// The server is down.
    down: Instant,
    /// Just before the start.
    starting: Instant,
    /// The server is up again.
    start: Instant,
    /// Every job ran again.
    resumed: Instant,
}

/// Checks the replicas' events against the outage; returns the errors reported during it and
/// the fires skipped during it because the replica's own run still held their lock.
fn check_events(events: &[Stamped], t: &Timeline) -> (usize, usize) {
    let in_window =
        |from: Instant, to: Instant| events.iter().filter(move |s| s.at > from && s.at <= to);
    let outage_errors = in_window(t.stop, t.start + Duration::from_secs(1))
        .filter(|s| matches!(s.event, Event::Error { .. }))
        .count();
    assert!(
        outage_errors >= 1,
        "the outage was not reported as errors; events: {:#?}",
        in_window(t.stop, t.start).collect::<Vec<_>>()
    );
    // A lock taken just before the stop may be reported a moment later. A fire met while the
    // replica's own run (begun before the outage) still held the job's lock is skipped without
    // asking the store, once that run ends (its end is recorded in the database, so it may end
    // well into the outage): not a lock decision made while the database was down.
    let grace = t.down + Duration::from_millis(500);
    // Likewise a fire met after an earlier fire of the job failed on this replica at the stop (its
    // run's own database work, or its claim, cut mid-call): the replica has not seen its hold end
    // in the store, counts the lock as its own, and skips without asking the store. A skip while
    // the store is down is this replica's own knowledge, not an answer of the store.
    let held_by_own_run = |skip: &Stamped| {
        let Event::Skipped { replica, job, tick } = &skip.event else {
            return false;
        };
        let cut_claim = events.iter().any(|cut| {
            matches!(&cut.event, Event::Error { replica: r, job: j, tick: t0, .. }
                if r == replica && j == job && t0 < tick && cut.at <= grace)
        });
        cut_claim
            || events.iter().any(|began| {
                matches!(&began.event, Event::Ran { replica: r, job: j, tick: t0, .. }
                if r == replica && j == job && t0 < tick
                    && began.at <= grace
                    && events.iter().any(|ended| ended.at <= skip.at && matches!(&ended.event,
                        Event::Done { replica: r, job: j, tick: t1, .. }
                        | Event::Error { replica: r, job: j, tick: t1, .. }
                        if r == replica && j == job && t1 == t0)))
            })
    };
    let held_skips = in_window(grace, t.starting)
        .filter(|s| held_by_own_run(s))
        .count();
    let lock_taken_while_down: Vec<_> = in_window(grace, t.starting)
        .filter(|s| match s.event {
            Event::Ran { .. } => true,
            Event::Skipped { .. } => !held_by_own_run(s),
            _ => false,
        })
        .collect();
    assert!(
        lock_taken_while_down.is_empty(),
        "locks were taken or skipped while the database was down ({:?} after it went down): \
         {lock_taken_while_down:#?}\nevery event from the stop to the start: {:#?}",
        lock_taken_while_down
            .iter()
            .map(|s| s.at - t.down)
            .collect::<Vec<_>>(),
        in_window(t.stop, t.starting)
            .map(|s| (s.at - t.stop, &s.event))
            .collect::<Vec<_>>()
    );
    let late_errors: Vec<_> = in_window(t.resumed, Instant::now())
        .filter(|s| matches!(s.event, Event::Error { .. }))
        .collect();
    assert!(
        late_errors.is_empty(),
        "errors after locking resumed: {late_errors:#?}"
    );
    for label in LABELS {
        // Lock-store failures between the server's start and the moment every job has run again:
        // while it recovers, the server may still refuse connections ("starting up"). Dead
        // pooled connections cost no failure (they are retried within the call; that is
        // `fault_stale_connections`' claim); this bounds what remains, per replica. After
        // locking resumed there must be none at all (above).
        let failures = in_window(t.start, t.resumed)
            .filter(|s| s.event.replica() == label)
            .filter(|s| {
                matches!(&s.event, Event::Error { message, .. } if message.contains("lock store"))
            })
            .count();
        assert!(
            failures <= LOCK_POOL,
            "{label} failed {failures} lock calls after the restart (pool of {LOCK_POOL})"
        );
    }
    (outage_errors, held_skips)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn database_restart_mid_run_is_reported_and_locking_resumes() {
    let test = "database_restart_mid_run_is_reported_and_locking_resumes";
    let Some(server) = Throwaway::postgres_or_skip(test).await else {
        return;
    };
    let wall = Instant::now();
    let url = server.url();
    let cluster = Cluster::new(&url, "restart", &JOBS);
    cluster.create_schema().await;
    let mut replicas = Vec::new();
    for label in LABELS {
        replicas.push(cluster.start(label).await);
    }
    let db = Database::connect(&url).await.expect("connect");
    let from_us = db_now_us(&db).await;
    let began = Instant::now();
    cluster
        .events
        .wait_for(
            "every job to run",
            Duration::from_secs(30),
            cluster.all_jobs_ran_after(began),
        )
        .await;

    // The outage. Its length is the scenario, not a synchronisation.
    let stop_us = db_now_us(&db).await;
    let stop_at = Instant::now();
    server.stop_immediate().await.expect("crash-stop Postgres");
    let down_at = Instant::now();
    tokio::time::sleep(OUTAGE).await;
    let starting_at = Instant::now();
    server.start().await.expect("start Postgres again");
    let start_at = Instant::now();
    // The harness's pool pings before use, so it reconnects by itself.
    let start_us = db_now_us(&db).await;
    let (max_at_most, max_every) = cluster.max_at_most_and_every();
    // Resumed: every job ran again, and each replica made enough lock calls to have used (and,
    // if dead, replaced) every connection of its lock pool.
    let all_ran = cluster.all_jobs_ran_after(start_at);
    cluster
        .events
        .wait_for(
            "every job to run again after the restart",
            max_at_most + max_every + SLACK + SLACK,
            |all| {
                all_ran(all)
                    && LABELS.iter().all(|label| {
                        all.iter()
                            .filter(|s| s.at > start_at && s.event.replica() == *label)
                            .count()
                            > 2 * LOCK_POOL
                    })
            },
        )
        .await;
    let resumed_at = Instant::now();
    // Let the replicas run on: nothing may fail any more.
    tokio::time::sleep(QUIET).await;
    let to_us = db_now_us(&db).await;
    cluster.stop_all(replicas).await;

    let events = cluster.events.all();
    let (outage_errors, held_skips) = check_events(
        &events,
        &Timeline {
            stop: stop_at,
            down: down_at,
            starting: starting_at,
            start: start_at,
            resumed: resumed_at,
        },
    );
    let records = cluster.records(&db).await;
    assert_no_overlaps(&records);
    // Liveness before the outage, and after it: every job again within at_most + one tick of
    // the restart (a lock held at the crash frees itself at its at_most), then every tick.
    let before: Vec<_> = records
        .iter()
        .filter(|r| r.started_us <= stop_us)
        .cloned()
        .collect();
    assert_liveness(&cluster, &before, from_us, stop_us, SLACK);
    let after: Vec<_> = records
        .iter()
        .filter(|r| r.started_us >= start_us)
        .cloned()
        .collect();
    assert_liveness_from(&cluster, &after, start_us, to_us, SLACK, |job| {
        job.at_most + job.every
    });

    eprintln!(
        "{test}: outage {OUTAGE:?}, {outage_errors} errors reported during it ({held_skips} fires \
         skipped as held by the replica's own run), every job ran \
         again {:?} after the restart; {} runs; events per replica (ran, skipped, errors) {:?}; \
         server setup {:?}; total {:?}",
        resumed_at - start_at,
        records.len(),
        tally(&events),
        server.setup_time(),
        wall.elapsed()
    );
}
