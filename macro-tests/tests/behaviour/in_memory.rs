//! `#[scheduled_lock]` behaviour over `InMemoryLockProvider`: three replicas, the lock's
//! lifecycle, what the body sees, and every supported function shape.

use std::fmt::Display;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::common::{self, Gate, Replica, replicas};
use shedlock_core::{
    InMemoryLockProvider, LockingTaskExecutor,
    current::{assert_locked, is_locked},
    current_lock, scheduled_lock,
};

fn executor(store: &Arc<InMemoryLockProvider>, owner: &str) -> LockingTaskExecutor {
    LockingTaskExecutor::builder(Arc::clone(store))
        .owner_id(owner)
        .build()
        .expect("valid executor")
}

fn in_memory_replicas() -> [Replica; 3] {
    let store = Arc::new(InMemoryLockProvider::new());
    replicas([Arc::clone(&store), Arc::clone(&store), store])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_one_replica_runs_per_round() {
    common::exactly_one_runs_per_round(&in_memory_replicas(), "mem", 5).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_come_back_inside_and_release_the_lock() {
    common::errors_propagate_and_release(&in_memory_replicas(), "mem").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panics_release_the_lock() {
    common::panics_release(&in_memory_replicas(), "mem").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn templated_names_lock_independently() {
    common::templated_names_lock_independently(&in_memory_replicas(), "mem").await;
}

/// Dropping the future mid-run (a cancelled or aborted task) releases the lock in the
/// background, so the next tick can run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_run_releases_the_lock() {
    let replicas = in_memory_replicas();
    let gate = Gate::closed();
    let running = {
        let (replica, gate) = (replicas[0].clone(), Arc::clone(&gate));
        tokio::spawn(async move { replica.tick("cancel", &gate).await })
    };
    gate.entered().await;
    let open = Gate::open();
    assert_eq!(
        replicas[1].tick("cancel", &open).await.expect("store ok"),
        None
    );
    running.abort();
    assert!(running.await.expect_err("aborted").is_cancelled());
    // The release runs in the background: poll, with a deadline, until replica 1 gets the lock.
    let deadline = tokio::time::Instant::now() + common::DEADLINE;
    loop {
        if let Some(owner) = replicas[1].tick("cancel", &open).await.expect("store ok") {
            assert_eq!(owner, "replica-1");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the lock was never released"
        );
        tokio::task::yield_now().await;
    }
}

/// Replicas whose schedules fire a little apart: `at_least` keeps the lock after a fast run, so
/// only the first replica runs that tick.
#[scheduled_lock(name = "nightly", at_most = "10m", at_least = "1m", executor = locks)]
async fn nightly(locks: &LockingTaskExecutor, runs: &AtomicUsize) -> usize {
    runs.fetch_add(1, Ordering::SeqCst) + 1
}

#[tokio::test(start_paused = true)]
async fn at_least_holds_the_lock_after_a_fast_run() {
    let store = Arc::new(InMemoryLockProvider::new());
    let replicas = [0, 1, 2].map(|i| executor(&store, &format!("replica-{i}")));
    let runs = AtomicUsize::new(0);
    assert_eq!(
        nightly(&replicas[0], &runs).await.expect("store ok"),
        Some(1)
    );
    tokio::time::advance(Duration::from_secs(10)).await;
    assert_eq!(nightly(&replicas[1], &runs).await.expect("store ok"), None);
    tokio::time::advance(Duration::from_secs(40)).await;
    assert_eq!(nightly(&replicas[2], &runs).await.expect("store ok"), None);
    // 60 s after the first run, the next tick runs (on whichever replica fires first).
    tokio::time::advance(Duration::from_secs(10)).await;
    assert_eq!(
        nightly(&replicas[1], &runs).await.expect("store ok"),
        Some(2)
    );
}

/// What the body sees: its lock, by name and token; extension; the assertion.
#[scheduled_lock(name = "inspect-{id}", at_most = "1m", executor = locks)]
async fn inspect(locks: &LockingTaskExecutor, id: u32) -> shedlock_core::Result<(String, i64)> {
    assert_locked();
    assert!(is_locked());
    let lock = current_lock().expect("inside the lock");
    assert!(!lock.is_lost());
    assert!(lock.extend(Duration::from_mins(2)).await?, "still ours");
    let token = lock
        .fencing_token()
        .expect("the in-memory store has tokens");
    Ok((lock.name().to_owned(), token))
}

#[tokio::test]
async fn the_body_sees_its_lock_and_can_extend_it() {
    let store = Arc::new(InMemoryLockProvider::new());
    let locks = executor(&store, "a");
    let (name, first) = inspect(&locks, 7)
        .await
        .expect("store ok")
        .expect("free")
        .expect("ok");
    assert_eq!(name, "inspect-7");
    let (_, second) = inspect(&locks, 7)
        .await
        .expect("store ok")
        .expect("free")
        .expect("ok");
    assert!(
        second > first,
        "fencing tokens increase: {first} then {second}"
    );
    assert!(
        current_lock().is_none(),
        "the lock is the body's, not the caller's"
    );
}

#[scheduled_lock(name = "long-job", at_most = "10s", keep_alive, executor = locks)]
async fn long_job_kept_alive(locks: &LockingTaskExecutor, runs_for: Duration) -> bool {
    tokio::time::sleep(runs_for).await;
    current_lock().is_some_and(|lock| lock.is_lost())
}

#[scheduled_lock(name = "long-job", at_most = "10s", executor = locks)]
async fn long_job_not_kept_alive(locks: &LockingTaskExecutor, runs_for: Duration) -> bool {
    tokio::time::sleep(runs_for).await;
    current_lock().is_some_and(|lock| lock.is_lost())
}

/// With `keep_alive`, a run longer than `at_most` keeps its lock; without, it loses it (and is
/// told so) and another replica can take over.
#[tokio::test(start_paused = true)]
async fn keep_alive_extends_the_lock_while_the_body_runs() {
    let store = Arc::new(InMemoryLockProvider::new());
    let (a, b) = (executor(&store, "a"), executor(&store, "b"));
    let run = {
        let a = a.clone();
        tokio::spawn(async move { long_job_kept_alive(&a, Duration::from_secs(35)).await })
    };
    tokio::time::sleep(Duration::from_secs(25)).await;
    assert_eq!(
        long_job_not_kept_alive(&b, Duration::ZERO)
            .await
            .expect("store ok"),
        None,
        "25 s in, past at_most, the lock is still held thanks to keep_alive"
    );
    let lost = run
        .await
        .expect("no panic")
        .expect("store ok")
        .expect("ran");
    assert!(!lost, "keep_alive never lost the lock");

    let run = {
        let a = a.clone();
        tokio::spawn(async move { long_job_not_kept_alive(&a, Duration::from_secs(35)).await })
    };
    tokio::time::sleep(Duration::from_secs(25)).await;
    let taken_over = long_job_not_kept_alive(&b, Duration::ZERO)
        .await
        .expect("store ok");
    assert_eq!(
        taken_over,
        Some(false),
        "a's lock ended at at_most, so b ran (and kept its own)"
    );
    let lost = run
        .await
        .expect("no panic")
        .expect("store ok")
        .expect("ran");
    assert!(
        lost,
        "without keep_alive, the body is told its lock was lost"
    );
}

#[scheduled_lock(name = "no-at-most", executor = locks)]
async fn no_at_most(locks: &LockingTaskExecutor) -> u8 {
    1
}

#[tokio::test]
async fn at_most_comes_from_the_executor_default_or_fails_clearly() {
    let store = Arc::new(InMemoryLockProvider::new());
    let error = no_at_most(&executor(&store, "a"))
        .await
        .expect_err("no at_most at all");
    assert!(error.is_invalid_config(), "{error}");
    assert!(error.to_string().contains("no-at-most"), "{error}");
    assert!(error.to_string().contains("default_at_most"), "{error}");

    let with_default = LockingTaskExecutor::builder(Arc::clone(&store))
        .default_at_most(Duration::from_mins(1))
        .build()
        .expect("valid");
    assert_eq!(no_at_most(&with_default).await.expect("store ok"), Some(1));
}

#[scheduled_lock(name = "tenant-{tenant}", at_most = "1m", executor = locks)]
async fn per_tenant(locks: &LockingTaskExecutor, tenant: &str) {}

#[tokio::test]
async fn a_templated_name_is_validated_at_run_time() {
    let locks = executor(&Arc::new(InMemoryLockProvider::new()), "a");
    let error = per_tenant(&locks, &"x".repeat(60))
        .await
        .expect_err("67 characters");
    assert!(error.is_invalid_config(), "{error}");
    assert!(error.to_string().contains("67 characters"), "{error}");
    let error = per_tenant(&locks, "eu ").await.expect_err("trailing space");
    assert!(error.to_string().contains("white space"), "{error}");
    assert_eq!(per_tenant(&locks, "eu").await.expect("valid"), Some(()));
}

#[scheduled_lock(name = "a-year", at_most = "365d", at_least = "365d", executor = locks)]
async fn a_year(locks: &LockingTaskExecutor) {}

/// The macro checks durations and names at compile time against its own copies of the core's
/// limits (it cannot depend on the core); this keeps them in step.
#[tokio::test]
async fn compile_time_limits_match_the_core() {
    assert_eq!(
        shedlock_core::provider::MAX_DURATION,
        Duration::from_hours(365 * 24)
    );
    assert_eq!(shedlock_core::provider::DEFAULT_MAX_NAME_LEN, 64);
    let locks = executor(&Arc::new(InMemoryLockProvider::new()), "a");
    assert_eq!(
        a_year(&locks)
            .await
            .expect("the longest durations are valid"),
        Some(())
    );
}

#[scheduled_lock(name = "nested", at_most = "1m", executor = locks)]
async fn nested(locks: &LockingTaskExecutor, depth: u8) -> u8 {
    if depth == 0 {
        return 0;
    }
    // The same lock again, inside itself: runs directly (re-entrancy) instead of skipping.
    Box::pin(nested(locks, depth - 1))
        .await
        .ok()
        .flatten()
        .map_or(u8::MAX, |inner| inner + 1)
}

#[tokio::test]
async fn a_nested_call_of_the_same_lock_runs() {
    let locks = executor(&Arc::new(InMemoryLockProvider::new()), "a");
    assert_eq!(nested(&locks, 3).await.expect("store ok"), Some(3));
}

// ---- Function shapes: methods, generics, `impl Trait`, attributes, executor expressions ----

/// A service holding its executor, as applications do.
struct Service {
    locks: LockingTaskExecutor,
    shared: Arc<LockingTaskExecutor>,
    count: u32,
}

impl Service {
    /// Doc comments and attributes stay on the function.
    #[scheduled_lock(name = "svc-count", at_most = "1m", executor = self.shared)]
    #[allow(clippy::needless_pass_by_ref_mut)]
    async fn bump(&mut self, by: u32) -> u32 {
        self.count += by;
        self.count
    }

    #[scheduled_lock(name = "svc-{label}", at_most = "1m", executor = self.locks)]
    async fn describe<T>(&self, label: T) -> String
    where
        T: Display + Send,
    {
        format!("{label}: {}", self.count)
    }

    #[scheduled_lock(name = "svc-arc", at_most = "1m", executor = self.locks.clone())]
    async fn owned(self: Arc<Self>) -> u32 {
        self.count
    }
}

#[scheduled_lock(name = "sum", at_most = "1m", at_least = "0s", executor = locks)]
async fn sum(locks: LockingTaskExecutor, items: impl IntoIterator<Item = u32> + Send) -> u32 {
    // `locks` was borrowed for the executor, then moved into the body.
    drop(locks);
    items.into_iter().sum()
}

#[scheduled_lock(name = "first-word", at_most = "1m", executor = *locks)]
async fn first_word<'a>(locks: &&LockingTaskExecutor, text: &'a str) -> &'a str {
    text.split(' ').next().unwrap_or_default()
}

#[scheduled_lock(name = "shown", at_most = "1m", executor = Box::new(locks.clone()))]
async fn shown(locks: &LockingTaskExecutor) -> impl Display + use<> {
    42
}

#[tokio::test]
async fn methods_generics_and_impl_trait_work() {
    let store = Arc::new(InMemoryLockProvider::new());
    let locks = executor(&store, "a");
    let mut service = Service {
        locks: locks.clone(),
        shared: Arc::new(locks.clone()),
        count: 0,
    };
    assert_eq!(service.bump(2).await.expect("ok"), Some(2));
    assert_eq!(service.bump(3).await.expect("ok"), Some(5));
    assert_eq!(
        service.describe("n").await.expect("ok").as_deref(),
        Some("n: 5")
    );
    assert_eq!(Arc::new(service).owned().await.expect("ok"), Some(5));
    assert_eq!(sum(locks.clone(), [1, 2, 3]).await.expect("ok"), Some(6));
    assert_eq!(
        first_word(&&locks, "hello world").await.expect("ok"),
        Some("hello")
    );
    let shown = shown(&locks).await.expect("ok").expect("ran");
    assert_eq!(shown.to_string(), "42");
}

fn assert_send<T: Send>(value: T) -> T {
    value
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_future_is_send_and_spawns_on_a_multi_thread_runtime() {
    let locks = executor(&Arc::new(InMemoryLockProvider::new()), "a");
    let future = assert_send(sum(locks.clone(), vec![4, 5]));
    assert_eq!(
        tokio::spawn(future).await.expect("no panic").expect("ok"),
        Some(9)
    );
    let gate = Gate::open();
    let replica = Replica {
        locks,
        runs: Arc::default(),
    };
    let owner = tokio::spawn(async move { assert_send(replica.tick("send", &gate)).await })
        .await
        .expect("no panic")
        .expect("ok");
    assert_eq!(owner.as_deref(), Some("a"));
}

/// Without `at_least`, a macro run holds the executor's `default_at_least`; with one, its own.
#[tokio::test(start_paused = true)]
async fn an_unset_at_least_is_the_executors_default() {
    #[scheduled_lock(name = "defaulted", at_most = "1m", executor = executor)]
    async fn defaulted(executor: &LockingTaskExecutor) {}

    #[scheduled_lock(name = "own", at_most = "1m", at_least = "0s", executor = executor)]
    async fn own(executor: &LockingTaskExecutor) {}

    let store = Arc::new(InMemoryLockProvider::new());
    let [a, b] = ["a", "b"].map(|owner| {
        LockingTaskExecutor::builder(Arc::clone(&store))
            .owner_id(owner)
            .default_at_least(Duration::from_secs(20))
            .build()
            .expect("valid executor")
    });
    assert_eq!(defaulted(&a).await.expect("no store error"), Some(()));
    assert_eq!(own(&a).await.expect("no store error"), Some(()));
    tokio::time::sleep(Duration::from_secs(19)).await;
    assert_eq!(
        defaulted(&b).await.expect("no store error"),
        None,
        "held 20 s"
    );
    assert_eq!(
        own(&b).await.expect("no store error"),
        Some(()),
        "its own zero"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(defaulted(&b).await.expect("no store error"), Some(()));
}

const REPORT_AT_MOST: Duration = Duration::from_mins(1);

/// `at_most` and `at_least` as `Duration` expressions (a constant, a call); their range is
/// checked when the function is called, with `LockConfig`'s error.
#[tokio::test(start_paused = true)]
async fn durations_may_be_expressions_checked_when_called() {
    #[scheduled_lock(name = "expr", at_most = REPORT_AT_MOST, at_least = Duration::from_secs(5), executor = executor)]
    async fn from_code(executor: &LockingTaskExecutor) {}

    #[scheduled_lock(name = "zero", at_most = Duration::ZERO, executor = executor)]
    async fn zero(executor: &LockingTaskExecutor) {}

    #[scheduled_lock(name = "inverted", at_most = Duration::from_secs(1), at_least = REPORT_AT_MOST, executor = executor)]
    async fn inverted(executor: &LockingTaskExecutor) {}

    let store = Arc::new(InMemoryLockProvider::new());
    let [a, b] = ["a", "b"].map(|owner| executor(&store, owner));
    assert_eq!(from_code(&a).await.expect("no store error"), Some(()));
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        from_code(&b).await.expect("no store error"),
        None,
        "at_least 5 s"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(from_code(&b).await.expect("no store error"), Some(()));

    let err = zero(&a).await.expect_err("a zero at_most");
    assert!(
        err.is_invalid_config() && err.to_string().contains("at_most"),
        "{err}"
    );
    let err = inverted(&a).await.expect_err("at_least above at_most");
    assert!(
        err.to_string()
            .contains("at_least (1m) is longer than at_most (1s)"),
        "{err}"
    );
}
