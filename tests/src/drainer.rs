//! The `drainer` program of the graceful-drain tests (`tests/tests/e2e/drain_processes.rs`): one
//! replica that runs `--jobs` scheduled jobs on a [`Scheduler`] over the lock store at `--url`,
//! waits for [`shutdown_signal`] (SIGTERM or Ctrl-C), drains with
//! [`Scheduler::shutdown`]`(--grace)` and exits, reporting what happened as JSON lines
//! ([`DrainEvent`]) on standard output.
//!
//! ```text
//! drainer --url URL --namespace NS [--jobs 1] [--job-prefix drain-] [--every 2s] [--run 1s]
//!         [--grace 10s] [--at-most 2m] [--call-timeout 2s] [--owner ID]
//! ```
//!
//! `--url` takes `postgres://`, `mysql://` (MySQL/MariaDB), `sqlite:` or `redis://`;
//! `--namespace` is the lock table (SQL, created if missing) or the key prefix (Redis). Each job
//! (`<job-prefix><i>`, `i` from 0) fires every `--every` (aligned to the Unix epoch), `at_least`
//! 0, and its run takes `--run`, unless the drain cancels it first: the body then reports
//! `cancel_seen` (what it saw through its [`RunContext`] and through
//! [`current_lock`](shedlock_core::current_lock)) and waits to be dropped. Logs go to standard
//! error (`RUST_LOG`, default `warn`). Exit status 0 after a drain, 2 on a usage or store error.
//!
//! [`shutdown_signal`]: shedlock_core::shutdown_signal

use std::io::Write as _;
use std::process::ExitCode;
use std::str::FromStr as _;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use shedlock_core::{
    Job, LockingTaskExecutor, RunContext, Schedule, Scheduler, admin::LockAdmin, parse_duration,
    scheduler::RunOutcome,
};
use shedlock_sqlx::{MySqlLockProvider, PgLockProvider, SqliteLockProvider};

use shedlock_demo::database::{BoxError, DbKind, sqlite_options};

/// One thing the drainer reports, one JSON object per line (`{"event":"run_started",…}`).
/// Instants are milliseconds since the Unix epoch: `fire_ms` a fire's scheduled instant, `wall_ms`
/// this process's wall clock when it happened.
///
/// ```
/// use shedlock_tests::drainer::DrainEvent;
///
/// let line = r#"{"event":"run_started","job":"drain-0","fire_ms":4000,"wall_ms":4003}"#;
/// assert_eq!(
///     DrainEvent::parse(line),
///     Some(DrainEvent::RunStarted { job: "drain-0".into(), fire_ms: 4000, wall_ms: 4003 })
/// );
/// assert_eq!(DrainEvent::parse("a log line"), None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum DrainEvent {
    /// The scheduler has started and the signal handlers are installed: a SIGTERM from now on
    /// drains.
    Ready {
        /// This process's id.
        pid: u32,
        /// Its owner id (`locked_by`).
        owner: String,
        /// Whether the store records fires (`None`: not known yet).
        fire_claims: Option<bool>,
        /// The wall clock.
        wall_ms: i64,
    },
    /// A run of `job` for the fire at `fire_ms` began (its lock is held).
    RunStarted {
        /// The job (and lock) name.
        job: String,
        /// The fire's scheduled instant.
        fire_ms: i64,
        /// The wall clock.
        wall_ms: i64,
    },
    /// A run completed its work (`--run`) and is about to return.
    RunEnded {
        /// The job.
        job: String,
        /// The fire.
        fire_ms: i64,
        /// The wall clock.
        wall_ms: i64,
    },
    /// A run was told to stop by the drain (its grace ran out).
    CancelSeen {
        /// The job.
        job: String,
        /// The fire.
        fire_ms: i64,
        /// Whether `current_lock()` inside the run says cancelled too.
        current_lock_cancelled: bool,
        /// The wall clock.
        wall_ms: i64,
    },
    /// The stop signal arrived; the drain begins.
    Signal {
        /// `SIGTERM` or `SIGINT`.
        name: String,
        /// The wall clock.
        wall_ms: i64,
    },
    /// [`Scheduler::shutdown`] returned.
    Drained {
        /// Locks released by their runs within the grace.
        finished: usize,
        /// Locks whose runs were cancelled and released by the drain.
        cancelled: usize,
        /// Releases that failed.
        release_failures: usize,
        /// How long `shutdown` took (ms, monotonic).
        drain_ms: u64,
        /// The wall clock.
        wall_ms: i64,
    },
    /// A job's last run as the scheduler recorded it, after the drain.
    LastRun {
        /// The job.
        job: String,
        /// Runs started by this process.
        runs: u64,
        /// The last run's fire.
        fire_ms: i64,
        /// Its outcome: `succeeded`, `failed`, `panicked` or `cancelled`.
        outcome: String,
    },
}

impl DrainEvent {
    /// The event on `line`, or `None` if it is not one.
    #[must_use]
    pub fn parse(line: &str) -> Option<Self> {
        serde_json::from_str(line.trim()).ok()
    }

    fn emit(&self) {
        if let Ok(json) = serde_json::to_string(self) {
            let mut out = std::io::stdout().lock();
            // A closed pipe (the test went away) must not stop the drain.
            let _ = writeln!(out, "{json}").and_then(|()| out.flush());
        }
    }
}

/// The drainer's settings; see the [module docs](self).
#[derive(Debug, Clone)]
pub struct DrainerOptions {
    /// The lock store's URL.
    pub url: String,
    /// The lock table (SQL) or key prefix (Redis).
    pub namespace: String,
    /// How many jobs.
    pub jobs: usize,
    /// The jobs' name prefix.
    pub job_prefix: String,
    /// Their period.
    pub every: Duration,
    /// How long a run works.
    pub run: Duration,
    /// The drain's grace.
    pub grace: Duration,
    /// The jobs' `at_most`.
    pub at_most: Duration,
    /// The executor's and the store's per-call timeout.
    pub call_timeout: Duration,
    /// The owner id (default: the executor's).
    pub owner: Option<String>,
}

impl DrainerOptions {
    /// Parses the command line (without the program name).
    ///
    /// # Errors
    ///
    /// An unknown option, a missing value, a bad number or duration, or no `--url` /
    /// `--namespace`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shedlock_tests::drainer::DrainerOptions;
    ///
    /// let args = ["--url", "redis://127.0.0.1", "--namespace", "t:", "--jobs", "3", "--grace", "500ms"];
    /// let options = DrainerOptions::parse(args.map(String::from))?;
    /// assert_eq!((options.jobs, options.grace), (3, Duration::from_millis(500)));
    /// assert!(DrainerOptions::parse(["--jobs".to_owned()]).is_err());
    /// # Ok::<(), shedlock_demo::database::BoxError>(())
    /// ```
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Self, BoxError> {
        let mut options = Self {
            url: String::new(),
            namespace: String::new(),
            jobs: 1,
            job_prefix: "drain-".to_owned(),
            every: Duration::from_secs(2),
            run: Duration::from_secs(1),
            grace: Duration::from_secs(10),
            at_most: Duration::from_mins(2),
            call_timeout: Duration::from_secs(2),
            owner: None,
        };
        let mut args = args.into_iter();
        while let Some(flag) = args.next() {
            let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
            let duration = || parse_duration(&value).map_err(|e| format!("{flag} {value:?}: {e}"));
            match flag.as_str() {
                "--url" => options.url.clone_from(&value),
                "--namespace" => options.namespace.clone_from(&value),
                "--jobs" => options.jobs = value.parse().map_err(|e| format!("--jobs: {e}"))?,
                "--job-prefix" => options.job_prefix.clone_from(&value),
                "--every" => options.every = duration()?,
                "--run" => options.run = duration()?,
                "--grace" => options.grace = duration()?,
                "--at-most" => options.at_most = duration()?,
                "--call-timeout" => options.call_timeout = duration()?,
                "--owner" => options.owner = Some(value),
                _ => return Err(format!("unknown option {flag}").into()),
            }
        }
        if options.url.is_empty() || options.namespace.is_empty() {
            return Err("--url and --namespace are required".into());
        }
        Ok(options)
    }
}

/// The lock store at `url` with its admin surface: a SQL table `namespace` (created if missing)
/// or Redis keys under the prefix `namespace`, with the per-call timeout `call_timeout`.
///
/// # Errors
///
/// An unsupported URL, an invalid table name, or a store that cannot be reached.
pub async fn open_store(
    url: &str,
    namespace: &str,
    call_timeout: Duration,
) -> Result<Arc<dyn LockAdmin>, BoxError> {
    if shedlock_demo::store::is_redis_url(url) {
        return Ok(Arc::new(
            shedlock_redis::RedisLockProvider::builder(url)
                .key_prefix(namespace)
                .call_timeout(call_timeout)
                .connect()
                .await?,
        ));
    }
    let store: Arc<dyn LockAdmin> = match DbKind::of_url(url)? {
        DbKind::Postgres => {
            let pool = PgLockProvider::pool_options()
                .connect_with(sqlx::postgres::PgConnectOptions::from_str(url)?)
                .await?;
            Arc::new(
                PgLockProvider::builder(pool)
                    .table(namespace)
                    .call_timeout(call_timeout)
                    .build()?,
            )
        }
        DbKind::MySql => {
            let pool = MySqlLockProvider::pool_options()
                .connect_with(sqlx::mysql::MySqlConnectOptions::from_str(url)?)
                .await?;
            Arc::new(
                MySqlLockProvider::builder(pool)
                    .table(namespace)
                    .call_timeout(call_timeout)
                    .build()?,
            )
        }
        DbKind::Sqlite => {
            let pool = SqliteLockProvider::pool_options()
                .connect_with(sqlite_options(url)?)
                .await?;
            Arc::new(
                SqliteLockProvider::builder(pool)
                    .table(namespace)
                    .call_timeout(call_timeout)
                    .build()?,
            )
        }
    };
    store.create_table().await?;
    Ok(store)
}

/// The `drainer` binary's `main`.
#[must_use]
pub fn main() -> ExitCode {
    let options = match DrainerOptions::parse(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(error) => {
            eprintln!("drainer: {error}");
            return ExitCode::from(2);
        }
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("drainer: cannot start the tokio runtime: {error}");
            return ExitCode::from(2);
        }
    };
    let result = runtime.block_on(run(options));
    drop(runtime);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            let mut message = error.to_string();
            let mut source = error.source();
            while let Some(cause) = source {
                message = format!("{message}: {cause}");
                source = cause.source();
            }
            eprintln!("drainer: {message}");
            ExitCode::from(2)
        }
    }
}

/// Runs the jobs until SIGTERM or Ctrl-C, then drains; see the [module docs](self).
///
/// # Errors
///
/// The store cannot be opened, a job is refused, or the signal handlers cannot be installed.
pub async fn run(options: DrainerOptions) -> Result<(), BoxError> {
    // Installed before anything can run, so a SIGTERM never finds the default disposition
    // (which would end the process without a drain): `shutdown_signal` installs its handlers
    // when called, and keeps a signal that comes before it is awaited.
    let signal = shedlock_core::shutdown_signal();
    let store = open_store(&options.url, &options.namespace, options.call_timeout).await?;
    let mut executor = LockingTaskExecutor::builder(store)
        .default_at_most(options.at_most)
        .call_timeout(options.call_timeout);
    if let Some(owner) = &options.owner {
        executor = executor.owner_id(owner.clone());
    }
    let executor = executor.build()?;
    let owner = executor.owner_id().to_owned();
    let scheduler = Scheduler::new(executor);
    let schedule = Schedule::every(options.every)?;
    for i in 0..options.jobs {
        let name = format!("{}{i}", options.job_prefix);
        let work = options.run;
        scheduler.add(
            Job::new(name.clone(), schedule.clone(), move |run| {
                body(name.clone(), work, run)
            })
            .at_least(Duration::ZERO),
        )?;
    }
    scheduler.start().await?;
    DrainEvent::Ready {
        pid: std::process::id(),
        owner,
        fire_claims: scheduler.uses_fire_claims(),
        wall_ms: wall_ms(),
    }
    .emit();
    let name = signal.await?;
    DrainEvent::Signal {
        name: name.to_owned(),
        wall_ms: wall_ms(),
    }
    .emit();
    let started = tokio::time::Instant::now();
    let drained = scheduler.shutdown(options.grace).await;
    DrainEvent::Drained {
        finished: drained.finished,
        cancelled: drained.cancelled,
        release_failures: drained.release_failures,
        drain_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        wall_ms: wall_ms(),
    }
    .emit();
    for status in scheduler.statuses() {
        if let Some(last) = &status.last_run {
            DrainEvent::LastRun {
                job: status.name.clone(),
                runs: status.runs,
                fire_ms: last.fire.timestamp_millis(),
                outcome: outcome_name(&last.outcome).to_owned(),
            }
            .emit();
        }
    }
    Ok(())
}

/// One run: `work` long, unless the drain cancels it first.
async fn body(job: String, work: Duration, run: RunContext) {
    let fire_ms = run.fire().at().timestamp_millis();
    DrainEvent::RunStarted {
        job: job.clone(),
        fire_ms,
        wall_ms: wall_ms(),
    }
    .emit();
    tokio::select! {
        () = tokio::time::sleep(work) => {
            DrainEvent::RunEnded { job, fire_ms, wall_ms: wall_ms() }.emit();
        }
        () = run.lock().cancelled() => {
            let current_lock_cancelled =
                shedlock_core::current_lock().is_some_and(|lock| lock.is_cancelled());
            DrainEvent::CancelSeen { job, fire_ms, current_lock_cancelled, wall_ms: wall_ms() }
                .emit();
            // A body that stops at its next await point: the scheduler drops it.
            std::future::pending::<()>().await;
        }
    }
}

fn outcome_name(outcome: &RunOutcome) -> &'static str {
    match outcome {
        RunOutcome::Succeeded => "succeeded",
        RunOutcome::Failed(_) => "failed",
        RunOutcome::Panicked => "panicked",
        RunOutcome::Cancelled => "cancelled",
        _ => "other",
    }
}

fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
