//! One replica: runs its jobs on a [`shedlock_core::Scheduler`], records every run in the
//! [run log](crate::runlog) and reports what happened as [`Event`]s.
//!
//! The replica has no timer of its own: each job is a [`shedlock_core::Job`] on a fixed-rate
//! schedule aligned to the Unix epoch, so all replicas name the same fires (a fire is the job
//! and its scheduled instant `F`). At each `F` every replica's scheduler asks the store to claim
//! the fire; one runs it, the others hear "claimed elsewhere" (or "held", when the previous run
//! still holds the lock). A replica learns what its scheduler decided from its
//! [`JobStatus`] counters, polled every few milliseconds, and reports each decision as an
//! event: [`Event::Ran`] (from the run itself, with its fire), [`Event::Skipped`],
//! [`Event::Missed`] (with the reason) or [`Event::Error`].
//!
//! The replica stops when its stop signal fires: a [`Shutdown`] of its scheduler claims nothing
//! more, steps the leader-only jobs' latch down at once, lets the runs in flight finish within the
//! grace period, releases their locks, and the replica reports [`Event::Stopped`] and returns.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use shedlock_core::provider::chrono::{DateTime, Utc};
use shedlock_core::{
    Job, LeaderLatch, LockingTaskExecutor, Schedule, Scheduler, Shutdown, current_lock,
    provider::{Fire, LockProvider},
    scheduler::{JobStatus, OnHeld},
};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::database::{BoxError, Database};
use crate::event::Event;
use crate::job::JobSpec;
use crate::leader::{LeaderOptions, latch_config, report_terms};
use crate::runlog::RunLog;

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
    pub jobs: Vec<JobSpec>,
    /// The run log's table.
    pub runs_table: String,
    /// The lock table (the store's default when `None`); the key prefix on Redis and etcd.
    pub lock_table: Option<String>,
    /// The owner id (default: `$SHEDLOCK_OWNER_ID`, else `hostname:pid:random`).
    pub owner_id: Option<String>,
    /// The executor's per-call timeout (default 5 s).
    pub call_timeout: Option<Duration>,
    /// How long the runs in flight may take to finish at shutdown before they are cancelled.
    pub grace: Duration,
    /// The leader latch of the `leader_only` jobs (its election, lease and intervals; its
    /// label and owner are the replica's).
    pub leader: LeaderOptions,
}

/// The shutdown grace of a replica unless told otherwise: longer than any run of the demo.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(10);

/// What a run reports back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// How long it ran (this process's monotonic clock).
    pub elapsed: Duration,
    /// Whether the lock was lost during the run (the run then stopped early).
    pub lock_lost: bool,
}

/// What every run of one replica shares.
#[derive(Debug)]
pub struct RunContext {
    replica: String,
    session: String,
    log: RunLog,
    events: mpsc::UnboundedSender<Event>,
}

/// The tick of `fire` in `job`'s schedule: its instant in ms since the Unix epoch divided by
/// the period, the same number on every replica.
#[must_use]
pub fn tick_of(job: &JobSpec, fire: DateTime<Utc>) -> u64 {
    let period = u64::try_from(job.every.as_millis()).unwrap_or(1).max(1);
    u64::try_from(fire.timestamp_millis()).unwrap_or(0) / period
}

impl RunContext {
    /// The context of `replica`'s runs: recorded under `session` in `log`, reported on `events`.
    #[must_use]
    pub fn new(
        replica: &str,
        session: &str,
        log: RunLog,
        events: mpsc::UnboundedSender<Event>,
    ) -> Self {
        Self {
            replica: replica.to_owned(),
            session: session.to_owned(),
            log,
            events,
        }
    }

    fn emit(&self, event: Event) {
        // The receiver is gone only when the process is shutting down.
        let _ = self.events.send(event);
    }

    /// The body of every job, run by the scheduler under the fire's lock: records the start
    /// (with the fire `F`) in the run log, reports [`Event::Ran`], works for a random time from
    /// the job's `work` range (stopping early if the lock is lost), records the end and reports
    /// [`Event::Done`]; a failure is reported as [`Event::Error`] and returned.
    ///
    /// # Errors
    ///
    /// Outside a locked run, or when the run log cannot be written.
    pub async fn work(
        &self,
        job: &JobSpec,
        fire: Fire,
        trigger: Option<i64>,
    ) -> Result<Outcome, BoxError> {
        let tick = tick_of(job, fire.at());
        let result = self.record_run(job, fire, tick, trigger).await;
        match &result {
            Ok(outcome) => self.emit(Event::Done {
                replica: self.replica.clone(),
                job: job.name.clone(),
                tick,
                millis: u64::try_from(outcome.elapsed.as_millis()).unwrap_or(u64::MAX),
                lock_lost: outcome.lock_lost,
            }),
            Err(error) => self.emit(Event::Error {
                replica: self.replica.clone(),
                job: job.name.clone(),
                tick,
                message: error_chain(&**error),
            }),
        }
        result
    }

    async fn record_run(
        &self,
        job: &JobSpec,
        fire: Fire,
        tick: u64,
        trigger: Option<i64>,
    ) -> Result<Outcome, BoxError> {
        let lock = current_lock().ok_or("RunContext::work must run under the job's lock")?;
        let started = Instant::now();
        let id = self
            .log
            .start(
                &self.session,
                &job.name,
                &self.replica,
                tick,
                fire.at().timestamp_micros(),
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
            trigger,
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

/// The error a run of job `job` with `fail` returns once its work is done, for its fire at
/// `fire_at`: what the store records as the job's last error.
#[must_use]
pub fn failure_text(job: &str, fire_at: DateTime<Utc>) -> String {
    format!(
        "job {job:?} failed on purpose: the fire of {} (quotes \"kept\", ünïcode kept)",
        fire_at.format("%Y-%m-%dT%H:%M:%S%.3fZ")
    )
}

/// The scheduled job of `spec`: lock `<prefix><name>`, a fixed rate of `spec.every`, the
/// spec's lock settings, its body [`RunContext::work`].
///
/// # Errors
///
/// An invalid period.
pub fn scheduled_job(spec: &JobSpec, prefix: &str, ctx: &Arc<RunContext>) -> Result<Job, BoxError> {
    let (body_spec, body_ctx) = (spec.clone(), ctx.clone());
    let job = Job::new(
        spec.name.clone(),
        Schedule::every(spec.every)?,
        move |run| {
            let (spec, ctx) = (body_spec.clone(), body_ctx.clone());
            async move {
                let outcome = ctx.work(&spec, run.fire(), run.trigger()).await;
                match outcome {
                    Ok(_) if spec.fail => Err(failure_text(&spec.name, run.fire().at()).into()),
                    other => other.map(drop),
                }
            }
        },
    )
    .lock_name(format!("{prefix}{}", spec.name))
    .at_most(spec.at_most)
    .keep_alive(spec.keep_alive)
    .catch_up(spec.catch_up)
    .on_held(if spec.run_late {
        OnHeld::RunLate
    } else {
        OnHeld::Skip
    });
    Ok(if spec.at_least.is_zero() {
        job
    } else {
        job.at_least(spec.at_least)
    })
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
/// Setting up failed (store, executor, run log, a job the scheduler refuses).
pub async fn run(
    opts: ReplicaOptions,
    db: &Database,
    stop: watch::Receiver<bool>,
    events: mpsc::UnboundedSender<Event>,
) -> Result<(), BoxError> {
    let provider = db
        .lock_provider(opts.lock_table.as_deref(), opts.call_timeout)
        .await?;
    run_with(opts, provider, db, stop, events).await
}

/// [`run`] on a lock store of the caller's (Redis, etcd, or SQL), the run log on `runlog`.
///
/// # Errors
///
/// As [`run`].
pub async fn run_with(
    opts: ReplicaOptions,
    provider: Arc<dyn LockProvider>,
    runlog: &Database,
    mut stop: watch::Receiver<bool>,
    events: mpsc::UnboundedSender<Event>,
) -> Result<(), BoxError> {
    // The latch of the leader-only jobs, on the same store, reporting its terms as events.
    let latch = if opts.jobs.iter().any(|j| j.leader_only) {
        let latch = LeaderLatch::start(provider.clone(), latch_config(&opts.leader)?)?;
        Some(latch)
    } else {
        None
    };
    let mut builder = LockingTaskExecutor::builder(provider);
    if let Some(owner) = &opts.owner_id {
        builder = builder.owner_id(owner.clone());
    }
    if let Some(timeout) = opts.call_timeout {
        builder = builder.call_timeout(timeout);
    }
    let executor = builder.build()?;
    let owner = executor.owner_id().to_owned();
    let ctx = Arc::new(RunContext::new(
        &opts.replica,
        &opts.session,
        RunLog::new(runlog, &opts.runs_table)?,
        events,
    ));
    let terms = latch
        .as_ref()
        .map(|l| report_terms(l, opts.replica.clone(), ctx.events.clone()));
    let scheduler = Scheduler::new(executor);
    for spec in &opts.jobs {
        let job = scheduled_job(spec, &opts.prefix, &ctx)?;
        scheduler.add(match (&latch, spec.leader_only) {
            (Some(latch), true) => job.leader_only(latch.clone()),
            _ => job,
        })?;
    }
    ctx.emit(Event::Ready {
        replica: ctx.replica.clone(),
        pid: std::process::id(),
        owner: owner.clone(),
        wall_ms: wall_ms(),
    });
    tracing::info!(replica = ctx.replica, owner, "replica ready");
    scheduler.start().await?;

    let mut watcher = Watcher::new(&opts.jobs, &scheduler);
    let mut poll = tokio::time::interval(Duration::from_millis(10));
    loop {
        tokio::select! {
            _ = poll.tick() => watcher.poll(&scheduler, &ctx),
            // Resolves when stop turns true or its sender is gone.
            _ = stop.wait_for(|stopping| *stopping) => break,
        }
    }
    // The latch of the leader-only jobs steps down at once, so another replica leads while
    // this one drains; `Shutdown` finds it through the scheduler.
    let report = Shutdown::new(opts.grace).scheduler(&scheduler).run().await;
    tracing::info!(replica = ctx.replica, drained = ?report.drained, "scheduler drained");
    for error in &report.latch_errors {
        tracing::warn!(%error, "closing the latch failed; its row expires after the lease");
    }
    watcher.poll(&scheduler, &ctx);
    if let Some(terms) = terms {
        let _ = terms.await;
    }
    let statuses = scheduler.statuses();
    let sum = |f: fn(&JobStatus) -> u64| statuses.iter().map(f).sum::<u64>();
    ctx.emit(Event::Stopped {
        replica: ctx.replica.clone(),
        runs: sum(|s| s.runs),
        skipped: sum(|s| s.claimed_elsewhere + s.held),
        errors: sum(|s| s.errors + s.store_errors),
        missed: sum(|s| s.missed),
    });
    Ok(())
}

/// Turns the scheduler's counters into per-fire events.
///
/// A job's [`JobStatus::next_fire`] names the fire its scheduler waits for; it changes only
/// once that fire is decided (claimed elsewhere, held, missed, or run to its end). So a count
/// that grew since the last poll belongs to the fire named then (and the fires right after it,
/// when it grew by more than one: a paused process misses several in a row; fires met while a
/// run held the lock follow that run's fire).
struct Watcher {
    jobs: HashMap<String, (JobSpec, Option<JobStatus>)>,
}

impl Watcher {
    fn new(specs: &[JobSpec], scheduler: &Scheduler) -> Self {
        Self {
            jobs: specs
                .iter()
                .map(|s| (s.name.clone(), (s.clone(), scheduler.status(&s.name))))
                .collect(),
        }
    }

    fn poll(&mut self, scheduler: &Scheduler, ctx: &RunContext) {
        for status in scheduler.statuses() {
            let Some((spec, last)) = self.jobs.get_mut(&status.name) else {
                continue;
            };
            if let Some(before) = last.as_ref() {
                report(spec, before, &status, ctx);
            }
            *last = Some(status);
        }
    }
}

/// The events for what changed between two snapshots of one job's status.
fn report(spec: &JobSpec, before: &JobStatus, now: &JobStatus, ctx: &RunContext) {
    let Some(pending) = before.next_fire else {
        return;
    };
    let period = chrono_period(spec.every);
    let fires = |from: DateTime<Utc>, count: u64| {
        (0..count).map(move |k| from + period * i32::try_from(k).unwrap_or(i32::MAX))
    };
    let (replica, job) = (ctx.replica.clone(), spec.name.clone());
    let skipped = |fire| Event::Skipped {
        replica: replica.clone(),
        job: job.clone(),
        tick: tick_of(spec, fire),
    };
    for fire in fires(pending, now.claimed_elsewhere - before.claimed_elsewhere) {
        ctx.emit(skipped(fire));
    }
    // Fires met while this replica's own run held the lock come after that run's fire.
    let held_from = match &now.last_run {
        // (`last_run` is set when a run ends, before the fires it held are counted.)
        Some(run) if run.fire >= pending => run.fire + period,
        _ => pending,
    };
    for fire in fires(held_from, now.held - before.held) {
        ctx.emit(skipped(fire));
    }
    let store_errors = now.store_errors - before.store_errors;
    let reason = if store_errors > 0 {
        "the store failed while the window was open"
    } else {
        "its window passed before this replica claimed it"
    };
    for fire in fires(pending, now.paused - before.paused) {
        ctx.emit(Event::Paused {
            replica: replica.clone(),
            job: job.clone(),
            tick: tick_of(spec, fire),
        });
    }
    for fire in fires(pending, now.missed - before.missed) {
        ctx.emit(Event::Missed {
            replica: replica.clone(),
            job: job.clone(),
            tick: tick_of(spec, fire),
            reason: reason.to_owned(),
        });
    }
    if store_errors > 0 {
        // Reported as an error whether or not the window passed meanwhile (then also missed).
        ctx.emit(Event::Error {
            replica,
            job,
            tick: tick_of(spec, pending),
            message: format!(
                "{store_errors} call(s) to the lock store failed (a fire claim; retried within \
                 the fire's window)"
            ),
        });
    }
}

fn chrono_period(every: Duration) -> shedlock_core::provider::chrono::Duration {
    shedlock_core::provider::chrono::Duration::from_std(every)
        .unwrap_or(shedlock_core::provider::chrono::Duration::MAX)
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
