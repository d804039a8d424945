//! Leader heartbeats: the proof, in database time, that two leaders never acted at once.
//!
//! While a `replica leader` process leads, its [writer](spawn_from_env) writes one row every
//! [`BEAT_EVERY`] to a heartbeat table, each stamped with the database's clock
//! (`clock_timestamp()`) and with its term (owner id, term number, fencing token, and the
//! `locked_at` of the acquire that began it). A row is written the way a careful leader acts:
//! it checks [`LeaderLatch::is_leader`] (and that its term is still active) *before* the insert,
//! and commits only if that still holds *after* the insert returned; otherwise it rolls back.
//! So every committed row was written while its writer believed it led, both before and after
//! the moment the database stamped it.
//!
//! [`violations`] then checks the rows of an election: ordered by the database time at which
//! each term's acquire succeeded (`locked_at`), no term has a row at or after the next term's
//! start, no term has a row before its own start, and fencing tokens strictly increase. A latch
//! that let an instance believe it led after its lease could be taken (a renew deadline not
//! honoured while a call hangs, a paused task, a release that is not owner-safe) shows up as a
//! row of the old term after the new term's start.
//!
//! The writer runs when [`BEATS_TABLE_ENV`] names the table (the multi-process tests set it
//! per process); it needs Postgres.
//!
//! ```
//! use shedlock_demo::heartbeat::{Beat, spans, violations};
//!
//! let beat = |owner: &str, term: u64, token: i64, locked_at_us: i64, at_us: i64| Beat {
//!     replica: owner.to_owned(),
//!     owner: owner.to_owned(),
//!     term,
//!     token: Some(token),
//!     locked_at_us,
//!     at_us,
//! };
//! // a leads from 100, b takes over at 300 (after a's last beat at 250): fine.
//! let fine = [beat("a", 1, 1, 100, 120), beat("a", 1, 1, 100, 250), beat("b", 1, 2, 300, 310)];
//! assert!(violations(&spans(&fine)).is_empty());
//! // a still writes at 320, after b's term began at 300: an overlap.
//! let bad = [beat("a", 1, 1, 100, 120), beat("b", 1, 2, 300, 310), beat("a", 1, 1, 100, 320)];
//! assert_eq!(violations(&spans(&bad)).len(), 1);
//! ```

use std::collections::BTreeMap;
use std::str::FromStr as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use shedlock_core::{LeaderLatch, latch::LeaderTerm};
use sqlx::postgres::PgConnectOptions;
use sqlx::{AssertSqlSafe, Connection as _, PgConnection, Row as _};
use tokio::sync::Mutex;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use crate::database::{BoxError, Database, Pool, check_identifier};

/// The environment variable that switches the writer on in `replica leader`: the heartbeat
/// table's name (a plain identifier; create it first with [`Beats::create_table`]).
pub const BEATS_TABLE_ENV: &str = crate::leader::BEATS_TABLE_ENV;

/// How often a leader writes a heartbeat row.
pub const BEAT_EVERY: Duration = Duration::from_millis(50);

/// The database's clock in µs since the Unix epoch, at the moment the expression is evaluated.
const DB_NOW_US: &str = "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT";

/// One heartbeat row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Beat {
    /// The writer's label (`r1`, …).
    pub replica: String,
    /// The writer's owner id (unique per process).
    pub owner: String,
    /// The writer's term number (1, 2, … per process).
    pub term: u64,
    /// The term's fencing token, if the store has tokens.
    pub token: Option<i64>,
    /// When the acquire that began the term succeeded (the store's clock, µs since the epoch).
    pub locked_at_us: i64,
    /// When the row was written (the database's clock, µs since the epoch).
    pub at_us: i64,
}

/// A heartbeat table.
#[derive(Debug, Clone)]
pub struct Beats {
    table: String,
}

impl Beats {
    /// The heartbeat table `table`.
    ///
    /// # Errors
    ///
    /// `table` is not a plain identifier.
    pub fn new(table: &str) -> Result<Self, BoxError> {
        check_identifier(table)?;
        Ok(Self {
            table: table.to_owned(),
        })
    }

    /// The table's name.
    #[must_use]
    pub fn table(&self) -> &str {
        &self.table
    }

    /// Creates the table if it does not exist (before the writers start).
    ///
    /// # Errors
    ///
    /// `db` is not Postgres, or the DDL failed.
    pub async fn create_table(&self, db: &Database) -> Result<(), BoxError> {
        let t = &self.table;
        let sql = format!(
            "CREATE TABLE IF NOT EXISTS {t} (id BIGSERIAL PRIMARY KEY, election TEXT NOT NULL, \
             replica TEXT NOT NULL, owner_id TEXT NOT NULL, term BIGINT NOT NULL, token BIGINT, \
             locked_at_us BIGINT NOT NULL, at_us BIGINT NOT NULL)"
        );
        sqlx::query(AssertSqlSafe(sql))
            .execute(postgres(db)?)
            .await?;
        Ok(())
    }

    /// The committed rows of `election`, in the order the database stamped them.
    ///
    /// # Errors
    ///
    /// `db` is not Postgres, or the query failed.
    pub async fn read(&self, db: &Database, election: &str) -> Result<Vec<Beat>, BoxError> {
        let t = &self.table;
        let sql = format!(
            "SELECT replica, owner_id, term, token, locked_at_us, at_us FROM {t} \
             WHERE election = $1 ORDER BY at_us, id"
        );
        let rows = sqlx::query(AssertSqlSafe(sql))
            .bind(election)
            .fetch_all(postgres(db)?)
            .await?;
        rows.iter()
            .map(|row| {
                Ok(Beat {
                    replica: row.try_get("replica")?,
                    owner: row.try_get("owner_id")?,
                    term: u64::try_from(row.try_get::<i64, _>("term")?)?,
                    token: row.try_get("token")?,
                    locked_at_us: row.try_get("locked_at_us")?,
                    at_us: row.try_get("at_us")?,
                })
            })
            .collect()
    }

    /// Starts the writer for `latch` (see the [module](self) docs) on a connection of its own to
    /// `url`. It writes while `latch` leads and ends when the latch stops; the handle resolves
    /// then. The writer keeps a handle of the latch, so the latch stops only through
    /// [`LeaderLatch::close`], not by dropping the caller's handles.
    ///
    /// # Errors
    ///
    /// `url` is not a valid Postgres URL.
    pub fn spawn_writer(
        &self,
        latch: &LeaderLatch,
        replica: &str,
        url: &str,
    ) -> Result<JoinHandle<()>, BoxError> {
        let t = &self.table;
        let writer = Arc::new(Writer {
            latch: latch.clone(),
            election: latch.name().to_owned(),
            replica: replica.to_owned(),
            options: PgConnectOptions::from_str(url)?,
            insert: format!(
                "INSERT INTO {t} (election, replica, owner_id, term, token, locked_at_us, at_us) \
                 VALUES ($1, $2, $3, $4, $5, $6, {DB_NOW_US})"
            ),
            timeout: latch.config().call_timeout(),
            conn: Mutex::new(None),
            counts: Counts::default(),
        });
        Ok(latch.spawn_leader_work(move |term| writer.clone().beat_while_leading(term)))
    }
}

/// Starts the heartbeat writer for `latch` if [`BEATS_TABLE_ENV`] is set (the replica program
/// calls this); `Ok(None)` when it is not.
///
/// # Errors
///
/// The variable holds an invalid table name, or `db` is not Postgres.
pub fn spawn_from_env(
    latch: &LeaderLatch,
    replica: &str,
    db: &Database,
) -> Result<Option<JoinHandle<()>>, BoxError> {
    let Ok(table) = std::env::var(BEATS_TABLE_ENV) else {
        return Ok(None);
    };
    postgres(db)?;
    Beats::new(&table)?
        .spawn_writer(latch, replica, db.url())
        .map(Some)
}

fn postgres(db: &Database) -> Result<&sqlx::PgPool, BoxError> {
    match db.pool() {
        Pool::Postgres(pool) => Ok(pool),
        _ => Err(format!("leader heartbeats need Postgres, not {}", db.kind()).into()),
    }
}

#[derive(Debug, Default)]
struct Counts {
    committed: AtomicU64,
    discarded: AtomicU64,
    failed: AtomicU64,
}

/// How one heartbeat went.
enum Outcome {
    /// Written and committed: the writer led before and after the insert.
    Committed,
    /// Not written, or rolled back: the writer no longer led.
    NotLeading,
}

struct Writer {
    latch: LeaderLatch,
    election: String,
    replica: String,
    options: PgConnectOptions,
    insert: String,
    timeout: Duration,
    /// The writer's connection between beats; taken out during a beat, so a beat that fails,
    /// times out or is cancelled drops (closes) it and the next beat connects afresh.
    conn: Mutex<Option<PgConnection>>,
    counts: Counts,
}

impl Writer {
    fn leads(&self, term: &LeaderTerm) -> bool {
        self.latch.is_leader() && term.is_active()
    }

    /// Leader-only work for one term: a heartbeat every [`BEAT_EVERY`] until the term ends (the
    /// latch also cancels this future then).
    async fn beat_while_leading(self: Arc<Self>, term: LeaderTerm) {
        let mut tick = tokio::time::interval(BEAT_EVERY);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                () = term.ended() => break,
                _ = tick.tick() => {}
            }
            match tokio::time::timeout(self.timeout, self.beat(&term)).await {
                Ok(Ok(Outcome::Committed)) => {
                    self.counts.committed.fetch_add(1, Ordering::Relaxed);
                }
                Ok(Ok(Outcome::NotLeading)) => {
                    self.counts.discarded.fetch_add(1, Ordering::Relaxed);
                    break;
                }
                Ok(Err(error)) => {
                    self.counts.failed.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(%error, "heartbeat failed");
                }
                Err(_) => {
                    self.counts.failed.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(timeout = ?self.timeout, "heartbeat timed out");
                }
            }
        }
        tracing::info!(
            term = term.number(),
            committed = self.counts.committed.load(Ordering::Relaxed),
            discarded = self.counts.discarded.load(Ordering::Relaxed),
            failed = self.counts.failed.load(Ordering::Relaxed),
            "heartbeats (totals so far)"
        );
    }

    async fn beat(&self, term: &LeaderTerm) -> Result<Outcome, BoxError> {
        if !self.leads(term) {
            return Ok(Outcome::NotLeading);
        }
        let taken = self.conn.lock().await.take();
        let mut conn = match taken {
            Some(conn) => conn,
            None => PgConnection::connect_with(&self.options).await?,
        };
        let record = term.record();
        let mut tx = conn.begin().await?;
        sqlx::query(AssertSqlSafe(self.insert.clone()))
            .bind(&self.election)
            .bind(&self.replica)
            .bind(term.owner_id())
            .bind(i64::try_from(term.number())?)
            .bind(term.fencing_token())
            .bind(record.locked_at().timestamp_micros())
            .execute(&mut *tx)
            .await?;
        // The row's time lies between the check above and this one.
        let outcome = if self.leads(term) {
            tx.commit().await?;
            Outcome::Committed
        } else {
            tx.rollback().await?;
            Outcome::NotLeading
        };
        *self.conn.lock().await = Some(conn);
        Ok(outcome)
    }
}

/// One term as its heartbeats show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TermSpan {
    /// The leader's label.
    pub replica: String,
    /// The leader's owner id.
    pub owner: String,
    /// Its term number.
    pub term: u64,
    /// The term's fencing token.
    pub token: Option<i64>,
    /// When the store granted the term (µs, store clock).
    pub locked_at_us: i64,
    /// The first heartbeat (µs, database clock).
    pub first_us: i64,
    /// The last heartbeat (µs, database clock).
    pub last_us: i64,
    /// How many heartbeats.
    pub beats: usize,
}

/// Groups heartbeats by term (owner id and term number), ordered by the terms' start.
#[must_use]
pub fn spans(beats: &[Beat]) -> Vec<TermSpan> {
    let mut by_term: BTreeMap<(&str, u64), TermSpan> = BTreeMap::new();
    for beat in beats {
        by_term
            .entry((beat.owner.as_str(), beat.term))
            .and_modify(|span| {
                span.first_us = span.first_us.min(beat.at_us);
                span.last_us = span.last_us.max(beat.at_us);
                span.locked_at_us = span.locked_at_us.min(beat.locked_at_us);
                span.beats += 1;
            })
            .or_insert_with(|| TermSpan {
                replica: beat.replica.clone(),
                owner: beat.owner.clone(),
                term: beat.term,
                token: beat.token,
                locked_at_us: beat.locked_at_us,
                first_us: beat.at_us,
                last_us: beat.at_us,
                beats: 1,
            });
    }
    let mut spans: Vec<TermSpan> = by_term.into_values().collect();
    spans.sort_by_key(|s| (s.locked_at_us, s.first_us));
    spans
}

/// What is wrong with a sequence of terms (from [`spans`]); empty when terms never overlapped:
/// each term's heartbeats lie in `[its start, the next term's start)`, and tokens strictly
/// increase from term to term.
#[must_use]
pub fn violations(spans: &[TermSpan]) -> Vec<String> {
    let mut found = Vec::new();
    for span in spans {
        if span.first_us < span.locked_at_us {
            found.push(format!(
                "{} term {} wrote at {} µs, before its term began at {} µs",
                span.replica, span.term, span.first_us, span.locked_at_us
            ));
        }
    }
    for pair in spans.windows(2) {
        let (old, new) = (&pair[0], &pair[1]);
        if old.last_us >= new.locked_at_us {
            found.push(format!(
                "{} term {} (token {:?}) still wrote at {} µs, {} µs after {} term {} \
                 (token {:?}) began at {} µs",
                old.replica,
                old.term,
                old.token,
                old.last_us,
                old.last_us - new.locked_at_us,
                new.replica,
                new.term,
                new.token,
                new.locked_at_us
            ));
        }
        if let (Some(a), Some(b)) = (old.token, new.token)
            && b <= a
        {
            found.push(format!(
                "token {b} of {} term {} is not greater than the earlier term's token {a}",
                new.replica, new.term
            ));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn beat(owner: &str, term: u64, token: i64, locked_at_us: i64, at_us: i64) -> Beat {
        Beat {
            replica: format!("label-{owner}"),
            owner: owner.to_owned(),
            term,
            token: Some(token),
            locked_at_us,
            at_us,
        }
    }

    #[test]
    fn disjoint_terms_pass() {
        let beats = [
            beat("a", 1, 7, 1_000, 1_010),
            beat("a", 1, 7, 1_000, 1_900),
            beat("b", 1, 8, 2_000, 2_001),
            beat("a", 2, 9, 3_000, 3_500),
        ];
        let spans = spans(&beats);
        assert_eq!(spans.len(), 3);
        assert_eq!(
            (spans[0].first_us, spans[0].last_us, spans[0].beats),
            (1_010, 1_900, 2)
        );
        assert_eq!(spans[2].owner, "a");
        assert_eq!(violations(&spans), Vec::<String>::new());
    }

    #[test]
    fn a_beat_after_the_next_term_began_is_an_overlap() {
        // Also when the late beat is not the old term's last one to be read.
        let beats = [
            beat("a", 1, 7, 1_000, 1_010),
            beat("b", 1, 8, 2_000, 2_001),
            beat("a", 1, 7, 1_000, 2_000),
            beat("b", 1, 8, 2_000, 2_500),
        ];
        let found = violations(&spans(&beats));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("still wrote at 2000"), "{found:?}");
    }

    #[test]
    fn an_overlap_with_a_later_term_than_the_next_is_found() {
        let beats = [
            beat("a", 1, 7, 1_000, 1_010),
            beat("b", 1, 8, 2_000, 2_001),
            beat("c", 1, 9, 3_000, 3_001),
            beat("a", 1, 7, 1_000, 3_100),
        ];
        assert!(!violations(&spans(&beats)).is_empty());
    }

    #[test]
    fn beats_before_the_start_and_tokens_going_back_are_found() {
        let early = [beat("a", 1, 7, 1_000, 999)];
        assert_eq!(violations(&spans(&early)).len(), 1);
        let backwards = [beat("a", 1, 9, 1_000, 1_001), beat("b", 1, 8, 2_000, 2_001)];
        let found = violations(&spans(&backwards));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("not greater"), "{found:?}");
    }
}
