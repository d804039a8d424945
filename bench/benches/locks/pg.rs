//! Postgres: durations bound as `interval`, and Java ShedLock's `POSTGRES_SQL dbTime=true`
//! sequence also in a transaction per statement, as `JdbcTemplateLockProvider` runs it (on
//! Postgres a `COMMIT` is a round trip of its own).

use std::time::Duration;

use shedlock_bench::java::Placeholder;
use shedlock_sqlx::PgLockProvider;
use shedlock_sqlx::sqlx::postgres::types::PgInterval;
use shedlock_sqlx::sqlx::postgres::{PgConnection, Postgres};
use shedlock_sqlx::sqlx::{self, Connection as _};

use crate::sql::{Fut, SqlDb, sql_glue};
use crate::stores::WalProbe;

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

    fn wal_probe(url: String) -> Fut<'static, Option<Box<dyn WalProbe>>> {
        Box::pin(async move {
            let probe: Box<dyn WalProbe> = Box::new(Wal(PgConnection::connect(&url).await?));
            Ok(Some(probe))
        })
    }

    sql_glue!(PgLockProvider);
}

/// The WAL insert position, in bytes since `0/0`, on a connection of its own.
struct Wal(PgConnection);

impl WalProbe for Wal {
    fn position(&mut self) -> Fut<'_, u64> {
        Box::pin(async move {
            let bytes: i64 =
                sqlx::query_scalar("SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint")
                    .fetch_one(&mut self.0)
                    .await?;
            Ok(u64::try_from(bytes)?)
        })
    }
}
