//! Job state on etcd, on a private etcd process of each test's own: the state a recorded release
//! writes (and a lost one does not), published definitions (their expiry by lease, `forget`),
//! and names that need encoding. Run like the other private-etcd tests.

use crate::support;

use std::time::{Duration, Instant};

use chrono::{DateTime, SubsecRound as _, Utc};
use shedlock_core::admin::LockAdmin as _;
use shedlock_core::jobs::{Definition, JobState, RunOutcome, RunReport, VERSION};
use shedlock_core::provider::{LockProvider, LockRecord};
use shedlock_etcd::EtcdLockProvider;
use support::Cluster;

/// Names that must be bound, never spliced: quotes, spaces, slashes, `%`, unicode, and one
/// shaped like the provider's own key suffixes.
const HOSTILE: [&str; 6] = [
    "it's \"quoted\"",
    "a/last-run",
    "tenant 42: nightly",
    "名前-ü ✓",
    "%2F..%",
    "!def",
];

fn fire() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(3) - chrono::Duration::seconds(1)
}

async fn state(p: &EtcdLockProvider, name: &str) -> JobState {
    p.entry(name)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("{name:?} is listed"))
        .state()
        .cloned()
        .expect("etcd always keeps job state")
}

async fn run(
    p: &EtcdLockProvider,
    name: &str,
    owner: &str,
    outcome: RunOutcome,
) -> (LockRecord, DateTime<Utc>, DateTime<Utc>) {
    let record = p
        .acquire(name, Duration::from_mins(1), owner)
        .await
        .unwrap()
        .expect("free");
    let fire = fire();
    let before = Utc::now().trunc_subsecs(3);
    let released = p
        .release_run(&record, Duration::ZERO, &RunReport::new(fire, outcome))
        .await
        .unwrap();
    assert!(released, "{name:?}: its own acquisition");
    let after = Utc::now();
    assert!(
        p.holder(name).await.unwrap().is_none(),
        "{name:?}: released"
    );
    (record, before, after)
}

#[tokio::test]
#[cfg_attr(
    not(shedlock_etcd),
    ignore = "needs SHEDLOCK_ETCD_URL (etcd; starts private etcd processes of its own)"
)]
async fn release_run_records_the_whole_run_under_any_name() {
    let Some(bin) = support::etcd_binary() else {
        return;
    };
    let etcd = Cluster::start(&bin, 1);
    let p = EtcdLockProvider::new(&etcd.url()).unwrap();

    for name in HOSTILE {
        // A plain release records nothing: a default state.
        let record = p
            .acquire(name, Duration::from_mins(1), "pod-0")
            .await
            .unwrap()
            .unwrap();
        assert!(p.release(&record, Duration::ZERO).await.unwrap());
        assert_eq!(state(&p, name).await, JobState::default(), "{name:?}");

        // A failure: the whole last run, and the count.
        let f = fire();
        let record = p
            .acquire(name, Duration::from_mins(1), "pod-1")
            .await
            .unwrap()
            .unwrap();
        let before = Utc::now().trunc_subsecs(3);
        let revision = etcd.revision();
        let error = format!("no route to {name}: \"x\"\n{}", "é".repeat(2000));
        assert!(
            p.release_run(
                &record,
                Duration::ZERO,
                &RunReport::new(f, RunOutcome::Failed(error.clone()))
            )
            .await
            .unwrap()
        );
        assert_eq!(
            etcd.revision(),
            revision + 1,
            "{name:?}: the release and its state are one transaction"
        );
        let s = state(&p, name).await;
        let last = s.last_run.clone().expect("recorded");
        assert_eq!(last.lock_name, name);
        assert_eq!(last.fire, f);
        assert_eq!(last.runner, "pod-1");
        assert_eq!(last.started, record.locked_at().trunc_subsecs(3));
        assert!(last.ended >= before && last.ended <= Utc::now(), "{last:?}");
        assert_eq!(
            last.outcome,
            RunOutcome::Failed(error.clone()).capped(),
            "{name:?}: the error text, capped"
        );
        assert_eq!((s.consecutive_failures, s.last_success), (1, None));
        let listed = p.list().await.unwrap();
        let entry = listed
            .iter()
            .find(|e| e.record().name() == name)
            .expect("listed");
        assert_eq!(entry.state(), Some(&s), "list and entry agree");
    }
}

#[tokio::test]
#[cfg_attr(
    not(shedlock_etcd),
    ignore = "needs SHEDLOCK_ETCD_URL (etcd; starts private etcd processes of its own)"
)]
async fn outcomes_count_as_documented_and_at_least_still_holds() {
    let Some(bin) = support::etcd_binary() else {
        return;
    };
    let etcd = Cluster::start(&bin, 1);
    let p = EtcdLockProvider::new(&etcd.url()).unwrap();

    // The counting table: failed and panicked count, cancelled changes nothing, a success
    // resets the count and sets last_success to its end.
    let name = HOSTILE[3];
    run(&p, name, "pod-2", RunOutcome::Failed("first".into())).await;
    run(&p, name, "pod-2", RunOutcome::Panicked).await;
    assert_eq!(state(&p, name).await.consecutive_failures, 2);
    run(&p, name, "pod-2", RunOutcome::Cancelled).await;
    let s = state(&p, name).await;
    assert_eq!((s.consecutive_failures, s.last_success), (2, None));
    assert_eq!(s.last_run.unwrap().outcome, RunOutcome::Cancelled);
    let (_, before, after) = run(&p, name, "pod-3", RunOutcome::Succeeded).await;
    let s = state(&p, name).await;
    let last = s.last_run.clone().unwrap();
    assert_eq!(
        (s.consecutive_failures, s.last_success),
        (0, Some(last.ended))
    );
    assert!(last.ended >= before && last.ended <= after);
    assert_eq!(
        (last.outcome, last.runner.as_str()),
        (RunOutcome::Succeeded, "pod-3")
    );
    run(&p, name, "pod-2", RunOutcome::Failed("again".into())).await;
    run(&p, name, "pod-2", RunOutcome::Cancelled).await;
    let s2 = state(&p, name).await;
    assert_eq!(
        (s2.consecutive_failures, s2.last_success),
        (1, s.last_success),
        "a failure keeps the last success"
    );

    // With at_least still running the lock stays held, and the state is written all the same.
    let record = p
        .acquire("held", Duration::from_mins(1), "pod-4")
        .await
        .unwrap()
        .unwrap();
    assert!(
        p.release_run(
            &record,
            Duration::from_secs(30),
            &RunReport::new(fire(), RunOutcome::Panicked)
        )
        .await
        .unwrap()
    );
    assert!(
        p.holder("held").await.unwrap().is_some(),
        "held for at_least"
    );
    let s = state(&p, "held").await;
    assert_eq!(s.consecutive_failures, 1);
    assert_eq!(s.last_run.unwrap().outcome, RunOutcome::Panicked);
}

#[tokio::test]
#[cfg_attr(
    not(shedlock_etcd),
    ignore = "needs SHEDLOCK_ETCD_URL (etcd; starts private etcd processes of its own)"
)]
async fn a_lost_lock_records_nothing_and_an_acquisition_records_once() {
    let Some(bin) = support::etcd_binary() else {
        return;
    };
    let etcd = Cluster::start(&bin, 1);
    let p = EtcdLockProvider::new(&etcd.url()).unwrap();
    let name = "taken over";
    let (_, _, _) = run(&p, name, "pod-1", RunOutcome::Succeeded).await;
    let recorded = state(&p, name).await;

    // The run's lock was freed and taken by another: its recorded release changes nothing.
    let lost = p
        .acquire(name, Duration::from_mins(1), "pod-1")
        .await
        .unwrap()
        .unwrap();
    p.force_unlock(name, "test").await.unwrap().expect("freed");
    let holder = p
        .acquire(name, Duration::from_mins(1), "pod-2")
        .await
        .unwrap()
        .unwrap();
    let revision = etcd.revision();
    for at_least in [Duration::ZERO, Duration::from_secs(30)] {
        let report = RunReport::new(fire(), RunOutcome::Failed("late".into()));
        assert!(
            !p.release_run(&lost, at_least, &report).await.unwrap(),
            "no longer its acquisition"
        );
    }
    assert_eq!(etcd.revision(), revision, "nothing written");
    assert_eq!(state(&p, name).await, recorded);
    let now_held = p.holder(name).await.unwrap().expect("held");
    assert_eq!(
        (now_held.owner(), now_held.fencing_token()),
        ("pod-2", holder.fencing_token())
    );

    // The holder's release records; a second recorded release of the same acquisition (a
    // repeat) records nothing more.
    let report = RunReport::new(fire(), RunOutcome::Failed("boom".into()));
    assert!(
        p.release_run(&holder, Duration::ZERO, &report)
            .await
            .unwrap()
    );
    let once = state(&p, name).await;
    assert_eq!(once.consecutive_failures, 1);
    assert_eq!(once.last_success, recorded.last_success);
    let _ = p
        .release_run(&holder, Duration::ZERO, &report)
        .await
        .unwrap();
    assert_eq!(state(&p, name).await, once, "one record per acquisition");

    // etcd keeps no history.
    let e = p.history(name, 10).await.unwrap_err();
    assert!(e.is_unsupported(), "{e}");
}

#[tokio::test]
#[cfg_attr(
    not(shedlock_etcd),
    ignore = "needs SHEDLOCK_ETCD_URL (etcd; starts private etcd processes of its own)"
)]
async fn definitions_are_listed_expire_with_their_lease_and_can_be_forgotten() {
    let Some(bin) = support::etcd_binary() else {
        return;
    };
    let etcd = Cluster::start(&bin, 1);
    let p = EtcdLockProvider::new(&etcd.url()).unwrap();
    assert!(p.definitions().await.unwrap().is_empty());
    assert_eq!(p.forget("nothing").await.unwrap(), 0);

    // A lock whose name is a job's: its keys and the definitions never meet.
    let lock = p
        .acquire(HOSTILE[0], Duration::from_mins(1), "pod-1")
        .await
        .unwrap()
        .unwrap();
    let defs: Vec<Definition> = HOSTILE
        .iter()
        .map(|job| {
            Definition::new(
                *job,
                format!("lock of {job}"),
                format!(r#"{{"cron":"{job}"}}"#),
            )
        })
        .collect();
    let before = Utc::now().trunc_subsecs(3);
    p.publish_definitions("replica 'a' ✓", VERSION, &defs, Duration::from_mins(5))
        .await
        .unwrap();
    p.publish_definitions("b/short", "0.0.1", &defs[..2], Duration::from_secs(1))
        .await
        .unwrap();
    let listed = p.definitions().await.unwrap();
    let mut expected: Vec<(String, String)> = HOSTILE
        .iter()
        .map(|j| ((*j).to_owned(), "replica 'a' ✓".to_owned()))
        .chain(
            HOSTILE[..2]
                .iter()
                .map(|j| ((*j).to_owned(), "b/short".to_owned())),
        )
        .collect();
    expected.sort();
    let got: Vec<(String, String)> = listed
        .iter()
        .map(|e| (e.definition.job.clone(), e.replica.clone()))
        .collect();
    assert_eq!(got, expected, "sorted by job, then replica");
    for e in &listed {
        let job = &e.definition.job;
        assert_eq!(e.definition.lock_name, format!("lock of {job}"));
        assert_eq!(e.definition.spec, format!(r#"{{"cron":"{job}"}}"#));
        assert!(e.published >= before && e.published <= Utc::now(), "{e:?}");
        if e.replica == "b/short" {
            assert_eq!(e.version, "0.0.1");
            assert!(e.expires >= e.published + chrono::Duration::seconds(1));
        } else {
            assert_eq!(e.version, VERSION);
            assert!(e.expires >= e.published + chrono::Duration::minutes(5));
        }
    }
    let locks = p.list().await.unwrap();
    assert_eq!(locks.len(), 1, "definitions are not locks: {locks:?}");
    assert_eq!(locks[0].record(), &lock);

    // Published again: overwritten, one entry per (job, replica), a later `published`.
    let first = listed[0].clone();
    p.publish_definitions("replica 'a' ✓", VERSION, &defs, Duration::from_mins(5))
        .await
        .unwrap();
    let again = p.definitions().await.unwrap();
    assert_eq!(again.len(), listed.len());
    let same = again
        .iter()
        .find(|e| e.definition.job == first.definition.job && e.replica == first.replica)
        .unwrap();
    assert!(same.published >= first.published);

    // The short lease runs out: etcd deletes those entries by itself.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = p.definitions().await.unwrap();
        if left.iter().all(|e| e.replica != "b/short") {
            assert_eq!(left.len(), HOSTILE.len(), "the long-lived ones stay");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the 1 s definitions did not expire: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // forget removes every replica's entries of one job, and only those.
    p.publish_definitions("c", VERSION, &defs[2..3], Duration::from_mins(5))
        .await
        .unwrap();
    assert_eq!(p.forget(HOSTILE[2]).await.unwrap(), 2);
    assert_eq!(p.forget(HOSTILE[2]).await.unwrap(), 0);
    let left = p.definitions().await.unwrap();
    assert_eq!(left.len(), HOSTILE.len() - 1);
    assert!(left.iter().all(|e| e.definition.job != HOSTILE[2]));
    assert_eq!(p.list().await.unwrap().len(), 1, "the lock is untouched");
    assert!(p.release(&lock, Duration::ZERO).await.unwrap());
}

/// The core's job state suite (no history: etcd keeps none), on one member and with a unit of
/// a second (leases are whole seconds).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(shedlock_etcd),
    ignore = "needs SHEDLOCK_ETCD_URL (etcd; starts private etcd processes of its own)"
)]
async fn job_state_suite_passes() {
    let Some(bin) = support::etcd_binary() else {
        return;
    };
    let etcd = Cluster::start(&bin, 1);
    let p = EtcdLockProvider::builder(etcd.url())
        .prefix(shedlock_etcd::testing::unique_prefix())
        .build()
        .unwrap();
    let start = Instant::now();
    shedlock_core::testkit::JobStateSuite::new(p)
        .time_unit(Duration::from_secs(1))
        .run()
        .await;
    eprintln!("etcd job state suite: {:?}", start.elapsed());
}

/// The core's pause suite, on one member and with the unit of the other etcd suites: a second
/// (leases are whole seconds).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(shedlock_etcd),
    ignore = "needs SHEDLOCK_ETCD_URL (etcd; starts private etcd processes of its own)"
)]
async fn pause_suite_passes() {
    let Some(bin) = support::etcd_binary() else {
        return;
    };
    let etcd = Cluster::start(&bin, 1);
    let p = EtcdLockProvider::builder(etcd.url())
        .prefix(shedlock_etcd::testing::unique_prefix())
        .build()
        .unwrap();
    let start = Instant::now();
    shedlock_core::testkit::PauseSuite::new(p)
        .time_unit(Duration::from_secs(1))
        .run()
        .await;
    eprintln!("etcd pause suite: {:?}", start.elapsed());
}

/// The core's trigger suite ("run now"), on one member and with the unit of the other etcd suites:
/// a second (leases are whole seconds).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(shedlock_etcd),
    ignore = "needs SHEDLOCK_ETCD_URL (etcd; starts private etcd processes of its own)"
)]
async fn trigger_suite_passes() {
    let Some(bin) = support::etcd_binary() else {
        return;
    };
    let etcd = Cluster::start(&bin, 1);
    let p = EtcdLockProvider::builder(etcd.url())
        .prefix(shedlock_etcd::testing::unique_prefix())
        .build()
        .unwrap();
    let start = Instant::now();
    shedlock_core::testkit::TriggerSuite::new(p)
        .time_unit(Duration::from_secs(1))
        .run()
        .await;
    eprintln!("etcd trigger suite: {:?}", start.elapsed());
}
