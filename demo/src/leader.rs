//! Leader mode of a replica (`replica leader`): one [`LeaderLatch`] candidate, reporting each
//! transition as an [`Event`] with this process's wall clock, for the multi-process leader tests.
//!
//! - [`Event::Elected`] when the latch publishes a new term;
//! - [`Event::SteppedDown`] at the moment the term ends ([`LeaderTerm::ended`]: the local
//!   deadline, a refused renew, a resign or close), even when the latch's task is late to publish;
//! - [`Event::Following`] when the latch publishes a follower state (with the leader it saw).
//!
//! The wall times (`SystemTime`, µs) of processes on one host come from one clock, so a test can
//! check that no two replicas' `[Elected, SteppedDown]` intervals intersect. (A per-process
//! `Instant` cannot be compared across processes; replicas on several hosts would need the
//! database clock.)
//!
//! With a run log (`--record`), each term is also written to it like a job run (job = the
//! election name, tick = the term number): start by the database clock when the term is seen,
//! end when it ends. On a voluntary end (resign, close) the end is written before the latch
//! releases the row. After a lost lease the end is written when the term ends, if the database is
//! reachable; otherwise the row stays open and its end is taken as the `lock_until` of the term's
//! first acquire, which understates a term that renewed: use the events for the precise check.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use shedlock_core::{
    LeaderLatch, LeaderLatchConfig,
    latch::{LeaderEvent, LeaderTerm},
    provider::LockProvider,
};
use tokio::sync::{mpsc, watch};

use crate::database::{BoxError, Database};
use crate::event::Event;
use crate::runlog::RunLog;

/// The variable that switches the leader tests' heartbeat writer on (`heartbeat`, a module of
/// builds with the `postgres` feature, documents it).
pub(crate) const BEATS_TABLE_ENV: &str = "SHEDLOCK_LEADER_BEATS";

/// A leader-mode replica's settings; durations left `None` take the latch's defaults.
#[derive(Debug, Clone)]
pub struct LeaderOptions {
    /// Its label in events (`r1`, …).
    pub replica: String,
    /// The election's name (its lock row).
    pub election: String,
    /// The lock table (the store's default when `None`).
    pub lock_table: Option<String>,
    /// The owner id (default: `$SHEDLOCK_OWNER_ID`, else `hostname:pid:random`).
    pub owner_id: Option<String>,
    /// The lease.
    pub lease: Option<Duration>,
    /// How often the leader renews.
    pub renew_interval: Option<Duration>,
    /// How long after its last successful renew was sent the leader steps down.
    pub renew_deadline: Option<Duration>,
    /// How often followers try.
    pub acquire_interval: Option<Duration>,
    /// Random extra delay of followers' attempts.
    pub acquire_jitter: Option<Duration>,
    /// The per-call timeout (latch and store).
    pub call_timeout: Option<Duration>,
    /// Record terms in this run-log table, under `session`.
    pub record: Option<(String, String)>,
}

fn wall_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// Runs a candidate until `stop` turns `true`, then closes the latch (stepping down and releasing
/// the row) and reports [`Event::Stopped`].
///
/// # Errors
///
/// Setting up failed (store, configuration). Store errors while running are the latch's to
/// retry; they are logged, not returned.
pub async fn run(
    opts: LeaderOptions,
    db: &Database,
    stop: watch::Receiver<bool>,
    events: mpsc::UnboundedSender<Event>,
) -> Result<(), BoxError> {
    let provider = db
        .lock_provider(opts.lock_table.as_deref(), opts.call_timeout)
        .await?;
    run_with(opts, provider, Some(db), stop, events).await
}

/// [`run`] on `provider`, with the harness's tables (run log, heartbeats) on `db` if there is
/// one (a Redis store has none: `--record` and heartbeats are refused there).
///
/// # Errors
///
/// As [`run`]; also `--record` or heartbeats asked for without a database.
pub async fn run_with(
    opts: LeaderOptions,
    provider: Arc<dyn LockProvider>,
    db: Option<&Database>,
    mut stop: watch::Receiver<bool>,
    events: mpsc::UnboundedSender<Event>,
) -> Result<(), BoxError> {
    let config = latch_config(&opts)?;
    let log = run_log(&opts, db)?;
    let latch = LeaderLatch::start(provider, config)?;
    let replica = opts.replica.clone();
    let _ = events.send(Event::Ready {
        replica: replica.clone(),
        pid: std::process::id(),
        owner: latch.owner_id().to_owned(),
        wall_ms: wall_us() / 1000,
    });
    // The leader tests' heartbeats, when SHEDLOCK_LEADER_BEATS names a table (crate::heartbeat).
    #[cfg(feature = "postgres")]
    let _beats = match db {
        Some(db) => crate::heartbeat::spawn_from_env(&latch, &replica, db)?,
        None => None,
    };

    // Leader-only work: record the term's end before the latch releases the row on a
    // voluntary end (the latch waits for the work, up to its shutdown grace).
    let _work = log.clone().map(|(log, session)| {
        let (replica, election) = (replica.clone(), opts.election.clone());
        latch.spawn_leader_work(move |term| {
            let (log, session, replica, election) = (
                log.clone(),
                session.clone(),
                replica.clone(),
                election.clone(),
            );
            async move {
                // A term is no fire: its "fire" is the instant it began (distinct per term).
                let record = term.record();
                let began = record.locked_at().timestamp_micros();
                let id = match log
                    .start(&session, &election, &replica, term.number(), began, &record)
                    .await
                {
                    Ok(id) => id,
                    Err(error) => {
                        tracing::warn!(%error, "could not record the term's start");
                        return;
                    }
                };
                term.ended().await;
                if let Err(error) = log.finish(id).await {
                    tracing::warn!(%error, "could not record the term's end");
                }
            }
        })
    });

    // The event stream sees every term, even one shorter than our reaction time; a term that
    // began before the subscription is picked up through `current_term`.
    let mut stream = latch.events();
    let mut reported = 0_u64;
    let elected =
        |term: LeaderTerm, reported: &mut u64| announce(term, reported, &replica, &events);
    if let Some(term) = latch.current_term() {
        elected(term, &mut reported);
    }
    let mut last_leader: Option<Option<String>> = None;
    loop {
        tokio::select! {
            event = stream.recv() => match event {
                Some(LeaderEvent::Elected { term }) => {
                    last_leader = None;
                    elected(term, &mut reported);
                }
                Some(LeaderEvent::Following { leader }) => {
                    let leader = leader.map(|l| l.owner_id().to_owned());
                    if last_leader.as_ref() != Some(&leader) {
                        last_leader = Some(leader.clone());
                        let _ = events.send(Event::Following {
                            replica: replica.clone(),
                            leader,
                            wall_us: wall_us(),
                        });
                    }
                }
                Some(LeaderEvent::Stopped) | None => break,
                Some(_) => {}
            },
            _ = stop.wait_for(|stopping| *stopping) => break,
        }
    }
    if let Err(error) = latch.close().await {
        tracing::warn!(%error, "closing the latch failed; its row expires after the lease");
    }
    let _ = events.send(Event::Stopped {
        replica: opts.replica,
        runs: reported,
        skipped: 0,
        errors: 0,
        missed: 0,
    });
    Ok(())
}

/// The run log terms are recorded in (`--record`), if asked for; refuses what a store without
/// the harness's database cannot do (a run log, heartbeats).
fn run_log(
    opts: &LeaderOptions,
    db: Option<&Database>,
) -> Result<Option<(Arc<RunLog>, String)>, BoxError> {
    // The leader tests' heartbeats (crate::heartbeat) need Postgres, and its driver.
    if std::env::var_os(BEATS_TABLE_ENV).is_some() && (db.is_none() || !cfg!(feature = "postgres"))
    {
        return Err(
            "leader heartbeats need Postgres (and the `postgres` feature), not this store".into(),
        );
    }
    match (&opts.record, db) {
        (Some((table, session)), Some(db)) => {
            Ok(Some((Arc::new(RunLog::new(db, table)?), session.clone())))
        }
        (Some(_), None) => Err("--record needs a SQL database (the run log is a table)".into()),
        (None, _) => Ok(None),
    }
}

pub(crate) fn latch_config(opts: &LeaderOptions) -> Result<LeaderLatchConfig, BoxError> {
    let mut config = LeaderLatchConfig::builder(opts.election.clone());
    if let Some(owner) = &opts.owner_id {
        config = config.owner_id(owner.clone());
    }
    if let Some(d) = opts.lease {
        config = config.lease(d);
    }
    if let Some(d) = opts.renew_interval {
        config = config.renew_interval(d);
    }
    if let Some(d) = opts.renew_deadline {
        config = config.renew_deadline(d);
    }
    if let Some(d) = opts.acquire_interval {
        config = config.acquire_interval(d);
    }
    if let Some(d) = opts.acquire_jitter {
        config = config.acquire_jitter(d);
    }
    if let Some(d) = opts.call_timeout {
        config = config.call_timeout(d);
    }
    Ok(config.build()?)
}

/// Reports `term` as [`Event::Elected`] unless it was (`reported` is the last term number
/// reported), and its end as [`Event::SteppedDown`] when it ends.
fn announce(
    term: LeaderTerm,
    reported: &mut u64,
    replica: &str,
    events: &mpsc::UnboundedSender<Event>,
) {
    if term.number() > *reported {
        *reported = term.number();
        let _ = events.send(Event::Elected {
            replica: replica.to_owned(),
            term: term.number(),
            token: term.fencing_token(),
            wall_us: wall_us(),
        });
        tokio::spawn(report_end(term, replica.to_owned(), events.clone()));
    }
}

/// Reports every term of `latch` as [`Event::Elected`] when it begins and
/// [`Event::SteppedDown`] when it ends (the replica's leader-only jobs follow these terms).
pub(crate) fn report_terms(
    latch: &LeaderLatch,
    replica: String,
    events: mpsc::UnboundedSender<Event>,
) -> tokio::task::JoinHandle<()> {
    let mut stream = latch.events();
    let current = latch.current_term();
    tokio::spawn(async move {
        let mut reported = 0_u64;
        let mut elected = |term: LeaderTerm| announce(term, &mut reported, &replica, &events);
        if let Some(term) = current {
            elected(term);
        }
        loop {
            match stream.recv().await {
                Some(LeaderEvent::Elected { term }) => elected(term),
                Some(LeaderEvent::Stopped) | None => break,
                Some(_) => {}
            }
        }
    })
}

/// Reports the end of `term` the moment it ends.
async fn report_end(term: LeaderTerm, replica: String, events: mpsc::UnboundedSender<Event>) {
    term.ended().await;
    let wall_us = wall_us();
    let reason = term
        .end_reason()
        .map_or_else(|| "ended".to_owned(), |reason| reason.to_string());
    let _ = events.send(Event::SteppedDown {
        replica,
        term: term.number(),
        reason,
        wall_us,
    });
}
