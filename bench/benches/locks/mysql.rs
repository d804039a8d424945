//! MariaDB (or MySQL): durations bound as microseconds (whole milliseconds, as the provider
//! binds them), sessions pinned to UTC, and no `UPDATE … RETURNING`: a won row is reported
//! through `LAST_INSERT_ID` and read back by a second statement. Durability is the server-wide
//! `innodb_flush_log_at_trx_commit`, so there is no per-statement release variant; Java
//! ShedLock's sequence is `MARIA_DB dbTime=true`.

use std::time::Duration;

use async_trait::async_trait;
use shedlock_bench::java::Placeholder;
use shedlock_sqlx::MySqlLockProvider;
use shedlock_sqlx::sqlx::mysql::{MySql, MySqlConnection, MySqlQueryResult};
use shedlock_sqlx::sqlx::{self, Connection as _};

use crate::harness::{Attempt, Racer, Result};
use crate::sql::{Arg, SqlDb, micros, sql_glue};

impl SqlDb for MySql {
    const DB: &'static str = "mariadb";
    const QUOTE: char = '`';
    /// The provider's pool sets this on its sessions; its statements pin UTC anyway.
    const SESSION: Option<&'static str> = Some("SET time_zone = '+00:00'");
    const JAVA: Option<(&'static str, Placeholder)> =
        Some(("MARIA_DB dbTime=true", Placeholder::Question));

    type Provider = MySqlLockProvider;
    type Span = i64;

    fn span(d: Duration) -> i64 {
        micros(d)
    }

    /// The conditional update takes the owner, the duration, then the name.
    fn acquire_args(name: &str, owner: &str) -> Vec<Arg<i64>> {
        vec![
            Arg::Text(owner.to_owned()),
            Arg::Span(Self::span(crate::harness::AT_MOST)),
            Arg::Text(name.to_owned()),
        ]
    }

    /// A won update sets `LAST_INSERT_ID` to the new token.
    fn reported_token(result: &MySqlQueryResult) -> u64 {
        result.last_insert_id()
    }

    const ADVISORY: bool = true;

    fn advisory_racer(conn: MySqlConnection, name: &str) -> Option<Box<dyn Racer>> {
        Some(Box::new(Advisory {
            conn,
            name: name.to_owned(),
        }))
    }

    sql_glue!(MySqlLockProvider);
}

/// A racer on MariaDB's named locks: `GET_LOCK(name, 0)` (no wait), `RELEASE_LOCK(name)`.
struct Advisory {
    conn: MySqlConnection,
    name: String,
}

#[async_trait]
impl Racer for Advisory {
    async fn acquire(&mut self) -> Result<Attempt> {
        let got: Option<i64> = sqlx::query_scalar("SELECT GET_LOCK(?, 0)")
            .bind(&self.name)
            .fetch_one(&mut self.conn)
            .await?;
        Ok(if got == Some(1) {
            Attempt::Won(None)
        } else {
            Attempt::Held
        })
    }

    async fn release(&mut self) -> Result<()> {
        let released: Option<i64> = sqlx::query_scalar("SELECT RELEASE_LOCK(?)")
            .bind(&self.name)
            .fetch_one(&mut self.conn)
            .await?;
        if released == Some(1) {
            Ok(())
        } else {
            Err("RELEASE_LOCK: the lock was not held".into())
        }
    }

    async fn close(self: Box<Self>) {
        let _ = self.conn.close().await;
    }
}
