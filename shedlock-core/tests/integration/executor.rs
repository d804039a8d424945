//! Executor behaviour: release on every path, errors are not skips, keep-alive, task-local access.
//! Time is paused: durations are exact and nothing waits in real time.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use shedlock_core::testkit::{Fault, FaultyProvider, Operation};
use shedlock_core::{
    InMemoryLockProvider, LockConfig, LockingTaskExecutor,
    current::{assert_locked, is_locked, without_lock_assertions},
    current_lock,
    provider::LockProvider,
};
use tokio::time::Instant;

const SEC: Duration = Duration::from_secs(1);

type Store = Arc<FaultyProvider<InMemoryLockProvider>>;

fn store() -> Store {
    Arc::new(FaultyProvider::new(InMemoryLockProvider::new()))
}

fn executor(store: &Store, owner: &str) -> LockingTaskExecutor {
    LockingTaskExecutor::builder(store.clone())
        .owner_id(owner)
        .call_timeout(2 * SEC)
        .build()
        .expect("valid executor")
}

fn cfg(name: &str, at_most: Duration) -> LockConfig {
    LockConfig::new(name, at_most).expect("valid config")
}

/// Whether another owner could take `name` right now (and gives it straight back).
async fn is_free(store: &Store, name: &str) -> bool {
    match store
        .inner()
        .acquire(name, SEC, "probe")
        .await
        .expect("store works")
    {
        Some(record) => {
            store
                .inner()
                .release(&record, Duration::ZERO)
                .await
                .expect("release");
            true
        }
        None => false,
    }
}

/// Polls until `name` is free; returns how long that took (paused time: exact).
async fn wait_free(store: &Store, name: &str, limit: Duration) -> Duration {
    let start = Instant::now();
    while !is_free(store, name).await {
        assert!(start.elapsed() < limit, "{name} still held after {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    start.elapsed()
}

#[tokio::test(start_paused = true)]
async fn runs_the_task_and_releases_before_returning() {
    let store = store();
    let ran = executor(&store, "a")
        .execute(&cfg("job", 60 * SEC), async { 7 })
        .await
        .expect("no store error");
    assert_eq!(ran, Some(7));
    // Released synchronously: free the moment execute returns.
    assert!(is_free(&store, "job").await);
}

#[tokio::test(start_paused = true)]
async fn a_held_lock_skips_without_running() {
    let store = store();
    let guard = executor(&store, "a")
        .try_lock(&cfg("job", 60 * SEC))
        .await
        .expect("ok")
        .expect("free");
    let ran = AtomicBool::new(false);
    let result = executor(&store, "b")
        .execute(&cfg("job", 60 * SEC), async {
            ran.store(true, Ordering::SeqCst);
        })
        .await
        .expect("a held lock is not an error");
    assert!(result.is_none());
    assert!(!ran.load(Ordering::SeqCst));
    guard.release().await.expect("release");
}

#[tokio::test(start_paused = true)]
async fn a_task_error_comes_back_inside_and_releases() {
    let store = store();
    let result = executor(&store, "a")
        .execute(&cfg("job", 60 * SEC), async { Err::<(), _>("boom") })
        .await
        .expect("the store worked");
    assert_eq!(result, Some(Err("boom")));
    assert!(is_free(&store, "job").await);
}

#[tokio::test(start_paused = true)]
async fn a_panic_releases_then_resumes() {
    let store = store();
    // A slow release: had it been left to the guard's background drop, it would still be in
    // flight when the panic reached the caller (at 0 s), and the lock still held.
    store.inject_times(Operation::Release, Fault::Delay(SEC), 1);
    let exec = executor(&store, "a");
    let start = Instant::now();
    let outcome = tokio::spawn(async move {
        exec.execute(&cfg("job", 60 * SEC), async { panic!("task exploded") })
            .await
    })
    .await;
    let panic = outcome.expect_err("the panic must resume");
    assert!(panic.is_panic());
    assert_eq!(
        start.elapsed(),
        SEC,
        "the panic resumed once the release had finished, not before"
    );
    // No time has passed since the panic was observed.
    assert!(
        is_free(&store, "job").await,
        "released before the panic resumed"
    );
    assert_eq!(store.calls(Operation::Release), 1);
}

#[tokio::test(start_paused = true)]
async fn store_errors_are_errors_never_skips() {
    let store = store();
    store.inject(Operation::Acquire, Fault::Fail);
    let ran = AtomicBool::new(false);
    let err = executor(&store, "a")
        .execute(&cfg("job", 60 * SEC), async {
            ran.store(true, Ordering::SeqCst);
        })
        .await
        .expect_err("a failing store is an error");
    assert!(err.is_backend(), "{err}");
    assert!(!ran.load(Ordering::SeqCst));
}

#[tokio::test(start_paused = true)]
async fn a_hung_acquire_times_out() {
    let store = store();
    store.inject(Operation::Acquire, Fault::Hang);
    let start = Instant::now();
    let err = executor(&store, "a")
        .execute(&cfg("job", 60 * SEC), async {})
        .await
        .expect_err("a hung store is an error");
    assert!(err.is_timeout(), "{err}");
    assert_eq!(start.elapsed(), 2 * SEC, "the executor's call timeout");
}

#[tokio::test(start_paused = true)]
async fn a_failed_release_keeps_the_result_and_is_reported() {
    let store = store();
    store.inject(Operation::Release, Fault::Fail);
    let run = executor(&store, "a")
        .execute_reported(&cfg("job", 60 * SEC), async { "result" })
        .await
        .expect("the task ran")
        .expect("free");
    assert_eq!(run.output, "result");
    assert!(
        run.release_error
            .as_ref()
            .is_some_and(shedlock_core::Error::is_backend)
    );
    // Also through plain execute: the output survives.
    store.heal_all();
    let held = wait_free(&store, "job", 120 * SEC).await;
    assert!(
        held >= 59 * SEC,
        "an unreleased lock ends at at_most ({held:?})"
    );
    store.inject(Operation::Release, Fault::Hang);
    let out = executor(&store, "a")
        .execute(&cfg("job", 60 * SEC), async { 5 })
        .await
        .expect("ran");
    assert_eq!(out, Some(5));
}

#[tokio::test(start_paused = true)]
async fn dropping_a_guard_releases_promptly_honouring_at_least() {
    let store = store();
    let at_least = LockConfig::builder("job")
        .at_most(60 * SEC)
        .at_least(30 * SEC)
        .build()
        .expect("valid");
    let guard = executor(&store, "a")
        .try_lock(&at_least)
        .await
        .expect("ok")
        .expect("free");
    drop(guard);
    let held = wait_free(&store, "job", 60 * SEC).await;
    assert!(
        (30 * SEC..31 * SEC).contains(&held),
        "held {held:?}: released at at_least, not at at_most"
    );

    let guard = executor(&store, "a")
        .try_lock(&cfg("job", 60 * SEC))
        .await
        .expect("ok")
        .expect("free");
    drop(guard);
    let held = wait_free(&store, "job", 60 * SEC).await;
    assert!(held < SEC, "without at_least, released at once ({held:?})");
}

#[tokio::test(start_paused = true)]
async fn cancelling_execute_releases_promptly() {
    let store = store();
    let exec = executor(&store, "a");
    let started = Arc::new(tokio::sync::Notify::new());
    let started2 = started.clone();
    let run = tokio::spawn(async move {
        exec.execute(&cfg("job", 600 * SEC), async move {
            started2.notify_one();
            std::future::pending::<()>().await;
        })
        .await
    });
    started.notified().await;
    assert!(!is_free(&store, "job").await);
    run.abort();
    let held = wait_free(&store, "job", 600 * SEC).await;
    assert!(
        held < SEC,
        "released on cancellation, not at at_most ({held:?})"
    );
}

/// `at_most` 10 s, so keep-alive renews every 5 s; `at_least` 8 s, so a renewal that outlived a
/// release before 5 s would move `lock_until` past `locked_at + at_least`.
fn kept_alive_with_at_least(name: &str) -> LockConfig {
    LockConfig::builder(name)
        .at_most(10 * SEC)
        .at_least(8 * SEC)
        .keep_alive(true)
        .build()
        .expect("valid")
}

/// Asserts that `name` is held until exactly `until` and free from then on.
async fn held_until_exactly(store: &Store, name: &str, until: Instant) {
    tokio::time::sleep_until(until - Duration::from_millis(1)).await;
    assert!(
        !is_free(store, name).await,
        "{name} freed before locked_at + at_least"
    );
    tokio::time::sleep_until(until).await;
    assert!(
        is_free(store, name).await,
        "{name} still held at locked_at + at_least"
    );
}

/// Cancelled before the first renewal (2 s) and after it (6 s, the store's `lock_until` then at
/// 15 s): keep-alive stops for good, and the release ends the lock at `locked_at + at_least`.
#[tokio::test(start_paused = true)]
async fn cancelling_a_kept_alive_execute_stops_renewals_and_honours_at_least() {
    let store = store();
    let exec = executor(&store, "a");
    for (round, cancel_after) in [2 * SEC, 6 * SEC].into_iter().enumerate() {
        let name = format!("job-{round}");
        let extends = store.calls(Operation::Extend);
        let locked_at = Instant::now();
        let cancelled = tokio::time::timeout(
            cancel_after,
            exec.execute(
                &kept_alive_with_at_least(&name),
                std::future::pending::<()>(),
            ),
        )
        .await;
        assert!(cancelled.is_err(), "cancelled while the task ran");
        let extends_at_cancel = store.calls(Operation::Extend) - extends;
        assert_eq!(
            extends_at_cancel,
            usize::from(cancel_after > 5 * SEC),
            "keep-alive ran until the cancellation"
        );
        held_until_exactly(&store, &name, locked_at + 8 * SEC).await;
        tokio::time::sleep_until(locked_at + 60 * SEC).await;
        assert_eq!(
            store.calls(Operation::Extend) - extends,
            extends_at_cancel,
            "no extension after the release"
        );
    }
}

/// As above, for a kept-alive guard that is dropped.
#[tokio::test(start_paused = true)]
async fn dropping_a_kept_alive_guard_stops_renewals_and_honours_at_least() {
    let store = store();
    let exec = executor(&store, "a");
    for (round, drop_after) in [2 * SEC, 6 * SEC].into_iter().enumerate() {
        let name = format!("job-{round}");
        let extends = store.calls(Operation::Extend);
        let locked_at = Instant::now();
        let guard = exec
            .try_lock(&kept_alive_with_at_least(&name))
            .await
            .expect("ok")
            .expect("free");
        tokio::time::sleep(drop_after).await;
        drop(guard);
        let extends_at_drop = store.calls(Operation::Extend) - extends;
        assert_eq!(
            extends_at_drop,
            usize::from(drop_after > 5 * SEC),
            "keep-alive ran until the drop"
        );
        held_until_exactly(&store, &name, locked_at + 8 * SEC).await;
        tokio::time::sleep_until(locked_at + 60 * SEC).await;
        assert_eq!(
            store.calls(Operation::Extend) - extends,
            extends_at_drop,
            "no extension after the release"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_nested_run_of_a_held_lock_is_reentrant() {
    let store = store();
    let exec = executor(&store, "a");
    let job = cfg("job", 60 * SEC);
    let outer = exec
        .execute(&job, async {
            let outer_token = current_lock().and_then(|l| l.fencing_token());
            let inner = exec
                .execute_reported(&job, async {
                    current_lock().and_then(|l| l.fencing_token())
                })
                .await
                .expect("ok")
                .expect("re-entrant runs are never skipped");
            assert!(inner.reentrant);
            assert_eq!(inner.output, outer_token);
            // The inner run must not have released the outer lock.
            assert!(!is_free(&store, "job").await);
            "outer done"
        })
        .await
        .expect("ok");
    assert_eq!(outer, Some("outer done"));
    assert!(is_free(&store, "job").await);
}

#[tokio::test(start_paused = true)]
async fn lock_assertions_hold_inside_and_fail_outside() {
    let store = store();
    let exec = executor(&store, "a");
    assert!(!is_locked());
    let inside = exec
        .execute(&cfg("job", 60 * SEC), async {
            assert_locked();
            is_locked()
        })
        .await
        .expect("ok");
    assert_eq!(inside, Some(true));
    let outside = std::panic::catch_unwind(assert_locked);
    assert!(
        outside.is_err(),
        "assert_locked must fail outside a locked task"
    );
    without_lock_assertions(async { assert_locked() }).await;
    // Task-local, not thread-local: a task spawned from a locked task holds nothing.
    let spawned = exec
        .execute(&cfg("job", 60 * SEC), async {
            tokio::spawn(async { is_locked() }).await
        })
        .await
        .expect("ok")
        .expect("ran")
        .expect("joined");
    assert!(!spawned);
}

#[tokio::test(start_paused = true)]
async fn the_current_lock_gives_token_extension_and_loss() {
    let store = store();
    let exec = executor(&store, "a");
    let guard_token = {
        let g = exec
            .try_lock(&cfg("job", 10 * SEC))
            .await
            .expect("ok")
            .expect("free");
        let t = g.fencing_token();
        g.release().await.expect("release");
        t
    };
    let run = exec
        .execute_reported(&cfg("job", 10 * SEC), async {
            let lock = current_lock().expect("inside");
            assert_eq!(lock.name(), "job");
            assert!(
                lock.fencing_token() > guard_token,
                "a new acquisition has a newer token"
            );
            assert!(lock.extend(30 * SEC).await.expect("extend works"));
            tokio::time::sleep(20 * SEC).await; // past the original at_most
            assert!(!lock.is_lost(), "the extension holds");
            let start = Instant::now();
            lock.lost().await;
            start.elapsed()
        })
        .await
        .expect("ok")
        .expect("ran");
    assert_eq!(
        run.output,
        10 * SEC,
        "lost exactly when the extension ran out"
    );
    assert!(run.lock_lost);
}

#[tokio::test(start_paused = true)]
async fn a_task_outliving_at_most_reports_the_lost_lock() {
    let store = store();
    let run = executor(&store, "a")
        .execute_reported(&cfg("job", 10 * SEC), tokio::time::sleep(20 * SEC))
        .await
        .expect("ok")
        .expect("ran");
    assert!(run.lock_lost);
}

#[tokio::test(start_paused = true)]
async fn keep_alive_extends_while_the_task_runs() {
    let store = store();
    let job = LockConfig::builder("job")
        .at_most(10 * SEC)
        .keep_alive(true)
        .build()
        .expect("valid");
    let exec = executor(&store, "a");
    let probe = store.clone();
    let run = exec
        .execute_reported(&job, async move {
            for _ in 0..12 {
                tokio::time::sleep(5 * SEC).await;
                assert!(!is_free(&probe, "job").await, "held throughout");
            }
        })
        .await
        .expect("ok")
        .expect("ran");
    assert!(!run.lock_lost);
    assert!(
        store.calls(Operation::Extend) >= 11,
        "extends every at_most / 2"
    );
    assert!(is_free(&store, "job").await);
}

#[tokio::test(start_paused = true)]
async fn a_hung_extension_cannot_hide_the_loss() {
    let store = store();
    store.inject(Operation::Extend, Fault::Hang);
    let job = LockConfig::builder("job")
        .at_most(10 * SEC)
        .keep_alive(true)
        .build()
        .expect("valid");
    let run = executor(&store, "a")
        .execute_reported(&job, async {
            let start = Instant::now();
            current_lock().expect("inside").lost().await;
            start.elapsed()
        })
        .await
        .expect("ok")
        .expect("ran");
    assert_eq!(run.output, 10 * SEC, "told at the deadline, not later");
    assert!(run.lock_lost);
}

#[tokio::test(start_paused = true)]
async fn keep_alive_survives_transient_extend_errors() {
    let store = store();
    store.inject_times(Operation::Extend, Fault::Fail, 2);
    let job = LockConfig::builder("job")
        .at_most(10 * SEC)
        .keep_alive(true)
        .build()
        .expect("valid");
    let run = executor(&store, "a")
        .execute_reported(&job, tokio::time::sleep(40 * SEC))
        .await
        .expect("ok")
        .expect("ran");
    assert!(
        !run.lock_lost,
        "two failed extends inside the deadline are retried in time"
    );
}

#[tokio::test(start_paused = true)]
async fn a_stolen_lock_is_lost_at_the_next_extension() {
    let store = store();
    let job = LockConfig::builder("job")
        .at_most(10 * SEC)
        .keep_alive(true)
        .build()
        .expect("valid");
    let thief = store.clone();
    let run = executor(&store, "a")
        .execute_reported(&job, async move {
            let lock = current_lock().expect("inside");
            // Someone force-releases the row and takes it (e.g. an operator).
            thief
                .inner()
                .release(&lock.record(), Duration::ZERO)
                .await
                .expect("release");
            thief
                .inner()
                .acquire("job", 60 * SEC, "thief")
                .await
                .expect("ok")
                .expect("free");
            let start = Instant::now();
            lock.lost().await;
            start.elapsed()
        })
        .await
        .expect("ok")
        .expect("ran");
    assert!(run.lock_lost);
    assert!(
        run.output <= 5 * SEC,
        "noticed at the first extension ({:?})",
        run.output
    );
    assert!(
        !is_free(&store, "job").await,
        "the thief's lock is untouched by our release"
    );
}

#[tokio::test(start_paused = true)]
async fn at_most_comes_from_the_executor_default_or_is_a_clear_error() {
    let store = store();
    let no_at_most = LockConfig::builder("job")
        .build()
        .expect("at_most may be left out");
    let err = executor(&store, "a")
        .execute(&no_at_most, async {})
        .await
        .expect_err("no default");
    assert!(err.is_invalid_config());
    assert!(err.to_string().contains("default_at_most"), "{err}");

    let exec = LockingTaskExecutor::builder(store.clone())
        .default_at_most(30 * SEC)
        .build()
        .expect("valid");
    let guard = exec.try_lock(&no_at_most).await.expect("ok").expect("free");
    let record = guard.record();
    assert_eq!(
        (record.lock_until() - record.locked_at()).to_std().ok(),
        Some(30 * SEC)
    );
    guard.release().await.expect("release");
}

#[tokio::test(start_paused = true)]
async fn names_too_long_for_the_store_are_rejected_before_it_is_asked() {
    let store = store();
    let name = "x".repeat(64);
    let err = LockingTaskExecutor::builder(ShortNames(store.clone()))
        .build()
        .expect("valid")
        .execute(&cfg(&name, SEC), async {})
        .await
        .expect_err("too long for this store");
    assert!(err.is_invalid_config(), "{err}");
    assert_eq!(store.calls(Operation::Acquire), 0);
}

/// A store whose name column holds 16 characters.
struct ShortNames(Store);

#[async_trait::async_trait]
impl LockProvider for ShortNames {
    async fn acquire(
        &self,
        name: &str,
        at_most: Duration,
        owner: &str,
    ) -> shedlock_core::Result<Option<shedlock_core::provider::LockRecord>> {
        self.0.acquire(name, at_most, owner).await
    }
    async fn extend(
        &self,
        record: &shedlock_core::provider::LockRecord,
        at_most: Duration,
    ) -> shedlock_core::Result<Option<shedlock_core::provider::LockRecord>> {
        self.0.extend(record, at_most).await
    }
    async fn release(
        &self,
        record: &shedlock_core::provider::LockRecord,
        at_least: Duration,
    ) -> shedlock_core::Result<bool> {
        self.0.release(record, at_least).await
    }
    fn max_name_len(&self) -> usize {
        16
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn executions_are_send_and_exclusive_across_threads() {
    let store = store();
    let counter = Arc::new(AtomicUsize::new(0));
    let inside = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..4 {
        let exec = executor(&store, &format!("replica-{i}"));
        let (counter, inside) = (counter.clone(), inside.clone());
        tasks.push(tokio::spawn(async move {
            let mut runs = 0;
            while runs < 25 {
                let done = exec
                    .execute(&cfg("shared", 60 * SEC), async {
                        assert_eq!(
                            inside.fetch_add(1, Ordering::SeqCst),
                            0,
                            "two holders at once"
                        );
                        tokio::task::yield_now().await;
                        counter.fetch_add(1, Ordering::SeqCst);
                        inside.fetch_sub(1, Ordering::SeqCst);
                    })
                    .await
                    .expect("no store error");
                if done.is_some() {
                    runs += 1;
                } else {
                    tokio::task::yield_now().await;
                }
            }
        }));
    }
    for task in tasks {
        task.await.expect("no panic");
    }
    assert_eq!(counter.load(Ordering::SeqCst), 100);
}

#[test]
fn owner_id_default_is_one_per_process_and_the_environment_overrides_it() {
    const CHILD: &str = "SHEDLOCK_TEST_OWNER_CHILD";
    // This test's name in the test binary: the child runs it alone.
    const SELF: &str =
        "executor::owner_id_default_is_one_per_process_and_the_environment_overrides_it";
    if std::env::var_os(CHILD).is_some() {
        // Child process: the variable set by the parent must win.
        assert_eq!(
            shedlock_core::owner::default_owner_id().expect("valid"),
            "pod-from-env"
        );
        return;
    }
    let a = shedlock_core::owner::default_owner_id().expect("valid");
    let b = shedlock_core::owner::default_owner_id().expect("valid");
    if std::env::var_os(shedlock_core::owner::OWNER_ID_ENV).is_none() {
        assert_eq!(a, b, "one default owner id per process");
        assert_eq!(
            a.split(':').nth(1),
            Some(std::process::id().to_string().as_str())
        );
    }
    let exe = std::env::current_exe().expect("test binary");
    let child = std::process::Command::new(exe)
        .args(["--exact", SELF])
        .env(CHILD, "1")
        .env(shedlock_core::owner::OWNER_ID_ENV, "pod-from-env")
        .output()
        .expect("spawn the test binary");
    let stdout = String::from_utf8_lossy(&child.stdout);
    assert!(
        child.status.success(),
        "the child saw a different owner id: {stdout}"
    );
    assert!(
        stdout.contains("1 passed"),
        "the child ran this test (named {SELF}): {stdout}"
    );

    let bad = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", SELF])
        .env(CHILD, "1")
        .env(shedlock_core::owner::OWNER_ID_ENV, "")
        .output()
        .expect("spawn the test binary");
    assert!(
        !bad.status.success(),
        "an empty SHEDLOCK_OWNER_ID must be rejected"
    );
}

#[tokio::test(start_paused = true)]
async fn executor_settings_are_validated() {
    let store = store();
    for (builder, needle) in [
        (
            LockingTaskExecutor::builder(store.clone()).owner_id(""),
            "owner id is empty",
        ),
        (
            LockingTaskExecutor::builder(store.clone()).owner_id("o".repeat(256)),
            "255",
        ),
        (
            LockingTaskExecutor::builder(store.clone()).default_at_most(Duration::ZERO),
            "default_at_most",
        ),
        (
            LockingTaskExecutor::builder(store.clone()).call_timeout(Duration::ZERO),
            "call_timeout",
        ),
    ] {
        let err = builder.build().expect_err(needle);
        assert!(err.is_invalid_config());
        assert!(err.to_string().contains(needle), "{err} lacks {needle}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_shorter_explicit_extension_moves_the_local_deadline_earlier() {
    let store = store();
    let guard = executor(&store, "a")
        .try_lock(&cfg("job", 600 * SEC))
        .await
        .expect("ok")
        .expect("free");
    assert!(guard.extend(10 * SEC).await.expect("extend works"));
    tokio::time::sleep(9 * SEC).await;
    assert!(!guard.is_lost());
    assert!(!is_free(&store, "job").await);
    tokio::time::sleep(SEC).await;
    assert!(
        guard.is_lost(),
        "the store frees the lock at 10 s: so must our belief"
    );
    assert!(is_free(&store, "job").await);
}

#[tokio::test(start_paused = true)]
async fn keep_alive_renews_with_the_length_of_an_explicit_extension() {
    let store = store();
    let job = LockConfig::builder("job")
        .at_most(10 * SEC)
        .keep_alive(true)
        .build()
        .expect("valid");
    let probe = store.clone();
    let run = executor(&store, "a")
        .execute_reported(&job, async move {
            let lock = current_lock().expect("inside");
            assert!(lock.extend(60 * SEC).await.expect("extend works"));
            tokio::time::sleep(20 * SEC).await;
            // The store becomes unreachable for extensions: the lock must be believed held
            // exactly as long as the store holds it, no longer.
            probe.inject(Operation::Extend, Fault::Hang);
            let start = Instant::now();
            while !lock.is_lost() {
                assert!(
                    !is_free(&probe, "job").await,
                    "believed held: the store must hold it"
                );
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            assert!(
                is_free(&probe, "job").await,
                "the store let it go when we did"
            );
            start.elapsed()
        })
        .await
        .expect("ok")
        .expect("ran");
    assert!(run.lock_lost);
    assert!(
        (55 * SEC..=60 * SEC).contains(&run.output),
        "renewals kept the 60 s length, so the loss comes 55-60 s later ({:?})",
        run.output
    );
}

#[tokio::test(start_paused = true)]
async fn a_reply_after_the_deadline_does_not_revive_the_lock() {
    let store = store();
    store.inject_times(Operation::Extend, Fault::Delay(15 * SEC), 1);
    let exec = LockingTaskExecutor::builder(store.clone())
        .owner_id("a")
        .call_timeout(30 * SEC)
        .build()
        .expect("valid");
    let guard = exec
        .try_lock(&cfg("job", 10 * SEC))
        .await
        .expect("ok")
        .expect("free");
    let extended = guard.extend(60 * SEC).await.expect("no store error");
    assert!(
        !extended,
        "the store answered after the local deadline had passed"
    );
    assert!(guard.is_lost());
    tokio::time::sleep(SEC).await;
    assert!(guard.is_lost(), "lost is final");
}

#[tokio::test(start_paused = true)]
async fn cancelling_a_release_in_flight_still_releases() {
    let store = store();
    let guard = executor(&store, "a")
        .try_lock(&cfg("job", 600 * SEC))
        .await
        .expect("ok")
        .expect("free");
    store.inject_times(Operation::Release, Fault::Delay(SEC), 1);
    let cancelled = tokio::time::timeout(Duration::from_millis(100), guard.release()).await;
    assert!(
        cancelled.is_err(),
        "the caller gave up while the release was in flight"
    );
    let held = wait_free(&store, "job", 600 * SEC).await;
    assert!(held < 2 * SEC, "released anyway, not at at_most ({held:?})");
}

#[tokio::test(start_paused = true)]
async fn cancelling_an_acquire_in_flight_gives_back_what_it_won() {
    let store = store();
    store.inject_times(Operation::Acquire, Fault::Delay(SEC), 1);
    let exec = executor(&store, "a");
    let cancelled = tokio::time::timeout(
        Duration::from_millis(100),
        exec.try_lock(&cfg("job", 600 * SEC)),
    )
    .await;
    assert!(
        cancelled.is_err(),
        "the caller gave up while the acquire was in flight"
    );
    let start = Instant::now();
    // The acquire still lands at 1 s; it must then be given back at once.
    while store.calls(Operation::Release) == 0 {
        assert!(
            start.elapsed() < 10 * SEC,
            "the won lock was never given back"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(is_free(&store, "job").await);
}

#[tokio::test(start_paused = true)]
async fn an_acquire_slower_than_at_most_is_an_error_not_a_run_on_an_expired_lock() {
    let store = store();
    store.inject_times(Operation::Acquire, Fault::Delay(6 * SEC), 1);
    let exec = LockingTaskExecutor::builder(store.clone())
        .owner_id("a")
        .call_timeout(30 * SEC)
        .build()
        .expect("valid");
    let ran = AtomicBool::new(false);
    let start = Instant::now();
    let err = exec
        .execute(&cfg("job", 5 * SEC), async {
            ran.store(true, Ordering::SeqCst);
        })
        .await
        .expect_err("the lock could not be taken within at_most");
    assert!(err.is_timeout(), "{err}");
    assert_eq!(
        start.elapsed(),
        5 * SEC,
        "the acquire's timeout is capped at at_most"
    );
    assert!(!ran.load(Ordering::SeqCst));
}

#[tokio::test(start_paused = true)]
async fn reentrancy_is_per_store_not_per_name() {
    let first = store();
    let second = store();
    let outer = executor(&first, "a");
    let other_store = executor(&second, "a");
    let nested = outer
        .execute(&cfg("job", 60 * SEC), async {
            Box::pin(other_store.execute_reported(&cfg("job", 60 * SEC), async {
                // Running under the second store's lock too, so it is held there now.
                is_free(&second, "job").await
            }))
            .await
            .expect("ok")
            .expect("free in the second store")
        })
        .await
        .expect("ok")
        .expect("ran");
    assert!(
        !nested.reentrant,
        "a lock of the same name in another store is a different lock"
    );
    assert!(
        !nested.output,
        "the nested run took the second store's lock"
    );
}

/// A store whose acquire panics (a bug in a custom store).
struct PanickingStore;

#[async_trait::async_trait]
impl LockProvider for PanickingStore {
    async fn acquire(
        &self,
        _name: &str,
        _at_most: Duration,
        _owner: &str,
    ) -> shedlock_core::Result<Option<shedlock_core::provider::LockRecord>> {
        panic!("bug in a custom store");
    }

    async fn extend(
        &self,
        _record: &shedlock_core::provider::LockRecord,
        _at_most: Duration,
    ) -> shedlock_core::Result<Option<shedlock_core::provider::LockRecord>> {
        unreachable!("never acquired")
    }

    async fn release(
        &self,
        _record: &shedlock_core::provider::LockRecord,
        _at_least: Duration,
    ) -> shedlock_core::Result<bool> {
        unreachable!("never acquired")
    }
}

#[tokio::test(start_paused = true)]
async fn a_store_that_panics_in_acquire_is_an_error_and_the_task_does_not_run() {
    let exec = LockingTaskExecutor::builder(PanickingStore)
        .owner_id("a")
        .build()
        .expect("valid");
    let ran = AtomicBool::new(false);
    let err = exec
        .execute(&cfg("job", 60 * SEC), async {
            ran.store(true, Ordering::SeqCst);
        })
        .await
        .expect_err("the store call panicked");
    assert!(err.is_backend(), "{err}");
    assert!(err.to_string().contains("panicked"), "{err}");
    assert!(!ran.load(Ordering::SeqCst));
}

/// `default_at_least` holds a lock whose config sets no `at_least` after a quick run; a lock
/// that sets its own (zero included) keeps it; a default above `default_at_most` is refused.
#[tokio::test(start_paused = true)]
async fn default_at_least_applies_to_locks_that_set_none() {
    let store = store();
    let executor = LockingTaskExecutor::builder(store.clone())
        .owner_id("a")
        .default_at_most(60 * SEC)
        .default_at_least(30 * SEC)
        .build()
        .expect("valid executor");
    assert_eq!(executor.default_at_least(), 30 * SEC);

    let start = Instant::now();
    let unset = LockConfig::builder("defaulted").build().expect("valid");
    assert!(
        executor
            .execute(&unset, async {})
            .await
            .expect("ran")
            .is_some()
    );
    assert!(
        !is_free(&store, "defaulted").await,
        "held after a quick run"
    );
    wait_free(&store, "defaulted", 60 * SEC).await;
    let held = start.elapsed();
    assert!(
        held >= 30 * SEC && held <= 30 * SEC + Duration::from_millis(100),
        "held {held:?}, not the default at_least of 30 s"
    );

    let own = LockConfig::builder("own")
        .at_least(Duration::ZERO)
        .build()
        .expect("valid");
    assert!(
        executor
            .execute(&own, async {})
            .await
            .expect("ran")
            .is_some()
    );
    assert!(is_free(&store, "own").await, "its own at_least of zero");

    let err = LockingTaskExecutor::builder(store.clone())
        .owner_id("b")
        .default_at_most(10 * SEC)
        .default_at_least(30 * SEC)
        .build()
        .expect_err("default_at_least above default_at_most");
    assert!(
        err.to_string()
            .contains("default_at_least (30s) is longer than default_at_most (10s)"),
        "{err}"
    );
}
