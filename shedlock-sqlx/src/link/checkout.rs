//! A connection checked out for one attempt of a call: how its statements run, directly or each in
//! a transaction of its own behind a transaction pooler, and when it is closed rather than given
//! back.

use std::sync::atomic::Ordering;

use shedlock_core::{Error, Result};
use sqlx::Database;
use sqlx::database::HasStatementCache;

#[cfg(doc)]
use super::{AfterLostReply, Link};
use super::{Call, CallStep};
use crate::conns::Held;

/// A connection for one attempt of a call, given back only if its last statement finished. One
/// dropped mid-statement, by a timeout, a cancelled call or an I/O error, or found dead
/// ([`connection_lost`]) is closed at once. So no connection is handed out with a half-read reply,
/// a black-holed one never blocks sqlx's return check, and a dead one is never offered again.
///
/// The attempt owns it, so it is closed or given back when the attempt ends, before a retry takes
/// the next one.
pub(crate) struct Checkout<'a, DB: Database> {
    conn: Option<Held<DB>>,
    in_flight: bool,
    /// The last statement failed because the connection was gone.
    lost: bool,
    call: &'a Call,
    mode: Mode,
}

/// How a [`Checkout`]'s statements run ([`Checkout::begin`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// As they are: named statements kept on the connection, autocommit.
    Direct,
    /// Each unnamed, in a transaction of its own, for a transaction-mode pooler. `committed` is set
    /// once a `COMMIT` of this attempt's was sent, after which a lost connection may have
    /// committed.
    Pooler { committed: bool },
}

/// Runs one statement of a provider's on a [`Checkout`] within its call's deadline.
///
/// It goes through [`Checkout::begin`] and [`Checkout::end`]. `statement!(c, query, map,
/// fetch_all)` runs `query.fetch_all(…)` and evaluates to its `Result`. `map` maps the errors.
macro_rules! statement {
    ($c:expr, $query:expr, $map:expr, $run:ident) => {{
        let c = &mut $c;
        let map = &$map;
        match c.begin($query, map).await {
            Ok(query) => {
                let outcome = c.call().timed(query.$run(c.conn())).await;
                c.end(outcome, map).await
            }
            Err(error) => Err(error),
        }
    }};
}

pub(crate) use statement;

/// A query whose prepared statement may be kept on the connection or not (sqlx's `persistent`): a
/// named statement cached per connection, or the unnamed one.
pub(crate) trait Persistent {
    /// The query, with its statement kept or not. Kept (`true`) is sqlx's default.
    #[must_use]
    fn persistent(self, value: bool) -> Self;
}

impl<DB: Database + HasStatementCache, A> Persistent for sqlx::query::Query<'_, DB, A> {
    fn persistent(self, value: bool) -> Self {
        Self::persistent(self, value)
    }
}

impl<DB: Database + HasStatementCache, O, A> Persistent for sqlx::query::QueryAs<'_, DB, O, A> {
    fn persistent(self, value: bool) -> Self {
        Self::persistent(self, value)
    }
}

impl<DB: Database + HasStatementCache, O, A> Persistent for sqlx::query::QueryScalar<'_, DB, O, A> {
    fn persistent(self, value: bool) -> Self {
        Self::persistent(self, value)
    }
}

impl<'a, DB: Database> Checkout<'a, DB> {
    pub(super) fn new(conn: Held<DB>, call: &'a Call, pooler: bool) -> Self {
        Self {
            conn: Some(conn),
            in_flight: false,
            lost: false,
            call,
            mode: if pooler {
                Mode::Pooler { committed: false }
            } else {
                Mode::Direct
            },
        }
    }

    /// Starts one statement of the provider's. Every statement goes through here and
    /// [`end`](Self::end):
    ///
    /// ```text
    /// let query = c.begin(query, map).await?;
    /// let outcome = call.timed(query.fetch_all(c.conn())).await;
    /// let rows = c.end(outcome, map).await?;
    /// ```
    ///
    /// By default `begin` hands the query back as it is, and `end` is [`settle`](Self::settle). The
    /// statement is then prepared once per connection and kept, as sqlx's named statements, in one
    /// round trip.
    ///
    /// Behind a transaction-mode pooler, which the `transaction_pooler` setting announces, a server
    /// connection is the client's only for a transaction. A statement outside one may meet another
    /// server connection at each `Sync`, where a named statement cached for this connection would
    /// be missing or exist already. Even the unnamed one is parsed in one exchange and bound in the
    /// next. So `begin` sends `BEGIN` and hands back the query unnamed, not kept, and `end` sends
    /// `COMMIT`, or `ROLLBACK` after the database refused the statement. The pooler keeps one
    /// server connection for the whole of it, in four round trips instead of one.
    ///
    /// Lost replies stay as [`Link::run`] describes, counted from the `COMMIT`. A connection lost
    /// before any `COMMIT` of the attempt was sent rolled back, so the attempt runs again, even for
    /// a call that may not repeat a lost reply. One lost after a `COMMIT` was sent, or a lost
    /// statement by default, may have committed.
    pub(crate) async fn begin<Q: Persistent>(
        &mut self,
        query: Q,
        map: impl FnOnce(sqlx::Error) -> Error,
    ) -> Result<Q>
    where
        for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    {
        if self.mode == Mode::Direct {
            return Ok(query);
        }
        let call = self.call;
        let begun = call
            .timed(sqlx::raw_sql("BEGIN").execute(self.conn()))
            .await;
        self.settle_as(begun, map, false)?;
        Ok(query.persistent(false))
    }

    /// Ends a statement started with [`begin`](Self::begin), and settles its outcome. Behind a
    /// transaction pooler, it also commits or rolls back its transaction.
    pub(crate) async fn end<T>(
        &mut self,
        outcome: Result<std::result::Result<T, sqlx::Error>>,
        map: impl FnOnce(sqlx::Error) -> Error,
    ) -> Result<T>
    where
        for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    {
        if self.mode == Mode::Direct {
            return self.settle(outcome, map);
        }
        let call = self.call;
        match outcome {
            Ok(Ok(value)) => {
                self.mode = Mode::Pooler { committed: true };
                let committed = call
                    .timed(sqlx::raw_sql("COMMIT").execute(self.conn()))
                    .await;
                self.settle_as(committed, map, true)?;
                Ok(value)
            }
            Ok(Err(error)) if statement_finished(&error) => {
                // The transaction is aborted (or holds a read): end it. A connection whose
                // `ROLLBACK` did not finish stays in flight, and is closed.
                let rolled_back = call
                    .timed(sqlx::raw_sql("ROLLBACK").execute(self.conn()))
                    .await;
                if matches!(rolled_back, Ok(Ok(_))) {
                    self.in_flight = false;
                }
                Err(map(error))
            }
            outcome => self.settle_as(outcome, map, false),
        }
    }

    /// The call this attempt is of.
    pub(crate) fn call(&self) -> &'a Call {
        self.call
    }

    /// The connection, for one statement. [`settle`](Self::settle) its outcome before the next.
    pub(crate) fn conn(&mut self) -> &mut DB::Connection {
        self.in_flight = true;
        self.call.set_phase(CallStep::Statement);
        // `conn` is `Some` from `new` until drop.
        self.conn.as_mut().unwrap_or_else(|| unreachable!()).conn()
    }

    /// The outcome of a statement run with [`Call::timed`]: the value, a timeout, or the
    /// statement's error mapped by `map`. The connection stays usable only when the statement
    /// succeeded or failed with an error from the database itself. An error that says the
    /// connection is gone marks it lost, so [`Link::run`] retries the call on another. After a lost
    /// reply of a call that may not run again ([`AfterLostReply::Fail`]), the error is
    /// [`Call::lost_reply`]'s, not `map`'s.
    pub(crate) fn settle<T>(
        &mut self,
        outcome: Result<std::result::Result<T, sqlx::Error>>,
        map: impl FnOnce(sqlx::Error) -> Error,
    ) -> Result<T> {
        self.settle_as(outcome, map, true)
    }

    /// [`settle`](Self::settle), where `may_have_committed` says whether a statement sent on a
    /// connection that then died may have committed. It is `false` only inside a transaction of
    /// [`begin`](Self::begin)'s before any `COMMIT` of this attempt was sent, which lets
    /// [`Link::run`] run the attempt again.
    fn settle_as<T>(
        &mut self,
        outcome: Result<std::result::Result<T, sqlx::Error>>,
        map: impl FnOnce(sqlx::Error) -> Error,
        may_have_committed: bool,
    ) -> Result<T> {
        let may_have_committed =
            may_have_committed || self.mode == (Mode::Pooler { committed: true });
        match outcome {
            Err(timeout) => Err(timeout),
            Ok(Ok(value)) => {
                self.in_flight = false;
                Ok(value)
            }
            Ok(Err(error)) => {
                if connection_lost(&error) {
                    self.lost = true;
                    self.call.lost.store(true, Ordering::Relaxed);
                    self.call.note_error(&error);
                    if !may_have_committed {
                        self.call.rolled_back.store(true, Ordering::Relaxed);
                    } else if !self.call.repeats_after_lost_reply() {
                        return Err(self.call.lost_reply(error));
                    }
                } else if statement_finished(&error) {
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

/// Whether `error` says that the connection is gone, closed by the server on a restart, by an
/// administrator or at an idle timeout, or by a broken socket, rather than that the statement
/// failed.
///
/// sqlx 0.9 reports a reset, closed (`UnexpectedEof`) or broken socket as [`sqlx::Error::Io`], and
/// the farewell message a server sends idle connections before closing them, read by the next
/// statement, as [`sqlx::Error::Database`]. These count:
///
/// - Postgres: SQLSTATE class `08`, connection exception, `57P01` admin shutdown, which an
///   immediate shutdown sends too, `57P02` crash shutdown, `57P03` cannot connect now and `57P05`
///   idle session timeout.
/// - MySQL/MariaDB: SQLSTATE class `08`, among them 1053 server shutdown, 1152/1184 aborted
///   connection and 1158–1161 network errors, and MariaDB's 1927 connection killed (`70100`). It
///   shares `70100` with 1317 "query execution was interrupted", so the number decides. The client
///   codes 2006 and 2013 ("server has gone away", "lost connection") never reach sqlx's native
///   driver from the server and are I/O errors here. MySQL 8's 4031, disconnected for inactivity,
///   is not recognised, as MariaDB uses that number for a statement error. sqlx's pool closes idle
///   connections long before `wait_timeout` by default.
///
/// [`sqlx::Error::Protocol`] (bytes that make no sense) and [`sqlx::Error::Tls`] (handshake) are
/// not counted: a dead connection does not produce them, and they would fail again. Everything else
/// is the statement's own failure.
pub(crate) fn connection_lost(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(_) => true,
        sqlx::Error::Database(db) => database_says_connection_lost(db.as_ref()),
        _ => false,
    }
}

/// [`connection_lost`] for a failed checkout, where the pool may have been opening a connection.
/// Only I/O errors of a connection that broke count, as when a server going down reset it, not
/// those of one that could not be made, such as an unknown host or a bad SQLite path, which would
/// fail again. sqlx itself retries refused connections until the pool's acquire timeout.
pub(crate) fn checkout_lost(error: &sqlx::Error) -> bool {
    use std::io::ErrorKind;
    match error {
        sqlx::Error::Io(io) => matches!(
            io.kind(),
            ErrorKind::ConnectionReset
                | ErrorKind::ConnectionAborted
                | ErrorKind::BrokenPipe
                | ErrorKind::UnexpectedEof
                | ErrorKind::NotConnected
        ),
        sqlx::Error::Database(db) => database_says_connection_lost(db.as_ref()),
        _ => false,
    }
}

#[cfg_attr(
    not(any(feature = "postgres", feature = "mysql")),
    allow(
        unused_variables,
        reason = "only Postgres and MySQL report lost connections"
    )
)]
fn database_says_connection_lost(db: &dyn sqlx::error::DatabaseError) -> bool {
    #[cfg(feature = "postgres")]
    if let Some(pg) = db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
        let code = pg.code();
        return code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03" | "57P05");
    }
    #[cfg(feature = "mysql")]
    if let Some(my) = db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>() {
        let state = my.code().unwrap_or_default();
        return state.starts_with("08") || (my.number() == 1927 && state == "70100");
    }
    false
}

impl<DB: Database> Drop for Checkout<'_, DB> {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else { return };
        if self.in_flight {
            if self.lost {
                tracing::debug!("closing a lock-store connection the server had closed");
            } else {
                tracing::debug!("closing a lock-store connection whose statement did not finish");
            }
            conn.close();
        } else {
            conn.give_back();
        }
    }
}
