//! One database's run: the uncontended variants interleaved, the contention races, pool
//! pressure and the latch load, turned into report rows.

use std::time::{Duration, Instant};

use shedlock_bench::report::{Row, Target};
use shedlock_bench::stats::{median, median_ratio};
use shedlock_core::jobs::HistoryPolicy;
use shedlock_core::{LockConfig, provider::LockProvider};

use crate::fires::cpu_per_fire;
use crate::harness::{
    AT_MOST, Contention, ExecutorRun, FLOOR_CYCLE, FLOOR_OWNER, HELD, MacroRun, Op, POOL_CYCLE,
    Plan, ProviderCycle, ProviderRacer, ProviderSkip, Racer, Result, SpawnedProviderSkip,
    StatementsPerCall, TimedProviderSkip, Variant, contend, executor, hold_elsewhere, interleave,
    latch_load, pool_pressure,
};
use crate::sink;
use crate::sql::{Sql, SqlDb, closer};
use crate::stores::{WalProbe, round_trips};
use crate::wire::{Proxy, target, through};

/// The statements a provider sent for each kind of call, captured from sqlx.
#[derive(Debug, Clone, Default)]
pub(crate) struct Captured {
    pub(crate) acquire_won: Vec<String>,
    pub(crate) acquire_held: Vec<String>,
    pub(crate) extend: Vec<String>,
    pub(crate) release: Vec<String>,
    pub(crate) holder: Vec<String>,
}

impl Captured {
    #[allow(clippy::cast_precision_loss)] // a few statements
    fn per_call(&self) -> StatementsPerCall {
        StatementsPerCall {
            acquire_won: self.acquire_won.len() as f64,
            acquire_held: self.acquire_held.len() as f64,
            extend: self.extend.len() as f64,
            release: self.release.len() as f64,
            holder: self.holder.len() as f64,
        }
    }
}

/// The raw floor of one database, each operation on a connection of its own.
pub(crate) struct Floor {
    /// `SELECT 1`: one round trip.
    pub(crate) select1: Box<dyn Op>,
    /// The provider's acquire statement(s) on a lock another owner holds.
    pub(crate) skip: Box<dyn Op>,
    /// The provider's read of one lock row (`holder`'s statement) by its primary key: the floor
    /// of any statement that must read the row, as a skip must (issue 31).
    pub(crate) read: Box<dyn Op>,
    /// The provider's acquire and release statements.
    pub(crate) cycle: Box<dyn Op>,
    /// Further raw cycles, compared with `cycle` (for trying a change to the statements).
    pub(crate) extra_cycles: Vec<Variant>,
}

/// The provider's statements raw on the provider's pool, a checkout per statement.
pub(crate) struct PoolRaw {
    pub(crate) skip: Box<dyn Op>,
    pub(crate) cycle: Box<dyn Op>,
}

/// A race other than through the provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RawRace {
    /// The provider's statements on raw connections: the contention floor.
    Statements,
    /// The database's advisory lock through sqlx, one connection per racer (Postgres
    /// `PgAdvisoryLock`: `pg_try_advisory_lock` / `pg_advisory_unlock`; MariaDB `GET_LOCK(name,
    /// 0)` / `RELEASE_LOCK`): no row and no durable write, the peer of issue 16.
    Advisory,
    /// Java ShedLock's statement sequence (`UPDATE` to acquire, `UNLOCK` to release), each in
    /// autocommit: the cheapest way to send it, so the strictest baseline.
    Java,
    /// The same, each statement in a transaction of its own, as ShedLock's
    /// `JdbcTemplateStorageAccessor` runs it (`PROPAGATION_REQUIRES_NEW`). sqlx sends `BEGIN`
    /// as a round trip of its own where pgjdbc sends it with the statement, so this costs Java
    /// one round trip more than it pays: an upper bound of its cost.
    JavaTransactions,
}

impl RawRace {
    fn label(self) -> &'static str {
        match self {
            Self::Statements => "provider statements raw (floor)",
            Self::Advisory => "advisory lock",
            Self::Java => "Java ShedLock sequence",
            Self::JavaTransactions => "Java ShedLock sequence in transactions",
        }
    }
}

fn table_name() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("shedlock_bench_{}_{nanos:x}", std::process::id())
}

/// [`run`], then the `lateness` part, which runs replica processes on a table of its own.
pub(crate) async fn run_all<D: SqlDb>(backend: &Sql<D>, plan: &Plan) -> (Vec<Row>, bool) {
    let (mut rows, ok) = run(backend, plan).await;
    let (late, late_ok) = lateness(backend, plan).await;
    rows.extend(late);
    (rows, ok && late_ok)
}

/// The `lateness` part on Postgres, and on MariaDB in a full run (see
/// [`Plan::lateness_on_mariadb`]); nothing on the others.
async fn lateness<D: SqlDb>(backend: &Sql<D>, plan: &Plan) -> (Vec<Row>, bool) {
    let db = D::DB;
    let here = db == "postgres" || (db == "mariadb" && plan.lateness_on_mariadb);
    if !plan.runs("lateness") || !here {
        return (Vec::new(), true);
    }
    let table = table_name();
    let part = async {
        let result = async {
            let provider = backend.provider(&table).await?;
            backend.create_table(&provider).await?;
            closer::<D>(&provider).await;
            let store = crate::lateness::Store::Sql {
                kind: db,
                url: &backend.url,
                table: &table,
            };
            crate::lateness::run(&store, plan).await
        }
        .await;
        if let Err(e) = backend.drop_table(&table).await {
            eprintln!("{db}: could not drop {table}: {e}");
        }
        result
    };
    crate::timed(&format!("{db}: lateness"), part).await
}

/// Runs every part against one database; a part that fails is reported on stderr and leaves
/// its rows out. Returns the rows and whether everything ran.
pub(crate) async fn run<D: SqlDb>(backend: &Sql<D>, plan: &Plan) -> (Vec<Row>, bool) {
    let db = D::DB;
    let table = table_name();
    let mut rows = Vec::new();
    let setup = async {
        let provider = backend.provider(&table).await?;
        backend.create_table(&provider).await?;
        hold_elsewhere(&provider).await?;
        let captured = probe(&provider).await?;
        Ok::<_, crate::harness::BoxError>((provider, captured))
    };
    let (provider, captured) = match setup.await {
        Ok(x) => x,
        Err(e) => {
            eprintln!("{db}: setup failed: {e}");
            let _ = backend.drop_table(&table).await;
            return (rows, false);
        }
    };
    eprintln!(
        "{db}: table {table}; statements per call: acquire won {}, acquire held {}, release {}, extend {}, holder {}",
        captured.acquire_won.len(),
        captured.acquire_held.len(),
        captured.release.len(),
        captured.extend.len(),
        captured.holder.len()
    );

    let mut ok = true;
    let mut stage = async |what: &str, part: Result<Vec<Row>>, t: Instant| {
        eprintln!("{db}: {what} done in {:.1} s", t.elapsed().as_secs_f64());
        match part {
            Ok(part) => rows.extend(part),
            Err(e) => {
                eprintln!("{db}: {what}: {e}");
                ok = false;
            }
        }
    };
    let mut floor_cycle_us = None;
    if plan.runs("uncontended") {
        let t = Instant::now();
        let part = match uncontended(backend, &table, &provider, &captured, plan).await {
            Ok((part, cycle)) => {
                floor_cycle_us = cycle;
                Ok(part)
            }
            Err(e) => Err(e),
        };
        stage("uncontended", part, t).await;
    }
    if plan.runs("server") && db == "postgres" {
        let t = Instant::now();
        let part = server_skip(backend, &table, &captured, plan).await;
        stage("server skip (pgbench)", part, t).await;
    }
    if plan.runs("contention") {
        let t = Instant::now();
        let part = contention(backend, &table, &provider, &captured, plan).await;
        stage("contention", part, t).await;
    }
    if plan.runs("pressure") {
        let t = Instant::now();
        let part = pressure(backend, &table, plan, floor_cycle_us).await;
        stage("pool pressure", part, t).await;
    }
    if plan.runs("latch") {
        let t = Instant::now();
        let part = latch(db, &provider, &captured, plan).await;
        stage("latch", part, t).await;
    }
    if plan.runs("fires") {
        let t = Instant::now();
        let part = fires(backend, &table, &provider, plan).await;
        stage("fires", part, t).await;
    }
    if plan.runs("jobs") {
        let t = Instant::now();
        let part = jobs(backend, &table, plan).await;
        stage("jobs", part, t).await;
    }
    if plan.runs("tower") {
        let t = Instant::now();
        let part = crate::tower::run(db, &provider, plan).await;
        stage("tower", part, t).await;
    }
    if plan.runs("trigger") {
        let t = Instant::now();
        let part = trigger(backend, &table, &provider, plan).await;
        stage("trigger", part, t).await;
    }
    if plan.runs("web") {
        let t = Instant::now();
        stage("web", crate::web::run(db, &provider, plan).await, t).await;
    }
    closer::<D>(&provider).await;
    if let Err(e) = backend.drop_table(&table).await {
        eprintln!("{db}: could not drop {table}: {e}");
    }
    (rows, ok)
}

/// Statements per second of a leader and a follower latch at the default timings.
async fn latch<P: LockProvider + Clone>(
    db: &str,
    provider: &P,
    captured: &Captured,
    plan: &Plan,
) -> Result<Vec<Row>> {
    let load = latch_load(
        provider.clone(),
        "bench-election",
        plan.latch_window,
        &captured.per_call(),
    )
    .await?;
    Ok(vec![
        Row::new(db, "latch: leader (default timings)", load.leader, "stmt/s"),
        Row::new(
            db,
            "latch: follower (default timings)",
            load.follower,
            "stmt/s",
        ),
    ])
}

/// The server's side of a skip, under `pgbench` (Postgres).
async fn server_skip<D: SqlDb>(
    backend: &Sql<D>,
    table: &str,
    captured: &Captured,
    plan: &Plan,
) -> Result<Vec<Row>> {
    crate::pgbench::skip_throughput(
        &backend.url,
        table,
        &captured.acquire_held.join(";"),
        backend.java(),
        (plan.server_rounds, plan.server_seconds),
    )
    .await
}

/// The scheduler's CPU per fire against `execute`, then round trips, statements and WAL bytes
/// per operation and per fire, counted on a provider behind a counting proxy.
async fn fires<D: SqlDb>(
    backend: &Sql<D>,
    table: &str,
    provider: &D::Provider,
    plan: &Plan,
) -> Result<Vec<Row>> {
    let mut rows = cpu_per_fire(D::DB, provider, plan.fire_rounds, plan.fire_window).await?;
    let Ok(server) = target(&backend.url) else {
        eprintln!("{}: no network server: round trips left out", D::DB);
        return Ok(rows);
    };
    let proxy = Proxy::start(server).await?;
    let wired = backend
        .provider_at(&through(&backend.url, proxy.port())?, table)
        .await?;
    let mut wal = D::wal_probe(backend.url.clone()).await?;
    let wal = wal.as_mut().map(|w| &mut **w as &mut dyn WalProbe);
    let counted = round_trips(D::DB, &wired, &proxy, wal).await;
    closer::<D>(&wired).await;
    rows.extend(counted?);
    Ok(rows)
}

/// Run now's delivery, and the poll's round trips behind a proxy where the database has a wire
/// ([`crate::trigger`]). Postgres pushes (`LISTEN/NOTIFY`); the others are polled.
async fn trigger<D: SqlDb>(
    backend: &Sql<D>,
    table: &str,
    provider: &D::Provider,
    plan: &Plan,
) -> Result<Vec<Row>> {
    let pushes = D::DB == "postgres";
    let Ok(server) = target(&backend.url) else {
        return crate::trigger::run(D::DB, provider, None, pushes, plan).await;
    };
    let proxy = Proxy::start(server).await?;
    let wired = backend
        .provider_at(&through(&backend.url, proxy.port())?, table)
        .await?;
    let rows = crate::trigger::run(D::DB, provider, Some((&wired, &proxy)), pushes, plan).await;
    closer::<D>(&wired).await;
    rows
}

/// The recorded release against the plain one, and history on against off, on providers of
/// their own ([`crate::jobs`]); counted behind a proxy where the database has a wire.
async fn jobs<D: SqlDb>(backend: &Sql<D>, table: &str, plan: &Plan) -> Result<Vec<Row>> {
    let policy = HistoryPolicy::keep(crate::jobs::KEEP);
    let off = backend.provider(table).await?;
    let on = backend
        .provider_with_history(&backend.url, table, policy)
        .await?;
    let providers = crate::jobs::Providers {
        off: &off,
        on: Some(&on),
    };
    let rows = match target(&backend.url) {
        Ok(server) => {
            let proxy = Proxy::start(server).await?;
            let url = through(&backend.url, proxy.port())?;
            let wired_off = backend.provider_at(&url, table).await?;
            let wired_on = backend.provider_with_history(&url, table, policy).await?;
            let wired = crate::jobs::Providers {
                off: &wired_off,
                on: Some(&wired_on),
            };
            let rows = crate::jobs::run(D::DB, &providers, Some((&wired, &proxy)), plan).await;
            closer::<D>(&wired_off).await;
            closer::<D>(&wired_on).await;
            rows
        }
        Err(_) => crate::jobs::run(D::DB, &providers, None, plan).await,
    };
    closer::<D>(&off).await;
    closer::<D>(&on).await;
    rows
}

/// Warms the provider up (table check, pool), then captures the statements of each call.
async fn probe<P: LockProvider>(provider: &P) -> Result<Captured> {
    const NAME: &str = "bench-probe";
    for _ in 0..3 {
        let record = provider
            .acquire(NAME, AT_MOST, FLOOR_OWNER)
            .await?
            .ok_or("probe: lock not free")?;
        provider.release(&record, Duration::ZERO).await?;
    }
    let (record, acquire_won) = sink::capture(provider.acquire(NAME, AT_MOST, FLOOR_OWNER)).await;
    let record = record?.ok_or("probe: lock not free")?;
    let (extended, extend) = sink::capture(provider.extend(&record, AT_MOST)).await;
    let record = extended?.ok_or("probe: extend refused")?;
    let (_, holder) = sink::capture(provider.holder(NAME)).await;
    let (released, release) = sink::capture(provider.release(&record, Duration::ZERO)).await;
    if !released? {
        return Err("probe: release matched no row".into());
    }
    let (got, acquire_held) = sink::capture(provider.acquire(HELD, AT_MOST, FLOOR_OWNER)).await;
    if got?.is_some() {
        return Err("probe: acquired a held lock".into());
    }
    let captured = Captured {
        acquire_won,
        acquire_held,
        extend,
        release,
        holder,
    };
    if captured.acquire_won.is_empty() || captured.release.is_empty() {
        return Err(
            format!("probe: no statement captured ({captured:?}); is the sink installed?").into(),
        );
    }
    Ok(captured)
}

pub(crate) struct Samples {
    pub(crate) metrics: Vec<String>,
    pub(crate) values: Vec<Vec<f64>>,
}

impl Samples {
    pub(crate) fn of(&self, metric: &str) -> &[f64] {
        self.metrics
            .iter()
            .position(|m| m == metric)
            .map_or(&[], |i| &self.values[i])
    }
}

const SELECT1: &str = "select 1 (round trip)";
const SKIP_FLOOR: &str = "skip: statement raw (floor)";
const READ_FLOOR: &str = "read of the lock row by its key, raw";
const CYCLE_FLOOR: &str = "cycle: statements raw (floor)";
pub(crate) const SKIP_PROVIDER: &str = "skip: provider";
pub(crate) const SKIP_EXECUTOR: &str = "skip: executor";
pub(crate) const SKIP_MACRO: &str = "skip: #[scheduled_lock]";
const SKIP_DEFAULT: &str = "skip: provider on default sqlx pool";
pub(crate) const CYCLE_PROVIDER: &str = "cycle: provider";
pub(crate) const CYCLE_EXECUTOR: &str = "cycle: executor";
pub(crate) const CYCLE_MACRO: &str = "cycle: #[scheduled_lock]";
const CYCLE_DEFAULT: &str = "cycle: provider on default sqlx pool";
const SKIP_SPAWNED: &str = "skip: provider in a spawned task";
const SKIP_TIMED: &str = "skip: provider in one more tokio timeout";
const SKIP_POOL: &str = "skip: statement raw on a sqlx pool (pool_options)";
const CYCLE_POOL: &str = "cycle: statements raw on a sqlx pool (pool_options)";
const SKIP_FLOOR_B2B: &str = "back to back: skip statement raw (floor)";
const SKIP_PROVIDER_B2B: &str = "back to back: skip through provider";
const CYCLE_FLOOR_B2B: &str = "back to back: cycle statements raw (floor)";
const CYCLE_PROVIDER_B2B: &str = "back to back: cycle through provider";
const SELECT1_B2B: &str = "back to back: select 1 (one connection)";
const SKIP_POOL1_B2B: &str = "pool of 1, back to back: skip through provider";
const CYCLE_POOL1_B2B: &str = "pool of 1, back to back: cycle through provider";
/// Postgres only: the provider in transaction-pooler mode (`?transaction_pooler=true`: each
/// statement unnamed inside `BEGIN` … `COMMIT`), on the same direct connection.
const SKIP_POOLER: &str = "skip: provider in transaction-pooler mode";
const CYCLE_POOLER: &str = "cycle: provider in transaction-pooler mode";

/// The interleaved uncontended variants; also returns the floor cycle's median (µs).
async fn uncontended<D: SqlDb>(
    backend: &Sql<D>,
    table: &str,
    provider: &D::Provider,
    captured: &Captured,
    plan: &Plan,
) -> Result<(Vec<Row>, Option<f64>)> {
    // The floor's lock rows exist before it runs (an update alone never inserts on MySQL).
    for name in [FLOOR_CYCLE, POOL_CYCLE] {
        let record = provider
            .acquire(name, AT_MOST, FLOOR_OWNER)
            .await?
            .ok_or("floor lock not free")?;
        provider.release(&record, Duration::ZERO).await?;
    }
    let floor = backend.floor(captured).await?;
    let floor_b2b = backend.floor(captured).await?;
    // Back to back on a provider of its own: bursts grow a pool, which would change what the
    // paced variants measure.
    let provider_b2b = backend.provider(table).await?;
    // Issue 16's floor: one connection, calls back to back, so a call that waits for the
    // previous one's leftovers (sqlx's return ping) shows it.
    let (provider_one, _) = backend.provider_on_pool_of(table, 1).await?;
    let on_default = backend.provider_on_default_pool(table).await?;
    let extra_names: Vec<String> = floor
        .extra_cycles
        .iter()
        .map(|v| v.metric.clone())
        .collect();
    let pool_raw = backend.pool_raw(captured).await?;
    let mut variants = library_variants(floor, provider, &on_default)?;
    variants.extend([
        Variant::boxed(SKIP_POOL, pool_raw.skip),
        Variant::boxed(CYCLE_POOL, pool_raw.cycle),
        Variant::boxed(SKIP_FLOOR_B2B, floor_b2b.skip).back_to_back(),
        Variant::boxed(CYCLE_FLOOR_B2B, floor_b2b.cycle).back_to_back(),
        Variant::new(
            SKIP_PROVIDER_B2B,
            ProviderSkip {
                provider: provider_b2b.clone(),
                owner: "bench-provider".into(),
            },
        )
        .back_to_back(),
        Variant::new(
            CYCLE_PROVIDER_B2B,
            ProviderCycle {
                provider: provider_b2b.clone(),
                name: "bench-provider".into(),
                owner: "bench-provider".into(),
            },
        )
        .back_to_back(),
        Variant::boxed(SELECT1_B2B, floor_b2b.select1).back_to_back(),
        Variant::new(
            SKIP_POOL1_B2B,
            ProviderSkip {
                provider: provider_one.clone(),
                owner: "bench-pool1".into(),
            },
        )
        .back_to_back(),
        Variant::new(
            CYCLE_POOL1_B2B,
            ProviderCycle {
                provider: provider_one.clone(),
                name: "bench-pool1".into(),
                owner: "bench-pool1".into(),
            },
        )
        .back_to_back(),
    ]);
    let pooler = pooler_provider(backend, table).await?;
    if let Some(pooler) = &pooler {
        variants.extend(pooler_variants(pooler));
    }
    for v in floor_b2b.extra_cycles {
        v.op.close().await;
    }
    floor_b2b.read.close().await;
    // For profiling: SHEDLOCK_BENCH_VARIANTS=name[,name…] keeps only the variants named.
    if let Ok(filter) = std::env::var("SHEDLOCK_BENCH_VARIANTS") {
        let keep: Vec<&str> = filter.split(',').map(str::trim).collect();
        let (kept, dropped): (Vec<Variant>, Vec<Variant>) = variants
            .into_iter()
            .partition(|v| keep.contains(&v.metric.as_str()));
        for v in dropped {
            v.op.close().await;
        }
        variants = kept;
    }
    let measured = interleave(&mut variants, plan).await;
    let metrics = variants.iter().map(|v| v.metric.clone()).collect();
    for v in variants {
        v.op.close().await;
    }
    closer::<D>(&on_default).await;
    closer::<D>(&provider_b2b).await;
    closer::<D>(&provider_one).await;
    if let Some(pooler) = &pooler {
        closer::<D>(pooler).await;
    }
    let s = Samples {
        metrics,
        values: measured?,
    };
    let mut rows = uncontended_rows(D::DB, &s, captured, &extra_names);
    if pooler.is_some() {
        rows.extend(pooler_rows(D::DB, &s));
    }
    Ok((rows, median(s.of(CYCLE_FLOOR))))
}

/// What transaction-pooler mode costs on a direct connection: a provider in that mode
/// (`?transaction_pooler=true`) on Postgres, where the URL parameter exists; `None` elsewhere.
async fn pooler_provider<D: SqlDb>(backend: &Sql<D>, table: &str) -> Result<Option<D::Provider>> {
    if D::DB != "postgres" {
        return Ok(None);
    }
    let separator = if backend.url.contains('?') { '&' } else { '?' };
    let url = format!("{}{separator}transaction_pooler=true", backend.url);
    Ok(Some(backend.provider_at(&url, table).await?))
}

/// Skip and cycle through a provider in transaction-pooler mode.
fn pooler_variants<P: LockProvider + Clone>(provider: &P) -> [Variant; 2] {
    [
        Variant::new(
            SKIP_POOLER,
            ProviderSkip {
                provider: provider.clone(),
                owner: "bench-pooler".into(),
            },
        ),
        Variant::new(
            CYCLE_POOLER,
            ProviderCycle {
                provider: provider.clone(),
                name: "bench-pooler".into(),
                owner: "bench-pooler".into(),
            },
        ),
    ]
}

/// Transaction-pooler mode against the floor and against the default provider.
fn pooler_rows(db: &str, s: &Samples) -> [Row; 4] {
    let row = |metric: &str, floor: &str| {
        Row::new(
            db,
            metric,
            median(s.of(metric)).unwrap_or(f64::NAN),
            "us/op",
        )
        .ratio(median_ratio(s.of(metric), s.of(floor)), floor)
    };
    [
        row(SKIP_POOLER, SKIP_FLOOR),
        versus(db, s, SKIP_POOLER, SKIP_PROVIDER),
        row(CYCLE_POOLER, CYCLE_FLOOR),
        versus(db, s, CYCLE_POOLER, CYCLE_PROVIDER),
    ]
}

/// The six ways through the library every store measures: skip and cycle through the
/// provider, the executor and a `#[scheduled_lock]` function.
pub(crate) fn core_variants<P: LockProvider + Clone>(
    provider: &P,
    executor: &shedlock_core::LockingTaskExecutor,
) -> Result<[Variant; 6]> {
    let skip = |provider: &P| ProviderSkip {
        provider: provider.clone(),
        owner: "bench-provider".into(),
    };
    Ok([
        Variant::new(SKIP_PROVIDER, skip(provider)),
        Variant::new(
            SKIP_EXECUTOR,
            ExecutorRun {
                executor: executor.clone(),
                cfg: LockConfig::new(HELD, AT_MOST)?,
                expect_run: false,
            },
        ),
        Variant::new(
            SKIP_MACRO,
            MacroRun {
                executor: executor.clone(),
                skip: true,
            },
        ),
        Variant::new(
            CYCLE_PROVIDER,
            ProviderCycle {
                provider: provider.clone(),
                name: "bench-provider".into(),
                owner: "bench-provider".into(),
            },
        ),
        Variant::new(
            CYCLE_EXECUTOR,
            ExecutorRun {
                executor: executor.clone(),
                cfg: LockConfig::new("bench-executor", AT_MOST)?,
                expect_run: true,
            },
        ),
        Variant::new(
            CYCLE_MACRO,
            MacroRun {
                executor: executor.clone(),
                skip: false,
            },
        ),
    ])
}

/// The floor, then every way through the library.
fn library_variants<P: LockProvider + Clone>(
    floor: Floor,
    provider: &P,
    on_default: &P,
) -> Result<Vec<Variant>> {
    let executor = executor(provider.clone(), "bench-executor")?;
    let mut variants = vec![
        Variant::boxed(SELECT1, floor.select1),
        Variant::boxed(SKIP_FLOOR, floor.skip),
        Variant::boxed(READ_FLOOR, floor.read),
        Variant::boxed(CYCLE_FLOOR, floor.cycle),
    ];
    variants.extend(floor.extra_cycles);
    variants.extend(core_variants(provider, &executor)?);
    variants.extend([
        Variant::new(SKIP_SPAWNED, SpawnedProviderSkip(provider.clone())),
        Variant::new(
            SKIP_TIMED,
            TimedProviderSkip(ProviderSkip {
                provider: provider.clone(),
                owner: "bench-provider".into(),
            }),
        ),
        Variant::new(
            SKIP_DEFAULT,
            ProviderSkip {
                provider: on_default.clone(),
                owner: "bench-default".into(),
            },
        ),
        Variant::new(
            CYCLE_DEFAULT,
            ProviderCycle {
                provider: on_default.clone(),
                name: "bench-default".into(),
                owner: "bench-default".into(),
            },
        ),
    ]);
    Ok(variants)
}

fn uncontended_rows(
    db: &str,
    s: &Samples,
    captured: &Captured,
    extra_names: &[String],
) -> Vec<Row> {
    let us = |metric: &str| median(s.of(metric)).unwrap_or(f64::NAN);
    let row = |metric: &str, floor: &str| {
        Row::new(db, metric, us(metric), "us/op")
            .ratio(median_ratio(s.of(metric), s.of(floor)), floor)
    };
    let versus = |metric: &str, base: &str| versus(db, s, metric, base);
    #[allow(clippy::cast_precision_loss)] // a few statements
    let count = |n: usize| n as f64;
    let mut rows = vec![
        row(SELECT1, SELECT1),
        row(SKIP_FLOOR, SELECT1),
        row(READ_FLOOR, SELECT1),
        row(CYCLE_FLOOR, SELECT1),
    ];
    for extra in extra_names {
        rows.push(row(extra, CYCLE_FLOOR));
    }
    rows.extend([
        Row::new(
            db,
            "statements per skip",
            count(captured.acquire_held.len()),
            "stmt",
        ),
        Row::new(
            db,
            "statements per acquire + release",
            count(captured.acquire_won.len() + captured.release.len()),
            "stmt",
        ),
        row(SKIP_PROVIDER, SKIP_FLOOR).target(Target::RatioAtMost(1.3)),
        versus(SKIP_FLOOR, READ_FLOOR),
        versus(SKIP_PROVIDER, READ_FLOOR).target(Target::ValueAtMost(1.2)),
        row(SKIP_POOL, SKIP_FLOOR),
        versus(SKIP_TIMED, SKIP_PROVIDER),
        versus(SKIP_SPAWNED, SKIP_PROVIDER),
        row(SKIP_EXECUTOR, SKIP_FLOOR),
        row(SKIP_MACRO, SKIP_FLOOR),
        row(SKIP_DEFAULT, SKIP_FLOOR),
        row(CYCLE_PROVIDER, CYCLE_FLOOR).target(Target::RatioAtMost(1.1)),
        row(CYCLE_POOL, CYCLE_FLOOR),
        versus(CYCLE_PROVIDER, CYCLE_POOL),
        row(CYCLE_EXECUTOR, CYCLE_FLOOR),
        row(CYCLE_MACRO, CYCLE_FLOOR),
        row(CYCLE_DEFAULT, CYCLE_FLOOR),
        versus(CYCLE_DEFAULT, CYCLE_PROVIDER),
        row(SKIP_FLOOR_B2B, SKIP_FLOOR),
        row(SKIP_PROVIDER_B2B, SKIP_FLOOR_B2B),
        row(CYCLE_FLOOR_B2B, CYCLE_FLOOR),
        row(CYCLE_PROVIDER_B2B, CYCLE_FLOOR_B2B),
        row(SELECT1_B2B, SELECT1),
        row(SKIP_POOL1_B2B, SELECT1_B2B).target(Target::RatioAtMost(1.3)),
        versus(SKIP_POOL1_B2B, SKIP_FLOOR_B2B),
        row(CYCLE_POOL1_B2B, CYCLE_FLOOR_B2B).target(Target::RatioAtMost(1.2)),
    ]);
    rows.extend(versus_rows(db, s));
    rows
}

/// A ratio of two variants' paired samples.
fn versus(db: &str, s: &Samples, metric: &str, base: &str) -> Row {
    Row::new(
        db,
        format!("{metric} / {}", base.split(": ").nth(1).unwrap_or(base)),
        median_ratio(s.of(metric), s.of(base)).unwrap_or(f64::NAN),
        "x",
    )
}

/// The executor and the macro against the provider, skip and cycle (target 1.05).
pub(crate) fn versus_rows(db: &str, s: &Samples) -> Vec<Row> {
    [
        (SKIP_EXECUTOR, SKIP_PROVIDER),
        (SKIP_MACRO, SKIP_PROVIDER),
        (CYCLE_EXECUTOR, CYCLE_PROVIDER),
        (CYCLE_MACRO, CYCLE_PROVIDER),
    ]
    .into_iter()
    .map(|(metric, base)| versus(db, s, metric, base).target(Target::ValueAtMost(1.05)))
    .collect()
}

/// One contention variant: its label and its per-round results.
struct Race {
    label: String,
    raw: Option<RawRace>,
    rounds: Vec<Contention>,
}

async fn contention<D: SqlDb>(
    backend: &Sql<D>,
    table: &str,
    provider: &D::Provider,
    captured: &Captured,
    plan: &Plan,
) -> Result<Vec<Row>> {
    let db = D::DB;
    let mut races = vec![Race {
        label: "provider".into(),
        raw: None,
        rounds: Vec::new(),
    }];
    for raw in backend.raw_races() {
        races.push(Race {
            label: raw.label().into(),
            raw: Some(raw),
            rounds: Vec::new(),
        });
    }
    let lock_name = |i: usize| format!("bench-contend-{i}");
    // Every race has its own lock row, created up front (Java's UPDATE needs it).
    for i in 0..races.len() {
        let record = provider
            .acquire(&lock_name(i), AT_MOST, FLOOR_OWNER)
            .await?
            .ok_or("contention lock not free")?;
        provider.release(&record, Duration::ZERO).await?;
    }
    for round in 0..plan.contention_rounds {
        for k in 0..races.len() {
            let i = (k + round) % races.len();
            let contenders = contenders(
                backend,
                races[i].raw,
                table,
                &lock_name(i),
                captured,
                plan.racers,
                plan.racer_pool,
            )
            .await?;
            let outcome = contend(contenders, plan.contention_slice).await;
            if let Some(e) = &outcome.first_error {
                eprintln!(
                    "{db}: contention {}: {} errors, first: {e}",
                    races[i].label, outcome.errors
                );
            }
            races[i].rounds.push(outcome);
        }
    }
    Ok(contention_rows(db, &races, plan.racers))
}

/// `n` racers for a race: replicas each with the provider on a pool of its own (`pool_options()`
/// with at most `pool` connections), or raw ones.
async fn contenders<D: SqlDb>(
    backend: &Sql<D>,
    raw: Option<RawRace>,
    table: &str,
    name: &str,
    captured: &Captured,
    n: usize,
    pool: u32,
) -> Result<Vec<Box<dyn Racer>>> {
    if let Some(raw) = raw {
        return backend.raw_racers(raw, (table, name), captured, n).await;
    }
    let mut all: Vec<Box<dyn Racer>> = Vec::with_capacity(n);
    for r in 0..n {
        let (provider, gauge) = backend.provider_on_pool_of(table, pool).await?;
        let closer = closer::<D>(&provider);
        all.push(Box::new(ProviderRacer {
            provider,
            name: name.to_owned(),
            owner: format!("bench-racer-{r}"),
            held: None,
            closer,
            gauge,
        }));
    }
    Ok(all)
}

fn rate(c: &Contention, n: u64) -> f64 {
    #[allow(clippy::cast_precision_loss)] // counts well below 2^52
    let n = n as f64;
    if c.seconds > 0.0 {
        n / c.seconds
    } else {
        f64::NAN
    }
}

fn acquisitions(race: &Race) -> Vec<f64> {
    race.rounds
        .iter()
        .map(|c| rate(c, c.acquisitions))
        .collect()
}

fn contention_rows(db: &str, races: &[Race], n: usize) -> Vec<Row> {
    let floor = races
        .iter()
        .find(|r| r.raw == Some(RawRace::Statements))
        .map(acquisitions)
        .unwrap_or_default();
    let mut rows = Vec::new();
    for race in races {
        let attempts: Vec<f64> = race.rounds.iter().map(|c| rate(c, c.attempts)).collect();
        let acquired = acquisitions(race);
        let sum = |f: fn(&Contention) -> u64| {
            #[allow(clippy::cast_precision_loss)] // small counts
            let total = race.rounds.iter().map(f).sum::<u64>() as f64;
            total
        };
        let label = &race.label;
        rows.push(Row::new(
            db,
            format!("contention {n}: {label}: attempts"),
            median(&attempts).unwrap_or(f64::NAN),
            "ops/s",
        ));
        rows.push(
            Row::new(
                db,
                format!("contention {n}: {label}: acquisitions"),
                median(&acquired).unwrap_or(f64::NAN),
                "ops/s",
            )
            .ratio(median_ratio(&acquired, &floor), "provider statements raw"),
        );
        rows.push(
            Row::new(
                db,
                format!("contention {n}: {label}: errors"),
                sum(|c| c.errors),
                "count",
            )
            .target(Target::ValueAtMost(0.0)),
        );
        rows.push(
            Row::new(
                db,
                format!("contention {n}: {label}: overlapping holders"),
                sum(|c| c.overlaps),
                "count",
            )
            .target(Target::ValueAtMost(0.0)),
        );
        if race.raw.is_none() {
            rows.extend(connection_rows(db, race, n));
        }
        if !matches!(
            race.raw,
            Some(RawRace::Java | RawRace::JavaTransactions | RawRace::Advisory)
        ) {
            rows.push(
                Row::new(
                    db,
                    format!("contention {n}: {label}: repeated fencing tokens"),
                    sum(|c| c.duplicate_tokens),
                    "count",
                )
                .target(Target::ValueAtMost(0.0)),
            );
        }
    }
    rows.extend(versus_java(db, races, n));
    rows.extend(versus_advisory(db, races, n));
    rows
}

/// Acquisitions against the database's advisory lock, where it ran (target: at least as many,
/// with one durable flush per acquire where the advisory lock has none).
fn versus_advisory(db: &str, races: &[Race], n: usize) -> Vec<Row> {
    let Some(advisory) = races.iter().find(|r| r.raw == Some(RawRace::Advisory)) else {
        return Vec::new();
    };
    let advisory = acquisitions(advisory);
    races
        .iter()
        .filter(|r| r.raw.is_none() || r.raw == Some(RawRace::Statements))
        .map(|race| {
            let row = Row::new(
                db,
                format!(
                    "contention {n}: {} / advisory lock, acquisitions",
                    race.label
                ),
                median_ratio(&acquisitions(race), &advisory).unwrap_or(f64::NAN),
                "x",
            );
            if race.raw.is_none() {
                row.target(Target::ValueAtLeast(1.0))
            } else {
                row
            }
        })
        .collect()
}

async fn pressure<D: SqlDb>(
    backend: &Sql<D>,
    table: &str,
    plan: &Plan,
    floor_cycle_us: Option<f64>,
) -> Result<Vec<Row>> {
    let db = D::DB;
    let (provider, gauge) = backend
        .provider_on_pool_of(table, plan.pressure_pool)
        .await?;
    let executor = executor(provider.clone(), "bench-pressure")?;
    let first = pool_pressure(&executor, &gauge, plan.pressure_locks, "bench-pressure").await;
    let second = match &first {
        Ok(_) => pool_pressure(&executor, &gauge, plan.pressure_locks, "bench-pressure").await,
        Err(_) => Err("first pass failed".into()),
    };
    closer::<D>(&provider).await;
    let first = first?;
    let second = second?;
    if let Some(e) = first.first_error.as_ref().or(second.first_error.as_ref()) {
        eprintln!("{db}: pool pressure: first error: {e}");
    }
    let n = plan.pressure_locks;
    let c = plan.pressure_pool;
    #[allow(clippy::cast_precision_loss)] // small numbers
    let per_lock_us = second.all_released.as_secs_f64() * 1e6 / n as f64;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    #[allow(clippy::cast_precision_loss)] // small counts
    let count = |x: u64| x as f64;
    Ok(vec![
        Row::new(
            db,
            format!("pool pressure: {n} held on {c} connections, all held"),
            ms(second.all_held),
            "ms",
        ),
        Row::new(
            db,
            format!("pool pressure: {n} held on {c} connections, all released"),
            ms(second.all_released),
            "ms",
        ),
        Row::new(
            db,
            format!("pool pressure: {n} held, first use (rows created)"),
            ms(first.all_released),
            "ms",
        ),
        Row::new(
            db,
            "pool pressure: per lock (acquire + release)",
            per_lock_us,
            "us/op",
        )
        .ratio(floor_cycle_us.map(|f| per_lock_us / f), CYCLE_FLOOR),
        Row::new(
            db,
            "pool pressure: largest pool size",
            f64::from(first.max_pool_size.max(second.max_pool_size)),
            "count",
        )
        .target(Target::ValueAtMost(f64::from(c))),
        Row::new(
            db,
            "pool pressure: connections busy while all held",
            count(first.busy_while_held.max(second.busy_while_held) as u64),
            "count",
        )
        .target(Target::ValueAtMost(0.0)),
        Row::new(
            db,
            "pool pressure: errors",
            count(first.errors + second.errors),
            "count",
        )
        .target(Target::ValueAtMost(0.0)),
    ])
}

/// How many connections the provider racers' pools ended with.
fn connection_rows(db: &str, race: &Race, n: usize) -> Vec<Row> {
    let label = &race.label;
    let max = race
        .rounds
        .iter()
        .map(|c| c.max_connections)
        .max()
        .unwrap_or(0);
    let total = race
        .rounds
        .iter()
        .map(|c| c.total_connections)
        .max()
        .unwrap_or(0);
    vec![
        Row::new(
            db,
            format!("contention {n}: {label}: connections per replica (largest pool)"),
            f64::from(max),
            "count",
        ),
        Row::new(
            db,
            format!("contention {n}: {label}: connections, all replicas"),
            f64::from(total),
            "count",
        ),
    ]
}

/// Acquisitions against Java ShedLock's sequence, where it ran.
fn versus_java(db: &str, races: &[Race], n: usize) -> Vec<Row> {
    let mut rows = Vec::new();
    for (java_race, java_label) in [
        (RawRace::Java, "Java sequence"),
        (RawRace::JavaTransactions, "Java in transactions"),
    ] {
        let Some(java) = races.iter().find(|r| r.raw == Some(java_race)) else {
            continue;
        };
        let java = acquisitions(java);
        for race in races.iter().filter(|r| r.raw.is_none()) {
            let mut row = Row::new(
                db,
                format!(
                    "contention {n}: {} / {java_label}, acquisitions",
                    race.label
                ),
                median_ratio(&acquisitions(race), &java).unwrap_or(f64::NAN),
                "x",
            );
            if db == "postgres" && race.raw.is_none() && java_race == RawRace::Java {
                row = row.target(Target::ValueAtLeast(2.0));
            }
            rows.push(row);
        }
    }
    rows
}

/// The executor's and the macro's own cost, on the in-memory store (no I/O, so no database
/// noise): what they add to every call whatever the database.
pub(crate) async fn in_memory(plan: &Plan) -> Result<Vec<Row>> {
    let db = "memory";
    let provider = std::sync::Arc::new(shedlock_core::InMemoryLockProvider::new());
    let mut rows = Vec::new();
    if plan.runs("uncontended") {
        rows = in_memory_uncontended(db, &provider, plan).await?;
    }
    if plan.runs("fires") {
        rows.extend(cpu_per_fire(db, &provider, plan.fire_rounds, plan.fire_window).await?);
    }
    if plan.runs("tower") {
        // The layer's own CPU per request, without I/O to hide it.
        rows.extend(crate::tower::run(db, &provider, plan).await?);
    }
    if plan.runs("trigger") {
        rows.extend(crate::trigger::memory(plan).await?);
    }
    Ok(rows)
}

/// The in-memory store's skip and cycle through the provider, the executor and the macro.
async fn in_memory_uncontended(
    db: &str,
    provider: &std::sync::Arc<shedlock_core::InMemoryLockProvider>,
    plan: &Plan,
) -> Result<Vec<Row>> {
    hold_elsewhere(provider).await?;
    let executor = executor(provider.clone(), "bench-executor")?;
    let mut variants = core_variants(provider, &executor)?
        .into_iter()
        .map(Variant::back_to_back)
        .collect::<Vec<_>>();
    let values = interleave(&mut variants, plan).await?;
    let s = Samples {
        metrics: variants.iter().map(|v| v.metric.clone()).collect(),
        values,
    };
    let extra = |metric: &str, base: &str| {
        let added: Vec<f64> = s
            .of(metric)
            .iter()
            .zip(s.of(base))
            .map(|(m, b)| m - b)
            .collect();
        Row::new(
            db,
            format!("{metric}: added to the provider call"),
            median(&added).unwrap_or(f64::NAN),
            "us/op",
        )
    };
    let us = |metric: &str| {
        Row::new(
            db,
            metric,
            median(s.of(metric)).unwrap_or(f64::NAN),
            "us/op",
        )
    };
    Ok(vec![
        us(SKIP_PROVIDER),
        extra(SKIP_EXECUTOR, SKIP_PROVIDER),
        extra(SKIP_MACRO, SKIP_PROVIDER),
        us(CYCLE_PROVIDER),
        extra(CYCLE_EXECUTOR, CYCLE_PROVIDER),
        extra(CYCLE_MACRO, CYCLE_PROVIDER),
    ])
}
