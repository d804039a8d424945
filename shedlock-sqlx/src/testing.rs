//! Helpers for tests that need a real database, behind the feature `testing`.
//!
//! They say where the database is and what to do when there is none. They give unique names, so
//! tests can share a server.
//!
//! Tests read the database URLs from [`PG_URL_ENV`] (`SHEDLOCK_PG_URL`) and [`MYSQL_URL_ENV`]
//! (`SHEDLOCK_MYSQL_URL`). The MySQL URL may name MySQL or MariaDB. Without a URL, [`postgres_url`]
//! and [`mysql_url`] print a skip notice and return `None`. The test can then return early and
//! pass. With [`REQUIRE_DB_ENV`] set to `1`, as CI does, they panic instead. So a missing database
//! fails the run rather than skipping it silently.
//!
//! With the `testcontainers` feature, a missing URL starts a container instead. It starts Postgres
//! 16 or MariaDB 11 through [testcontainers](https://docs.rs/testcontainers), once per test
//! process. That needs a Docker engine. It is opt-in for developers who have one, and CI only
//! compiles it. The containers run until the process ends, and are left behind then. testcontainers
//! cannot remove a container held for the whole process. The containers carry the label
//! `org.shedlock-rs.testing`. So `docker rm -f $(docker ps -aq --filter
//! label=org.shedlock-rs.testing)` removes them.
//!
//! ```
//! use shedlock_sqlx::testing;
//!
//! # #[cfg(feature = "postgres")]
//! #[tokio::test]
//! async fn locks_on_postgres() -> Result<(), Box<dyn std::error::Error>> {
//!     let Some(url) = testing::postgres_url() else { return Ok(()) }; // skipped
//!     let pool = shedlock_sqlx::sqlx::PgPool::connect(&url).await?;
//!     let table = testing::unique_table_name("shedlock_test");
//!     let provider = shedlock_sqlx::PgLockProvider::builder(pool).table(&table).build()?;
//!     provider.create_table_if_not_exists().await?;
//!     // ...
//!     Ok(())
//! }
//! ```

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher as _, Hasher as _};
use std::sync::atomic::{AtomicU64, Ordering};

/// The environment variable holding the Postgres URL of database tests.
pub const PG_URL_ENV: &str = "SHEDLOCK_PG_URL";
/// The environment variable holding the MySQL/MariaDB URL of database tests.
pub const MYSQL_URL_ENV: &str = "SHEDLOCK_MYSQL_URL";
/// Set to `1` to make a missing database fail tests instead of skipping them.
pub const REQUIRE_DB_ENV: &str = "SHEDLOCK_REQUIRE_DB";

/// The Postgres URL for a test.
///
/// It is [`PG_URL_ENV`] if set. Else, with the `testcontainers` feature, it is a container's. Else
/// it is `None`, after printing a skip notice.
///
/// # Panics
///
/// When no database is available and [`REQUIRE_DB_ENV`] is `1`.
#[must_use]
pub fn postgres_url() -> Option<String> {
    url(Db::Postgres)
}

/// The MySQL/MariaDB URL for a test.
///
/// It is [`MYSQL_URL_ENV`] if set. Else, with the `testcontainers` feature, it is a MariaDB
/// container's. Else it is `None`, after printing a skip notice.
///
/// # Panics
///
/// When no database is available and [`REQUIRE_DB_ENV`] is `1`.
#[must_use]
pub fn mysql_url() -> Option<String> {
    url(Db::MySql)
}

/// Whether tests must fail rather than skip without a database ([`REQUIRE_DB_ENV`] is `1`).
#[must_use]
pub fn db_required() -> bool {
    std::env::var(REQUIRE_DB_ENV).is_ok_and(|v| v.trim() == "1")
}

/// A suffix that, in practice, no other call in any process makes.
///
/// It is the process id, a counter and random bits, as lowercase hex and underscores. It has 30
/// characters at most.
#[must_use]
pub fn unique_suffix() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let random = RandomState::new().build_hasher().finish() & 0xffff_ffff;
    format!("{:x}_{count:x}_{random:08x}", std::process::id())
}

/// A table name of its own for one test: `prefix` plus [`unique_suffix`], a plain identifier.
///
/// ```
/// let a = shedlock_sqlx::testing::unique_table_name("shedlock_t");
/// let b = shedlock_sqlx::testing::unique_table_name("shedlock_t");
/// assert_ne!(a, b);
/// assert!(a.starts_with("shedlock_t_") && a.len() <= 63);
/// ```
///
/// # Panics
///
/// If `prefix` is not 1 to 32 ASCII letters, digits or underscores starting with a letter or
/// underscore. That is a test's mistake.
#[must_use]
pub fn unique_table_name(prefix: &str) -> String {
    let plain = prefix.len() <= 32
        && prefix
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && prefix
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_');
    assert!(
        plain,
        "table name prefix {prefix:?} is not a short plain identifier"
    );
    format!("{prefix}_{}", unique_suffix())
}

/// A lock name of its own for one test: `prefix-` plus [`unique_suffix`].
#[must_use]
pub fn unique_lock_name(prefix: &str) -> String {
    format!("{prefix}-{}", unique_suffix())
}

#[derive(Debug, Clone, Copy)]
enum Db {
    Postgres,
    MySql,
}

impl Db {
    fn env(self) -> &'static str {
        match self {
            Self::Postgres => PG_URL_ENV,
            Self::MySql => MYSQL_URL_ENV,
        }
    }

    fn example(self) -> &'static str {
        match self {
            Self::Postgres => "postgres://postgres@127.0.0.1:5432/test",
            Self::MySql => "mysql://root@127.0.0.1:3306/test",
        }
    }
}

fn url(db: Db) -> Option<String> {
    let env = db.env();
    if let Ok(url) = std::env::var(env)
        && !url.trim().is_empty()
    {
        return Some(url);
    }
    #[cfg(feature = "testcontainers")]
    let why = match containers::url(db) {
        Ok(url) => return Some(url),
        Err(error) => format!("{env} is not set and no container could be started ({error})"),
    };
    #[cfg(not(feature = "testcontainers"))]
    let why = format!("{env} is not set");
    assert!(
        !db_required(),
        "{why}, and {REQUIRE_DB_ENV}=1 requires the database: set {env}, e.g. {env}={}",
        db.example()
    );
    // A skip notice for the test's output (captured by the test harness, shown with
    // --nocapture or when the test fails), not a log line.
    #[allow(clippy::print_stderr)]
    {
        eprintln!(
            "skipping a database test: {why} (e.g. {env}={}; set {REQUIRE_DB_ENV}=1 to fail instead)",
            db.example()
        );
    }
    None
}

#[cfg(feature = "testcontainers")]
mod containers {
    use std::sync::OnceLock;
    use std::sync::mpsc;

    use testcontainers::core::{IntoContainerPort as _, WaitFor, wait::LogWaitStrategy};
    use testcontainers::runners::AsyncRunner as _;
    use testcontainers::{ContainerRequest, GenericImage, ImageExt as _};

    use super::Db;

    const LABEL: &str = "org.shedlock-rs.testing";

    /// The URL of this process's container for `db`, started on first use.
    pub(super) fn url(db: Db) -> Result<String, String> {
        static POSTGRES: OnceLock<Result<String, String>> = OnceLock::new();
        static MYSQL: OnceLock<Result<String, String>> = OnceLock::new();
        match db {
            Db::Postgres => POSTGRES.get_or_init(|| {
                let image = GenericImage::new("postgres", "16-alpine")
                    .with_exposed_port(5432.tcp())
                    .with_wait_for(WaitFor::log(
                        LogWaitStrategy::stdout_or_stderr(
                            "database system is ready to accept connections",
                        )
                        .with_times(2),
                    ))
                    .with_env_var("POSTGRES_HOST_AUTH_METHOD", "trust")
                    .with_env_var("POSTGRES_DB", "test")
                    .with_label(LABEL, "postgres");
                start(image, 5432, |host, port| {
                    format!("postgres://postgres@{host}:{port}/test")
                })
            }),
            Db::MySql => MYSQL.get_or_init(|| {
                let image = GenericImage::new("mariadb", "11")
                    .with_exposed_port(3306.tcp())
                    .with_wait_for(WaitFor::log(
                        LogWaitStrategy::stdout_or_stderr("ready for connections").with_times(2),
                    ))
                    .with_env_var("MARIADB_ALLOW_EMPTY_ROOT_PASSWORD", "1")
                    .with_env_var("MARIADB_DATABASE", "test")
                    .with_label(LABEL, "mariadb");
                start(image, 3306, |host, port| {
                    format!("mysql://root@{host}:{port}/test")
                })
            }),
        }
        .clone()
    }

    /// Starts `image` on a thread of its own that keeps the container for the rest of the process.
    ///
    /// The thread has its own runtime, independent of the tests' runtimes.
    fn start(
        image: ContainerRequest<GenericImage>,
        port: u16,
        url: fn(&str, u16) -> String,
    ) -> Result<String, String> {
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("shedlock-testcontainer".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(e) => {
                        let _ = tx.send(Err(format!("cannot start a runtime: {e}")));
                        return;
                    }
                };
                runtime.block_on(async move {
                    let container = match image.start().await {
                        Ok(container) => container,
                        Err(e) => {
                            let _ = tx.send(Err(e.to_string()));
                            return;
                        }
                    };
                    let address = async {
                        let host = container.get_host().await?;
                        let port = container.get_host_port_ipv4(port).await?;
                        Ok::<_, testcontainers::TestcontainersError>(url(&host.to_string(), port))
                    };
                    let _ = tx.send(address.await.map_err(|e| e.to_string()));
                    // Keep the container (and this runtime) for the rest of the process.
                    std::future::pending::<()>().await;
                });
            })
            .map_err(|e| format!("cannot spawn the container thread: {e}"))?;
        rx.recv()
            .map_err(|_| "the container thread ended early".to_owned())?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_names_differ_and_are_identifiers() {
        let names: Vec<String> = (0..100).map(|_| unique_table_name("t")).collect();
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len());
        for name in &names {
            assert!(name.len() <= 63, "{name}");
            assert!(
                name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                "{name}"
            );
        }
    }

    #[test]
    #[should_panic(expected = "not a short plain identifier")]
    fn bad_prefixes_panic() {
        let _ = unique_table_name("a-b");
    }
}
