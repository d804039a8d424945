//! Support shared by the examples: a throwaway SQLite lock store, so each example runs with no
//! server.
#![warn(missing_docs)]

use std::path::Path;

use shedlock_sqlx::SqliteLockProvider;
use shedlock_sqlx::sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
};
use tempfile::TempDir;

/// The error type of the examples' `main`s.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A SQLite database in a temporary directory (deleted on drop) with the lock table created.
#[derive(Debug)]
pub struct TempStore {
    /// A pool on the database, for the example's own tables.
    pub pool: SqlitePool,
    /// The lock store on the same database.
    pub provider: SqliteLockProvider,
    dir: TempDir,
}

impl TempStore {
    /// Creates the database and its `shedlock` table.
    ///
    /// # Errors
    ///
    /// The temporary directory or the database cannot be created.
    pub async fn new() -> Result<Self, BoxError> {
        let dir = tempfile::Builder::new()
            .prefix("shedlock-example-")
            .tempdir()?;
        let options = SqliteConnectOptions::new()
            .filename(dir.path().join("app.db"))
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal);
        let pool = SqlitePoolOptions::new().connect_with(options).await?;
        let provider = SqliteLockProvider::builder(pool.clone()).build()?;
        provider.create_table_if_not_exists().await?;
        Ok(Self {
            pool,
            provider,
            dir,
        })
    }

    /// Where the database lives.
    #[must_use]
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

/// Logs to standard error (`RUST_LOG`, default `warn`), so the library's warnings show.
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// The README's Rust examples, compiled as doc tests so they stay true to the code.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The crate READMEs' Rust examples (what crates.io shows), compiled here because they use
/// shedlock-core and shedlock-sqlx together.
#[doc = include_str!("../../shedlock-core/README.md")]
#[doc = include_str!("../../shedlock-sqlx/README.md")]
#[doc = include_str!("../../shedlock-macros/README.md")]
#[cfg(doctest)]
pub struct CrateReadmeDoctests;
