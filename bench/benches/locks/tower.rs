//! The `tower` part (issue 30): what `shedlock_tower::LockLayer` adds to a request, against
//! the provider's own store calls and the executor's call, on the same store in the same run.
//!
//! Six variants, interleaved and paced as the uncontended part's, with the rounds and slices of
//! the `jobs` part (more than the uncontended part's in a quick run, as the target is 5 %):
//!
//! - `provider.acquire` on a lock another owner holds: the skip floor;
//! - `executor.execute(cfg, async {})` on that lock: the executor's skip;
//! - the same skip through the layer: an `http::Request` whose path names the held lock, into a
//!   `LockService` around a trivial service, answered 409 by `HttpRefusals` (`Retry-After` off);
//! - `provider.acquire` + `provider.release` with `at_least` 0 on a free lock: the cycle floor;
//! - `executor.execute` on a free lock, acquire + release: the executor's cycle;
//! - the same run through the layer, answered 200 by the trivial service.
//!
//! The target rows are layer ÷ provider, as the issue asks; layer ÷ executor is a diagnostic
//! that separates what the layer adds (naming the lock from the request, the per-request
//! `LockConfig`, the boxed future, the clone of the inner service and the answer) from what the
//! executor adds (its span, metrics, per-call timeout and drain registration). The ratios are
//! medians of the per-round ratios; the target is 1.05 on a store with I/O. On the in-memory
//! store the variants run back to back: the CPU of each layer, without I/O.

use std::convert::Infallible;
use std::future::{Ready, ready};
use std::task::{Context, Poll};

use async_trait::async_trait;
use http::{Request, Response, StatusCode};
use shedlock_bench::report::{Row, Target};
use shedlock_bench::stats::{median, median_ratio};
use shedlock_core::provider::LockProvider;
use shedlock_core::{LockConfig, LockingTaskExecutor};
use shedlock_tower::{HttpRefusals, LockLayer, LockService};
use tower_layer::Layer as _;
use tower_service::Service as _;

use crate::harness::{
    AT_MOST, ExecutorRun, OTHER_OWNER, Op, Plan, ProviderCycle, Result, Variant, executor,
    interleave,
};

const HELD: &str = "bench-tower-held";
const FREE: &str = "bench-tower-run";
const PROVIDER_FREE: &str = "bench-tower-provider-run";
const OWNER: &str = "bench-tower";

const SKIP_PROVIDER: &str = "tower: skip, provider.acquire (floor)";
const SKIP_EXECUTOR: &str = "tower: skip, executor.execute";
const SKIP: &str = "tower: skip, through the layer (409)";
const CYCLE_PROVIDER: &str = "tower: run, provider acquire + release (floor)";
const CYCLE_EXECUTOR: &str = "tower: run, executor.execute";
const CYCLE: &str = "tower: run, through the layer (200)";

/// `provider.acquire` on [`HELD`], which another owner holds: the provider's own skip.
struct HeldSkip<P>(P);

#[async_trait]
impl<P: LockProvider> Op for HeldSkip<P> {
    async fn run(&mut self) -> Result<()> {
        match self.0.acquire(HELD, AT_MOST, OWNER).await? {
            None => Ok(()),
            Some(_) => Err("tower: acquired a lock another owner holds".into()),
        }
    }
}

/// The inner service: answers at once.
#[derive(Clone)]
struct Trivial;

impl tower_service::Service<Request<String>> for Trivial {
    type Response = Response<String>;
    type Error = Infallible;
    type Future = Ready<Result<Response<String>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<String>) -> Self::Future {
        ready(Ok(Response::new(String::new())))
    }
}

type ByPath = fn(&Request<String>) -> Option<String>;

/// The lock name of a request: its path without the leading `/`. Every request names a lock here.
#[allow(clippy::unnecessary_wraps)] // the layer's closure returns an Option
fn by_path(request: &Request<String>) -> Option<String> {
    Some(request.uri().path().trim_start_matches('/').to_owned())
}

/// One request through the layer, whose answer must be `expect`.
struct Layered {
    service: LockService<Trivial, ByPath, HttpRefusals>,
    uri: http::Uri,
    expect: StatusCode,
}

#[async_trait]
impl Op for Layered {
    async fn run(&mut self) -> Result<()> {
        let mut request = Request::new(String::new());
        *request.uri_mut() = self.uri.clone();
        std::future::poll_fn(|cx| self.service.poll_ready(cx)).await?;
        let response = self.service.call(request).await?;
        if response.status() == self.expect {
            Ok(())
        } else {
            Err(format!("answered {}, not {}", response.status(), self.expect).into())
        }
    }
}

/// The part's rows for one store, whose provider is `provider`. The in-memory store's variants
/// run back to back, as its uncontended part's do: its figures are the layer's own CPU.
pub(crate) async fn run<P: LockProvider + Clone>(
    db: &str,
    provider: &P,
    plan: &Plan,
) -> Result<Vec<Row>> {
    let paced = db != "memory";
    provider
        .acquire(HELD, std::time::Duration::from_hours(1), OTHER_OWNER)
        .await?
        .ok_or("tower: could not take the held lock")?;
    let executor = executor(provider.clone(), OWNER)?;
    let layered = |executor: &LockingTaskExecutor, path: &str, expect| -> Result<Layered> {
        let service = LockLayer::builder(executor.clone(), by_path as ByPath, HttpRefusals::new())
            .at_most(AT_MOST)
            .build()?
            .layer(Trivial);
        Ok(Layered {
            service,
            uri: path.parse()?,
            expect,
        })
    };
    let floor = |name: &str, expect_run| -> Result<ExecutorRun> {
        Ok(ExecutorRun {
            executor: executor.clone(),
            cfg: LockConfig::new(name, AT_MOST)?,
            expect_run,
        })
    };
    let mut variants = vec![
        Variant::new(SKIP_PROVIDER, HeldSkip(provider.clone())),
        Variant::new(SKIP_EXECUTOR, floor(HELD, false)?),
        Variant::new(
            SKIP,
            layered(&executor, &format!("/{HELD}"), StatusCode::CONFLICT)?,
        ),
        Variant::new(
            CYCLE_PROVIDER,
            ProviderCycle {
                provider: provider.clone(),
                name: PROVIDER_FREE.to_owned(),
                owner: OWNER.to_owned(),
            },
        ),
        Variant::new(CYCLE_EXECUTOR, floor(FREE, true)?),
        Variant::new(
            CYCLE,
            layered(&executor, &format!("/{FREE}"), StatusCode::OK)?,
        ),
    ];
    if !paced {
        variants = variants.into_iter().map(Variant::back_to_back).collect();
    }
    let mut paired = plan.clone();
    paired.rounds = plan.jobs_rounds;
    paired.slice = plan.jobs_slice;
    let values = interleave(&mut variants, &paired).await?;
    let of = |metric: &str| {
        variants
            .iter()
            .position(|v| v.metric == metric)
            .map_or(&[][..], |i| &values[i][..])
    };
    Ok(rows(db, paced, &of))
}

/// The part's rows: each variant against its floor, the targets (layer ÷ provider, for stores
/// with I/O) and the diagnostics. `of` gives a variant's values, one per round.
fn rows<'a>(db: &str, paced: bool, of: &dyn Fn(&str) -> &'a [f64]) -> Vec<Row> {
    let mut rows = Vec::new();
    for (metric, floor) in [
        (SKIP_PROVIDER, SKIP_PROVIDER),
        (SKIP_EXECUTOR, SKIP_PROVIDER),
        (SKIP, SKIP_PROVIDER),
        (CYCLE_PROVIDER, CYCLE_PROVIDER),
        (CYCLE_EXECUTOR, CYCLE_PROVIDER),
        (CYCLE, CYCLE_PROVIDER),
    ] {
        rows.push(
            Row::new(db, metric, median(of(metric)).unwrap_or(f64::NAN), "us/op")
                .ratio(median_ratio(of(metric), of(floor)), floor),
        );
    }
    // The target: the layer against the provider's own calls.
    for (metric, floor, name) in [
        (SKIP, SKIP_PROVIDER, "tower layer skip ÷ provider skip"),
        (CYCLE, CYCLE_PROVIDER, "tower layer run ÷ provider cycle"),
    ] {
        let ratio = median_ratio(of(metric), of(floor));
        let row = Row::new(db, name, ratio.unwrap_or(f64::NAN), "x").ratio(ratio, floor);
        // The target is for stores with I/O; the in-memory figures are the CPU it is made of.
        rows.push(if paced {
            row.target(Target::RatioAtMost(1.05))
        } else {
            row
        });
    }
    // Diagnostics, no target: what the layer adds to the executor, and the executor to the
    // provider.
    for (metric, floor, name) in [
        (SKIP, SKIP_EXECUTOR, "tower layer skip ÷ executor skip"),
        (CYCLE, CYCLE_EXECUTOR, "tower layer run ÷ executor cycle"),
        (
            SKIP_EXECUTOR,
            SKIP_PROVIDER,
            "executor skip ÷ provider skip",
        ),
        (
            CYCLE_EXECUTOR,
            CYCLE_PROVIDER,
            "executor cycle ÷ provider cycle",
        ),
    ] {
        let ratio = median_ratio(of(metric), of(floor));
        rows.push(Row::new(db, name, ratio.unwrap_or(f64::NAN), "x").ratio(ratio, floor));
    }
    rows
}
