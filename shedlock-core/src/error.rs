//! The one error type of shedlock-rs.

use std::error::Error as StdError;
use std::fmt;
use std::time::Duration;

type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// A `Result` whose error defaults to [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in shedlock-rs, as one opaque type.
///
/// A lock held by someone else is **not** an error (it is `Ok(None)`). An `Error` means the
/// question could not be answered: bad input, a store that failed, or a call that timed out.
/// Ask what happened with the `is_*` predicates; the underlying cause, if any, is
/// [`source()`](StdError::source).
///
/// ```
/// use std::time::Duration;
/// use shedlock_core::LockConfig;
///
/// let err = LockConfig::new("", Duration::from_secs(10)).unwrap_err();
/// assert!(err.is_invalid_config());
/// assert_eq!(err.to_string(), "invalid lock configuration: the lock name is empty");
/// ```
pub struct Error {
    inner: Box<Inner>,
}

struct Inner {
    kind: Kind,
    source: Option<BoxError>,
}

#[derive(Debug)]
enum Kind {
    InvalidConfig(String),
    Backend(String),
    Timeout {
        operation: &'static str,
        after: Duration,
        detail: Option<String>,
    },
    MissingTable {
        table: String,
        fix: String,
    },
    Schema(String),
    Unsupported {
        operation: &'static str,
        why: Option<String>,
    },
    Shutdown(&'static str),
    NoExecutor,
    AlreadyInstalled,
}

impl Error {
    fn new(kind: Kind, source: Option<BoxError>) -> Self {
        Self {
            inner: Box::new(Inner { kind, source }),
        }
    }

    /// A configuration or input error: what was wrong and how to fix it. Stores use it for input
    /// they reject before asking the store (a bad table name, a name too long for their column).
    ///
    /// ```
    /// let err = shedlock_core::Error::invalid_config("the table name \"a-b\" is not a plain identifier");
    /// assert!(err.is_invalid_config());
    /// ```
    pub fn invalid_config(message: impl Into<String>) -> Self {
        Self::new(Kind::InvalidConfig(message.into()), None)
    }

    /// A configuration or input error with the error that revealed it (a parser's), kept as the
    /// [`source`](StdError::source).
    ///
    /// ```
    /// let cause = "12x".parse::<u32>().unwrap_err();
    /// let err = shedlock_core::Error::invalid_config_with("the port \"12x\" is not a number", cause);
    /// assert!(err.is_invalid_config());
    /// assert!(std::error::Error::source(&err).is_some());
    /// ```
    pub fn invalid_config_with(
        message: impl Into<String>,
        source: impl Into<Box<dyn StdError + Send + Sync + 'static>>,
    ) -> Self {
        Self::new(Kind::InvalidConfig(message.into()), Some(source.into()))
    }

    /// A store failure, for custom [`LockProvider`](crate::provider::LockProvider) implementations.
    ///
    /// `what` says which operation failed (`"acquire lock \"report\""`); `source` is the
    /// store's own error.
    ///
    /// ```
    /// use shedlock_core::Error;
    ///
    /// let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
    /// let err = Error::backend("acquire lock \"report\"", io);
    /// assert!(err.is_backend());
    /// assert_eq!(err.to_string(), "lock store failed to acquire lock \"report\"");
    /// ```
    pub fn backend(
        what: impl Into<String>,
        source: impl Into<Box<dyn StdError + Send + Sync + 'static>>,
    ) -> Self {
        Self::new(Kind::Backend(what.into()), Some(source.into()))
    }

    /// A store failure with no underlying error value, for custom providers.
    ///
    /// ```
    /// let err = shedlock_core::Error::backend_message("the lock row has an unreadable lock_until");
    /// assert!(err.is_backend());
    /// ```
    pub fn backend_message(what: impl Into<String>) -> Self {
        Self::new(Kind::Backend(what.into()), None)
    }

    /// A store call that did not finish within its timeout.
    ///
    /// ```
    /// use std::time::Duration;
    /// let err = shedlock_core::Error::timeout("acquire", Duration::from_secs(5));
    /// assert!(err.is_timeout());
    /// assert_eq!(err.to_string(), "lock store call `acquire` timed out after 5s");
    /// ```
    #[must_use]
    pub fn timeout(operation: &'static str, after: Duration) -> Self {
        Self::new(
            Kind::Timeout {
                operation,
                after,
                detail: None,
            },
            None,
        )
    }

    /// A store call that did not finish within its timeout, with what it was doing: the lock,
    /// the step it was at (getting a connection, waiting for the answer) and the last error it
    /// met, so the message tells a database that is down from one that is slow.
    ///
    /// ```
    /// use std::time::Duration;
    /// let err = shedlock_core::Error::timeout_with(
    ///     "acquire",
    ///     Duration::from_secs(5),
    ///     "lock \"report\", connecting to Postgres at db:5432 (last error: connection refused)",
    /// );
    /// assert!(err.is_timeout());
    /// assert_eq!(
    ///     err.to_string(),
    ///     "lock store call `acquire` timed out after 5s: lock \"report\", connecting to \
    ///      Postgres at db:5432 (last error: connection refused)"
    /// );
    /// ```
    #[must_use]
    pub fn timeout_with(
        operation: &'static str,
        after: Duration,
        detail: impl Into<String>,
    ) -> Self {
        Self::new(
            Kind::Timeout {
                operation,
                after,
                detail: Some(detail.into()),
            },
            None,
        )
    }

    /// The lock table does not exist; `fix` says what to run (DDL, migration).
    pub fn missing_table(
        table: impl Into<String>,
        fix: impl Into<String>,
        source: impl Into<Box<dyn StdError + Send + Sync + 'static>>,
    ) -> Self {
        Self::new(
            Kind::MissingTable {
                table: table.into(),
                fix: fix.into(),
            },
            Some(source.into()),
        )
    }

    /// The lock table exists but does not have the expected columns or types.
    pub fn schema(
        message: impl Into<String>,
        source: Option<Box<dyn StdError + Send + Sync + 'static>>,
    ) -> Self {
        Self::new(Kind::Schema(message.into()), source)
    }

    /// The store does not implement an optional operation (e.g.
    /// [`holder`](crate::provider::LockProvider::holder)).
    #[must_use]
    pub fn unsupported(operation: &'static str) -> Self {
        Self::new(
            Kind::Unsupported {
                operation,
                why: None,
            },
            None,
        )
    }

    /// The store does not implement an optional operation in its present setup, and `why` says
    /// what would make it (a column to add, a server feature).
    ///
    /// ```
    /// let err = shedlock_core::Error::unsupported_because("claim_fire", "add the last_fire column");
    /// assert!(err.is_unsupported());
    /// assert_eq!(
    ///     err.to_string(),
    ///     "this lock store does not support `claim_fire`: add the last_fire column"
    /// );
    /// ```
    #[must_use]
    pub fn unsupported_because(operation: &'static str, why: impl Into<String>) -> Self {
        Self::new(
            Kind::Unsupported {
                operation,
                why: Some(why.into()),
            },
            None,
        )
    }

    /// The executor (or scheduler) is shutting down: `what` did not start.
    pub(crate) fn shutdown(what: &'static str) -> Self {
        Self::new(Kind::Shutdown(what), None)
    }

    pub(crate) fn no_executor() -> Self {
        Self::new(Kind::NoExecutor, None)
    }

    pub(crate) fn already_installed() -> Self {
        Self::new(Kind::AlreadyInstalled, None)
    }

    /// A configuration error said of one job: `context` (`job "sync"`) before its message, the
    /// source kept. Errors of other kinds are returned unchanged.
    #[cfg(feature = "scheduler")]
    pub(crate) fn in_context(mut self, context: &str) -> Self {
        if let Kind::InvalidConfig(message) = &mut self.inner.kind {
            *message = format!("{context}: {message}");
        }
        self
    }

    /// Bad input: an invalid lock name, duration or store configuration. Fix the input; retrying
    /// will not help.
    #[must_use]
    pub fn is_invalid_config(&self) -> bool {
        matches!(self.inner.kind, Kind::InvalidConfig(_))
    }

    /// The store failed (connection refused, query error, …). Usually transient.
    #[must_use]
    pub fn is_backend(&self) -> bool {
        matches!(self.inner.kind, Kind::Backend(_))
    }

    /// A store call did not finish within its timeout. An acquire that timed out may still have
    /// committed: the lock is then held until its `at_most` ends.
    #[must_use]
    pub fn is_timeout(&self) -> bool {
        matches!(self.inner.kind, Kind::Timeout { .. })
    }

    /// The lock table does not exist; the message names the DDL or migration to run.
    #[must_use]
    pub fn is_missing_table(&self) -> bool {
        matches!(self.inner.kind, Kind::MissingTable { .. })
    }

    /// The lock table has unexpected columns or column types.
    #[must_use]
    pub fn is_schema(&self) -> bool {
        matches!(self.inner.kind, Kind::Schema(_))
    }

    /// The store does not support the operation.
    #[must_use]
    pub fn is_unsupported(&self) -> bool {
        matches!(self.inner.kind, Kind::Unsupported { .. })
    }

    /// The executor or scheduler is shutting down (its drain has begun): no new run starts.
    /// Not transient: stop calling.
    #[must_use]
    pub fn is_shutdown(&self) -> bool {
        matches!(self.inner.kind, Kind::Shutdown(_))
    }

    /// No executor was given and no process-wide default is installed.
    #[must_use]
    pub fn is_no_executor(&self) -> bool {
        matches!(self.inner.kind, Kind::NoExecutor)
    }

    /// A process-wide default executor was already installed.
    #[must_use]
    pub fn is_already_installed(&self) -> bool {
        matches!(self.inner.kind, Kind::AlreadyInstalled)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.inner.kind {
            Kind::InvalidConfig(msg) => write!(f, "invalid lock configuration: {msg}"),
            Kind::Backend(what) => write!(f, "lock store failed to {what}"),
            Kind::Timeout {
                operation,
                after,
                detail,
            } => {
                write!(
                    f,
                    "lock store call `{operation}` timed out after {}",
                    shedlock_duration::format(*after)
                )?;
                match detail {
                    Some(detail) => write!(f, ": {detail}"),
                    None => Ok(()),
                }
            }
            Kind::MissingTable { table, fix } => {
                write!(f, "the lock table {table} does not exist; {fix}")
            }
            Kind::Schema(msg) => write!(f, "the lock table does not match: {msg}"),
            Kind::Unsupported { operation, why } => {
                write!(f, "this lock store does not support `{operation}`")?;
                match why {
                    Some(why) => write!(f, ": {why}"),
                    None => Ok(()),
                }
            }
            Kind::Shutdown(what) => write!(f, "{what}: shutting down, no new runs start"),
            Kind::NoExecutor => f.write_str(
                "no lock executor: pass `executor = ...` or call \
                 `LockingTaskExecutor::install_default` at startup",
            ),
            Kind::AlreadyInstalled => {
                f.write_str("a default lock executor is already installed for this process")
            }
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("shedlock_core::Error");
        d.field("kind", &self.inner.kind);
        if let Some(source) = &self.inner.source {
            d.field("source", source);
        }
        d.finish()
    }
}

impl StdError for Error {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.inner
            .source
            .as_ref()
            .map(|e| &**e as &(dyn StdError + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_send_sync_static() {
        fn assert<T: Send + Sync + 'static>() {}
        assert::<Error>();
    }

    #[test]
    fn display_is_ours_and_cause_is_the_source() {
        let io = std::io::Error::other("connection reset");
        let err = Error::backend("release lock \"a\"", io);
        assert_eq!(err.to_string(), "lock store failed to release lock \"a\"");
        assert_eq!(
            err.source().map(ToString::to_string).as_deref(),
            Some("connection reset")
        );
    }

    #[test]
    fn predicates_are_exclusive() {
        let errs = [
            Error::invalid_config("x"),
            Error::backend_message("x"),
            Error::timeout("acquire", Duration::from_secs(1)),
            Error::missing_table("t", "run x", std::io::Error::other("x")),
            Error::schema("x", None),
            Error::unsupported("holder"),
            Error::shutdown("lock"),
            Error::no_executor(),
            Error::already_installed(),
        ];
        for (i, e) in errs.iter().enumerate() {
            let flags = [
                e.is_invalid_config(),
                e.is_backend(),
                e.is_timeout(),
                e.is_missing_table(),
                e.is_schema(),
                e.is_unsupported(),
                e.is_shutdown(),
                e.is_no_executor(),
                e.is_already_installed(),
            ];
            for (j, flag) in flags.iter().enumerate() {
                assert_eq!(*flag, i == j, "error {i} predicate {j}: {e}");
            }
        }
    }
}
