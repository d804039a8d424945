//! End to end: the built `shedlock` binary against Postgres, MariaDB and SQLite, while this test
//! process holds the locks through the providers.
//!
//! Postgres and MariaDB come from `SHEDLOCK_PG_URL` / `SHEDLOCK_MYSQL_URL` (skipped with a
//! notice without them, failed under `SHEDLOCK_REQUIRE_DB=1`); SQLite always runs, on a file of
//! its own. Every test uses tables of its own.

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use shedlock_core::admin::model::{JobView, RunView};
use shedlock_core::jobs::{Definition, HistoryPolicy, RunOutcome, RunReport, VERSION};
use shedlock_core::{admin::LockAdmin, provider::LockRecord};
use shedlock_sqlx::sqlx::{self, Executor as _};
use shedlock_sqlx::{MySqlLockProvider, PgLockProvider, SqliteLockProvider, testing};

const MIN: Duration = Duration::from_mins(1);
const HOLDER: &str = "cli-test:4242:abc123";

/// One run of the binary.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    #[track_caller]
    fn ok(self) -> String {
        assert_eq!(
            self.code, 0,
            "stdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        self.stdout
    }

    /// Exit `code`, one line on stderr, no panic; returns that line.
    #[track_caller]
    fn fails(self, code: i32) -> String {
        assert_eq!(
            self.code, code,
            "stdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        assert!(!self.stderr.contains("panicked"), "{}", self.stderr);
        assert_eq!(self.stderr.lines().count(), 1, "one line: {}", self.stderr);
        assert!(self.stderr.starts_with("shedlock: "), "{}", self.stderr);
        self.stderr
    }
}

fn shedlock(url: &str, args: &[&str]) -> Run {
    binary(args, Some(url))
}

/// Runs the binary with `args`, `DATABASE_URL` set to `url` or unset.
fn binary(args: &[&str], url: Option<&str>) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_shedlock"));
    command.args(args);
    run(&mut command, url)
}

/// Runs `command` to its end, `DATABASE_URL` set to `url` or unset.
fn run(command: &mut Command, url: Option<&str>) -> Run {
    match url {
        Some(url) => command.env("DATABASE_URL", url),
        None => command.env_remove("DATABASE_URL"),
    };
    let output = command.output().expect("run the command");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Runs `line`, a command the tool printed, as a shell would run it pasted: `shedlock` is the
/// binary under test (first on `PATH`), `DATABASE_URL` is `url` or unset.
fn pasted(line: &str, url: Option<&str>) -> Run {
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_shedlock"));
    let dir = bin.parent().expect("the binary's directory");
    let path = std::env::join_paths(
        std::iter::once(dir.to_path_buf()).chain(
            std::env::var_os("PATH")
                .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
                .unwrap_or_default(),
        ),
    )
    .expect("a PATH");
    run(
        Command::new("sh").arg("-c").arg(line).env("PATH", path),
        url,
    )
}

/// The commands between backquotes in `text`, as a message quotes them.
fn quoted_commands(text: &str) -> Vec<&str> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|c| c.starts_with("shedlock "))
        .collect()
}

/// Every command the tool prints runs as printed, on the store it was printed for: the unlock
/// line of `show` (a name the shell must have quoted, `scope` a table or key prefix that is not
/// the default), the `show` a stale unlock suggests, the `list` an unknown name suggests; with
/// the URL from `DATABASE_URL` (the printed line relies on it) and from `--database-url` (the
/// printed line carries it).
async fn printed_commands_run_as_printed(url: &str, admin: &dyn LockAdmin, scope: &[&str]) {
    let name = testing::unique_lock_name("it's a report");
    for url_as_option in [false, true] {
        let record = admin
            .acquire(&name, MIN, HOLDER)
            .await
            .expect("acquire")
            .expect("free");
        let cmd = |args: &[&str]| {
            if url_as_option {
                binary(&[&["--database-url", url], args, scope].concat(), None)
            } else {
                shedlock(url, &[args, scope].concat())
            }
        };
        // What the shell of a pasted line has: DATABASE_URL only where the URL came from it.
        let env = (!url_as_option).then_some(url);
        let show = cmd(&["show", &name]).ok();
        let line = show
            .lines()
            .find_map(|l| l.strip_prefix("unlock with: "))
            .unwrap_or_else(|| panic!("no unlock line in {show}"));
        assert_eq!(line.contains("--database-url"), url_as_option, "{line}");

        // Stale (taken again since): the refusal's `shedlock show …` shows this lock.
        let newer = retake_by_same_owner(admin, &record).await;
        let stale = pasted(line, env).fails(1);
        let again = quoted_commands(&stale);
        assert_eq!(again.len(), 1, "{stale}");
        let shown = pasted(again[0], env).ok();
        assert!(
            shown.contains(&format!("name:        {name}")),
            "{again:?}: {shown}"
        );
        let line = shown
            .lines()
            .find_map(|l| l.strip_prefix("unlock with: "))
            .unwrap_or_else(|| panic!("no unlock line in {shown}"))
            .to_owned();
        let freed = pasted(&line, env).ok();
        assert!(
            freed.starts_with(&format!("freed {name:?}")),
            "{line}: {freed}"
        );
        let after = admin.entry(&name).await.expect("entry").expect("row");
        assert!(!after.is_held(), "{line} freed nothing: {after}");
        assert_eq!(after.record().locked_at(), newer.locked_at());

        // An unknown name: the suggested `shedlock list` lists this store's locks.
        let unknown = cmd(&["show", "no-such-lock"]).fails(1);
        let list = quoted_commands(&unknown);
        assert_eq!(list.len(), 1, "{unknown}");
        let listed = pasted(list[0], env).ok();
        assert!(
            listed.lines().any(|l| l.starts_with(&name)),
            "{list:?}: {listed}"
        );
    }
}

/// A database for one test: its URL (for the binary), a raw pool (for Java's statements and
/// DDL), and the SQL that differs per database.
enum Raw {
    Pg(sqlx::PgPool),
    My(sqlx::MySqlPool),
    Lite(sqlx::SqlitePool),
}

struct Db {
    url: String,
    raw: Raw,
    _dir: Option<tempfile::TempDir>,
}

impl Db {
    async fn postgres() -> Option<Self> {
        let url = testing::postgres_url()?;
        let pool = PgLockProvider::pool_options()
            .connect(&url)
            .await
            .expect("connect to Postgres");
        Some(Self {
            url,
            raw: Raw::Pg(pool),
            _dir: None,
        })
    }

    async fn mysql() -> Option<Self> {
        let url = testing::mysql_url()?;
        // The provider's pool options pin sessions to UTC, as Java users are told to.
        let pool = MySqlLockProvider::pool_options()
            .connect(&url)
            .await
            .expect("connect to MySQL/MariaDB");
        Some(Self {
            url,
            raw: Raw::My(pool),
            _dir: None,
        })
    }

    async fn sqlite() -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let url = format!(
            "sqlite://{}?mode=rwc",
            dir.path().join("locks.db").display()
        );
        let pool = SqliteLockProvider::pool_options()
            .connect(&url)
            .await
            .expect("open SQLite");
        Self {
            url,
            raw: Raw::Lite(pool),
            _dir: Some(dir),
        }
    }

    /// A provider (with its admin surface) on `table`.
    fn admin(&self, table: &str) -> Arc<dyn LockAdmin> {
        match &self.raw {
            Raw::Pg(p) => Arc::new(
                PgLockProvider::builder(p.clone())
                    .table(table)
                    .build()
                    .expect("valid"),
            ),
            Raw::My(p) => Arc::new(
                MySqlLockProvider::builder(p.clone())
                    .table(table)
                    .build()
                    .expect("valid"),
            ),
            Raw::Lite(p) => Arc::new(
                SqliteLockProvider::builder(p.clone())
                    .table(table)
                    .build()
                    .expect("valid"),
            ),
        }
    }

    async fn exec(&self, sql: String) {
        let sql = sqlx::AssertSqlSafe(sql);
        match &self.raw {
            Raw::Pg(p) => p.execute(sql).await.map(drop),
            Raw::My(p) => p.execute(sql).await.map(drop),
            Raw::Lite(p) => p.execute(sql).await.map(drop),
        }
        .expect("raw statement");
    }

    /// Java ShedLock's four-column table.
    fn java_ddl(&self, table: &str) -> String {
        let ts = match self.raw {
            Raw::My(_) => "TIMESTAMP(3)",
            _ => "TIMESTAMP",
        };
        format!(
            "CREATE TABLE {table}(name VARCHAR(64) NOT NULL, lock_until {ts} NOT NULL, \
             locked_at {ts} NOT NULL, locked_by VARCHAR(255) NOT NULL, PRIMARY KEY (name))"
        )
    }

    /// The database's UTC now, plus `secs`, as Java ShedLock writes it (`usingDbTime()`).
    fn now_plus(&self, secs: u32) -> String {
        match self.raw {
            Raw::Pg(_) => format!("timezone('UTC', clock_timestamp()) + interval '{secs} seconds'"),
            Raw::My(_) => format!("TIMESTAMPADD(SECOND, {secs}, UTC_TIMESTAMP(3))"),
            Raw::Lite(_) => format!("strftime('%Y-%m-%d %H:%M:%f', 'now', '+{secs} seconds')"),
        }
    }

    /// Java takes (or re-takes) `name` for 60 s as the bare host name `owner`.
    async fn java_lock(&self, table: &str, name: &str, owner: &str) {
        let (until, now) = (self.now_plus(60), self.now_plus(0));
        self.exec(format!(
            "UPDATE {table} SET lock_until = {until}, locked_at = {now}, locked_by = '{owner}' \
             WHERE name = '{name}'"
        ))
        .await;
    }

    async fn drop_table(&self, table: &str) {
        self.exec(format!("DROP TABLE IF EXISTS {table}")).await;
    }
}

/// The `--locked-at` value in `show`'s unlock line.
fn shown_locked_at(show: &str) -> String {
    let line = show
        .lines()
        .find(|l| l.starts_with("unlock with:"))
        .unwrap_or_else(|| panic!("no unlock line in {show}"));
    let mut words = line.split_whitespace();
    words
        .by_ref()
        .find(|w| *w == "--locked-at")
        .expect("--locked-at");
    words.next().expect("a time").to_owned()
}

fn safe_unlock<'a>(name: &'a str, scope: &[&'a str], r: &'a [String; 3]) -> Vec<&'a str> {
    let mut args = vec!["unlock", name];
    args.extend_from_slice(scope);
    args.extend(["--owner", &r[0], "--locked-at", &r[1]]);
    if !r[2].is_empty() {
        args.extend(["--token", &r[2]]);
    }
    args
}

async fn retake_by_same_owner(admin: &dyn LockAdmin, old: &LockRecord) -> LockRecord {
    assert!(admin.release(old, Duration::ZERO).await.expect("release"));
    loop {
        let new = admin
            .acquire(old.name(), MIN, old.owner())
            .await
            .expect("acquire")
            .expect("free");
        if new.locked_at() != old.locked_at() {
            return new;
        }
        // Same millisecond as the old acquisition: give it back and take it in the next one.
        assert!(admin.release(&new, Duration::ZERO).await.expect("release"));
        tokio::task::yield_now().await;
    }
}

/// The operator's session on a SQL table: see [`operate`].
async fn operate_a_held_lock(db: &Db) {
    let table = testing::unique_table_name("shedlock_cli");
    let admin = db.admin(&table);
    admin.create_table().await.expect("create table");
    operate(&db.url, &*admin, &["--table", &table]).await;
    printed_commands_run_as_printed(&db.url, &*admin, &["--table", &table]).await;
    db.drop_table(&table).await;
}

/// The operator's session: list and show a lock this process holds, refuse a stale unlock, free
/// it safely, force-free it, compare `--json` with the table. `scope` selects the table or the
/// key prefix.
async fn operate(url: &str, admin: &dyn LockAdmin, scope: &[&str]) {
    let cmd = |args: &[&str]| shedlock(url, &[args, scope].concat());
    let name = testing::unique_lock_name("report");
    let record = admin
        .acquire(&name, MIN, HOLDER)
        .await
        .expect("acquire")
        .expect("free");

    let list = cmd(&["list"]).ok();
    let row = list
        .lines()
        .find(|l| l.starts_with(&name))
        .unwrap_or_else(|| panic!("{name} not listed:\n{list}"));
    let words: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(&words[..3], [name.as_str(), "held", HOLDER], "{list}");
    let token = record
        .fencing_token()
        .expect("the store has tokens")
        .to_string();
    assert_eq!(words.last(), Some(&token.as_str()), "{list}");

    // --json carries the same rows, at full precision.
    let json: serde_json::Value =
        serde_json::from_str(&cmd(&["list", "--json"]).ok()).expect("list --json is JSON");
    let listed = json.as_array().expect("an array");
    assert_eq!(listed.len(), list.lines().count() - 1, "{json}\n{list}");
    let entry = listed
        .iter()
        .find(|e| e["name"] == name.as_str())
        .expect("listed");
    assert_eq!(entry["state"], "held");
    assert_eq!(entry["holder"], HOLDER);
    assert_eq!(entry["fencing_token"].as_i64(), record.fencing_token());
    let locked_at: chrono::DateTime<chrono::Utc> = entry["locked_at"]
        .as_str()
        .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
        .expect("an RFC 3339 time")
        .into();
    assert_eq!(locked_at, record.locked_at(), "exactly the stored time");

    // show prints the exact unlock command; its values are taken from the printed text.
    let show = cmd(&["show", &name]).ok();
    let printed = [HOLDER.to_owned(), shown_locked_at(&show), token.clone()];

    // Stale: re-taken since `show`, by the same owner id. Refused, nothing freed.
    let newer = retake_by_same_owner(admin, &record).await;
    let stale = shedlock(url, &safe_unlock(&name, scope, &printed)).fails(1);
    assert!(stale.contains("not the acquisition given"), "{stale}");
    let still = admin.entry(&name).await.expect("entry").expect("row");
    assert!(still.is_held(), "a refused unlock freed the lock");
    assert_eq!(still.record().locked_at(), newer.locked_at());

    // Safe unlock with the values of a fresh show.
    let show = cmd(&["show", &name]).ok();
    let current = [
        HOLDER.to_owned(),
        shown_locked_at(&show),
        newer.fencing_token().expect("token").to_string(),
    ];
    let freed = shedlock(url, &safe_unlock(&name, scope, &current)).ok();
    assert!(freed.starts_with(&format!("freed {name:?}")), "{freed}");
    let after = admin.entry(&name).await.expect("entry").expect("row");
    assert!(!after.is_held(), "unlocked: {after}");
    assert_eq!(after.record().owner(), HOLDER, "the row is kept");
    let again = shedlock(url, &safe_unlock(&name, scope, &current)).fails(1);
    assert!(again.contains("is not held"), "{again}");

    // --force frees whoever holds it, and says whom.
    let third = admin
        .acquire(&name, MIN, "another-pod:1:ffffff")
        .await
        .expect("acquire")
        .expect("free after unlock");
    let forced = cmd(&["unlock", &name, "--force"]).ok();
    assert!(forced.contains("held by another-pod:1:ffffff"), "{forced}");
    let after = admin.entry(&name).await.expect("entry").expect("row");
    assert!(!after.is_held());
    assert!(third.fencing_token() > newer.fencing_token());

    // An unknown lock: "not found", exit 1.
    let unknown = cmd(&["show", "no-such-lock"]).fails(1);
    assert!(
        unknown.contains("no lock named \"no-such-lock\""),
        "{unknown}"
    );
}

/// A Java ShedLock table (four columns, bare host names): its rows are listed, and `locked_at`
/// tells Java's acquisitions apart.
async fn java_table(db: &Db) {
    let table = testing::unique_table_name("shedlock_cli_java");
    db.exec(db.java_ddl(&table)).await;
    let admin = db.admin(&table);
    let name = testing::unique_lock_name("java-job");
    db.exec(format!(
        "INSERT INTO {table} (name, lock_until, locked_at, locked_by) VALUES ('{name}', {}, {}, \
         'java-host')",
        db.now_plus(60),
        db.now_plus(0)
    ))
    .await;
    let url = &db.url;
    let list = shedlock(url, &["list", "--table", &table]).ok();
    let row = list
        .lines()
        .find(|l| l.starts_with(&name))
        .unwrap_or_else(|| panic!("{name} not listed:\n{list}"));
    assert!(row.contains("held") && row.contains("java-host"), "{list}");
    assert!(row.ends_with(" -"), "no token column: {list}");

    let show = shedlock(url, &["show", &name, "--table", &table]).ok();
    assert!(!show.contains("--token"), "{show}");
    let printed = [
        "java-host".to_owned(),
        shown_locked_at(&show),
        String::new(),
    ];
    let with_token = shedlock(
        url,
        &[
            &safe_unlock(&name, &["--table", &table], &printed)[..],
            &["--token", "7"],
        ]
        .concat(),
    )
    .fails(2);
    assert!(with_token.contains("leave out --token"), "{with_token}");

    // Java re-takes it (same host name, token-less): only locked_at differs. Refused.
    let before = admin.entry(&name).await.expect("entry").expect("row");
    loop {
        db.java_lock(&table, &name, "java-host").await;
        let now = admin.entry(&name).await.expect("entry").expect("row");
        if now.record().locked_at() != before.record().locked_at() {
            break;
        }
        tokio::task::yield_now().await;
    }
    let stale = shedlock(url, &safe_unlock(&name, &["--table", &table], &printed)).fails(1);
    assert!(stale.contains("refused"), "{stale}");
    assert!(
        admin
            .entry(&name)
            .await
            .expect("entry")
            .expect("row")
            .is_held()
    );

    let show = shedlock(url, &["show", &name, "--table", &table]).ok();
    let current = [
        "java-host".to_owned(),
        shown_locked_at(&show),
        String::new(),
    ];
    shedlock(url, &safe_unlock(&name, &["--table", &table], &current)).ok();
    let after = admin.entry(&name).await.expect("entry").expect("row");
    assert!(!after.is_held());
    assert_eq!(after.record().fencing_token(), None);
    db.drop_table(&table).await;
}

/// Mistakes: each is one clear line, exit 2 (or 1 for an unknown lock), and changes nothing.
async fn bad_input(db: &Db) {
    let table = testing::unique_table_name("shedlock_cli_bad");
    let admin = db.admin(&table);
    admin.create_table().await.expect("create table");
    let name = testing::unique_lock_name("held");
    let record = admin
        .acquire(&name, MIN, HOLDER)
        .await
        .expect("acquire")
        .expect("free");
    let url = &db.url;

    let missing = testing::unique_table_name("shedlock_cli_none");
    let err = shedlock(url, &["list", "--table", &missing]).fails(2);
    assert!(
        err.contains(&format!("the lock table {missing} does not exist")),
        "{err}"
    );
    assert!(err.contains("shedlock create-table"), "{err}");

    // A column the table does not have: the tool's own `ddl`, on this table, is the reference.
    let err = shedlock(
        url,
        &["list", "--table", &table, "--name-column", "lock_name"],
    )
    .fails(2);
    assert!(!err.contains("::ddl()"), "{err}");
    assert!(
        err.contains(&format!(
            "`shedlock ddl --table {table} --name-column lock_name`"
        )),
        "{err}"
    );

    let err = shedlock(url, &["list", "--table", "locks;drop"]).fails(2);
    assert!(err.contains("made of plain identifiers"), "{err}");

    let err = shedlock(
        url,
        &["unlock", "no-such-lock", "--force", "--table", &table],
    )
    .fails(1);
    assert!(err.contains("no lock named"), "{err}");

    let err = shedlock(
        url,
        &[
            "unlock",
            &name,
            "--table",
            &table,
            "--owner",
            HOLDER,
            "--locked-at",
            "2026-13-45T99:00:00Z",
        ],
    )
    .code;
    assert_eq!(err, 2, "an invalid time is a usage error");

    let after = admin.entry(&name).await.expect("entry").expect("row");
    assert!(after.is_held());
    assert_eq!(after.record().locked_at(), record.locked_at());
    assert_eq!(after.record().fencing_token(), record.fencing_token());
    db.drop_table(&table).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_pg), ignore = "needs SHEDLOCK_PG_URL (Postgres)")]
async fn postgres_end_to_end() {
    let Some(db) = Db::postgres().await else {
        return;
    };
    operate_a_held_lock(&db).await;
    java_table(&db).await;
    bad_input(&db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_mysql), ignore = "needs SHEDLOCK_MYSQL_URL (MySQL)")]
async fn mariadb_end_to_end() {
    let Some(db) = Db::mysql().await else {
        return;
    };
    operate_a_held_lock(&db).await;
    java_table(&db).await;
    bad_input(&db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_end_to_end() {
    let db = Db::sqlite().await;
    operate_a_held_lock(&db).await;
    java_table(&db).await;
    bad_input(&db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_table_ddl_and_watch_on_a_new_sqlite_file() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("new.db").display());
    let created = shedlock(&url, &["create-table"]).ok();
    assert!(created.contains("exists"), "{created}");
    assert_eq!(shedlock(&url, &["list"]).ok(), "no locks\n");
    let watched = shedlock(&url, &["watch", "--count", "2", "--interval", "50ms"]).ok();
    assert_eq!(
        watched.matches("every 50ms: 0 locks").count(),
        2,
        "{watched}"
    );
    let ddl = shedlock(&url, &["ddl", "--table", "ops_locks"]).ok();
    assert!(
        ddl.starts_with("CREATE TABLE IF NOT EXISTS \"ops_locks\""),
        "{ddl}"
    );
}

#[test]
fn connection_mistakes_are_one_line_and_exit_2() {
    const REFUSED: &str = "Connection refused (os error 111); nothing listens there: is the server running, and on \
         that port?";
    let cases = [
        ("oracle://scott@127.0.0.1/db", "known scheme"),
        (
            "redis://127.0.0.1:1",
            "cannot connect: lock store failed to connect (Redis at redis://127.0.0.1:1/0): ",
        ),
        (
            "postgres://postgres@127.0.0.1:1/test",
            "cannot connect: lock store failed to connect to Postgres at 127.0.0.1:1/test: error \
             communicating with database: ",
        ),
        (
            "mysql://root@127.0.0.1:1/test",
            "cannot connect: lock store failed to connect to MySQL/MariaDB at 127.0.0.1:1/test: \
             error communicating with database: ",
        ),
        (
            "sqlite:///nonexistent-dir/for/shedlock.db",
            "cannot connect: lock store failed to connect to SQLite database \
             /nonexistent-dir/for/shedlock.db: ",
        ),
    ];
    // A refused connection is the answer: no waiting for the call's timeout (10 s here).
    let runs: Vec<(Run, Duration)> = std::thread::scope(|scope| {
        let running: Vec<_> = cases
            .iter()
            .map(|(url, _)| {
                scope.spawn(move || {
                    let started = std::time::Instant::now();
                    let run = shedlock(url, &["list", "--timeout", "10s"]);
                    (run, started.elapsed())
                })
            })
            .collect();
        running
            .into_iter()
            .map(|run| run.join().expect("a case's thread"))
            .collect()
    });
    for ((url, needle), (run, took)) in cases.into_iter().zip(runs) {
        let err = run.fails(2);
        assert!(err.contains(needle), "{url}: {err}");
        assert!(!err.contains("scott@"), "no credentials in messages: {err}");
        if [":1/", ":1"]
            .iter()
            .any(|port| url.ends_with(port) || url.contains(port))
        {
            assert!(err.trim_end().ends_with(REFUSED), "{url}: {err}");
            assert!(took < Duration::from_secs(3), "{url} took {took:?}: {err}");
        }
    }
    let no_url = Command::new(env!("CARGO_BIN_EXE_shedlock"))
        .arg("list")
        .env_remove("DATABASE_URL")
        .output()
        .expect("run");
    assert_eq!(no_url.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&no_url.stderr)
            .contains("pass --database-url URL or set DATABASE_URL")
    );
    // DDL needs no database.
    let ddl = shedlock("postgres://nobody@127.0.0.1:1/none", &["ddl"]).ok();
    assert!(
        ddl.starts_with("CREATE TABLE IF NOT EXISTS \"shedlock\""),
        "{ddl}"
    );
}

/// `host:port` of a URL like `postgres://user@127.0.0.1:5432/db`.
fn address(url: &str) -> &str {
    let rest = url.split_once('@').map_or(url, |(_, rest)| rest);
    rest.split_once('/').map_or(rest, |(address, _)| address)
}

/// A URL of one store aimed at another store's port: the message says that the server speaks
/// another protocol (MySQL's client waits for a greeting a Postgres server never sends).
#[test]
#[cfg_attr(
    not(all(shedlock_pg, shedlock_mysql)),
    ignore = "needs SHEDLOCK_PG_URL and SHEDLOCK_MYSQL_URL"
)]
fn a_url_aimed_at_another_stores_port_says_so() {
    let (Some(pg), Some(my)) = (testing::postgres_url(), testing::mysql_url()) else {
        return;
    };
    let cases = [
        (
            format!("mysql://root@{}/test", address(&pg)),
            "it accepted the connection but sent no greeting within 1000 ms: it is likely not a \
             MySQL server (or one too busy to answer): check the URL's port",
        ),
        (
            format!("postgres://postgres@{}/test", address(&my)),
            "the server does not speak the Postgres protocol: check the URL's port",
        ),
    ];
    for (url, says) in cases {
        let err = shedlock(&url, &["list", "--timeout", "1s"]).fails(2);
        assert!(err.trim_end().ends_with(says), "{url}: {err}");
    }
}

#[test]
fn help_documents_exit_codes() {
    let help = shedlock("", &["--help"]).ok();
    for needle in [
        "Exit status:",
        "0  done",
        "1  refused",
        "2  usage or connection error",
    ] {
        assert!(help.contains(needle), "{help}");
    }
    let usage = shedlock("", &["unlock", "x"]);
    assert_eq!(usage.code, 2, "{}", usage.stderr);
}

/// The usage line after a mistake shows an option set from the environment (`DATABASE_URL`) or
/// by default as optional, not as if it were required.
#[test]
fn usage_lines_show_optional_options_as_optional() {
    let cases: [(&[&str], &str); 3] = [
        (
            &[
                "unlock",
                "x",
                "--locked-at",
                "2026-12-01T20:31:02Z",
                "-t",
                "ops",
            ],
            "Usage: shedlock unlock <NAME> --owner <OWNER> --locked-at <TIME> [--token <N>] \
             [--election] [OPTIONS]\n       \
             shedlock unlock <NAME> --force [--election] [OPTIONS]\n",
        ),
        (
            &["list", "--bogus", "--timeout", "2s"],
            "Usage: shedlock list [--held] [--json] [OPTIONS]\n",
        ),
        (&["--bogus"], "Usage: shedlock [OPTIONS] <COMMAND>\n"),
    ];
    for (args, usage) in cases {
        let run = shedlock("sqlite://unused.db", args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(usage), "{args:?}: {}", run.stderr);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn operates_locks_on_redis() {
    let Some(url) = shedlock_redis::testing::redis_url() else {
        return;
    };
    let prefix = shedlock_redis::testing::unique_prefix("cli");
    let provider = shedlock_redis::RedisLockProvider::builder(url.as_str())
        .key_prefix(&prefix)
        .connect()
        .await
        .expect("redis");
    operate(&url, &provider, &["--key-prefix", &prefix]).await;
    printed_commands_run_as_printed(&url, &provider, &["--key-prefix", &prefix]).await;
    let ddl = shedlock(&url, &["ddl"]).fails(2);
    assert!(ddl.contains("table"), "{ddl}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_etcd), ignore = "needs SHEDLOCK_ETCD_URL (etcd)")]
async fn operates_locks_on_etcd() {
    let Some(url) = shedlock_etcd::testing::etcd_url() else {
        return;
    };
    let prefix = shedlock_etcd::testing::unique_prefix();
    let provider = shedlock_etcd::EtcdLockProvider::builder(url.as_str())
        .prefix(&prefix)
        .build()
        .expect("etcd");
    operate(&url, &provider, &["--key-prefix", &prefix]).await;
    printed_commands_run_as_printed(&url, &provider, &["--key-prefix", &prefix]).await;
}

/// A job name with quotes, spaces and non-ASCII letters.
const ODD_JOB: &str = "it's a \"job\" – ünïcode";

/// Whether `admin` lacks job state: no definitions, or no recorded release.
async fn lacks_job_state(admin: &dyn LockAdmin) -> bool {
    match admin.definitions().await {
        Err(e) if e.is_unsupported() => return true,
        other => drop(other.expect("definitions")),
    }
    let record = admin
        .acquire("probe-job-state", MIN, HOLDER)
        .await
        .expect("acquire")
        .expect("free");
    let report = RunReport::new(chrono::Utc::now(), RunOutcome::Succeeded);
    match admin.release_run(&record, Duration::ZERO, &report).await {
        Err(e) if e.is_unsupported() => {
            admin
                .release(&record, Duration::ZERO)
                .await
                .expect("release");
            true
        }
        other => !other.expect("release_run"),
    }
}

/// A table `table` on `db` that records job state; `None` (after a notice) while the store
/// answers the job-state calls unsupported. On the way: a table lacking what job state needs
/// makes `jobs` print the statements to run, and exit 2.
async fn jobs_table(db: &Db, table: &str) -> Option<Arc<dyn LockAdmin>> {
    let admin = db.admin(table);
    admin.create_table().await.expect("create the table");
    if let Some(ddl) = admin.missing_ddl().await.expect("missing_ddl") {
        let run = shedlock(&db.url, &["jobs", "-t", table]);
        assert_eq!(run.code, 2, "{}", run.stderr);
        assert!(
            run.stderr
                .contains("run this to record job state and allow pauses and triggers:")
                && run.stderr.contains(ddl.trim_end()),
            "{}",
            run.stderr
        );
        db.exec(ddl).await;
    }
    if lacks_job_state(&*admin).await {
        println!("skipped: store lacks job state");
        let run = shedlock(&db.url, &["jobs", "-t", table]);
        assert_eq!(run.code, 2, "{}", run.stderr);
        return None;
    }
    Some(admin)
}

/// Records a failing run of the job `report` (lock `report-lock`) and a successful one of
/// [`ODD_JOB`], and publishes both jobs.
async fn record_jobs(admin: &dyn LockAdmin) {
    let fire = chrono::Utc::now();
    for (lock, outcome) in [
        ("report-lock", RunOutcome::Failed(ODD_ERROR.into())),
        (ODD_JOB, RunOutcome::Succeeded),
    ] {
        let record = admin
            .acquire(lock, MIN, HOLDER)
            .await
            .expect("acquire")
            .expect("free");
        let report = RunReport::new(fire, outcome);
        assert!(
            admin
                .release_run(&record, Duration::ZERO, &report)
                .await
                .expect("release_run")
        );
    }
    let definitions = [
        Definition::new(
            "report",
            "report-lock",
            r#"{"name":"report","lock_name":"report-lock","cron":"0 0 3 * * *","zone":"Europe/Berlin"}"#,
        ),
        Definition::new(
            ODD_JOB,
            ODD_JOB,
            format!("{{\"name\":{ODD_JOB:?},\"every\":\"5m\"}}"),
        ),
    ];
    admin
        .publish_definitions("pod-1:1:aa", VERSION, &definitions, MIN)
        .await
        .expect("publish");
}

/// An error text with quotes and a second line.
const ODD_ERROR: &str = "it's \"broken\"\nsecond line";

/// `jobs`, `history` and `forget` on the store at `url` (`scope`: its `--table` or
/// `--key-prefix`), after [`record_jobs`]; `history` has rows where the store keeps history.
fn check_jobs(url: &str, scope: &[&str], history_kept: bool) {
    let with = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(scope);
        shedlock(url, &all)
    };
    let out = with(&["jobs"]).ok();
    let report_line = out
        .lines()
        .find(|l| l.starts_with("report (lock report-lock)"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        report_line.contains("at 03:00 every day (Europe/Berlin)")
            && report_line.contains("failed"),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with(ODD_JOB) && l.contains("every 5 minutes")),
        "{out}"
    );
    let views: Vec<JobView> =
        serde_json::from_str(&with(&["jobs", "--json"]).ok()).expect("JobViews");
    let names: Vec<&str> = views.iter().map(|v| v.job.as_str()).collect();
    assert!(
        names.contains(&"report") && names.contains(&ODD_JOB),
        "{names:?}"
    );
    let failing: Vec<JobView> =
        serde_json::from_str(&with(&["jobs", "--failing", "--json"]).ok()).expect("JobViews");
    assert_eq!(failing.len(), 1, "{failing:?}");
    assert_eq!(failing[0].consecutive_failures, 1);
    assert_eq!(
        failing[0]
            .last_run
            .as_ref()
            .and_then(|r| r.error.as_deref()),
        Some(ODD_ERROR)
    );

    let history = with(&["history", "report"]).ok();
    let runs: Vec<RunView> =
        serde_json::from_str(&with(&["history", "report", "--json"]).ok()).expect("RunViews");
    if history_kept {
        assert!(history.starts_with("FIRE "), "{history}");
        assert_eq!(runs.len(), 1, "{runs:?}");
        assert_eq!(runs[0].error.as_deref(), Some(ODD_ERROR));
        let line = history.lines().nth(1).unwrap_or_default();
        assert!(line.ends_with("failed    it's \"broken\" …"), "{history}");
        let ok: Vec<RunView> =
            serde_json::from_str(&with(&["history", ODD_JOB, "--failed", "--json"]).ok())
                .expect("RunViews");
        assert!(ok.is_empty(), "{ok:?}");
    } else {
        assert!(
            history.starts_with("no runs recorded for \"report\" (lock \"report-lock\")"),
            "{history}"
        );
        assert!(runs.is_empty(), "{runs:?}");
    }

    let long = "n".repeat(70);
    for job in ["nope", "a b", long.as_str()] {
        for command in ["history", "forget"] {
            let line = with(&[command, job]).fails(1);
            assert!(line.contains(&format!("no job named {job:?}")), "{line}");
            assert!(line.contains("\"report\""), "{line}");
        }
    }
    let forgot = with(&["forget", ODD_JOB]).ok();
    assert!(
        forgot.starts_with(&format!("forgot {ODD_JOB:?}: removed 1 definition ")),
        "{forgot}"
    );
    // Its lock row still records its run: listed, its schedule unknown.
    let views: Vec<JobView> =
        serde_json::from_str(&with(&["jobs", "--json"]).ok()).expect("JobViews");
    let odd = views
        .iter()
        .find(|v| v.job == ODD_JOB)
        .expect("listed by its row");
    assert!(
        odd.replicas.is_empty() && odd.schedule.schedule.is_none(),
        "{odd:?}"
    );
}

/// `jobs`, `history` and `forget` against SQLite with job state: a failing job, a job with an
/// odd name, unknown and overlong names; and a Java table, which lacks job state. Skipped, with
/// a notice, while the SQLite store answers the job-state calls unsupported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_history_and_forget_on_sqlite() {
    let db = Db::sqlite().await;
    db.exec(db.java_ddl("java_jobs")).await;
    let java = shedlock(&db.url, &["jobs", "-t", "java_jobs"]);
    assert_eq!(
        java.code, 2,
        "stdout: {}\nstderr: {}",
        java.stdout, java.stderr
    );
    assert!(
        java.stderr
            .contains("run this to record job state and allow pauses and triggers:")
            || java.stderr.contains("does not record job state"),
        "{}",
        java.stderr
    );
    assert!(!java.stderr.contains("panicked"), "{}", java.stderr);

    let table = "job_locks";
    let Some(admin) = jobs_table(&db, table).await else {
        return;
    };
    record_jobs(&*admin).await;
    check_jobs(&db.url, &["-t", table], false);
}

/// The same on Redis, which keeps history here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn jobs_history_and_forget_on_redis() {
    let Some(url) = shedlock_redis::testing::redis_url() else {
        return;
    };
    let prefix = shedlock_redis::testing::unique_prefix("cli-jobs");
    let provider = shedlock_redis::RedisLockProvider::builder(url.as_str())
        .key_prefix(&prefix)
        .history(HistoryPolicy::keep(10))
        .connect()
        .await
        .expect("redis");
    record_jobs(&provider).await;
    check_jobs(&url, &["--key-prefix", &prefix], true);
}

/// `pause` and `resume` through the binary on Redis: the pause lands in the lock's hash and
/// `jobs` shows it, an end in the past is refused with nothing written, and the resume records
/// its operator.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(shedlock_redis), ignore = "needs SHEDLOCK_REDIS_URL (Redis)")]
async fn pause_and_resume_on_redis() {
    use shedlock_core::admin::ActionKind;
    let Some(url) = shedlock_redis::testing::redis_url() else {
        return;
    };
    let prefix = shedlock_redis::testing::unique_prefix("cli-pause");
    let provider = shedlock_redis::RedisLockProvider::builder(url.as_str())
        .key_prefix(&prefix)
        .connect()
        .await
        .expect("redis");
    record_jobs(&provider).await;
    let with = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--key-prefix", prefix.as_str()]);
        shedlock(&url, &all)
    };
    let out = with(&[
        "pause",
        "report",
        "--for",
        "1h",
        "--reason",
        "upstream down",
        "--as",
        "ann@ops",
    ])
    .ok();
    assert!(
        out.contains("paused until") && out.contains("ann@ops"),
        "{out}"
    );
    let entry = provider.entry("report-lock").await.unwrap().expect("a row");
    let pause = entry.pause().expect("paused").clone();
    assert_eq!(
        (pause.by.as_str(), pause.reason.as_deref()),
        ("ann@ops", Some("upstream down"))
    );
    assert_eq!(pause.until, Some(pause.since + chrono::Duration::hours(1)));
    let jobs = with(&["jobs"]).ok();
    assert!(jobs.contains("paused by ann@ops"), "{jobs}");

    let refused = with(&[
        "pause",
        "report",
        "--until",
        "2001-01-01T00:00:00Z",
        "--as",
        "bob",
    ])
    .fails(2);
    assert!(refused.contains("must end in the future"), "{refused}");
    let entry = provider.entry("report-lock").await.unwrap().expect("a row");
    assert_eq!(entry.pause(), Some(&pause), "nothing written");

    with(&["resume", "report", "--as", "bob@ops"]).ok();
    let entry = provider.entry("report-lock").await.unwrap().expect("a row");
    assert_eq!(entry.pause(), None);
    let action = entry.last_action().expect("recorded");
    assert_eq!(
        (action.kind, action.by.as_str()),
        (ActionKind::Resumed, "bob@ops")
    );
}
