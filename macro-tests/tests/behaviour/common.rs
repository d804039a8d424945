//! Scenarios shared by the in-memory and SQLite behaviour tests: three replicas (separate
//! executors with distinct owner ids) over one store, calling the same `#[scheduled_lock]`
//! functions.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use shedlock_core::{LockingTaskExecutor, current_lock, provider::LockProvider, scheduled_lock};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// How long a scenario may wait for something that should happen at once: a guard against a
/// hang, never the synchronisation.
pub(crate) const DEADLINE: Duration = Duration::from_secs(30);

/// Where a locked body waits until the test lets it finish.
pub(crate) struct Gate {
    entered: Semaphore,
    open: Semaphore,
}

impl Gate {
    /// A closed gate.
    pub(crate) fn closed() -> Arc<Self> {
        Arc::new(Self {
            entered: Semaphore::new(0),
            open: Semaphore::new(0),
        })
    }

    /// A gate that lets every body through.
    pub(crate) fn open() -> Arc<Self> {
        let gate = Self::closed();
        gate.release();
        gate
    }

    /// Called by a body: records that it runs, then waits until the gate opens.
    pub(crate) async fn pass(&self) {
        self.entered.add_permits(1);
        let _permit = self.open.acquire().await;
    }

    /// Waits (up to [`DEADLINE`]) until a body has entered.
    pub(crate) async fn entered(&self) {
        tokio::time::timeout(DEADLINE, self.entered.acquire())
            .await
            .expect("a body entered before the deadline")
            .expect("the semaphore is open")
            .forget();
    }

    /// Opens the gate.
    pub(crate) fn release(&self) {
        self.open.add_permits(1);
    }
}

/// One simulated replica: its own executor (and owner id) over the shared store.
#[derive(Clone)]
pub(crate) struct Replica {
    pub(crate) locks: LockingTaskExecutor,
    pub(crate) runs: Arc<AtomicUsize>,
}

impl Replica {
    /// The task every replica schedules. The winner waits at `gate` so that the others find the
    /// lock held; it returns its owner id.
    #[scheduled_lock(name = "tick-{suffix}", at_most = "10m", executor = self.locks)]
    pub(crate) async fn tick(&self, suffix: &str, gate: &Gate) -> String {
        shedlock_core::current::assert_locked();
        self.runs.fetch_add(1, Ordering::SeqCst);
        gate.pass().await;
        current_lock()
            .map(|lock| lock.record().owner().to_owned())
            .unwrap_or_default()
    }

    /// A task that fails after taking the lock.
    #[scheduled_lock(name = "fails-{suffix}", at_most = "10m", executor = self.locks)]
    pub(crate) async fn fails(&self, suffix: &str) -> Result<u32, std::num::ParseIntError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        let n: u32 = "not a number".parse()?;
        Ok(n)
    }

    /// A task that panics after taking the lock.
    #[scheduled_lock(name = "panics-{suffix}", at_most = "10m", executor = self.locks)]
    pub(crate) async fn panics(&self, suffix: &str) {
        self.runs.fetch_add(1, Ordering::SeqCst);
        panic!("the task panicked on purpose");
    }

    /// A templated name: one lock per tenant.
    #[scheduled_lock(name = "report-{suffix}-{tenant}", at_most = "10m", executor = &self.locks)]
    pub(crate) async fn report(&self, suffix: &str, tenant: &str, gate: &Gate) -> String {
        gate.pass().await;
        current_lock()
            .map(|lock| lock.name().to_owned())
            .unwrap_or_default()
    }
}

/// Three replicas, one per provider (all over the same store), with owner ids `replica-0` to
/// `replica-2`.
///
/// # Panics
///
/// If an executor cannot be built.
pub(crate) fn replicas<P: LockProvider>(providers: [P; 3]) -> [Replica; 3] {
    let mut i = 0;
    providers.map(|provider| {
        let replica = Replica {
            locks: LockingTaskExecutor::builder(provider)
                .owner_id(format!("replica-{i}"))
                .build()
                .expect("valid executor"),
            runs: Arc::new(AtomicUsize::new(0)),
        };
        i += 1;
        replica
    })
}

fn total_runs(replicas: &[Replica]) -> usize {
    replicas.iter().map(|r| r.runs.load(Ordering::SeqCst)).sum()
}

/// Joins the next finished call, failing the test after [`DEADLINE`].
async fn next<T: 'static>(calls: &mut JoinSet<T>) -> T {
    tokio::time::timeout(DEADLINE, calls.join_next())
        .await
        .expect("a call finished before the deadline")
        .expect("a call was pending")
        .expect("the call did not panic")
}

/// Each round, the three replicas call `tick` at once: exactly one runs (the others return
/// `Ok(None)` while it holds the lock), then the lock is free for the next round.
pub(crate) async fn exactly_one_runs_per_round(
    replicas: &[Replica; 3],
    suffix: &str,
    rounds: usize,
) {
    for round in 1..=rounds {
        let gate = Gate::closed();
        let mut calls = JoinSet::new();
        for replica in replicas.clone() {
            let (gate, suffix) = (Arc::clone(&gate), suffix.to_owned());
            calls.spawn(async move { replica.tick(&suffix, &gate).await });
        }
        // The winner is parked at the gate, so the other two must come back skipped.
        for _ in 0..2 {
            let skipped = next(&mut calls).await.expect("no store error");
            assert_eq!(skipped, None, "round {round}: a second replica ran");
        }
        // The winner took the lock before the others were refused; wait until its body runs.
        gate.entered().await;
        assert_eq!(
            total_runs(replicas),
            round,
            "round {round}: exactly one body ran"
        );
        gate.release();
        let owner = next(&mut calls).await.expect("no store error");
        let owner = owner.expect("the winner ran");
        assert!(owner.starts_with("replica-"), "{owner}");
    }
}

/// A body's `Err` comes back as `Ok(Some(Err))`, and the lock is released for the next call.
pub(crate) async fn errors_propagate_and_release(replicas: &[Replica; 3], suffix: &str) {
    for (i, replica) in replicas.iter().enumerate() {
        let outcome = replica.fails(suffix).await.expect("no store error");
        let error = outcome
            .expect("the lock was free")
            .expect_err("the body failed");
        assert_eq!(error.to_string(), "invalid digit found in string");
        assert_eq!(
            total_runs(replicas),
            i + 1,
            "the lock was released after the error"
        );
    }
}

/// A panicking body releases the lock; the panic reaches the caller.
pub(crate) async fn panics_release(replicas: &[Replica; 3], suffix: &str) {
    let first = replicas[0].clone();
    let suffix_owned = suffix.to_owned();
    let joined = tokio::spawn(async move { first.panics(&suffix_owned).await }).await;
    assert!(joined.expect_err("the panic resumed").is_panic());
    let second = replicas[1].clone();
    let suffix_owned = suffix.to_owned();
    let joined = tokio::spawn(async move { second.panics(&suffix_owned).await }).await;
    assert!(
        joined
            .expect_err("the lock was released, so the body ran and panicked")
            .is_panic()
    );
    assert_eq!(total_runs(replicas), 2);
}

/// `report-{tenant}` locks each tenant on its own: holding one tenant's lock does not stop
/// another's, but does stop the same tenant on another replica.
pub(crate) async fn templated_names_lock_independently(replicas: &[Replica; 3], suffix: &str) {
    let gate = Gate::closed();
    let held = {
        let (replica, gate, suffix) = (replicas[0].clone(), Arc::clone(&gate), suffix.to_owned());
        tokio::spawn(async move { replica.report(&suffix, "eu", &gate).await })
    };
    gate.entered().await;
    let open = Gate::open();
    let skipped = replicas[1]
        .report(suffix, "eu", &open)
        .await
        .expect("no store error");
    assert_eq!(skipped, None, "eu is held by replica 0");
    let us = replicas[1]
        .report(suffix, "us", &open)
        .await
        .expect("no store error");
    assert_eq!(us.as_deref(), Some(format!("report-{suffix}-us").as_str()));
    gate.release();
    let eu_name = tokio::time::timeout(DEADLINE, held)
        .await
        .expect("replica 0 finished")
        .expect("no panic")
        .expect("no store error");
    assert_eq!(eu_name, Some(format!("report-{suffix}-eu")));
}
