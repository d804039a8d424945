//! sqlx's errors as the causes of ours.
//!
//! A Postgres server error's text, as sqlx writes it, ends in ` at line 948`. That is the line of
//! the server's own source that raised it, which tells a user nothing. Our messages and our errors'
//! sources leave it out.

use std::error::Error as StdError;
use std::fmt;

/// `error` as our messages quote it: sqlx's text, without a Postgres server's source line.
pub(crate) fn text(error: &sqlx::Error) -> String {
    match server_message(error) {
        Some(message) => format!("error returned from database: {message}"),
        None => error.to_string(),
    }
}

/// `error` as the source of one of our errors.
///
/// It is sqlx's error itself. For a Postgres server error, it is a [`ServerError`] that reads like
/// it without the server's source line.
pub(crate) fn source(error: sqlx::Error) -> Box<dyn StdError + Send + Sync> {
    match server_message(&error) {
        Some(message) => Box::new(ServerError {
            text: format!("error returned from database: {message}"),
            error,
        }),
        None => Box::new(error),
    }
}

/// The sqlx error that `cause`, one of our errors' sources, is or wraps, if any.
pub(crate) fn sqlx_error<'a>(cause: &'a (dyn StdError + 'static)) -> Option<&'a sqlx::Error> {
    cause.downcast_ref::<sqlx::Error>().or_else(|| {
        cause
            .downcast_ref::<ServerError>()
            .map(|server| &server.error)
    })
}

/// The message of a Postgres server error that sqlx would write with the server's source line.
#[cfg_attr(
    not(feature = "postgres"),
    allow(unused_variables, reason = "only Postgres adds a source line")
)]
fn server_message(error: &sqlx::Error) -> Option<String> {
    #[cfg(feature = "postgres")]
    if let sqlx::Error::Database(db) = error
        && let Some(pg) = db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
        && pg.line().is_some()
    {
        return Some(pg.message().to_owned());
    }
    None
}

/// A Postgres server error: sqlx's, written without the server's source line.
///
/// It has no source of its own, because sqlx's would repeat the message with the line. `Debug`
/// shows sqlx's error.
struct ServerError {
    text: String,
    error: sqlx::Error,
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Debug for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.error, f)
    }
}

impl StdError for ServerError {}
