//! A Java service using ShedLock (`usingDbTime()`) and our providers guard one job in one table
//! and exclude each other both ways.
//!
//! The Java side is played by the exact SQL Java ShedLock 7.9 sends (its `dbTime=true`
//! statements for `POSTGRES_SQL` and `MARIA_DB`, and the DDL from its README), loaded at test time
//! from `shedlock-sql.txt`: `$SHEDLOCK_INTEROP_SQL`, or `../shared/interop/shedlock-sql.txt`
//! next to the workspace. Named parameters are bound positionally in order of appearance, as
//! Spring's `NamedParameterJdbcTemplate` does. Java's lock sequence is ShedLock's: `INSERT`
//! (creates the row or, on Postgres, takes an expired one), else `UPDATE`; `EXTEND`; `UNLOCK`.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use shedlock_core::{LockProvider, LockRecord};
use shedlock_sqlx::sqlx;
use shedlock_sqlx::sqlx::mysql::MySqlPool;
use shedlock_sqlx::sqlx::postgres::PgPool;
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
    /// Runs `statement` with Java's bindings; rows affected.
    async fn run(&self, statement: &Statement, bind: &dyn Fn(&str) -> Value) -> u64;
    async fn run_sql(&self, sql: String);
}

impl JavaDb for PgPool {
    async fn run(&self, statement: &Statement, bind: &dyn Fn(&str) -> Value) -> u64 {
        let mut query = sqlx::query(sqlx::AssertSqlSafe(statement.sql.clone()));
        for param in &statement.params {
            query = match bind(param) {
                Value::Text(s) => query.bind(s),
                Value::Seconds(s) => query.bind(s),
                Value::Micros(m) => query.bind(m),
            };
        }
        query.execute(self).await.unwrap().rows_affected()
    }

    async fn run_sql(&self, sql: String) {
        sqlx::Executor::execute(self, sqlx::AssertSqlSafe(sql))
            .await
            .unwrap();
    }
}

impl JavaDb for MySqlPool {
    async fn run(&self, statement: &Statement, bind: &dyn Fn(&str) -> Value) -> u64 {
        let mut query = sqlx::query(sqlx::AssertSqlSafe(statement.sql.clone()));
        for param in &statement.params {
            query = match bind(param) {
                Value::Text(s) => query.bind(s),
                Value::Seconds(s) => query.bind(s),
                Value::Micros(m) => query.bind(m),
            };
        }
        query.execute(self).await.unwrap().rows_affected()
    }

    async fn run_sql(&self, sql: String) {
        sqlx::Executor::execute(self, sqlx::AssertSqlSafe(sql))
            .await
            .unwrap();
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

#[tokio::test]
async fn java_and_rust_exclude_each_other_on_postgres() {
    let Some(url) = testing::postgres_url() else {
        return;
    };
    let Some(text) = interop_file() else { return };
    let java_pool = PgPool::connect(&url).await.unwrap();
    // On our table (with the token column) and on Java's own DDL (without it).
    for ours in [true, false] {
        let table = testing::unique_table_name("shedlock_interop");
        let sql = Java::load(
            &text,
            "POSTGRES_SQL",
            "POSTGRES",
            &table,
            Placeholder::Dollar,
        );
        let provider =
            PgLockProvider::builder(PgLockProvider::pool_options().connect(&url).await.unwrap())
                .table(&table)
                .build()
                .unwrap();
        if ours {
            provider.create_table_if_not_exists().await.unwrap();
        } else {
            java_pool.run_sql(sql.ddl.clone()).await;
        }
        let java = JavaService {
            db: &java_pool,
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
async fn java_and_rust_exclude_each_other_on_mariadb() {
    let Some(url) = testing::mysql_url() else {
        return;
    };
    let Some(text) = interop_file() else { return };
    // Java's sessions in UTC (sqlx's default time_zone '+00:00'), as ShedLock requires.
    let java_pool = MySqlPool::connect(&url).await.unwrap();
    for ours in [true, false] {
        let table = testing::unique_table_name("shedlock_interop");
        let sql = Java::load(
            &text,
            "MARIA_DB",
            "MYSQL_MARIADB",
            &table,
            Placeholder::Question,
        );
        assert!(
            sql.insert.sql.starts_with("INSERT IGNORE"),
            "Java's own statement"
        );
        let provider = MySqlLockProvider::builder(
            MySqlLockProvider::pool_options()
                .connect(&url)
                .await
                .unwrap(),
        )
        .table(&table)
        .build()
        .unwrap();
        if ours {
            provider.create_table_if_not_exists().await.unwrap();
        } else {
            java_pool.run_sql(sql.ddl.clone()).await;
        }
        let java = JavaService {
            db: &java_pool,
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
