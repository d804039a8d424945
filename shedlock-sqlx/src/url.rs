//! Parsing a provider's URL.
//!
//! The scheme check names the provider that another store's URL is for. The `transaction_pooler`
//! query parameter is ours. A check makes sure the TLS files the URL names can be read.

use shedlock_core::{Error, Result};

use crate::conns::Options;
use crate::dialect::Dialect;

/// The URL schemes of the stores shedlock-rs has, and what takes them.
const STORES: &[(&str, &str)] = &[
    (
        "postgres",
        "PgLockProvider (shedlock-sqlx, feature \"postgres\")",
    ),
    (
        "postgresql",
        "PgLockProvider (shedlock-sqlx, feature \"postgres\")",
    ),
    (
        "mysql",
        "MySqlLockProvider (shedlock-sqlx, feature \"mysql\")",
    ),
    (
        "mariadb",
        "MySqlLockProvider (shedlock-sqlx, feature \"mysql\")",
    ),
    (
        "sqlite",
        "SqliteLockProvider (shedlock-sqlx, feature \"sqlite\")",
    ),
    ("redis", "RedisLockProvider (shedlock-redis)"),
    ("rediss", "RedisLockProvider (shedlock-redis)"),
    ("etcd", "EtcdLockProvider (shedlock-etcd)"),
];

/// Parses `url` for `DB`, refusing another store's scheme with the provider that takes it.
///
/// The messages never repeat the URL, because it may hold a password. A scheme is spelled back only
/// if it has a scheme's shape. SQLite also takes a plain path (`locks.db`), as sqlx does.
///
/// On a Postgres URL, the query parameter [`POOLER_PARAM`] is ours. It is `transaction_pooler=true`
/// or `false`. It is taken out before sqlx reads the URL, and returned.
pub(crate) fn parse_url<DB: Dialect>(url: &str) -> Result<(Options<DB>, bool)> {
    let scheme = url.split_once(':').map(|(scheme, _)| scheme).filter(|s| {
        // RFC 3986's shape; one letter is a Windows drive, not a scheme.
        s.len() > 1
            && s.starts_with(|c: char| c.is_ascii_alphabetic())
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    });
    let lower = scheme.map(str::to_ascii_lowercase);
    let ours = lower.as_deref().is_some_and(|s| DB::SCHEMES.contains(&s));
    let other = lower
        .as_deref()
        .and_then(|s| STORES.iter().find(|(known, _)| *known == s));
    let path = DB::PLAIN_PATHS && other.is_none() && !url.contains("://");
    if !ours && !path {
        let wanted = DB::SCHEMES
            .iter()
            .map(|s| format!("{s}:"))
            .collect::<Vec<_>>()
            .join(" or ");
        let hint = match (&lower, other) {
            (Some(scheme), Some((_, provider))) => format!("; a {scheme}: URL is for {provider}"),
            (Some(scheme), None) => format!("; {scheme:?} is not a scheme shedlock-rs knows"),
            (None, _) => "; the URL has no scheme".to_owned(),
        };
        return Err(Error::invalid_config(format!(
            "{} takes a {wanted} URL{hint}",
            DB::PROVIDER
        )));
    }
    // sqlx matches some schemes case-sensitively: hand it the lowercase spelling.
    let url = match (scheme, &lower) {
        (Some(scheme), Some(lower)) if ours && scheme != lower => {
            std::borrow::Cow::Owned(format!("{lower}{}", &url[scheme.len()..]))
        }
        _ => std::borrow::Cow::Borrowed(url),
    };
    let (url, pooler) = if DB::SCHEMES.contains(&"postgres") {
        let (url, pooler) = take_pooler_param(&url)?;
        (std::borrow::Cow::Owned(url), pooler)
    } else {
        (url, false)
    };
    check_tls_files::<DB>(&url)?;
    let options = url.parse::<Options<DB>>().map_err(|e| {
        Error::invalid_config_with(
            format!(
                "the {} URL is not valid ({e}); the form is {}",
                DB::DATABASE,
                DB::URL_FORM
            ),
            e,
        )
    })?;
    Ok((options, pooler))
}

/// The URL query parameter that sets
/// [`LockProviderBuilder::transaction_pooler`](crate::LockProviderBuilder::transaction_pooler).
pub(crate) const POOLER_PARAM: &str = "transaction_pooler";

/// `url` without its [`POOLER_PARAM`] parameters, and whether the last one said `true`.
fn take_pooler_param(url: &str) -> Result<(String, bool)> {
    let Some((base, rest)) = url.split_once('?') else {
        return Ok((url.to_owned(), false));
    };
    let (query, fragment) = match rest.split_once('#') {
        Some((query, fragment)) => (query, Some(fragment)),
        None => (rest, None),
    };
    let mut pooler = false;
    let mut kept = Vec::new();
    for pair in query.split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        if key != POOLER_PARAM {
            kept.push(pair);
            continue;
        }
        pooler = match value {
            "true" => true,
            "false" => false,
            other => {
                return Err(Error::invalid_config(format!(
                    "the URL parameter {POOLER_PARAM} is {other:?}; use true (each statement \
                     in a transaction of its own, for PgBouncer in transaction mode) or false"
                )));
            }
        };
    }
    let mut url = base.to_owned();
    if !kept.is_empty() {
        url.push('?');
        url.push_str(&kept.join("&"));
    }
    if let Some(fragment) = fragment {
        url.push('#');
        url.push_str(fragment);
    }
    Ok((url, pooler))
}

/// Checks that the TLS files a URL names (`sslrootcert=…`, `ssl-ca=…`) can be read.
///
/// So a wrong path is an error naming it. sqlx reads them at connect time and reports only "No such
/// file or directory". A percent-encoded path is left to sqlx.
fn check_tls_files<DB: Dialect>(url: &str) -> Result<()> {
    let Some((_, query)) = url.split_once('?') else {
        return Ok(());
    };
    let query = query.split_once('#').map_or(query, |(q, _)| q);
    for (key, value) in query.split('&').filter_map(|pair| pair.split_once('=')) {
        let Some((_, what)) = DB::TLS_FILES.iter().find(|(param, _)| *param == key) else {
            continue;
        };
        if value.contains('%') {
            continue;
        }
        crate::connect::readable(
            std::path::Path::new(value),
            &format!("{what} file (the {} URL's {key})", DB::DATABASE),
        )?;
    }
    Ok(())
}

/// Providers from URLs: the scheme check, bad URLs and settings, and what a connection that cannot
/// be opened says.
///
/// No database is needed, because a closed port refuses at once.
#[cfg(all(test, feature = "postgres", feature = "mysql", feature = "sqlite"))]
mod tests {
    use std::time::Duration;

    use super::take_pooler_param;
    use crate::builder::Checked;
    use crate::{MySqlLockProvider, PgLockProvider, SqliteLockProvider};

    /// A loopback port nobody listens on, bound and then closed.
    fn closed_port() -> u16 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        listener.local_addr().expect("its address").port()
    }

    #[tokio::test]
    async fn another_databases_url_is_refused_naming_the_provider_that_takes_it() {
        let cases = [
            (
                PgLockProvider::connect_lazy("mysql://root:secret@db:3306/app").map(drop),
                "PgLockProvider takes a postgres: or postgresql: URL; a mysql: URL is for \
                 MySqlLockProvider (shedlock-sqlx, feature \"mysql\")",
            ),
            (
                MySqlLockProvider::connect_lazy("postgres://app@db/app").map(drop),
                "MySqlLockProvider takes a mysql: or mariadb: URL; a postgres: URL is for \
                 PgLockProvider (shedlock-sqlx, feature \"postgres\")",
            ),
            (
                SqliteLockProvider::connect_lazy("redis://127.0.0.1:6379").map(drop),
                "SqliteLockProvider takes a sqlite: URL; a redis: URL is for RedisLockProvider \
                 (shedlock-redis)",
            ),
            (
                PgLockProvider::connect_lazy("db.example.com/app").map(drop),
                "PgLockProvider takes a postgres: or postgresql: URL; the URL has no scheme",
            ),
            (
                PgLockProvider::connect_lazy("pg://app@db/app").map(drop),
                "PgLockProvider takes a postgres: or postgresql: URL; \"pg\" is not a scheme \
                 shedlock-rs knows",
            ),
        ];
        for (outcome, expected) in cases {
            let err = outcome.expect_err(expected);
            assert!(err.is_invalid_config(), "{err}");
            assert_eq!(
                err.to_string(),
                format!("invalid lock configuration: {expected}")
            );
            assert!(!err.to_string().contains("secret"), "{err}");
        }
        // Either spelling of each scheme, any case.
        PgLockProvider::connect_lazy("PostgreSQL://app@db/app").expect("postgresql:");
        MySqlLockProvider::connect_lazy("mariadb://app@db/app").expect("mariadb:");
        // A key=value string is not a URL, and its pieces are not spelled back.
        let err = PgLockProvider::connect_lazy("password=ab:c host=db").expect_err("no URL");
        assert!(err.to_string().ends_with("the URL has no scheme"), "{err}");
        assert!(!err.to_string().contains("ab"), "{err}");
        // SQLite takes a plain path as sqlx does, and its scheme in any case: both name the
        // file (which does not exist, so opening it says where it looked).
        let dir = tempfile::tempdir().expect("a temporary directory");
        for (url, file) in [
            (
                dir.path().join("plain.db").display().to_string(),
                "plain.db",
            ),
            (
                format!("SQLITE://{}", dir.path().join("upper.db").display()),
                "upper.db",
            ),
        ] {
            let err = SqliteLockProvider::connect(&url)
                .await
                .expect_err("no such file");
            let expected = format!(
                "lock store failed to connect to SQLite database {}: ",
                dir.path().join(file).display()
            );
            assert!(err.to_string().starts_with(&expected), "{url}: {err}");
        }
        let err = SqliteLockProvider::connect_lazy("postgres://app@db/app").expect_err("a PG URL");
        assert!(err.to_string().contains("PgLockProvider"), "{err}");
    }

    /// `transaction_pooler=true|false` on a Postgres URL is ours.
    ///
    /// It is taken out before sqlx reads the URL, and the other parameters are kept. Another value
    /// is refused.
    #[test]
    fn the_transaction_pooler_url_parameter_is_taken_out() {
        assert_eq!(
            take_pooler_param("postgres://u@h/db?transaction_pooler=true").unwrap(),
            ("postgres://u@h/db".to_owned(), true)
        );
        assert_eq!(
            take_pooler_param("postgres://u@h/db?sslmode=disable&transaction_pooler=false&x=1")
                .unwrap(),
            ("postgres://u@h/db?sslmode=disable&x=1".to_owned(), false)
        );
        assert_eq!(
            take_pooler_param("postgres://u@h/db?sslmode=disable").unwrap(),
            ("postgres://u@h/db?sslmode=disable".to_owned(), false)
        );
        let err = take_pooler_param("postgres://u@h/db?transaction_pooler=yes").unwrap_err();
        assert!(err.is_invalid_config(), "{err}");
        assert!(
            err.to_string()
                .contains("the URL parameter transaction_pooler is \"yes\"; use true"),
            "{err}"
        );
    }

    #[test]
    fn a_postgres_url_sets_the_transaction_pooler() {
        let (source, settings) = PgLockProvider::from_url(
            "postgres://u@h/db?transaction_pooler=true&application_name=x",
        )
        .into_parts()
        .unwrap();
        assert!(settings.transaction_pooler);
        let Checked::Own(options, _) = source else {
            panic!("connections of its own")
        };
        assert_eq!(options.get_application_name(), Some("x"));
        let (_, settings) = PgLockProvider::from_url("postgres://u@h/db")
            .into_parts()
            .unwrap();
        assert!(!settings.transaction_pooler);
        let err =
            PgLockProvider::connect_lazy("postgres://u@h/db?transaction_pooler=1").unwrap_err();
        assert!(err.is_invalid_config(), "{err}");
    }

    #[test]
    fn a_url_that_does_not_parse_says_the_form_without_repeating_it() {
        let err = PgLockProvider::connect_lazy("postgres://app:secret@db:notaport/app")
            .expect_err("a bad port");
        assert!(err.is_invalid_config(), "{err}");
        let text = err.to_string();
        assert!(
            text.contains("the Postgres URL is not valid")
                && text.contains("postgres://user:password@host:5432/database"),
            "{text}"
        );
        assert!(!text.contains("secret"), "{text}");
    }

    #[test]
    fn max_connections_is_checked() {
        for bad in [0, 1_001] {
            let err = PgLockProvider::from_url("postgres://app@db/app")
                .max_connections(bad)
                .build()
                .expect_err("out of range");
            assert!(err.is_invalid_config(), "{err}");
            assert!(err.to_string().contains("use 1 to 1000"), "{err}");
        }
        let provider = PgLockProvider::from_url("postgres://app@db/app")
            .max_connections(2)
            .build()
            .expect("in range");
        assert_eq!(provider.connection_stats().max, 2);
        assert_eq!(provider.connection_stats().open, 0, "connects on first use");
        assert!(provider.pool().is_none());
    }

    #[tokio::test]
    async fn max_connections_on_a_pool_is_refused() {
        let pool = sqlx::PgPool::connect_lazy("postgres://app@db/app").expect("a valid URL");
        let err = PgLockProvider::builder(pool)
            .max_connections(2)
            .build()
            .expect_err("the pool has its own size");
        assert!(err.is_invalid_config(), "{err}");
        assert!(
            err.to_string().contains("PoolOptions::max_connections"),
            "{err}"
        );
    }

    /// With `retry_refused_connections(false)` a refusal is the answer: `connect()` fails at the
    /// first one, long before the call timeout, naming the server and the refusal.
    #[tokio::test]
    async fn a_refused_connection_is_the_answer_when_not_retried() {
        let port = closed_port();
        let started = std::time::Instant::now();
        let err = MySqlLockProvider::from_url(format!("mysql://app:secret@127.0.0.1:{port}/app"))
            .call_timeout(Duration::from_secs(10))
            .retry_refused_connections(false)
            .connect()
            .await
            .expect_err("nobody listens");
        assert!(err.is_backend(), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5), "{err}");
        let text = err.to_string();
        assert!(
            text.starts_with(&format!(
                "lock store failed to connect to MySQL/MariaDB at 127.0.0.1:{port}/app: "
            )) && text.contains("Connection refused"),
            "{text}"
        );
        assert!(!text.contains("secret"), "{text}");
    }

    /// A server that is not there: `connect()` keeps asking until the call timeout.
    ///
    /// It then says where it tried, what it got, and for which call. It never says the password.
    #[tokio::test]
    async fn a_refused_connection_names_the_server_and_the_cause() {
        let port = closed_port();
        for (outcome, target) in [
            (
                PgLockProvider::from_url(format!("postgres://app:secret@127.0.0.1:{port}/app"))
                    .call_timeout(Duration::from_millis(300))
                    .connect()
                    .await
                    .map(drop),
                format!("Postgres at 127.0.0.1:{port}/app"),
            ),
            (
                MySqlLockProvider::from_url(format!("mysql://app:secret@127.0.0.1:{port}/app"))
                    .call_timeout(Duration::from_millis(300))
                    .connect()
                    .await
                    .map(drop),
                format!("MySQL/MariaDB at 127.0.0.1:{port}/app"),
            ),
        ] {
            let err = outcome.expect_err("nobody listens");
            assert!(err.is_timeout(), "{err}");
            let text = err.to_string();
            assert!(
                text.starts_with("lock store call `connect` timed out after 300ms: connecting to ")
                    && text.contains(&target)
                    && text.contains("(last error: ")
                    && text.to_lowercase().contains("connection refused"),
                "{text}"
            );
            assert!(!text.contains("secret"), "{text}");
        }
        // A lazy provider's call says the same, with its lock.
        let lazy = PgLockProvider::from_url(format!("postgres://app@127.0.0.1:{port}/app"))
            .call_timeout(Duration::from_millis(300))
            .build()
            .expect("valid settings");
        let err = shedlock_core::provider::LockProvider::acquire(
            &lazy,
            "report",
            Duration::from_secs(10),
            "me",
        )
        .await
        .expect_err("nobody listens");
        let text = err.to_string();
        assert!(
            err.is_timeout()
                && text.contains(&format!(
                    "lock \"report\", connecting to Postgres at 127.0.0.1:{port}/app (last error: "
                )),
            "{text}"
        );
    }

    /// A connection the database refuses for good fails at once, naming the database and its
    /// reason. Here the refusal is SQLite's missing file.
    #[tokio::test]
    async fn a_database_that_refuses_the_connection_says_why() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("absent").join("locks.db");
        let err = SqliteLockProvider::connect(&format!("sqlite://{}", path.display()))
            .await
            .expect_err("no such directory");
        assert!(err.is_backend(), "{err}");
        let text = err.to_string();
        assert!(
            text.starts_with(&format!(
                "lock store failed to connect to SQLite database {}: ",
                path.display()
            )) && text.contains("unable to open database file"),
            "{text}"
        );
    }
}
