//! [`FaultyProvider`], a wrapper around a store that fails, hangs or delays chosen operations. An
//! [`Operation`] names the call, and a [`Fault`] says how it misbehaves. Use it to test how callers
//! react.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::sleep;

use crate::error::{Error, Result};
use crate::fire::{Fire, FireClaim};
use crate::jobs::{Definition, RunReport};
use crate::provider::{ClaimRequest, LockProvider, LockRecord, ReleaseRequest};
use crate::trigger::{PendingTrigger, TriggerClaim, TriggerWake};

/// A store operation, for [`FaultyProvider`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Operation {
    /// [`LockProvider::acquire`].
    Acquire,
    /// [`LockProvider::extend`].
    Extend,
    /// [`LockProvider::release`].
    Release,
    /// [`LockProvider::holder`].
    Holder,
    /// [`LockProvider::claim_fire`].
    ClaimFire,
    /// [`LockProvider::claim_fires`], one call of a batch. A fault of its own applies to the whole
    /// batch: [`Fault::FailAfterApplying`] is a batch whose reply was lost. Without one, the batch's
    /// claims go one after the other through [`ClaimFire`](Self::ClaimFire), with its faults.
    ClaimFires,
    /// [`LockProvider::claim_trigger`].
    ClaimTrigger,
    /// [`LockProvider::pending_triggers`].
    PendingTriggers,
    /// The recording part of [`LockProvider::release_run`]. A fault here fails it before the inner
    /// store is asked. Its caller then releases plainly. A [`Release`](Self::Release) fault applies
    /// to `release_run` too, as to any release.
    Record,
    /// [`LockProvider::release_runs`], one call of a batch. A fault of its own applies to the whole
    /// batch. Without one, the batch's releases go one after the other through `release_run`, with
    /// the faults of [`Record`](Self::Record) and [`Release`](Self::Release).
    ReleaseRuns,
}

/// What a [`FaultyProvider`] does instead of the real call, or after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// Return a backend error without calling the inner store.
    Fail,
    /// Never return, like a black-holed connection. Only a caller's timeout ends the call.
    Hang,
    /// Call the inner store, then return a backend error, like a commit whose reply was lost.
    FailAfterApplying,
    /// Wait this long, then call the inner store, like a slow network or a busy database. Under a
    /// paused tokio clock the wait is exact.
    Delay(Duration),
}

/// Wraps a store and makes chosen operations fail or hang, to test how callers react.
///
/// ```
/// use std::time::Duration;
/// use shedlock_core::testkit::{Fault, FaultyProvider, Operation};
/// use shedlock_core::{InMemoryLockProvider, provider::LockProvider};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let store = FaultyProvider::new(InMemoryLockProvider::new());
/// store.inject_times(Operation::Acquire, Fault::Fail, 1);
/// assert!(store.acquire("job", Duration::from_secs(5), "me").await.is_err());
/// assert!(store.acquire("job", Duration::from_secs(5), "me").await.unwrap().is_some());
/// assert_eq!(store.calls(Operation::Acquire), 2);
/// # }
/// ```
pub struct FaultyProvider<P> {
    inner: P,
    faults: Mutex<HashMap<Operation, (Fault, Option<usize>)>>,
    calls: [AtomicUsize; 10],
}

impl<P: LockProvider> FaultyProvider<P> {
    /// Wraps `inner`. No faults until injected.
    pub fn new(inner: P) -> Self {
        Self {
            inner,
            faults: Mutex::new(HashMap::new()),
            calls: Default::default(),
        }
    }

    /// The wrapped store.
    pub fn inner(&self) -> &P {
        &self.inner
    }

    /// Makes every call of `operation` misbehave until [`heal`](Self::heal).
    pub fn inject(&self, operation: Operation, fault: Fault) {
        self.faults().insert(operation, (fault, None));
    }

    /// Makes the next `times` calls of `operation` misbehave. None do if `times` is 0.
    pub fn inject_times(&self, operation: Operation, fault: Fault, times: usize) {
        if times > 0 {
            self.faults().insert(operation, (fault, Some(times)));
        }
    }

    /// Ends the faults of `operation`.
    pub fn heal(&self, operation: Operation) {
        self.faults().remove(&operation);
    }

    /// Ends all faults.
    pub fn heal_all(&self) {
        self.faults().clear();
    }

    /// How many calls of `operation` were made, faulty or not.
    pub fn calls(&self, operation: Operation) -> usize {
        self.calls[operation as usize].load(Ordering::SeqCst)
    }

    fn faults(&self) -> std::sync::MutexGuard<'_, HashMap<Operation, (Fault, Option<usize>)>> {
        self.faults.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts the call and takes the fault to apply to it, if any.
    fn take_fault(&self, operation: Operation) -> Option<Fault> {
        self.calls[operation as usize].fetch_add(1, Ordering::SeqCst);
        let mut faults = self.faults();
        let (fault, remaining) = faults.get_mut(&operation).map(|(f, r)| (*f, r))?;
        if let Some(left) = remaining {
            *left -= 1;
            if *left == 0 {
                faults.remove(&operation);
            }
        }
        Some(fault)
    }

    async fn call<T>(
        &self,
        operation: Operation,
        real: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        let injected = || {
            Error::backend_message(format!("{operation:?} failed (injected fault)").to_lowercase())
        };
        match self.take_fault(operation) {
            None => real.await,
            Some(Fault::Fail) => Err(injected()),
            Some(Fault::Hang) => std::future::pending().await,
            Some(Fault::FailAfterApplying) => {
                let _ = real.await;
                Err(injected())
            }
            Some(Fault::Delay(delay)) => {
                sleep(delay).await;
                real.await
            }
        }
    }
}

#[async_trait]
impl<P: LockProvider> LockProvider for FaultyProvider<P> {
    async fn acquire(
        &self,
        name: &str,
        at_most: Duration,
        owner: &str,
    ) -> Result<Option<LockRecord>> {
        self.call(Operation::Acquire, self.inner.acquire(name, at_most, owner))
            .await
    }

    async fn extend(&self, record: &LockRecord, at_most: Duration) -> Result<Option<LockRecord>> {
        self.call(Operation::Extend, self.inner.extend(record, at_most))
            .await
    }

    async fn release(&self, record: &LockRecord, at_least: Duration) -> Result<bool> {
        self.call(Operation::Release, self.inner.release(record, at_least))
            .await
    }

    async fn holder(&self, name: &str) -> Result<Option<LockRecord>> {
        self.call(Operation::Holder, self.inner.holder(name)).await
    }

    async fn claim_fire(
        &self,
        name: &str,
        fire: &Fire,
        at_most: Duration,
        owner: &str,
    ) -> Result<FireClaim> {
        self.call(
            Operation::ClaimFire,
            self.inner.claim_fire(name, fire, at_most, owner),
        )
        .await
    }

    async fn claim_fires(
        &self,
        claims: &[ClaimRequest<'_>],
        owner: &str,
    ) -> Result<Vec<Result<FireClaim>>> {
        if self.faults().contains_key(&Operation::ClaimFires) {
            return self
                .call(Operation::ClaimFires, self.inner.claim_fires(claims, owner))
                .await;
        }
        self.calls[Operation::ClaimFires as usize].fetch_add(1, Ordering::SeqCst);
        let mut answers = Vec::with_capacity(claims.len());
        for claim in claims {
            answers.push(
                self.claim_fire(claim.name, claim.fire, claim.at_most, owner)
                    .await,
            );
        }
        Ok(answers)
    }

    fn fire_batch_limit(&self) -> usize {
        self.inner.fire_batch_limit()
    }

    async fn release_run(
        &self,
        record: &LockRecord,
        at_least: Duration,
        run: &RunReport,
    ) -> Result<bool> {
        // Counted once per recorded release; only a fault of `Fail` is meaningful here.
        if self.take_fault(Operation::Record).is_some() {
            return Err(Error::backend_message(
                "record failed (injected fault)".to_owned(),
            ));
        }
        self.call(
            Operation::Release,
            self.inner.release_run(record, at_least, run),
        )
        .await
    }

    async fn release_runs(&self, releases: &[ReleaseRequest<'_>]) -> Result<Vec<Result<bool>>> {
        if self.faults().contains_key(&Operation::ReleaseRuns) {
            return self
                .call(Operation::ReleaseRuns, self.inner.release_runs(releases))
                .await;
        }
        self.calls[Operation::ReleaseRuns as usize].fetch_add(1, Ordering::SeqCst);
        let mut answers = Vec::with_capacity(releases.len());
        for release in releases {
            answers.push(
                self.release_run(release.record, release.at_least, release.run)
                    .await,
            );
        }
        Ok(answers)
    }

    fn release_batch_limit(&self) -> usize {
        self.inner.release_batch_limit()
    }

    async fn publish_definitions(
        &self,
        replica: &str,
        version: &str,
        definitions: &[Definition],
        ttl: Duration,
    ) -> Result<()> {
        self.inner
            .publish_definitions(replica, version, definitions, ttl)
            .await
    }

    async fn pending_triggers(&self) -> Result<Vec<PendingTrigger>> {
        self.call(Operation::PendingTriggers, self.inner.pending_triggers())
            .await
    }

    async fn claim_trigger(
        &self,
        name: &str,
        id: i64,
        at_most: Duration,
        owner: &str,
    ) -> Result<TriggerClaim> {
        self.call(
            Operation::ClaimTrigger,
            self.inner.claim_trigger(name, id, at_most, owner),
        )
        .await
    }

    async fn watch_triggers(&self) -> Result<TriggerWake> {
        self.inner.watch_triggers().await
    }

    fn max_name_len(&self) -> usize {
        self.inner.max_name_len()
    }
}
