//! SQLite: a temporary database file in WAL mode (as the provider's docs advise), the provider,
//! the raw floor on one connection each and raw racers. Java ShedLock has no SQLite
//! database-time statements, so there is no Java baseline here.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use shedlock_sqlx::SqliteLockProvider;
use shedlock_sqlx::sqlx::sqlite::{Sqlite as SqliteDb, SqliteConnection, SqlitePool};
use shedlock_sqlx::sqlx::{self, AssertSqlSafe, Connection as _, Executor as _, Row as _};

use crate::harness::{
    AT_MOST, Attempt, CloseFuture, Conn, FLOOR_CYCLE, FLOOR_OWNER, Gauge, HELD, Op, POOL_CYCLE,
    Racer, RawCycle, RawSkip, Result,
};
use crate::suite::{Backend, Captured, Floor, PoolRaw, RawRace};

pub(crate) struct Sqlite {
    url: String,
    _dir: tempfile::TempDir,
}

impl Sqlite {
    /// A new database file in a temporary directory, switched to WAL (a persistent setting).
    pub(crate) async fn new() -> Result<Self> {
        let dir = tempfile::tempdir()?;
        let url = format!(
            "sqlite://{}?mode=rwc",
            dir.path().join("locks.db").display()
        );
        let mut conn = SqliteConnection::connect(&url).await?;
        conn.execute("PRAGMA journal_mode = WAL").await?;
        conn.close().await?;
        Ok(Self { url, _dir: dir })
    }
}

/// An SQLite date modifier, as the provider binds durations.
fn modifier(d: Duration) -> String {
    let millis = d.as_millis();
    format!("+{}.{:03} seconds", millis / 1_000, millis % 1_000)
}

fn only(statements: &[String], what: &str) -> Result<Arc<str>> {
    match statements {
        [one] => Ok(one.as_str().into()),
        other => Err(format!("{what}: expected one statement, captured {other:?}").into()),
    }
}

#[async_trait]
impl Backend for Sqlite {
    type Provider = SqliteLockProvider;

    fn db(&self) -> &'static str {
        "sqlite"
    }

    async fn provider(&self, table: &str) -> Result<SqliteLockProvider> {
        // What `SqliteLockProvider::connect(url)` does, on the benchmark's own table.
        let pool = SqliteLockProvider::pool_options()
            .connect(&self.url)
            .await?;
        Ok(SqliteLockProvider::builder(pool).table(table).build()?)
    }

    async fn provider_on_default_pool(&self, table: &str) -> Result<SqliteLockProvider> {
        let pool = SqlitePool::connect(&self.url).await?;
        Ok(SqliteLockProvider::builder(pool).table(table).build()?)
    }

    async fn provider_on_pool_of(
        &self,
        table: &str,
        size: u32,
    ) -> Result<(SqliteLockProvider, Gauge)> {
        let pool = SqliteLockProvider::pool_options()
            .max_connections(size)
            .connect(&self.url)
            .await?;
        let gauge_pool = pool.clone();
        let gauge: Gauge = Arc::new(move || (gauge_pool.size(), gauge_pool.num_idle()));
        Ok((
            SqliteLockProvider::builder(pool).table(table).build()?,
            gauge,
        ))
    }

    fn closer(&self, provider: &SqliteLockProvider) -> CloseFuture {
        let pool = provider.pool().clone();
        Box::pin(async move { pool.close().await })
    }

    async fn create_table(&self, provider: &SqliteLockProvider) -> Result<()> {
        Ok(provider.create_table_if_not_exists().await?)
    }

    async fn drop_table(&self, table: &str) -> Result<()> {
        let mut conn = SqliteConnection::connect(&self.url).await?;
        sqlx::raw_sql(AssertSqlSafe(format!("DROP TABLE IF EXISTS \"{table}\"")))
            .execute(&mut conn)
            .await?;
        conn.close().await?;
        Ok(())
    }

    async fn floor(&self, _table: &str, sql: &Captured) -> Result<Floor> {
        let acquire = only(&sql.acquire_won, "acquire")?;
        let release = only(&sql.release, "release")?;
        if only(&sql.acquire_held, "skip")? != acquire {
            return Err("the skip path ran another statement than the acquire".into());
        }
        let raw = |name: &str| {
            let (acquire, release, url, name) = (
                acquire.clone(),
                release.clone(),
                self.url.clone(),
                name.to_owned(),
            );
            async move {
                Ok::<_, crate::harness::BoxError>(LiteRaw {
                    conn: Conn::Own(SqliteConnection::connect(&url).await?),
                    acquire,
                    release,
                    name,
                    owner: FLOOR_OWNER.to_owned(),
                    token: None,
                })
            }
        };
        Ok(Floor {
            select1: Box::new(Select1(SqliteConnection::connect(&self.url).await?)),
            skip: Box::new(RawSkip(raw(HELD).await?)),
            cycle: Box::new(RawCycle(raw(FLOOR_CYCLE).await?)),
            extra_cycles: Vec::new(),
        })
    }

    fn pool_raw(&self, provider: &SqliteLockProvider, sql: &Captured) -> Result<PoolRaw> {
        let raw = |name: &str| -> Result<LiteRaw> {
            Ok(LiteRaw {
                conn: Conn::Pool(provider.pool().clone()),
                acquire: only(&sql.acquire_won, "acquire")?,
                release: only(&sql.release, "release")?,
                name: name.to_owned(),
                owner: FLOOR_OWNER.to_owned(),
                token: None,
            })
        };
        Ok(PoolRaw {
            skip: Box::new(RawSkip(raw(HELD)?)),
            cycle: Box::new(RawCycle(raw(POOL_CYCLE)?)),
        })
    }

    fn raw_races(&self) -> Vec<RawRace> {
        vec![RawRace::Statements]
    }

    async fn raw_racers(
        &self,
        _race: RawRace,
        _table: &str,
        name: &str,
        sql: &Captured,
        n: usize,
    ) -> Result<Vec<Box<dyn Racer>>> {
        let acquire = only(&sql.acquire_won, "acquire")?;
        let release = only(&sql.release, "release")?;
        let mut racers: Vec<Box<dyn Racer>> = Vec::with_capacity(n);
        for i in 0..n {
            racers.push(Box::new(LiteRaw {
                conn: Conn::Own(SqliteConnection::connect(&self.url).await?),
                acquire: acquire.clone(),
                release: release.clone(),
                name: name.to_owned(),
                owner: format!("bench-raw-racer-{i}"),
                token: None,
            }));
        }
        Ok(racers)
    }
}

struct Select1(SqliteConnection);

#[async_trait]
impl Op for Select1 {
    async fn run(&mut self) -> Result<()> {
        let one: i32 = sqlx::query_scalar("SELECT 1")
            .fetch_one(&mut self.0)
            .await?;
        if one == 1 {
            Ok(())
        } else {
            Err("SELECT 1 returned another value".into())
        }
    }

    async fn close(self: Box<Self>) {
        let _ = self.0.close().await;
    }
}

/// The provider's statements, bound as the provider binds them.
struct LiteRaw {
    conn: Conn<SqliteDb>,
    acquire: Arc<str>,
    release: Arc<str>,
    name: String,
    owner: String,
    token: Option<i64>,
}

impl LiteRaw {
    async fn try_acquire(&mut self) -> Result<Attempt> {
        let row = sqlx::query(AssertSqlSafe(self.acquire.clone()))
            .bind(modifier(AT_MOST))
            .bind(&self.name)
            .bind(&self.owner)
            .fetch_optional(&mut *self.conn.get().await?)
            .await?;
        let Some(row) = row else {
            return Ok(Attempt::Held);
        };
        let token: Option<i64> = row.try_get(2)?;
        self.token = Some(token.ok_or("the table has no token column")?);
        Ok(Attempt::Won(token))
    }

    async fn do_release(&mut self) -> Result<()> {
        let token = self.token.take().ok_or("release without a lock")?;
        let done = sqlx::query(AssertSqlSafe(self.release.clone()))
            .bind(modifier(Duration::ZERO))
            .bind(&self.name)
            .bind(&self.owner)
            .bind(token)
            .execute(&mut *self.conn.get().await?)
            .await?;
        if done.rows_affected() == 1 {
            Ok(())
        } else {
            Err("the release matched no row".into())
        }
    }
}

#[async_trait]
impl Racer for LiteRaw {
    async fn acquire(&mut self) -> Result<Attempt> {
        self.try_acquire().await
    }

    async fn release(&mut self) -> Result<()> {
        self.do_release().await
    }

    async fn close(self: Box<Self>) {
        self.conn.close().await;
    }
}
