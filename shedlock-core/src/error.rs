//! The one error type of shedlock-rs.

use std::error::Error as StdError;
use std::fmt;
use std::time::Duration;

type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// A `Result` whose error defaults to [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in shedlock-rs, as one opaque type.
///
/// A lock held by someone else is **not** an error. It is `Ok(None)`. An `Error` means the question
/// could not be answered: bad input, a store that failed, or a call that timed out. Ask what
/// happened with the `is_*` predicates. The underlying cause, if any, is
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

#[derive(Debug, Clone)]
enum Kind {
    InvalidConfig(String),
    InvalidSchedule(String),
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
    Busy(String),
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
    /// they reject before asking the store, such as a bad table name or an over-long name.
    ///
    /// ```
    /// let err = shedlock_core::Error::invalid_config("the table name \"a-b\" is not a plain identifier");
    /// assert!(err.is_invalid_config());
    /// ```
    pub fn invalid_config(message: impl Into<String>) -> Self {
        Self::new(Kind::InvalidConfig(message.into()), None)
    }

    /// A configuration or input error with the error that revealed it, such as a parser's. That
    /// error is kept as the [`source`](StdError::source).
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

    /// A schedule that cannot be built (see [`is_invalid_schedule`](Self::is_invalid_schedule)).
    /// `source` is the parser's error, if any.
    #[cfg_attr(not(feature = "scheduler"), allow(dead_code))]
    pub(crate) fn invalid_schedule(
        message: impl Into<String>,
        source: Option<Box<dyn StdError + Send + Sync + 'static>>,
    ) -> Self {
        Self::new(Kind::InvalidSchedule(message.into()), source)
    }

    /// A configuration error turned into a schedule error with the same message. It serves the
    /// checks a schedule shares with lock settings, such as the 365-day maximum.
    #[cfg(feature = "scheduler")]
    pub(crate) fn into_invalid_schedule(self) -> Self {
        let Inner { kind, source } = *self.inner;
        match kind {
            Kind::InvalidConfig(message) => Self::new(Kind::InvalidSchedule(message), source),
            kind => Self::new(kind, source),
        }
    }

    /// The same error, its message prefixed with the lock it is about (`lock "sync": ...`). It
    /// serves an input error met where the message cannot name the lock itself.
    pub(crate) fn for_lock(self, name: &str) -> Self {
        self.in_context(&format!("lock {name:?}"))
    }

    /// A store failure, for custom [`LockProvider`](crate::provider::LockProvider) implementations.
    /// `what` says which operation failed (`"acquire lock \"report\""`). `source` is the store's
    /// own error.
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

    /// A store call that did not finish within its timeout, with what it was doing: the lock, the
    /// step it was at, such as getting a connection or waiting for the answer, and the last error
    /// it met. So the message tells a database that is down from one that is slow.
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

    /// The lock table does not exist. `fix` says what to run, such as DDL or a migration.
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

    /// The store does not implement an optional operation, such as
    /// [`holder`](crate::provider::LockProvider::holder).
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

    /// The store does not implement an optional operation in its present setup. `why` says what
    /// would make it, such as a column to add or a server feature.
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

    /// A claim in a [`claim_fires`](crate::provider::LockProvider::claim_fires) batch that the
    /// store left undecided, because another transaction held its lock's row for longer than the
    /// batch waits. Nothing was written for it. The caller sends it again on its own, through
    /// [`claim_fire`](crate::provider::LockProvider::claim_fire), so that the row's wait holds up
    /// that claim alone and not the batch (docs/guarantees.md, "Many jobs at one instant").
    ///
    /// ```
    /// let err = shedlock_core::Error::busy("lock \"sync\": its row was held by another transaction");
    /// assert!(err.is_busy());
    /// ```
    #[must_use]
    pub fn busy(what: impl Into<String>) -> Self {
        Self::new(Kind::Busy(what.into()), None)
    }

    /// The executor or scheduler is shutting down, so `what` did not start.
    pub(crate) fn shutdown(what: &'static str) -> Self {
        Self::new(Kind::Shutdown(what), None)
    }

    pub(crate) fn no_executor() -> Self {
        Self::new(Kind::NoExecutor, None)
    }

    pub(crate) fn already_installed() -> Self {
        Self::new(Kind::AlreadyInstalled, None)
    }

    /// An input error said of one thing. `context`, such as `job "sync"` or `lock "sync"`, goes
    /// before its message. The source is kept. Errors of other kinds are returned unchanged.
    pub(crate) fn in_context(mut self, context: &str) -> Self {
        if let Kind::InvalidConfig(message) | Kind::InvalidSchedule(message) = &mut self.inner.kind
        {
            *message = format!("{context}: {message}");
        }
        self
    }

    /// Bad input: an invalid lock name, duration, schedule or store configuration. Fix the input,
    /// because retrying will not help. True for [schedule errors](Self::is_invalid_schedule) too.
    #[must_use]
    pub fn is_invalid_config(&self) -> bool {
        matches!(
            self.inner.kind,
            Kind::InvalidConfig(_) | Kind::InvalidSchedule(_)
        )
    }

    /// A schedule that cannot be built: a cron expression or time zone refused, or a bad fixed-rate
    /// period. For a refused expression, the message names the field, its value and what it takes.
    /// [`is_invalid_config`](Self::is_invalid_config) is true for it too.
    ///
    /// ```
    /// # #[cfg(feature = "scheduler")] {
    /// let err = shedlock_core::Schedule::cron("0 0 25 * * *").unwrap_err();
    /// assert!(err.is_invalid_schedule() && err.is_invalid_config());
    /// assert_eq!(
    ///     err.to_string(),
    ///     "invalid schedule: cron \"0 0 25 * * *\": the hours field \"25\" is out of range 0-23"
    /// );
    /// # }
    /// ```
    #[must_use]
    pub fn is_invalid_schedule(&self) -> bool {
        matches!(self.inner.kind, Kind::InvalidSchedule(_))
    }

    /// The store failed, for example by a refused connection or a query error. Usually transient.
    #[must_use]
    pub fn is_backend(&self) -> bool {
        matches!(self.inner.kind, Kind::Backend(_))
    }

    /// A store call did not finish within its timeout. An acquire that timed out may still have
    /// committed. The lock is then held until its `at_most` ends.
    #[must_use]
    pub fn is_timeout(&self) -> bool {
        matches!(self.inner.kind, Kind::Timeout { .. })
    }

    /// The lock table does not exist. The message names the DDL or migration to run.
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

    /// The executor or scheduler is shutting down, because its drain has begun. No new run starts.
    /// Not transient: stop calling.
    #[must_use]
    pub fn is_shutdown(&self) -> bool {
        matches!(self.inner.kind, Kind::Shutdown(_))
    }

    /// A batched fire claim the store left undecided, to be sent on its own (see
    /// [`busy`](Self::busy)).
    #[must_use]
    pub fn is_busy(&self) -> bool {
        matches!(self.inner.kind, Kind::Busy(_))
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

impl Error {
    /// `n` errors that say what this one says, for the `n` callers of one call that failed as a
    /// whole, such as the claims of a [`claim_fires`](crate::provider::LockProvider::claim_fires)
    /// batch. Each has this error's kind, so its `is_*` predicates answer alike, and its
    /// source's text and chain. The source is shared, so it can no longer be downcast to the
    /// store's own error type.
    ///
    /// ```
    /// let copies = shedlock_core::Error::backend_message("connection reset").shared(2);
    /// assert!(copies.iter().all(|e| e.is_backend() && e.to_string().contains("reset")));
    /// ```
    #[must_use]
    pub fn shared(self, n: usize) -> Vec<Error> {
        let Inner { kind, source } = *self.inner;
        let source = source.map(std::sync::Arc::new);
        (0..n)
            .map(|_| {
                Self::new(
                    kind.clone(),
                    source
                        .clone()
                        .map(|source| Box::new(Shared(source)) as BoxError),
                )
            })
            .collect()
    }
}

/// The source of the errors [`Error::shared`] makes: one error, shown by each.
struct Shared(std::sync::Arc<BoxError>);

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self.0, f)
    }
}

impl fmt::Display for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self.0, f)
    }
}

impl StdError for Shared {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.0.source()
    }
}

impl Error {
    /// The kind's name, as `Debug` shows it.
    fn kind_label(&self) -> &'static str {
        match self.inner.kind {
            Kind::InvalidConfig(_) => "invalid config",
            Kind::InvalidSchedule(_) => "invalid schedule",
            Kind::Backend(_) => "backend",
            Kind::Timeout { .. } => "timeout",
            Kind::MissingTable { .. } => "missing table",
            Kind::Schema(_) => "schema",
            Kind::Unsupported { .. } => "unsupported",
            Kind::Shutdown(_) => "shutdown",
            Kind::Busy(_) => "busy",
            Kind::NoExecutor => "no executor",
            Kind::AlreadyInstalled => "already installed",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.inner.kind {
            Kind::InvalidConfig(msg) => write!(f, "invalid lock configuration: {msg}"),
            Kind::InvalidSchedule(msg) => write!(f, "invalid schedule: {msg}"),
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
            Kind::Busy(what) => {
                write!(f, "{what}; nothing was written: send the claim on its own")
            }
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

/// Reads like the message and its causes, as `main` shows an `Err` it returns: the message, the
/// kind in brackets, then each cause on its own line. `{:#?}` shows the fields instead.
///
/// ```
/// let io = std::io::Error::other("password authentication failed for user \"app\"");
/// let err = shedlock_core::Error::backend("connect to the lock store", io);
/// assert_eq!(
///     format!("{err:?}"),
///     "lock store failed to connect to the lock store [backend]\n\
///      \n\
///      Caused by:\n\
///      \x20   password authentication failed for user \"app\""
/// );
/// ```
impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if f.alternate() {
            let mut d = f.debug_struct("shedlock_core::Error");
            d.field("kind", &self.inner.kind);
            if let Some(source) = &self.inner.source {
                d.field("source", source);
            }
            return d.finish();
        }
        write!(f, "{self} [{}]", self.kind_label())?;
        let causes: Vec<&(dyn StdError + 'static)> =
            std::iter::successors(StdError::source(self), |&cause| cause.source()).collect();
        if causes.is_empty() {
            return Ok(());
        }
        f.write_str("\n\nCaused by:")?;
        let numbered = causes.len() > 1;
        for (i, cause) in causes.iter().enumerate() {
            let text = cause.to_string();
            let mut lines = text.lines();
            if numbered {
                write!(f, "\n    {i}: {}", lines.next().unwrap_or_default())?;
            } else {
                write!(f, "\n    {}", lines.next().unwrap_or_default())?;
            }
            for line in lines {
                let indent = if numbered { "       " } else { "    " };
                write!(f, "\n{indent}{line}")?;
            }
        }
        Ok(())
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

    /// The copies of a shared error answer the predicates alike and show the same text and chain.
    #[test]
    fn shared_copies_keep_the_kind_and_the_sources() {
        let cause = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset by peer");
        let original = Error::missing_table("t", "create it", cause);
        let text = original.to_string();
        let copies = original.shared(3);
        assert_eq!(copies.len(), 3);
        for copy in &copies {
            assert!(copy.is_missing_table(), "{copy}");
            assert_eq!(copy.to_string(), text);
            let source = StdError::source(copy).expect("a source");
            assert_eq!(source.to_string(), "reset by peer");
        }
        let timeouts = Error::timeout("claim_fire", Duration::from_secs(1)).shared(2);
        assert!(timeouts.iter().all(Error::is_timeout));
        assert!(StdError::source(&timeouts[0]).is_none());
    }

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

    #[derive(Debug)]
    struct Layer(&'static str, Option<std::io::Error>);

    impl fmt::Display for Layer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
    }

    impl StdError for Layer {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            self.1.as_ref().map(|e| e as &(dyn StdError + 'static))
        }
    }

    #[test]
    fn debug_reads_like_the_message_and_its_cause_chain() {
        let err = Error::invalid_config("the lock name is empty");
        assert_eq!(
            format!("{err:?}"),
            "invalid lock configuration: the lock name is empty [invalid config]"
        );

        let chain = Layer(
            "error returned from database: password authentication failed",
            Some(std::io::Error::other("server said no\nsecond line")),
        );
        let err = Error::backend("connect", chain);
        assert_eq!(
            format!("{err:?}"),
            "lock store failed to connect [backend]\n\
             \n\
             Caused by:\n\
             \x20   0: error returned from database: password authentication failed\n\
             \x20   1: server said no\n\
             \x20      second line"
        );
        // What `fn main() -> Result<(), Box<dyn Error>>` prints goes through the box's Debug.
        let boxed: Box<dyn StdError> = Box::new(Error::timeout("acquire", Duration::from_secs(5)));
        assert_eq!(
            format!("Error: {boxed:?}"),
            "Error: lock store call `acquire` timed out after 5s [timeout]"
        );
        // The fields stay one `{:#?}` away.
        assert!(format!("{err:#?}").starts_with("shedlock_core::Error {\n    kind: Backend("));
    }

    #[test]
    fn a_schedule_error_is_an_input_error_of_its_own_label() {
        let err = Error::invalid_schedule("cron \"x\" has 1 fields", None);
        assert!(err.is_invalid_schedule() && err.is_invalid_config());
        assert_eq!(err.to_string(), "invalid schedule: cron \"x\" has 1 fields");
        assert_eq!(
            err.for_lock("sync").to_string(),
            "invalid schedule: lock \"sync\": cron \"x\" has 1 fields"
        );
        assert_eq!(
            Error::invalid_config("at_most is zero")
                .for_lock("sync")
                .to_string(),
            "invalid lock configuration: lock \"sync\": at_most is zero"
        );
        let timeout = Error::timeout("acquire", Duration::from_secs(1)).for_lock("sync");
        assert_eq!(
            timeout.to_string(),
            "lock store call `acquire` timed out after 1s"
        );
    }

    /// Each predicate holds for its kind alone. A schedule error is also an input error.
    #[test]
    fn predicates_are_exclusive() {
        let errs = [
            Error::invalid_config("x"),
            Error::invalid_schedule("x", None),
            Error::backend_message("x"),
            Error::timeout("acquire", Duration::from_secs(1)),
            Error::missing_table("t", "run x", std::io::Error::other("x")),
            Error::schema("x", None),
            Error::unsupported("holder"),
            Error::shutdown("lock"),
            Error::busy("x"),
            Error::no_executor(),
            Error::already_installed(),
        ];
        for (i, e) in errs.iter().enumerate() {
            let flags = [
                e.is_invalid_config() && !e.is_invalid_schedule(),
                e.is_invalid_schedule(),
                e.is_backend(),
                e.is_timeout(),
                e.is_missing_table(),
                e.is_schema(),
                e.is_unsupported(),
                e.is_shutdown(),
                e.is_busy(),
                e.is_no_executor(),
                e.is_already_installed(),
            ];
            for (j, flag) in flags.iter().enumerate() {
                assert_eq!(*flag, i == j, "error {i} predicate {j}: {e}");
            }
        }
    }
}
