//! The `lateness` part (issue 31): how late the scheduler starts a fire, and what a fire instant
//! costs each replica, for 1, 100 and 1,000 jobs that all fire at the same instants.
//!
//! **Method.** Three replica processes (this benchmark's own executable, re-run in its replica
//! mode: [`replica_main`]) each run a [`Scheduler`] with `n` jobs `every 1s` and empty bodies on
//! one store, each on connections of its own through a counting proxy ([`Proxy`]). Over
//! [`Plan::lateness_fires`](crate::harness::Plan) fire instants (more with one job), the body
//! of the run that won a fire `F` records:
//!
//! - its **lateness**, the winning claim's `locked_at` − `F`, both on the store's clock (in µs on
//!   Postgres and Redis; MariaDB stores `locked_at` in whole milliseconds, truncated);
//! - its **start**, this host's wall clock at the body's start − `F`: the lateness plus the rest
//!   of the claim's round trip and the dispatch (the stores run on this host, so their clock is
//!   this host's);
//! - its **dispatch**, from the claim's reply to the body's start (`RunContext::answered_at`,
//!   monotonic).
//!
//! Each sample names its job and `F`, so fires run twice or not at all are counted. Each replica
//! measures its own CPU (all threads) over the window; the parent reads the proxies' round trips
//! (claims, releases and anything else the replica sends, such as a pool's pings) over the same
//! window. The parent also reads the CPU of the store's server over the window
//! ([`crate::server_cpu`]), less its background (its CPU per second over [`BACKGROUND`] at the
//! start of the part, with nothing running, × the window's length): the server's cost of one
//! fire across the three replicas (every claim of it, the winner's release, and the rest),
//! against its CPU per raw round trip.
//!
//! **Floors, in the same run.** The timer floor, measured right before each store
//! configuration: the same three processes with `n` tasks that sleep on plain `tokio::time` until
//! each whole second of the system clock, with no store; the first replica's tasks record how late
//! they woke, one sample per job and instant, as the store's winners give. The store's floor, at
//! the start of the store's part: one round trip (`SELECT 1` on one connection; Redis `PING`), the
//! median of [`ROUND_TRIPS`], with the server's CPU per round trip over them. A lateness figure's
//! ratio is against the timer floor's same quantile plus one round trip.
//!
//! The machine's load (one-minute average) is printed at the start and end of each store's part:
//! on the development machines the store's server shares the two cores with the replicas.
//! SQLite is not measured: three processes on one file would measure its file locking.

use std::collections::BTreeMap;
use std::process::{ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use shedlock_bench::report::{Row, Target};
use shedlock_bench::stats::quantile;
use shedlock_core::provider::LockProvider;
use shedlock_core::{Job, LockingTaskExecutor, Schedule, Scheduler};
use shedlock_redis::{RedisLockProvider, redis};
use shedlock_sqlx::sqlx::mysql::MySql;
use shedlock_sqlx::sqlx::postgres::Postgres;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use crate::fires::process_cpu_ns;
use crate::harness::{Plan, Result};
use crate::server_cpu::{Snapshot, Window};
use crate::sql::SqlDb;
use crate::wire::{Proxy, target, through};

/// The replicas of each configuration.
const REPLICAS: usize = 3;
/// The jobs of each configuration.
const JOB_COUNTS: [usize; 3] = [1, 100, 1_000];
/// Round trips timed for the store's floor.
const ROUND_TRIPS: usize = 200;
/// The argument that runs this executable as a replica.
pub(crate) const REPLICA_ARG: &str = "--lateness-replica";
/// The window the server's background CPU is measured over, at the start of the part.
const BACKGROUND: Duration = Duration::from_secs(3);
/// The 1,000-job goal on Postgres and Redis (issue 31), in µs.
const THOUSAND_JOBS_P99_GOAL_US: f64 = 20_000.0;

/// Where the replicas' locks live.
pub(crate) enum Store<'a> {
    /// A SQL database: its kind (`postgres`, `mariadb`), URL and lock table.
    Sql {
        kind: &'static str,
        url: &'a str,
        table: &'a str,
    },
    /// Redis: its URL and this run's key prefix.
    Redis { url: &'a str, prefix: &'a str },
}

impl Store<'_> {
    fn db(&self) -> &'static str {
        match self {
            Self::Sql { kind, .. } => kind,
            Self::Redis { .. } => "redis",
        }
    }

    fn url(&self) -> &str {
        match self {
            Self::Sql { url, .. } | Self::Redis { url, .. } => url,
        }
    }

    fn place(&self) -> &str {
        match self {
            Self::Sql { table, .. } => table,
            Self::Redis { prefix, .. } => prefix,
        }
    }

    /// The command names of the store's server processes on this host.
    fn server(&self) -> &'static [&'static str] {
        match self.db() {
            "postgres" => &["postgres"],
            "mariadb" => &["mariadbd", "mysqld"],
            _ => &["redis-server"],
        }
    }

    /// One round trip's median (µs), and the server's CPU over them, from after the connection
    /// is made.
    async fn round_trip_us(&self) -> Result<(f64, Window)> {
        let mut times = Vec::with_capacity(ROUND_TRIPS);
        let server = self.server();
        let window = match self {
            Self::Sql { kind, url, .. } => match *kind {
                "postgres" => round_trips::<Postgres>(url, server, &mut times).await?,
                _ => round_trips::<MySql>(url, server, &mut times).await?,
            },
            Self::Redis { url, .. } => {
                let mut conn = redis::Client::open(*url)?
                    .get_multiplexed_async_connection()
                    .await?;
                let before = Snapshot::take(server)?;
                for _ in 0..ROUND_TRIPS {
                    let t = Instant::now();
                    let _: String = redis::cmd("PING").query_async(&mut conn).await?;
                    times.push(t.elapsed().as_secs_f64() * 1e6);
                }
                Snapshot::take(server)?.since(&before)
            }
        };
        let median = quantile(&times, 0.5).ok_or("no round trip timed")?;
        Ok((median, window))
    }
}

/// Times [`ROUND_TRIPS`] `SELECT 1` on one connection into `times`; the CPU of the processes
/// named `server` over them.
async fn round_trips<D: SqlDb>(url: &str, server: &[&str], times: &mut Vec<f64>) -> Result<Window> {
    use shedlock_sqlx::sqlx::Connection as _;
    let mut conn = D::Connection::connect(url).await?;
    let before = Snapshot::take(server)?;
    for _ in 0..ROUND_TRIPS {
        let t = Instant::now();
        D::select1(&mut conn).await?;
        times.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let window = Snapshot::take(server)?.since(&before);
    conn.close().await?;
    Ok(window)
}

/// The system clock in µs since the Unix epoch.
fn wall_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// Sleeps until the system clock reads `at_us`.
async fn sleep_until_wall(at_us: i64) {
    let left = at_us - wall_us();
    if left > 0 {
        tokio::time::sleep(Duration::from_micros(left.unsigned_abs())).await;
    }
}

/// The one-minute load average.
fn load() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// One run a replica's job recorded: its job, `F` (Unix seconds), lateness, start and
/// dispatch (µs; no dispatch for the timer floor).
#[derive(Debug, Clone, Copy)]
struct Sample {
    job: u64,
    fire: i64,
    lateness: f64,
    start: f64,
    dispatch: Option<f64>,
}

/// What one replica reports at the end.
#[derive(Debug, Default)]
struct Report {
    /// The runs of the fires it won in the window.
    runs: Vec<Sample>,
    /// Its CPU over the window, ns.
    cpu_ns: u64,
    /// Fires counted missed, and store calls failed, over all jobs and the whole run.
    missed: u64,
    errors: u64,
}

impl Report {
    fn parse(line: &str) -> Result<Self> {
        let v: serde_json::Value = serde_json::from_str(line)?;
        let count = |key: &str| {
            v[key]
                .as_u64()
                .ok_or_else(|| format!("the replica's report has no {key}: {line}"))
        };
        let runs = v["runs"]
            .as_array()
            .ok_or_else(|| format!("the replica's report has no runs: {line}"))?
            .iter()
            .map(|r| {
                let bad = || format!("a malformed run {r} in the replica's report");
                Ok(Sample {
                    job: r[0].as_u64().ok_or_else(bad)?,
                    fire: r[1].as_i64().ok_or_else(bad)?,
                    lateness: r[2].as_f64().ok_or_else(bad)?,
                    start: r[3].as_f64().ok_or_else(bad)?,
                    dispatch: r[4].as_f64(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            runs,
            cpu_ns: count("cpu_ns")?,
            missed: count("missed")?,
            errors: count("errors")?,
        })
    }
}

/// One configuration's outcome: the replicas' reports, their round trips in the window, and the
/// store's server's CPU over it (`None` for the timer floor, which calls no store).
struct Outcome {
    reports: Vec<Report>,
    trips: Vec<u64>,
    server: Option<Window>,
}

impl Outcome {
    fn runs(&self) -> impl Iterator<Item = &Sample> {
        self.reports.iter().flat_map(|r| r.runs.iter())
    }

    fn of(&self, field: impl Fn(&Sample) -> Option<f64>) -> Vec<f64> {
        self.runs().filter_map(field).collect()
    }

    /// Fires run once, and fires run more than once.
    fn fires_run(&self) -> (usize, usize) {
        let mut runs: BTreeMap<(u64, i64), usize> = BTreeMap::new();
        for r in self.runs() {
            *runs.entry((r.job, r.fire)).or_default() += 1;
        }
        let twice = runs.values().filter(|&&n| n > 1).count();
        (runs.len() - twice, twice)
    }

    /// Mean CPU per replica and fire instant, µs.
    fn cpu_per_instant_us(&self, fires: u32) -> f64 {
        let total: u64 = self.reports.iter().map(|r| r.cpu_ns).sum();
        #[allow(clippy::cast_precision_loss)] // ns and counts well below 2^52
        let per = total as f64 / 1e3 / (self.reports.len() as f64 * f64::from(fires));
        per
    }
}

/// Runs three replicas of `kind` (`timer`, or the store's) with `jobs` jobs over `fires` fire
/// instants; `None` for the store: the timer floor. With a store, its server's CPU is read over
/// the window.
async fn configuration(store: Option<&Store<'_>>, jobs: usize, fires: u32) -> Result<Outcome> {
    let exe = std::env::current_exe()?;
    let mut proxies = Vec::new();
    // Start-up (connecting, registering the jobs, publishing their definitions) before the
    // window: more for more jobs.
    let lead = if jobs >= 1_000 { 6 } else { 3 };
    let first = wall_us() / 1_000_000 + lead;
    let last = first + i64::from(fires) - 1;
    let mut children = Vec::new();
    for k in 0..REPLICAS {
        let (kind, url, place) = match store {
            None => ("timer", String::new(), String::new()),
            Some(store) => {
                let proxy = Proxy::start(target(store.url())?).await?;
                let url = through(store.url(), proxy.port())?;
                proxies.push(proxy);
                (store.db(), url, store.place().to_owned())
            }
        };
        let mut child = Command::new(&exe)
            .arg(REPLICA_ARG)
            .args([
                kind,
                &url,
                &place,
                &format!("lateness-r{k}"),
                &jobs.to_string(),
                &first.to_string(),
                &last.to_string(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child.stdout.take().ok_or("the replica has no stdout")?;
        children.push((child, BufReader::new(stdout).lines()));
    }
    // The window: from half a second before the first fire to 900 ms after the last. A replica
    // that ended before it (it could not connect, or started late) is an error at once.
    sleep_until_wall(first * 1_000_000 - 500_000).await;
    for (k, (child, _)) in children.iter_mut().enumerate() {
        if let Some(status) = child.try_wait()? {
            return Err(format!("replica {k} exited with {status} before the window").into());
        }
    }
    let before: Vec<u64> = proxies.iter().map(|p| p.counts().0).collect();
    let server_before = store.map(|s| Snapshot::take(s.server())).transpose()?;
    sleep_until_wall(last * 1_000_000 + 900_000).await;
    let trips = proxies
        .iter()
        .zip(before)
        .map(|(p, b)| p.counts().0 - b)
        .collect();
    let server = match (store, server_before) {
        (Some(store), Some(before)) => Some(Snapshot::take(store.server())?.since(&before)),
        _ => None,
    };
    let mut reports = Vec::new();
    for (k, (mut child, mut lines)) in children.into_iter().enumerate() {
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .map_err(|_| format!("replica {k} did not report within 30 s of its last fire"))??;
        let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
            .await
            .map_err(|_| format!("replica {k} did not exit"))??;
        match line {
            Some(line) if status.success() => reports.push(Report::parse(&line)?),
            _ => return Err(format!("replica {k} exited with {status} without a report").into()),
        }
    }
    Ok(Outcome {
        reports,
        trips,
        server,
    })
}

/// The part on one store: for each job count, the timer floor and the store, one after the
/// other; the rows of both.
pub(crate) async fn run(store: &Store<'_>, plan: &Plan) -> Result<Vec<Row>> {
    let db = store.db();
    let load_at_start = load();
    let (rt, rt_window) = store.round_trip_us().await?;
    let background = server_background(store.server()).await?;
    let server = (background.processes > 0 && rt_window.processes > 0).then(|| {
        #[allow(clippy::cast_precision_loss)] // a count well below 2^52
        let per_trip = rt_window.net_ns(background.rate()) / 1e3 / ROUND_TRIPS as f64;
        (per_trip, background.rate())
    });
    if server.is_none() {
        eprintln!(
            "{db}: lateness: no {:?} process on this host: the server's CPU is left out",
            store.server()
        );
    }
    let mut rows = vec![
        Row::new(db, "lateness: floor, one round trip", rt, "us"),
        Row::new(
            db,
            "lateness: floor, server CPU per raw round trip (SELECT 1 / PING)",
            server.map_or(f64::NAN, |s| s.0),
            "us",
        ),
        Row::new(
            db,
            "lateness: server background CPU per second (subtracted)",
            server.map_or(f64::NAN, |s| s.1 / 1e3),
            "us",
        ),
    ];
    for jobs in JOB_COUNTS {
        let fires = if jobs == 1 {
            plan.lateness_fires_one
        } else {
            plan.lateness_fires
        };
        let timer = configuration(None, jobs, fires).await?;
        let on_store = configuration(Some(store), jobs, fires).await?;
        rows.extend(rows_of(db, jobs, fires, rt, &timer, &on_store));
        if let Some((per_trip, background)) = server {
            rows.extend(server_rows(
                db,
                jobs,
                fires,
                (per_trip, background),
                &on_store,
            ));
        }
    }
    rows.push(Row::new(
        db,
        "lateness: machine load (1-minute average) at the start of the part",
        load_at_start,
        "load",
    ));
    rows.push(Row::new(
        db,
        "lateness: machine load (1-minute average) at the end of the part",
        load(),
        "load",
    ));
    Ok(rows)
}

#[allow(clippy::cast_precision_loss)] // counts well below 2^52
fn rows_of(
    db: &str,
    jobs: usize,
    fires: u32,
    rt: f64,
    timer: &Outcome,
    on_store: &Outcome,
) -> Vec<Row> {
    let mut rows = Vec::new();
    let count = |metric: String, value: usize| Row::new(db, metric, value as f64, "count");
    let due = (jobs as f64) * f64::from(fires);
    let (once, twice) = on_store.fires_run();
    rows.push(
        count(format!("lateness: fires run once ({jobs} jobs)"), once)
            .ratio(Some(once as f64 / due), "fires due"),
    );
    rows.push(count(
        format!("lateness: fires run more than once ({jobs} jobs)"),
        twice,
    ));
    let late = on_store.of(|r| Some(r.lateness));
    let floor = timer.of(|r| Some(r.lateness));
    for (q, name) in [(0.5, "p50"), (0.99, "p99"), (1.0, "max")] {
        let value = quantile(&late, q).unwrap_or(f64::NAN);
        let floor_q = quantile(&floor, q).unwrap_or(f64::NAN);
        rows.push(Row::new(
            db,
            format!("lateness: timer floor {name} ({jobs} jobs)"),
            floor_q,
            "us",
        ));
        let mut row = Row::new(
            db,
            format!("lateness {name} ({db}, {jobs} jobs)"),
            value,
            "us",
        )
        .ratio(Some(value / (floor_q + rt)), "timer floor + 1 round trip");
        if name == "p99" && jobs == 1 {
            row = row.target(Target::ValueAtMost(floor_q + 2.0 * rt));
        } else if name == "p99" && jobs == 1_000 {
            row = row.target(Target::ValueAtMost(THOUSAND_JOBS_P99_GOAL_US));
        }
        rows.push(row);
    }
    let start = on_store.of(|r| Some(r.start));
    let dispatch = on_store.of(|r| r.dispatch);
    for (q, name) in [(0.5, "p50"), (0.99, "p99")] {
        rows.push(Row::new(
            db,
            format!("lateness: body start {name}, wall clock − F ({jobs} jobs)"),
            quantile(&start, q).unwrap_or(f64::NAN),
            "us",
        ));
        rows.push(Row::new(
            db,
            format!("lateness: dispatch {name}, claim's reply to body ({jobs} jobs)"),
            quantile(&dispatch, q).unwrap_or(f64::NAN),
            "us",
        ));
    }
    let trips: u64 = on_store.trips.iter().sum();
    let per_instant = trips as f64 / on_store.trips.len().max(1) as f64 / f64::from(fires);
    rows.push(
        Row::new(
            db,
            format!("lateness: round trips per replica per fire instant ({jobs} jobs)"),
            per_instant,
            "count",
        )
        .ratio(Some(per_instant / jobs as f64), "jobs"),
    );
    let (cpu, cpu_floor) = (
        on_store.cpu_per_instant_us(fires),
        timer.cpu_per_instant_us(fires),
    );
    rows.push(
        Row::new(
            db,
            format!("lateness: replica CPU per fire instant ({jobs} jobs)"),
            cpu,
            "us",
        )
        .ratio(Some(cpu / cpu_floor), "timer floor's"),
    );
    let (missed, errors) = on_store
        .reports
        .iter()
        .fold((0, 0), |(m, e), r| (m + r.missed, e + r.errors));
    rows.push(Row::new(
        db,
        format!("lateness: fires missed, whole run ({jobs} jobs)"),
        missed as f64,
        "count",
    ));
    rows.push(Row::new(
        db,
        format!("lateness: store calls failed, whole run ({jobs} jobs)"),
        errors as f64,
        "count",
    ));
    rows
}

/// The server's CPU per second (ns) while nothing of the benchmark runs, measured once at the
/// start of the part, before any configuration: [`BACKGROUND`] long.
async fn server_background(server: &[&str]) -> Result<Window> {
    let before = Snapshot::take(server)?;
    tokio::time::sleep(BACKGROUND).await; // the window's length, not a synchronisation
    Ok(Snapshot::take(server)?.since(&before))
}

/// The server's cost of one fire: its CPU over the store's window, less its background
/// (`raw.1`, ns per second) × the window's length, per fire due (every replica's claim of it,
/// the winner's release, and what else the replicas sent), against the server's CPU per raw
/// round trip (`raw.0`, µs); per round trip on the wire (not on Redis, whose round trips carry
/// many pipelined commands); and the server's threads that ended in the window (their share is
/// missing).
#[allow(clippy::cast_precision_loss)] // ns and counts well below 2^52
fn server_rows(db: &str, jobs: usize, fires: u32, raw: (f64, f64), on_store: &Outcome) -> Vec<Row> {
    let Some(window) = on_store.server.filter(|w| w.processes > 0) else {
        eprintln!("{db}: lateness: the server's processes were gone at the end of the window");
        return Vec::new();
    };
    let net_us = window.net_ns(raw.1) / 1e3;
    let per_fire = net_us / (jobs as f64 * f64::from(fires));
    let mut rows = vec![
        Row::new(
            db,
            format!("lateness: server CPU per fire, all replicas' calls ({jobs} jobs)"),
            per_fire,
            "us",
        )
        .ratio(Some(per_fire / raw.0), "server CPU per raw round trip"),
    ];
    if db != "redis" {
        let trips: u64 = on_store.trips.iter().sum();
        rows.push(Row::new(
            db,
            format!("lateness: server CPU per round trip on the wire ({jobs} jobs)"),
            net_us / trips.max(1) as f64,
            "us",
        ));
    }
    rows.push(Row::new(
        db,
        format!("lateness: server threads that ended in the window ({jobs} jobs)"),
        window.ended as f64,
        "count",
    ));
    rows
}

// ---------------------------------------------------------------------------------------------
// The replica mode.

/// What the replica's jobs record: each run in the window.
type Samples = Arc<Mutex<Vec<Sample>>>;

/// The replica mode: `--lateness-replica KIND URL PLACE LABEL JOBS FIRST LAST`, where `KIND` is
/// `timer` (no store), `postgres`, `mariadb` or `redis`, `PLACE` the lock table or key prefix, and
/// `FIRST`/`LAST` the window's first and last fire (Unix seconds). Prints one JSON line.
pub(crate) fn replica_main(args: &[String]) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("lateness replica: cannot start tokio: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(replica(args)) {
        Ok(line) => {
            // The parent reads this line: stdout is the channel, not a log.
            #[allow(clippy::print_stdout)]
            {
                println!("{line}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("lateness replica: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn replica(args: &[String]) -> Result<String> {
    let [kind, url, place, label, jobs, first, last] = args else {
        return Err(format!("{REPLICA_ARG} needs 7 arguments, got {}", args.len()).into());
    };
    let jobs: usize = jobs.parse()?;
    let window: (i64, i64) = (first.parse()?, last.parse()?);
    let samples: Samples = Arc::default();
    let (cpu_ns, missed, errors) = match kind.as_str() {
        // One replica records the timers, so the floor has a sample per job and instant.
        "timer" => (
            timers(jobs, window, &samples, label.ends_with("r0")).await?,
            0,
            0,
        ),
        "postgres" => {
            let provider = <Postgres as SqlDb>::from_url(url, place, None).await?;
            scheduled(provider, label, jobs, window, &samples).await?
        }
        "mariadb" => {
            let provider = <MySql as SqlDb>::from_url(url, place, None).await?;
            scheduled(provider, label, jobs, window, &samples).await?
        }
        "redis" => {
            let provider = RedisLockProvider::builder(url.as_str())
                .key_prefix(place)
                .connect()
                .await?;
            scheduled(provider, label, jobs, window, &samples).await?
        }
        other => return Err(format!("unknown replica kind {other:?}").into()),
    };
    let samples = std::mem::take(&mut *samples.lock().map_err(|_| "poisoned")?);
    let runs: Vec<serde_json::Value> = samples
        .iter()
        .map(|s| serde_json::json!([s.job, s.fire, s.lateness, s.start, s.dispatch]))
        .collect();
    Ok(serde_json::json!({
        "runs": runs,
        "cpu_ns": cpu_ns,
        "missed": missed,
        "errors": errors,
    })
    .to_string())
}

/// The CPU (ns) this process spends from half a second before the window's first fire to
/// 900 ms after its last.
async fn window_cpu(window: (i64, i64)) -> Result<u64> {
    sleep_until_wall(window.0 * 1_000_000 - 500_000).await;
    let start = process_cpu_ns()?;
    sleep_until_wall(window.1 * 1_000_000 + 900_000).await;
    Ok(process_cpu_ns()? - start)
}

/// Whether fire `f_us` is in the window.
fn in_window(f_us: i64, window: (i64, i64)) -> bool {
    (window.0 * 1_000_000..=window.1 * 1_000_000).contains(&f_us)
}

/// Adds a sample if `F` (µs) is in the window.
fn push(
    samples: &Samples,
    window: (i64, i64),
    job: usize,
    f_us: i64,
    (lateness, start, dispatch): (f64, f64, Option<f64>),
) {
    if in_window(f_us, window)
        && let Ok(mut s) = samples.lock()
    {
        s.push(Sample {
            job: job as u64,
            fire: f_us / 1_000_000,
            lateness,
            start,
            dispatch,
        });
    }
}

/// The timer floor: `jobs` tasks, each sleeping until the next whole second of the system
/// clock, as a scheduler without a store would; recorded if `recording`.
async fn timers(
    jobs: usize,
    window: (i64, i64),
    samples: &Samples,
    recording: bool,
) -> Result<u64> {
    let end = window.1 * 1_000_000;
    let mut tasks = Vec::new();
    for job in 0..jobs {
        let samples = samples.clone();
        tasks.push(tokio::spawn(async move {
            loop {
                let now = wall_us();
                let next = (now / 1_000_000 + 1) * 1_000_000;
                if next > end {
                    return;
                }
                sleep_until_wall(next).await;
                let late = wall_us() - next;
                if recording {
                    #[allow(clippy::cast_precision_loss)] // µs well below 2^52
                    let late = late as f64;
                    push(&samples, window, job, next, (late, late, None));
                }
            }
        }));
    }
    let cpu = window_cpu(window).await?;
    for task in tasks {
        task.await?;
    }
    Ok(cpu)
}

/// `jobs` jobs every second on `provider`; returns the window's CPU, and the fires counted missed
/// and the store calls failed over the run.
async fn scheduled<P: LockProvider + 'static>(
    provider: P,
    label: &str,
    jobs: usize,
    window: (i64, i64),
    samples: &Samples,
) -> Result<(u64, u64, u64)> {
    let executor = LockingTaskExecutor::builder(provider)
        .owner_id(label)
        .default_at_most(Duration::from_secs(10))
        .build()?;
    let scheduler = Scheduler::new(executor);
    let names: Vec<String> = (0..jobs).map(|i| format!("lateness-{jobs}-{i}")).collect();
    for (job, name) in names.iter().enumerate() {
        let samples = samples.clone();
        scheduler.add(Job::new(
            name.as_str(),
            Schedule::every(Duration::from_secs(1))?,
            move |run| {
                let dispatch = run.answered_at().elapsed();
                let started = wall_us();
                let f_us = run.fire().at().timestamp_micros();
                let late = (run.lock().record().locked_at() - run.fire().at()).num_microseconds();
                let samples = samples.clone();
                async move {
                    if let Some(late) = late {
                        #[allow(clippy::cast_precision_loss)] // µs well below 2^52
                        let sample = (
                            late as f64,
                            (started - f_us) as f64,
                            Some(dispatch.as_secs_f64() * 1e6),
                        );
                        push(&samples, window, job, f_us, sample);
                    }
                }
            },
        ))?;
    }
    scheduler.start().await?;
    if wall_us() > window.0 * 1_000_000 - 500_000 {
        return Err("the scheduler started after the window had begun".into());
    }
    let cpu = window_cpu(window).await?;
    let (mut missed, mut errors) = (0, 0);
    for name in &names {
        if let Some(s) = scheduler.status(name) {
            missed += s.missed;
            errors += s.store_errors;
        }
    }
    scheduler.shutdown(Duration::from_secs(2)).await;
    Ok((cpu, missed, errors))
}
