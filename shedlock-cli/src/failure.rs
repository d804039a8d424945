//! Why a command did not do its job: the exit code and the one line that says what to fix.

use std::error::Error as StdError;
use std::io;

use crate::invocation::Invocation;

/// The documented exit codes (see `shedlock --help`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    /// 0: done. It is also the code when the reader of our output went away.
    Done,
    /// 1: refused, nothing changed. The holder changed, the lock is free, an election needs
    /// `--election`, or there is no such lock.
    Refused,
    /// 2: usage or connection error.
    Usage,
}

impl Exit {
    /// The process's exit status.
    pub(crate) fn code(self) -> u8 {
        match self {
            Exit::Done => 0,
            Exit::Refused => 1,
            Exit::Usage => 2,
        }
    }
}

/// A command's failure: its exit code and its message, one line in lowercase that says what to fix.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) exit: Exit,
    pub(crate) message: String,
}

impl Failure {
    pub(crate) fn refused(message: impl Into<String>) -> Self {
        Self {
            exit: Exit::Refused,
            message: message.into(),
        }
    }

    pub(crate) fn usage(message: impl Into<String>) -> Self {
        Self {
            exit: Exit::Usage,
            message: message.into(),
        }
    }

    /// A store error, worded for someone at a terminal: what failed, why, and what to do, with
    /// commands that run on the store `invocation` reaches.
    pub(crate) fn store(
        error: &shedlock_core::Error,
        table: &str,
        invocation: &Invocation,
    ) -> Self {
        let ddl = invocation.command("ddl", None, &[]);
        let message = if error.is_missing_table() {
            format!(
                "the lock table {table} does not exist; create it with `{}` (`{ddl}` prints its \
                 DDL), or pass --table",
                invocation.command("create-table", None, &[])
            )
        } else if error.is_schema() {
            // The library points at its `…::ddl()`; a user of this tool has `shedlock ddl`.
            format!(
                "{}; pass the table's column names with --name-column, --lock-until-column, \
                 --locked-at-column, --locked-by-column and --fencing-token-column, or compare \
                 it with what `{ddl}` prints",
                without_library_ddl_hint(&causes(error))
            )
        } else if error.is_timeout() {
            format!(
                "{error}; check that the database is reachable, or raise --timeout if it is slow"
            )
        } else if error.is_backend() && refused(error) {
            format!("{}; {REFUSED_HINT}", causes(error))
        } else if error.is_backend() {
            let causes = causes(error);
            match tls_hint(&causes) {
                Some(hint) => format!("{causes}; {hint}"),
                None => format!("{causes}; check --database-url and the database"),
            }
        } else {
            causes(error)
        };
        Self::usage(message)
    }

    /// Writing our output failed. A closed pipe (`shedlock list | head`) is no error.
    pub(crate) fn output(error: &io::Error) -> Self {
        if error.kind() == io::ErrorKind::BrokenPipe {
            Self {
                exit: Exit::Done,
                message: String::new(),
            }
        } else {
            Self::usage(format!("cannot write the output: {error}"))
        }
    }
}

impl From<shedlock_core::Error> for Failure {
    fn from(error: shedlock_core::Error) -> Self {
        Self::usage(causes(&error))
    }
}

/// What to do about a TLS failure, recognised in the words of rustls, which every store speaks TLS
/// through, and of the servers.
pub(crate) fn tls_hint(causes: &str) -> Option<&'static str> {
    const HINTS: &[(&[&str], &str)] = &[
        (
            &["UnknownIssuer"],
            "the server's certificate is not signed by a CA this client trusts: pass the CA that \
             signed it with --cacert",
        ),
        (
            &["not valid for name"],
            "connect by a host name the server's certificate holds",
        ),
        (
            &["certificate expired"],
            "the server's certificate has expired: renew it",
        ),
        (
            &["CertificateRequired", "requires a valid client certificate"],
            "the server requires a client certificate: pass --cert and --key",
        ),
        (
            &["does not support TLS", "does not support SSL"],
            "the server does not speak TLS: use a plain URL (no sslmode=require / \
             ssl-mode=REQUIRED, redis:// not rediss://, etcd:// not https://)",
        ),
        (
            &["no encryption"],
            "the server accepts TLS connections only: add sslmode=verify-full and --cacert",
        ),
    ];
    HINTS
        .iter()
        .find(|(words, _)| words.iter().any(|w| causes.contains(w)))
        .map(|(_, hint)| *hint)
}

/// `text` without the library's pointer at a provider's DDL, which a user of this tool does not
/// have: `; see PgLockProvider::ddl()` or `; see the DDL of PgLockProvider::ddl()`.
fn without_library_ddl_hint(text: &str) -> String {
    const END: &str = "::ddl()";
    let Some(end) = text.find(END) else {
        return text.to_owned();
    };
    match text[..end].rfind("; see ") {
        Some(start) => format!("{}{}", &text[..start], &text[end + END.len()..]),
        None => text.to_owned(),
    }
}

/// What to do about a refused connection, where nothing listens on the port.
pub(crate) const REFUSED_HINT: &str =
    "nothing listens there: is the server running, and on that port?";

/// Whether `error` or one of its causes is a refused connection: an I/O error of that kind or a
/// store's words for it, as Redis's client keeps only the text.
pub(crate) fn refused(error: &(dyn StdError + 'static)) -> bool {
    if causes(error).contains("Connection refused") {
        return true;
    }
    let mut next = Some(error);
    while let Some(e) = next {
        if e.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::ConnectionRefused)
        {
            return true;
        }
        next = e.source();
    }
    false
}

/// `error` and its causes on one line (`a: b: c`), leaving out a cause its parent already said.
pub(crate) fn causes(error: &(dyn StdError + 'static)) -> String {
    let mut out = error.to_string();
    let mut last = out.clone();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !last.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        last = text;
        source = cause.source();
    }
    out.replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_are_joined_once() {
        let io = io::Error::new(io::ErrorKind::ConnectionRefused, "connection refused");
        let err = shedlock_core::Error::backend("connect to Postgres", io);
        assert_eq!(
            causes(&err),
            "lock store failed to connect to Postgres: connection refused"
        );
        let failure = Failure::store(&err, "shedlock", &Invocation::default());
        assert_eq!(failure.exit, Exit::Usage);
        assert_eq!(
            failure.message,
            format!("lock store failed to connect to Postgres: connection refused; {REFUSED_HINT}")
        );
        let reset = io::Error::new(io::ErrorKind::ConnectionReset, "connection reset");
        let err = shedlock_core::Error::backend("list locks", reset);
        let failure = Failure::store(&err, "shedlock", &Invocation::default());
        assert!(
            failure
                .message
                .ends_with("connection reset; check --database-url and the database"),
            "{}",
            failure.message
        );
    }

    #[test]
    fn a_missing_table_says_how_to_create_it() {
        let err = shedlock_core::Error::missing_table("locks", "run x", io::Error::other("x"));
        let failure = Failure::store(&err, "locks", &Invocation::default());
        assert!(
            failure.message.contains("`shedlock create-table`"),
            "{}",
            failure.message
        );
        assert!(!failure.message.contains('\n'));
    }

    #[test]
    fn wrong_columns_point_at_shedlock_ddl_not_the_library() {
        for library in [
            "ops_locks does not have the expected columns (no column \"nm\"); see \
             PgLockProvider::ddl()",
            "ops_locks: name is TEXT; see the DDL of MySqlLockProvider::ddl()",
        ] {
            let err = shedlock_core::Error::schema(library, None);
            let cli = <crate::args::Cli as clap::Parser>::try_parse_from([
                "shedlock",
                "list",
                "-t",
                "ops_locks",
            ])
            .expect("valid");
            let failure = Failure::store(&err, "ops_locks", &Invocation::new(&cli.store));
            let message = failure.message;
            assert!(!message.contains("::ddl()"), "{message}");
            assert!(
                message
                    .ends_with("or compare it with what `shedlock ddl --table ops_locks` prints"),
                "{message}"
            );
            assert!(message.contains("ops_locks"), "{message}");
        }
    }

    #[test]
    fn a_closed_pipe_is_not_an_error() {
        let pipe = io::Error::from(io::ErrorKind::BrokenPipe);
        assert_eq!(Failure::output(&pipe).exit, Exit::Done);
    }
}
