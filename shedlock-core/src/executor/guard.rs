//! [`LockGuard`], a held lock, and how it is released. It is released explicitly, or in the
//! background when dropped.

use std::fmt;
use std::ops::Deref;
use std::time::Duration;

use tokio::task::JoinHandle;

#[cfg(doc)]
use super::LockingTaskExecutor;
use crate::current::LockHandle;
use crate::drain::InFlight;
use crate::error::Result;
use crate::keepalive::Lease;

/// A held lock. Release it with [`release`](Self::release). Dropping it releases it in the
/// background, honouring `at_least`. Derefs to [`LockHandle`] for the fencing token, the lost-lock
/// signal and extension.
///
/// The background release of a dropped guard is a spawned task. The runtime may shut down before it
/// runs, as for a guard dropped as `main` returns. The lock then stays held until its `at_most`.
/// Release explicitly, or call [`LockingTaskExecutor::shutdown`] before `main` returns. It waits
/// for background releases.
#[must_use = "dropping the guard releases the lock at once"]
pub struct LockGuard {
    pub(super) handle: LockHandle,
    pub(super) at_least: Duration,
    pub(super) keeper: Option<JoinHandle<()>>,
    /// The executor's record of this lock, ended once its release has finished.
    pub(super) registration: Option<InFlight>,
    pub(super) released: bool,
}

impl fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockGuard")
            .field("handle", &self.handle)
            .field("at_least", &self.at_least)
            .field("keep_alive", &self.keeper.is_some())
            .finish_non_exhaustive()
    }
}

impl Deref for LockGuard {
    type Target = LockHandle;

    fn deref(&self) -> &LockHandle {
        &self.handle
    }
}

impl LockGuard {
    /// A handle to this lock that outlives the guard's borrow. Clones share state.
    #[must_use]
    pub fn handle(&self) -> LockHandle {
        self.handle.clone()
    }

    /// Releases the lock now: `lock_until = max(now, locked_at + at_least)`. Answers `Ok(false)` if
    /// the lock had already passed to another holder.
    ///
    /// If this future is dropped before the release finished, the guard releases in the background
    /// as on drop.
    ///
    /// # Errors
    ///
    /// A store failure or timeout. It is logged at ERROR and counted. The lock then ends at its
    /// `at_most`.
    pub async fn release(mut self) -> Result<bool> {
        // Inline, for the common case's speed. If this future is dropped before the release
        // finished, `released` is still false and `Drop` releases in the background.
        let result = finish(
            self.handle.lease().clone(),
            self.keeper.take(),
            self.at_least,
        )
        .await;
        self.released = true;
        if let Some(registration) = self.registration.take() {
            registration.finish();
        }
        result
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        let lease = self.handle.lease().clone();
        let keeper = self.keeper.take();
        let at_least = self.at_least;
        let registration = self.registration.take();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            tracing::debug!(lock = self.handle.name(), "lock guard dropped; releasing");
            // Registered until the release has finished, so a drain waits for it.
            runtime.spawn(async move {
                let _ = finish(lease, keeper, at_least).await;
                if let Some(registration) = registration {
                    registration.finish();
                }
            });
        } else {
            if let Some(registration) = registration {
                registration.finish();
            }
            if let Some(keeper) = keeper {
                keeper.abort();
            }
            tracing::warn!(
                lock = self.handle.name(),
                "lock guard dropped outside a tokio runtime; the lock stays held until at_most"
            );
        }
    }
}

/// Stops keep-alive, then releases. It waits until no extension can still be in flight, so none
/// lands after the release.
pub(super) async fn finish(
    lease: Lease,
    keeper: Option<JoinHandle<()>>,
    at_least: Duration,
) -> Result<bool> {
    if let Some(keeper) = keeper {
        keeper.abort();
        let _ = keeper.await;
    }
    lease.release(at_least).await
}
