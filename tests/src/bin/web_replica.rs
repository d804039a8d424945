//! The tower layer's multi-process tests' process (`tests/tests/e2e/tower_layer.rs`): an axum
//! server whose routes run under `shedlock_tower::LockLayer` over a `PgLockProvider`.
//!
//! ```text
//! web_replica --url <postgres url> --table <lock table> --runs <runs table> --owner <id> [--work-ms N]
//! ```
//!
//! It creates the lock table if missing, binds `127.0.0.1:0` and prints `{"port":N}` on standard
//! output. Its routes, each under a lock named from the path (`/once/r1` locks `once-r1`; a job
//! that is not 1 to 16 ASCII letters and digits names no lock, a 404):
//!
//! - `GET /once/{job}`: `at_least` 60 s, so a burst of requests runs once, even on a loaded
//!   machine where its requests take up to the test's 20 s each;
//! - `GET /run/{job}`: `at_least` 0, `Retry-After` on a 409.
//!
//! A run inserts a row into the runs table (job, owner, fencing token, `started` by the database
//! clock), works `--work-ms` (default 100), sets `finished`, and answers 200. The test checks those
//! rows for overlaps. It stops on SIGTERM or Ctrl-C, releasing its locks.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::routing::get;
use shedlock_core::{LockingTaskExecutor, current_lock, shutdown_signal};
use shedlock_sqlx::PgLockProvider;
use shedlock_tower::{HttpRefusals, LockLayer};
use sqlx::postgres::PgPoolOptions;
use sqlx::{AssertSqlSafe, PgPool};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

struct Args {
    url: String,
    table: String,
    runs: String,
    owner: String,
    work: Duration,
}

impl Args {
    fn parse() -> Result<Self, BoxError> {
        let mut url = None;
        let mut table = None;
        let mut runs = None;
        let mut owner = None;
        let mut work = Duration::from_millis(100);
        let mut args = std::env::args().skip(1);
        while let Some(flag) = args.next() {
            let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
            match flag.as_str() {
                "--url" => url = Some(value),
                "--table" => table = Some(value),
                "--runs" => runs = Some(check_identifier(value)?),
                "--owner" => owner = Some(value),
                "--work-ms" => work = Duration::from_millis(value.parse()?),
                other => return Err(format!("unknown option {other}").into()),
            }
        }
        let need = |v: Option<String>, what: &str| v.ok_or_else(|| format!("--{what} is required"));
        Ok(Self {
            url: need(url, "url")?,
            table: need(table, "table")?,
            runs: need(runs, "runs")?,
            owner: need(owner, "owner")?,
            work,
        })
    }
}

/// The runs table's name is spliced into SQL: plain identifiers only.
fn check_identifier(name: String) -> Result<String, BoxError> {
    if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        Ok(name)
    } else {
        Err(format!("--runs {name:?} is not a plain identifier").into())
    }
}

/// What a run needs.
#[derive(Clone)]
struct App {
    pool: PgPool,
    insert: Arc<str>,
    finish: Arc<str>,
    owner: Arc<str>,
    work: Duration,
}

/// The lock name of a request: `/once/{job}` locks `once-{job}`, `/run/{job}` locks `run-{job}`,
/// for a job of 1 to 16 ASCII letters and digits; any other request names no lock.
fn lock_name(request: &Request) -> Option<String> {
    let (route, job) = request
        .uri()
        .path()
        .trim_start_matches('/')
        .split_once('/')?;
    let known_job = (1..=16).contains(&job.len()) && job.bytes().all(|b| b.is_ascii_alphanumeric());
    (matches!(route, "once" | "run") && known_job).then(|| format!("{route}-{job}"))
}

/// One run: recorded in the runs table from start to end, by the database's clock.
async fn work(State(app): State<App>, request: Request) -> (StatusCode, String) {
    let token = current_lock().and_then(|lock| lock.fencing_token());
    let job = lock_name(&request).unwrap_or_default();
    let recorded = async {
        let id: i64 = sqlx::query_scalar(AssertSqlSafe(app.insert.to_string()))
            .bind(&job)
            .bind(&*app.owner)
            .bind(token)
            .fetch_one(&app.pool)
            .await?;
        tokio::time::sleep(app.work).await;
        sqlx::query(AssertSqlSafe(app.finish.to_string()))
            .bind(id)
            .execute(&app.pool)
            .await?;
        Ok::<_, sqlx::Error>(())
    };
    match recorded.await {
        Ok(()) => (StatusCode::OK, format!("ran by {}\n", app.owner)),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("could not record the run: {e}\n"),
        ),
    }
}

async fn run() -> Result<(), BoxError> {
    let args = Args::parse()?;
    let provider = PgLockProvider::from_url(&args.url)
        .table(&args.table)
        .connect()
        .await?;
    provider.create_table_if_not_exists().await?;
    let executor = LockingTaskExecutor::builder(provider)
        .owner_id(&args.owner)
        .build()?;
    let app = App {
        pool: PgPoolOptions::new()
            .max_connections(4)
            .connect(&args.url)
            .await?,
        insert: format!(
            "INSERT INTO {} (job, owner, token, started) VALUES ($1, $2, $3, clock_timestamp()) \
             RETURNING id",
            args.runs
        )
        .into(),
        finish: format!(
            "UPDATE {} SET finished = clock_timestamp() WHERE id = $1",
            args.runs
        )
        .into(),
        owner: args.owner.into(),
        work: args.work,
    };
    let once = LockLayer::builder(executor.clone(), lock_name, HttpRefusals::new())
        .at_most(Duration::from_secs(90))
        .at_least(Duration::from_mins(1))
        .build()?;
    let steady = LockLayer::builder(
        executor.clone(),
        lock_name,
        HttpRefusals::new().retry_after(true),
    )
    .at_most(Duration::from_secs(30))
    .build()?;
    let router = Router::new()
        .route("/once/{job}", get(work))
        .route_layer(once)
        .merge(
            Router::new()
                .route("/run/{job}", get(work))
                .route_layer(steady),
        )
        .with_state(app);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    println!("{{\"port\":{}}}", listener.local_addr()?.port());
    axum::serve(listener, router)
        .with_graceful_shutdown(async {
            let _ = shutdown_signal().await;
        })
        .await?;
    executor.shutdown(Duration::from_secs(5)).await;
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("web_replica: {e}");
            ExitCode::FAILURE
        }
    }
}
