//! The dashboard mounted in an application's axum server, beside its own routes: three jobs run
//! on a scheduler over SQLite, and `/shedlock` shows them, with pause, resume and run now behind a
//! token. `cargo run -p shedlock-examples --example dashboard -- --serve` serves until Ctrl-C on
//! <http://127.0.0.1:8080/shedlock> (the token is printed); without `--serve` it runs for a few
//! seconds, reads its own `/shedlock/api/jobs` once and stops. docs/dashboard.md has the rules.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use shedlock_core::admin::LockAdmin;
use shedlock_core::jobs::HistoryPolicy;
use shedlock_core::{Job, LockingTaskExecutor, Schedule, Scheduler, Shutdown};
use shedlock_sqlx::SqliteLockProvider;
use shedlock_sqlx::sqlx::sqlite::SqliteConnectOptions;
use shedlock_web::Dashboard;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let serve = std::env::args().any(|a| a == "--serve");
    let dir = tempfile::tempdir()?;
    let options = SqliteConnectOptions::new()
        .filename(dir.path().join("app.db"))
        .create_if_missing(true);
    // History, so the job pages and the jobs page's strips have runs to show.
    let provider = SqliteLockProvider::from_options(options)
        .history(HistoryPolicy::keep(100))
        .connect()
        .await?;
    provider.create_table_if_not_exists().await?;
    let provider = Arc::new(provider);

    let executor = LockingTaskExecutor::builder(Arc::clone(&provider))
        .default_at_most(Duration::from_mins(1))
        .build()?;
    let scheduler = Scheduler::new(executor);
    scheduler.add(Job::new(
        "report",
        Schedule::every(Duration::from_secs(2))?,
        |_| async { Ok::<(), std::io::Error>(()) },
    ))?;
    let calls = Arc::new(AtomicU32::new(0));
    scheduler.add(Job::new(
        "sync-invoices",
        Schedule::every(Duration::from_secs(3))?,
        move |_| {
            // Every third run fails, so the page has a failure to show.
            let fail = calls.fetch_add(1, Ordering::Relaxed) % 3 == 2;
            async move {
                if fail {
                    Err(std::io::Error::other("the invoice service answered 503"))
                } else {
                    Ok(())
                }
            }
        },
    ))?;
    scheduler.add(Job::new(
        "nightly-cleanup",
        Schedule::cron_in("0 0 3 * * *", "Europe/Berlin")?,
        |_| async { Ok::<(), std::io::Error>(()) },
    ))?;
    scheduler.start().await?;

    // In a service the token comes from a secret store; here, one per run.
    let token = format!(
        "example-{:016x}",
        std::hash::BuildHasher::hash_one(
            &std::collections::hash_map::RandomState::new(),
            std::time::SystemTime::now()
        )
    );
    let dashboard = Dashboard::new(Arc::clone(&provider) as Arc<dyn LockAdmin>)
        .action_token("example-operator", &token)?
        .loopback_only();
    let app = Router::new()
        .route("/", get(|| async { "the application's own routes" }))
        .nest("/shedlock", dashboard.router());
    let listener = tokio::net::TcpListener::bind(if serve {
        "127.0.0.1:8080"
    } else {
        "127.0.0.1:0"
    })
    .await?;
    let address = listener.local_addr()?;
    println!("dashboard on http://{address}/shedlock (action token: {token})");
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    if serve {
        shedlock_core::shutdown_signal().await?;
    } else {
        tokio::time::sleep(Duration::from_secs(4)).await;
        let jobs = fetch(address, "/shedlock/api/jobs").await?;
        let jobs: serde_json::Value = serde_json::from_str(&jobs)?;
        for job in jobs.as_array().into_iter().flatten() {
            println!(
                "{}: {}, last run {}",
                job["job"], job["schedule_words"], job["last_run"]["outcome"]
            );
        }
    }
    server.abort();
    Shutdown::new(Duration::from_secs(10))
        .scheduler(&scheduler)
        .run()
        .await;
    Ok(())
}

/// One GET over a plain TCP connection, as a curl would: the example needs no HTTP client.
async fn fetch(address: std::net::SocketAddr, path: &str) -> std::io::Result<String> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(address).await?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await?;
    let (_, body) = answer
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("no HTTP answer"))?;
    Ok(body.to_owned())
}
