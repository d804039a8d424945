//! What the three providers share: the link to the database, and time and duration conversions.
//!
//! The link ([`Link`]) has the connections, the checked settings and the lazily detected table
//! layout. The call loop is in [`call`], and the connection checkout in [`checkout`].

mod call;
mod checkout;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use shedlock_core::{
    Error, Result,
    provider::{LockRecord, validate_name},
};
use sqlx::Database;
use tokio::sync::OnceCell;

use crate::builder::Settings;
use crate::conns::{ConnectionStats, Connections};

pub(crate) use call::{AfterLostReply, Call, CallStep, Target};
pub(crate) use checkout::{Checkout, checkout_lost, statement};

/// How many connections a provider opens at most, 4.
///
/// [`max_connections`](crate::LockProviderBuilder::max_connections) may say otherwise. It is also
/// the size of the pools the providers' `pool_options()` describe.
///
/// A lock call holds a connection only for its statement. So 4 connections serve thousands of lock
/// calls per second and any number of held locks. Raise it only for many locks taken at the very
/// same instant. The repository's `docs/sql-stores.md` explains sizing.
pub const DEFAULT_POOL_SIZE: u32 = 4;

/// What the provider learned about its table on first use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "one flag per optional column or column set, each detected and used on its own"
)]
pub(crate) struct Schema {
    /// The table has the fencing-token column.
    pub(crate) has_token: bool,
    /// The table has the `last_fire` column, so it records fires.
    pub(crate) has_last_fire: bool,
    /// The table has every job state column, so it records runs (`release_run`).
    pub(crate) has_job_state: bool,
    /// The table has every pause column, so fire claims honour pauses and operators can pause.
    pub(crate) has_pause: bool,
    /// The table has every trigger column, so operators can ask for a run now.
    pub(crate) has_trigger: bool,
    /// The `locked_by` column's length in characters, if limited.
    pub(crate) owner_max: Option<usize>,
}

/// A provider's link to its database: the connections, the checked settings and the table layout.
/// The table layout is detected once.
pub(crate) struct Link<DB: Database> {
    pub(crate) conns: Connections<DB>,
    pub(crate) settings: Settings,
    /// Where the connections go (`Postgres at db:5432/app`), for messages.
    target: Target,
    schema: OnceCell<Schema>,
}

impl<DB: Database> Link<DB> {
    pub(crate) fn new(conns: Connections<DB>, settings: Settings, target: String) -> Self {
        let target = Target {
            name: target.into(),
            refusal: match &conns {
                Connections::Own(own) => Some(Arc::clone(&own.refusal)),
                Connections::Pool(_) => None,
            },
            max: conns.max(),
        };
        Self {
            conns,
            settings,
            target,
            schema: OnceCell::new(),
        }
    }

    pub(crate) fn call(&self, op: &'static str) -> Call {
        Call::new(op, self.settings.call_timeout, self.target.clone())
    }

    /// Where the connections go, for messages (`Postgres at db:5432/app`).
    pub(crate) fn target(&self) -> &str {
        &self.target.name
    }

    pub(crate) fn stats(&self) -> ConnectionStats {
        self.conns.stats()
    }

    /// The error of a call that got no connection.
    ///
    /// sqlx's pool may run out of time to hand one out. That is as much a timeout as the call's own
    /// deadline. Anything else is a connection that could not be opened. The error then names the
    /// database and why.
    pub(crate) fn checkout_error(&self, call: &Call, error: sqlx::Error) -> Error {
        match error {
            sqlx::Error::PoolTimedOut => call.timeout_error(),
            error => Error::backend(
                format!(
                    "connect to {}: {}",
                    self.target.name,
                    crate::cause::text(&error)
                ),
                crate::cause::source(error),
            ),
        }
    }

    /// The table layout, detected by `detect` on the first call that needs it.
    ///
    /// A failed detection is not cached, and the next call tries again. A detection fails when the
    /// table is missing or the database is down.
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
    /// How extend and release recognise `record`'s acquisition.
    ///
    /// It is `Some(token)` where the table has the token column. It is `None` where they match on
    /// `locked_at` instead. It is checked before any connection is taken.
    ///
    /// # Errors
    ///
    /// [`Error::is_invalid_config`] if the table has tokens but the record has none. Such a record
    /// was not acquired through this provider.
    pub(crate) fn record_token(self, record: &LockRecord) -> Result<Option<i64>> {
        if !self.has_token {
            return Ok(None);
        }
        record.fencing_token().map(Some).ok_or_else(|| {
            Error::invalid_config(format!(
                "the record of {:?} has no fencing token but the table has one; it was not \
                 acquired through this provider",
                record.name()
            ))
        })
    }

    /// Rejects an owner id longer than the `locked_by` column.
    ///
    /// A non-strict MySQL would truncate it otherwise. That would make the lock impossible to
    /// release.
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

/// `d` in whole microseconds, rounded up. So a lock is never shorter than asked.
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

/// A migration file's statement next to a provider's DDL: comments, quotes, the final `;` and white
/// space do not count.
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
mod tests;
