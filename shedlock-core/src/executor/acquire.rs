//! The executor's store acquire, which stays safe when its caller is cancelled. The call is then
//! finished in a task of its own, and a lock it won is released at once.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use super::LockingTaskExecutor;
use crate::error::{Error, Result};
use crate::keepalive::timed;
use crate::provider::{LockProvider, LockRecord};

impl LockingTaskExecutor {
    /// The store's acquire, under the call timeout, polled inline in the caller's task. The timeout
    /// is never longer than `at_most`. The caller may be cancelled while the call is in flight. The
    /// call is then handed to a task of its own that finishes it. That task releases what it won at
    /// once, instead of leaving it held until `at_most`.
    pub(super) async fn acquire(
        &self,
        name: &str,
        at_most: Duration,
    ) -> Result<Option<LockRecord>> {
        let provider = self.inner.provider.clone();
        let (lock, owner) = (name.to_owned(), self.inner.owner_id.clone());
        let timeout = self.inner.call_timeout.min(at_most);
        InFlightAcquire {
            call: Some(Box::pin(async move {
                timed("acquire", timeout, provider.acquire(&lock, at_most, &owner)).await
            })),
            provider: self.inner.provider.clone(),
            call_timeout: self.inner.call_timeout,
        }
        .await
    }
}

/// A store acquire with its own copies of what it needs, so that it can outlive its caller.
type AcquireCall = Pin<Box<dyn Future<Output = Result<Option<LockRecord>>> + Send>>;

/// An acquire call in flight, polled by its caller. If dropped before it finished, because the
/// caller was cancelled, it moves the call into a spawned task. That task lets it finish and
/// releases a lock it won. If dropped outside a runtime, or while the runtime shuts down, the call
/// is abandoned. A shutdown cancels the spawned task too. A lock it had already won then stays held
/// until `at_most`.
struct InFlightAcquire {
    call: Option<AcquireCall>,
    provider: Arc<dyn LockProvider>,
    call_timeout: Duration,
}

impl Future for InFlightAcquire {
    type Output = Result<Option<LockRecord>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(call) = self.call.as_mut() else {
            return Poll::Ready(Err(Error::backend_message(
                "acquire the lock (polled after it finished)",
            )));
        };
        let outcome = catch_unwind(AssertUnwindSafe(|| call.as_mut().poll(cx)));
        match outcome {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(acquired)) => {
                self.call = None;
                Poll::Ready(acquired)
            }
            Err(_) => {
                self.call = None;
                Poll::Ready(Err(Error::backend_message(
                    "acquire the lock (the call panicked)",
                )))
            }
        }
    }
}

impl Drop for InFlightAcquire {
    fn drop(&mut self) {
        let Some(call) = self.call.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(
                "acquire cancelled outside a tokio runtime; a lock it wins stays held until at_most"
            );
            return;
        };
        let (provider, call_timeout) = (self.provider.clone(), self.call_timeout);
        runtime.spawn(async move {
            if let Ok(Some(record)) = call.await {
                tracing::debug!(
                    lock = record.name(),
                    "acquire cancelled by its caller; releasing what it won"
                );
                let _ = timed(
                    "release",
                    call_timeout,
                    provider.release(&record, Duration::ZERO),
                )
                .await;
            }
        });
    }
}
