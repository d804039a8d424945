//! For task bodies: the lock the running task holds ([`LockHandle`], [`current_lock`]), and the
//! assertions that code runs under one ([`assert_locked`]).
//!
//! Everything here is **task-local**, tokio's `task_local!`, not thread-local. It follows the
//! locked future across `.await`s and worker threads, but not into tasks the locked task spawns.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::watch;

use crate::config::validate_durations;
use crate::drain::DrainPhase;
use crate::error::Result;
use crate::keepalive::Lease;
use crate::provider::{LockProvider, LockRecord};

tokio::task_local! {
    static CURRENT: Frame;
    static ASSERTIONS_OFF: ();
}

static ASSERTIONS_DISABLED: AtomicBool = AtomicBool::new(false);

/// One held lock in the running task's chain, innermost first.
#[derive(Clone)]
struct Frame {
    handle: LockHandle,
    parent: Option<Arc<Frame>>,
}

/// A held lock: its fencing token, whether it was lost, and a way to extend it. This is ShedLock's
/// `LockExtender` plus the lost-lock and shutdown signals.
///
/// A [`LockGuard`](crate::LockGuard) derefs to one. Inside a locked task, a `#[scheduled_lock]`
/// body included, [`current_lock`] gives one. Clones share state.
///
/// # Stop signals
///
/// A run learns from three signals that it should stop, each with a `bool` check and a future to
/// race against the work with `tokio::select!`. A graceful shutdown, by
/// [`Shutdown`](crate::Shutdown) or the executor's own, fires them in this order.
///
/// | signal | fires | the lock |
/// |---|---|---|
/// | [`stopping`](Self::stopping), [`is_stopping`](Self::is_stopping) | when the executor's drain begins, at the start of the grace period | still held: finish, or checkpoint and return early to release it |
/// | [`cancelled`](Self::cancelled), [`is_cancelled`](Self::is_cancelled) | when the grace is over and the run is still going | still held for one stop window (a second, or the call timeout if shorter); then the run is dropped, or the executor releases the lock |
/// | [`lost`](Self::lost), [`is_lost`](Self::is_lost) | when the lock is no longer this run's: released, an extension refused, or `at_most` passed without a successful extension | another replica may hold it now |
///
/// A scheduler's run of a `leader_only` job is also stopped when its leader term ends. That is
/// [`LeaderTerm::ended`](crate::latch::LeaderTerm::ended), from `RunContext::term`. It gets the
/// stop window, not the grace. A lock that no executor handed out, such as a leader latch's, is
/// never stopping nor cancelled.
///
/// ```
/// use std::time::Duration;
/// use shedlock_core::{current_lock, InMemoryLockProvider, LockConfig, LockingTaskExecutor};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> shedlock_core::Result<()> {
/// let executor = LockingTaskExecutor::new(InMemoryLockProvider::new())?;
/// let cfg = LockConfig::new("import", Duration::from_secs(60))?;
/// executor
///     .execute(&cfg, async {
///         let lock = current_lock().expect("inside a locked task");
///         assert!(lock.fencing_token().is_some());
///         // A long batch: ask for more time before the lock runs out.
///         assert!(lock.extend(Duration::from_secs(120)).await?);
///         assert!(!lock.is_lost());
///         Ok::<_, shedlock_core::Error>(())
///     })
///     .await?
///     .expect("not held elsewhere")?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct LockHandle {
    lease: Lease,
    name: Arc<str>,
    fencing_token: Option<i64>,
    /// The executor's drain phase, for locks an executor handed out.
    cancel: Option<watch::Receiver<DrainPhase>>,
}

impl LockHandle {
    pub(crate) fn new(lease: Lease) -> Self {
        let record = lease.record();
        Self {
            name: Arc::from(record.name()),
            fencing_token: record.fencing_token(),
            lease,
            cancel: None,
        }
    }

    /// A handle that also carries the executor's cancellation signal.
    pub(crate) fn with_cancel(lease: Lease, cancel: watch::Receiver<DrainPhase>) -> Self {
        Self {
            cancel: Some(cancel),
            ..Self::new(lease)
        }
    }

    /// Whether the executor's shutdown has begun. No new runs start, and this one has the grace
    /// period to finish (see [Stop signals](Self#stop-signals)).
    #[must_use]
    pub fn is_stopping(&self) -> bool {
        self.cancel
            .as_ref()
            .is_some_and(|rx| *rx.borrow() >= DrainPhase::Draining)
    }

    /// Resolves when the executor's shutdown begins, at the start of the grace period, see [Stop
    /// signals](Self#stop-signals). A long run can checkpoint and return, releasing its lock early
    /// instead of being cancelled when the grace is over:
    ///
    /// ```
    /// use std::time::Duration;
    /// use shedlock_core::{current_lock, InMemoryLockProvider, LockConfig, LockingTaskExecutor};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> shedlock_core::Result<()> {
    /// let executor = LockingTaskExecutor::new(InMemoryLockProvider::new())?;
    /// let cfg = LockConfig::new("import", Duration::from_secs(600))?;
    /// let run = tokio::spawn({
    ///     let executor = executor.clone();
    ///     async move {
    ///         executor.execute(&cfg, async {
    ///             let lock = current_lock().expect("locked");
    ///             let mut batches = 0;
    ///             while !lock.is_stopping() && batches < 100 {
    ///                 tokio::time::sleep(Duration::from_secs(1)).await; // one batch
    ///                 batches += 1;
    ///             }
    ///             batches // a checkpoint: where the next run resumes
    ///         }).await
    ///     }
    /// });
    /// tokio::time::sleep(Duration::from_millis(2500)).await; // two batches done
    /// let drained = executor.shutdown(Duration::from_secs(60)).await;
    /// assert_eq!((drained.finished, drained.cancelled), (1, 0));
    /// assert_eq!(run.await.expect("no panic")?, Some(3));
    /// # Ok(()) }
    /// ```
    pub async fn stopping(&self) {
        match &self.cancel {
            Some(rx) => crate::drain::reached(rx.clone(), DrainPhase::Draining).await,
            None => std::future::pending().await,
        }
    }

    /// Whether the executor's shutdown cancelled this run, its grace over with the lock held. The
    /// executor then releases the lock, so [`is_lost`](Self::is_lost) follows. Stop the work.
    #[must_use]
    pub fn is_cancelled(&self) -> bool {
        self.cancel
            .as_ref()
            .is_some_and(|rx| *rx.borrow() >= DrainPhase::Cancelling)
    }

    /// Resolves when the executor's shutdown cancels this run, at the end of the grace period, see
    /// [Stop signals](Self#stop-signals). Race it against the work, as [`lost`](Self::lost):
    ///
    /// ```
    /// use std::time::Duration;
    /// use shedlock_core::{current_lock, InMemoryLockProvider, LockConfig, LockingTaskExecutor};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> shedlock_core::Result<()> {
    /// let executor = LockingTaskExecutor::new(InMemoryLockProvider::new())?;
    /// let cfg = LockConfig::new("import", Duration::from_secs(600))?;
    /// let run = tokio::spawn({
    ///     let executor = executor.clone();
    ///     async move {
    ///         executor.execute(&cfg, async {
    ///             let lock = current_lock().expect("locked");
    ///             tokio::select! {
    ///                 () = lock.cancelled() => "stopped by shutdown",
    ///                 () = tokio::time::sleep(Duration::from_secs(300)) => "done",
    ///             }
    ///         }).await
    ///     }
    /// });
    /// tokio::time::sleep(Duration::from_secs(1)).await; // the run has started
    /// let drained = executor.shutdown(Duration::from_secs(10)).await;
    /// assert_eq!(drained.cancelled, 1);
    /// assert_eq!(run.await.expect("no panic")?, Some("stopped by shutdown"));
    /// # Ok(()) }
    /// ```
    pub async fn cancelled(&self) {
        match &self.cancel {
            Some(rx) => crate::drain::reached(rx.clone(), DrainPhase::Cancelling).await,
            None => std::future::pending().await,
        }
    }

    pub(crate) fn lease(&self) -> &Lease {
        &self.lease
    }

    /// The lock's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// This acquisition's fencing token. See [`LockRecord::fencing_token`].
    #[must_use]
    pub fn fencing_token(&self) -> Option<i64> {
        self.fencing_token
    }

    /// The record as last confirmed by the store. Its `lock_until` moves with each extension.
    #[must_use]
    pub fn record(&self) -> LockRecord {
        self.lease.record()
    }

    /// Whether the lock is lost. It is lost once it was released or the store refused an extension.
    /// It is also lost when no acquisition or extension succeeded within `at_most` of being sent,
    /// by this process's monotonic clock. Once lost, another replica may hold the lock.
    #[must_use]
    pub fn is_lost(&self) -> bool {
        self.lease.is_lost()
    }

    /// Resolves when the lock is lost, or at once if it already is. Race it against your work with
    /// `tokio::select!` to stop when another replica may have taken over.
    pub async fn lost(&self) {
        self.lease.lost().await;
    }

    /// Extends the lock to `now + at_most` by the store clock, as ShedLock's `LockExtender` does.
    /// `Ok(false)` means the lock is no longer ours. It is then marked lost.
    ///
    /// # Errors
    ///
    /// [`Error::is_invalid_config`](crate::Error::is_invalid_config) for a zero or oversized
    /// `at_most`. A store error or timeout otherwise. The lock's deadline is then unchanged.
    pub async fn extend(&self, at_most: Duration) -> Result<bool> {
        validate_durations(at_most, Duration::ZERO)?;
        self.lease.extend(at_most).await
    }
}

impl fmt::Debug for LockHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockHandle")
            .field("name", &self.name)
            .field("fencing_token", &self.fencing_token)
            .field("lost", &self.is_lost())
            .field("stopping", &self.is_stopping())
            .field("cancelled", &self.is_cancelled())
            .finish_non_exhaustive()
    }
}

/// Runs `fut` with `handle` as the task's current lock, on top of any it already holds.
pub(crate) async fn scope<F: Future>(handle: LockHandle, fut: F) -> F::Output {
    let parent = CURRENT.try_with(|frame| Arc::new(frame.clone())).ok();
    CURRENT.scope(Frame { handle, parent }, fut).await
}

/// Whether the running task already holds the lock `name` in `provider`. Used for re-entrancy.
pub(crate) fn holds(name: &str, provider: &Arc<dyn LockProvider>) -> Option<LockHandle> {
    CURRENT
        .try_with(|frame| {
            let mut frame = Some(frame);
            while let Some(f) = frame {
                if f.handle.name() == name && same_store(f.handle.lease().provider(), provider) {
                    return Some(f.handle.clone());
                }
                frame = f.parent.as_deref();
            }
            None
        })
        .ok()
        .flatten()
}

fn same_store(a: &Arc<dyn LockProvider>, b: &Arc<dyn LockProvider>) -> bool {
    std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
}

/// The innermost lock held by the running task, or `None` outside a locked task.
///
/// The lock context belongs to the **task** and does **not follow into `tokio::spawn`**. Pass a
/// spawned task the [`LockHandle`], which is `Clone`, if it needs the token, the lost-lock signal
/// or `extend`.
///
/// ```
/// use std::time::Duration;
/// use shedlock_core::{InMemoryLockProvider, LockConfig, LockingTaskExecutor, current_lock};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> shedlock_core::Result<()> {
/// assert!(current_lock().is_none(), "outside a locked task");
/// let executor = LockingTaskExecutor::new(InMemoryLockProvider::new())?;
/// let cfg = LockConfig::new("report", Duration::from_secs(60))?;
/// executor
///     .execute(&cfg, async {
///         let handle = current_lock().expect("inside the locked run");
///         assert_eq!(handle.name(), "report");
///         // A spawned task does not inherit it: hand it the handle instead.
///         let inherited = tokio::spawn(async { current_lock().is_some() }).await.unwrap();
///         assert!(!inherited);
///     })
///     .await?;
/// # Ok(()) }
/// ```
#[must_use]
pub fn current_lock() -> Option<LockHandle> {
    CURRENT.try_with(|frame| frame.handle.clone()).ok()
}

/// Whether the running task holds a lock. This is ShedLock's `LockAssert`, without the panic.
///
/// It answers whether the task runs *under* a lock, not whether that lock is still valid. A lock
/// lost mid-run still counts. Check [`LockHandle::is_lost`] for that.
///
/// ```
/// use std::time::Duration;
/// use shedlock_core::{InMemoryLockProvider, LockConfig, LockingTaskExecutor, current::is_locked};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> shedlock_core::Result<()> {
/// let executor = LockingTaskExecutor::new(InMemoryLockProvider::new())?;
/// let cfg = LockConfig::new("purge", Duration::from_secs(60))?;
/// assert!(!is_locked());
/// assert_eq!(executor.execute(&cfg, async { is_locked() }).await?, Some(true));
/// # Ok(()) }
/// ```
#[must_use]
pub fn is_locked() -> bool {
    CURRENT.try_with(|_| ()).is_ok()
}

/// Asserts that the running task holds a lock, like ShedLock's `LockAssert.assertLocked()`.
///
/// Put it at the top of a function that must only run under a lock, to catch a call path that
/// forgot the lock. Tests that call such functions directly can switch it off with
/// [`without_lock_assertions`] for one future or [`set_lock_assertions`] process-wide.
///
/// # Panics
///
/// Outside a task that holds a lock through the executor or `#[scheduled_lock]`, unless assertions
/// are switched off.
///
/// ```
/// use std::time::Duration;
/// use shedlock_core::{
///     InMemoryLockProvider, LockConfig, LockingTaskExecutor, current::assert_locked,
/// };
///
/// fn purge_old_rows() {
///     assert_locked();
///     // ...
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> shedlock_core::Result<()> {
/// let executor = LockingTaskExecutor::new(InMemoryLockProvider::new())?;
/// let cfg = LockConfig::new("purge", Duration::from_secs(60))?;
/// executor.execute(&cfg, async { purge_old_rows() }).await?;
/// // And in a test, without a lock:
/// shedlock_core::current::without_lock_assertions(async { purge_old_rows() }).await;
/// # Ok(()) }
/// ```
#[track_caller]
pub fn assert_locked() {
    if is_locked()
        || ASSERTIONS_DISABLED.load(Ordering::Relaxed)
        || ASSERTIONS_OFF.try_with(|()| ()).is_ok()
    {
        return;
    }
    panic!(
        "assert_locked: this code must run while holding a lock (through \
         LockingTaskExecutor::execute or #[scheduled_lock]); the current task holds none"
    );
}

/// Runs `fut` with [`assert_locked`] switched off, for tests.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// // Outside any lock, yet no panic:
/// use shedlock_core::current::{assert_locked, without_lock_assertions};
/// without_lock_assertions(async { assert_locked() }).await;
/// # }
/// ```
pub async fn without_lock_assertions<F: Future>(fut: F) -> F::Output {
    ASSERTIONS_OFF.scope((), fut).await
}

/// Switches [`assert_locked`] on (`true`, the default) or off for the whole process. Prefer
/// [`without_lock_assertions`], which does not affect tests running in parallel.
pub fn set_lock_assertions(enabled: bool) {
    ASSERTIONS_DISABLED.store(!enabled, Ordering::Relaxed);
}
