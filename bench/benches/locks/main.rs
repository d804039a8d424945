//! The shedlock-rs benchmark: the cost of a lock against the store's floor, on Postgres,
//! MariaDB (or MySQL), SQLite, Redis and etcd, in one run, and the scheduler's cost per fire.
//! See `BENCHMARKS.md` at the repository root.
//!
//! ```text
//! cargo bench -p shedlock-bench -- --quick           # about a minute
//! cargo bench -p shedlock-bench                      # the full run (a few minutes)
//! cargo bench -p shedlock-bench -- --quick --json    # JSON rows on stdout
//! cargo bench -p shedlock-bench -- --db postgres     # some of postgres, mariadb, sqlite, memory, redis, etcd, tls
//! cargo bench -p shedlock-bench -- --only contention # parts: uncontended, server, contention, pressure, latch, fires, jobs, tower, trigger, web
//! cargo bench -p shedlock-bench -- --pace-ms 5       # the pause between paced operations (default 1)
//! ```
//!
//! `SHEDLOCK_PG_URL` and `SHEDLOCK_MYSQL_URL` name the servers (default: the local test
//! databases); SQLite uses a temporary file; `SHEDLOCK_REDIS_URL` and `SHEDLOCK_ETCD_URL` name
//! Redis and etcd (no default: without them those are skipped). `SHEDLOCK_INTEROP_SQL` overrides where Java
//! ShedLock's statements are read from (default: `shared/interop/shedlock-sql.txt` beside the
//! repository). A database that cannot be reached is skipped with a notice, unless
//! `SHEDLOCK_REQUIRE_DB=1`.

mod fires;
mod harness;
mod jobs;
mod lateness;
mod mysql;
mod pg;
mod pgbench;
mod server_cpu;
mod sink;
mod sql;
mod sqlite;
mod stores;
mod suite;
mod tls;
mod tower;
mod trigger;
mod web;
mod wire;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use shedlock_bench::java::{Placeholder, Section};
use shedlock_bench::report::{self, Row};
use shedlock_sqlx::sqlx::mysql::MySql;
use shedlock_sqlx::sqlx::postgres::Postgres;

use crate::harness::{PARTS, Plan};

/// Plain text: sqlx's default `sslmode=prefer` takes TLS when the server offers it (Debian's
/// Postgres does), which the `tls` part measures on its own.
const DEFAULT_PG_URL: &str = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable";
const DEFAULT_MYSQL_URL: &str = "mysql://root@127.0.0.1:3306/test";
const DATABASES: [&str; 7] = [
    "postgres", "mariadb", "sqlite", "memory", "redis", "etcd", "tls",
];

struct Settings {
    quick: bool,
    json: bool,
    databases: Vec<String>,
    only: Vec<String>,
    pace_ms: Option<u64>,
}

impl Settings {
    fn parse(args: &[String]) -> Result<Self, String> {
        let mut settings = Self {
            quick: false,
            json: false,
            databases: DATABASES.map(str::to_owned).to_vec(),
            only: Vec::new(),
            pace_ms: None,
        };
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--quick" => settings.quick = true,
                "--json" => settings.json = true,
                "--bench" => {}
                "--db" => {
                    let list = args.next().ok_or(
                        "--db needs a list: postgres,mariadb,sqlite,memory,redis,etcd,tls",
                    )?;
                    settings.databases = list.split(',').map(|d| d.trim().to_owned()).collect();
                    if let Some(bad) = settings
                        .databases
                        .iter()
                        .find(|d| !DATABASES.contains(&d.as_str()))
                    {
                        return Err(format!(
                            "unknown database {bad:?}; use postgres, mariadb, sqlite, memory, redis, etcd, tls"
                        ));
                    }
                }
                "--only" => {
                    let list = args.next().ok_or("--only needs a list of parts")?;
                    settings.only = list.split(',').map(|d| d.trim().to_owned()).collect();
                    if let Some(bad) = settings.only.iter().find(|p| !PARTS.contains(&p.as_str())) {
                        return Err(format!("unknown part {bad:?}; use {}", PARTS.join(", ")));
                    }
                }
                "--pace-ms" => {
                    let ms = args.next().ok_or("--pace-ms needs a number")?;
                    settings.pace_ms =
                        Some(ms.parse().map_err(|e| format!("--pace-ms {ms}: {e}"))?);
                }
                other if other.starts_with("--") => {
                    return Err(format!(
                        "unknown option {other}; options: --quick, --json, --db LIST, --only LIST, --pace-ms N"
                    ));
                }
                _ => {} // a name filter from `cargo bench <filter>`: everything runs
            }
        }
        Ok(settings)
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == lateness::REPLICA_ARG) {
        return lateness::replica_main(&args[1..]);
    }
    if !args.iter().any(|a| a == "--bench") {
        // `cargo test --all-targets` runs bench targets without `--bench`: never benchmark there.
        eprintln!(
            "shedlock-bench: a benchmark; run it with `cargo bench -p shedlock-bench` (nothing to test)"
        );
        return ExitCode::SUCCESS;
    }
    let settings = match Settings::parse(&args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("shedlock-bench: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = sink::install() {
        eprintln!("shedlock-bench: cannot install the statement sink: {e}");
        return ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("shedlock-bench: cannot start tokio: {e}");
            return ExitCode::FAILURE;
        }
    };
    // On a worker thread, as lock calls run in an application (a scheduler's spawned tasks),
    // not on the thread blocked in `block_on`, whose every wake-up crosses threads.
    let ok = runtime.block_on(async move {
        match tokio::spawn(async move { run(&settings).await }).await {
            Ok(ok) => ok,
            Err(e) => {
                eprintln!("shedlock-bench: the benchmark task failed: {e}");
                false
            }
        }
    });
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| default.to_owned())
}

fn interop_path() -> PathBuf {
    std::env::var_os("SHEDLOCK_INTEROP_SQL").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/interop/shedlock-sql.txt"),
        PathBuf::from,
    )
}

fn java_section(header: &str, placeholder: Placeholder) -> Option<Section> {
    let path = interop_path();
    match Section::load(&path, header, placeholder) {
        Ok(section) => Some(section),
        Err(e) => {
            eprintln!("shedlock-bench: no Java ShedLock baseline ({e}); set SHEDLOCK_INTEROP_SQL");
            None
        }
    }
}

/// One part's rows and whether it ran, saying (after `what`, such as the database's name) how
/// long it took or why it failed.
async fn timed(
    what: &str,
    part: impl std::future::Future<Output = harness::Result<Vec<Row>>>,
) -> (Vec<Row>, bool) {
    let t = Instant::now();
    match part.await {
        Ok(rows) => {
            eprintln!("{what}: done in {:.1} s", t.elapsed().as_secs_f64());
            (rows, true)
        }
        Err(e) => {
            eprintln!("{what}: {e}");
            (Vec::new(), false)
        }
    }
}

async fn run(settings: &Settings) -> bool {
    let mut plan = Plan::new(settings.quick);
    plan.only.clone_from(&settings.only);
    if let Some(ms) = settings.pace_ms {
        plan.pace = std::time::Duration::from_millis(ms);
    }
    let require = std::env::var("SHEDLOCK_REQUIRE_DB").is_ok_and(|v| v.trim() == "1");
    let started = Instant::now();
    eprintln!(
        "shedlock-bench: {} mode, {} cores, databases {}",
        if settings.quick { "quick" } else { "full" },
        std::thread::available_parallelism().map_or(0, std::num::NonZero::get),
        settings.databases.join(", ")
    );
    let mut rows: Vec<Row> = Vec::new();
    let mut ok = true;
    for db in &settings.databases {
        let (part, part_ok) = match db.as_str() {
            "postgres" => {
                let url = env_or("SHEDLOCK_PG_URL", DEFAULT_PG_URL);
                suite::run_all(&sql::Sql::<Postgres>::new(url, None), &plan).await
            }
            "mariadb" => {
                let url = env_or("SHEDLOCK_MYSQL_URL", DEFAULT_MYSQL_URL);
                suite::run_all(&sql::Sql::<MySql>::new(url, None), &plan).await
            }
            "redis" | "etcd" => {
                let var = if db == "redis" {
                    "SHEDLOCK_REDIS_URL"
                } else {
                    "SHEDLOCK_ETCD_URL"
                };
                match std::env::var(var).ok().filter(|v| !v.trim().is_empty()) {
                    None => {
                        eprintln!("{db}: no {var}");
                        (Vec::new(), false)
                    }
                    Some(url) if db == "redis" => timed(db, stores::redis(&url, &plan)).await,
                    Some(url) => timed(db, stores::etcd(&url, &plan)).await,
                }
            }
            // Skip and cycle, plain and over TLS: uncontended figures.
            "tls" if !plan.runs("uncontended") => (Vec::new(), true),
            "tls" => timed(db, Box::pin(tls::run(&plan))).await,
            "memory" => timed(db, suite::in_memory(&plan)).await,
            _ => match sqlite::temporary().await {
                Ok(backend) => suite::run(&backend, &plan).await,
                Err(e) => {
                    eprintln!("sqlite: cannot create the database: {e}");
                    (Vec::new(), false)
                }
            },
        };
        if !part_ok {
            if part.is_empty() && !require {
                eprintln!("{db}: skipped (set SHEDLOCK_REQUIRE_DB=1 to fail instead)");
            } else {
                ok = false;
            }
        }
        rows.extend(part);
    }
    eprintln!(
        "shedlock-bench: done in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    if settings.json {
        print!("{}", report::json(&rows));
    } else {
        println!("{}", report::table(&rows));
        let missed: Vec<String> = rows
            .iter()
            .filter(|r| r.verdict() == "MISSED")
            .map(|r| format!("{}: {}", r.db, r.metric))
            .collect();
        if !missed.is_empty() {
            println!("targets missed: {}", missed.join("; "));
        }
    }
    ok
}
