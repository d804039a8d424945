//! The SQL databases, written once over sqlx's database type: the provider as the README sets it
//! up, the raw floor on one connection each, the provider's statements on the provider's pool,
//! raw racers and Java ShedLock's sequence. What differs between databases is [`SqlDb`], one
//! short implementation in each database's file (`pg.rs`, `mysql.rs`, `sqlite.rs`): how it
//! binds a duration, in which order its acquire takes its parameters, how it reads back a won
//! row where it has no `RETURNING`, its session setting and its Java statements.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use shedlock_bench::java::{Placeholder, Section, Statement};
use shedlock_core::admin::LockAdmin;
use shedlock_core::jobs::HistoryPolicy;
use shedlock_core::provider::LockProvider;
use shedlock_sqlx::sqlx::pool::PoolOptions;
use shedlock_sqlx::sqlx::{Connection as _, Database, Pool};

use crate::harness::{
    AT_MOST, Attempt, BoxError, CloseFuture, Conn, FLOOR_CYCLE, FLOOR_OWNER, Gauge, HELD, Op,
    POOL_CYCLE, Racer, RawCycle, RawSkip, Result,
};
use crate::stores::WalProbe;
use crate::suite::{Captured, Floor, PoolRaw, RawRace};

/// A boxed future of the glue below (written by [`sql_glue!`], outside `async_trait`).
pub(crate) type Fut<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

/// A bound parameter.
#[derive(Debug, Clone)]
pub(crate) enum Arg<S> {
    Text(String),
    Int(i64),
    Float(f64),
    /// A duration as the database's statements take it ([`SqlDb::span`]).
    Span(S),
}

/// One database: its provider and driver glue ([`sql_glue!`]) and its quirks.
pub(crate) trait SqlDb: Database + Sized {
    /// `postgres`, `mariadb`, `sqlite`.
    const DB: &'static str;
    /// How it quotes identifiers.
    const QUOTE: char;
    /// A statement run on every raw connection, as the provider's pool runs it on its own.
    const SESSION: Option<&'static str> = None;
    /// Java ShedLock's section for this database and its placeholder style, if it has one.
    const JAVA: Option<(&'static str, Placeholder)> = None;
    /// Whether Java's sequence also runs in a transaction per statement (as
    /// `JdbcTemplateLockProvider` does; worth it where a commit is a separate cost).
    const JAVA_TRANSACTIONS: bool = false;

    /// The public provider type.
    type Provider: LockProvider + LockAdmin + Clone;
    /// A duration as the statements take it.
    type Span: Send + Sync + Clone + 'static;

    /// A duration as the provider binds it.
    fn span(d: Duration) -> Self::Span;

    /// The acquire statement's parameters, in the provider's order (every other statement takes
    /// the duration, the name, the owner, then the token).
    fn acquire_args(name: &str, owner: &str) -> Vec<Arg<Self::Span>> {
        vec![
            Arg::Span(Self::span(AT_MOST)),
            Arg::Text(name.to_owned()),
            Arg::Text(owner.to_owned()),
        ]
    }

    /// The token a won conditional update reports where the database has no `RETURNING`
    /// (MySQL's `LAST_INSERT_ID`; 0: the lock is held).
    fn reported_token(result: &Self::QueryResult) -> u64 {
        let _ = result;
        0
    }

    /// The database's own advisory lock on `name`, as a racer on `conn` (the contention peer:
    /// no row, no durable write), where it has one.
    fn advisory_racer(conn: Self::Connection, name: &str) -> Option<Box<dyn Racer>> {
        let _ = (conn, name);
        None
    }

    /// Whether [`advisory_racer`](Self::advisory_racer) gives a racer.
    const ADVISORY: bool = false;

    /// A reader of the write-ahead log position on `url`, where the database has one to read.
    fn wal_probe(url: String) -> Fut<'static, Option<Box<dyn WalProbe>>> {
        let _ = url;
        Box::pin(async { Ok(None) })
    }

    // ---- glue, written by `sql_glue!` ----

    fn pool_options() -> PoolOptions<Self>;
    fn build(pool: Pool<Self>, table: &str) -> Result<Self::Provider>;
    /// The provider with connections of its own to `url` (`from_url(url)`, as the README sets
    /// it up), at most `max` of them (the provider's default without).
    fn from_url<'a>(url: &'a str, table: &'a str, max: Option<u32>) -> Fut<'a, Self::Provider>;
    /// The same with run history on (`from_url(url).history(policy)`).
    fn with_history<'a>(
        url: &'a str,
        table: &'a str,
        policy: HistoryPolicy,
    ) -> Fut<'a, Self::Provider>;
    /// The pool a provider runs on, if it was given one.
    fn pool(provider: &Self::Provider) -> Option<&Pool<Self>>;
    /// Open and idle connections of the provider.
    fn stats(provider: &Self::Provider) -> (u32, usize);
    fn create_table(provider: &Self::Provider) -> Fut<'_, ()>;
    fn fetch<'a>(
        conn: &'a mut Self::Connection,
        sql: &'a Arc<str>,
        args: Vec<Arg<Self::Span>>,
    ) -> Fut<'a, Option<Self::Row>>;
    /// Runs a statement (in a transaction of its own if `transaction`); rows affected.
    fn execute<'a>(
        conn: &'a mut Self::Connection,
        sql: &'a Arc<str>,
        args: Vec<Arg<Self::Span>>,
        transaction: bool,
    ) -> Fut<'a, Self::QueryResult>;
    fn rows_affected(result: &Self::QueryResult) -> u64;
    /// The third column of an acquire's row: the token.
    fn token(row: &Self::Row) -> Result<Option<i64>>;
    fn select1(conn: &mut Self::Connection) -> Fut<'_, i32>;
    fn raw_sql(conn: &mut Self::Connection, sql: String) -> Fut<'_, ()>;
}

/// A query of `sql` with `args` bound (inside [`sql_glue!`], where the database type is known).
macro_rules! bound {
    ($sql:expr, $args:expr) => {{
        let mut query =
            ::shedlock_sqlx::sqlx::query(::shedlock_sqlx::sqlx::AssertSqlSafe($sql.clone()));
        for arg in $args {
            query = match arg {
                $crate::sql::Arg::Text(v) => query.bind(v),
                $crate::sql::Arg::Int(v) => query.bind(v),
                $crate::sql::Arg::Float(v) => query.bind(v),
                $crate::sql::Arg::Span(v) => query.bind(v),
            };
        }
        query
    }};
}

pub(crate) use bound;

/// The provider and driver glue of one database: what sqlx only offers per driver type.
macro_rules! sql_glue {
    ($provider:ty) => {
        fn pool_options() -> ::shedlock_sqlx::sqlx::pool::PoolOptions<Self> {
            <$provider>::pool_options()
        }

        fn build(
            pool: ::shedlock_sqlx::sqlx::Pool<Self>,
            table: &str,
        ) -> $crate::harness::Result<$provider> {
            Ok(<$provider>::builder(pool).table(table).build()?)
        }

        fn from_url<'a>(
            url: &'a str,
            table: &'a str,
            max: Option<u32>,
        ) -> $crate::sql::Fut<'a, $provider> {
            Box::pin(async move {
                let mut builder = <$provider>::from_url(url).table(table);
                if let Some(max) = max {
                    builder = builder.max_connections(max);
                }
                Ok(builder.connect().await?)
            })
        }

        fn with_history<'a>(
            url: &'a str,
            table: &'a str,
            policy: ::shedlock_core::jobs::HistoryPolicy,
        ) -> $crate::sql::Fut<'a, $provider> {
            Box::pin(async move {
                Ok(<$provider>::from_url(url)
                    .table(table)
                    .history(policy)
                    .connect()
                    .await?)
            })
        }

        fn pool(provider: &$provider) -> Option<&::shedlock_sqlx::sqlx::Pool<Self>> {
            provider.pool()
        }

        fn stats(provider: &$provider) -> (u32, usize) {
            let stats = provider.connection_stats();
            (
                stats.open,
                usize::try_from(stats.idle).unwrap_or(usize::MAX),
            )
        }

        fn create_table(provider: &$provider) -> $crate::sql::Fut<'_, ()> {
            Box::pin(async move { Ok(provider.create_table_if_not_exists().await?) })
        }

        fn fetch<'a>(
            conn: &'a mut Self::Connection,
            sql: &'a ::std::sync::Arc<str>,
            args: Vec<$crate::sql::Arg<Self::Span>>,
        ) -> $crate::sql::Fut<'a, Option<Self::Row>> {
            Box::pin(async move {
                let query = $crate::sql::bound!(sql, args);
                Ok(query.fetch_optional(&mut *conn).await?)
            })
        }

        fn execute<'a>(
            conn: &'a mut Self::Connection,
            sql: &'a ::std::sync::Arc<str>,
            args: Vec<$crate::sql::Arg<Self::Span>>,
            transaction: bool,
        ) -> $crate::sql::Fut<'a, Self::QueryResult> {
            use ::shedlock_sqlx::sqlx::Connection as _;
            Box::pin(async move {
                let query = $crate::sql::bound!(sql, args);
                if !transaction {
                    return Ok(query.execute(&mut *conn).await?);
                }
                let mut tx = conn.begin().await?;
                let done = query.execute(&mut *tx).await?;
                tx.commit().await?;
                Ok(done)
            })
        }

        fn rows_affected(result: &Self::QueryResult) -> u64 {
            result.rows_affected()
        }

        fn token(row: &Self::Row) -> $crate::harness::Result<Option<i64>> {
            use ::shedlock_sqlx::sqlx::Row as _;
            Ok(row.try_get(2)?)
        }

        fn select1(conn: &mut Self::Connection) -> $crate::sql::Fut<'_, i32> {
            Box::pin(async move {
                Ok(::shedlock_sqlx::sqlx::query_scalar("SELECT 1")
                    .fetch_one(&mut *conn)
                    .await?)
            })
        }

        fn raw_sql(conn: &mut Self::Connection, sql: String) -> $crate::sql::Fut<'_, ()> {
            Box::pin(async move {
                ::shedlock_sqlx::sqlx::raw_sql(::shedlock_sqlx::sqlx::AssertSqlSafe(sql))
                    .execute(&mut *conn)
                    .await?;
                Ok(())
            })
        }
    };
}

pub(crate) use sql_glue;

/// The provider's statements as captured: the acquire (also the skip), the read-back of a won
/// row where the database has no `RETURNING`, the release.
#[derive(Debug, Clone)]
pub(crate) struct RawSql {
    pub(crate) acquire: Arc<str>,
    pub(crate) read_back: Option<Arc<str>>,
    pub(crate) release: Arc<str>,
}

impl RawSql {
    fn from(sql: &Captured) -> Result<Self> {
        let (acquire, read_back) = match &sql.acquire_won[..] {
            [acquire] => (acquire, None),
            [acquire, read_back] => (acquire, Some(read_back.as_str().into())),
            _ => return Err(format!("unexpected acquire statements: {sql:?}").into()),
        };
        match (&sql.acquire_held[..], &sql.release[..]) {
            ([held], [release]) if held == acquire => Ok(Self {
                acquire: acquire.as_str().into(),
                read_back,
                release: release.as_str().into(),
            }),
            _ => Err(format!(
                "expected the skip to run the acquire's first statement alone and one release; \
                 captured {sql:?}"
            )
            .into()),
        }
    }
}

/// A future closing the provider's pool.
/// A future closing the provider's pool, if it was given one (a provider with connections of
/// its own closes them when its last clone is dropped).
pub(crate) fn closer<D: SqlDb>(provider: &D::Provider) -> CloseFuture {
    let pool = D::pool(provider).cloned();
    Box::pin(async move {
        if let Some(pool) = pool {
            pool.close().await;
        }
    })
}

/// One SQL database of the run.
pub(crate) struct Sql<D: SqlDb> {
    pub(crate) url: String,
    /// Java ShedLock's statements, if the interop file was found.
    java: Option<Section>,
    /// Keeps a temporary database (SQLite's file) alive.
    _dir: Option<tempfile::TempDir>,
    _db: std::marker::PhantomData<D>,
}

impl<D: SqlDb> Sql<D> {
    pub(crate) fn new(url: String, dir: Option<tempfile::TempDir>) -> Self {
        let java =
            D::JAVA.and_then(|(header, placeholder)| crate::java_section(header, placeholder));
        Self {
            url,
            java,
            _dir: dir,
            _db: std::marker::PhantomData,
        }
    }

    /// Java ShedLock's statements, if the interop file was found.
    pub(crate) fn java(&self) -> Option<&Section> {
        self.java.as_ref()
    }

    async fn connect(&self) -> Result<D::Connection> {
        let mut conn = D::Connection::connect(&self.url).await?;
        if let Some(session) = D::SESSION {
            D::raw_sql(&mut conn, session.to_owned()).await?;
        }
        Ok(conn)
    }

    /// The provider as the README sets it up: `XLockProvider::from_url(url)`, connections of
    /// its own (no sqlx pool, no return ping), on `table`.
    pub(crate) async fn provider(&self, table: &str) -> Result<D::Provider> {
        D::from_url(&self.url, table, None).await
    }

    /// The provider as [`provider`](Self::provider) does, on another URL (a proxy's).
    pub(crate) async fn provider_at(&self, url: &str, table: &str) -> Result<D::Provider> {
        D::from_url(url, table, None).await
    }

    /// The provider on a default sqlx pool (`XPool::connect(url)`: it pings on checkout).
    pub(crate) async fn provider_on_default_pool(&self, table: &str) -> Result<D::Provider> {
        D::build(Pool::<D>::connect(&self.url).await?, table)
    }

    /// The provider with at most `size` connections of its own, and a gauge of them.
    pub(crate) async fn provider_on_pool_of(
        &self,
        table: &str,
        size: u32,
    ) -> Result<(D::Provider, Gauge)> {
        let provider = D::from_url(&self.url, table, Some(size)).await?;
        let watched = provider.clone();
        let gauge: Gauge = Arc::new(move || D::stats(&watched));
        Ok((provider, gauge))
    }

    pub(crate) async fn create_table(&self, provider: &D::Provider) -> Result<()> {
        D::create_table(provider).await
    }

    /// The provider with run history on (see [`provider`](Self::provider)).
    pub(crate) async fn provider_with_history(
        &self,
        url: &str,
        table: &str,
        policy: HistoryPolicy,
    ) -> Result<D::Provider> {
        D::with_history(url, table, policy).await
    }

    /// Drops the lock table and the two tables `create_table_if_not_exists()` makes beside it
    /// (`<table>_jobs`, `<table>_history`).
    pub(crate) async fn drop_table(&self, table: &str) -> Result<()> {
        let mut conn = self.connect().await?;
        let q = D::QUOTE;
        for name in [
            format!("{table}_history"),
            format!("{table}_jobs"),
            table.to_owned(),
        ] {
            D::raw_sql(&mut conn, format!("DROP TABLE IF EXISTS {q}{name}{q}")).await?;
        }
        conn.close().await?;
        Ok(())
    }

    /// The raw floor, from the captured statements.
    pub(crate) async fn floor(&self, captured: &Captured) -> Result<Floor> {
        let sql = RawSql::from(captured)?;
        let skip = Raw::<D>::new(
            Conn::Own(self.connect().await?),
            &sql,
            HELD,
            FLOOR_OWNER.into(),
        );
        let cycle = Raw::<D>::new(
            Conn::Own(self.connect().await?),
            &sql,
            FLOOR_CYCLE,
            FLOOR_OWNER.into(),
        );
        let read = RawRead::<D> {
            conn: self.connect().await?,
            sql: captured
                .holder
                .first()
                .ok_or("no holder statement captured")?
                .as_str()
                .into(),
        };
        Ok(Floor {
            select1: Box::new(Select1::<D>(self.connect().await?)),
            skip: Box::new(RawSkip(skip)),
            read: Box::new(read),
            cycle: Box::new(RawCycle(cycle)),
            extra_cycles: Vec::new(),
        })
    }

    /// The provider's statements run raw, each on a connection checked out of a pool from
    /// `pool_options()` for it and given back after it (sqlx's pool, no provider code): what
    /// the provider cost on such a pool before it kept connections of its own.
    pub(crate) async fn pool_raw(&self, sql: &Captured) -> Result<PoolRaw> {
        let sql = RawSql::from(sql)?;
        let shared = D::pool_options().connect(&self.url).await?;
        let pool = || Conn::Pool(shared.clone());
        Ok(PoolRaw {
            skip: Box::new(RawSkip(Raw::<D>::new(
                pool(),
                &sql,
                HELD,
                FLOOR_OWNER.into(),
            ))),
            cycle: Box::new(RawCycle(Raw::<D>::new(
                pool(),
                &sql,
                POOL_CYCLE,
                FLOOR_OWNER.into(),
            ))),
        })
    }

    /// The raw races this database runs besides the provider's.
    pub(crate) fn raw_races(&self) -> Vec<RawRace> {
        let mut races = vec![RawRace::Statements];
        if D::ADVISORY {
            races.push(RawRace::Advisory);
        }
        if self.java.is_some() {
            races.push(RawRace::Java);
            if D::JAVA_TRANSACTIONS {
                races.push(RawRace::JavaTransactions);
            }
        }
        races
    }

    /// `n` raw racers for `race` on lock `name`.
    pub(crate) async fn raw_racers(
        &self,
        race: RawRace,
        (table, name): (&str, &str),
        sql: &Captured,
        n: usize,
    ) -> Result<Vec<Box<dyn Racer>>> {
        let sql = RawSql::from(sql)?;
        let mut racers: Vec<Box<dyn Racer>> = Vec::with_capacity(n);
        for i in 0..n {
            let conn = self.connect().await?;
            let owner = format!("bench-raw-racer-{i}");
            racers.push(match race {
                RawRace::Statements => Box::new(Raw::<D>::new(Conn::Own(conn), &sql, name, owner)),
                RawRace::Advisory => {
                    D::advisory_racer(conn, name).ok_or("no advisory lock on this database")?
                }
                RawRace::Java | RawRace::JavaTransactions => {
                    let java = self.java.as_ref().ok_or("no Java statements")?;
                    let prepare = |s: &Statement| {
                        let s = s.with_table(table);
                        (Arc::<str>::from(s.sql), s.params)
                    };
                    Box::new(Java::<D> {
                        conn,
                        update: prepare(java.get("UPDATE")?),
                        unlock: prepare(java.get("UNLOCK")?),
                        name: name.to_owned(),
                        owner,
                        transactions: race == RawRace::JavaTransactions,
                    })
                }
            });
        }
        Ok(racers)
    }
}

struct Select1<D: SqlDb>(D::Connection);

/// The provider's `holder` statement, raw, on the row of [`HELD`]: a read by the primary key.
struct RawRead<D: SqlDb> {
    conn: D::Connection,
    sql: Arc<str>,
}

#[async_trait]
impl<D: SqlDb> Op for RawRead<D> {
    async fn run(&mut self) -> Result<()> {
        let args = vec![Arg::Text(HELD.to_owned())];
        match D::fetch(&mut self.conn, &self.sql, args).await? {
            Some(_) => Ok(()),
            None => Err("the held lock's row was not found".into()),
        }
    }

    async fn close(self: Box<Self>) {
        let _ = self.conn.close().await;
    }
}

#[async_trait]
impl<D: SqlDb> Op for Select1<D> {
    async fn run(&mut self) -> Result<()> {
        if D::select1(&mut self.0).await? == 1 {
            Ok(())
        } else {
            Err("SELECT 1 returned another value".into())
        }
    }

    async fn close(self: Box<Self>) {
        let _ = self.0.close().await;
    }
}

/// The provider's statements, bound as the provider binds them (all of one call on one
/// connection, as the provider sends them).
pub(crate) struct Raw<D: SqlDb> {
    conn: Conn<D>,
    sql: RawSql,
    name: String,
    owner: String,
    token: Option<i64>,
}

impl<D: SqlDb> Raw<D> {
    fn new(conn: Conn<D>, sql: &RawSql, name: &str, owner: String) -> Self {
        Self {
            conn,
            sql: sql.clone(),
            name: name.to_owned(),
            owner,
            token: None,
        }
    }
}

#[async_trait]
impl<D: SqlDb> Racer for Raw<D> {
    async fn acquire(&mut self) -> Result<Attempt> {
        let mut conn = self.conn.get().await?;
        let args = D::acquire_args(&self.name, &self.owner);
        let token = match &self.sql.read_back {
            // One statement decides and returns the won row, its token third.
            None => match D::fetch(&mut conn, &self.sql.acquire, args).await? {
                None => return Ok(Attempt::Held),
                Some(row) => D::token(&row)?.ok_or("the table has no token column")?,
            },
            // The conditional update, then the read-back of the won row.
            Some(read_back) => {
                let updated = D::execute(&mut conn, &self.sql.acquire, args, false).await?;
                if D::rows_affected(&updated) == 0 {
                    return Err("the lock row is missing".into());
                }
                let token = match D::reported_token(&updated) {
                    0 => return Ok(Attempt::Held),
                    id => i64::try_from(id)?,
                };
                let args = vec![Arg::Text(self.name.clone()), Arg::Int(token)];
                if D::fetch(&mut conn, read_back, args).await?.is_none() {
                    return Ok(Attempt::Held);
                }
                token
            }
        };
        self.token = Some(token);
        Ok(Attempt::Won(Some(token)))
    }

    async fn release(&mut self) -> Result<()> {
        let token = self.token.take().ok_or("release without a lock")?;
        let args = vec![
            Arg::Span(D::span(Duration::ZERO)),
            Arg::Text(self.name.clone()),
            Arg::Text(self.owner.clone()),
            Arg::Int(token),
        ];
        let mut conn = self.conn.get().await?;
        let done = D::execute(&mut conn, &self.sql.release, args, false).await?;
        if D::rows_affected(&done) == 1 {
            Ok(())
        } else {
            Err("the release matched no row".into())
        }
    }

    async fn close(self: Box<Self>) {
        self.conn.close().await;
    }
}

/// Microseconds of `d` in whole milliseconds, as the MySQL provider and Java bind durations.
pub(crate) fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 1_000) * 1_000
}

/// Java ShedLock's steady-state sequence: `UPDATE … WHERE lock_until <= now` to acquire (its
/// first call per name, an insert, happens once per process and is left out), `UNLOCK` to
/// release; each statement in autocommit on the racer's connection, or in a transaction of its
/// own as `JdbcTemplateLockProvider` runs it.
struct Java<D: SqlDb> {
    conn: D::Connection,
    update: (Arc<str>, Vec<String>),
    unlock: (Arc<str>, Vec<String>),
    name: String,
    owner: String,
    transactions: bool,
}

impl<D: SqlDb> Java<D> {
    fn args(&self, params: &[String]) -> Result<Vec<Arg<D::Span>>> {
        params
            .iter()
            .map(|param| {
                Ok(match param.as_str() {
                    "name" => Arg::Text(self.name.clone()),
                    "lockedBy" => Arg::Text(self.owner.clone()),
                    "lockAtMostForInterval" => Arg::Float(AT_MOST.as_secs_f64()),
                    "lockAtLeastForInterval" => Arg::Float(0.0),
                    "lockAtMostForMicros" => Arg::Int(micros(AT_MOST)),
                    "lockAtLeastForMicros" => Arg::Int(0),
                    other => return Err(format!("unknown Java parameter {other}").into()),
                })
            })
            .collect::<Result<_, BoxError>>()
    }

    /// Runs the update (or the unlock); rows affected.
    async fn run(&mut self, update: bool) -> Result<u64> {
        let (sql, params) = if update { &self.update } else { &self.unlock };
        let (sql, args) = (sql.clone(), self.args(params)?);
        let done = D::execute(&mut self.conn, &sql, args, self.transactions).await?;
        Ok(D::rows_affected(&done))
    }
}

#[async_trait]
impl<D: SqlDb> Racer for Java<D> {
    async fn acquire(&mut self) -> Result<Attempt> {
        Ok(if self.run(true).await? == 1 {
            Attempt::Won(None)
        } else {
            Attempt::Held
        })
    }

    async fn release(&mut self) -> Result<()> {
        self.run(false).await.map(drop)
    }

    async fn close(self: Box<Self>) {
        let _ = self.conn.close().await;
    }
}
