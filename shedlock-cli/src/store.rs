//! From a database URL to a [`LockAdmin`]: which store a URL names, each a [`Kind`] with its URL
//! schemes and one arm in [`open`], and how it is opened.

use std::sync::Arc;
use std::time::Duration;

use shedlock_core::admin::LockAdmin;
use shedlock_etcd::EtcdLockProvider;
use shedlock_redis::RedisLockProvider;
use shedlock_sqlx::sqlx::mysql::MySqlConnectOptions;
use shedlock_sqlx::{LockProviderBuilder, MySqlLockProvider, PgLockProvider, SqliteLockProvider};

use tokio::io::AsyncReadExt as _;
use tokio::net::TcpStream;

use crate::args::StoreArgs;
use crate::failure::Failure;
use crate::invocation::{Invocation, without_password};

/// `$builder` with `--cacert` and `--cert`/`--key`, as every store's `ca_file` and `client_cert`.
macro_rules! with_tls {
    ($builder:expr, $args:expr) => {{
        let mut builder = $builder;
        if let Some(ca) = &$args.cacert {
            builder = builder.ca_file(ca);
        }
        if let (Some(cert), Some(key)) = (&$args.cert, &$args.key) {
            builder = builder.client_cert(cert, key);
        }
        builder
    }};
}

/// `$builder` with `--user` and the password: `username` and `password` on the SQL and Redis
/// builders, `credentials` on etcd's.
macro_rules! with_login {
    ($builder:expr, $args:expr, $password:expr) => {{
        let mut builder = $builder;
        if let Some(user) = &$args.user {
            builder = builder.username(user);
        }
        if let Some(password) = $password {
            builder = builder.password(password);
        }
        builder
    }};
}

/// A store the tool knows by its URL scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Postgres,
    MySql,
    Sqlite,
    Redis,
    Etcd,
}

/// URL schemes (`scheme:` prefixes) and their stores. `Err` names a store this build lacks yet.
const SCHEMES: &[(&str, Result<Kind, &str>)] = &[
    ("postgres", Ok(Kind::Postgres)),
    ("postgresql", Ok(Kind::Postgres)),
    ("mysql", Ok(Kind::MySql)),
    ("mariadb", Ok(Kind::MySql)),
    ("sqlite", Ok(Kind::Sqlite)),
    ("redis", Ok(Kind::Redis)),
    ("rediss", Ok(Kind::Redis)),
    ("unix", Ok(Kind::Redis)),
    ("etcd", Ok(Kind::Etcd)),
    ("etcds", Ok(Kind::Etcd)),
    ("https", Ok(Kind::Etcd)),
    ("http", Ok(Kind::Etcd)),
];

/// An opened store and how to name it in messages. The name never has the URL's credentials.
pub(crate) struct Store {
    pub(crate) admin: Arc<dyn LockAdmin>,
    pub(crate) table: String,
    /// How the commands the tool prints reach this store again.
    pub(crate) invocation: Invocation,
    /// Who runs the commands that change something, as recorded: `--as`, or user@host.
    pub(crate) actor: String,
    /// The URL without its password, and the table or key prefix, as `serve` names the store.
    pub(crate) description: String,
}

impl Store {
    /// A store error, as [`Failure::store`] words it for this store.
    pub(crate) fn failure(&self, error: &shedlock_core::Error) -> Failure {
        Failure::store(error, &self.table, &self.invocation)
    }
}

/// Which store `url` names.
pub(crate) fn kind(url: &str) -> Result<Kind, Failure> {
    let scheme = url.split_once(':').map(|(s, _)| s.to_ascii_lowercase());
    let known = || {
        SCHEMES
            .iter()
            .filter(|(_, k)| k.is_ok())
            .map(|(s, _)| format!("{s}://"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match SCHEMES.iter().find(|(s, _)| scheme.as_deref() == Some(*s)) {
        Some((_, Err(store))) => Err(Failure::usage(format!(
            "{store} stores are not supported by this build of shedlock yet; use one of {}",
            known()
        ))),
        Some((_, Ok(kind))) => Ok(*kind),
        None => Err(Failure::usage(format!(
            "the database URL does not start with a known scheme; use one of {}",
            known()
        ))),
    }
}

/// Opens the store `args` names. With `connect`, one connection is opened now, so a wrong URL, a
/// closed port or a bad password fails here. Otherwise nothing is opened until first use. `ddl`
/// needs no database. A SQL store gets at most `connections` connections.
pub(crate) async fn open(
    args: &StoreArgs,
    connect: bool,
    connections: u32,
) -> Result<Store, Failure> {
    let url = args.database_url.as_deref().ok_or_else(|| {
        Failure::usage("no database given: pass --database-url URL or set DATABASE_URL")
    })?;
    let kind = kind(url)?;
    let password = password(args)?;
    let password = password.as_deref();
    // A SQL provider with `connections` at most, connected now with `connect`.
    macro_rules! sql {
        ($provider:ty) => {{
            // A refusal is the answer: no retrying until the deadline, as a service would.
            let builder = configure(<$provider>::from_url(url), args, password)
                .max_connections(connections)
                .retry_refused_connections(false);
            let provider = if connect {
                builder.connect().await
            } else {
                builder.build()
            };
            match provider {
                Ok(provider) => Arc::new(provider),
                Err(error) => {
                    let other = other_protocol(kind, url, &error, args.timeout).await;
                    return Err(connect_failure(error, other));
                }
            }
        }};
    }
    let admin: Arc<dyn LockAdmin> = match kind {
        Kind::Postgres => sql!(PgLockProvider),
        Kind::MySql => sql!(MySqlLockProvider),
        Kind::Sqlite => sql!(SqliteLockProvider),
        Kind::Redis => {
            let mut builder = RedisLockProvider::builder(url).call_timeout(args.timeout);
            if let Some(prefix) = &args.key_prefix {
                builder = builder.key_prefix(prefix);
            }
            let builder = with_login!(with_tls!(builder, args), args, password);
            let provider = if connect {
                builder.connect().await
            } else {
                builder.build()
            };
            Arc::new(provider.map_err(|e| connect_failure(e, None))?)
        }
        Kind::Etcd => {
            let mut builder = EtcdLockProvider::builder(url).call_timeout(args.timeout);
            if let Some(prefix) = &args.key_prefix {
                builder = builder.prefix(prefix);
            }
            builder = with_tls!(builder, args);
            match (&args.user, password) {
                (Some(user), Some(password)) => builder = builder.credentials(user, password),
                (None, None) => {}
                _ => {
                    return Err(Failure::usage(
                        "etcd authentication needs both --user and a password \
                         (--password-file or SHEDLOCK_PASSWORD)",
                    ));
                }
            }
            Arc::new(builder.build()?)
        }
    };
    let description = match (kind, &args.key_prefix) {
        (Kind::Redis | Kind::Etcd, Some(prefix)) => {
            format!("{}, key prefix {prefix}", without_password(url))
        }
        (Kind::Redis | Kind::Etcd, None) => without_password(url),
        _ => format!("{}, table {}", without_password(url), args.table),
    };
    Ok(Store {
        admin,
        table: args.table.clone(),
        invocation: Invocation::new(args),
        actor: actor(args.actor.as_deref()),
        description,
    })
}

/// `--as`, or `user@host` from the environment's user (`USER`, `USERNAME`) and the host name.
fn actor(given: Option<&str>) -> String {
    if let Some(given) = given {
        return given.to_owned();
    }
    let user = ["USER", "USERNAME", "LOGNAME"]
        .iter()
        .find_map(|var| std::env::var(var).ok().filter(|u| !u.is_empty()))
        .unwrap_or_else(|| "unknown".to_owned());
    let host = gethostname::gethostname().to_string_lossy().into_owned();
    format!("{user}@{host}")
}

/// Why a store could not be opened: bad settings as they are, anything else as a connection
/// problem, in the store's own words naming the server and the cause, and with what to do.
/// `other_protocol` is set when the server speaks another protocol than the URL's.
fn connect_failure(error: shedlock_core::Error, other_protocol: Option<String>) -> Failure {
    if error.is_invalid_config() {
        return Failure::from(error);
    }
    let causes = crate::failure::causes(&error);
    let hint = match other_protocol {
        Some(other) => other,
        None if crate::failure::refused(&error) => crate::failure::REFUSED_HINT.to_owned(),
        None => crate::failure::tls_hint(&causes)
            .unwrap_or("check --database-url or DATABASE_URL")
            .to_owned(),
    };
    Failure::usage(format!("cannot connect: {causes}; {hint}"))
}

/// Whether the server at `url` speaks another protocol than the URL's store, asked on a connection
/// of its own after the timeout, as connecting then fails in a way that does not say so. A Postgres
/// client gets an answer it cannot read, because a MySQL server greets first. A MySQL client waits
/// for the greeting until its deadline, so a server that accepts the connection but says nothing
/// within `wait`, as a Postgres server waiting for its client, is no MySQL server.
async fn other_protocol(
    kind: Kind,
    url: &str,
    error: &shedlock_core::Error,
    wait: Duration,
) -> Option<String> {
    let said = |store: &str| {
        format!("the server does not speak the {store} protocol: check the URL's port")
    };
    match kind {
        Kind::Postgres => {
            let causes = crate::failure::causes(error);
            causes
                .contains("encountered unexpected or invalid data")
                .then(|| said("Postgres"))
        }
        Kind::MySql if error.is_timeout() => {
            let options: MySqlConnectOptions = url.parse().ok()?;
            if options.get_socket().is_some() {
                return None;
            }
            let address = (options.get_host(), options.get_port());
            let wait = wait.min(Duration::from_secs(1));
            let mut stream = tokio::time::timeout(wait, TcpStream::connect(address))
                .await
                .ok()?
                .ok()?;
            let mut byte = [0_u8; 1];
            let silent = tokio::time::timeout(wait, stream.read(&mut byte))
                .await
                .is_err();
            silent.then(|| {
                format!(
                    "it accepted the connection but sent no greeting within {} ms: it is likely \
                     not a MySQL server (or one too busy to answer): check the URL's port",
                    wait.as_millis()
                )
            })
        }
        _ => None,
    }
}

/// The environment variable a password can come from, never a command-line option, which `ps`
/// shows.
pub(crate) const PASSWORD_ENV: &str = "SHEDLOCK_PASSWORD";

/// The password from the first line of `--password-file` or from [`PASSWORD_ENV`], if either is
/// given.
fn password(args: &StoreArgs) -> Result<Option<String>, Failure> {
    let from_env = std::env::var(PASSWORD_ENV).ok().filter(|p| !p.is_empty());
    let Some(path) = &args.password_file else {
        return Ok(from_env);
    };
    if from_env.is_some() {
        return Err(Failure::usage(format!(
            "both --password-file and {PASSWORD_ENV} give a password; keep one"
        )));
    }
    let text = std::fs::read_to_string(path).map_err(|e| {
        Failure::usage(format!(
            "cannot read the password file {}: {e}",
            path.display()
        ))
    })?;
    match text.lines().next().filter(|line| !line.is_empty()) {
        Some(line) => Ok(Some(line.to_owned())),
        None => Err(Failure::usage(format!(
            "the password file {} is empty; its first line is the password",
            path.display()
        ))),
    }
}

fn configure<DB: shedlock_sqlx::sqlx::Database>(
    builder: LockProviderBuilder<DB>,
    args: &StoreArgs,
    password: Option<&str>,
) -> LockProviderBuilder<DB> {
    with_login!(with_tls!(builder, args), args, password)
        .table(&args.table)
        .name_column(&args.name_column)
        .lock_until_column(&args.lock_until_column)
        .locked_at_column(&args.locked_at_column)
        .locked_by_column(&args.locked_by_column)
        .fencing_token_column(&args.fencing_token_column)
        .call_timeout(args.timeout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_their_store() {
        assert_eq!(kind("postgres://u@h/db").ok(), Some(Kind::Postgres));
        assert_eq!(kind("PostgreSQL://u@h/db").ok(), Some(Kind::Postgres));
        assert_eq!(kind("mysql://root@127.0.0.1/test").ok(), Some(Kind::MySql));
        assert_eq!(
            kind("mariadb://root@127.0.0.1/test").ok(),
            Some(Kind::MySql)
        );
        assert_eq!(kind("sqlite://locks.db").ok(), Some(Kind::Sqlite));
        assert_eq!(kind("sqlite::memory:").ok(), Some(Kind::Sqlite));
        assert_eq!(kind("redis://127.0.0.1:6379").ok(), Some(Kind::Redis));
        assert_eq!(kind("etcd://127.0.0.1:2379").ok(), Some(Kind::Etcd));
        assert_eq!(kind("https://10.0.0.1:2379").ok(), Some(Kind::Etcd));
        let unknown = kind("oracle://x").expect_err("unknown");
        assert!(
            unknown
                .message
                .contains("postgres://, postgresql://, mysql://"),
            "{}",
            unknown.message
        );
        assert!(kind("no scheme at all").is_err());
    }
}
