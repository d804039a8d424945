//! What the three providers share: the per-call deadline, connection checkout (closing a
//! connection whose statement did not finish), the lazily detected table layout, and time and
//! duration conversions.

use std::future::Future;
use std::time::Duration;

use shedlock_core::{Error, Result, validate_name};
use sqlx::pool::PoolConnection;
use sqlx::{Database, Pool};
use tokio::sync::OnceCell;
use tokio::time::{Instant, timeout_at};

use crate::builder::Settings;

/// The size of the dedicated pools the providers' `pool_options()` describe.
pub(crate) const DEFAULT_POOL_SIZE: u32 = 4;

/// One provider call: its name and its deadline (connection checkout plus statements).
#[derive(Debug)]
pub(crate) struct Call {
    op: &'static str,
    timeout: Duration,
    deadline: Instant,
}

impl Call {
    pub(crate) fn new(op: &'static str, timeout: Duration) -> Self {
        Self {
            op,
            timeout,
            deadline: Instant::now() + timeout,
        }
    }

    /// Runs `fut` until the call's deadline.
    ///
    /// # Errors
    ///
    /// [`Error::is_timeout`] if the deadline passed first (`fut` is dropped).
    pub(crate) async fn timed<F: Future>(&self, fut: F) -> Result<F::Output> {
        timeout_at(self.deadline, fut)
            .await
            .map_err(|_| Error::timeout(self.op, self.timeout))
    }
}

/// A pooled connection for one call. It goes back to the pool only if its last statement
/// finished: a connection dropped mid-statement (a timeout, a cancelled call, an I/O error) is
/// detached and closed at once, so the pool never hands out a connection with a half-read reply
/// and a black-holed connection never blocks the pool's return check.
pub(crate) struct Checkout<DB: Database> {
    conn: Option<PoolConnection<DB>>,
    in_flight: bool,
}

impl<DB: Database> Checkout<DB> {
    /// Takes a connection from `pool` before the call's deadline. `map` turns a pool error into
    /// ours.
    pub(crate) async fn take(
        pool: &Pool<DB>,
        call: &Call,
        map: impl FnOnce(sqlx::Error) -> Error,
    ) -> Result<Self> {
        let conn = call.timed(pool.acquire()).await?.map_err(map)?;
        Ok(Self {
            conn: Some(conn),
            in_flight: false,
        })
    }

    /// The connection, for one statement; [`settle`](Self::settle) its outcome before the next.
    pub(crate) fn conn(&mut self) -> &mut DB::Connection {
        self.in_flight = true;
        // `conn` is `Some` from `take` until drop.
        self.conn.as_deref_mut().unwrap_or_else(|| unreachable!())
    }

    /// The outcome of a statement run with [`Call::timed`]: the value, a timeout, or the
    /// statement's error mapped by `map`. The connection stays usable only when the statement
    /// finished (successfully or with an error from the database itself).
    pub(crate) fn settle<T>(
        &mut self,
        outcome: Result<std::result::Result<T, sqlx::Error>>,
        map: impl FnOnce(sqlx::Error) -> Error,
    ) -> Result<T> {
        match outcome {
            Err(timeout) => Err(timeout),
            Ok(Ok(value)) => {
                self.in_flight = false;
                Ok(value)
            }
            Ok(Err(error)) => {
                if statement_finished(&error) {
                    self.in_flight = false;
                }
                Err(map(error))
            }
        }
    }
}

/// Whether the connection is still in a clean state after `error`.
fn statement_finished(error: &sqlx::Error) -> bool {
    matches!(
        error,
        sqlx::Error::Database(_)
            | sqlx::Error::RowNotFound
            | sqlx::Error::ColumnNotFound(_)
            | sqlx::Error::ColumnIndexOutOfBounds { .. }
            | sqlx::Error::ColumnDecode { .. }
            | sqlx::Error::TypeNotFound { .. }
            | sqlx::Error::Encode(_)
            | sqlx::Error::Decode(_)
    )
}

impl<DB: Database> Drop for Checkout<DB> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take()
            && self.in_flight
        {
            tracing::debug!("closing a lock-store connection whose statement did not finish");
            // Detaching lets the pool open a replacement; dropping the raw connection closes its
            // socket without waiting for the server.
            drop(conn.detach());
        }
    }
}

/// What the provider learned about its table on first use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Schema {
    /// The table has the fencing-token column.
    pub(crate) has_token: bool,
    /// The `locked_by` column's length in characters, if limited.
    pub(crate) owner_max: Option<usize>,
}

/// The pool, the checked settings and the table layout (detected once).
pub(crate) struct Store<DB: Database> {
    pub(crate) pool: Pool<DB>,
    pub(crate) settings: Settings,
    schema: OnceCell<Schema>,
}

impl<DB: Database> Store<DB> {
    pub(crate) fn new(pool: Pool<DB>, settings: Settings) -> Self {
        Self {
            pool,
            settings,
            schema: OnceCell::new(),
        }
    }

    pub(crate) fn call(&self, op: &'static str) -> Call {
        Call::new(op, self.settings.call_timeout)
    }

    /// The table layout, detected by `detect` on the first call that needs it. A failed
    /// detection (table missing, database down) is not cached: the next call tries again.
    pub(crate) async fn schema<F, Fut>(&self, detect: F) -> Result<Schema>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Schema>>,
    {
        self.schema.get_or_try_init(detect).await.copied()
    }

    /// Checks a lock name against the configured limit.
    pub(crate) fn check_name(&self, name: &str) -> Result<()> {
        validate_name(name, self.settings.max_name_len)
    }
}

impl Schema {
    /// Rejects an owner id longer than the `locked_by` column (rather than letting a non-strict
    /// MySQL truncate it, which would make the lock impossible to release).
    pub(crate) fn check_owner(&self, owner: &str) -> Result<()> {
        let len = owner.chars().count();
        if owner.is_empty() {
            return Err(Error::invalid_config("the owner id is empty"));
        }
        match self.owner_max {
            Some(max) if len > max => Err(Error::invalid_config(format!(
                "the owner id is {len} characters long; the locked_by column holds {max}"
            ))),
            _ => Ok(()),
        }
    }
}

/// The checks every detection makes once it has read the columns.
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) fn check_name_capacity(settings: &Settings, name_max: Option<usize>) -> Result<()> {
    match name_max {
        Some(max) if max < settings.max_name_len => Err(Error::schema(
            format!(
                "the {} column of {} holds {max} characters but max_name_len is {}; set \
                 max_name_len({max}) or widen the column",
                settings.columns.name, settings.table, settings.max_name_len
            ),
            None,
        )),
        _ => Ok(()),
    }
}

/// `d` in whole microseconds, rounded up (a lock is never shorter than asked).
#[cfg_attr(
    not(feature = "postgres"),
    allow(dead_code, reason = "used by Postgres")
)]
pub(crate) fn micros_ceil(d: Duration) -> i64 {
    i64::try_from(d.as_nanos().div_ceil(1_000)).unwrap_or(i64::MAX)
}

/// `d` in whole milliseconds, rounded up.
#[cfg_attr(
    not(any(feature = "mysql", feature = "sqlite")),
    allow(dead_code, reason = "used by MySQL and SQLite")
)]
pub(crate) fn millis_ceil(d: Duration) -> i64 {
    i64::try_from(d.as_nanos().div_ceil(1_000_000)).unwrap_or(i64::MAX)
}

/// A UTC time from microseconds since the Unix epoch.
#[cfg(feature = "mysql")]
pub(crate) fn utc_from_micros(micros: i64) -> Result<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::from_timestamp_micros(micros)
        .ok_or_else(|| Error::backend_message(format!("read an out-of-range time ({micros} µs)")))
}

/// A migration file's statement next to a provider's DDL: comments, quotes, the final `;` and
/// white space do not count.
#[cfg(test)]
pub(crate) fn assert_same_ddl(migration: &str, ddl: &str) {
    let path = format!("{}/migrations/{migration}", env!("CARGO_MANIFEST_DIR"));
    let file = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let normalize = |sql: &str| {
        sql.lines()
            .filter(|l| !l.trim_start().starts_with("--"))
            .collect::<Vec<_>>()
            .join(" ")
            .replace(['"', '`'], "")
            .trim()
            .trim_end_matches(';')
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(
        normalize(&file),
        normalize(ddl),
        "{path} and the built-in DDL differ"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_round_up() {
        assert_eq!(micros_ceil(Duration::from_nanos(1)), 1);
        assert_eq!(micros_ceil(Duration::from_micros(7)), 7);
        assert_eq!(millis_ceil(Duration::from_micros(1_001)), 2);
        assert_eq!(millis_ceil(Duration::from_secs(3)), 3_000);
        assert_eq!(millis_ceil(Duration::ZERO), 0);
    }

    #[test]
    fn owner_ids_must_fit() {
        let schema = Schema {
            has_token: true,
            owner_max: Some(3),
        };
        assert!(schema.check_owner("abc").is_ok());
        assert!(schema.check_owner("äöü").is_ok(), "characters, not bytes");
        assert!(schema.check_owner("abcd").unwrap_err().is_invalid_config());
        assert!(schema.check_owner("").unwrap_err().is_invalid_config());
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_times_out_at_its_deadline() {
        let call = Call::new("acquire", Duration::from_secs(2));
        let err = call
            .timed(std::future::pending::<()>())
            .await
            .expect_err("must time out");
        assert!(err.is_timeout());
        assert_eq!(
            err.to_string(),
            "lock store call `acquire` timed out after 2s"
        );
    }
}
