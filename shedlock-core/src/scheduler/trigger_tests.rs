//! "Run now" through schedulers on paused tokio time, over the in-memory store: a trigger runs once
//! across replicas, never touches the schedule's fires, and a leader-only job's runs on the leader.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::*;
use crate::admin::LockAdmin;
use crate::provider::LockProvider;
use crate::trigger::{TriggerAnswer, TriggerClaim};
use crate::{InMemoryLockProvider, LeaderLatchConfig};

const SEC: Duration = Duration::from_secs(1);

type Runs = Arc<Mutex<Vec<(String, Option<i64>, chrono::DateTime<chrono::Utc>)>>>;

fn replica(store: &Arc<InMemoryLockProvider>, owner: &str) -> Scheduler {
    let executor = LockingTaskExecutor::builder(store.clone())
        .owner_id(owner)
        .default_at_most(30 * SEC)
        .call_timeout(SEC)
        .build()
        .unwrap();
    Scheduler::new(executor)
}

/// A job every hour (no fire comes during a test) that logs each run: replica, trigger, fire.
fn hourly(replica: &str, runs: &Runs) -> Job {
    let (runs, replica) = (runs.clone(), replica.to_owned());
    Job::new("report", Schedule::every(3600 * SEC).unwrap(), move |run| {
        let (runs, replica) = (runs.clone(), replica.clone());
        async move {
            runs.lock()
                .unwrap()
                .push((replica, run.trigger(), run.fire().at()));
        }
    })
}

async fn requested(store: &InMemoryLockProvider) -> crate::trigger::Trigger {
    match store.trigger("report", "ann", 60 * SEC).await.unwrap() {
        TriggerAnswer::Requested(trigger) => trigger,
        other => panic!("trigger answered {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_trigger_runs_once_across_replicas_and_leaves_the_schedule_alone() {
    let store = Arc::new(InMemoryLockProvider::new());
    let runs = Runs::default();
    let replicas: Vec<Scheduler> = ["a", "b", "c"]
        .iter()
        .map(|owner| {
            let s = replica(&store, owner);
            s.add(hourly(owner, &runs)).unwrap();
            s
        })
        .collect();
    for s in &replicas {
        s.start().await.unwrap();
    }
    for round in 1..=3 {
        let trigger = requested(&store).await;
        // The in-memory store pushes: the run starts within the claim's round trip.
        tokio::time::sleep(SEC).await;
        let seen = runs.lock().unwrap().clone();
        assert_eq!(seen.len(), round, "each trigger ran once: {seen:?}");
        let (by, id, fire) = seen.last().unwrap().clone();
        assert_eq!((id, fire), (Some(trigger.id), trigger.requested_at));
        let entry = store.entry("report").await.unwrap().unwrap();
        let taken = entry.trigger().and_then(|t| t.taken_by.clone()).unwrap();
        assert!(taken.starts_with(&by), "{taken} ran it, the log says {by}");
        assert_eq!(entry.last_fire(), None, "a trigger never records a fire");
        let last = entry.state().and_then(|s| s.last_run.clone()).unwrap();
        assert_eq!(
            last.fire, trigger.requested_at,
            "the run is recorded as the trigger's"
        );
    }
    for s in &replicas {
        s.shutdown(SEC).await;
    }
}

#[tokio::test(start_paused = true)]
async fn without_a_push_a_trigger_is_found_by_the_next_poll() {
    /// The in-memory store without its push.
    struct NoPush(Arc<InMemoryLockProvider>);
    #[async_trait::async_trait]
    impl LockProvider for NoPush {
        async fn acquire(
            &self,
            name: &str,
            at_most: Duration,
            owner: &str,
        ) -> Result<Option<crate::LockRecord>> {
            self.0.acquire(name, at_most, owner).await
        }
        async fn extend(
            &self,
            record: &crate::LockRecord,
            at_most: Duration,
        ) -> Result<Option<crate::LockRecord>> {
            self.0.extend(record, at_most).await
        }
        async fn release(&self, record: &crate::LockRecord, at_least: Duration) -> Result<bool> {
            self.0.release(record, at_least).await
        }
        async fn claim_fire(
            &self,
            name: &str,
            fire: &Fire,
            at_most: Duration,
            owner: &str,
        ) -> Result<crate::provider::FireClaim> {
            self.0.claim_fire(name, fire, at_most, owner).await
        }
        async fn pending_triggers(&self) -> Result<Vec<crate::trigger::PendingTrigger>> {
            self.0.pending_triggers().await
        }
        async fn claim_trigger(
            &self,
            name: &str,
            id: i64,
            at_most: Duration,
            owner: &str,
        ) -> Result<TriggerClaim> {
            self.0.claim_trigger(name, id, at_most, owner).await
        }
    }
    let store = Arc::new(InMemoryLockProvider::new());
    let runs = Runs::default();
    let executor = LockingTaskExecutor::builder(NoPush(store.clone()))
        .owner_id("a")
        .default_at_most(30 * SEC)
        .build()
        .unwrap();
    let s = Scheduler::new(executor).trigger_poll(5 * SEC);
    s.add(hourly("a", &runs)).unwrap();
    s.start().await.unwrap();
    tokio::time::sleep(SEC).await;
    requested(&store).await;
    tokio::time::sleep(SEC).await;
    assert!(
        runs.lock().unwrap().is_empty(),
        "no push: not before the poll"
    );
    tokio::time::sleep(5 * SEC).await;
    assert_eq!(runs.lock().unwrap().len(), 1, "found by the next poll");
    s.shutdown(SEC).await;
}

#[tokio::test(start_paused = true)]
async fn a_leader_only_jobs_trigger_runs_on_the_leader() {
    let store = Arc::new(InMemoryLockProvider::new());
    let runs = Runs::default();
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
        let s = replica(&store, owner);
        s.add(hourly(owner, &runs).leader_only(latch.clone()))
            .unwrap();
        s.start().await.unwrap();
        replicas.push((s, latch));
    }
    tokio::time::sleep(5 * SEC).await;
    let leader = replicas
        .iter()
        .find(|(_, latch)| latch.is_leader())
        .map(|(_, latch)| latch.owner_id().to_owned())
        .expect("one leads");
    for _ in 0..4 {
        requested(&store).await;
        tokio::time::sleep(3 * SEC).await;
    }
    let seen = runs.lock().unwrap().clone();
    assert_eq!(seen.len(), 4, "{seen:?}");
    assert!(seen.iter().all(|(by, _, _)| *by == leader), "{seen:?}");
    for (s, latch) in &replicas {
        s.shutdown(SEC).await;
        let _ = latch.close().await;
    }
}

/// The scheduled fires after a trigger run as scheduled, each once, and the trigger once. (That the
/// trigger's claim records no fire is `TriggerSuite`'s check on the store.)
#[tokio::test(start_paused = true)]
async fn scheduled_fires_around_a_trigger_run_as_scheduled() {
    let minute = chrono::Utc::now().timestamp() / 60 * 60;
    let start = chrono::DateTime::from_timestamp(minute + 1, 0).unwrap();
    // The store's clock is one second past a whole minute: fires every 10 s at :10, :20, …
    let store = Arc::new(InMemoryLockProvider::starting_at(start));
    let runs = Runs::default();
    let s = replica(&store, "a");
    let log = runs.clone();
    s.add(Job::new(
        "report",
        Schedule::every(10 * SEC).unwrap(),
        move |run| {
            let log = log.clone();
            async move {
                log.lock()
                    .unwrap()
                    .push(("a".to_owned(), run.trigger(), run.fire().at()));
            }
        },
    ))
    .unwrap();
    s.start().await.unwrap();
    tokio::time::sleep(2 * SEC).await;
    let trigger = requested(&store).await;
    tokio::time::sleep(20 * SEC).await;
    s.shutdown(SEC).await;
    let seen = runs.lock().unwrap().clone();
    let manual: Vec<_> = seen.iter().filter(|(_, t, _)| t.is_some()).collect();
    assert_eq!(manual.len(), 1, "{seen:?}");
    assert_eq!(manual[0].2, trigger.requested_at);
    let scheduled: Vec<_> = seen
        .iter()
        .filter(|(_, t, _)| t.is_none())
        .map(|(_, _, fire)| *fire)
        .collect();
    let first = start + chrono::Duration::seconds(9);
    assert_eq!(
        scheduled,
        vec![first, first + chrono::Duration::seconds(10)],
        "the fires after the trigger (from {first}) ran as scheduled"
    );
}
