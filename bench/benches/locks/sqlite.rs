//! SQLite: a temporary database file in WAL mode (as the provider's docs advise), durations
//! bound as date modifiers. Java ShedLock has no SQLite database-time statements, so there is
//! no Java baseline here.

use std::time::Duration;

use shedlock_sqlx::SqliteLockProvider;
use shedlock_sqlx::sqlx::sqlite::{Sqlite, SqliteConnection};
use shedlock_sqlx::sqlx::{Connection as _, Executor as _};

use crate::harness::Result;
use crate::sql::{Sql, SqlDb, sql_glue};

impl SqlDb for Sqlite {
    const DB: &'static str = "sqlite";
    const QUOTE: char = '"';

    type Provider = SqliteLockProvider;
    type Span = String;

    /// An SQLite date modifier, as the provider binds durations.
    fn span(d: Duration) -> String {
        let millis = d.as_millis();
        format!("+{}.{:03} seconds", millis / 1_000, millis % 1_000)
    }

    sql_glue!(SqliteLockProvider);
}

/// A new database file in a temporary directory, switched to WAL (a persistent setting).
pub(crate) async fn temporary() -> Result<Sql<Sqlite>> {
    let dir = tempfile::tempdir()?;
    let url = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("locks.db").display()
    );
    let mut conn = SqliteConnection::connect(&url).await?;
    conn.execute("PRAGMA journal_mode = WAL").await?;
    conn.close().await?;
    Ok(Sql::new(url, Some(dir)))
}
