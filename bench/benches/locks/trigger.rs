//! The `trigger` part (issue 28): how soon "run now" starts a job, and what the scheduler's polling
//! fallback costs.
//!
//! - **Delivery.** One `Scheduler` over the store runs a job that never fires by its schedule
//!   (every hour). The bench asks `LockAdmin::trigger` over and over and times, on the local
//!   monotonic clock, from the call to the job body's start: p50 and p99 over the rounds. The
//!   floor, in the same run, is one round trip of the store (`holder`, median). Stores with a push
//!   (Postgres `LISTEN/NOTIFY`, Redis pub/sub) wake the scheduler; the others are found by its next
//!   poll, every `Scheduler::trigger_poll` (2 s by default), which bounds their delivery. The goal
//!   is p99 ≤ 1 s where the store pushes.
//! - **Polling.** Round trips on the wire (a counting proxy, [`crate::wire`]) of one
//!   `pending_triggers` read with 1 job and with 1,000 jobs, each with a pending trigger: the cost
//!   of one replica's poll per interval. The goal is one, whatever the number of jobs.

use std::sync::Arc;
use std::time::Duration;

use shedlock_bench::report::{Row, Target};
use shedlock_bench::stats::{median, quantile};
use shedlock_core::admin::LockAdmin;
use shedlock_core::trigger::TriggerAnswer;
use shedlock_core::{Job, LockingTaskExecutor, Schedule, Scheduler};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::harness::{Plan, Result};
use crate::wire::Proxy;

const JOB: &str = "bench-trigger";
const EXPIRES: Duration = Duration::from_mins(1);

/// Every row of the part for one store. `wired` is the same store behind a counting proxy, where
/// it has a wire.
pub(crate) async fn run<P: LockAdmin + Clone>(
    db: &str,
    provider: &P,
    wired: Option<(&P, &Proxy)>,
    pushes: bool,
    plan: &Plan,
) -> Result<Vec<Row>> {
    let mut rows = delivery(db, provider, pushes, plan).await?;
    if let Some((wired, proxy)) = wired {
        rows.extend(polling(db, provider, wired, proxy).await?);
    }
    Ok(rows)
}

/// Trigger → body start, `plan.trigger_rounds` times, against one round trip.
async fn delivery<P: LockAdmin + Clone>(
    db: &str,
    provider: &P,
    pushes: bool,
    plan: &Plan,
) -> Result<Vec<Row>> {
    let (started, mut starts) = mpsc::unbounded_channel::<Instant>();
    let executor = LockingTaskExecutor::builder(provider.clone())
        .owner_id("bench-trigger-replica")
        .default_at_most(Duration::from_secs(30))
        .build()?;
    let scheduler = Scheduler::new(executor);
    let hourly = Schedule::every(Duration::from_hours(1))?;
    scheduler.add(Job::new(JOB, hourly, move |_| {
        let started = started.clone();
        async move {
            let _ = started.send(Instant::now());
        }
    }))?;
    scheduler.start().await?;
    let mut floor = Vec::new();
    let mut latencies = Vec::new();
    for _ in 0..plan.trigger_rounds {
        let t = Instant::now();
        provider.holder(JOB).await?;
        floor.push(t.elapsed().as_secs_f64() * 1e3);
        // The previous run's release may still be on its way: a trigger is refused while held.
        let asked = loop {
            let asked = Instant::now();
            match provider.trigger(JOB, "bench", EXPIRES).await? {
                TriggerAnswer::Requested(_) => break asked,
                TriggerAnswer::Held(_) | TriggerAnswer::Pending(_) => {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                other => return Err(format!("{db}: trigger answered {other:?}").into()),
            }
        };
        let start = tokio::time::timeout(Duration::from_secs(10), starts.recv())
            .await
            .map_err(|_| format!("{db}: a trigger did not run within 10 s"))?
            .ok_or("the job's channel closed")?;
        latencies.push((start - asked).as_secs_f64() * 1e3);
    }
    scheduler.shutdown(Duration::from_secs(5)).await;
    let floor_ms = median(&floor).unwrap_or(f64::NAN);
    let how = if pushes { "push" } else { "poll every 2 s" };
    let mut rows = Vec::new();
    for (name, q) in [("p50", 0.5), ("p99", 0.99)] {
        let value = quantile(&latencies, q).unwrap_or(f64::NAN);
        let mut row = Row::new(
            db,
            format!(
                "trigger → run start {name} ({how}, {} triggers)",
                latencies.len()
            ),
            value,
            "ms",
        )
        .ratio(Some(value / floor_ms), "one round trip (holder, median)");
        if pushes && name == "p99" {
            row = row.target(Target::ValueAtMost(1000.0));
        }
        rows.push(row);
    }
    Ok(rows)
}

/// Round trips of one `pending_triggers` read at 1 and 1,000 jobs with a pending trigger each.
async fn polling<P: LockAdmin>(
    db: &str,
    provider: &P,
    wired: &P,
    proxy: &Proxy,
) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    let names: Vec<String> = (0..1_000).map(|i| format!("bench-poll-{i:04}")).collect();
    let mut made = 0;
    for jobs in [1_usize, 1_000] {
        for name in &names[made..jobs] {
            match provider
                .trigger(name, "bench", Duration::from_mins(10))
                .await?
            {
                TriggerAnswer::Requested(_) => {}
                other => return Err(format!("{db}: trigger of {name} answered {other:?}").into()),
            }
        }
        made = jobs;
        // The fewest of a few reads: a pool's background work (a ping) may fall into one.
        let mut fewest = u64::MAX;
        let mut listed = 0;
        for _ in 0..5 {
            let (before, _) = proxy.counts();
            listed = wired.pending_triggers().await?.len();
            let (after, _) = proxy.counts();
            fewest = fewest.min(after - before);
        }
        if listed < jobs {
            return Err(format!("{db}: {listed} pending triggers listed of {jobs}").into());
        }
        #[allow(clippy::cast_precision_loss, reason = "a handful of round trips")]
        rows.push(
            Row::new(
                db,
                format!(
                    "trigger poll: round trips per read ({jobs} job{})",
                    if jobs == 1 { "" } else { "s" }
                ),
                fewest as f64,
                "trips",
            )
            .target(Target::ValueAtMost(1.0)),
        );
    }
    Ok(rows)
}

/// The in-memory store: delivery only (no wire).
pub(crate) async fn memory(plan: &Plan) -> Result<Vec<Row>> {
    let store = Arc::new(shedlock_core::InMemoryLockProvider::new());
    run("memory", &store, None, true, plan).await
}
