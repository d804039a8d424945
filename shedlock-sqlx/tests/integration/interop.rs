//! A Java service using ShedLock (`usingDbTime()`) and our providers guard one job in one table
//! and exclude each other both ways.
//!
//! The Java side is played by the exact SQL Java ShedLock 7.9 sends (its `dbTime=true`
//! statements for `POSTGRES_SQL` and `MARIA_DB`, and the DDL from its README), loaded at test time
//! from `shedlock-sql.txt`: `$SHEDLOCK_INTEROP_SQL`, or `../shared/interop/shedlock-sql.txt`
//! next to the workspace. Named parameters are bound positionally in order of appearance, as
//! Spring's `NamedParameterJdbcTemplate` does. Java's lock sequence is ShedLock's: `INSERT`
//! (creates the row or, on Postgres, takes an expired one), else `UPDATE`; `EXTEND`; `UNLOCK`.
//! The racing tests fire Java's attempt and our acquire at the same moment, many times, on a
//! missing row and on an expired one: exactly one of them wins each round.

use crate::common;

use std::path::PathBuf;
use std::time::Duration;

use shedlock_core::provider::{LockProvider, LockRecord};
use shedlock_sqlx::sqlx;
use shedlock_sqlx::sqlx::mysql::{MySqlPool, MySqlPoolOptions};
use shedlock_sqlx::sqlx::postgres::{PgPool, PgPoolOptions};
use shedlock_sqlx::{MySqlLockProvider, PgLockProvider, testing};

const MIN: Duration = Duration::from_mins(1);

/// Where the statements are, and whether they are there.
fn interop_file() -> Option<String> {
    let path = std::env::var_os("SHEDLOCK_INTEROP_SQL").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/interop/shedlock-sql.txt"),
        PathBuf::from,
    );
    match std::fs::read_to_string(&path) {
        Ok(text) => Some(text),
        Err(e) => {
            assert!(
                !testing::db_required(),
                "cannot read Java ShedLock's statements from {}: {e} (set SHEDLOCK_INTEROP_SQL)",
                path.display()
            );
            eprintln!(
                "skipping the interop test: cannot read {}: {e}",
                path.display()
            );
            None
        }
    }
}

/// How a database writes positional parameters.
#[derive(Clone, Copy)]
enum Placeholder {
    Dollar,
    Question,
}

/// One Java statement: SQL with positional parameters, and the names bound to them in order.
#[derive(Debug, Clone)]
struct Statement {
    sql: String,
    params: Vec<String>,
}

impl Statement {
    fn parse(named: &str, table: &str, placeholder: Placeholder) -> Self {
        let named = named.replace("shedlock", table);
        let mut sql = String::with_capacity(named.len());
        let mut params = Vec::new();
        let mut chars = named.chars().peekable();
        let mut previous = ' ';
        while let Some(c) = chars.next() {
            let starts_param =
                c == ':' && previous != ':' && chars.peek().is_some_and(char::is_ascii_alphabetic);
            if starts_param {
                let mut name = String::new();
                while let Some(&n) = chars.peek().filter(|n| n.is_ascii_alphanumeric()) {
                    name.push(n);
                    chars.next();
                }
                params.push(name);
                match placeholder {
                    Placeholder::Dollar => {
                        sql.push('$');
                        sql.push_str(&params.len().to_string());
                    }
                    Placeholder::Question => sql.push('?'),
                }
                previous = 'x';
            } else {
                sql.push(c);
                previous = c;
            }
        }
        Self { sql, params }
    }
}

/// Java ShedLock's statements for one database, and its DDL.
#[derive(Debug, Clone)]
struct Java {
    insert: Statement,
    update: Statement,
    extend: Statement,
    unlock: Statement,
    ddl: String,
}

impl Java {
    fn load(text: &str, section: &str, ddl_key: &str, table: &str, p: Placeholder) -> Self {
        let header = format!("### {section} dbTime=true ");
        let mut lines = text
            .lines()
            .skip_while(|l| !l.starts_with(&header))
            .skip(1)
            .take_while(|l| !l.starts_with("###"));
        let mut statement = |key: &str| {
            let line = lines
                .find(|l| l.starts_with(&format!("{key}: ")))
                .unwrap_or_else(|| panic!("{key} of {section} missing from the interop file"));
            Statement::parse(&line[key.len() + 2..], table, p)
        };
        let (insert, update, extend, unlock) = (
            statement("INSERT"),
            statement("UPDATE"),
            statement("EXTEND"),
            statement("UNLOCK"),
        );
        let ddl = text
            .lines()
            .skip_while(|l| !l.starts_with("### DDL"))
            .find_map(|l| l.strip_prefix(&format!("{ddl_key}: ")))
            .unwrap_or_else(|| panic!("{ddl_key} DDL missing from the interop file"))
            .replace("shedlock", table);
        Self {
            insert,
            update,
            extend,
            unlock,
            ddl,
        }
    }
}

/// A parameter value of Java's statements.
enum Value {
    Text(String),
    Seconds(f64),
    Micros(i64),
}

/// What a Java service binds: the lock's name, its owner, and `at_most` / `at_least`.
fn value(param: &str, name: &str, owner: &str, at_most: Duration, at_least: Duration) -> Value {
    let micros = |d: Duration| i64::try_from(d.as_micros()).unwrap();
    match param {
        "name" => Value::Text(name.to_owned()),
        "lockedBy" => Value::Text(owner.to_owned()),
        "lockAtMostForInterval" => Value::Seconds(at_most.as_secs_f64()),
        "lockAtLeastForInterval" => Value::Seconds(at_least.as_secs_f64()),
        "lockAtMostForMicros" => Value::Micros(micros(at_most)),
        "lockAtLeastForMicros" => Value::Micros(micros(at_least)),
        other => panic!("unexpected parameter :{other}"),
    }
}

/// A database a Java service talks to.
trait JavaDb {
    /// Runs `statement` with Java's bindings; rows affected, or the database's error.
    async fn try_run(
        &self,
        statement: &Statement,
        bind: &dyn Fn(&str) -> Value,
    ) -> Result<u64, sqlx::Error>;

    /// Runs `statement` with Java's bindings; rows affected.
    async fn run(&self, statement: &Statement, bind: &dyn Fn(&str) -> Value) -> u64 {
        self.try_run(statement, bind).await.unwrap()
    }

    async fn run_sql(&self, sql: String);
}

/// `JavaDb` for a database's pool: Java's statements bound positionally.
macro_rules! java_db {
    ($($pool:ty),*) => {$(
        impl JavaDb for $pool {
            async fn try_run(
                &self,
                statement: &Statement,
                bind: &dyn Fn(&str) -> Value,
            ) -> Result<u64, sqlx::Error> {
                let mut query = sqlx::query(sqlx::AssertSqlSafe(statement.sql.clone()));
                for param in &statement.params {
                    query = match bind(param) {
                        Value::Text(s) => query.bind(s),
                        Value::Seconds(s) => query.bind(s),
                        Value::Micros(m) => query.bind(m),
                    };
                }
                Ok(query.execute(self).await?.rows_affected())
            }

            async fn run_sql(&self, sql: String) {
                sqlx::Executor::execute(self, sqlx::AssertSqlSafe(sql))
                    .await
                    .unwrap();
            }
        }
    )*};
}

java_db!(PgPool, MySqlPool);

/// Java ShedLock's names for one database: its statements' section, its DDL's key, its
/// placeholders, and SQL that expires the row of the name bound as `:name` (held until a
/// minute ago by someone else).
struct JavaDialect {
    section: &'static str,
    ddl_key: &'static str,
    placeholder: Placeholder,
    expire: &'static str,
}

const POSTGRES: JavaDialect = JavaDialect {
    section: "POSTGRES_SQL",
    ddl_key: "POSTGRES",
    placeholder: Placeholder::Dollar,
    expire: "UPDATE shedlock SET lock_until = timezone('utc', CURRENT_TIMESTAMP) \
             - interval '1 minute', locked_by = 'earlier' WHERE name = :name",
};

const MARIADB: JavaDialect = JavaDialect {
    section: "MARIA_DB",
    ddl_key: "MYSQL_MARIADB",
    placeholder: Placeholder::Question,
    expire: "UPDATE shedlock SET lock_until = UTC_TIMESTAMP(3) - INTERVAL 1 MINUTE, \
             locked_by = 'earlier' WHERE name = :name",
};

impl JavaDialect {
    /// Java's statements and DDL on `table`.
    fn load(&self, text: &str, table: &str) -> Java {
        Java::load(text, self.section, self.ddl_key, table, self.placeholder)
    }

    /// The statement that expires a row of `table`.
    fn expire(&self, table: &str) -> Statement {
        Statement::parse(self.expire, table, self.placeholder)
    }
}

/// A Java service: ShedLock's statements on its own connection pool (sessions in UTC, as
/// ShedLock's docs require for MySQL/MariaDB).
struct JavaService<'a, D> {
    db: &'a D,
    sql: &'a Java,
    owner: &'static str,
}

impl<D: JavaDb> JavaService<'_, D> {
    async fn lock(&self, name: &str, at_most: Duration) -> bool {
        let bind = |p: &str| value(p, name, self.owner, at_most, Duration::ZERO);
        self.db.run(&self.sql.insert, &bind).await > 0
            || self.db.run(&self.sql.update, &bind).await > 0
    }

    /// Java's attempt on a row it has not seen yet, as `StorageBasedLockProvider` makes it: its
    /// INSERT, then its UPDATE if the INSERT did not win. A duplicate-key error is its normal
    /// way of not winning the INSERT (as Spring's `DuplicateKeyException`); any other error
    /// fails the test.
    async fn lock_new(&self, name: &str, at_most: Duration) -> bool {
        let bind = |p: &str| value(p, name, self.owner, at_most, Duration::ZERO);
        match self.db.try_run(&self.sql.insert, &bind).await {
            Ok(rows) if rows > 0 => return true,
            Ok(_) => {}
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {}
            Err(e) => panic!("Java's INSERT failed: {e}"),
        }
        self.lock_known(name, at_most).await
    }

    /// Java's attempt on a row it knows exists (its registry of created rows): its UPDATE only.
    async fn lock_known(&self, name: &str, at_most: Duration) -> bool {
        let bind = |p: &str| value(p, name, self.owner, at_most, Duration::ZERO);
        match self.db.try_run(&self.sql.update, &bind).await {
            Ok(rows) => rows > 0,
            Err(e) => panic!("Java's UPDATE failed: {e}"),
        }
    }

    async fn extend(&self, name: &str, at_most: Duration) -> bool {
        let bind = |p: &str| value(p, name, self.owner, at_most, Duration::ZERO);
        self.db.run(&self.sql.extend, &bind).await > 0
    }

    async fn unlock(&self, name: &str, at_least: Duration) {
        let bind = |p: &str| value(p, name, self.owner, MIN, at_least);
        self.db.run(&self.sql.unlock, &bind).await;
    }
}

/// Java and our provider on one table, both ways.
async fn exclude_each_other<D: JavaDb>(java: &JavaService<'_, D>, rust: &impl LockProvider) {
    // Java first: it creates the row (INSERT), and we are refused until it unlocks.
    assert!(
        java.lock("job", MIN).await,
        "Java could not take a free lock"
    );
    assert!(rust.acquire("job", MIN, "rust").await.unwrap().is_none());
    let holder = rust.holder("job").await.unwrap().expect("Java holds it");
    assert_eq!(holder.owner(), java.owner);
    assert!(java.extend("job", MIN * 2).await);
    assert!(rust.acquire("job", MIN, "rust").await.unwrap().is_none());
    java.unlock("job", Duration::ZERO).await;
    let ours = rust
        .acquire("job", MIN, "rust")
        .await
        .unwrap()
        .expect("free after Java's unlock");

    // Ours: Java is refused, cannot extend it nor unlock it.
    assert!(!java.lock("job", MIN).await, "Java took a lock we hold");
    assert!(!java.extend("job", MIN).await, "Java extended our lock");
    java.unlock("job", Duration::ZERO).await; // matches no row (not Java's)
    assert!(!java.lock("job", MIN).await, "Java's unlock freed our lock");
    assert!(rust.release(&ours, Duration::ZERO).await.unwrap());
    assert!(
        java.lock("job", MIN).await,
        "Java could not take the lock we released"
    );

    // Java's at_least holds for us too.
    java.unlock("job", Duration::from_millis(600)).await;
    assert!(rust.acquire("job", MIN, "rust").await.unwrap().is_none());
    let ours = wait_for(rust, "job").await;

    // Expiry by at_most works both ways, on the database clock.
    assert!(rust.release(&ours, Duration::ZERO).await.unwrap());
    assert!(java.lock("job", Duration::from_millis(300)).await);
    let ours = wait_for(rust, "job").await;
    let short = rust
        .extend(&ours, Duration::from_millis(300))
        .await
        .unwrap()
        .unwrap();
    assert!(!java.lock("job", MIN).await);
    assert!(
        common::eventually(Duration::from_secs(5), || java.lock("job", MIN)).await,
        "Java never got the lock after ours ({short}) expired"
    );
    // Our late release does not touch Java's lock.
    assert!(!rust.release(&short, Duration::ZERO).await.unwrap());
    assert!(rust.acquire("job", MIN, "rust").await.unwrap().is_none());
}

/// Rounds of each race in [`race`].
const ROUNDS: usize = 30;

/// Java and our provider try to take one lock at the same moment (a barrier, then each on its
/// own connection), [`ROUNDS`] times on a missing row (first use: Java's INSERT, then UPDATE)
/// and [`ROUNDS`] times on an expired row (Java's UPDATE); exactly one wins each round, the
/// row names the winner, and our side never errors. `expire` is SQL that makes the row of the
/// name bound as its `:name` expired (held until a minute ago by someone else).
async fn race<D: JavaDb, P: LockProvider + Clone + 'static>(
    java: &JavaService<'_, D>,
    rust: &P,
    expire: &Statement,
) {
    for expired in [false, true] {
        let mut wins = [0_usize; 2]; // [Java, ours]
        let name = "raced-expired";
        if expired {
            // The row exists from here on (whoever creates it).
            let record = rust.acquire(name, MIN, "rust").await.unwrap().unwrap();
            assert!(rust.release(&record, Duration::ZERO).await.unwrap());
        }
        for round in 0..ROUNDS {
            let name = if expired {
                let expired_rows = java.db.run(expire, &|_| Value::Text(name.to_owned())).await;
                assert_eq!(expired_rows, 1, "the row to race on exists");
                name.to_owned()
            } else {
                format!("raced-missing-{round}")
            };
            let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(2));
            let ours = tokio::spawn({
                let (rust, barrier, name) = (rust.clone(), barrier.clone(), name.clone());
                async move {
                    barrier.wait().await;
                    rust.acquire(&name, MIN, "rust").await
                }
            });
            barrier.wait().await;
            if round % 2 == 1 {
                // Every other round Java starts one round trip late, so that its statement meets
                // our second one (the INSERT after our UPDATE found no row) rather than our first.
                java.db.run_sql("SELECT 1".to_owned()).await;
            }
            let java_won = if expired {
                java.lock_known(&name, MIN).await
            } else {
                java.lock_new(&name, MIN).await
            };
            let ours = ours
                .await
                .unwrap()
                .unwrap_or_else(|e| panic!("our acquire failed racing Java ({name}): {e}"));
            let case = if expired { "expired" } else { "missing" };
            assert!(
                java_won != ours.is_some(),
                "{case} row, round {round}: Java won: {java_won}, ours: {ours:?}"
            );
            let holder = rust.holder(&name).await.unwrap().expect("a holder");
            let winner = if java_won { java.owner } else { "rust" };
            assert_eq!(holder.owner(), winner, "{case} row, round {round}");
            wins[usize::from(!java_won)] += 1;
        }
        let case = if expired { "expired" } else { "missing" };
        eprintln!("{case} row: Java won {}, ours {}", wins[0], wins[1]);
    }
}

async fn wait_for(rust: &impl LockProvider, name: &str) -> LockRecord {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(record) = rust.acquire(name, MIN, "rust").await.unwrap() {
            return record;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name} never became free"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Java and our provider exclude each other on our table (with the token column) and on
/// Java's own DDL (without it); `provider` makes ours on a table, on a pool of its own.
async fn exclude_each_other_on_both_tables<D: JavaDb, P: LockProvider>(
    java_pool: &D,
    sql: impl Fn(&str) -> Java,
    provider: impl AsyncFn(&str) -> P,
    create_ours: impl AsyncFn(&P),
) {
    for ours in [true, false] {
        let table = testing::unique_table_name("shedlock_interop");
        let sql = sql(&table);
        let provider = provider(&table).await;
        if ours {
            create_ours(&provider).await;
        } else {
            java_pool.run_sql(sql.ddl.clone()).await;
        }
        let java = JavaService {
            db: java_pool,
            sql: &sql,
            owner: "java-host",
        };
        exclude_each_other(&java, &provider).await;
        let token = provider
            .acquire("tokens", MIN, "rust")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(token.fencing_token().is_some(), ours);
        java_pool.run_sql(format!("DROP TABLE {table}")).await;
    }
}

#[tokio::test]
#[cfg_attr(
    not(all(shedlock_pg, shedlock_interop)),
    ignore = "needs SHEDLOCK_PG_URL and ../shared/interop (or SHEDLOCK_INTEROP_SQL)"
)]
async fn java_and_rust_exclude_each_other_on_postgres() {
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let Some(text) = interop_file() else { return };
    let java_pool = PgPool::connect(&url).await.unwrap();
    exclude_each_other_on_both_tables(
        &java_pool,
        |table| POSTGRES.load(&text, table),
        async |table| {
            let pool = PgLockProvider::pool_options().connect(&url).await.unwrap();
            PgLockProvider::builder(pool).table(table).build().unwrap()
        },
        async |p: &PgLockProvider| p.create_table_if_not_exists().await.unwrap(),
    )
    .await;
}

#[tokio::test]
#[cfg_attr(
    not(all(shedlock_mysql, shedlock_interop)),
    ignore = "needs SHEDLOCK_MYSQL_URL and ../shared/interop (or SHEDLOCK_INTEROP_SQL)"
)]
async fn java_and_rust_exclude_each_other_on_mariadb() {
    let Some(url) = testing::mysql_url() else {
        return;
    };
    let Some(text) = interop_file() else { return };
    // Java's sessions in UTC (sqlx's default time_zone '+00:00'), as ShedLock requires.
    let java_pool = MySqlPool::connect(&url).await.unwrap();
    exclude_each_other_on_both_tables(
        &java_pool,
        |table| {
            let sql = MARIADB.load(&text, table);
            assert!(
                sql.insert.sql.starts_with("INSERT IGNORE"),
                "Java's own statement"
            );
            sql
        },
        async |table| {
            let pool = MySqlLockProvider::pool_options()
                .connect(&url)
                .await
                .unwrap();
            MySqlLockProvider::builder(pool)
                .table(table)
                .build()
                .unwrap()
        },
        async |p: &MySqlLockProvider| p.create_table_if_not_exists().await.unwrap(),
    )
    .await;
}

/// Racing tables: ours (with the token column) and Java's own DDL (without it).
async fn race_tables<D: JavaDb, P: LockProvider + Clone + 'static>(
    java_db: &D,
    sql: impl Fn(&str) -> (Java, Statement),
    provider: impl Fn(&str) -> P,
    create_ours: impl AsyncFn(&P),
) {
    for ours in [true, false] {
        let table = testing::unique_table_name("shedlock_race");
        let (sql, expire) = sql(&table);
        let rust = provider(&table);
        if ours {
            create_ours(&rust).await;
        } else {
            java_db.run_sql(sql.ddl.clone()).await;
        }
        let java = JavaService {
            db: java_db,
            sql: &sql,
            owner: "java-host",
        };
        race(&java, &rust, &expire).await;
        java_db.run_sql(format!("DROP TABLE {table}")).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(all(shedlock_pg, shedlock_interop)),
    ignore = "needs SHEDLOCK_PG_URL and ../shared/interop (or SHEDLOCK_INTEROP_SQL)"
)]
async fn java_and_rust_racing_on_postgres_exactly_one_wins_each_round() {
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let Some(text) = interop_file() else { return };
    // Java's connections: no ping on checkout, so its statement leaves at once.
    let java_pool = PgPoolOptions::new()
        .test_before_acquire(false)
        .connect(&url)
        .await
        .unwrap();
    let rust_pool = PgLockProvider::pool_options().connect(&url).await.unwrap();
    race_tables(
        &java_pool,
        |table| (POSTGRES.load(&text, table), POSTGRES.expire(table)),
        |table| {
            PgLockProvider::builder(rust_pool.clone())
                .table(table)
                .build()
                .unwrap()
        },
        async |p: &PgLockProvider| p.create_table_if_not_exists().await.unwrap(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(all(shedlock_mysql, shedlock_interop)),
    ignore = "needs SHEDLOCK_MYSQL_URL and ../shared/interop (or SHEDLOCK_INTEROP_SQL)"
)]
async fn java_and_rust_racing_on_mariadb_exactly_one_wins_each_round() {
    let Some(url) = testing::mysql_url() else {
        return;
    };
    let Some(text) = interop_file() else { return };
    // Java's connections: sessions in UTC (sqlx's default), no ping on checkout.
    let java_pool = MySqlPoolOptions::new()
        .test_before_acquire(false)
        .connect(&url)
        .await
        .unwrap();
    let rust_pool = MySqlLockProvider::pool_options()
        .connect(&url)
        .await
        .unwrap();
    race_tables(
        &java_pool,
        |table| (MARIADB.load(&text, table), MARIADB.expire(table)),
        |table| {
            MySqlLockProvider::builder(rust_pool.clone())
                .table(table)
                .build()
                .unwrap()
        },
        async |p: &MySqlLockProvider| p.create_table_if_not_exists().await.unwrap(),
    )
    .await;
}

#[test]
fn named_parameters_become_positional_in_order() {
    let s = Statement::parse(
        "UPDATE shedlock SET a = :x, b = :y::text WHERE c = :x",
        "t1",
        Placeholder::Dollar,
    );
    assert_eq!(s.sql, "UPDATE t1 SET a = $1, b = $2::text WHERE c = $3");
    assert_eq!(s.params, ["x", "y", "x"]);
    let s = Statement::parse("f(secs => :a) AND n = :b", "t", Placeholder::Question);
    assert_eq!(s.sql, "f(secs => ?) AND n = ?");
}
