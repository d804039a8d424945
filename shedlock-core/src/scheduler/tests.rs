//! Scheduler behaviour on paused tokio time, over the in-memory store and `FaultyProvider` for
//! failures. The store's clock can be set apart from the replicas'. Every wait is virtual time.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::*;
use crate::testkit::{Fault, FaultyProvider, Operation};
use crate::{InMemoryLockProvider, LeaderLatchConfig, LockProvider, LockRecord};

const SEC: Duration = Duration::from_secs(1);

type Store = Arc<FaultyProvider<InMemoryLockProvider>>;

/// A store whose clock is `skew` away from the replicas' wall clock.
fn store(skew: chrono::Duration) -> Store {
    Arc::new(FaultyProvider::new(InMemoryLockProvider::starting_at(
        Utc::now() + skew,
    )))
}

/// A store whose clock reads `secs` past the current whole minute (UTC), and that minute in Unix
/// seconds. A test of a schedule every minute then sees the same fires whatever the real time.
fn store_past_a_minute(secs: i64) -> (Store, i64) {
    let minute = Utc::now().timestamp() / 60 * 60;
    let start = DateTime::from_timestamp(minute + secs, 0).unwrap();
    let store = Arc::new(FaultyProvider::new(InMemoryLockProvider::starting_at(
        start,
    )));
    (store, minute)
}

fn scheduler(store: &Store, owner: &str) -> Scheduler {
    scheduler_on(store.clone(), owner)
}

/// A replica's scheduler on any store, such as its own faults around a shared store.
fn scheduler_on(store: impl LockProvider + 'static, owner: &str) -> Scheduler {
    let executor = LockingTaskExecutor::builder(store)
        .owner_id(owner)
        .default_at_most(30 * SEC)
        .call_timeout(SEC)
        .build()
        .unwrap();
    Scheduler::new(executor)
}

/// One run as the body saw it: the fire, and the store's `locked_at` of its claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    fire: DateTime<Utc>,
    locked_at: DateTime<Utc>,
}

type Log = Arc<Mutex<Vec<(String, Seen)>>>;

fn recording(name: &str, schedule: Schedule, replica: &str, log: &Log) -> Job {
    recording_for(name, schedule, replica, log, Duration::ZERO)
}

/// A job that records each run, then works for `work` while holding its lock.
fn recording_for(name: &str, schedule: Schedule, replica: &str, log: &Log, work: Duration) -> Job {
    let (log, replica) = (log.clone(), replica.to_owned());
    Job::new(name, schedule, move |run| {
        let (log, replica) = (log.clone(), replica.clone());
        async move {
            let seen = Seen {
                fire: run.fire().at(),
                locked_at: run.lock().record().locked_at(),
            };
            log.lock().unwrap().push((replica, seen));
            if !work.is_zero() {
                tokio::time::sleep(work).await;
            }
        }
    })
}

fn every(period: Duration) -> Schedule {
    Schedule::every(period).unwrap()
}

fn runs(log: &Log) -> Vec<(String, Seen)> {
    log.lock().unwrap().clone()
}

/// Started at F by the store's clock, give or take the clock estimate's sub-millisecond error.
/// Never before: that is `assert_once_each`'s check.
fn on_time(s: &Seen) -> bool {
    s.locked_at >= s.fire && s.locked_at - s.fire < chrono::Duration::milliseconds(1)
}

fn assert_no_fire_twice(log: &Log) {
    let mut seen = runs(log);
    seen.sort_by_key(|(_, s)| s.fire);
    for w in seen.windows(2) {
        assert_ne!(w[0].1.fire, w[1].1.fire, "a fire ran twice: {w:?}");
    }
    for (replica, s) in &seen {
        assert!(s.locked_at >= s.fire, "{replica} ran {s:?} early");
    }
}

/// No fire ran twice. The fires that ran are consecutive. None started before its F.
fn assert_once_each(log: &Log, schedule: &Schedule) -> usize {
    let mut seen = runs(log);
    seen.sort_by_key(|(_, s)| s.fire);
    for w in seen.windows(2) {
        assert_ne!(w[0].1.fire, w[1].1.fire, "a fire ran twice: {w:?}");
        assert_eq!(
            schedule.next_after(w[0].1.fire),
            Some(w[1].1.fire),
            "a fire was skipped between {w:?}"
        );
    }
    for (replica, s) in &seen {
        assert!(
            s.locked_at >= s.fire,
            "{replica} started {s:?} before F by the store's clock"
        );
    }
    seen.len()
}

#[tokio::test(start_paused = true)]
async fn two_replicas_run_each_fire_once_on_the_stores_clock() {
    // The store's clock is 1 h 3.7 s away from the replicas': fires still follow it.
    let store = store(chrono::Duration::milliseconds(3_603_700));
    let log = Log::default();
    let schedule = every(SEC);
    let (a, b) = (scheduler(&store, "a"), scheduler(&store, "b"));
    a.add(recording("tick", schedule.clone(), "a", &log))
        .unwrap();
    b.add(recording("tick", schedule.clone(), "b", &log))
        .unwrap();
    a.start().await.unwrap();
    b.start().await.unwrap();
    tokio::time::sleep(20 * SEC).await;
    a.shutdown(SEC).await;
    b.shutdown(SEC).await;
    let ran = assert_once_each(&log, &schedule);
    assert!((19..=21).contains(&ran), "{ran} runs in 20 s");
    for s in runs(&log) {
        assert!(on_time(&s.1), "on time to the millisecond: {s:?}");
    }
    let (sa, sb) = (a.status("tick").unwrap(), b.status("tick").unwrap());
    assert_eq!(sa.runs + sb.runs, ran as u64);
    assert_eq!(
        sa.claimed_elsewhere + sb.claimed_elsewhere + sa.held + sb.held,
        ran as u64,
        "every fire one replica ran, the other saw as taken: {sa:?} {sb:?}"
    );
    assert_eq!(sa.missed + sb.missed, 0);
    assert_eq!(a.uses_fire_claims(), Some(true));
    let offset = a.store_clock_offset().unwrap();
    assert!(
        (offset - chrono::Duration::milliseconds(3_603_700)).abs()
            < chrono::Duration::milliseconds(5)
    );
}

/// One job `"tick"`, every minute, started 0.5 s before a fire by the store's clock; then a 1 s
/// jump of the clock before the job's task first runs (a busy runtime: there is no await between
/// `start` and the jump). Runs 5 s more and shuts down. Answers the fires that ran, the job's
/// status, and the fire `start` named first.
async fn first_polled_late(catch_up: bool) -> (Vec<DateTime<Utc>>, JobStatus, DateTime<Utc>) {
    let (store, minute) = store_past_a_minute(59);
    tokio::time::advance(SEC / 2).await;
    let log = Log::default();
    let schedule = Schedule::cron("0 * * * * *").unwrap();
    let a = scheduler(&store, "a");
    a.add(recording("tick", schedule, "a", &log).catch_up(catch_up))
        .unwrap();
    a.start().await.unwrap();
    let named = a.status("tick").unwrap().next_fire;
    tokio::time::advance(SEC).await;
    tokio::time::sleep(5 * SEC).await;
    a.shutdown(SEC).await;
    let first = DateTime::from_timestamp(minute + 60, 0).unwrap();
    if !catch_up {
        assert_eq!(named, Some(first), "the fire `start` names");
    }
    let ran = runs(&log).iter().map(|(_, s)| s.fire).collect();
    (ran, a.status("tick").unwrap(), first)
}

/// The fire `start` named is still claimed, late inside its window, not skipped without a count
/// because the task began after it.
#[tokio::test(start_paused = true)]
async fn a_job_task_first_polled_after_its_first_fire_still_claims_it() {
    let (ran, status, first) = first_polled_late(false).await;
    assert_eq!(ran, [first], "the first fire ran once, late");
    assert_eq!((status.runs, status.missed), (1, 0), "{status:?}");
}

/// A job that catches up: its catch-up fire (the one before `start`) has closed by then and is
/// counted missed, and the next fire runs once.
#[tokio::test(start_paused = true)]
async fn a_catch_up_task_first_polled_late_counts_its_catch_up_missed_and_runs_the_next() {
    let (ran, status, first) = first_polled_late(true).await;
    assert_eq!(ran, [first]);
    assert_eq!((status.runs, status.missed), (1, 1), "{status:?}");
}

/// The probe fails, so the replica starts on its own clock, 2 s ahead of the store's. Its first
/// claim is too early. It waits the difference, and the run starts exactly at F.
#[tokio::test(start_paused = true)]
async fn a_replica_ahead_of_the_store_never_fires_early() {
    let store = store(chrono::Duration::seconds(-2));
    store.inject_times(Operation::ClaimFire, Fault::Fail, 1);
    let log = Log::default();
    let schedule = every(5 * SEC);
    let a = scheduler(&store, "a");
    a.add(recording("report", schedule.clone(), "a", &log))
        .unwrap();
    a.start().await.unwrap();
    tokio::time::sleep(30 * SEC).await;
    a.shutdown(SEC).await;
    let ran = assert_once_each(&log, &schedule);
    assert!(ran >= 5, "{ran}");
    for (_, s) in runs(&log) {
        assert!(on_time(&s), "not early, not late: {s:?}");
    }
    assert!(
        store.calls(Operation::ClaimFire) > ran + 1,
        "a too-early claim was retried"
    );
}

/// A replica 2 s behind the store, after a failed probe. The first fire is claimed late, while the
/// window is still open. From its reply on, the replica is on time.
#[tokio::test(start_paused = true)]
async fn a_replica_behind_the_store_learns_its_clock_from_the_first_reply() {
    let store = store(chrono::Duration::seconds(2));
    store.inject_times(Operation::ClaimFire, Fault::Fail, 1);
    let log = Log::default();
    let schedule = every(5 * SEC);
    let a = scheduler(&store, "a");
    a.add(recording("report", schedule.clone(), "a", &log))
        .unwrap();
    a.start().await.unwrap();
    tokio::time::sleep(30 * SEC).await;
    a.shutdown(SEC).await;
    assert_once_each(&log, &schedule);
    let seen = runs(&log);
    let late: Vec<_> = seen.iter().filter(|(_, s)| !on_time(s)).collect();
    assert!(late.len() <= 1, "only a first fire may be late: {late:?}");
    assert!(seen.len() >= 5);
}

#[tokio::test(start_paused = true)]
async fn fires_met_while_a_run_holds_the_lock_are_counted_not_queued() {
    let store = store(chrono::Duration::zero());
    let schedule = every(SEC);
    let runs_seen = Arc::new(Mutex::new(Vec::new()));
    let job = |replica: &'static str| {
        let runs_seen = runs_seen.clone();
        Job::new("slow", schedule.clone(), move |run| {
            let runs_seen = runs_seen.clone();
            async move {
                runs_seen.lock().unwrap().push((replica, run.fire().at()));
                tokio::time::sleep(Duration::from_millis(3_500)).await;
            }
        })
    };
    let (a, b) = (scheduler(&store, "a"), scheduler(&store, "b"));
    a.add(job("a")).unwrap();
    b.add(job("b")).unwrap();
    a.start().await.unwrap();
    b.start().await.unwrap();
    tokio::time::sleep(Duration::from_millis(16_200)).await;
    a.shutdown(10 * SEC).await;
    b.shutdown(10 * SEC).await;
    let ran = runs_seen.lock().unwrap().clone();
    // One run every 4 s (3.5 s of work, then the next fire): never overlapping, never queued.
    for w in ran.windows(2) {
        assert_eq!((w[1].1 - w[0].1).num_seconds(), 4, "{ran:?}");
    }
    let (sa, sb) = (a.status("slow").unwrap(), b.status("slow").unwrap());
    assert_eq!(sa.runs + sb.runs, ran.len() as u64);
    assert!(
        sa.held + sb.held >= 3 * (ran.len() as u64 - 1),
        "{sa:?} {sb:?}"
    );
    assert_eq!(sa.missed + sb.missed, 0);
}

#[tokio::test(start_paused = true)]
async fn a_failing_body_is_logged_and_counted_never_retried() {
    let store = store(chrono::Duration::zero());
    let schedule = every(2 * SEC);
    let calls = Arc::new(Mutex::new(0_u32));
    let a = scheduler(&store, "a");
    let counted = calls.clone();
    a.add(Job::new("flaky", schedule, move |_| {
        let counted = counted.clone();
        async move {
            *counted.lock().unwrap() += 1;
            Err::<(), _>("the upstream said no")
        }
    }))
    .unwrap();
    a.start().await.unwrap();
    tokio::time::sleep(Duration::from_millis(10_500)).await;
    a.shutdown(SEC).await;
    let status = a.status("flaky").unwrap();
    let calls = u64::from(*calls.lock().unwrap());
    assert_eq!(status.runs, calls, "one call per fire: no retries");
    assert_eq!(status.errors, calls);
    let last = status.last_run.unwrap();
    assert_eq!(
        last.outcome,
        RunOutcome::Failed("the upstream said no".into())
    );
    assert!(last.ended >= last.started);
}

#[tokio::test(start_paused = true)]
async fn a_panicking_body_is_counted_and_the_job_goes_on() {
    let store = store(chrono::Duration::zero());
    let a = scheduler(&store, "a");
    a.add(Job::new("boom", every(SEC), |_| async {
        #[allow(clippy::manual_assert)]
        if true {
            panic!("boom");
        }
    }))
    .unwrap();
    a.start().await.unwrap();
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    a.shutdown(SEC).await;
    let status = a.status("boom").unwrap();
    assert!(
        status.runs >= 3 && status.errors == status.runs,
        "{status:?}"
    );
    assert_eq!(status.last_run.unwrap().outcome, RunOutcome::Panicked);
}

#[tokio::test(start_paused = true)]
async fn registration_refuses_what_cannot_work() {
    let store = store(chrono::Duration::zero());
    let a = scheduler(&store, "a");
    let job = |name: &str| Job::new(name, every(60 * SEC), |_| async {});
    a.add(job("one")).unwrap();
    let err = a.add(job("one")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid lock configuration: a job named \"one\" is already registered"
    );
    let err = a.add(job("two").lock_name("one")).unwrap_err();
    assert!(
        err.to_string().contains("use one lock name \"one\""),
        "{err}"
    );
    let err = a
        .add(job("three").at_least(60 * SEC).at_most(120 * SEC))
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("not shorter than its schedule's shortest gap (1m)"),
        "{err}"
    );
    assert!(
        a.add(job("four").at_least(59 * SEC).at_most(120 * SEC))
            .is_ok()
    );
    let err = a
        .add(job("five").at_least(40 * SEC).at_most(10 * SEC))
        .unwrap_err();
    assert!(err.is_invalid_config(), "{err}");
    let no_default = Scheduler::new(LockingTaskExecutor::new(store.clone()).unwrap());
    let err = no_default.add(job("six")).unwrap_err();
    assert!(err.to_string().contains("has no at_most"), "{err}");
    let err = a.add(job(&"x".repeat(65))).unwrap_err();
    assert!(err.is_invalid_config());
    a.start().await.unwrap();
    assert!(a.start().await.unwrap_err().is_invalid_config());
    a.shutdown(SEC).await;
    assert!(a.add(job("late")).unwrap_err().is_shutdown());
}

/// Forwards everything but `claim_fire`.
struct NoFireClaims(Store);

#[async_trait]
impl LockProvider for NoFireClaims {
    async fn acquire(
        &self,
        name: &str,
        at_most: Duration,
        owner: &str,
    ) -> crate::Result<Option<LockRecord>> {
        self.0.acquire(name, at_most, owner).await
    }
    async fn extend(
        &self,
        record: &LockRecord,
        at_most: Duration,
    ) -> crate::Result<Option<LockRecord>> {
        self.0.extend(record, at_most).await
    }
    async fn release(&self, record: &LockRecord, at_least: Duration) -> crate::Result<bool> {
        self.0.release(record, at_least).await
    }
}

#[tokio::test(start_paused = true)]
async fn without_fire_claims_jobs_run_under_plain_locks_with_one_warning() {
    let logs = crate::test_observe::Logs::default();
    let _logs = logs.install();
    let store = store(chrono::Duration::zero());
    let plain = Arc::new(NoFireClaims(store.clone()));
    let make = |owner: &str| {
        Scheduler::new(
            LockingTaskExecutor::builder(plain.clone())
                .owner_id(owner)
                .default_at_most(30 * SEC)
                .build()
                .unwrap(),
        )
    };
    let log = Log::default();
    let (a, b) = (make("a"), make("b"));
    let schedule = every(5 * SEC);
    a.add(recording("plain", schedule.clone(), "a", &log).at_least(2 * SEC))
        .unwrap();
    b.add(recording("plain", schedule.clone(), "b", &log))
        .unwrap();
    a.start().await.unwrap();
    b.start().await.unwrap();
    tokio::time::sleep(Duration::from_millis(20_500)).await;
    a.shutdown(SEC).await;
    b.shutdown(SEC).await;
    assert_eq!(a.uses_fire_claims(), Some(false));
    assert!(runs(&log).len() >= 4);
    assert_eq!(store.calls(Operation::ClaimFire), 0);
    assert_eq!(
        logs.count(tracing::Level::WARN, "does not record fires"),
        2,
        "one warning per scheduler"
    );
    assert_eq!(
        logs.count(tracing::Level::WARN, "has at_least 0"),
        1,
        "for b's job only"
    );
}

#[tokio::test(start_paused = true)]
async fn a_window_passing_while_the_store_fails_is_counted_missed() {
    let store = store(chrono::Duration::zero());
    let a = scheduler(&store, "a");
    let log = Log::default();
    a.add(recording("sync", every(2 * SEC), "a", &log)).unwrap();
    a.start().await.unwrap();
    tokio::time::sleep(Duration::from_millis(4_500)).await;
    store.inject(Operation::ClaimFire, Fault::Fail);
    tokio::time::sleep(7 * SEC).await;
    store.heal_all();
    tokio::time::sleep(5 * SEC).await;
    a.shutdown(SEC).await;
    let status = a.status("sync").unwrap();
    assert!(status.missed >= 2, "{status:?}");
    assert!(
        status.store_errors >= status.missed,
        "retried within each window: {status:?}"
    );
    assert!(
        status.runs >= 4,
        "resumed after the store healed: {status:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn catch_up_claims_the_latest_fire_once_on_start() {
    // Fires 30 s, 90 s and 150 s into the test. (On the real clock's alignment, one run in 60
    // had a fire fall just as the late replicas started: a regular run, not a catch-up.)
    let (store, minute) = store_past_a_minute(30);
    let schedule = every(60 * SEC);
    let log = Log::default();
    // A first replica runs a fire, then everything is down across the next one.
    let first = scheduler(&store, "first");
    first
        .add(recording("hourly", schedule.clone(), "first", &log))
        .unwrap();
    first.start().await.unwrap();
    tokio::time::sleep(61 * SEC).await;
    first.shutdown(SEC).await;
    assert_eq!(runs(&log).len(), 1);
    tokio::time::sleep(70 * SEC).await; // a fire passed with nobody up
    let caught = Arc::new(Mutex::new(Vec::new()));
    let starters: Vec<Scheduler> = ["x", "y"]
        .iter()
        .map(|owner| {
            let s = scheduler(&store, owner);
            let caught = caught.clone();
            s.add(
                Job::new("hourly", schedule.clone(), move |run| {
                    let caught = caught.clone();
                    async move {
                        caught
                            .lock()
                            .unwrap()
                            .push((run.fire().at(), run.is_catch_up()));
                    }
                })
                .catch_up(true),
            )
            .unwrap();
            s
        })
        .collect();
    for s in &starters {
        s.start().await.unwrap();
    }
    tokio::time::sleep(SEC).await;
    let late = caught.lock().unwrap().clone();
    assert_eq!(
        late.len(),
        1,
        "two replicas started together, one ran it: {late:?}"
    );
    assert!(late[0].1, "a catch-up run");
    assert_eq!(
        runs(&log)[0].1.fire,
        DateTime::from_timestamp(minute + 60, 0).unwrap()
    );
    assert_eq!(
        late[0].0,
        DateTime::from_timestamp(minute + 120, 0).unwrap(),
        "the fire missed while nobody was up"
    );
    for s in &starters {
        s.shutdown(SEC).await;
    }
}

#[tokio::test(start_paused = true)]
async fn without_catch_up_a_missed_fire_is_not_run_at_start() {
    // The store's clock reads one second past a whole minute: the fire at that minute has an
    // open window, but it was before this replica started.
    let (store, minute) = store_past_a_minute(1);
    let schedule = every(60 * SEC);
    let log = Log::default();
    let a = scheduler(&store, "a");
    a.add(recording("hourly", schedule.clone(), "a", &log))
        .unwrap();
    a.start().await.unwrap();
    tokio::time::sleep(30 * SEC).await;
    assert!(runs(&log).is_empty(), "waits for the next fire");
    tokio::time::sleep(30 * SEC).await;
    let ran = runs(&log);
    assert_eq!(ran.len(), 1);
    assert_eq!(
        ran[0].1.fire,
        DateTime::from_timestamp(minute + 60, 0).unwrap()
    );
    a.shutdown(SEC).await;
}

#[tokio::test(start_paused = true)]
async fn leader_only_jobs_run_on_the_leader_and_a_failover_repeats_no_fire() {
    let store = store(chrono::Duration::zero());
    let log = Log::default();
    let schedule = every(SEC);
    let terms = Arc::new(Mutex::new(Vec::new()));
    let mut replicas = Vec::new();
    for owner in ["a", "b"] {
        let latch = LeaderLatch::start(
            store.clone(),
            LeaderLatchConfig::builder("leader")
                .owner_id(owner)
                .build()
                .unwrap(),
        )
        .unwrap();
        let s = scheduler(&store, owner);
        let (log, terms) = (log.clone(), terms.clone());
        s.add(
            Job::new("lead", schedule.clone(), move |run| {
                let (log, terms) = (log.clone(), terms.clone());
                async move {
                    let term = run.term().expect("a leader-only run has its term");
                    terms.lock().unwrap().push(term.owner_id().to_owned());
                    log.lock().unwrap().push((
                        term.owner_id().to_owned(),
                        Seen {
                            fire: run.fire().at(),
                            locked_at: run.lock().record().locked_at(),
                        },
                    ));
                }
            })
            .leader_only(latch.clone()),
        )
        .unwrap();
        s.start().await.unwrap();
        replicas.push((s, latch));
    }
    // Someone leads within the first acquire interval.
    tokio::time::sleep(3 * SEC).await;
    tokio::time::sleep(10 * SEC).await;
    let leading: Vec<usize> = (0..2).filter(|i| replicas[*i].1.is_leader()).collect();
    assert_eq!(leading.len(), 1);
    let first = leading[0];
    let owner = replicas[first].1.owner_id().to_owned();
    assert!(
        terms.lock().unwrap().iter().all(|t| *t == owner),
        "only the leader ran"
    );
    // Failover: the leader closes its latch; the other takes over.
    replicas[first].1.close().await.unwrap();
    tokio::time::sleep(15 * SEC).await;
    let other = 1 - first;
    assert!(replicas[other].1.is_leader());
    assert_no_fire_twice(&log);
    let owners: std::collections::HashSet<String> = terms.lock().unwrap().iter().cloned().collect();
    assert_eq!(owners.len(), 2, "both led in turn");
    for (s, latch) in &replicas {
        s.shutdown(SEC).await;
        let _ = latch.close().await;
    }
}

#[tokio::test(start_paused = true)]
async fn shutdown_lets_a_run_finish_within_the_grace_and_cancels_a_longer_one() {
    let logs = crate::test_observe::Logs::default();
    let _logs = logs.install();
    for (grace, expected) in [
        (10 * SEC, RunOutcome::Succeeded),
        (SEC, RunOutcome::Cancelled),
    ] {
        let store = store(chrono::Duration::zero());
        let a = scheduler(&store, "a");
        let (started, has_started) = tokio::sync::oneshot::channel();
        let started = Arc::new(Mutex::new(Some(started)));
        a.add(
            Job::new("long", every(60 * SEC), move |_| {
                let started = started.clone();
                async move {
                    if let Some(tx) = started.lock().unwrap().take() {
                        let _ = tx.send(());
                    }
                    tokio::time::sleep(5 * SEC).await;
                }
            })
            .at_most(600 * SEC),
        )
        .unwrap();
        a.start().await.unwrap();
        has_started.await.unwrap();
        let begun = Instant::now();
        let drained = a.shutdown(grace).await;
        let status = a.status("long").unwrap();
        assert_eq!(
            status.last_run.unwrap().outcome,
            expected,
            "grace {grace:?}"
        );
        assert_eq!(
            drained.cancelled,
            usize::from(expected == RunOutcome::Cancelled)
        );
        assert!(begun.elapsed() <= grace.min(5 * SEC) + SEC);
        // The log says why a run was cancelled (the "run cancelled" event, and the stop window's
        // "dropped" one, as this body ignores the signal), and how long a finished run took.
        if expected == RunOutcome::Cancelled {
            assert_eq!(logs.count(tracing::Level::WARN, "run cancelled"), 1);
            assert_eq!(logs.count(tracing::Level::WARN, "shutdown cancelled it"), 2);
        } else {
            assert_eq!(logs.count(tracing::Level::INFO, "took_ms=5000"), 1);
        }
        // The lock is free at once (at_least 0), not at at_most.
        assert!(
            store
                .inner()
                .acquire("long", SEC, "next")
                .await
                .unwrap()
                .is_some()
        );
        assert_eq!(status.next_fire, None);
    }
}

/// A claim commits but its reply is lost. The retry finds the fire recorded, held by this very
/// replica, and runs it once. Otherwise it would run nowhere, and its lock would hold to `at_most`.
#[tokio::test(start_paused = true)]
async fn a_claim_whose_reply_was_lost_is_run_by_its_replica() {
    let store = store(chrono::Duration::zero());
    let a = scheduler(&store, "a");
    let log = Log::default();
    let schedule = every(10 * SEC);
    a.add(recording("report", schedule.clone(), "a", &log))
        .unwrap();
    a.start().await.unwrap();
    // The next claim commits, then answers with an error.
    store.inject_times(Operation::ClaimFire, Fault::FailAfterApplying, 1);
    tokio::time::sleep(25 * SEC).await;
    a.shutdown(SEC).await;
    let ran = assert_once_each(&log, &schedule);
    let status = a.status("report").unwrap();
    assert_eq!(status.store_errors, 1, "{status:?}");
    assert_eq!(status.runs, ran as u64, "{status:?}");
    assert!(
        ran >= 2,
        "the lost claim's fire and the next ran: {status:?}"
    );
    assert_eq!(status.claimed_elsewhere, 0, "{status:?}");
    assert_eq!(status.missed, 0, "{status:?}");
    // The lock is free at once, not held to at_most by the lost claim.
    assert!(store.inner().holder("report").await.unwrap().is_none());
}

/// Another replica's claim is never taken over. Only a holder with this replica's owner id is.
#[tokio::test(start_paused = true)]
async fn a_lost_reply_does_not_take_over_another_replicas_claim() {
    let store = store(chrono::Duration::zero());
    let log = Log::default();
    let schedule = every(10 * SEC);
    let b = scheduler(&store, "b");
    // b's body runs long, so its claim still holds when a retries.
    b.add(
        Job::new("sync", schedule.clone(), {
            let log = log.clone();
            move |run| {
                let log = log.clone();
                async move {
                    let seen = Seen {
                        fire: run.fire().at(),
                        locked_at: run.lock().record().locked_at(),
                    };
                    log.lock().unwrap().push(("b".to_owned(), seen));
                    tokio::time::sleep(3 * SEC).await;
                }
            }
        })
        .at_most(30 * SEC),
    )
    .unwrap();
    b.start().await.unwrap();
    // a reaches the shared store through faults of its own: its first fire claim fails without
    // applying, so what it then finds recorded is b's claim.
    let a_store = Arc::new(FaultyProvider::new(store.clone()));
    let a = scheduler_on(a_store.clone(), "a");
    a.add(recording("sync", schedule.clone(), "a", &log))
        .unwrap();
    a.start().await.unwrap();
    a_store.inject_times(Operation::ClaimFire, Fault::Fail, 1);
    tokio::time::sleep(35 * SEC).await;
    a.shutdown(SEC).await;
    b.shutdown(SEC).await;
    assert_no_fire_twice(&log);
    let status = a.status("sync").unwrap();
    assert_eq!(status.store_errors, 1, "{status:?}");
    // The fire whose claim failed was b's: a saw it claimed elsewhere and did not run it (had it
    // taken b's lock over, that fire would show twice above).
    assert!(status.claimed_elsewhere >= 1, "{status:?}");
    let first = runs(&log).iter().map(|(_, s)| s.fire).min().unwrap();
    assert!(
        runs(&log)
            .iter()
            .any(|(replica, s)| replica == "b" && s.fire == first),
        "b ran the first fire: {:?}",
        runs(&log)
    );
}

/// A pod restarted under the same owner id, with `SHEDLOCK_OWNER_ID` set to its stable name, and
/// catch-up on. The dead pod's claim of the open fire is not this scheduler's, though its owner id
/// is. So it is neither run nor released, even when the catch-up claim's own reply is lost.
#[tokio::test(start_paused = true)]
async fn a_restarted_pod_with_the_same_owner_id_does_not_run_the_dead_ones_fire() {
    let (store, minute) = store_past_a_minute(10);
    let schedule = every(60 * SEC);
    let at = |s: i64| DateTime::from_timestamp(minute + s, 0).unwrap();
    // The dead pod claimed the fire at the minute, and died before running it.
    let fire = Fire::new(at(0), at(60)).unwrap();
    let dead = store
        .inner()
        .claim_fire("hourly", &fire, 30 * SEC, "pod-0")
        .await
        .unwrap();
    let dead = dead.claimed().cloned().expect("the dead pod's claim");
    tokio::time::sleep(5 * SEC).await; // the pod restarts
    let log = Log::default();
    let pod = scheduler(&store, "pod-0");
    pod.add(recording("hourly", schedule.clone(), "pod-0", &log).catch_up(true))
        .unwrap();
    pod.start().await.unwrap();
    // The catch-up claim is answered, but its reply is lost.
    store.inject_times(Operation::ClaimFire, Fault::FailAfterApplying, 1);
    tokio::time::sleep(20 * SEC).await;
    assert!(
        runs(&log).is_empty(),
        "the dead pod's fire ran here: {:?}",
        runs(&log)
    );
    let status = pod.status("hourly").unwrap();
    assert_eq!(status.store_errors, 1, "{status:?}");
    assert_eq!(status.claimed_elsewhere, 1, "{status:?}");
    assert_eq!(
        store.inner().holder("hourly").await.unwrap(),
        Some(dead),
        "the dead pod's lock is left to its at_most"
    );
    // The next fire is this pod's as usual.
    tokio::time::sleep(40 * SEC).await;
    pod.shutdown(SEC).await;
    let ran: Vec<_> = runs(&log).iter().map(|(_, s)| s.fire).collect();
    assert_eq!(ran, [at(60)]);
}

/// Two schedulers of one process share an owner id, as the default one is per process. They run the
/// same job. Both claims of a fire lose their replies. The one that committed is then found by
/// both, inside both loops' spans. One of them runs it, never both.
#[tokio::test(start_paused = true)]
async fn two_schedulers_of_one_process_never_both_run_a_lost_claim() {
    let store = store(chrono::Duration::zero());
    let log = Log::default();
    let schedule = every(10 * SEC);
    let first = scheduler(&store, "pod-0");
    let second = scheduler(&store, "pod-0");
    for (s, who) in [(&first, "first"), (&second, "second")] {
        // Each run takes 2 s, so the claim is still held when the other loop looks again.
        s.add(recording_for(
            "report",
            schedule.clone(),
            who,
            &log,
            2 * SEC,
        ))
        .unwrap();
        s.start().await.unwrap();
    }
    // The next two claims (both loops' claims of the next fire) apply, then fail.
    store.inject_times(Operation::ClaimFire, Fault::FailAfterApplying, 2);
    tokio::time::sleep(25 * SEC).await;
    first.shutdown(SEC).await;
    second.shutdown(SEC).await;
    let ran = assert_once_each(&log, &schedule);
    assert!(
        ran >= 2,
        "the lost claim's fire and the next ran: {:?}",
        runs(&log)
    );
    let errors: u64 = [&first, &second]
        .iter()
        .map(|s| s.status("report").unwrap().store_errors)
        .sum();
    assert_eq!(
        errors, 2,
        "both claims of the first fire lost their replies"
    );
    assert!(store.inner().holder("report").await.unwrap().is_none());
}

/// A lost claim that never committed hangs to the call timeout while another replica claims and
/// runs the fire, and a plain lock user of this process with the same owner id takes the job's lock
/// inside the span. The retry finds the fire recorded and the lock held under this owner id. Taking
/// that lock would run the fire twice and release the plain user's lock, so it must not.
#[tokio::test(start_paused = true)]
async fn a_lock_held_in_this_process_is_never_taken_for_a_lost_claim() {
    let (store, minute) = store_past_a_minute(1);
    let at = |s: i64| DateTime::from_timestamp(minute + s, 0).unwrap();
    let log = Log::default();
    let a = scheduler(&store, "pod-0");
    a.add(recording("sync", every(10 * SEC), "pod-0", &log))
        .unwrap();
    a.start().await.unwrap();
    store.inject_times(Operation::ClaimFire, Fault::Hang, 1);
    // +10.5 s: the claim of the fire at +10 s hangs (it times out at +11 s).
    tokio::time::sleep(Duration::from_millis(9_500)).await;
    let fire = Fire::new(at(10), at(20)).unwrap();
    let other = store
        .inner()
        .claim_fire("sync", &fire, 30 * SEC, "replica-r")
        .await
        .unwrap();
    let other = other.claimed().cloned().expect("replica r claims it");
    assert!(store.inner().release(&other, Duration::ZERO).await.unwrap());
    let plain = LockingTaskExecutor::builder(store.clone())
        .owner_id("pod-0")
        .build()
        .unwrap();
    let guard = plain
        .try_lock(&LockConfig::new("sync", 30 * SEC).unwrap())
        .await
        .unwrap()
        .expect("free after r's run");
    let held = guard.handle().record();
    tokio::time::sleep(3 * SEC).await; // the retry after the timeout
    let status = a.status("sync").unwrap();
    assert!(
        runs(&log).is_empty(),
        "ran the fire a second time: {:?}",
        runs(&log)
    );
    assert_eq!(status.store_errors, 1, "{status:?}");
    assert_eq!(status.claimed_elsewhere, 1, "{status:?}");
    assert_eq!(
        store.inner().holder("sync").await.unwrap(),
        Some(held),
        "the plain user still holds its lock"
    );
    assert!(guard.release().await.unwrap());
    a.shutdown(SEC).await;
}

/// A claim commits, its reply is lost, and the store fails until the fire's window has passed. The
/// replica does not run the fire late. It reads the holder once the store answers and releases its
/// own claim. So the next fire is not held to `at_most`.
#[tokio::test(start_paused = true)]
async fn a_lost_claim_whose_window_passed_is_released_unrun() {
    let (store, minute) = store_past_a_minute(1);
    let at = |s: i64| DateTime::from_timestamp(minute + s, 0).unwrap();
    let schedule = every(10 * SEC);
    let log = Log::default();
    let a = scheduler(&store, "a");
    a.add(recording("sync", schedule.clone(), "a", &log))
        .unwrap();
    a.start().await.unwrap();
    store.inject_times(Operation::ClaimFire, Fault::FailAfterApplying, 1);
    // Just after the fire at +10 s: its claim committed; now the store fails for everything.
    tokio::time::sleep(Duration::from_millis(9_500)).await;
    let lost = store
        .inner()
        .holder("sync")
        .await
        .unwrap()
        .expect("committed");
    assert_eq!((lost.owner(), lost.locked_at()), ("a", at(10)));
    store.inject(Operation::ClaimFire, Fault::Fail);
    store.inject(Operation::Holder, Fault::Fail);
    // The window ends at +20 s; the store answers again at +21.5 s.
    tokio::time::sleep(12 * SEC).await;
    assert_eq!(
        store.inner().holder("sync").await.unwrap().as_ref(),
        Some(&lost),
        "nothing could be released while the store failed"
    );
    store.heal_all();
    tokio::time::sleep(2 * SEC).await;
    // Released (the lock ends at +23.5 s at the latest, not at_most's +40 s) and not run; the
    // fire at +20 s, whose window was still open, ran.
    let ran: Vec<_> = runs(&log).iter().map(|(_, s)| s.fire).collect();
    assert_eq!(ran, [at(20)], "{:?}", runs(&log));
    let status = a.status("sync").unwrap();
    assert!(status.missed >= 1, "{status:?}");
    a.shutdown(SEC).await;
    assert!(store.inner().holder("sync").await.unwrap().is_none());
}

/// A job whose body takes 13 s, every 10 s. Under `RunLate`, the run that ends inside the next
/// fire's window claims that fire right after its release. Under `Skip`, that fire is counted held.
/// Either way each fire runs at most once, inside its window.
#[tokio::test(start_paused = true)]
async fn run_late_claims_the_fire_whose_window_is_open_when_the_previous_run_ends() {
    for policy in [OnHeld::Skip, OnHeld::RunLate] {
        let (store, minute) = store_past_a_minute(1);
        let at = |s: i64| DateTime::from_timestamp(minute + s, 0).unwrap();
        let schedule = every(10 * SEC);
        let log = Log::default();
        let a = scheduler(&store, "a");
        let job = recording_for("slow", schedule.clone(), "a", &log, 13 * SEC);
        a.add(job.on_held(policy)).unwrap();
        a.start().await.unwrap();
        tokio::time::sleep(Duration::from_millis(51_500)).await; // to +52.5 s
        let status = a.status("slow").unwrap();
        a.shutdown(SEC).await;
        assert_no_fire_twice(&log);
        let seen: Vec<_> = runs(&log).into_iter().map(|(_, s)| s).collect();
        for s in &seen {
            let next = schedule.next_after(s.fire).unwrap();
            assert!(
                s.fire <= s.locked_at && s.locked_at < next,
                "{policy:?}: claimed outside its window: {s:?}"
            );
        }
        let fires: Vec<_> = seen.iter().map(|s| s.fire).collect();
        if policy == OnHeld::Skip {
            assert_eq!(fires, [at(10), at(30), at(50)], "{policy:?}");
            assert_eq!(status.held, 2, "{status:?}");
        } else {
            // 10–23 s, then 20 claimed at 23 s, 30 at 36 s, 40 at 49 s.
            assert_eq!(fires, [at(10), at(20), at(30), at(40)], "{policy:?}");
            let claimed: Vec<_> = seen.iter().map(|s| s.locked_at).collect();
            assert_eq!(claimed, [at(10), at(23), at(36), at(49)]);
            assert_eq!(status.held, 0, "{status:?}");
        }
    }
}

/// A fire met while another holder's lock is held. Under `RunLate`, the replica claims once more at
/// the holder's `lock_until` only when that falls inside the window. Under `Skip`, it does not.
#[tokio::test(start_paused = true)]
async fn run_late_claims_again_at_the_holders_lock_until_inside_the_window() {
    for (policy, hold, runs_at) in [
        (OnHeld::RunLate, 3, Some(12)),
        (OnHeld::RunLate, 15, None),
        (OnHeld::Skip, 3, None),
    ] {
        let (store, minute) = store_past_a_minute(1);
        let at = |s: i64| DateTime::from_timestamp(minute + s, 0).unwrap();
        let log = Log::default();
        let a = scheduler(&store, "a");
        a.add(recording("sync", every(10 * SEC), "a", &log).on_held(policy))
            .unwrap();
        a.start().await.unwrap();
        tokio::time::sleep(8 * SEC).await; // +9 s: a plain lock user takes the job's lock
        let plain = store
            .inner()
            .acquire("sync", hold * SEC, "plain")
            .await
            .unwrap()
            .expect("free");
        tokio::time::sleep(9 * SEC).await; // +18 s, inside the window of the fire at +10 s
        a.shutdown(SEC).await;
        let seen: Vec<_> = runs(&log).into_iter().map(|(_, s)| s).collect();
        let status = a.status("sync").unwrap();
        if let Some(t) = runs_at {
            let expected = Seen {
                fire: at(10),
                locked_at: at(t),
            };
            assert_eq!(seen, [expected], "{policy:?}, held {hold} s");
            assert_eq!(status.held, 0, "{status:?}");
        } else {
            assert!(seen.is_empty(), "{policy:?}, held {hold} s: {seen:?}");
            assert_eq!(status.held, 1, "{status:?}");
        }
        let _ = store.inner().release(&plain, Duration::ZERO).await;
    }
}

/// On a store without fire claims, `RunLate` is not applied, and the scheduler says so once. A late
/// plain lock is the duplicate `at_least` prevents.
#[tokio::test(start_paused = true)]
async fn run_late_is_not_applied_to_plain_locks_and_says_so() {
    let logs = crate::test_observe::Logs::default();
    let _logs = logs.install();
    let store = store(chrono::Duration::zero());
    let plain = Arc::new(NoFireClaims(store.clone()));
    let a = Scheduler::new(
        LockingTaskExecutor::builder(plain)
            .owner_id("a")
            .default_at_most(30 * SEC)
            .build()
            .unwrap(),
    );
    let log = Log::default();
    let job = recording_for("slow", every(10 * SEC), "a", &log, 13 * SEC);
    a.add(job.at_least(SEC).on_held(OnHeld::RunLate)).unwrap();
    a.start().await.unwrap();
    tokio::time::sleep(45 * SEC).await;
    let status = a.status("slow").unwrap();
    a.shutdown(SEC).await;
    // Without fire claims the replica's own clock times the fires (the store's is not learned).
    let fires: Vec<_> = runs(&log).into_iter().map(|(_, s)| s.fire).collect();
    assert!(fires.len() >= 2, "{fires:?}");
    for pair in fires.windows(2) {
        assert_eq!(
            pair[1] - pair[0],
            chrono::Duration::seconds(20),
            "the fire met while the 13 s run held the lock was skipped: {fires:?}"
        );
    }
    assert!(status.held >= 1, "{status:?}");
    assert_eq!(logs.count(tracing::Level::WARN, "on_held RunLate"), 1);
}

/// A store that keeps failing near the end of a window is retried with a floor between claims,
/// never in a tight loop.
#[tokio::test(start_paused = true)]
async fn retries_against_a_failing_store_keep_a_floor() {
    // The store 1 s past a whole minute: the fires (every 2 s) come at whole even seconds, 1 s
    // after the start, whatever the real time, so the windows that pass in 20 s are always nine.
    let (store, _) = store_past_a_minute(1);
    let a = scheduler(&store, "a");
    a.add(Job::new("sync", every(2 * SEC), |_| async {}))
        .unwrap();
    a.start().await.unwrap();
    store.inject(Operation::ClaimFire, Fault::Fail);
    let before = store.calls(Operation::ClaimFire);
    tokio::time::sleep(20 * SEC).await;
    let claims = store.calls(Operation::ClaimFire) - before;
    a.shutdown(SEC).await;
    // Ten windows of 2 s: 1 s, 0.5 s, ... halving down to the 50 ms floor, about 7 claims each
    // (without the floor, tokio's 1 ms timer granularity lets about 11 through).
    assert!(claims >= 10, "retried within the windows: {claims}");
    assert!(
        claims <= 10 * 8,
        "no tight loop near a window's end: {claims}"
    );
    let missed = a.status("sync").unwrap().missed;
    assert!(missed >= 9, "every window that passed is missed: {missed}");
}

/// Whether the lock was lost, and who held it, when a cancelled body had finished its last step.
type AtCancel = Arc<Mutex<Option<(bool, Option<String>)>>>;

/// A run cancelled by the drain sees the signal with its lock still held. It may finish its step,
/// here 200 ms, before the lock is released. Then it is recorded cancelled.
#[tokio::test(start_paused = true)]
async fn a_cancelled_run_sees_the_signal_while_it_still_holds_its_lock() {
    let store = store(chrono::Duration::zero());
    let a = scheduler(&store, "a");
    let seen = AtCancel::default();
    let (started, has_started) = tokio::sync::oneshot::channel();
    let started = Arc::new(Mutex::new(Some(started)));
    a.add(
        Job::new("export", every(60 * SEC), {
            let (seen, store) = (seen.clone(), store.clone());
            move |run| {
                let (seen, store, started) = (seen.clone(), store.clone(), started.clone());
                async move {
                    if let Some(tx) = started.lock().unwrap().take() {
                        let _ = tx.send(());
                    }
                    tokio::select! {
                        () = run.lock().cancelled() => {}
                        () = tokio::time::sleep(300 * SEC) => return,
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    let holder = store.inner().holder("export").await.unwrap();
                    *seen.lock().unwrap() =
                        Some((run.lock().is_lost(), holder.map(|r| r.owner().to_owned())));
                }
            }
        })
        .at_most(600 * SEC),
    )
    .unwrap();
    a.start().await.unwrap();
    has_started.await.unwrap();
    let begun = Instant::now();
    let drained = a.shutdown(2 * SEC).await;
    assert_eq!(begun.elapsed(), 2 * SEC + Duration::from_millis(200));
    assert_eq!(drained.cancelled, 1);
    assert_eq!(
        *seen.lock().unwrap(),
        Some((false, Some("a".to_owned()))),
        "saw the cancel and finished its step with the lock held"
    );
    assert_eq!(
        a.status("export").unwrap().last_run.unwrap().outcome,
        RunOutcome::Cancelled
    );
    assert!(store.inner().holder("export").await.unwrap().is_none());
}

#[tokio::test(start_paused = true)]
async fn next_fire_is_known_as_soon_as_start_returns() {
    // The store's clock a day ahead of this process's, at half past an hour: the expected fires
    // follow from the store's clock only.
    let hour = Utc::now().timestamp() / 3600 * 3600 + 86_400;
    let store: Store = Arc::new(FaultyProvider::new(InMemoryLockProvider::starting_at(
        DateTime::from_timestamp(hour + 1800, 0).unwrap(),
    )));
    let a = scheduler(&store, "a");
    a.add(Job::new("hourly", every(3600 * SEC), |_| async {}))
        .unwrap();
    let berlin = Schedule::cron_in("0 45 * * * *", "Europe/Berlin").unwrap();
    a.add(Job::new("berlin", berlin, |_| async {})).unwrap();
    let caught = Job::new("caught", every(3600 * SEC), |_| async {}).catch_up(true);
    a.add(caught).unwrap();
    assert_eq!(a.status("hourly").unwrap().next_fire, None, "not started");
    a.start().await.unwrap();
    let at = |secs| DateTime::from_timestamp(secs, 0);
    assert_eq!(a.status("hourly").unwrap().next_fire, at(hour + 3600));
    assert_eq!(a.status("berlin").unwrap().next_fire, at(hour + 2700));
    assert_eq!(
        a.status("caught").unwrap().next_fire,
        at(hour),
        "a job that catches up decides its catch-up fire first"
    );
    a.add(Job::new("late", every(60 * SEC), |_| async {}))
        .unwrap();
    assert_eq!(a.status("late").unwrap().next_fire, at(hour + 1860));
    a.shutdown(SEC).await;
}

#[tokio::test(start_paused = true)]
async fn a_run_is_told_when_the_answer_that_started_it_arrived() {
    // The first fire of a job every minute is 2 s of (virtual) time away; the claim is sent
    // then, and answered 300 ms later.
    let (store, _) = store_past_a_minute(58);
    store.inject(Operation::ClaimFire, Fault::Delay(SEC * 3 / 10));
    let before = tokio::time::Instant::now().into_std();
    let seen: Arc<Mutex<Option<(std::time::Instant, std::time::Instant)>>> = Arc::default();
    let a = scheduler(&store, "a");
    let log = seen.clone();
    a.add(Job::new("minutely", every(60 * SEC), move |run| {
        let log = log.clone();
        async move {
            let started = tokio::time::Instant::now().into_std();
            *log.lock().unwrap() = Some((run.answered_at(), started));
        }
    }))
    .unwrap();
    a.start().await.unwrap();
    let deadline = tokio::time::Instant::now() + 10 * SEC;
    while seen.lock().unwrap().is_none() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the fire due 2 s after the start did not run within 10 s"
        );
        tokio::time::sleep(SEC / 10).await;
    }
    let (answered, started) = seen.lock().unwrap().unwrap();
    // The store decides at `F` (2 s after the start) by its clock or later, and answers then;
    // the claim was sent 300 ms before its answer, so earlier than `F` by this process's clock
    // (its estimate of the store's clock takes the slow replies' midpoints).
    assert!(
        answered >= before + 2 * SEC,
        "the claim of the fire due 2 s after the start was answered {:?} after the start: that is \
         when it was sent, not when its answer came",
        answered.saturating_duration_since(before)
    );
    assert!(answered <= started, "answered after the body started");
    a.shutdown(SEC).await;
}

#[tokio::test(start_paused = true)]
async fn a_status_serialises_with_its_spec_and_last_run() {
    // 2027-01-15T08:00:00Z, on a minute; the store starts 10 s before it.
    let minute = 1_800_000_000;
    let store: Store = Arc::new(FaultyProvider::new(InMemoryLockProvider::starting_at(
        DateTime::from_timestamp(minute - 10, 0).unwrap(),
    )));
    let a = scheduler(&store, "a");
    let job = Job::new("sync", every(60 * SEC), |_| async { Err::<(), _>("boom") });
    a.add(job.at_most(30 * SEC)).unwrap();
    a.start().await.unwrap();
    tokio::time::sleep(40 * SEC).await;
    let status = a.status("sync").unwrap();
    let text = serde_json::to_string(&status).unwrap();
    assert_eq!(
        text,
        r#"{"name":"sync","spec":{"name":"sync","every":"1m","at_most":"30s","keep_alive":false,"catch_up":false,"on_held":"skip"},"next_fire":"2027-01-15T08:01:00Z","last_run":{"fire":"2027-01-15T08:00:00Z","started":"2027-01-15T08:00:00Z","ended":"2027-01-15T08:00:00Z","outcome":"failed","error":"boom"},"runs":1,"claimed_elsewhere":0,"held":0,"missed":0,"paused":0,"errors":1,"store_errors":0}"#
    );
    assert_eq!(serde_json::from_str::<JobStatus>(&text).unwrap(), status);
    a.shutdown(SEC).await;
}

// ---------------------------------------------------------------------------------------------
// The store at start, and a failing store while running

/// A store that is set up wrong while `broken` holds an error, and otherwise forwards to its inner
/// store. It counts its calls.
struct SetUpWrong {
    inner: Store,
    broken: Mutex<Option<fn() -> crate::Error>>,
    calls: std::sync::atomic::AtomicUsize,
}

impl SetUpWrong {
    fn new(inner: Store, error: fn() -> crate::Error) -> Arc<Self> {
        Arc::new(Self {
            inner,
            broken: Mutex::new(Some(error)),
            calls: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    fn answer(&self) -> crate::Result<()> {
        self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        match *self.broken.lock().unwrap() {
            Some(error) => Err(error()),
            None => Ok(()),
        }
    }

    fn calls(&self) -> usize {
        self.calls.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[async_trait]
impl LockProvider for SetUpWrong {
    async fn acquire(
        &self,
        name: &str,
        at_most: Duration,
        owner: &str,
    ) -> crate::Result<Option<LockRecord>> {
        self.answer()?;
        self.inner.acquire(name, at_most, owner).await
    }
    async fn extend(
        &self,
        record: &LockRecord,
        at_most: Duration,
    ) -> crate::Result<Option<LockRecord>> {
        self.answer()?;
        self.inner.extend(record, at_most).await
    }
    async fn release(&self, record: &LockRecord, at_least: Duration) -> crate::Result<bool> {
        self.answer()?;
        self.inner.release(record, at_least).await
    }
    async fn holder(&self, name: &str) -> crate::Result<Option<LockRecord>> {
        self.answer()?;
        self.inner.holder(name).await
    }
    async fn claim_fire(
        &self,
        name: &str,
        fire: &crate::fire::Fire,
        at_most: Duration,
        owner: &str,
    ) -> crate::Result<crate::fire::FireClaim> {
        self.answer()?;
        self.inner.claim_fire(name, fire, at_most, owner).await
    }
}

fn missing_table() -> crate::Error {
    crate::Error::missing_table(
        "shedlock",
        "create it with PgLockProvider::create_table_if_not_exists()",
        std::io::Error::other("relation \"shedlock\" does not exist"),
    )
}

fn wrong_columns() -> crate::Error {
    crate::Error::schema("shedlock does not have the expected columns", None)
}

/// A store set up wrong fails `start` with its own error, once. Its table is missing, or its
/// columns are wrong. No job starts, nothing more is logged, and the store is not asked again. Once
/// the store is fixed, `start` may be called again.
#[tokio::test(start_paused = true)]
async fn a_store_set_up_wrong_fails_start_with_one_error_and_no_job_starts() {
    for (error, message) in [
        (
            missing_table as fn() -> crate::Error,
            "the lock table shedlock does not exist; create it with \
             PgLockProvider::create_table_if_not_exists()",
        ),
        (
            wrong_columns,
            "the lock table does not match: shedlock does not have the expected columns",
        ),
    ] {
        let logs = crate::test_observe::Logs::default();
        let _logs = logs.install();
        let store = SetUpWrong::new(store(chrono::Duration::zero()), error);
        let a = scheduler_on(store.clone(), "a");
        let log = Log::default();
        a.add(recording("startup-sync", every(SEC), "a", &log))
            .unwrap();
        a.add(recording("startup-report", every(SEC), "a", &log))
            .unwrap();
        let err = a.start().await.expect_err("a store set up wrong");
        assert_eq!(err.to_string(), message);
        assert_eq!(store.calls(), 1, "one question at start");
        tokio::time::sleep(10 * SEC).await;
        assert_eq!(
            store.calls(),
            1,
            "no job started: the store was not asked again"
        );
        assert_eq!(logs.count(tracing::Level::WARN, ""), 0, "no log at all");
        assert_eq!(logs.count(tracing::Level::ERROR, ""), 0, "no log at all");
        assert!(runs(&log).is_empty());
        // Fixed: started again, the jobs run.
        *store.broken.lock().unwrap() = None;
        a.start().await.unwrap();
        tokio::time::sleep(Duration::from_millis(3_500)).await;
        a.shutdown(SEC).await;
        assert!(runs(&log).len() >= 6, "{:?}", runs(&log));
    }
}

/// Without fire claims and without jobs, `start` checks the store as `check` does.
#[tokio::test(start_paused = true)]
async fn start_checks_the_store_without_fire_claims_or_jobs() {
    let store = SetUpWrong::new(store(chrono::Duration::zero()), missing_table);
    let none = scheduler_on(store.clone(), "a");
    assert!(none.start().await.unwrap_err().is_missing_table());
    assert!(none.check().await.unwrap_err().is_missing_table());
    let plain = scheduler_on(Arc::new(NoFireClaims(store.inner.clone())), "a");
    plain
        .add(Job::new("startup-sync", every(SEC), |_| async {}))
        .unwrap();
    plain.start().await.unwrap();
    plain.shutdown(SEC).await;
}

/// An unreachable store at start. By default the jobs start, with one warning, and run once it
/// answers. With `require_store(true)`, `start` fails with the store's error and no job starts.
#[tokio::test(start_paused = true)]
async fn an_unreachable_store_at_start_is_retried_unless_required() {
    let logs = crate::test_observe::Logs::default();
    let _logs = logs.install();
    for required in [false, true] {
        let store = store(chrono::Duration::zero());
        store.inject(Operation::ClaimFire, Fault::Hang);
        let a = scheduler(&store, "a").require_store(required);
        let log = Log::default();
        a.add(recording("startup-sync", every(SEC), "a", &log))
            .unwrap();
        let started = a.start().await;
        let claims = store.calls(Operation::ClaimFire);
        tokio::time::sleep(3 * SEC).await;
        store.heal_all();
        tokio::time::sleep(3 * SEC).await;
        a.shutdown(SEC).await;
        if required {
            let err = started.expect_err("required");
            assert_eq!(
                err.to_string(),
                "lock store call `claim_fire` timed out after 1s"
            );
            assert_eq!(store.calls(Operation::ClaimFire), claims, "no job started");
            assert!(runs(&log).is_empty());
        } else {
            started.unwrap();
            assert!(
                store.calls(Operation::ClaimFire) > claims,
                "the job retried"
            );
            assert!(runs(&log).len() >= 2, "ran once the store answered");
            assert_eq!(
                logs.count(tracing::Level::WARN, "cannot be reached at start"),
                1
            );
        }
    }
}

/// While running, a failing store is logged once per job per outage at WARN, then at DEBUG. Its end
/// is logged at INFO with how many calls failed and for how long. This holds on plain locks too,
/// without the executor's own warning per failed acquire.
#[tokio::test(start_paused = true)]
async fn a_failing_store_is_logged_once_per_job_per_outage_with_the_count_on_recovery() {
    for claims in [true, false] {
        let logs = crate::test_observe::Logs::default();
        let _logs = logs.install();
        let store = store(chrono::Duration::zero());
        let a = if claims {
            scheduler(&store, "a")
        } else {
            scheduler_on(Arc::new(NoFireClaims(store.clone())), "a")
        };
        let log = Log::default();
        a.add(recording("startup-sync", every(SEC), "a", &log))
            .unwrap();
        a.add(recording("startup-report", every(SEC), "a", &log))
            .unwrap();
        a.start().await.unwrap();
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        let operation = if claims {
            Operation::ClaimFire
        } else {
            Operation::Acquire
        };
        store.inject(operation, Fault::Fail);
        tokio::time::sleep(10 * SEC).await;
        store.heal_all();
        tokio::time::sleep(2 * SEC).await;
        a.shutdown(SEC).await;
        let failed = logs.count(
            tracing::Level::WARN,
            "the lock store failed; this job retries",
        );
        assert_eq!(failed, 2, "one per job (claims: {claims})");
        assert_eq!(
            logs.count(tracing::Level::WARN, "could not acquire lock"),
            0
        );
        assert_eq!(logs.count(tracing::Level::WARN, "fire claim failed"), 0);
        assert!(logs.count(tracing::Level::DEBUG, "lock store still failing") >= 2 * 9);
        assert_eq!(
            logs.count(tracing::Level::INFO, "the lock store answers again"),
            2
        );
        let errors: Vec<u64> = ["startup-sync", "startup-report"]
            .map(|job| a.status(job).unwrap().store_errors)
            .into();
        for n in &errors {
            assert!(*n >= 10, "{errors:?}");
            let recovered = format!("failures={n} ");
            assert_eq!(
                logs.count(tracing::Level::INFO, &recovered),
                errors.iter().filter(|m| *m == n).count(),
                "each recovery counts its job's failures: {errors:?}"
            );
        }
        assert_eq!(logs.count(tracing::Level::INFO, "outage_ms="), 2);
    }
}

/// The held fire's event names the holder and until when it holds. A run cancelled because the
/// leader term ended says so.
#[tokio::test(start_paused = true)]
async fn held_and_cancelled_events_say_who_until_when_and_why() {
    let logs = crate::test_observe::Logs::default();
    let _logs = logs.install();
    let (store, _) = store_past_a_minute(1);
    let a = scheduler(&store, "a");
    let log = Log::default();
    a.add(recording("held-by", every(10 * SEC), "a", &log))
        .unwrap();
    a.start().await.unwrap();
    tokio::time::sleep(8 * SEC).await; // +9 s: someone else takes the job's lock for 5 s
    let plain = store
        .inner()
        .acquire("held-by", 5 * SEC, "someone-else")
        .await
        .unwrap()
        .expect("free");
    tokio::time::sleep(2 * SEC).await;
    a.shutdown(SEC).await;
    let held = format!(
        "message=fire met while the lock is held: counted, not queued holder=\"someone-else\" \
         until={} ",
        plain.lock_until()
    );
    assert_eq!(logs.count(tracing::Level::INFO, &held), 1);

    let latch = LeaderLatch::start(
        store.clone(),
        LeaderLatchConfig::builder("startup-leader")
            .owner_id("a")
            .build()
            .unwrap(),
    )
    .unwrap();
    latch.wait_for_leadership().await.expect("leads");
    let b = scheduler(&store, "a");
    let (started, has_started) = tokio::sync::oneshot::channel();
    let started = Mutex::new(Some(started));
    b.add(
        Job::new("lead-cancelled", every(60 * SEC), move |_| {
            if let Some(tx) = started.lock().unwrap().take() {
                let _ = tx.send(());
            }
            tokio::time::sleep(300 * SEC)
        })
        .at_most(600 * SEC)
        .leader_only(latch.clone()),
    )
    .unwrap();
    b.start().await.unwrap();
    has_started.await.unwrap();
    latch.resign().await;
    tokio::time::sleep(5 * SEC).await;
    assert_eq!(
        logs.count(
            tracing::Level::WARN,
            "message=run cancelled reason=\"the leader term ended\""
        ),
        1
    );
    b.shutdown(SEC).await;
    latch.close().await.unwrap();
}

/// A claim that reaches the store after its window. The missed fire's event gives the store's now
/// and the window's end.
#[tokio::test(start_paused = true)]
async fn a_fire_missed_by_the_store_says_when_its_window_ended() {
    let logs = crate::test_observe::Logs::default();
    let _logs = logs.install();
    let (store, minute) = store_past_a_minute(1);
    let executor = LockingTaskExecutor::builder(store.clone())
        .owner_id("a")
        .default_at_most(30 * SEC)
        .call_timeout(5 * SEC)
        .build()
        .unwrap();
    let a = Scheduler::new(executor);
    let log = Log::default();
    a.add(recording("missed-late", every(2 * SEC), "a", &log))
        .unwrap();
    a.start().await.unwrap();
    // The claim of the fire at +2 s reaches the store at +4.5 s.
    store.inject_times(
        Operation::ClaimFire,
        Fault::Delay(Duration::from_millis(2_500)),
        1,
    );
    tokio::time::sleep(5 * SEC).await;
    a.shutdown(SEC).await;
    let end = DateTime::from_timestamp(minute + 4, 0).unwrap();
    let missed = format!(
        "message=fire missed: its window passed before it was claimed store_now={}",
        end + chrono::Duration::milliseconds(500)
    );
    assert_eq!(logs.count(tracing::Level::INFO, &missed), 1);
    assert_eq!(
        logs.count(tracing::Level::INFO, &format!("window_end={end} ")),
        1
    );
}

/// A fire another replica claimed. The event names that replica and the recorded fire.
#[tokio::test(start_paused = true)]
async fn a_fire_claimed_elsewhere_names_the_replica() {
    let logs = crate::test_observe::Logs::default();
    let _logs = logs.install();
    let (store, minute) = store_past_a_minute(1);
    let (a, b) = (scheduler(&store, "a"), scheduler(&store, "b"));
    let log = Log::default();
    a.add(recording("elsewhere", every(10 * SEC), "a", &log))
        .unwrap();
    b.add(recording("elsewhere", every(10 * SEC), "b", &log))
        .unwrap();
    a.start().await.unwrap();
    b.start().await.unwrap();
    tokio::time::sleep(10 * SEC).await; // +11 s: the fire at +10 s ran once
    a.shutdown(SEC).await;
    b.shutdown(SEC).await;
    let ran = runs(&log);
    assert_eq!(ran.len(), 1, "{ran:?}");
    let (winner, seen) = &ran[0];
    assert_eq!(seen.fire, DateTime::from_timestamp(minute + 10, 0).unwrap());
    let event = format!(
        "message=fire claimed by another replica by=\"{winner}\" recorded={} ",
        seen.fire
    );
    assert_eq!(logs.count(tracing::Level::DEBUG, &event), 1, "{event}");
}

/// A job added while `start` is still asking the store is spawned once, by `start` or by `add`, not
/// by both. A second loop of one job would meet its own claims as "claimed elsewhere".
#[tokio::test(start_paused = true)]
async fn a_job_added_while_start_asks_the_store_runs_one_loop() {
    let store = store(chrono::Duration::zero());
    store.inject_times(Operation::ClaimFire, Fault::Delay(SEC), 1);
    let a = scheduler(&store, "a");
    let log = Log::default();
    a.add(recording("racing-first", every(SEC), "a", &log))
        .unwrap();
    let add_during_start = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        a.add(recording("racing-second", every(SEC), "a", &log))
            .unwrap();
    };
    let (started, ()) = tokio::join!(a.start(), add_during_start);
    started.unwrap();
    tokio::time::sleep(5 * SEC).await;
    a.shutdown(SEC).await;
    let first = a.status("racing-first").unwrap();
    let second = a.status("racing-second").unwrap();
    assert!(first.runs >= 4, "{first:?}");
    assert_eq!(second.runs, first.runs, "one loop each: {second:?}");
    assert_eq!(second.claimed_elsewhere, 0, "one loop: {second:?}");
}

/// A pause set before the replicas start: every replica counts each fire `paused`, none runs one,
/// none counts it missed. A run already going keeps its lock. After the resume the next fires run,
/// each once.
#[tokio::test(start_paused = true)]
async fn a_paused_job_is_counted_paused_everywhere_and_runs_again_after_resume() {
    use crate::admin::LockAdmin;
    use crate::pause::PauseFor;
    let store = Arc::new(InMemoryLockProvider::new());
    store
        .pause(
            "report",
            PauseFor::UntilResumed,
            Some("upstream down"),
            "ann",
        )
        .await
        .unwrap();
    let log = Log::default();
    let schedule = every(5 * SEC);
    let (a, b) = (
        scheduler_on(store.clone(), "a"),
        scheduler_on(store.clone(), "b"),
    );
    for (replica, scheduler) in [("a", &a), ("b", &b)] {
        scheduler
            .add(recording("report", schedule.clone(), replica, &log))
            .unwrap();
        scheduler.start().await.unwrap();
    }
    tokio::time::sleep(21 * SEC).await;
    assert!(runs(&log).is_empty(), "a paused job ran: {:?}", runs(&log));
    for scheduler in [&a, &b] {
        let status = scheduler.status("report").unwrap();
        assert!(status.paused >= 3, "{status:?}");
        assert_eq!((status.missed, status.runs), (0, 0), "{status:?}");
    }
    let resumed = store.resume("report", "bob").await.unwrap();
    assert_eq!(resumed.map(|p| p.by), Some("ann".to_owned()));
    let paused_before = a.status("report").unwrap().paused + b.status("report").unwrap().paused;
    tokio::time::sleep(20 * SEC).await;
    a.shutdown(SEC).await;
    b.shutdown(SEC).await;
    let ran = assert_once_each(&log, &schedule);
    assert!(ran >= 3, "{ran} runs after the resume");
    let paused_after = a.status("report").unwrap().paused + b.status("report").unwrap().paused;
    assert_eq!(
        paused_before, paused_after,
        "no fire after the resume was paused"
    );
}
