//! Postgres: durations bound as `interval`, and Java ShedLock's `POSTGRES_SQL dbTime=true`
//! sequence also in a transaction per statement, as `JdbcTemplateLockProvider` runs it (on
//! Postgres a `COMMIT` is a round trip of its own).

use std::time::Duration;

use async_trait::async_trait;
use shedlock_bench::java::Placeholder;
use shedlock_sqlx::PgLockProvider;
use shedlock_sqlx::sqlx::postgres::types::PgInterval;
use shedlock_sqlx::sqlx::postgres::{PgAdvisoryLock, PgAdvisoryLockGuard, PgConnection, Postgres};
use shedlock_sqlx::sqlx::{self, Connection as _, Either};

use crate::harness::{Attempt, Racer, Result};
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

    const ADVISORY: bool = true;

    fn advisory_racer(conn: PgConnection, name: &str) -> Option<Box<dyn Racer>> {
        Some(Box::new(Advisory {
            lock: PgAdvisoryLock::new(name),
            conn: Held::Free(conn),
        }))
    }

    sql_glue!(PgLockProvider);
}

/// A racer on sqlx's `PgAdvisoryLock`: `pg_try_advisory_lock`, `pg_advisory_unlock`.
struct Advisory {
    lock: PgAdvisoryLock,
    conn: Held,
}

/// The racer's connection, with the lock's guard while it holds it.
enum Held {
    Free(PgConnection),
    Locked(PgAdvisoryLockGuard<PgConnection>),
    /// Between two states, or lost to an error.
    Gone,
}

#[async_trait]
impl Racer for Advisory {
    async fn acquire(&mut self) -> Result<Attempt> {
        let Held::Free(conn) = std::mem::replace(&mut self.conn, Held::Gone) else {
            return Err("advisory racer: acquire while holding".into());
        };
        Ok(match self.lock.try_acquire(conn).await? {
            Either::Left(guard) => {
                self.conn = Held::Locked(guard);
                Attempt::Won(None)
            }
            Either::Right(conn) => {
                self.conn = Held::Free(conn);
                Attempt::Held
            }
        })
    }

    async fn release(&mut self) -> Result<()> {
        let Held::Locked(guard) = std::mem::replace(&mut self.conn, Held::Gone) else {
            return Err("advisory racer: release without the lock".into());
        };
        self.conn = Held::Free(guard.release_now().await?);
        Ok(())
    }

    async fn close(self: Box<Self>) {
        let conn = match self.conn {
            Held::Free(conn) => conn,
            Held::Locked(guard) => guard.leak(),
            Held::Gone => return,
        };
        let _ = conn.close().await;
    }
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
