//! sqlx's errors as the causes of ours.
//!
//! A Postgres server error's text, as sqlx writes it, ends in ` at line 948`. That is the line of
//! the server's own source that raised it, which tells a user nothing. Our messages and our errors'
//! sources leave it out.
//!
//! Most of sqlx's errors also write their own cause into their text (`error returned from
//! database: 1146 (42S02): Table ... doesn't exist`, whose cause is `1146 (42S02): Table ...`). A
//! log line or a `Caused by:` list that shows every cause would say it twice, so such an error is
//! one cause, with no source of its own.

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
/// It is sqlx's error itself when its causes say something its text does not. Otherwise it is a
/// [`Said`] that reads like it ([`text`]) and has no source.
pub(crate) fn source(error: sqlx::Error) -> Box<dyn StdError + Send + Sync> {
    let text = text(&error);
    let said = server_message(&error).is_some()
        || std::iter::successors(StdError::source(&error), |&cause| cause.source())
            .all(|cause| text.contains(&cause.to_string()));
    if said {
        Box::new(Said { text, error })
    } else {
        Box::new(error)
    }
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

/// A sqlx error whose text says all its causes do (or a Postgres server error, written without
/// the server's source line).
///
/// It has no source of its own, because sqlx's would repeat the message. `Debug` shows sqlx's
/// error.
struct Said {
    text: String,
    error: sqlx::Error,
}

impl fmt::Display for Said {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Debug for Said {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.error, f)
    }
}

impl StdError for Said {}

#[cfg(test)]
mod tests {
    use super::*;

    fn causes(error: &(dyn StdError + 'static)) -> Vec<String> {
        std::iter::successors(Some(error), |&e| e.source())
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn an_error_that_writes_its_cause_is_one_cause() {
        let io = sqlx::Error::Io(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "Connection refused (os error 111)",
        ));
        let text = io.to_string();
        assert!(
            text.ends_with("Connection refused (os error 111)"),
            "{text}"
        );
        assert_eq!(causes(&*source(io)), [text]);
    }

    #[test]
    fn an_error_whose_cause_says_more_keeps_it() {
        // sqlx writes a configuration error's cause, but not that cause's own cause.
        #[derive(Debug)]
        struct Inner;
        impl fmt::Display for Inner {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("the root cause")
            }
        }
        impl StdError for Inner {}
        #[derive(Debug)]
        struct Outer(Inner);
        impl fmt::Display for Outer {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("bad certificate")
            }
        }
        impl StdError for Outer {
            fn source(&self) -> Option<&(dyn StdError + 'static)> {
                Some(&self.0)
            }
        }
        let config = sqlx::Error::Configuration(Box::new(Outer(Inner)));
        let text = config.to_string();
        assert_eq!(
            causes(&*source(config)),
            [
                text,
                "bad certificate".to_owned(),
                "the root cause".to_owned()
            ]
        );
    }
}
