//! An axum server whose report endpoint runs once across replicas, with `shedlock_tower::LockLayer`.
//!
//! ```text
//! cargo run -p shedlock-tests --example axum_layer
//! curl -i -X POST localhost:3000/reports/daily & curl -i -X POST localhost:3000/reports/daily
//! ```
//!
//! One request builds the report (200 after two seconds); the other, sent while it runs, gets 409
//! Conflict with a `Retry-After` header at once. Start a second copy with `PORT=3001` on the same
//! database file (`DB_FILE`) and the two processes share the locks, as replicas do. Dependencies:
//! axum (features `http1`, `tokio`), shedlock-core, shedlock-sqlx (`sqlite`), shedlock-tower
//! (`http`), tokio, tracing-subscriber.

use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::routing::post;
use shedlock_core::{LockingTaskExecutor, current_lock, shutdown_signal};
use shedlock_sqlx::SqliteLockProvider;
use shedlock_tower::{HttpRefusals, LockLayer};

/// Builds one report. It runs under the request's lock: `current_lock()` is its handle.
async fn build_report(request: Request) -> String {
    let lock = current_lock().expect("the layer runs the handler under its lock");
    let work = tokio::time::sleep(Duration::from_secs(2));
    tokio::select! {
        () = work => format!("built {} (fencing token {:?})\n", request.uri().path(), lock.fencing_token()),
        // With `keep_alive(true)` on the layer, a lock that could not be extended ends up here.
        () = lock.lost() => "the lock was lost; stopped\n".to_owned(),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,shedlock_core=debug".into()),
        )
        .init();
    let db_file = std::env::var("DB_FILE").unwrap_or_else(|_| {
        std::env::temp_dir()
            .join("shedlock-axum-example.db")
            .display()
            .to_string()
    });
    let provider = SqliteLockProvider::connect(&format!("sqlite://{db_file}?mode=rwc")).await?;
    provider.create_table_if_not_exists().await?;
    let executor = LockingTaskExecutor::new(provider)?;

    let lock = LockLayer::builder(
        executor.clone(),
        // One lock per report, from the reports this server knows: `/reports/daily` locks
        // `report-daily`. Any other path is not a lock (`None`), answered 404 without a store
        // call. Each distinct name is a row and a metric series, so the path is matched, never
        // formatted into the name.
        |request: &Request| match request.uri().path() {
            "/reports/daily" => Some("report-daily"),
            "/reports/weekly" => Some("report-weekly"),
            _ => None,
        },
        // 409 when another replica runs it, with Retry-After (one more read per 409).
        HttpRefusals::new().retry_after(true),
    )
    .at_most(Duration::from_mins(1))
    .keep_alive(true)
    .build()?;

    let app = Router::new()
        .route("/reports/{name}", post(build_report))
        // `route_layer`: the lock applies to the routes above only, and a path no route matches
        // is axum's 404 without a lock. The handler's extractors run under the lock: put
        // authentication and a body limit or timeout outside it (the crate docs, "What runs
        // under the lock"). This handler reads no body.
        .route_layer(lock)
        .route("/health", axum::routing::get(|| async { "ok\n" }));

    let port = std::env::var("PORT").unwrap_or_else(|_| "3000".to_owned());
    let listener = tokio::net::TcpListener::bind(format!("127.0.0.1:{port}")).await?;
    tracing::info!("listening on {}", listener.local_addr()?);
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = shutdown_signal().await;
        })
        .await?;
    // Releases the locks of requests still in flight before the process exits.
    executor.shutdown(Duration::from_secs(10)).await;
    Ok(())
}
