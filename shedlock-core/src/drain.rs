//! The executor's graceful drain. It stops new runs, lets runs in flight finish within a grace, and
//! cancels the rest. It releases every lock, and returns once every release is done or has failed.
//!
//! Every lock the executor hands out, a [`LockGuard`](crate::LockGuard) or the run of an `execute`,
//! is registered here from acquisition until its release has finished, a dropped guard's background
//! release included. So the drain knows every lock it must release and waits for background
//! releases too.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinSet};

use crate::error::{Error, Result};
use crate::keepalive::Lease;
use crate::provider::LockRecord;

/// One acquisition: lock, owner, `locked_at` and fencing token. None changes while it is held.
type Acquisition = (String, String, chrono::DateTime<chrono::Utc>, Option<i64>);

fn acquisition(record: &LockRecord) -> Acquisition {
    (
        record.name().to_owned(),
        record.owner().to_owned(),
        record.locked_at(),
        record.fencing_token(),
    )
}

/// Every acquisition a guard of this process holds, whichever executor handed it out. They share
/// the process's owner id. So a scheduler must never take one of them for a fire claim of its own
/// whose reply was lost (see docs/guarantees.md, "Lost replies").
fn held_in_process() -> std::sync::MutexGuard<'static, HashMap<Acquisition, usize>> {
    static HELD: std::sync::OnceLock<Mutex<HashMap<Acquisition, usize>>> =
        std::sync::OnceLock::new();
    HELD.get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// Whether a guard of this process holds `record`'s acquisition now.
#[cfg(feature = "scheduler")]
pub(crate) fn is_held_in_process(record: &LockRecord) -> bool {
    held_in_process().contains_key(&acquisition(record))
}

/// Where the drain is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum DrainPhase {
    /// New runs start.
    Running,
    /// No new runs. Runs in flight are told the drain began
    /// ([`LockHandle::stopping`](crate::current::LockHandle::stopping)) and get the grace period.
    Draining,
    /// The grace is over. Runs still going are told to stop, and their locks are released.
    Cancelling,
    /// Every release has finished or failed.
    Done,
}

/// What a drain did. See [`LockingTaskExecutor::shutdown`](crate::LockingTaskExecutor::shutdown).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Drained {
    /// Locks whose holders finished and released them within the grace period.
    pub finished: usize,
    /// Locks still held when the grace ran out. The drain told their holders to stop, see
    /// [`LockHandle::cancelled`](crate::current::LockHandle::cancelled), and released them.
    pub cancelled: usize,
    /// Releases by the drain that failed or timed out. Those locks end at their `at_most`.
    pub release_failures: usize,
}

struct Entry {
    lease: Lease,
    at_least: Duration,
    keeper: Option<AbortHandle>,
}

pub(crate) struct DrainState {
    phase: watch::Sender<DrainPhase>,
    live: Mutex<HashMap<u64, Entry>>,
    /// Acquires and fire claims in flight. A lock they win is registered or given back.
    acquiring: std::sync::atomic::AtomicUsize,
    /// Registered locks plus acquires in flight. The drain waits for zero.
    count: watch::Sender<usize>,
    next_id: AtomicU64,
    /// Whether a caller runs the drain. The phase may have left `Running` before, by
    /// [`begin`](Self::begin).
    driven: std::sync::atomic::AtomicBool,
    /// Locks held when the drain began.
    held_at_start: std::sync::atomic::AtomicUsize,
    outcome: Mutex<Option<Drained>>,
}

/// An acquire in flight. See [`DrainState::begin_acquire`].
pub(crate) struct AcquireTicket(Arc<DrainState>);

impl Drop for AcquireTicket {
    fn drop(&mut self) {
        let live = self.0.live();
        self.0.acquiring.fetch_sub(1, Ordering::SeqCst);
        self.0.publish(&live);
    }
}

/// One registered lock. Call [`finish`](Self::finish) when its release has completed.
pub(crate) struct InFlight {
    drain: Arc<DrainState>,
    id: u64,
}

impl InFlight {
    pub(crate) fn finish(self) {
        self.drain.deregister(self.id);
    }

    /// Resolves when the drain cancels runs, because the grace is over.
    pub(crate) fn cancel_signal(&self) -> watch::Receiver<DrainPhase> {
        self.drain.phase.subscribe()
    }
}

impl DrainState {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            phase: watch::channel(DrainPhase::Running).0,
            live: Mutex::new(HashMap::new()),
            acquiring: std::sync::atomic::AtomicUsize::new(0),
            count: watch::channel(0).0,
            next_id: AtomicU64::new(1),
            driven: std::sync::atomic::AtomicBool::new(false),
            held_at_start: std::sync::atomic::AtomicUsize::new(0),
            outcome: Mutex::new(None),
        })
    }

    fn live(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Entry>> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The drain's phase, to wait for one.
    #[cfg(feature = "scheduler")]
    pub(crate) fn phase(&self) -> watch::Receiver<DrainPhase> {
        self.phase.subscribe()
    }

    /// Whether new runs are refused.
    pub(crate) fn is_stopping(&self) -> bool {
        *self.phase.borrow() != DrainPhase::Running
    }

    /// Refuses with the shutdown error once the drain has begun.
    pub(crate) fn check_running(&self, what: &'static str) -> Result<()> {
        if self.is_stopping() {
            return Err(Error::shutdown(what));
        }
        Ok(())
    }

    /// Registers a held lock. Once the drain has begun, it refuses, and the caller then releases
    /// the lock.
    pub(crate) fn register(
        self: &Arc<Self>,
        lease: &Lease,
        at_least: Duration,
        keeper: Option<AbortHandle>,
    ) -> Result<InFlight> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        {
            let mut live = self.live();
            // Checked under the map's lock: the drain takes its snapshot under it too, so a lock
            // is either refused here or seen by the drain.
            self.check_running("lock")?;
            *held_in_process()
                .entry(acquisition(&lease.record()))
                .or_default() += 1;
            live.insert(
                id,
                Entry {
                    lease: lease.clone(),
                    at_least,
                    keeper,
                },
            );
            self.publish(&live);
        }
        Ok(InFlight {
            drain: self.clone(),
            id,
        })
    }

    fn deregister(&self, id: u64) {
        let mut live = self.live();
        if let Some(entry) = live.remove(&id) {
            let key = acquisition(&entry.lease.record());
            let mut held = held_in_process();
            if let Some(count) = held.get_mut(&key) {
                *count -= 1;
                if *count == 0 {
                    held.remove(&key);
                }
            }
            drop(held);
            self.publish(&live);
        }
    }

    fn publish(&self, live: &HashMap<u64, Entry>) {
        self.count
            .send_replace(live.len() + self.acquiring.load(Ordering::SeqCst));
    }

    /// Marks an acquire in flight until the ticket is dropped, so the drain waits for it. The
    /// ticket is dropped after the lock it won was registered or given back.
    pub(crate) fn begin_acquire(self: &Arc<Self>) -> AcquireTicket {
        let live = self.live();
        self.acquiring.fetch_add(1, Ordering::SeqCst);
        self.publish(&live);
        AcquireTicket(self.clone())
    }

    /// Begins the drain now, without waiting. New runs are refused, and runs in flight see
    /// [`LockHandle::stopping`](crate::current::LockHandle::stopping) fire. The
    /// [`drain`](Self::drain) that follows gives the grace and releases.
    pub(crate) fn begin(&self) {
        // Under the map's lock, as `register` checks the phase: a lock is counted here or
        // refused there.
        let live = self.live();
        let first = self.phase.send_if_modified(|phase| {
            let first = *phase == DrainPhase::Running;
            if first {
                *phase = DrainPhase::Draining;
            }
            first
        });
        if first {
            self.held_at_start.store(live.len(), Ordering::SeqCst);
        }
    }

    /// The drain itself. Every caller, clones of the executor included, waits for the same one.
    pub(crate) async fn drain(
        self: &Arc<Self>,
        grace: Duration,
        call_timeout: Duration,
    ) -> Drained {
        self.begin();
        if self.driven.swap(true, Ordering::SeqCst) {
            let mut phase = self.phase.subscribe();
            let _ = phase.wait_for(|p| *p == DrainPhase::Done).await;
            return self
                .outcome
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .unwrap_or_default();
        }
        let held_at_start = self.held_at_start.load(Ordering::SeqCst);
        tracing::info!(
            held = held_at_start,
            grace = %shedlock_duration::format(grace),
            "shutting down: no new runs; waiting for runs in flight"
        );
        let mut count = self.count.subscribe();
        let idle = tokio::time::timeout(grace, count.wait_for(|n| *n == 0))
            .await
            .is_ok();
        let mut outcome = Drained::default();
        if !idle {
            self.cancel_and_release(&mut outcome, call_timeout).await;
            // Acquires still in flight end within their call timeout (registered: released
            // above or refused and given back by their caller).
            let _ = tokio::time::timeout(call_timeout, count.wait_for(|n| *n == 0)).await;
        }
        // Locks held when the drain began, minus those it had to cancel: they finished.
        outcome.finished = held_at_start.saturating_sub(outcome.cancelled);
        *self.outcome.lock().unwrap_or_else(PoisonError::into_inner) = Some(outcome);
        self.phase.send_replace(DrainPhase::Done);
        tracing::info!(
            finished = outcome.finished,
            cancelled = outcome.cancelled,
            release_failures = outcome.release_failures,
            "shutdown complete: every lock released or failed"
        );
        outcome
    }

    /// Tells the runs still going to stop, and gives them [`stop_window`] to stop and release their
    /// own locks. A scheduler's run drops its body and releases. A task that watches
    /// `current_lock()` returns. Then it releases what is still held itself. So a cancelled run
    /// that stops when told never works on after its lock was given back.
    async fn cancel_and_release(&self, outcome: &mut Drained, call_timeout: Duration) {
        // Counted before the signal: a run that sees the cancel and releases its lock at once
        // (on another thread) is still counted cancelled, not finished.
        outcome.cancelled = self.live().len();
        self.phase.send_replace(DrainPhase::Cancelling);
        tracing::warn!(
            still_held = outcome.cancelled,
            "grace period over: cancelling the runs still going"
        );
        let mut count = self.count.subscribe();
        let window = stop_window(call_timeout);
        // Not `wait_for` with the map's lock inside: `publish` takes them the other way round.
        let stopped = async {
            while !self.live().is_empty() {
                if count.changed().await.is_err() {
                    break;
                }
            }
        };
        let _ = tokio::time::timeout(window, stopped).await;
        {
            let entries: Vec<(u64, Lease, Duration, Option<AbortHandle>)> = self
                .live()
                .iter()
                .map(|(id, e)| (*id, e.lease.clone(), e.at_least, e.keeper.clone()))
                .collect();
            if entries.is_empty() {
                return;
            }
            tracing::warn!(
                still_held = entries.len(),
                window = %shedlock_duration::format(window),
                "runs did not stop within the stop window: releasing their locks"
            );
            let mut releases = JoinSet::new();
            for (id, lease, at_least, keeper) in entries {
                if let Some(keeper) = keeper {
                    keeper.abort();
                }
                releases.spawn(async move { (id, lease.release(at_least).await) });
            }
            while let Some(joined) = releases.join_next().await {
                match joined {
                    Ok((id, result)) => {
                        if result.is_err() {
                            outcome.release_failures += 1;
                        }
                        self.deregister(id);
                    }
                    Err(_) => outcome.release_failures += 1,
                }
            }
        }
    }
}

/// How long cancelled runs get to stop and release their own locks before the drain releases them.
/// It is a second, or the call timeout if shorter.
pub(crate) fn stop_window(call_timeout: Duration) -> Duration {
    call_timeout.min(Duration::from_secs(1))
}

/// Resolves when `phase` reaches `at_least`. Never resolves if it never does.
pub(crate) async fn reached(mut phase: watch::Receiver<DrainPhase>, at_least: DrainPhase) {
    if phase.wait_for(|p| *p >= at_least).await.is_err() {
        std::future::pending::<()>().await;
    }
}
