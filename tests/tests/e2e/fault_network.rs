//! Lost connectivity (issue 8, item 3): three replicas run four locked jobs on a private
//! Postgres; one of them (`r3`) reaches it through a TCP proxy, which black-holes its traffic for
//! a while (nothing forwarded, nothing closed) and then heals. Then:
//!
//! - `r3` reports errors within its timeouts and keeps reporting them: it never hangs (the gaps
//!   between its events stay within one call timeout + one tick);
//! - `r3` never runs a job while it cannot lock (no `Ran` from it during the black hole);
//! - `r3` recovers by itself when the proxy heals (its lock calls succeed again);
//! - the other replicas see no errors and take over the jobs whose locks `r3` held (after their
//!   `at_most`), and no two runs of one job overlap (database clock).
//!
//! Needs only the Postgres binaries (private server; skipped without them unless
//! `SHEDLOCK_REQUIRE_DB=1`).

use crate::fault_support;

use std::time::Duration;

use fault_support::{
    Cluster, JOBS, Stamped, assert_liveness, assert_no_overlaps, db_now_us, tally,
};
use shedlock_demo::database::Database;
use shedlock_demo::event::Event;
use shedlock_tests::proxy::Proxy;
use shedlock_tests::throwaway::Throwaway;
use tokio::time::Instant;

const SLACK: Duration = Duration::from_secs(2);
/// How long the proxy black-holes `r3`.
const BLACK_HOLE: Duration = Duration::from_secs(8);
/// How long the replicas run after `r3` recovered.
const AFTER: Duration = Duration::from_secs(4);

fn succeeded(s: &fault_support::Stamped) -> bool {
    matches!(s.event, Event::Ran { .. } | Event::Skipped { .. })
}

/// Checks `r3`'s events during the black hole: no run, errors, and never silent for longer than
/// a call timeout + a tick. Returns the number of errors and the longest silence.
fn check_r3(
    cluster: &Cluster,
    events: &[Stamped],
    cut_at: Instant,
    heal_at: Instant,
) -> (usize, Duration) {
    let during = |from: Instant, to: Instant| {
        events
            .iter()
            .filter(move |s| s.event.replica() == "r3" && s.at > from && s.at <= to)
    };
    // A lock taken just before the cut may be reported a moment later.
    let blind_runs: Vec<_> = during(cut_at + Duration::from_millis(500), heal_at)
        .filter(|s| matches!(s.event, Event::Ran { .. }))
        .collect();
    assert!(
        blind_runs.is_empty(),
        "r3 ran jobs while it could not reach the database: {blind_runs:#?}"
    );
    let errors = during(cut_at, heal_at + Duration::from_secs(1))
        .filter(|s| matches!(s.event, Event::Error { .. }))
        .count();
    assert!(
        errors >= 4,
        "r3 reported only {errors} errors during the black hole"
    );
    // Never hangs: during the black hole r3 keeps reporting (an error per tick and job, each
    // within its call timeout).
    let (_, max_every) = cluster.max_at_most_and_every();
    let bound = cluster.call_timeout + max_every + SLACK;
    let mut last = cut_at + cluster.call_timeout;
    let mut longest_silence = Duration::ZERO;
    for s in during(last, heal_at) {
        longest_silence = longest_silence.max(s.at - last);
        last = s.at;
    }
    longest_silence = longest_silence.max(heal_at - last);
    assert!(
        longest_silence <= bound,
        "r3 went silent for {longest_silence:?} during the black hole (bound {bound:?})"
    );
    (errors, longest_silence)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn black_holed_replica_errors_in_time_never_runs_blind_and_recovers() {
    let test = "black_holed_replica_errors_in_time_never_runs_blind_and_recovers";
    let Some(server) = Throwaway::postgres_or_skip(test).await else {
        return;
    };
    let wall = Instant::now();
    let url = server.url();
    let proxy = Proxy::to_local_port(server.port())
        .await
        .expect("start a proxy");
    let cluster = Cluster::new(&url, "network", &JOBS);
    cluster.create_schema().await;
    let db = Database::connect(&url).await.expect("connect");
    let r1 = cluster.start("r1").await;
    let r2 = cluster.start("r2").await;
    let r3 = cluster
        .start_with("r3", &server.url_via(proxy.port()), &[])
        .await;
    let from_us = db_now_us(&db).await;
    let began = Instant::now();
    cluster
        .events
        .wait_for(
            "r3 to lock through the proxy",
            Duration::from_secs(30),
            |all| {
                all.iter()
                    .filter(|s| s.at > began && s.event.replica() == "r3" && succeeded(s))
                    .count()
                    >= 4
            },
        )
        .await;

    // The black hole. Its length is the scenario, not a synchronisation.
    let cut_at = Instant::now();
    proxy.blackhole();
    tokio::time::sleep(BLACK_HOLE).await;
    let heal_at = Instant::now();
    proxy.heal();
    cluster
        .events
        .wait_for(
            "r3 to lock again after healing",
            Duration::from_secs(20),
            |all| {
                all.iter()
                    .any(|s| s.at > heal_at && s.event.replica() == "r3" && succeeded(s))
            },
        )
        .await;
    let recovered = heal_at.elapsed();
    tokio::time::sleep(AFTER).await;
    let to_us = db_now_us(&db).await;
    assert!(
        r1.stop(Duration::from_secs(20)).await && r2.stop(Duration::from_secs(20)).await,
        "r1 or r2 did not stop cleanly; logs:\n{}",
        cluster.log_tails()
    );
    // r3 may still wait for a run-log write it sent into the black hole just before the cut (the
    // harness's own pool bounds its checkout ping by 10 s, not a statement already sent); the
    // lock library is not involved there. Report, do not assert.
    let r3_clean = r3.stop(Duration::from_secs(15)).await;

    let events = cluster.events.all();
    let records = cluster.records(&db).await;
    let (errors, longest_silence) = check_r3(&cluster, &events, cut_at, heal_at);
    let others_errors: Vec<_> = events
        .iter()
        .filter(|s| s.event.replica() != "r3" && matches!(s.event, Event::Error { .. }))
        .collect();

    assert!(
        others_errors.is_empty(),
        "replicas with a working connection reported errors: {others_errors:#?}"
    );
    assert_no_overlaps(&records);
    let worst = assert_liveness(&cluster, &records, from_us, to_us, SLACK);

    eprintln!(
        "{test}: black hole {BLACK_HOLE:?}: r3 reported {errors} errors, longest silence \
         {longest_silence:?}; locked again {recovered:?} after healing; r3 stopped cleanly: \
         {r3_clean}; worst gap per job (ms) {:?}; events per replica (ran, skipped, errors) \
         {:?}; {} runs; total {:?}",
        worst
            .iter()
            .map(|(j, us)| (j.as_str(), us / 1000))
            .collect::<Vec<_>>(),
        tally(&events),
        records.len(),
        wall.elapsed()
    );
}
