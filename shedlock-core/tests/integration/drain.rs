//! The executor's graceful drain (`LockingTaskExecutor::shutdown`), on paused time: runs in
//! flight finish within the grace, the rest are cancelled and released (honouring `at_least`),
//! background releases are awaited, new runs fail with `is_shutdown`, a hung store cannot hold
//! the shutdown past its call timeout.

use std::sync::Arc;
use std::time::Duration;

use shedlock_core::testkit::{Fault, FaultyProvider, Operation};
use shedlock_core::{
    InMemoryLockProvider, LockConfig, LockingTaskExecutor, current_lock, provider::LockProvider,
};
use tokio::sync::oneshot;
use tokio::time::Instant;

const SEC: Duration = Duration::from_secs(1);

type Store = Arc<FaultyProvider<InMemoryLockProvider>>;

fn store() -> Store {
    Arc::new(FaultyProvider::new(InMemoryLockProvider::new()))
}

fn executor(store: &Store) -> LockingTaskExecutor {
    LockingTaskExecutor::builder(store.clone())
        .owner_id("drainer")
        .call_timeout(2 * SEC)
        .build()
        .expect("valid executor")
}

async fn is_free(store: &Store, name: &str) -> bool {
    match store.inner().acquire(name, SEC, "probe").await {
        Ok(Some(record)) => {
            let _ = store.inner().release(&record, Duration::ZERO).await;
            true
        }
        Ok(None) => false,
        Err(e) => panic!("probe failed: {e}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_run_in_flight_completes_within_the_grace() {
    let store = store();
    let executor = executor(&store);
    let cfg = LockConfig::new("report", 60 * SEC).unwrap();
    let (started, has_started) = oneshot::channel();
    let run = tokio::spawn({
        let executor = executor.clone();
        async move {
            executor
                .execute(&cfg, async move {
                    let _ = started.send(());
                    tokio::time::sleep(5 * SEC).await;
                    let lock = current_lock().expect("locked");
                    (lock.is_cancelled(), lock.is_lost())
                })
                .await
        }
    });
    has_started.await.unwrap();
    let start = Instant::now();
    let drained = executor.shutdown(10 * SEC).await;
    assert_eq!(start.elapsed(), 5 * SEC, "returns when the run is done");
    assert_eq!((drained.finished, drained.cancelled), (1, 0));
    assert_eq!(
        run.await.unwrap().unwrap(),
        Some((false, false)),
        "ran to its end, under its lock"
    );
    assert!(is_free(&store, "report").await);
}

#[tokio::test(start_paused = true)]
async fn a_longer_run_sees_the_cancel_and_its_lock_is_released_honouring_at_least() {
    let store = store();
    let executor = executor(&store);
    let cfg = LockConfig::builder("import")
        .at_most(600 * SEC)
        .at_least(30 * SEC)
        .build()
        .unwrap();
    let (started, has_started) = oneshot::channel();
    let run = tokio::spawn({
        let executor = executor.clone();
        async move {
            executor
                .execute(&cfg, async move {
                    let lock = current_lock().expect("locked");
                    let _ = started.send(Instant::now());
                    tokio::select! {
                        () = lock.cancelled() => {
                            assert!(lock.is_cancelled());
                            // This task does not stop when told: after the stop window the
                            // drain releases the lock itself, and the task sees it lost.
                            lock.lost().await;
                            "cancelled"
                        }
                        () = tokio::time::sleep(300 * SEC) => "ran to the end",
                    }
                })
                .await
        }
    });
    let locked_at = has_started.await.unwrap();
    let start = Instant::now();
    let drained = executor.shutdown(3 * SEC).await;
    assert_eq!(
        start.elapsed(),
        3 * SEC + SEC,
        "the grace, the stop window (1 s), and the release"
    );
    assert_eq!((drained.finished, drained.cancelled), (0, 1));
    assert_eq!(drained.release_failures, 0);
    assert_eq!(run.await.unwrap().unwrap(), Some("cancelled"));
    // Released, but held until locked_at + at_least, not at_most.
    assert!(!is_free(&store, "import").await, "at_least still holds it");
    tokio::time::sleep_until(locked_at + 30 * SEC).await;
    assert!(
        is_free(&store, "import").await,
        "free at locked_at + at_least"
    );
}

/// A task that stops when told still holds its lock when it sees the cancel (the drain releases
/// only after the run has stopped), and the drain then ends without waiting out the stop window.
#[tokio::test(start_paused = true)]
async fn a_run_that_stops_when_told_still_holds_its_lock_at_the_cancel() {
    let store = store();
    let executor = executor(&store);
    let cfg = LockConfig::new("export", 600 * SEC).unwrap();
    let (started, has_started) = oneshot::channel();
    let run = tokio::spawn({
        let (executor, store) = (executor.clone(), store.clone());
        async move {
            executor
                .execute(&cfg, async move {
                    let lock = current_lock().expect("locked");
                    let _ = started.send(());
                    tokio::select! {
                        () = lock.cancelled() => {}
                        () = tokio::time::sleep(300 * SEC) => return None,
                    }
                    // A last step of 100 ms on being told to stop (finishing a batch): the
                    // lock is still this run's all along.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    let holder = store.inner().holder("export").await.unwrap();
                    Some((holder.map(|r| r.owner().to_owned()), lock.is_lost()))
                })
                .await
        }
    });
    has_started.await.unwrap();
    let start = Instant::now();
    let drained = executor.shutdown(3 * SEC).await;
    assert_eq!(
        start.elapsed(),
        3 * SEC + Duration::from_millis(100),
        "the grace and the run's last step, not the whole stop window"
    );
    assert_eq!((drained.cancelled, drained.release_failures), (1, 0));
    assert_eq!(
        run.await.unwrap().unwrap(),
        Some(Some((Some("drainer".to_owned()), false))),
        "still held by the run when it saw the cancel"
    );
    assert!(is_free(&store, "export").await, "released after it stopped");
}

#[tokio::test(start_paused = true)]
async fn a_hundred_locks_held_at_once_are_all_released() {
    let store = store();
    let executor = executor(&store);
    let mut guards = Vec::new();
    for i in 0..100 {
        let cfg = LockConfig::builder(format!("job-{i}"))
            .at_most(600 * SEC)
            .keep_alive(i % 2 == 0)
            .build()
            .unwrap();
        guards.push(executor.try_lock(&cfg).await.unwrap().expect("free"));
    }
    let start = Instant::now();
    let drained = executor.shutdown(SEC).await;
    assert!(
        start.elapsed() <= SEC + 2 * SEC,
        "grace plus one call timeout"
    );
    assert_eq!(drained.cancelled, 100);
    assert_eq!(drained.release_failures, 0);
    for guard in &guards {
        assert!(guard.is_cancelled() && guard.is_lost());
    }
    for i in 0..100 {
        assert!(is_free(&store, &format!("job-{i}")).await, "job-{i}");
    }
    // Releasing a guard the drain released asks the store no more.
    let releases = store.calls(Operation::Release);
    for guard in guards {
        assert!(guard.release().await.unwrap());
    }
    assert_eq!(store.calls(Operation::Release), releases);
}

#[tokio::test(start_paused = true)]
async fn new_calls_after_shutdown_fail_with_is_shutdown_on_every_clone() {
    let store = store();
    let executor = executor(&store);
    let clone = executor.clone();
    let cfg = LockConfig::new("late", 10 * SEC).unwrap();
    let drained = executor.shutdown(SEC).await;
    assert_eq!(drained, shedlock_core::Drained::default());
    assert!(clone.is_shutting_down());
    let err = clone.try_lock(&cfg).await.unwrap_err();
    assert!(err.is_shutdown(), "{err}");
    assert_eq!(err.to_string(), "lock: shutting down, no new runs start");
    let err = clone.execute(&cfg, async {}).await.unwrap_err();
    assert!(err.is_shutdown(), "{err}");
    assert_eq!(store.calls(Operation::Acquire), 0, "the store is not asked");
    // A second shutdown (on a clone) returns the same outcome at once.
    assert_eq!(clone.shutdown(SEC).await, drained);
}

#[tokio::test(start_paused = true)]
async fn a_hung_release_cannot_hold_the_shutdown_past_its_call_timeout() {
    let store = store();
    let executor = executor(&store);
    let cfg = LockConfig::new("stuck", 600 * SEC).unwrap();
    let guard = executor.try_lock(&cfg).await.unwrap().expect("free");
    store.inject(Operation::Release, Fault::Hang);
    let start = Instant::now();
    let drained = executor.shutdown(SEC).await;
    // The guard's holder never lets go: the stop window (1 s) passes, then the drain's own
    // release hangs until its call timeout.
    assert_eq!(
        start.elapsed(),
        SEC + SEC + 2 * SEC,
        "grace + stop window + call timeout"
    );
    assert_eq!((drained.cancelled, drained.release_failures), (1, 1));
    drop(guard);
}

#[tokio::test(start_paused = true)]
async fn background_releases_of_dropped_guards_are_awaited() {
    let store = store();
    let executor = executor(&store);
    let cfg = LockConfig::new("dropped", 600 * SEC).unwrap();
    let guard = executor.try_lock(&cfg).await.unwrap().expect("free");
    store.inject_times(Operation::Release, Fault::Delay(SEC), 1);
    drop(guard);
    let start = Instant::now();
    let drained = executor.shutdown(10 * SEC).await;
    assert_eq!(
        start.elapsed(),
        SEC,
        "waited for the slow background release"
    );
    assert_eq!((drained.finished, drained.cancelled), (1, 0));
    assert!(is_free(&store, "dropped").await);
}

#[tokio::test(start_paused = true)]
async fn an_acquire_in_flight_when_the_drain_begins_gives_its_lock_back() {
    let store = store();
    let executor = executor(&store);
    store.inject_times(Operation::Acquire, Fault::Delay(SEC), 1);
    let cfg = LockConfig::new("racing", 600 * SEC).unwrap();
    let attempt = tokio::spawn({
        let executor = executor.clone();
        async move { executor.try_lock(&cfg).await.map(|g| g.is_some()) }
    });
    tokio::task::yield_now().await; // the acquire is on its way (its delay is running)
    assert_eq!(store.calls(Operation::Acquire), 1);
    executor.shutdown(10 * SEC).await;
    let err = attempt.await.unwrap().unwrap_err();
    assert!(err.is_shutdown(), "{err}");
    assert!(is_free(&store, "racing").await, "given back at once");
}
