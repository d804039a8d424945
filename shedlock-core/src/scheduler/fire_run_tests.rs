//! [`LockingTaskExecutor::execute_fire`] on paused tokio time, over the in-memory store and
//! `FaultyProvider` for lost replies and outages. The store's clock agrees with the replicas', as a
//! caller's own clock tells the fires it claims.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::FireRun;
use crate::admin::LockAdmin;
use crate::config::LockConfig;
use crate::fire::{Fire, FireClaim};
use crate::jobs::RunOutcome;
use crate::testkit::{Fault, FaultyProvider, Operation};
use crate::{InMemoryLockProvider, LockProvider, LockingTaskExecutor};

const SEC: Duration = Duration::from_secs(1);

type Store = Arc<FaultyProvider<InMemoryLockProvider>>;

/// A store, and a function giving the instant `s` seconds after it started.
fn store() -> (Store, impl Fn(i64) -> DateTime<Utc>) {
    let start = Utc::now();
    let store = Arc::new(FaultyProvider::new(InMemoryLockProvider::starting_at(
        start,
    )));
    (store, move |s| start + chrono::Duration::seconds(s))
}

fn executor(store: &Store, owner: &str) -> LockingTaskExecutor {
    LockingTaskExecutor::builder(store.clone())
        .owner_id(owner)
        .call_timeout(SEC)
        .build()
        .unwrap()
}

fn cfg() -> LockConfig {
    LockConfig::new("report", 30 * SEC).unwrap()
}

/// The fire at `at(from)`, whose window lasts to `at(to)`.
fn fire(at: &impl Fn(i64) -> DateTime<Utc>, from: i64, to: i64) -> Fire {
    Fire::new(at(from), at(to)).unwrap()
}

/// A task that counts its runs and returns the store's `locked_at` of the lock it runs under.
async fn counted(runs: &AtomicUsize) -> Result<DateTime<Utc>, String> {
    runs.fetch_add(1, Ordering::SeqCst);
    tokio::task::yield_now().await; // runs as a task does: across an await
    let lock = crate::current_lock().ok_or("no current lock")?;
    Ok(lock.record().locked_at())
}

#[tokio::test(start_paused = true)]
async fn two_replicas_run_a_fire_once_and_never_before_it() {
    let (store, at) = store();
    let (a, b) = (executor(&store, "a"), executor(&store, "b"));
    // The fire is 4 s ahead of the store's clock: both claims are too early and wait.
    let fire = fire(&at, 5, 15);
    let runs = AtomicUsize::new(0);
    let cfg = cfg();
    let (ra, rb) = tokio::join!(
        a.execute_fire(&cfg, &fire, counted(&runs)),
        b.execute_fire(&cfg, &fire, counted(&runs)),
    );
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let (ran, other) = match (ra, rb) {
        (FireRun::Ran(run), FireRun::NotRun(other))
        | (FireRun::NotRun(other), FireRun::Ran(run)) => (run, other),
        (a, b) => panic!("exactly one must run: {a:?} {b:?}"),
    };
    let locked_at = ran.output.unwrap();
    assert!(locked_at >= at(5), "ran early, at {locked_at}");
    assert!(ran.fencing_token.is_some() && !ran.lock_lost);
    assert!(
        matches!(other, FireClaim::ClaimedElsewhere { recorded, .. } if recorded == at(5)),
        "{other:?}"
    );
    // The lock is free after the run (no at_least) and the fire stays recorded.
    assert!(store.inner().holder("report").await.unwrap().is_none());
    let late = a.execute_fire(&cfg, &fire, counted(&runs)).await.unwrap();
    assert!(matches!(
        late,
        FireRun::NotRun(FireClaim::ClaimedElsewhere { .. })
    ));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_fire_whose_window_passed_is_not_run() {
    let (store, at) = store();
    let runs = AtomicUsize::new(0);
    let reply = executor(&store, "a")
        .execute_fire(&cfg(), &fire(&at, -10, 0), counted(&runs))
        .await
        .unwrap();
    assert!(matches!(
        reply,
        FireRun::NotRun(FireClaim::WindowPassed { .. })
    ));
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

/// A claim commits but its reply is lost. The retry finds the fire recorded by this very caller
/// and runs it once; the lock is released at the end, not held to `at_most`.
#[tokio::test(start_paused = true)]
async fn a_claim_whose_reply_was_lost_runs_once() {
    let (store, at) = store();
    store.inject_times(Operation::ClaimFire, Fault::FailAfterApplying, 1);
    let runs = AtomicUsize::new(0);
    let reply = executor(&store, "a")
        .execute_fire(&cfg(), &fire(&at, 0, 20), counted(&runs))
        .await
        .unwrap();
    assert!(matches!(reply, FireRun::Ran(_)), "{reply:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(store.calls(Operation::ClaimFire), 2);
    assert!(store.inner().holder("report").await.unwrap().is_none());
}

/// Two batches of claims commit but their replies are lost: each claim of them is a lost claim of
/// its own caller, recognised by its row and run once (docs/guarantees.md, "Many jobs at one
/// instant"). Three jobs' fires meet at one instant, so their claims go in batches.
#[tokio::test(start_paused = true)]
async fn the_claims_of_batches_whose_replies_were_lost_each_run_once() {
    let (store, at) = store();
    store.inject_times(Operation::ClaimFires, Fault::FailAfterApplying, 2);
    let a = executor(&store, "a");
    let fire = fire(&at, 0, 20);
    let runs = AtomicUsize::new(0);
    let jobs = ["j1", "j2", "j3"].map(|name| LockConfig::new(name, 30 * SEC).unwrap());
    let (one, two, three) = tokio::join!(
        a.execute_fire(&jobs[0], &fire, counted(&runs)),
        a.execute_fire(&jobs[1], &fire, counted(&runs)),
        a.execute_fire(&jobs[2], &fire, counted(&runs)),
    );
    for reply in [one, two, three] {
        let reply = reply.unwrap();
        assert!(matches!(reply, FireRun::Ran(_)), "{reply:?}");
    }
    assert_eq!(runs.load(Ordering::SeqCst), 3, "each fire ran once");
    assert!(
        store.calls(Operation::ClaimFires) >= 3,
        "two lost batches, then the claims again: {}",
        store.calls(Operation::ClaimFires)
    );
    for job in &jobs {
        assert!(store.inner().holder(job.name()).await.unwrap().is_none());
    }
}

/// Runs' releases go in batches, and a batch that hangs holds up no release longer than its call
/// timeout: a release queued behind it gives up waiting at its timeout, as the one in it does,
/// and each then releases plainly. So each fire's call returns within one call timeout of its
/// run's end, not two or three, and every lock is free.
#[tokio::test(start_paused = true)]
async fn a_release_waits_for_a_hung_batch_no_longer_than_its_call_timeout() {
    let (store, at) = store();
    store.inject(Operation::ReleaseRuns, Fault::Hang);
    let a = executor(&store, "a");
    let fire = fire(&at, 0, 20);
    let runs = AtomicUsize::new(0);
    let jobs = ["r1", "r2", "r3"].map(|name| LockConfig::new(name, 30 * SEC).unwrap());
    // The first run ends first, so its release is in flight alone when the others end.
    let later = || async {
        tokio::time::sleep(SEC / 10).await;
        counted(&runs).await
    };
    let started = tokio::time::Instant::now();
    let (one, two, three) = tokio::join!(
        a.execute_fire(&jobs[0], &fire, counted(&runs)),
        a.execute_fire(&jobs[1], &fire, later()),
        a.execute_fire(&jobs[2], &fire, later()),
    );
    let took = started.elapsed();
    for reply in [one, two, three] {
        let reply = reply.unwrap();
        assert!(matches!(reply, FireRun::Ran(_)), "{reply:?}");
    }
    assert_eq!(runs.load(Ordering::SeqCst), 3);
    assert!(
        store.calls(Operation::ReleaseRuns) >= 1,
        "the releases went through batches"
    );
    assert!(
        took < SEC + SEC / 2,
        "the releases took {took:?}: a release waited beyond its call timeout"
    );
    for job in &jobs {
        assert!(store.inner().holder(job.name()).await.unwrap().is_none());
    }
}

/// The same lost claim seen by another replica is never taken over: it is not its own.
#[tokio::test(start_paused = true)]
async fn another_replicas_claim_is_not_taken_for_a_lost_one() {
    let (store, at) = store();
    let fire = fire(&at, 0, 20);
    // b claims and holds the lock (its run is still going).
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let (finish_tx, finish_rx) = tokio::sync::oneshot::channel::<()>();
    let b = executor(&store, "b");
    let b_run = tokio::spawn(async move {
        b.execute_fire(&cfg(), &fire, async move {
            let _ = started_tx.send(());
            let _ = finish_rx.await;
        })
        .await
    });
    started_rx.await.unwrap();
    // a's first claim fails without applying, so what it then finds is b's claim.
    let a_store = Arc::new(FaultyProvider::new(store.clone()));
    a_store.inject_times(Operation::ClaimFire, Fault::Fail, 1);
    let a = LockingTaskExecutor::builder(a_store.clone())
        .owner_id("a")
        .build()
        .unwrap();
    let runs = AtomicUsize::new(0);
    let reply = a.execute_fire(&cfg(), &fire, counted(&runs)).await.unwrap();
    assert!(
        matches!(&reply, FireRun::NotRun(FireClaim::ClaimedElsewhere { holder, .. }) if holder.owner() == "b"),
        "{reply:?}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    let _ = finish_tx.send(());
    assert!(matches!(b_run.await.unwrap().unwrap(), FireRun::Ran(_)));
}

/// A claim commits, its reply is lost, and the store fails until the window passes. The fire is
/// not run late; the caller gets the error and releases its own committed claim unrun. An earlier
/// fire told the executor the store's clock: without it no claim is recognised as lost.
#[tokio::test(start_paused = true)]
async fn a_lost_claim_whose_window_passed_is_released_unrun() {
    let (store, at) = store();
    let a = executor(&store, "a");
    let runs = Arc::new(AtomicUsize::new(0));
    let first = a
        .execute_fire(&cfg(), &fire(&at, 0, 5), counted(&runs))
        .await;
    assert!(matches!(first, Ok(FireRun::Ran(_))), "{first:?}");
    tokio::time::sleep(5 * SEC).await; // into the next fire's window
    store.inject_times(Operation::ClaimFire, Fault::FailAfterApplying, 1);
    let call = {
        let runs = runs.clone();
        let fire = fire(&at, 5, 10);
        tokio::spawn(async move {
            a.execute_fire(&cfg(), &fire, counted(&runs))
                .await
                .map(|_| ())
        })
    };
    // After the next claim (committed, its reply lost), every claim fails.
    while store.calls(Operation::ClaimFire) < 2 {
        tokio::task::yield_now().await;
    }
    store.inject(Operation::ClaimFire, Fault::Fail);
    let held = store.inner().holder("report").await.unwrap();
    assert_eq!(
        held.as_ref().map(crate::LockRecord::owner),
        Some("a"),
        "the claim committed"
    );
    let error = call
        .await
        .unwrap()
        .expect_err("the store failed until the window ended");
    assert!(!error.is_unsupported(), "{error}");
    assert_eq!(runs.load(Ordering::SeqCst), 1, "only the first fire ran");
    assert!(
        store.inner().holder("report").await.unwrap().is_none(),
        "released unrun, not held to at_most"
    );
}

/// The release records the run's outcome from the task's output: an `Err` is a failure with its
/// text, and a later `Ok` resets the count.
#[tokio::test(start_paused = true)]
async fn the_outcome_is_recorded_in_the_job_state() {
    let (store, at) = store();
    let a = executor(&store, "a");
    let failed = a
        .execute_fire(&cfg(), &fire(&at, 0, 10), async {
            Err::<(), _>("disk full")
        })
        .await
        .unwrap();
    assert!(matches!(failed, FireRun::Ran(ref run) if run.output.is_err()));
    let state = store.inner().entry("report").await.unwrap().unwrap();
    let state = state.state().expect("recorded").clone();
    assert_eq!(state.consecutive_failures, 1);
    let last = state.last_run.expect("a run");
    assert_eq!(last.outcome, RunOutcome::Failed("disk full".into()));
    assert_eq!((last.fire, last.runner.as_str()), (at(0), "a"));
    tokio::time::sleep_until(tokio::time::Instant::now() + 10 * SEC).await;
    a.execute_fire(&cfg(), &fire(&at, 10, 20), async {})
        .await
        .unwrap();
    let state = store.inner().entry("report").await.unwrap().unwrap();
    let state = state.state().expect("recorded").clone();
    assert_eq!(state.consecutive_failures, 0);
    assert_eq!(
        state.last_run.expect("a run").outcome,
        RunOutcome::Succeeded
    );
    assert!(state.last_success.is_some());
}

fn explode() {
    panic!("boom");
}

/// A panicking task's lock is released, the run is recorded as panicked, and the panic goes on.
#[tokio::test(start_paused = true)]
async fn a_panic_is_resumed_after_the_release() {
    let (store, at) = store();
    let a = executor(&store, "a");
    let fire = fire(&at, 0, 10);
    let joined =
        tokio::spawn(async move { a.execute_fire(&cfg(), &fire, async { explode() }).await }).await;
    assert!(joined.expect_err("the panic goes on").is_panic());
    assert!(store.inner().holder("report").await.unwrap().is_none());
    let entry = store.inner().entry("report").await.unwrap().unwrap();
    let last = entry
        .state()
        .and_then(|s| s.last_run.clone())
        .expect("recorded");
    assert_eq!(last.outcome, RunOutcome::Panicked);
}

/// A drain ends a wait for the fire at once: the call answers the shutdown error, not once the
/// store's clock reaches the fire ten minutes later.
#[tokio::test(start_paused = true)]
async fn a_drain_ends_the_wait_for_the_fire_at_once() {
    let (store, at) = store();
    let a = executor(&store, "a");
    let call = {
        let (a, fire) = (a.clone(), fire(&at, 600, 660));
        tokio::spawn(async move { a.execute_fire(&cfg(), &fire, async {}).await.map(|_| ()) })
    };
    while store.calls(Operation::ClaimFire) == 0 {
        tokio::task::yield_now().await;
    }
    a.shutdown(SEC).await;
    let answer = tokio::time::timeout(5 * SEC, call)
        .await
        .expect("answered at once, not at the fire")
        .unwrap();
    assert!(answer.is_err_and(|e| e.is_shutdown()));
}

/// A claim commits, its reply is lost, and the store fails until the window passes, reads of the
/// holder too: the call cannot settle it. The executor keeps it, and the next fire's call, which
/// finds the lock held by it, releases it and runs its own fire.
#[tokio::test(start_paused = true)]
async fn a_lost_claim_left_unsettled_is_released_by_the_next_call() {
    let (store, at) = store();
    let a = executor(&store, "a");
    let runs = Arc::new(AtomicUsize::new(0));
    let first = a
        .execute_fire(&cfg(), &fire(&at, 0, 5), counted(&runs))
        .await;
    assert!(matches!(first, Ok(FireRun::Ran(_))), "{first:?}");
    tokio::time::sleep(5 * SEC).await;
    store.inject_times(Operation::ClaimFire, Fault::FailAfterApplying, 1);
    let call = {
        let (a, runs, fire) = (a.clone(), runs.clone(), fire(&at, 5, 10));
        tokio::spawn(async move {
            a.execute_fire(&cfg(), &fire, counted(&runs))
                .await
                .map(|_| ())
        })
    };
    while store.calls(Operation::ClaimFire) < 2 {
        tokio::task::yield_now().await;
    }
    store.inject(Operation::ClaimFire, Fault::Fail);
    store.inject(Operation::Holder, Fault::Fail);
    assert!(
        call.await.unwrap().is_err(),
        "the store failed until the window ended"
    );
    let held = store
        .inner()
        .holder("report")
        .await
        .unwrap()
        .expect("still held");
    assert_eq!((held.owner(), held.locked_at() >= at(5)), ("a", true));
    store.heal_all();
    tokio::time::sleep_until(tokio::time::Instant::now() + 10 * SEC).await;
    let next = a
        .execute_fire(&cfg(), &fire(&at, 15, 25), counted(&runs))
        .await
        .unwrap();
    assert!(matches!(next, FireRun::Ran(_)), "{next:?}");
    assert_eq!(
        runs.load(Ordering::SeqCst),
        2,
        "the lost claim's fire never ran"
    );
}

/// A fire met while a plain lock holds the job's lock is not run, and says who holds it.
#[tokio::test(start_paused = true)]
async fn a_fire_met_while_the_lock_is_held_is_not_run() {
    let (store, at) = store();
    let b = executor(&store, "b");
    let guard = b.try_lock(&cfg()).await.unwrap().expect("free");
    let runs = AtomicUsize::new(0);
    let reply = executor(&store, "a")
        .execute_fire(&cfg(), &fire(&at, 0, 10), counted(&runs))
        .await
        .unwrap();
    assert!(
        matches!(&reply, FireRun::NotRun(FireClaim::Held { holder, .. }) if holder.owner() == "b"),
        "{reply:?}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    guard.release().await.unwrap();
}

/// A store whose every fire claim is refused with `error()`; its plain locks work.
struct RefusedClaims {
    inner: InMemoryLockProvider,
    error: fn() -> crate::Error,
}

impl RefusedClaims {
    fn new(error: fn() -> crate::Error) -> Self {
        Self {
            inner: InMemoryLockProvider::new(),
            error,
        }
    }
}

#[async_trait::async_trait]
impl LockProvider for RefusedClaims {
    async fn acquire(
        &self,
        name: &str,
        at_most: Duration,
        owner: &str,
    ) -> crate::Result<Option<crate::LockRecord>> {
        self.inner.acquire(name, at_most, owner).await
    }
    async fn extend(
        &self,
        record: &crate::LockRecord,
        at_most: Duration,
    ) -> crate::Result<Option<crate::LockRecord>> {
        self.inner.extend(record, at_most).await
    }
    async fn release(&self, record: &crate::LockRecord, at_least: Duration) -> crate::Result<bool> {
        self.inner.release(record, at_least).await
    }
    async fn claim_fire(
        &self,
        _name: &str,
        _fire: &Fire,
        _at_most: Duration,
        _owner: &str,
    ) -> crate::Result<FireClaim> {
        Err((self.error)())
    }
}

#[tokio::test(start_paused = true)]
async fn a_store_without_fire_claims_answers_unsupported() {
    // As a store without fire claims answers, such as a SQL table without `last_fire`.
    let a = LockingTaskExecutor::new(RefusedClaims::new(|| {
        crate::Error::unsupported("claim_fire")
    }))
    .unwrap();
    let now = Utc::now();
    let fire = Fire::new(now, now + chrono::Duration::seconds(10)).unwrap();
    let runs = AtomicUsize::new(0);
    let error = a
        .execute_fire(&cfg(), &fire, counted(&runs))
        .await
        .expect_err("no fire claims");
    assert!(error.is_unsupported(), "{error}");
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

/// A misconfigured store answers at once: retrying until a day-long window ends cannot help.
#[tokio::test(start_paused = true)]
async fn a_misconfigured_store_answers_at_once_not_at_the_windows_end() {
    // As SQL refuses a name its column cannot hold.
    let a = LockingTaskExecutor::new(RefusedClaims::new(|| {
        crate::Error::invalid_config("the name is longer than the column holds")
    }))
    .unwrap();
    let now = Utc::now();
    let fire = Fire::new(now, now + chrono::Duration::days(1)).unwrap();
    let started = tokio::time::Instant::now();
    let error = a
        .execute_fire(&cfg(), &fire, async {})
        .await
        .expect_err("misconfigured");
    assert!(error.is_invalid_config(), "{error}");
    assert_eq!(started.elapsed(), Duration::ZERO, "no retry");
}
