//! The `tower` part (issue 30): what `shedlock_tower::LockLayer` adds to a request, against
//! the executor's own call on the same store.
//!
//! Four variants, interleaved and paced as the uncontended part's, with the rounds and slices of
//! the `jobs` part (more than the uncontended part's in a quick run, as the target is 5 %):
//!
//! - `executor.execute(cfg, async {})` on a lock another owner holds: the skip floor;
//! - the same skip through the layer: an `http::Request` whose path names the held lock, into a
//!   `LockService` around a trivial service, answered 409 by `HttpRefusals` (`Retry-After` off);
//! - `executor.execute` on a free lock, acquire + release: the cycle floor;
//! - the same run through the layer, answered 200 by the trivial service.
//!
//! So the layer's cost is what it adds: naming the lock from the request (one `String`), the
//! per-request `LockConfig`, the boxed future, the clone of the inner service and the answer. The
//! ratios are medians of the per-round ratios; the target is 1.05 on a store with I/O.

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
    AT_MOST, ExecutorRun, OTHER_OWNER, Op, Plan, Result, Variant, executor, interleave,
};

const HELD: &str = "bench-tower-held";
const FREE: &str = "bench-tower-run";

const SKIP_FLOOR: &str = "tower: skip, executor.execute (floor)";
const SKIP: &str = "tower: skip, through the layer (409)";
const CYCLE_FLOOR: &str = "tower: run, executor.execute (floor)";
const CYCLE: &str = "tower: run, through the layer (200)";

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

type ByPath = fn(&Request<String>) -> String;

/// The lock name of a request: its path without the leading `/`.
fn by_path(request: &Request<String>) -> String {
    request.uri().path().trim_start_matches('/').to_owned()
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

/// The part's rows for one store, whose provider is `provider`.
pub(crate) async fn run<P: LockProvider + Clone>(
    db: &str,
    provider: &P,
    plan: &Plan,
) -> Result<Vec<Row>> {
    provider
        .acquire(HELD, std::time::Duration::from_hours(1), OTHER_OWNER)
        .await?
        .ok_or("tower: could not take the held lock")?;
    let executor = executor(provider.clone(), "bench-tower")?;
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
        Variant::new(SKIP_FLOOR, floor(HELD, false)?),
        Variant::new(
            SKIP,
            layered(&executor, &format!("/{HELD}"), StatusCode::CONFLICT)?,
        ),
        Variant::new(CYCLE_FLOOR, floor(FREE, true)?),
        Variant::new(
            CYCLE,
            layered(&executor, &format!("/{FREE}"), StatusCode::OK)?,
        ),
    ];
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
    let mut rows = Vec::new();
    for (metric, floor) in [
        (SKIP_FLOOR, SKIP_FLOOR),
        (SKIP, SKIP_FLOOR),
        (CYCLE_FLOOR, CYCLE_FLOOR),
        (CYCLE, CYCLE_FLOOR),
    ] {
        rows.push(
            Row::new(db, metric, median(of(metric)).unwrap_or(f64::NAN), "us/op")
                .ratio(median_ratio(of(metric), of(floor)), floor),
        );
    }
    for (metric, floor, name) in [
        (SKIP, SKIP_FLOOR, "tower layer skip ÷ executor skip"),
        (CYCLE, CYCLE_FLOOR, "tower layer run ÷ executor cycle"),
    ] {
        let ratio = median_ratio(of(metric), of(floor));
        rows.push(
            Row::new(db, name, ratio.unwrap_or(f64::NAN), "x")
                .ratio(ratio, floor)
                .target(Target::RatioAtMost(1.05)),
        );
    }
    Ok(rows)
}
