//! [`CronFireLayer`] and its service: each tick an apalis worker receives is claimed as a fire,
//! and run only by the replica that wins it.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use apalis_core::error::BoxDynError;
use apalis_core::task::Task;
use apalis_cron::Tick;
use chrono::{DateTime, Utc};
use shedlock_core::provider::{Fire, FireClaim};
use shedlock_core::scheduler::FireRun;
use shedlock_core::{LockConfig, LockingTaskExecutor};
use tower_layer::Layer;
use tower_service::Service;

use crate::schedule::{FireSchedule, TickError};

/// A tower layer for apalis-cron workers: each tick runs on one replica only, never before its
/// instant by the store's clock.
///
/// Built from an executor, the job's [`LockConfig`] and the worker's schedule. The crate's page
/// says what its service answers and where to add it.
///
/// ```
/// use std::str::FromStr;
/// use std::time::Duration;
/// use shedlock_apalis::CronFireLayer;
/// use shedlock_core::{InMemoryLockProvider, LockConfig, LockingTaskExecutor};
///
/// # fn main() -> shedlock_core::Result<()> {
/// let executor = LockingTaskExecutor::new(InMemoryLockProvider::new())?;
/// let schedule = cron::Schedule::from_str("0 */5 * * * *").expect("a cron expression");
/// let layer = CronFireLayer::new(executor, LockConfig::new("cleanup", Duration::from_secs(60))?, schedule);
/// assert_eq!(layer.config().name(), "cleanup");
/// // A name the store cannot take is refused when the config is built, not at the first tick.
/// assert!(LockConfig::new("", Duration::from_secs(60)).is_err());
/// # Ok(()) }
/// ```
pub struct CronFireLayer<Sch> {
    shared: Arc<Shared<Sch>>,
}

/// What every service of one layer shares.
struct Shared<Sch> {
    executor: LockingTaskExecutor,
    config: LockConfig,
    schedule: Sch,
}

impl<Sch> CronFireLayer<Sch> {
    /// A layer that claims the ticks of `schedule` as fires of the job `config` names, through
    /// `executor`. The lock is held while the handler runs, up to `config`'s `at_most`, and
    /// released after it with `config`'s `at_least`.
    ///
    /// `schedule` must fire when the worker's backend ticks: give it the backend's schedule, or
    /// its [`Config`](apalis_cron::Config) when the backend has a time zone. A tick the schedule
    /// does not fire at is refused with [`TickError::NotAFire`].
    pub fn new(executor: LockingTaskExecutor, config: LockConfig, schedule: Sch) -> Self {
        Self {
            shared: Arc::new(Shared {
                executor,
                config,
                schedule,
            }),
        }
    }

    /// The job's lock configuration.
    #[must_use]
    pub fn config(&self) -> &LockConfig {
        &self.shared.config
    }
}

impl<Sch> Clone for CronFireLayer<Sch> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<Sch> fmt::Debug for CronFireLayer<Sch> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CronFireLayer")
            .field("job", &self.shared.config.name())
            .finish_non_exhaustive()
    }
}

impl<S, Sch> Layer<S> for CronFireLayer<Sch> {
    type Service = CronFireService<S, Sch>;

    fn layer(&self, inner: S) -> Self::Service {
        CronFireService {
            inner,
            shared: Arc::clone(&self.shared),
        }
    }
}

/// The service of a [`CronFireLayer`]: it calls the inner service for a tick only if this
/// replica claimed the tick's fire.
pub struct CronFireService<S, Sch> {
    inner: S,
    shared: Arc<Shared<Sch>>,
}

impl<S: Clone, Sch> Clone for CronFireService<S, Sch> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<S, Sch> fmt::Debug for CronFireService<S, Sch> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CronFireService")
            .field("job", &self.shared.config.name())
            .finish_non_exhaustive()
    }
}

/// What a [`CronFireService`] answers for a tick that did not fail: the inner service's response
/// if the tick ran here, or the store's answer if it did not. Either way, apalis counts the tick
/// as a success.
#[derive(Debug)]
#[non_exhaustive]
pub enum TickRun<R> {
    /// This replica claimed the tick and the inner service answered `R`.
    Ran(R),
    /// The tick did not run here, for the reason the store gave: another replica claimed it
    /// ([`ClaimedElsewhere`](FireClaim::ClaimedElsewhere)), the job's lock was held by a run
    /// still going ([`Held`](FireClaim::Held)), the next tick's instant had come
    /// ([`WindowPassed`](FireClaim::WindowPassed)), or an operator paused the job
    /// ([`Paused`](FireClaim::Paused), see `shedlock pause`).
    NotRun(FireClaim),
}

impl<R> TickRun<R> {
    /// The inner service's response, if the tick ran here.
    #[must_use]
    pub fn output(self) -> Option<R> {
        match self {
            Self::Ran(output) => Some(output),
            Self::NotRun(_) => None,
        }
    }

    /// Whether the tick ran here.
    #[must_use]
    pub fn ran(&self) -> bool {
        matches!(self, Self::Ran(_))
    }
}

impl<S, Sch, Tz> Service<Task<Tick<Tz>>> for CronFireService<S, Sch>
where
    S: Service<Task<Tick<Tz>>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxDynError>,
    S::Response: Send,
    Sch: FireSchedule + Send + Sync + 'static,
    Tz: Send + 'static,
{
    type Response = TickRun<S::Response>;
    type Error = BoxDynError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxDynError>> + Send>>;

    /// Always ready. The inner service's readiness is awaited inside the tick's future, once the
    /// fire is claimed. apalis-cron asks its backend for the next tick only while the worker's
    /// service is ready, and ends the worker when that tick's instant has passed by then. A
    /// claim may wait a whole tick: for the fire's instant, or retrying a failing store. So an
    /// inner concurrency or rate limit, waited for here, would end the worker.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxDynError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, task: Task<Tick<Tz>>) -> Self::Future {
        // A clone goes with the tick; it is readied and called once the fire is claimed.
        let inner = self.inner.clone();
        let shared = Arc::clone(&self.shared);
        Box::pin(async move { shared.run(inner, task).await })
    }
}

impl<Sch: FireSchedule> Shared<Sch> {
    /// The fire a tick at `timestamp` (seconds since the Unix epoch) stands for.
    fn fire(&self, timestamp: u64) -> Result<Fire, TickError> {
        let at = i64::try_from(timestamp)
            .ok()
            .and_then(|seconds| DateTime::<Utc>::from_timestamp(seconds, 0))
            .ok_or(TickError::OutOfRange { timestamp })?;
        if !self.schedule.is_fire(at) {
            return Err(TickError::NotAFire { at });
        }
        let next = self
            .schedule
            .next_after(at)
            .ok_or(TickError::LastFire { at })?;
        Fire::new(at, next).map_err(|_| TickError::LastFire { at })
    }

    async fn run<S, Tz>(
        &self,
        mut inner: S,
        task: Task<Tick<Tz>>,
    ) -> Result<TickRun<S::Response>, BoxDynError>
    where
        S: Service<Task<Tick<Tz>>>,
        S::Error: Into<BoxDynError>,
    {
        let job = self.config.name();
        let fire = self.fire(task.args.get_timestamp()).inspect_err(|error| {
            tracing::error!(
                job,
                error = error as &dyn std::error::Error,
                "apalis tick refused"
            );
        })?;
        let work = async move {
            std::future::poll_fn(|cx| inner.poll_ready(cx))
                .await
                .map_err(Into::into)?;
            inner.call(task).await.map_err(Into::into)
        };
        match self.executor.execute_fire(&self.config, &fire, work).await {
            Ok(FireRun::Ran(execution)) => execution.output.map(TickRun::Ran),
            Ok(FireRun::NotRun(claim)) => {
                tracing::debug!(job, fire = %fire.at(), ?claim, "apalis tick not run here");
                Ok(TickRun::NotRun(claim))
            }
            Ok(_) => Err(format!(
                "the claim of the {fire} had an answer this shedlock-apalis does not know; the \
                 tick is not run"
            )
            .into()),
            Err(error) => {
                let (cause, fire) = (&error as &dyn std::error::Error, fire.at());
                tracing::warn!(job, %fire, error = cause, "apalis tick not run: the claim failed");
                Err(Box::new(error))
            }
        }
    }
}
