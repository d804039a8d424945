//! The layer over the in-memory store: its service called directly with apalis tasks on paused
//! tokio time, and real apalis-cron workers on real time.

use std::collections::BTreeMap;
use std::str::FromStr as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use apalis_core::error::BoxDynError;
use apalis_core::task::builder::TaskBuilder;
use apalis_core::task::task_fn::task_fn;
use apalis_core::worker::builder::WorkerBuilder;
use apalis_cron::{CronScheduler, Tick};
use chrono::{DateTime, SubsecRound as _, Utc};
use shedlock_core::admin::LockAdmin as _;
use shedlock_core::provider::FireClaim;
use shedlock_core::testkit::{Fault, FaultyProvider, Operation};
use shedlock_core::{InMemoryLockProvider, LockConfig, LockProvider, LockingTaskExecutor};
use tower_layer::Layer as _;
use tower_service::Service;

use crate::{CronFireLayer, FireSchedule as _, TickError, TickRun};

const SEC: Duration = Duration::from_secs(1);

fn every_second() -> cron::Schedule {
    cron::Schedule::from_str("* * * * * *").unwrap()
}

fn layer(store: Arc<dyn LockProvider>, owner: &str) -> CronFireLayer<cron::Schedule> {
    let executor = LockingTaskExecutor::builder(store)
        .owner_id(owner)
        .call_timeout(SEC)
        .build()
        .unwrap();
    let config = LockConfig::new("apalis-tick", 30 * SEC).unwrap();
    CronFireLayer::new(executor, config, every_second())
}

/// A store whose clock starts at a whole second, and that second.
fn store() -> (Arc<InMemoryLockProvider>, DateTime<Utc>) {
    let start = Utc::now().trunc_subsecs(0);
    (Arc::new(InMemoryLockProvider::starting_at(start)), start)
}

fn tick(at: DateTime<Utc>) -> apalis_core::task::Task<Tick> {
    let seconds = u64::try_from(at.timestamp()).unwrap();
    TaskBuilder::new(Tick::new(seconds)).build()
}

/// A handler that counts its runs and answers the `locked_at` of the lock it runs under.
fn handler(
    runs: Arc<AtomicUsize>,
) -> impl Service<
    apalis_core::task::Task<Tick>,
    Response = DateTime<Utc>,
    Error = BoxDynError,
    Future: Send,
> + Clone
+ Send
+ 'static {
    task_fn(move |_tick: Tick| {
        let runs = Arc::clone(&runs);
        async move {
            runs.fetch_add(1, Ordering::SeqCst);
            tokio::task::yield_now().await;
            let lock = shedlock_core::current_lock().ok_or("no current lock")?;
            Ok::<_, BoxDynError>(lock.record().locked_at())
        }
    })
}

#[tokio::test(start_paused = true)]
async fn two_replicas_run_a_tick_once() {
    let (store, start) = store();
    let runs = Arc::new(AtomicUsize::new(0));
    let mut a = layer(store.clone(), "a").layer(handler(runs.clone()));
    let mut b = layer(store.clone(), "b").layer(handler(runs.clone()));
    let (ra, rb) = tokio::join!(a.call(tick(start)), b.call(tick(start)));
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let (ran, other) = match (ra, rb) {
        (TickRun::Ran(locked_at), TickRun::NotRun(claim))
        | (TickRun::NotRun(claim), TickRun::Ran(locked_at)) => (locked_at, claim),
        (a, b) => panic!("exactly one must run: {a:?} {b:?}"),
    };
    assert!(ran >= start, "ran at {ran}, before the tick at {start}");
    assert!(
        matches!(other, FireClaim::ClaimedElsewhere { recorded, .. } if recorded == start),
        "{other:?}"
    );
    // The next tick is a fire of its own; the first replica's later call of the first is not run.
    tokio::time::advance(SEC).await;
    let next = a.call(tick(start + SEC)).await.unwrap();
    assert!(next.ran(), "{next:?}");
    let again = b.call(tick(start)).await.unwrap();
    assert!(
        matches!(again, TickRun::NotRun(FireClaim::WindowPassed { .. })),
        "{again:?}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn a_tick_whose_window_passed_is_not_run_and_is_no_failure() {
    let (store, start) = store();
    let runs = Arc::new(AtomicUsize::new(0));
    let mut service = layer(store, "a").layer(handler(runs.clone()));
    // The tick five seconds ago: its window ended when the next second began.
    let late = service
        .call(tick(start - chrono::Duration::seconds(5)))
        .await
        .expect("a late tick is answered, not failed");
    assert!(
        matches!(late, TickRun::NotRun(FireClaim::WindowPassed { .. })),
        "{late:?}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

/// An operator paused the job: its ticks are not run, and answered `Paused`; after a resume they
/// run again.
#[tokio::test(start_paused = true)]
async fn a_paused_jobs_ticks_are_not_run_until_resumed() {
    let (store, start) = store();
    let runs = Arc::new(AtomicUsize::new(0));
    let mut service = layer(store.clone(), "a").layer(handler(runs.clone()));
    store
        .pause(
            "apalis-tick",
            shedlock_core::pause::PauseFor::UntilResumed,
            None,
            "ann",
        )
        .await
        .unwrap();
    let paused = service.call(tick(start)).await.unwrap();
    assert!(
        matches!(
            paused,
            TickRun::NotRun(FireClaim::Paused { until: None, .. })
        ),
        "{paused:?}"
    );
    store.resume("apalis-tick", "ann").await.unwrap();
    tokio::time::advance(SEC).await;
    assert!(service.call(tick(start + SEC)).await.unwrap().ran());
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

/// The replica's clock is three seconds ahead of the store's: its tick comes early, the claim
/// waits, and the handler runs at the tick's instant by the store's clock, not before.
#[tokio::test(start_paused = true)]
async fn a_tick_early_by_the_store_clock_waits_and_runs_at_its_instant() {
    let (store, start) = store();
    let runs = Arc::new(AtomicUsize::new(0));
    let mut a = layer(store.clone(), "a").layer(handler(runs.clone()));
    let mut b = layer(store, "b").layer(handler(runs.clone()));
    let at = start + chrono::Duration::seconds(3);
    let began = tokio::time::Instant::now();
    let (ra, rb) = tokio::join!(a.call(tick(at)), b.call(tick(at)));
    let locked_at = [ra.unwrap(), rb.unwrap()]
        .into_iter()
        .find_map(TickRun::output)
        .expect("one replica ran the tick");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert!(locked_at >= at, "ran at {locked_at}, before {at}");
    let waited = began.elapsed();
    assert!(
        (3 * SEC..4 * SEC).contains(&waited),
        "the run should start at the tick's instant, 3 s away; it started after {waited:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_handlers_error_reaches_apalis_and_is_recorded() {
    let (store, start) = store();
    let mut service = layer(store.clone(), "a").layer(task_fn(|_tick: Tick| async {
        Err::<(), _>(std::io::Error::other("disk full"))
    }));
    let error = service.call(tick(start)).await.unwrap_err();
    assert_eq!(error.to_string(), "disk full");
    let entry = store
        .entry("apalis-tick")
        .await
        .unwrap()
        .expect("the job's row");
    let state = entry
        .state()
        .expect("the in-memory store records job state");
    let last = state.last_run.as_ref().expect("the run is recorded");
    assert_eq!(last.fire, start);
    assert_eq!(
        last.outcome,
        shedlock_core::jobs::RunOutcome::Failed("disk full".into())
    );
}

/// The store fails every claim: the tick is retried within its window, then answered with the
/// store's error, and the handler never runs.
#[tokio::test(start_paused = true)]
async fn a_store_that_fails_until_the_window_ends_is_an_error_and_no_run() {
    let (store, start) = store();
    let faulty = Arc::new(FaultyProvider::new(store));
    faulty.inject(Operation::ClaimFire, Fault::Fail);
    let runs = Arc::new(AtomicUsize::new(0));
    let mut service = layer(faulty.clone(), "a").layer(handler(runs.clone()));
    let error = service.call(tick(start)).await.unwrap_err();
    let error = error
        .downcast_ref::<shedlock_core::Error>()
        .expect("the store's error");
    assert!(error.is_backend(), "{error}");
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert!(
        faulty.calls(Operation::ClaimFire) > 1,
        "retried in the window"
    );
}

#[tokio::test(start_paused = true)]
async fn a_tick_the_schedule_does_not_fire_at_is_refused() {
    let (store, start) = store();
    let runs = Arc::new(AtomicUsize::new(0));
    let executor = LockingTaskExecutor::new(store.clone()).unwrap();
    let every_ten = cron::Schedule::from_str("*/10 * * * * *").unwrap();
    let config = LockConfig::new("apalis-tick", 30 * SEC).unwrap();
    let mut service =
        CronFireLayer::new(executor, config, every_ten.clone()).layer(handler(runs.clone()));
    let off = if every_ten.is_fire(start) {
        start + SEC
    } else {
        start
    };
    let error = service.call(tick(off)).await.unwrap_err();
    assert_eq!(
        error.downcast_ref::<TickError>(),
        Some(&TickError::NotAFire { at: off })
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert!(store.holder("apalis-tick").await.unwrap().is_none());
}

/// Two apalis-cron workers ticking every second, each under the layer on its own executor over
/// one store: every tick runs once, on one of them. Real time: apalis ticks on the system clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_apalis_cron_workers_run_each_tick_once() {
    let store: Arc<dyn LockProvider> = Arc::new(InMemoryLockProvider::new());
    // Tick instant → the workers that ran it.
    let ran: Arc<Mutex<BTreeMap<u64, Vec<&'static str>>>> = Arc::default();
    let (enough_tx, enough) = tokio::sync::watch::channel(false);
    let enough_tx = Arc::new(enough_tx);
    let worker = |name: &'static str| {
        let ran = Arc::clone(&ran);
        let enough_tx = Arc::clone(&enough_tx);
        let mut enough = enough.clone();
        let handle = move |tick: Tick| {
            let ran = Arc::clone(&ran);
            let enough_tx = Arc::clone(&enough_tx);
            async move {
                let mut ran = ran.lock().unwrap_or_else(PoisonError::into_inner);
                ran.entry(tick.get_timestamp()).or_default().push(name);
                if ran.len() >= 4 {
                    enough_tx.send_replace(true);
                }
            }
        };
        let worker = WorkerBuilder::new(name)
            .backend(CronScheduler::new(every_second()))
            .layer(layer(Arc::clone(&store), name))
            .build(handle);
        tokio::spawn(worker.run_until(async move {
            let _ = enough.wait_for(|done| *done).await;
            Ok::<(), std::io::Error>(())
        }))
    };
    let (a, b) = (worker("a"), worker("b"));
    let stopped = tokio::time::timeout(10 * SEC, async { (a.await, b.await) }).await;
    let (a, b) = stopped.expect("four ticks within ten seconds");
    a.unwrap().unwrap();
    b.unwrap().unwrap();
    let ran = ran.lock().unwrap_or_else(PoisonError::into_inner).clone();
    for (tick, by) in &ran {
        assert_eq!(by.len(), 1, "tick {tick} ran on {by:?}");
    }
    let ticks: Vec<u64> = ran.keys().copied().collect();
    assert!(
        ticks.windows(2).all(|pair| pair[1] == pair[0] + 1),
        "every second ran: {ticks:?}"
    );
}

/// A handler behind a gate: not ready until the gate opens.
#[derive(Clone, Default)]
struct Gated {
    /// Whether the gate is open, and the waker of a `poll_ready` that found it shut.
    gate: Arc<Mutex<(bool, Option<std::task::Waker>)>>,
    runs: Arc<AtomicUsize>,
}

impl Gated {
    fn open(&self) {
        let mut gate = self.gate.lock().unwrap_or_else(PoisonError::into_inner);
        gate.0 = true;
        if let Some(waker) = gate.1.take() {
            waker.wake();
        }
    }
}

impl Service<apalis_core::task::Task<Tick>> for Gated {
    type Response = ();
    type Error = BoxDynError;
    type Future = std::future::Ready<Result<(), BoxDynError>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), BoxDynError>> {
        let mut gate = self.gate.lock().unwrap_or_else(PoisonError::into_inner);
        if gate.0 {
            return std::task::Poll::Ready(Ok(()));
        }
        gate.1 = Some(cx.waker().clone());
        std::task::Poll::Pending
    }

    fn call(&mut self, _task: apalis_core::task::Task<Tick>) -> Self::Future {
        self.runs.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Ok(()))
    }
}

/// The layer's service is ready even when the handler is not, so apalis-cron keeps asking for
/// ticks; the tick's fire is claimed first and the handler's readiness awaited under the claim.
#[tokio::test(start_paused = true)]
async fn the_layer_is_ready_and_waits_for_the_handler_under_the_claim() {
    let (store, start) = store();
    let gated = Gated::default();
    let mut service = layer(store.clone(), "a").layer(gated.clone());
    tokio::time::timeout(SEC, std::future::poll_fn(|cx| service.poll_ready(cx)))
        .await
        .expect("ready while the handler is not")
        .expect("no error");
    let call = tokio::spawn(service.call(tick(start)));
    // The fire is claimed while the handler waits for its gate.
    let deadline = tokio::time::Instant::now() + 5 * SEC;
    while store.holder("apalis-tick").await.unwrap().is_none() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the fire was never claimed"
        );
        tokio::task::yield_now().await;
    }
    assert_eq!(gated.runs.load(Ordering::SeqCst), 0);
    gated.open();
    let answer = tokio::time::timeout(5 * SEC, call)
        .await
        .expect("runs once the handler is ready")
        .unwrap()
        .expect("ran");
    assert!(answer.ran());
    assert_eq!(gated.runs.load(Ordering::SeqCst), 1);
}
