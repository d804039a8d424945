//! Postgres: durations bound as `interval`, and Java ShedLock's `POSTGRES_SQL dbTime=true`
//! sequence also in a transaction per statement, as `JdbcTemplateLockProvider` runs it (on
//! Postgres a `COMMIT` is a round trip of its own).

use std::time::Duration;

use shedlock_bench::java::Placeholder;
use shedlock_sqlx::PgLockProvider;
use shedlock_sqlx::sqlx::postgres::Postgres;
use shedlock_sqlx::sqlx::postgres::types::PgInterval;

use crate::sql::{SqlDb, sql_glue};

impl SqlDb for Postgres {
    const DB: &'static str = "postgres";
    const QUOTE: char = '"';
    const JAVA: Option<(&'static str, Placeholder)> =
        Some(("POSTGRES_SQL dbTime=true", Placeholder::Dollar));
    const JAVA_TRANSACTIONS: bool = true;

    type Provider = PgLockProvider;
    type Span = PgInterval;

    fn span(d: Duration) -> PgInterval {
        PgInterval {
            months: 0,
            days: 0,
            microseconds: i64::try_from(d.as_micros()).unwrap_or(i64::MAX),
        }
    }

    sql_glue!(PgLockProvider);
}
