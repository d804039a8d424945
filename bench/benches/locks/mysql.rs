//! MariaDB (or MySQL): durations bound as microseconds (whole milliseconds, as the provider
//! binds them), sessions pinned to UTC, and no `UPDATE … RETURNING`: a won row is reported
//! through `LAST_INSERT_ID` and read back by a second statement. Durability is the server-wide
//! `innodb_flush_log_at_trx_commit`, so there is no per-statement release variant; Java
//! ShedLock's sequence is `MARIA_DB dbTime=true`.

use std::time::Duration;

use shedlock_bench::java::Placeholder;
use shedlock_sqlx::MySqlLockProvider;
use shedlock_sqlx::sqlx::mysql::{MySql, MySqlQueryResult};

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

    sql_glue!(MySqlLockProvider);
}
