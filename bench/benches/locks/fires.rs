//! The scheduler's own cost per fire (claim, dispatch, bookkeeping) against `execute`, in CPU
//! time, and what one fire costs each replica on the store.
//!
//! **Method.** The scheduler has no public way to run one fire without waiting for its
//! instant, so it runs a job with an empty body on a fixed-rate schedule of [`PERIOD`]; the
//! comparison is `execute` of an empty task on the same executor's kind, driven by a tokio
//! interval of the same period (so both wake once per fire from a timer, and the waiting itself
//! costs no CPU). CPU is the process's, all threads (`/proc/self/task/*/schedstat`, ns), over a
//! window that starts once the job has fired; per fire = CPU / fires in the window, less the
//! process's idle CPU per period (measured in a window of its own each round: tokio's and the
//! pools' background work, the same for both). Windows of the two alternate, their order
//! swapped each round; the ratio is the median of the rounds'.

use std::time::{Duration, Instant};

use shedlock_bench::report::{Row, Target};
use shedlock_bench::stats::median;
use shedlock_core::{
    Job, LockConfig, LockingTaskExecutor, Schedule, Scheduler, provider::LockProvider,
};

use crate::harness::{AT_MOST, Result};

/// The schedule's period: about 50 fires per second, far above the store's round trips.
const PERIOD: Duration = Duration::from_millis(20);

/// CPU time of the whole process so far, in nanoseconds (every thread's time on a CPU).
pub(crate) fn process_cpu_ns() -> Result<u64> {
    let mut total = 0;
    for task in std::fs::read_dir("/proc/self/task")? {
        let path = task?.path().join("schedstat");
        // A thread that ended meanwhile has no file any more: its time is lost to both sides.
        if let Ok(text) = std::fs::read_to_string(path) {
            total += text
                .split_whitespace()
                .next()
                .and_then(|ns| ns.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    Ok(total)
}

fn executor<P: LockProvider>(provider: P, owner: &str) -> Result<LockingTaskExecutor> {
    Ok(LockingTaskExecutor::builder(provider)
        .owner_id(owner)
        .default_at_most(AT_MOST)
        .build()?)
}

/// CPU per fire (ns) of a scheduler running one empty job for `window`, and whether the store
/// recorded fires (the claim path) or the scheduler fell back to plain locks.
async fn scheduler_window<P: LockProvider + Clone>(
    provider: &P,
    job: &str,
    window: Duration,
) -> Result<(f64, Option<bool>)> {
    let scheduler = Scheduler::new(executor(provider.clone(), "bench-scheduler")?);
    scheduler.add(Job::new(job, Schedule::every(PERIOD)?, |_run| async {}))?;
    scheduler.start().await?;
    let runs = || scheduler.status(job).map_or(0, |s| s.runs);
    let deadline = Instant::now() + Duration::from_secs(5);
    while runs() < 2 {
        if Instant::now() > deadline {
            scheduler.shutdown(Duration::from_secs(1)).await;
            return Err("the job did not fire within 5 s".into());
        }
        tokio::time::sleep(PERIOD / 4).await;
    }
    let (r0, c0) = (runs(), process_cpu_ns()?);
    tokio::time::sleep(window).await;
    let (r1, c1) = (runs(), process_cpu_ns()?);
    let claims = scheduler.uses_fire_claims();
    scheduler.shutdown(Duration::from_secs(1)).await;
    per_fire(c1 - c0, r1 - r0).map(|cpu| (cpu, claims))
}

/// CPU per call (ns) of `execute(empty)` paced by an interval of [`PERIOD`] for `window`.
async fn execute_window<P: LockProvider + Clone>(
    provider: &P,
    name: &str,
    window: Duration,
) -> Result<f64> {
    let executor = executor(provider.clone(), "bench-execute")?;
    let cfg = LockConfig::new(name, AT_MOST)?;
    let mut ticker = tokio::time::interval(PERIOD);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    for _ in 0..2 {
        ticker.tick().await;
        executor.execute(&cfg, async {}).await?;
    }
    let (start, c0) = (Instant::now(), process_cpu_ns()?);
    let mut calls = 0;
    while start.elapsed() < window {
        ticker.tick().await;
        executor
            .execute(&cfg, async {})
            .await?
            .ok_or("execute skipped a free lock")?;
        calls += 1;
    }
    per_fire(process_cpu_ns()? - c0, calls)
}

fn per_fire(cpu_ns: u64, fires: u64) -> Result<f64> {
    if fires == 0 {
        return Err("no fire in the window".into());
    }
    #[allow(clippy::cast_precision_loss)] // counts well below 2^52
    Ok(cpu_ns as f64 / fires as f64)
}

/// The process's CPU per second (ns) while nothing of the benchmark runs (tokio's and the
/// pools' own background), subtracted from both sides' windows.
async fn idle_rate(window: Duration) -> Result<f64> {
    let (start, c0) = (Instant::now(), process_cpu_ns()?);
    tokio::time::sleep(window).await;
    #[allow(clippy::cast_precision_loss)] // ns well below 2^52
    Ok((process_cpu_ns()? - c0) as f64 / start.elapsed().as_secs_f64())
}

/// The paired rounds on one store; rows: CPU per fire of each and their ratio.
pub(crate) async fn cpu_per_fire<P: LockProvider + Clone>(
    db: &str,
    provider: &P,
    rounds: usize,
    window: Duration,
) -> Result<Vec<Row>> {
    let (mut scheduled, mut executed, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let mut idles = Vec::new();
    let mut claims = None;
    for round in 0..rounds {
        let job = format!("bench-scheduled-{round}");
        let (s, e) = if round % 2 == 0 {
            let s = scheduler_window(provider, &job, window).await?;
            (s, execute_window(provider, "bench-executed", window).await?)
        } else {
            let e = execute_window(provider, "bench-executed", window).await?;
            (scheduler_window(provider, &job, window).await?, e)
        };
        // Both sides fire once per period: the idle share of one fire is the same for both.
        let idle = idle_rate(window).await? * PERIOD.as_secs_f64();
        let (s_net, e_net) = (s.0 - idle, e - idle);
        claims = claims.or(s.1);
        scheduled.push(s_net / 1e3);
        executed.push(e_net / 1e3);
        idles.push(idle / 1e3);
        ratios.push(s_net / e_net);
    }
    let path = match claims {
        Some(true) => "fire claims",
        Some(false) => "plain locks (no fire claims)",
        None => "unknown",
    };
    let mut ratio = Row::new(
        db,
        format!("scheduler: CPU per fire / execute ({path})"),
        median(&ratios).unwrap_or(f64::NAN),
        "x",
    );
    if db == "postgres" {
        ratio = ratio.target(Target::ValueAtMost(1.05));
    }
    Ok(vec![
        Row::new(
            db,
            format!("scheduler: CPU per fire, every {} ms", PERIOD.as_millis()),
            median(&scheduled).unwrap_or(f64::NAN),
            "us/op",
        ),
        Row::new(
            db,
            "scheduler/execute: idle process CPU per period (subtracted)",
            median(&idles).unwrap_or(f64::NAN),
            "us/op",
        ),
        Row::new(
            db,
            "execute: CPU per call, same pace",
            median(&executed).unwrap_or(f64::NAN),
            "us/op",
        ),
        ratio,
    ])
}
