//! One replica: runs its jobs on a wall-clock-aligned schedule, each tick under its lock, records
//! every run in the [run log](crate::runlog) and reports what happened as [`Event`]s.
//!
//! Each job fires on every multiple of its period (plus a little random jitter, as replicas'
//! timers would), so all replicas try the same tick at about the same time: one runs it, the
//! others skip. Each attempt is a task of its own, so a run that outlives its tick does not delay
//! the schedule: the next tick's attempt finds the lock held (by this very replica) and skips.
//!
//! The replica stops when its stop signal fires: it schedules nothing more, waits for the runs
//! in flight (which release their locks), reports [`Event::Stopped`] and returns.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use shedlock_core::{LockingTaskExecutor, current_lock};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::database::{BoxError, Database};
use crate::demo;
use crate::event::Event;
use crate::job::JobSpec;
use crate::runlog::RunLog;

/// How a job's run is started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Runner {
    /// Through [`LockingTaskExecutor::execute`] with the job's [`JobSpec`] settings.
    Executor,
    /// The demo's `#[scheduled_lock]` function [`demo::report`].
    DemoReport,
    /// The demo's `#[scheduled_lock]` function [`demo::sync`].
    DemoSync,
}

/// A job and how to run it.
#[derive(Debug, Clone)]
pub struct Job {
    /// Its settings (for [`Runner::Executor`]) or description (for the demo's functions, whose
    /// lock settings are in their attributes).
    pub spec: JobSpec,
    /// How it runs.
    pub runner: Runner,
}

impl Job {
    /// A job run through the executor with `spec`'s settings.
    #[must_use]
    pub fn executor(spec: JobSpec) -> Self {
        Self {
            spec,
            runner: Runner::Executor,
        }
    }
}

/// A replica's settings.
#[derive(Debug, Clone)]
pub struct ReplicaOptions {
    /// Its label in events and in the run log (`r1`, …).
    pub replica: String,
    /// The run-log session its runs are recorded under (one per demo run or test).
    pub session: String,
    /// Prefix of every lock name (isolates tests sharing a lock table).
    pub prefix: String,
    /// The jobs.
    pub jobs: Vec<Job>,
    /// The run log's table.
    pub runs_table: String,
    /// The lock table (the store's default when `None`).
    pub lock_table: Option<String>,
    /// The owner id (default: `$SHEDLOCK_OWNER_ID`, else `hostname:pid:random`).
    pub owner_id: Option<String>,
    /// The executor's per-call timeout (default 5 s).
    pub call_timeout: Option<Duration>,
    /// Each tick fires up to this much late, at random (default 150 ms).
    pub jitter: Duration,
}

/// What a run reports back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// How long it ran (this process's monotonic clock).
    pub elapsed: Duration,
    /// Whether the lock was lost during the run (the run then stopped early).
    pub lock_lost: bool,
}

/// A replica's counts, as in [`Event::Stopped`].
#[derive(Debug, Default)]
struct Counts {
    runs: AtomicU64,
    skipped: AtomicU64,
    errors: AtomicU64,
}

/// What every run of one replica shares; the demo's job functions take it.
#[derive(Debug)]
pub struct RunContext {
    replica: String,
    session: String,
    prefix: String,
    log: RunLog,
    executor: LockingTaskExecutor,
    events: mpsc::UnboundedSender<Event>,
    counts: Counts,
}

impl RunContext {
    pub(crate) fn new(
        replica: &str,
        session: &str,
        prefix: &str,
        log: RunLog,
        executor: LockingTaskExecutor,
        events: mpsc::UnboundedSender<Event>,
    ) -> Self {
        Self {
            replica: replica.to_owned(),
            session: session.to_owned(),
            prefix: prefix.to_owned(),
            log,
            executor,
            events,
            counts: Counts::default(),
        }
    }

    /// The executor the replica's locks go through.
    #[must_use]
    pub fn executor(&self) -> &LockingTaskExecutor {
        &self.executor
    }

    /// The lock-name prefix.
    #[must_use]
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    fn emit(&self, event: Event) {
        // The receiver is gone only when the process is shutting down.
        let _ = self.events.send(event);
    }

    /// The body of every job, run while holding the job's lock: records the start in the run
    /// log, reports [`Event::Ran`], works for a random time from the job's `work` range (stopping
    /// early if the lock is lost), and records the end.
    ///
    /// # Errors
    ///
    /// Outside a locked run, or when the run log cannot be written.
    pub async fn work(&self, job: &JobSpec, tick: u64) -> Result<Outcome, BoxError> {
        let lock = current_lock().ok_or("RunContext::work must run under the job's lock")?;
        let started = Instant::now();
        let id = self
            .log
            .start(
                &self.session,
                &job.name,
                &self.replica,
                tick,
                &lock.record(),
            )
            .await?;
        // Reported once the start is in the run log, so a test that sees the event (and then,
        // say, crashes the database) finds the run in the log.
        self.emit(Event::Ran {
            replica: self.replica.clone(),
            job: job.name.clone(),
            tick,
            token: lock.fencing_token(),
        });
        tokio::select! {
            () = tokio::time::sleep(job.random_work()) => {}
            () = lock.lost() => tracing::warn!(job = job.name, "lock lost mid-run; stopping the run"),
        }
        self.log.finish(id).await?;
        Ok(Outcome {
            elapsed: started.elapsed(),
            lock_lost: lock.is_lost(),
        })
    }
}

/// This process's wall clock in ms since the Unix epoch.
#[must_use]
pub fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Runs a replica until `stop` turns `true` (or its sender is dropped), reporting on `events`.
///
/// Connects the lock store on `db`; the lock table and the run log must exist (create them once,
/// before starting replicas: see [`crate::cli`]'s `schema` command).
///
/// # Errors
///
/// Setting up failed (store, executor, run log); errors of single runs are reported as
/// [`Event::Error`] and the replica carries on.
pub async fn run(
    opts: ReplicaOptions,
    db: &Database,
    mut stop: watch::Receiver<bool>,
    events: mpsc::UnboundedSender<Event>,
) -> Result<(), BoxError> {
    let provider = db
        .lock_provider(opts.lock_table.as_deref(), opts.call_timeout)
        .await?;
    let mut builder = LockingTaskExecutor::builder(provider);
    if let Some(owner) = &opts.owner_id {
        builder = builder.owner_id(owner.clone());
    }
    if let Some(timeout) = opts.call_timeout {
        builder = builder.call_timeout(timeout);
    }
    let executor = builder.build()?;
    let ctx = Arc::new(RunContext::new(
        &opts.replica,
        &opts.session,
        &opts.prefix,
        RunLog::new(db, &opts.runs_table)?,
        executor,
        events,
    ));
    for job in &opts.jobs {
        if job.runner == Runner::Executor {
            job.spec.lock_config(&opts.prefix)?;
        }
    }
    ctx.emit(Event::Ready {
        replica: ctx.replica.clone(),
        pid: std::process::id(),
        owner: ctx.executor.owner_id().to_owned(),
        wall_ms: wall_ms(),
    });
    tracing::info!(
        replica = ctx.replica,
        owner = ctx.executor.owner_id(),
        "replica ready"
    );

    let mut schedules = JoinSet::new();
    for job in opts.jobs {
        schedules.spawn(schedule(
            ctx.clone(),
            Arc::new(job),
            stop.clone(),
            opts.jitter,
        ));
    }
    // Resolves when stop turns true or its sender is gone.
    let _ = stop.wait_for(|stopping| *stopping).await;
    while schedules.join_next().await.is_some() {}
    ctx.emit(Event::Stopped {
        replica: ctx.replica.clone(),
        runs: ctx.counts.runs.load(Ordering::Relaxed),
        skipped: ctx.counts.skipped.load(Ordering::Relaxed),
        errors: ctx.counts.errors.load(Ordering::Relaxed),
    });
    Ok(())
}

/// One job's schedule: an attempt on every tick until stopped, then waits for the runs in flight.
async fn schedule(
    ctx: Arc<RunContext>,
    job: Arc<Job>,
    mut stop: watch::Receiver<bool>,
    jitter: Duration,
) {
    let period = u64::try_from(job.spec.every.as_millis())
        .unwrap_or(u64::MAX)
        .max(1);
    let jitter_ms = u64::try_from(jitter.as_millis()).unwrap_or(0);
    let mut attempts = JoinSet::new();
    let mut last_tick = 0;
    loop {
        let now = u64::try_from(wall_ms()).unwrap_or(0);
        let tick = (now / period + 1).max(last_tick + 1);
        let fire_at = tick.saturating_mul(period) + crate::random::random_below(jitter_ms + 1);
        // Capped, so that a wall clock stepped backwards delays a tick by at most one period.
        let wait = Duration::from_millis(fire_at.saturating_sub(now).min(period + jitter_ms));
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            _ = stop.wait_for(|stopping| *stopping) => break,
        }
        last_tick = tick;
        attempts.spawn(attempt(ctx.clone(), job.clone(), tick));
        while attempts.try_join_next().is_some() {}
    }
    while attempts.join_next().await.is_some() {}
}

/// One tick of one job: try the lock, run if won, report.
async fn attempt(ctx: Arc<RunContext>, job: Arc<Job>, tick: u64) {
    let name = &job.spec.name;
    let result = match job.runner {
        Runner::Executor => match job.spec.lock_config(&ctx.prefix) {
            Ok(cfg) => ctx.executor.execute(&cfg, ctx.work(&job.spec, tick)).await,
            Err(e) => Ok(Some(Err(e))),
        },
        Runner::DemoReport => demo::report(&ctx.prefix, &ctx, tick).await,
        Runner::DemoSync => demo::sync(&ctx.prefix, &ctx, tick).await,
    };
    let (replica, job_name) = (ctx.replica.clone(), name.clone());
    match result {
        Ok(Some(Ok(outcome))) => {
            ctx.counts.runs.fetch_add(1, Ordering::Relaxed);
            ctx.emit(Event::Done {
                replica,
                job: job_name,
                tick,
                millis: u64::try_from(outcome.elapsed.as_millis()).unwrap_or(u64::MAX),
                lock_lost: outcome.lock_lost,
            });
        }
        Ok(None) => {
            ctx.counts.skipped.fetch_add(1, Ordering::Relaxed);
            ctx.emit(Event::Skipped {
                replica,
                job: job_name,
                tick,
            });
        }
        Ok(Some(Err(error))) => {
            ctx.counts.errors.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(job = name, %error, "run failed");
            ctx.emit(Event::Error {
                replica,
                job: job_name,
                tick,
                message: error.to_string(),
            });
        }
        Err(error) => {
            ctx.counts.errors.fetch_add(1, Ordering::Relaxed);
            ctx.emit(Event::Error {
                replica,
                job: job_name,
                tick,
                message: error_chain(&error),
            });
        }
    }
}

/// An error and its sources, `: `-separated.
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
