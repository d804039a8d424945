//! Postgres: the provider, the raw floor on one connection each, raw racers, and Java
//! ShedLock's `POSTGRES_SQL dbTime=true` sequence.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use shedlock_bench::java::{Section, Statement};
use shedlock_sqlx::PgLockProvider;
use shedlock_sqlx::sqlx::postgres::types::PgInterval;
use shedlock_sqlx::sqlx::postgres::{PgArguments, PgConnection, PgPool, Postgres};
use shedlock_sqlx::sqlx::query::Query;
use shedlock_sqlx::sqlx::{self, AssertSqlSafe, Connection as _, Row as _};

use crate::harness::{
    AT_MOST, Attempt, CloseFuture, Conn, FLOOR_CYCLE, FLOOR_OWNER, Gauge, HELD, Op, POOL_CYCLE,
    Racer, RawCycle, RawSkip, Result,
};
use crate::suite::{Backend, Captured, Floor, PoolRaw, RawRace};

pub(crate) struct Pg {
    pub(crate) url: String,
    /// Java ShedLock's statements, if the interop file was found.
    pub(crate) java: Option<Section>,
}

fn interval(d: Duration) -> PgInterval {
    PgInterval {
        months: 0,
        days: 0,
        microseconds: i64::try_from(d.as_micros()).unwrap_or(i64::MAX),
    }
}

fn only(statements: &[String], what: &str) -> Result<Arc<str>> {
    match statements {
        [one] => Ok(one.as_str().into()),
        other => Err(format!("{what}: expected one statement, captured {other:?}").into()),
    }
}

#[async_trait]
impl Backend for Pg {
    type Provider = PgLockProvider;

    fn db(&self) -> &'static str {
        "postgres"
    }

    async fn provider(&self, table: &str) -> Result<PgLockProvider> {
        // What `PgLockProvider::connect(url)` does, on the benchmark's own table.
        let pool = PgLockProvider::pool_options().connect(&self.url).await?;
        Ok(PgLockProvider::builder(pool).table(table).build()?)
    }

    async fn provider_on_default_pool(&self, table: &str) -> Result<PgLockProvider> {
        let pool = PgPool::connect(&self.url).await?;
        Ok(PgLockProvider::builder(pool).table(table).build()?)
    }

    async fn provider_on_pool_of(&self, table: &str, size: u32) -> Result<(PgLockProvider, Gauge)> {
        let pool = PgLockProvider::pool_options()
            .max_connections(size)
            .connect(&self.url)
            .await?;
        let gauge_pool = pool.clone();
        let gauge: Gauge = Arc::new(move || (gauge_pool.size(), gauge_pool.num_idle()));
        Ok((PgLockProvider::builder(pool).table(table).build()?, gauge))
    }

    fn closer(&self, provider: &PgLockProvider) -> CloseFuture {
        let pool = provider.pool().clone();
        Box::pin(async move { pool.close().await })
    }

    async fn create_table(&self, provider: &PgLockProvider) -> Result<()> {
        Ok(provider.create_table_if_not_exists().await?)
    }

    async fn drop_table(&self, table: &str) -> Result<()> {
        let mut conn = PgConnection::connect(&self.url).await?;
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
        let raw = |name: &str, release: &Arc<str>| {
            let (acquire, release, url, name) = (
                acquire.clone(),
                release.clone(),
                self.url.clone(),
                name.to_owned(),
            );
            async move {
                Ok::<_, crate::harness::BoxError>(PgRaw {
                    conn: Conn::Own(PgConnection::connect(&url).await?),
                    acquire,
                    release,
                    name,
                    owner: FLOOR_OWNER.to_owned(),
                    token: None,
                })
            }
        };
        Ok(Floor {
            select1: Box::new(Select1(PgConnection::connect(&self.url).await?)),
            skip: Box::new(RawSkip(raw(HELD, &release).await?)),
            cycle: Box::new(RawCycle(raw(FLOOR_CYCLE, &release).await?)),
            extra_cycles: Vec::new(),
        })
    }

    fn pool_raw(&self, provider: &PgLockProvider, sql: &Captured) -> Result<PoolRaw> {
        let raw = |name: &str| -> Result<PgRaw> {
            Ok(PgRaw {
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
        let mut races = vec![RawRace::Statements];
        if self.java.is_some() {
            races.extend([RawRace::Java, RawRace::JavaTransactions]);
        }
        races
    }

    async fn raw_racers(
        &self,
        race: RawRace,
        table: &str,
        name: &str,
        sql: &Captured,
        n: usize,
    ) -> Result<Vec<Box<dyn Racer>>> {
        let acquire = only(&sql.acquire_won, "acquire")?;
        let release = only(&sql.release, "release")?;
        let mut racers: Vec<Box<dyn Racer>> = Vec::with_capacity(n);
        for i in 0..n {
            let conn = PgConnection::connect(&self.url).await?;
            let owner = format!("bench-raw-racer-{i}");
            racers.push(match race {
                RawRace::Statements => Box::new(PgRaw {
                    conn: Conn::Own(conn),
                    acquire: acquire.clone(),
                    release: release.clone(),
                    name: name.to_owned(),
                    owner,
                    token: None,
                }),
                RawRace::Java | RawRace::JavaTransactions => {
                    let mut racer = self.java_racer(conn, name, owner, table)?;
                    racer.transactions = race == RawRace::JavaTransactions;
                    Box::new(racer)
                }
            });
        }
        Ok(racers)
    }
}

impl Pg {
    fn java_racer(
        &self,
        conn: PgConnection,
        name: &str,
        owner: String,
        table: &str,
    ) -> Result<Java> {
        let java = self.java.as_ref().ok_or("no Java statements")?;
        let prepare = |s: &Statement| {
            let s = s.with_table(table);
            (Arc::<str>::from(s.sql), s.params)
        };
        Ok(Java {
            conn,
            update: prepare(java.get("UPDATE")?),
            unlock: prepare(java.get("UNLOCK")?),
            name: name.to_owned(),
            owner,
            transactions: false,
        })
    }
}

struct Select1(PgConnection);

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
struct PgRaw {
    conn: Conn<Postgres>,
    acquire: Arc<str>,
    release: Arc<str>,
    name: String,
    owner: String,
    token: Option<i64>,
}

impl PgRaw {
    async fn try_acquire(&mut self) -> Result<Attempt> {
        let row = sqlx::query(AssertSqlSafe(self.acquire.clone()))
            .bind(interval(AT_MOST))
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
            .bind(interval(Duration::ZERO))
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
impl Racer for PgRaw {
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

/// Java ShedLock's steady-state sequence: `UPDATE … WHERE lock_until <= now` to acquire (its
/// first call per name, an `INSERT … ON CONFLICT`, happens once per process and is left out),
/// `UNLOCK` to release; each statement in autocommit on the racer's connection, or in a
/// transaction of its own as `JdbcTemplateLockProvider` runs it.
struct Java {
    conn: PgConnection,
    update: (Arc<str>, Vec<String>),
    unlock: (Arc<str>, Vec<String>),
    name: String,
    owner: String,
    /// Each statement in a transaction of its own (`BEGIN`, statement, `COMMIT`).
    transactions: bool,
}

impl Java {
    fn bind<'q>(
        &self,
        (sql, params): &(Arc<str>, Vec<String>),
    ) -> Result<Query<'q, Postgres, PgArguments>> {
        let mut query = sqlx::query(AssertSqlSafe(sql.clone()));
        for param in params {
            query = match param.as_str() {
                "name" => query.bind(self.name.clone()),
                "lockedBy" => query.bind(self.owner.clone()),
                "lockAtMostForInterval" => query.bind(AT_MOST.as_secs_f64()),
                "lockAtLeastForInterval" => query.bind(0.0_f64),
                other => return Err(format!("unknown Java parameter {other}").into()),
            };
        }
        Ok(query)
    }
}

impl Java {
    /// Runs one statement, in a transaction of its own if so configured; rows affected.
    async fn run(&mut self, update: bool) -> Result<u64> {
        let query = self.bind(if update { &self.update } else { &self.unlock })?;
        if !self.transactions {
            return Ok(query.execute(&mut self.conn).await?.rows_affected());
        }
        let mut tx = self.conn.begin().await?;
        let rows = query.execute(&mut *tx).await?.rows_affected();
        tx.commit().await?;
        Ok(rows)
    }
}

#[async_trait]
impl Racer for Java {
    async fn acquire(&mut self) -> Result<Attempt> {
        Ok(if self.run(true).await? == 1 {
            Attempt::Won(None)
        } else {
            Attempt::Held
        })
    }

    async fn release(&mut self) -> Result<()> {
        self.run(false).await?;
        Ok(())
    }

    async fn close(self: Box<Self>) {
        let _ = self.conn.close().await;
    }
}
