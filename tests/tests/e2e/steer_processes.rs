//! Pause, resume and run now across real replica processes (issue 28): three replicas of the
//! `replica` program on Postgres, MariaDB, SQLite and Redis, steered with the `shedlock` command
//! line (run in process through `shedlock_cli::run`, the binary's own code). What must hold, by
//! the order of the replicas' events, never by timing:
//!
//! - after `pause`, no replica runs a later fire of the job, and every replica counts fires
//!   `paused`, none `missed`; `trigger` on the paused job is refused;
//! - after `resume`, the next fires run, each exactly once;
//! - `trigger --wait` runs the job exactly once across the replicas and says which one ran it;
//! - a trigger while the job runs, of an unknown job, and one nobody picks up (every replica down)
//!   are answered as documented, exit 1; a pause ending in the past is refused with exit 2 and
//!   changes nothing;
//! - a leader-only job's trigger runs on the leader.
//!
//! Stores from `SHEDLOCK_PG_URL`, `SHEDLOCK_MYSQL_URL`, `SHEDLOCK_REDIS_URL` (skipped visibly
//! without them, failing under `SHEDLOCK_REQUIRE_DB=1`); SQLite is a file of the test's own.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::time::Duration;

use shedlock_demo::event::Event;
use tokio::time::Instant;

use crate::fault_support::{Cluster, Stamped};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Store {
    Postgres,
    MariaDb,
    Sqlite,
    Redis,
}

fn cluster(store: Store) -> Option<Cluster> {
    let jobs = [
        "tick,every=1s,work=10ms..40ms",
        "slow,every=1h,work=2s..2s,at_most=30s",
        "lead,every=1h,work=10ms..20ms,leader_only",
    ];
    Some(match store {
        Store::Redis => {
            Cluster::on_kv_store(&shedlock_redis::testing::redis_url()?, "steer", &jobs)
        }
        Store::Postgres => Cluster::new(&shedlock_sqlx::testing::postgres_url()?, "steer", &jobs),
        Store::MariaDb => Cluster::new(&shedlock_sqlx::testing::mysql_url()?, "steer", &jobs),
        Store::Sqlite => {
            let mut cluster = Cluster::new("sqlite::memory:", "steer", &jobs);
            let file = cluster.logs.path().join("store.db");
            cluster.url = format!("sqlite://{}", file.display());
            cluster
        }
    })
}

/// One `shedlock` command on the cluster's store, as an operator types it: its exit code and
/// what it printed.
async fn shedlock(store: Store, cluster: &Cluster, args: &[&str]) -> (u8, String, String) {
    let mut line: Vec<OsString> = vec!["shedlock".into(), "--database-url".into()];
    line.push(cluster.url.clone().into());
    line.push(
        if store == Store::Redis {
            "--key-prefix"
        } else {
            "--table"
        }
        .into(),
    );
    line.push(cluster.lock_table.clone().into());
    line.extend(["--as".into(), "e2e-operator".into()]);
    line.extend(args.iter().map(OsString::from));
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = shedlock_cli::run(line, &mut out, &mut err).await;
    (
        code,
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&err).into_owned(),
    )
}

async fn expect(store: Store, cluster: &Cluster, args: &[&str], code: u8) -> String {
    let (got, out, err) = shedlock(store, cluster, args).await;
    assert_eq!(got, code, "shedlock {args:?}: {out}{err}");
    format!("{out}{err}")
}

/// The ticks of `job` run, with the replicas that ran each, after `since`.
pub(crate) fn ran(events: &[Stamped], job: &str, since: Instant) -> BTreeMap<u64, Vec<String>> {
    let mut ticks: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for s in events.iter().filter(|s| s.at >= since) {
        if let Event::Ran {
            replica,
            job: j,
            tick,
            trigger: None,
            ..
        } = &s.event
            && j == job
        {
            ticks.entry(*tick).or_default().push(replica.clone());
        }
    }
    ticks
}

/// The replicas that ran trigger `id`.
pub(crate) fn ran_trigger(events: &[Stamped], id: i64) -> Vec<String> {
    events
        .iter()
        .filter_map(|s| match &s.event {
            Event::Ran {
                replica,
                trigger: Some(t),
                ..
            } if *t == id => Some(replica.clone()),
            _ => None,
        })
        .collect()
}

/// Waits until each of the replicas `a`, `b` and `c` counted two fires of `job` paused since
/// `since`, then checks that no fire after the first refused one ran anywhere. That first fire
/// itself may have run: claimed by one replica just before the pause was written, and answered
/// paused to the others, whose claims came after it. Returns the first refused fire.
pub(crate) async fn assert_pause_holds(
    cluster: &Cluster,
    job: &str,
    since: Instant,
    wait: Duration,
) -> u64 {
    cluster
        .events
        .wait_for(
            &format!("every replica counting two fires of {job} paused"),
            wait,
            |all| {
                let by = paused_by(all, job, since);
                ["a", "b", "c"]
                    .iter()
                    .all(|r| by.get(*r).is_some_and(|ticks| ticks.len() >= 2))
            },
        )
        .await;
    let events = cluster.events.all();
    let first_paused = paused_by(&events, job, since)
        .values()
        .flatten()
        .min()
        .copied()
        .unwrap_or_else(|| panic!("a paused fire of {job}"));
    let after = ran(&events, job, since);
    assert!(
        after.keys().all(|tick| *tick <= first_paused),
        "a fire of {job} ran after the replicas refused fire {first_paused}: {after:?}"
    );
    first_paused
}

pub(crate) fn paused_by(
    events: &[Stamped],
    job: &str,
    since: Instant,
) -> BTreeMap<String, Vec<u64>> {
    let mut by: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for s in events.iter().filter(|s| s.at >= since) {
        if let Event::Paused {
            replica,
            job: j,
            tick,
        } = &s.event
            && j == job
        {
            by.entry(replica.clone()).or_default().push(*tick);
        }
    }
    by
}

/// The trigger id `shedlock trigger` printed: `triggered "job" (trigger N); …`.
fn trigger_id(out: &str) -> i64 {
    out.split("(trigger ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .and_then(|id| id.parse().ok())
        .unwrap_or_else(|| panic!("no trigger id in {out:?}"))
}

async fn scenario(store: Store) {
    let Some(cluster) = cluster(store) else {
        return;
    };
    cluster.create_schema().await;
    let mut replicas = Vec::new();
    for label in ["a", "b", "c"] {
        replicas.push(cluster.start(label).await);
    }
    let start = Instant::now();
    cluster
        .events
        .wait_for("two runs of tick", Duration::from_secs(30), |all| {
            ran(all, "tick", start).len() >= 2
        })
        .await;
    // The definitions are published at start: the CLI knows the jobs.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !expect(store, &cluster, &["jobs"], 0).await.contains("slow") {
        assert!(Instant::now() < deadline, "the jobs were never published");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    pause(store, &cluster).await;
    resume(store, &cluster).await;
    let (id, running, lead, leader) = run_now(store, &cluster).await;
    cluster.stop_all(replicas).await;
    let events = cluster.events.all();
    assert_eq!(ran_trigger(&events, id).len(), 1, "trigger {id} ran once");
    assert_eq!(ran_trigger(&events, running).len(), 1);
    assert_eq!(
        ran_trigger(&events, lead),
        vec![leader],
        "the leader ran it"
    );

    // Nobody up: the trigger expires and the command says so.
    let out = expect(
        store,
        &cluster,
        &["trigger", "tick", "--wait", "--expires", "2s"],
        1,
    )
    .await;
    assert!(out.contains("nobody picked up"), "{out}");
    let ran_after: BTreeSet<String> = ran_trigger(&cluster.events.all(), trigger_id(&out))
        .into_iter()
        .collect();
    assert!(ran_after.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steer_postgres() {
    scenario(Store::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steer_mariadb() {
    scenario(Store::MariaDb).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steer_sqlite() {
    scenario(Store::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steer_redis() {
    scenario(Store::Redis).await;
}

/// Bad input changes nothing; `pause` stops every later fire on every replica.
async fn pause(store: Store, cluster: &Cluster) {
    // Bad input changes nothing.
    let past = expect(
        store,
        cluster,
        &["pause", "tick", "--until", "2020-01-01T00:00:00Z"],
        2,
    )
    .await;
    assert!(past.contains("must end in the future"), "{past}");
    let quoted = expect(store, cluster, &["pause", "it's \"x\""], 1).await;
    assert!(quoted.contains("no job named"), "{quoted}");

    // Pause: no later fire runs, every replica counts them paused.
    let said = expect(
        store,
        cluster,
        &["pause", "tick", "--reason", "upstream down"],
        0,
    )
    .await;
    assert!(
        said.contains("paused until resumed by e2e-operator"),
        "{said}"
    );
    let paused_at = Instant::now();
    assert_pause_holds(cluster, "tick", paused_at, Duration::from_secs(30)).await;
    assert!(
        !cluster
            .events
            .all()
            .iter()
            .any(|s| s.at >= paused_at
                && matches!(&s.event, Event::Missed { job, .. } if job == "tick")),
        "a paused fire was counted missed"
    );
    let refused = expect(store, cluster, &["trigger", "tick"], 1).await;
    assert!(refused.contains("resume it first"), "{refused}");
    let jobs = expect(store, cluster, &["jobs"], 0).await;
    assert!(
        jobs.contains("upstream down") && jobs.contains("e2e-operator"),
        "{jobs}"
    );
}

/// `resume`: the next fires run, each once.
async fn resume(store: Store, cluster: &Cluster) {
    // Resume: the next fires run, each once.
    expect(store, cluster, &["resume", "tick"], 0).await;
    let resumed_at = Instant::now();
    cluster
        .events
        .wait_for(
            "three runs of tick after resume",
            Duration::from_secs(30),
            |all| ran(all, "tick", resumed_at).len() >= 3,
        )
        .await;
    for (tick, replicas) in ran(&cluster.events.all(), "tick", resumed_at) {
        assert_eq!(replicas.len(), 1, "tick {tick} ran on {replicas:?}");
    }
}

/// Run now, while running, of a leader-only job and of an unknown one. Returns the ids of the
/// triggers that ran (`slow` twice, `lead`) and the leader when `lead` ran.
async fn run_now(store: Store, cluster: &Cluster) -> (i64, i64, i64, String) {
    // Run now: once, on one replica, reported by --wait.
    let out = expect(store, cluster, &["trigger", "slow", "--wait"], 0).await;
    let id = trigger_id(&out);
    assert!(
        out.contains("ran on ") && out.contains("succeeded"),
        "{out}"
    );
    // While it runs, a second trigger is refused.
    let out = expect(store, cluster, &["trigger", "slow"], 0).await;
    let running = trigger_id(&out);
    cluster
        .events
        .wait_for("the second trigger's run", Duration::from_secs(10), |all| {
            !ran_trigger(all, running).is_empty()
        })
        .await;
    let refused = expect(store, cluster, &["trigger", "slow"], 1).await;
    assert!(refused.contains("is running now"), "{refused}");
    // The leader-only job's trigger runs on the leader.
    let out = expect(store, cluster, &["trigger", "lead", "--wait"], 0).await;
    let lead = trigger_id(&out);
    // The leader then: the last replica elected (stopping hands the lead over again).
    let leader = cluster
        .events
        .all()
        .iter()
        .rev()
        .find_map(|s| match &s.event {
            Event::Elected { replica, .. } => Some(replica.clone()),
            _ => None,
        })
        .expect("a replica was elected");
    let unknown = expect(store, cluster, &["trigger", "nope"], 1).await;
    assert!(unknown.contains("no job named"), "{unknown}");

    (id, running, lead, leader)
}
