//! [`LockService`]: one request, one lock, through `LockingTaskExecutor::execute_reported`.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use shedlock_core::LockingTaskExecutor;
use shedlock_core::provider::LockRecord;
use tower_service::Service;

use crate::layer::Shared;
use crate::refusal::{Busy, Refusals};

/// How long the holder read of a skipped request may take, when its refusal asks for it. Past it,
/// the refusal gets no holder.
pub const HOLDER_READ_TIMEOUT: Duration = Duration::from_secs(1);

/// The future of a [`LockService`] call: boxed, `Send`.
pub type ResponseFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send + 'static>>;

/// The service a [`LockLayer`](crate::LockLayer) makes: the inner service's calls, each under a
/// lock named from its request. See the [crate docs](crate).
pub struct LockService<S, F, R> {
    inner: S,
    shared: Arc<Shared<F, R>>,
}

impl<S, F, R> LockService<S, F, R> {
    pub(crate) fn new(inner: S, shared: Arc<Shared<F, R>>) -> Self {
        Self { inner, shared }
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S: Clone, F, R> Clone for LockService<S, F, R> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<S: fmt::Debug, F, R> fmt::Debug for LockService<S, F, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockService")
            .field("inner", &self.inner)
            .field("executor", &self.shared.executor)
            .finish_non_exhaustive()
    }
}

impl<S, F, N, R, Req> Service<Req> for LockService<S, F, R>
where
    S: Service<Req> + Clone + Send + 'static,
    S::Future: Send,
    S::Response: Send + 'static,
    S::Error: Send + 'static,
    Req: Send + 'static,
    F: Fn(&Req) -> Option<N> + Send + Sync + 'static,
    N: Into<String>,
    R: Refusals<S::Response, S::Error> + Send + Sync + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = ResponseFuture<S::Response, S::Error>;

    /// The inner service's readiness, unchanged: the lock is taken per call, not here.
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        // Outside the lock and the future: a panic here is the caller's, and no lock is touched.
        let name: Option<String> = (self.shared.name)(&request).map(Into::into);
        // The service `poll_ready` readied goes into the future; this one keeps a fresh clone.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let shared = Arc::clone(&self.shared);
        Box::pin(async move {
            let refusals = &shared.refusals;
            let Some(name) = name else {
                tracing::debug!("the request names no lock of this layer");
                return refusals.unrecognised();
            };
            let cfg = match shared.template.config(name) {
                Ok(cfg) => cfg,
                Err((name, error)) => {
                    tracing::debug!(
                        error = &error as &dyn std::error::Error,
                        "the request's lock name is invalid"
                    );
                    return refusals.invalid_name(&name, &error);
                }
            };
            let task = async move { inner.call(request).await };
            match shared.executor.execute_reported(&cfg, task).await {
                Ok(Some(run)) => run.output,
                Ok(None) => {
                    let holder = if refusals.wants_holder() {
                        read_holder(&shared.executor, cfg.name()).await
                    } else {
                        None
                    };
                    refusals.held(&Busy::new(cfg.name().to_owned(), holder))
                }
                // The name was checked above; any error now is the store's or the executor's,
                // an invalid configuration the store reports included.
                Err(error) => refusals.failed(cfg.name(), &error),
            }
        })
    }
}

/// Who holds `name`, read within [`HOLDER_READ_TIMEOUT`]. `None` on any failure, logged at DEBUG:
/// the refusal goes out without it.
async fn read_holder(executor: &LockingTaskExecutor, name: &str) -> Option<LockRecord> {
    match tokio::time::timeout(HOLDER_READ_TIMEOUT, executor.provider().holder(name)).await {
        Ok(Ok(holder)) => holder,
        Ok(Err(error)) => {
            tracing::debug!(
                lock = name,
                error = &error as &dyn std::error::Error,
                "could not read the lock's holder"
            );
            None
        }
        Err(_) => {
            tracing::debug!(lock = name, "the read of the lock's holder timed out");
            None
        }
    }
}
