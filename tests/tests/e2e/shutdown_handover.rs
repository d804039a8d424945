//! The shutdown handover with real processes: two `replica` programs share a store and a leader
//! latch (a leader-only job follows it); replica `a` leads and runs a long job that is not
//! leader-only; SIGTERM to `a`. Its `Shutdown` steps the latch down at once, so `b` leads before
//! `a`'s drained run ends (the run still finishes within the grace), and the time from the
//! SIGTERM to `b`'s election is printed (`eprintln!`) and bounded by one follower attempt
//! (`--acquire`) plus a margin for the processes and the store.
//!
//! On Postgres, MariaDB and Redis (`SHEDLOCK_PG_URL`, `SHEDLOCK_MYSQL_URL`,
//! `SHEDLOCK_REDIS_URL`; each skips visibly without its URL and fails under
//! `SHEDLOCK_REQUIRE_DB=1`). Every wait polls the replicas' events, stamped on receipt, against a
//! deadline.

use crate::fault_support;

use std::time::Duration;

use fault_support::{Cluster, Stamped};
use shedlock_demo::event::Event;
use tokio::time::Instant;

/// How often the follower tries to take the latch.
const ACQUIRE: Duration = Duration::from_millis(500);
/// How long the long run works; far beyond one follower attempt.
const WORK: Duration = Duration::from_secs(6);
/// What a handover may take beyond one follower attempt: the step-down and release by `a`, `b`'s
/// acquire, the event's way to the test, on a loaded 2-core machine.
const MARGIN: Duration = Duration::from_secs(1);

/// The instant the test received the first event of `replica` that `pick` accepts.
fn received(events: &[Stamped], replica: &str, pick: impl Fn(&Event) -> bool) -> Option<Instant> {
    events
        .iter()
        .find(|s| s.event.replica() == replica && pick(&s.event))
        .map(|s| s.at)
}

fn long_run(event: &Event) -> Option<u64> {
    match event {
        Event::Ran { job, tick, .. } if job == "long" => Some(*tick),
        _ => None,
    }
}

async fn the_new_leader_leads_before_the_drained_run_ends(store: &str, cluster: Option<Cluster>) {
    let Some(mut cluster) = cluster else { return };
    // The latch refuses a call timeout longer than its acquire interval.
    cluster.call_timeout = ACQUIRE;
    cluster.extra_args = vec![
        "--acquire".to_owned(),
        format!("{}ms", ACQUIRE.as_millis()),
        "--acquire-jitter".to_owned(),
        "0s".to_owned(),
        "--grace".to_owned(),
        "20s".to_owned(),
    ];
    cluster.create_schema().await;
    let db = cluster.runlog().await;

    // `a` alone first: it leads and claims the long job's fire.
    let a = cluster.start("a").await;
    cluster
        .events
        .wait_for(
            "a to lead and start the long run",
            Duration::from_secs(30),
            |all| {
                received(all, "a", |e| matches!(e, Event::Elected { .. })).is_some()
                    && received(all, "a", |e| long_run(e).is_some()).is_some()
            },
        )
        .await;
    let b = cluster.start("b").await;
    let tick = cluster
        .events
        .of("a")
        .iter()
        .find_map(|s| long_run(&s.event))
        .expect("a's long run");
    let done = |all: &[Stamped]| {
        received(
            all,
            "a",
            |e| matches!(e, Event::Done { job, tick: t, .. } if job == "long" && *t == tick),
        )
    };
    assert!(
        done(&cluster.events.all()).is_none(),
        "the long run must still be going at the SIGTERM for this test to mean anything"
    );
    let b_elected = |all: &[Stamped]| received(all, "b", |e| matches!(e, Event::Elected { .. }));
    assert!(b_elected(&cluster.events.all()).is_none(), "b follows");

    let sent = a.sigterm();
    cluster
        .events
        .wait_for("b to lead", Duration::from_secs(10), |all| {
            b_elected(all).is_some()
        })
        .await;
    let a_label = a.label.clone();
    assert!(
        a.stop(Duration::from_secs(30)).await,
        "{a_label} did not stop cleanly; logs:\n{}",
        cluster.log_tails()
    );
    let events = cluster.events.all();
    let b_leads = b_elected(&events).expect("b leads");
    let run_ended = done(&events).unwrap_or_else(|| {
        panic!(
            "a's long run of tick {tick} did not finish within the grace; events: {:#?}\n{}",
            cluster.events.of("a"),
            cluster.log_tails()
        )
    });
    let handover = b_leads - sent;
    eprintln!(
        "{store}: SIGTERM to the new leader: {handover:?} with a job running (follower attempts \
         every {ACQUIRE:?}); a's drained run ended {:?} after the SIGTERM",
        run_ended - sent
    );
    assert!(
        b_leads < run_ended,
        "b led {handover:?} after the SIGTERM, after a's drained run ended ({:?})",
        run_ended - sent
    );
    assert!(
        handover <= ACQUIRE + MARGIN,
        "b led {handover:?} after the SIGTERM: more than one attempt ({ACQUIRE:?}) + {MARGIN:?}"
    );
    let a_stepped_down =
        received(&events, "a", |e| matches!(e, Event::SteppedDown { .. })).expect("a stepped down");
    assert!(
        a_stepped_down < run_ended,
        "a stepped down before its run ended"
    );
    // The run was drained, not cancelled: it worked its full time with its lock.
    assert!(
        events.iter().any(|s| matches!(&s.event,
            Event::Done { replica, job, tick: t, millis, lock_lost: false }
                if replica == "a" && job == "long" && *t == tick
                    && u128::from(*millis) >= WORK.as_millis())),
        "{events:#?}"
    );
    cluster.stop_all(vec![b]).await;
    cluster.drop_tables(&db).await;
}

const JOBS: [&str; 2] = [
    "lead,every=1s,at_most=3s,work=10ms..20ms,leader_only",
    "long,every=2s,at_most=60s,work=6s..6s",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn the_new_leader_leads_before_the_drained_run_ends_on_postgres() {
    the_new_leader_leads_before_the_drained_run_ends(
        "Postgres",
        shedlock_sqlx::testing::postgres_url().map(|url| Cluster::new(&url, "handover", &JOBS)),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_mysql), ignore = "needs SHEDLOCK_MYSQL_URL (MySQL)")]
async fn the_new_leader_leads_before_the_drained_run_ends_on_mariadb() {
    the_new_leader_leads_before_the_drained_run_ends(
        "MariaDB",
        shedlock_sqlx::testing::mysql_url().map(|url| Cluster::new(&url, "handover", &JOBS)),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn the_new_leader_leads_before_the_drained_run_ends_on_redis() {
    the_new_leader_leads_before_the_drained_run_ends(
        "Redis",
        shedlock_redis::testing::redis_url()
            .map(|url| Cluster::on_kv_store(&url, "handover", &JOBS)),
    )
    .await;
}
