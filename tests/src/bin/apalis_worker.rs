//! An apalis-cron worker that ticks every second, each tick run by one replica of however many
//! run this program: shedlock-apalis's `CronFireLayer` claims every tick in a Postgres lock table.
//! Each run is recorded in a table of runs, with the tick, the replica, the lock's `locked_at` and
//! the database's clock when it ran. The multi-process tests in `tests/tests/e2e/cron_apalis.rs`
//! start it three times.
//!
//! ```text
//! apalis_worker --url postgres://… --lock-table T --runs-table R --replica NAME
//!               [--seconds 10] [--no-lock]
//! ```
//!
//! It creates both tables if missing, then works for `--seconds`; with `--seconds 0` it only
//! creates them. `--no-lock` builds the same worker without the layer: every replica then runs
//! every tick. Logs go to standard error (`RUST_LOG`, default `warn`). Exit status 0 when the time
//! is up, 2 on a usage, database or worker error.

use std::process::ExitCode;
use std::str::FromStr as _;
use std::time::Duration;

use apalis::prelude::{BoxDynError, Data, WorkerBuilder};
use apalis_cron::{CronScheduler, Tick};
use chrono::{DateTime, Utc};
use shedlock_apalis::CronFireLayer;
use shedlock_core::{LockConfig, LockingTaskExecutor, current_lock};
use shedlock_sqlx::PgLockProvider;
use sqlx::{AssertSqlSafe, PgPool};

/// Where a run is recorded.
#[derive(Clone)]
struct Runs {
    pool: PgPool,
    table: String,
    replica: String,
}

/// The job: record the tick, then work for a while.
async fn record(tick: Tick, runs: Data<Runs>) -> Result<(), BoxDynError> {
    let seconds = i64::try_from(tick.get_timestamp())?;
    let fire = DateTime::<Utc>::from_timestamp(seconds, 0).ok_or("tick out of range")?;
    // The claim's time by the store's clock: `None` without the layer.
    let locked_at = current_lock().map(|lock| lock.record().locked_at());
    sqlx::query(AssertSqlSafe(format!(
        "INSERT INTO {} (fire, replica, locked_at, ran_at) VALUES ($1, $2, $3, clock_timestamp())",
        runs.table
    )))
    .bind(fire)
    .bind(&runs.replica)
    .bind(locked_at)
    .execute(&runs.pool)
    .await?;
    tokio::time::sleep(Duration::from_millis(200)).await;
    Ok(())
}

async fn run(args: Args) -> Result<(), BoxDynError> {
    let pool = PgPool::connect(&args.url).await?;
    let provider = PgLockProvider::builder(pool.clone())
        .table(&args.lock_table)
        .build()?;
    provider.create_table_if_not_exists().await?;
    sqlx::query(AssertSqlSafe(format!(
        "CREATE TABLE IF NOT EXISTS {} (fire TIMESTAMPTZ NOT NULL, replica TEXT NOT NULL, \
         locked_at TIMESTAMPTZ, ran_at TIMESTAMPTZ NOT NULL)",
        args.runs_table
    )))
    .execute(&pool)
    .await?;
    if args.seconds == 0 {
        return Ok(());
    }
    let runs = Runs {
        pool,
        table: args.runs_table,
        replica: args.replica.clone(),
    };
    let schedule = cron::Schedule::from_str("* * * * * *")?;
    let seconds = args.seconds;
    let time_is_up = async move {
        tokio::time::sleep(Duration::from_secs(seconds)).await;
        Ok::<(), std::io::Error>(())
    };
    let worker = WorkerBuilder::new(args.replica.as_str())
        .backend(CronScheduler::new(schedule.clone()))
        .data(runs);
    if args.no_lock {
        worker.build(record).run_until(time_is_up).await?;
    } else {
        let executor = LockingTaskExecutor::builder(provider)
            .owner_id(&args.replica)
            .build()?;
        let job = LockConfig::new("apalis-tick", Duration::from_secs(10))?;
        worker
            // First, so that it wraps every other layer (apalis makes the first layer added the
            // outermost): a tick runs here only if claimed here.
            .layer(CronFireLayer::new(executor, job, schedule))
            .build(record)
            .run_until(time_is_up)
            .await?;
    }
    Ok(())
}

/// The command line.
struct Args {
    url: String,
    lock_table: String,
    runs_table: String,
    replica: String,
    seconds: u64,
    no_lock: bool,
}

impl Args {
    fn parse(mut args: impl Iterator<Item = String>) -> Result<Self, String> {
        let (mut url, mut lock_table, mut runs_table, mut replica) = (None, None, None, None);
        let (mut seconds, mut no_lock) = (10, false);
        while let Some(flag) = args.next() {
            if flag == "--no-lock" {
                no_lock = true;
                continue;
            }
            let value = args.next().ok_or(format!("{flag} needs a value"))?;
            match flag.as_str() {
                "--url" => url = Some(value),
                "--lock-table" => lock_table = Some(value),
                "--runs-table" => runs_table = Some(value),
                "--replica" => replica = Some(value),
                "--seconds" => {
                    seconds = value
                        .parse()
                        .map_err(|_| format!("--seconds takes whole seconds, not {value:?}"))?;
                }
                _ => return Err(format!("unknown option {flag}")),
            }
        }
        let required =
            |value: Option<String>, flag: &str| value.ok_or(format!("{flag} is required"));
        Ok(Self {
            url: required(url, "--url")?,
            lock_table: required(lock_table, "--lock-table")?,
            runs_table: required(runs_table, "--runs-table")?,
            replica: required(replica, "--replica")?,
            seconds,
            no_lock,
        })
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let args = match Args::parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(error) => {
            eprintln!("apalis_worker: {error}");
            return ExitCode::from(2);
        }
    };
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("apalis_worker: {error}");
            ExitCode::from(2)
        }
    }
}
