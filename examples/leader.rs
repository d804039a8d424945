//! Leader election: three replicas elect one leader through a lock row; the leadership moves
//! when the leader resigns and when it shuts down.
//! `cargo run -p shedlock-examples --example leader`
//!
//! Each replica runs a `LeaderLatch` on the database the replicas share (here a SQLite file, so
//! the replicas are tasks of one process with a pool each, as processes on one host would be; for
//! replicas on several hosts use `PgLockProvider` or `MySqlLockProvider`). The leader renews its
//! lease; the others try to take the row every `acquire_interval`. Timings here are five times
//! shorter than the defaults (lease 15 s, renew every 5 s, step down 10 s after the last renew,
//! followers every 2 s) so the demo is quick.
//!
//! Expected failover: a replica that resigns or shuts down releases the row, and another leads
//! within one `acquire_interval` (+ jitter). A leader that crashes leaves the row until its lease
//! ends: another leads within `lease + acquire_interval` (+ jitter).

use std::path::Path;
use std::time::{Duration, Instant};

use shedlock_core::{LeaderLatch, LeaderLatchConfig, latch::LeaderState};
use shedlock_sqlx::SqliteLockProvider;
use shedlock_sqlx::sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode};

/// The error type of `main`.
type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

const ELECTION: &str = "report-scheduler";

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    // Logs to standard error (`RUST_LOG`, default `warn`), so the library's warnings show.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    // A SQLite file in a temporary directory stands in for the database the replicas share.
    let dir = tempfile::tempdir()?;
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("app.db").display());
    SqliteLockProvider::connect(&url)
        .await?
        .create_table_if_not_exists()
        .await?;
    let t0 = Instant::now();

    let mut replicas = Vec::new();
    for i in 1..=3 {
        replicas.push(start_replica(dir.path(), &format!("replica-{i}"), t0).await?);
    }

    let first = wait_for_leader(&replicas).await?;
    tokio::time::sleep(Duration::from_secs(3)).await;

    println!("{} --- {} resigns", stamp(t0), replicas[first].owner_id());
    let asked = Instant::now();
    replicas[first].resign().await;
    let second = wait_for_leader(&replicas).await?;
    println!("{} --- new leader after {:?}", stamp(t0), asked.elapsed());
    tokio::time::sleep(Duration::from_secs(3)).await;

    println!(
        "{} --- {} shuts down",
        stamp(t0),
        replicas[second].owner_id()
    );
    let asked = Instant::now();
    replicas[second].close().await?;
    let third = wait_for_leader(&replicas).await?;
    println!("{} --- new leader after {:?}", stamp(t0), asked.elapsed());
    tokio::time::sleep(Duration::from_secs(2)).await;

    println!("{} --- everyone shuts down", stamp(t0));
    for replica in &replicas {
        replica.close().await?;
    }
    assert_ne!(first, second);
    assert_ne!(second, third);
    Ok(())
}

/// One replica: its own connections to the shared database, a latch, a printer of its state changes and
/// its leader-only work.
async fn start_replica(dir: &Path, name: &str, t0: Instant) -> Result<LeaderLatch, BoxError> {
    let options = SqliteConnectOptions::new()
        .filename(dir.join("app.db"))
        .journal_mode(SqliteJournalMode::Wal)
        .busy_timeout(Duration::from_millis(300)); // below the latch's call timeout
    let provider = SqliteLockProvider::from_options(options).connect().await?;

    let config = LeaderLatchConfig::builder(ELECTION)
        .owner_id(name)
        .lease(Duration::from_secs(3))
        .renew_interval(Duration::from_secs(1))
        .renew_deadline(Duration::from_secs(2))
        .acquire_interval(Duration::from_millis(400))
        .build()?;
    let latch = LeaderLatch::start(provider, config)?;

    // Print every change of this replica's state.
    let mut states = latch.watch();
    let who = name.to_owned();
    tokio::spawn(async move {
        loop {
            let state = states.borrow_and_update().clone();
            println!("{} {who}: {}", stamp(t0), describe(&state));
            if state == LeaderState::Stopped || states.changed().await.is_err() {
                break;
            }
        }
    });

    // Work only the leader does, once per term; it stops when the term ends.
    let who = name.to_owned();
    latch.spawn_leader_work(move |term| {
        let who = who.clone();
        async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tokio::select! {
                    () = term.ended() => break,
                    _ = tick.tick() => println!(
                        "{} {who}: leader-only work (token {})",
                        stamp(t0),
                        token(term.fencing_token())
                    ),
                }
            }
            println!("{} {who}: leader-only work stopped", stamp(t0));
        }
    });
    Ok(latch)
}

fn describe(state: &LeaderState) -> String {
    match state {
        LeaderState::Leader { term } => format!(
            "LEADER (its term {}, fencing token {})",
            term.number(),
            token(term.fencing_token())
        ),
        LeaderState::Follower {
            leader: Some(leader),
        } => {
            format!("follower; the leader is {}", leader.owner_id())
        }
        LeaderState::Follower { leader: None } => "follower; no leader seen".to_owned(),
        LeaderState::Starting => "starting (no answer from the store yet)".to_owned(),
        LeaderState::Stopped => "stopped".to_owned(),
        other => format!("{other:?}"),
    }
}

/// Waits until exactly one replica leads; its index.
async fn wait_for_leader(replicas: &[LeaderLatch]) -> Result<usize, BoxError> {
    let give_up = Instant::now() + Duration::from_secs(30);
    let mut poll = tokio::time::interval(Duration::from_millis(20));
    loop {
        poll.tick().await;
        let leaders: Vec<usize> = (0..replicas.len())
            .filter(|&i| replicas[i].is_leader())
            .collect();
        match leaders[..] {
            [one] => return Ok(one),
            [] if Instant::now() < give_up => {}
            [] => return Err("no leader elected within 30 s".into()),
            _ => return Err(format!("more than one leader: {leaders:?}").into()),
        }
    }
}

fn token(token: Option<i64>) -> String {
    token.map_or_else(|| "none".to_owned(), |t| t.to_string())
}

fn stamp(t0: Instant) -> String {
    format!("[{:>5.2}s]", t0.elapsed().as_secs_f64())
}
