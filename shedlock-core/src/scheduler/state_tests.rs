//! What a scheduler's runs record in the store as job state. The tests run on paused tokio time
//! over the in-memory store, with `FaultyProvider` for a store whose recording fails.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::admin::LockAdmin;
use crate::jobs::{JobState, RunOutcome};
use crate::test_observe::Logs;
use crate::testkit::{Fault, FaultyProvider, Operation};
use crate::{InMemoryLockProvider, LockProvider, Shutdown};

const SEC: Duration = Duration::from_secs(1);

type Store = Arc<FaultyProvider<InMemoryLockProvider>>;

fn store() -> Store {
    Arc::new(FaultyProvider::new(InMemoryLockProvider::new()))
}

fn scheduler(store: &Store, owner: &str) -> Scheduler {
    let executor = LockingTaskExecutor::builder(store.clone())
        .owner_id(owner)
        .default_at_most(30 * SEC)
        .call_timeout(SEC)
        .build()
        .unwrap();
    Scheduler::new(executor)
}

async fn state(store: &Store, name: &str) -> JobState {
    let entry = store.inner().entry(name).await.unwrap().expect("a row");
    entry
        .state()
        .cloned()
        .expect("the in-memory store records job state")
}

#[tokio::test(start_paused = true)]
async fn every_run_of_the_cluster_is_recorded_in_the_store() {
    let store = store();
    let (a, b) = (
        scheduler(&store, "replica-a"),
        scheduler(&store, "replica-b"),
    );
    for s in [&a, &b] {
        s.add(Job::new(
            "flaky",
            Schedule::every(2 * SEC).unwrap(),
            |_| async { Err::<(), _>("the upstream said \"no\"") },
        ))
        .unwrap();
        s.start().await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(10_500)).await;
    Shutdown::new(SEC).scheduler(&a).scheduler(&b).run().await;
    let runs = a.status("flaky").unwrap().runs + b.status("flaky").unwrap().runs;
    let state = state(&store, "flaky").await;
    assert!(runs >= 5, "{runs}");
    assert_eq!(u64::from(state.consecutive_failures), runs, "{state:?}");
    assert_eq!(state.last_success, None);
    let last = state.last_run.expect("a last run");
    assert_eq!(
        last.outcome,
        RunOutcome::Failed("the upstream said \"no\"".into())
    );
    assert!(["replica-a", "replica-b"].contains(&last.runner.as_str()));
    let local = [&a, &b]
        .iter()
        .filter_map(|s| s.status("flaky").unwrap().last_run)
        .max_by_key(|r| r.fire)
        .unwrap();
    assert_eq!(last.fire, local.fire, "the last fire run anywhere");
}

#[tokio::test(start_paused = true)]
async fn a_run_cancelled_by_shutdown_is_recorded_cancelled_and_counts_nothing() {
    let store = store();
    let a = scheduler(&store, "replica-a");
    a.add(Job::new("slow", Schedule::every(SEC).unwrap(), |_| async {
        // Never looks at its stop signal: dropped after the stop window.
        tokio::time::sleep(Duration::from_hours(1)).await;
    }))
    .unwrap();
    a.start().await.unwrap();
    while a.status("slow").unwrap().runs == 0 {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Shutdown::new(SEC).scheduler(&a).run().await;
    let state = state(&store, "slow").await;
    assert_eq!(
        state.last_run.map(|r| r.outcome),
        Some(RunOutcome::Cancelled)
    );
    assert_eq!(state.consecutive_failures, 0);
    // And the lock was released: another owner takes it.
    assert!(
        store
            .acquire("slow", SEC, "someone")
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test(start_paused = true)]
async fn a_record_that_fails_never_fails_the_release_and_is_logged_once() {
    let logs = Logs::default();
    let _guard = logs.install();
    let store = store();
    let a = scheduler(&store, "replica-a");
    a.add(Job::new(
        "report",
        Schedule::every(SEC).unwrap(),
        |_| async {},
    ))
    .unwrap();
    a.start().await.unwrap();
    // The next two recordings fail; the plain releases behind them do not.
    store.inject_times(Operation::Record, Fault::Fail, 2);
    tokio::time::sleep(Duration::from_millis(5_500)).await;
    Shutdown::new(SEC).scheduler(&a).run().await;
    let status = a.status("report").unwrap();
    assert!(status.runs >= 5, "{status:?}");
    assert!(store.calls(Operation::Record) >= 5);
    // Every fire ran: the failed records did not keep a lock to its at_most (30 s).
    assert_eq!(status.held, 0, "{status:?}");
    assert_eq!(
        logs.count(tracing::Level::ERROR, "could not record how the run ended"),
        1
    );
    assert_eq!(
        logs.count(tracing::Level::INFO, "runs are recorded again"),
        1
    );
    let state = state(&store, "report").await;
    assert_eq!(
        state.last_run.map(|r| r.outcome),
        Some(RunOutcome::Succeeded)
    );
}

#[tokio::test(start_paused = true)]
async fn a_started_scheduler_publishes_its_definitions_and_keeps_them_alive() {
    let store = store();
    let a = scheduler(&store, "replica-a");
    let spec = JobSpec::new(
        "nightly",
        Schedule::cron_in("0 0 3 * * *", "Europe/Berlin").unwrap(),
    );
    a.add(Job::from_spec(spec.clone(), |_| async {})).unwrap();
    a.start().await.unwrap();
    let deadline = tokio::time::Instant::now() + 5 * SEC;
    let listed = loop {
        let listed = store.inner().definitions().await.unwrap();
        if !listed.is_empty() || tokio::time::Instant::now() > deadline {
            break listed;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(listed.len(), 1, "{listed:?}");
    let entry = &listed[0];
    assert_eq!(
        (
            entry.definition.job.as_str(),
            entry.replica.as_str(),
            entry.version.as_str()
        ),
        ("nightly", "replica-a", crate::jobs::VERSION)
    );
    let published: JobSpec = serde_json::from_str(&entry.definition.spec).unwrap();
    assert_eq!(published, spec);
    // Kept alive well past one time to live by the heartbeat.
    tokio::time::sleep(DEFINITIONS_TTL * 3).await;
    assert_eq!(store.inner().definitions().await.unwrap().len(), 1);
    // After shutdown nobody publishes: the entry expires.
    Shutdown::new(SEC).scheduler(&a).run().await;
    tokio::time::sleep(DEFINITIONS_TTL + SEC).await;
    assert!(store.inner().definitions().await.unwrap().is_empty());
}

/// Each replica's own view of its runs, as metrics.
#[cfg(feature = "metrics")]
#[tokio::test(start_paused = true)]
async fn runs_are_counted_timed_and_their_failures_gauged() {
    use crate::metrics as m;
    let counters = crate::test_observe::Counters::default();
    let _recorder = metrics::set_default_local_recorder(&counters);
    let store = store();
    let a = scheduler(&store, "replica-a");
    let calls = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let seen = calls.clone();
    a.add(Job::new(
        "flaky",
        Schedule::every(SEC).unwrap(),
        move |_| {
            // Fails three times, then succeeds, then fails again.
            let n = seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async move { if n == 3 { Ok(()) } else { Err("no") } }
        },
    ))
    .unwrap();
    a.start().await.unwrap();
    while calls.load(std::sync::atomic::Ordering::SeqCst) < 3 {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        counters.gauge(m::JOB_CONSECUTIVE_FAILURES, "job", "flaky"),
        Some(3.0)
    );
    assert_eq!(counters.gauge(m::JOB_LAST_SUCCESS, "job", "flaky"), None);
    while calls.load(std::sync::atomic::Ordering::SeqCst) < 5 {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    Shutdown::new(SEC).scheduler(&a).run().await;
    let runs = u64::from(calls.load(std::sync::atomic::Ordering::SeqCst));
    assert_eq!(
        counters.count(m::JOB_RUNS, &[("job", "flaky"), ("outcome", "succeeded")]),
        1
    );
    assert_eq!(
        counters.count(m::JOB_RUNS, &[("job", "flaky"), ("outcome", "failed")]),
        runs - 1
    );
    #[allow(clippy::cast_precision_loss)]
    let after_success = (runs - 4) as f64;
    assert_eq!(
        counters.gauge(m::JOB_CONSECUTIVE_FAILURES, "job", "flaky"),
        Some(after_success)
    );
    let success = counters
        .gauge(m::JOB_LAST_SUCCESS, "job", "flaky")
        .expect("set");
    let last_run = a.status("flaky").unwrap().last_run.unwrap();
    #[allow(clippy::cast_precision_loss)]
    let ended = last_run.ended.timestamp() as f64;
    assert!(success > 0.0 && success <= ended + 1.0);
}

/// A pause is counted per fire and gauged per job; a resume sets the gauge back at the next fire.
#[cfg(feature = "metrics")]
#[tokio::test(start_paused = true)]
async fn paused_fires_are_counted_and_gauged() {
    use crate::admin::LockAdmin as _;
    use crate::metrics as m;
    let counters = crate::test_observe::Counters::default();
    let _recorder = metrics::set_default_local_recorder(&counters);
    let store = store();
    store
        .inner()
        .pause("tick", crate::pause::PauseFor::UntilResumed, None, "ann")
        .await
        .unwrap();
    let a = scheduler(&store, "replica-a");
    a.add(Job::new("tick", Schedule::every(SEC).unwrap(), |_| async {}))
        .unwrap();
    a.start().await.unwrap();
    tokio::time::sleep(3 * SEC + Duration::from_millis(100)).await;
    assert_eq!(counters.gauge(m::JOB_PAUSED, "job", "tick"), Some(1.0));
    let paused = counters.count(m::FIRES, &[("job", "tick"), ("outcome", "paused")]);
    assert!(paused >= 3, "{paused}");
    assert_eq!(a.status("tick").unwrap().paused, paused);
    store.inner().resume("tick", "ann").await.unwrap();
    tokio::time::sleep(2 * SEC).await;
    assert_eq!(counters.gauge(m::JOB_PAUSED, "job", "tick"), Some(0.0));
    assert!(counters.count(m::FIRES, &[("job", "tick"), ("outcome", "run")]) >= 1);
    Shutdown::new(SEC).scheduler(&a).run().await;
}

/// The leader gauge follows the latch.
#[cfg(feature = "metrics")]
#[tokio::test(start_paused = true)]
async fn the_leader_gauge_follows_the_latch() {
    let counters = crate::test_observe::Counters::default();
    let _recorder = metrics::set_default_local_recorder(&counters);
    let store = store();
    let config = crate::LeaderLatchConfig::builder("primary")
        .owner_id("replica-a")
        .build()
        .unwrap();
    let latch = crate::LeaderLatch::start(store.clone(), config).unwrap();
    latch.wait_for_leadership().await.expect("leads");
    assert_eq!(
        counters.gauge(crate::metrics::LEADER, "election", "primary"),
        Some(1.0)
    );
    latch.close().await.unwrap();
    assert_eq!(
        counters.gauge(crate::metrics::LEADER, "election", "primary"),
        Some(0.0)
    );
}

/// A store without the definitions table is asked again every ten minutes, not at every heartbeat,
/// and said so once.
#[tokio::test(start_paused = true)]
async fn a_store_without_the_definitions_table_is_asked_rarely() {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use crate::jobs::Definition;
    use crate::provider::{Fire, FireClaim, LockRecord};

    struct NoDefinitions {
        inner: InMemoryLockProvider,
        publishes: AtomicUsize,
    }
    #[async_trait::async_trait]
    impl LockProvider for NoDefinitions {
        async fn acquire(
            &self,
            name: &str,
            at_most: Duration,
            owner: &str,
        ) -> crate::Result<Option<LockRecord>> {
            self.inner.acquire(name, at_most, owner).await
        }
        async fn extend(
            &self,
            record: &LockRecord,
            at_most: Duration,
        ) -> crate::Result<Option<LockRecord>> {
            self.inner.extend(record, at_most).await
        }
        async fn release(&self, record: &LockRecord, at_least: Duration) -> crate::Result<bool> {
            self.inner.release(record, at_least).await
        }
        async fn claim_fire(
            &self,
            name: &str,
            fire: &Fire,
            at_most: Duration,
            owner: &str,
        ) -> crate::Result<FireClaim> {
            self.inner.claim_fire(name, fire, at_most, owner).await
        }
        async fn publish_definitions(
            &self,
            _: &str,
            _: &str,
            _: &[Definition],
            _: Duration,
        ) -> crate::Result<()> {
            self.publishes.fetch_add(1, Ordering::SeqCst);
            Err(crate::Error::missing_table(
                "shedlock_jobs",
                "create it with migration 0004",
                "relation \"shedlock_jobs\" does not exist",
            ))
        }
    }

    let logs = Logs::default();
    let _guard = logs.install();
    let store = Arc::new(NoDefinitions {
        inner: InMemoryLockProvider::new(),
        publishes: AtomicUsize::new(0),
    });
    let executor = LockingTaskExecutor::builder(store.clone())
        .owner_id("replica-a")
        .default_at_most(30 * SEC)
        .build()
        .unwrap();
    let a = Scheduler::new(executor);
    a.add(Job::new(
        "report",
        Schedule::every(SEC).unwrap(),
        |_| async {},
    ))
    .unwrap();
    a.start().await.unwrap();
    // Twenty-five minutes: at start, after ten and after twenty.
    tokio::time::sleep(Duration::from_mins(25)).await;
    assert_eq!(store.publishes.load(Ordering::SeqCst), 3);
    assert_eq!(
        logs.count(tracing::Level::INFO, "not set up for job definitions"),
        1
    );
    assert_eq!(logs.count(tracing::Level::WARN, "could not publish"), 0);
    // The jobs ran all along.
    assert!(a.status("report").unwrap().runs > 1_000);
    Shutdown::new(SEC).scheduler(&a).run().await;
}

/// A store that does not record runs gets the plain release, and one line saying so.
#[tokio::test(start_paused = true)]
async fn a_store_that_does_not_record_runs_is_said_once_and_released_plainly() {
    use crate::provider::{Fire, FireClaim, LockRecord};

    struct Plain(InMemoryLockProvider);
    #[async_trait::async_trait]
    impl LockProvider for Plain {
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
        async fn claim_fire(
            &self,
            name: &str,
            fire: &Fire,
            at_most: Duration,
            owner: &str,
        ) -> crate::Result<FireClaim> {
            self.0.claim_fire(name, fire, at_most, owner).await
        }
    }

    let logs = Logs::default();
    let _guard = logs.install();
    let store = Arc::new(Plain(InMemoryLockProvider::new()));
    let executor = LockingTaskExecutor::builder(store.clone())
        .owner_id("replica-a")
        .default_at_most(30 * SEC)
        .build()
        .unwrap();
    let a = Scheduler::new(executor);
    a.add(Job::new(
        "report",
        Schedule::every(SEC).unwrap(),
        |_| async {},
    ))
    .unwrap();
    a.start().await.unwrap();
    tokio::time::sleep(Duration::from_millis(5_500)).await;
    Shutdown::new(SEC).scheduler(&a).run().await;
    let status = a.status("report").unwrap();
    assert!(status.runs >= 5 && status.held == 0, "{status:?}");
    assert_eq!(
        logs.count(tracing::Level::INFO, "does not record how runs end"),
        1
    );
    let entry = store.0.entry("report").await.unwrap().expect("a row");
    assert_eq!(entry.state().and_then(|s| s.last_run.clone()), None);
}
