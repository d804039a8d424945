//! MariaDB (or MySQL): the provider, the raw floor on one connection each, raw racers, and
//! Java ShedLock's `MARIA_DB dbTime=true` sequence. Durability is the server-wide
//! `innodb_flush_log_at_trx_commit`, so there is no per-statement release variant.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use shedlock_bench::java::{Section, Statement};
use shedlock_sqlx::MySqlLockProvider;
use shedlock_sqlx::sqlx::mysql::{MySql as MySqlDb, MySqlArguments, MySqlConnection, MySqlPool};
use shedlock_sqlx::sqlx::query::Query;
use shedlock_sqlx::sqlx::{self, AssertSqlSafe, Connection as _, Executor as _};

use crate::harness::{
    AT_MOST, Attempt, CloseFuture, Conn, FLOOR_CYCLE, FLOOR_OWNER, Gauge, HELD, Op, POOL_CYCLE,
    Racer, RawCycle, RawSkip, Result,
};
use crate::suite::{Backend, Captured, Floor, PoolRaw, RawRace};

pub(crate) struct MySql {
    pub(crate) url: String,
    pub(crate) java: Option<Section>,
}

/// The provider's statements: the conditional update, the read-back of a won row, the release.
#[derive(Clone)]
struct Statements {
    update: Arc<str>,
    read_back: Arc<str>,
    release: Arc<str>,
}

impl Statements {
    fn from(sql: &Captured) -> Result<Self> {
        match (
            &sql.acquire_won[..],
            &sql.acquire_held[..],
            &sql.release[..],
        ) {
            ([update, read_back], [held], [release]) if held == update => Ok(Self {
                update: update.as_str().into(),
                read_back: read_back.as_str().into(),
                release: release.as_str().into(),
            }),
            _ => Err(format!(
                "expected update + read-back to acquire, the update alone to skip, one release; \
                 captured {sql:?}"
            )
            .into()),
        }
    }
}

/// Microseconds of `d` in whole milliseconds, as the provider binds durations.
fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 1_000) * 1_000
}

async fn connect(url: &str) -> Result<MySqlConnection> {
    let mut conn = MySqlConnection::connect(url).await?;
    // The provider's pool sets this on its sessions; its statements pin UTC anyway.
    conn.execute("SET time_zone = '+00:00'").await?;
    Ok(conn)
}

#[async_trait]
impl Backend for MySql {
    type Provider = MySqlLockProvider;

    fn db(&self) -> &'static str {
        "mariadb"
    }

    async fn provider(&self, table: &str) -> Result<MySqlLockProvider> {
        // What `MySqlLockProvider::connect(url)` does, on the benchmark's own table.
        let pool = MySqlLockProvider::pool_options().connect(&self.url).await?;
        Ok(MySqlLockProvider::builder(pool).table(table).build()?)
    }

    async fn provider_on_default_pool(&self, table: &str) -> Result<MySqlLockProvider> {
        let pool = MySqlPool::connect(&self.url).await?;
        Ok(MySqlLockProvider::builder(pool).table(table).build()?)
    }

    async fn provider_on_pool_of(
        &self,
        table: &str,
        size: u32,
    ) -> Result<(MySqlLockProvider, Gauge)> {
        let pool = MySqlLockProvider::pool_options()
            .max_connections(size)
            .connect(&self.url)
            .await?;
        let gauge_pool = pool.clone();
        let gauge: Gauge = Arc::new(move || (gauge_pool.size(), gauge_pool.num_idle()));
        Ok((
            MySqlLockProvider::builder(pool).table(table).build()?,
            gauge,
        ))
    }

    fn closer(&self, provider: &MySqlLockProvider) -> CloseFuture {
        let pool = provider.pool().clone();
        Box::pin(async move { pool.close().await })
    }

    async fn create_table(&self, provider: &MySqlLockProvider) -> Result<()> {
        Ok(provider.create_table_if_not_exists().await?)
    }

    async fn drop_table(&self, table: &str) -> Result<()> {
        let mut conn = MySqlConnection::connect(&self.url).await?;
        sqlx::raw_sql(AssertSqlSafe(format!("DROP TABLE IF EXISTS `{table}`")))
            .execute(&mut conn)
            .await?;
        conn.close().await?;
        Ok(())
    }

    async fn floor(&self, _table: &str, sql: &Captured) -> Result<Floor> {
        let statements = Statements::from(sql)?;
        let raw = |name: &str| {
            let (statements, url, name) = (statements.clone(), self.url.clone(), name.to_owned());
            async move {
                Ok::<_, crate::harness::BoxError>(MyRaw {
                    conn: Conn::Own(connect(&url).await?),
                    sql: statements,
                    name,
                    owner: FLOOR_OWNER.to_owned(),
                    token: None,
                })
            }
        };
        Ok(Floor {
            select1: Box::new(Select1(connect(&self.url).await?)),
            skip: Box::new(RawSkip(raw(HELD).await?)),
            cycle: Box::new(RawCycle(raw(FLOOR_CYCLE).await?)),
            extra_cycles: Vec::new(),
        })
    }

    fn pool_raw(&self, provider: &MySqlLockProvider, sql: &Captured) -> Result<PoolRaw> {
        let raw = |name: &str| -> Result<MyRaw> {
            Ok(MyRaw {
                conn: Conn::Pool(provider.pool().clone()),
                sql: Statements::from(sql)?,
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
            races.push(RawRace::Java);
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
        let statements = Statements::from(sql)?;
        let mut racers: Vec<Box<dyn Racer>> = Vec::with_capacity(n);
        for i in 0..n {
            let conn = connect(&self.url).await?;
            let owner = format!("bench-raw-racer-{i}");
            racers.push(match race {
                RawRace::Java => {
                    let java = self.java.as_ref().ok_or("no Java statements")?;
                    let prepare = |s: &Statement| {
                        let s = s.with_table(table);
                        (Arc::<str>::from(s.sql), s.params)
                    };
                    Box::new(Java {
                        conn,
                        update: prepare(java.get("UPDATE")?),
                        unlock: prepare(java.get("UNLOCK")?),
                        name: name.to_owned(),
                        owner,
                    })
                }
                _ => Box::new(MyRaw {
                    conn: Conn::Own(conn),
                    sql: statements.clone(),
                    name: name.to_owned(),
                    owner,
                    token: None,
                }),
            });
        }
        Ok(racers)
    }
}

struct Select1(MySqlConnection);

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

/// The provider's statements, bound as the provider binds them (the acquire's update and
/// read-back on one connection, as the provider sends them).
struct MyRaw {
    conn: Conn<MySqlDb>,
    sql: Statements,
    name: String,
    owner: String,
    token: Option<i64>,
}

impl MyRaw {
    async fn try_acquire(&mut self) -> Result<Attempt> {
        let mut conn = self.conn.get().await?;
        let updated = sqlx::query(AssertSqlSafe(self.sql.update.clone()))
            .bind(&self.owner)
            .bind(micros(AT_MOST))
            .bind(&self.name)
            .execute(&mut *conn)
            .await?;
        if updated.rows_affected() == 0 {
            return Err("the lock row is missing".into());
        }
        let token = match updated.last_insert_id() {
            0 => return Ok(Attempt::Held),
            id => i64::try_from(id)?,
        };
        let row = sqlx::query(AssertSqlSafe(self.sql.read_back.clone()))
            .bind(&self.name)
            .bind(token)
            .fetch_optional(&mut *conn)
            .await?;
        if row.is_none() {
            return Ok(Attempt::Held);
        }
        self.token = Some(token);
        Ok(Attempt::Won(Some(token)))
    }

    async fn do_release(&mut self) -> Result<()> {
        let token = self.token.take().ok_or("release without a lock")?;
        let done = sqlx::query(AssertSqlSafe(self.sql.release.clone()))
            .bind(micros(Duration::ZERO))
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
impl Racer for MyRaw {
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

/// Java ShedLock's steady-state sequence on MariaDB: `UPDATE … WHERE lock_until <=
/// UTC_TIMESTAMP(3)` to acquire, `UNLOCK` to release, in autocommit.
struct Java {
    conn: MySqlConnection,
    update: (Arc<str>, Vec<String>),
    unlock: (Arc<str>, Vec<String>),
    name: String,
    owner: String,
}

impl Java {
    fn bind<'q>(
        &self,
        (sql, params): &(Arc<str>, Vec<String>),
    ) -> Result<Query<'q, sqlx::MySql, MySqlArguments>> {
        let mut query = sqlx::query(AssertSqlSafe(sql.clone()));
        for param in params {
            query = match param.as_str() {
                "name" => query.bind(self.name.clone()),
                "lockedBy" => query.bind(self.owner.clone()),
                "lockAtMostForMicros" => query.bind(micros(AT_MOST)),
                "lockAtLeastForMicros" => query.bind(0_i64),
                other => return Err(format!("unknown Java parameter {other}").into()),
            };
        }
        Ok(query)
    }
}

#[async_trait]
impl Racer for Java {
    async fn acquire(&mut self) -> Result<Attempt> {
        let query = self.bind(&self.update)?;
        let done = query.execute(&mut self.conn).await?;
        Ok(if done.rows_affected() == 1 {
            Attempt::Won(None)
        } else {
            Attempt::Held
        })
    }

    async fn release(&mut self) -> Result<()> {
        let query = self.bind(&self.unlock)?;
        query.execute(&mut self.conn).await?;
        Ok(())
    }

    async fn close(self: Box<Self>) {
        let _ = self.conn.close().await;
    }
}
