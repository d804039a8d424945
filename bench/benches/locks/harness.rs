//! What every database shares: the operations measured, the interleaved slices, the contention
//! race with its overlap check, the pool-pressure run and the leader-latch load.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use shedlock_bench::stats::median;
use shedlock_core::{
    LeaderLatch, LeaderLatchConfig, LockConfig, LockingTaskExecutor,
    provider::{LockProvider, LockRecord},
    scheduled_lock,
};
use shedlock_sqlx::sqlx::pool::PoolConnection;
use shedlock_sqlx::sqlx::{Connection as _, Database, Pool};
use tokio::sync::Barrier;

pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub(crate) type Result<T, E = BoxError> = std::result::Result<T, E>;

/// The `at_most` of every measured acquisition.
pub(crate) const AT_MOST: Duration = Duration::from_mins(1);

/// Lock names (each database run has a table of its own).
pub(crate) const HELD: &str = "bench-held";
pub(crate) const FLOOR_CYCLE: &str = "bench-floor";
pub(crate) const POOL_CYCLE: &str = "bench-pool-cycle";
pub(crate) const OTHER_OWNER: &str = "bench-other-replica";
pub(crate) const FLOOR_OWNER: &str = "bench-floor-owner";

/// How long and how often things run.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub(crate) rounds: usize,
    pub(crate) slice: Duration,
    /// The pause between two paced operations (untimed).
    pub(crate) pace: Duration,
    pub(crate) warmup_ops: usize,
    pub(crate) racers: usize,
    pub(crate) contention_rounds: usize,
    pub(crate) contention_slice: Duration,
    pub(crate) pressure_locks: usize,
    pub(crate) pressure_pool: u32,
    /// The lock pool of each replica in the contention race.
    pub(crate) racer_pool: u32,
    pub(crate) latch_window: Duration,
    /// Paired rounds and the window of each side in the scheduler's CPU comparison.
    pub(crate) fire_rounds: usize,
    pub(crate) fire_window: Duration,
    /// Rounds and seconds per run of the server-side skip comparison (`pgbench`).
    pub(crate) server_rounds: usize,
    pub(crate) server_seconds: u64,
    /// Rounds and the slice of each variant per round of the recorded-release comparison
    /// (`jobs`): more than the uncontended part's in a quick run, as its target is 5 % and the
    /// part is short.
    pub(crate) jobs_rounds: usize,
    pub(crate) jobs_slice: Duration,
    /// Triggers asked, one after another, in the `trigger` part.
    pub(crate) trigger_rounds: usize,
    /// Requests of each variant of the `web` part, over all rounds: enough for a p99.
    pub(crate) web_requests: usize,
    /// Fire instants measured by the `lateness` part with one job, which gives one sample per
    /// instant, so it runs longer than the others.
    pub(crate) lateness_fires_one: u32,
    /// Fire instants measured by the `lateness` part with 100 and with 1,000 jobs.
    pub(crate) lateness_fires: u32,
    /// Whether the `lateness` part runs on MariaDB too (always on Postgres and Redis).
    pub(crate) lateness_on_mariadb: bool,
    /// The parts to run (`uncontended`, `server`, `contention`, `pressure`, `latch`, `fires`,
    /// `jobs`, `tower`, `trigger`, `web`, `lateness`); empty: all.
    pub(crate) only: Vec<String>,
}

impl Plan {
    pub(crate) fn new(quick: bool) -> Self {
        if quick {
            Self {
                rounds: 5,
                slice: Duration::from_millis(60),
                pace: Duration::from_millis(1),
                warmup_ops: 10,
                racers: 32,
                contention_rounds: 3,
                contention_slice: Duration::from_millis(300),
                pressure_locks: 1_000,
                pressure_pool: 2,
                racer_pool: 2,
                latch_window: Duration::from_millis(1500),
                fire_rounds: 4,
                fire_window: Duration::from_secs(1),
                server_rounds: 3,
                server_seconds: 2,
                jobs_rounds: 9,
                jobs_slice: Duration::from_millis(150),
                trigger_rounds: 30,
                web_requests: 200,
                lateness_fires_one: 20,
                lateness_fires: 6,
                lateness_on_mariadb: false,
                only: Vec::new(),
            }
        } else {
            Self {
                rounds: 15,
                slice: Duration::from_millis(300),
                pace: Duration::from_millis(1),
                warmup_ops: 200,
                racers: 32,
                contention_rounds: 7,
                contention_slice: Duration::from_secs(2),
                pressure_locks: 1_000,
                pressure_pool: 2,
                racer_pool: 2,
                latch_window: Duration::from_secs(10),
                fire_rounds: 8,
                fire_window: Duration::from_secs(3),
                server_rounds: 5,
                server_seconds: 5,
                jobs_rounds: 15,
                jobs_slice: Duration::from_millis(300),
                trigger_rounds: 100,
                web_requests: 1_000,
                lateness_fires_one: 100,
                lateness_fires: 20,
                lateness_on_mariadb: true,
                only: Vec::new(),
            }
        }
    }
}

impl Plan {
    /// Whether `part` runs.
    pub(crate) fn runs(&self, part: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|p| p == part)
    }
}

/// The parts of a run, for `--only`.
pub(crate) const PARTS: [&str; 11] = [
    "uncontended",
    "server",
    "contention",
    "pressure",
    "latch",
    "fires",
    "jobs",
    "tower",
    "trigger",
    "web",
    "lateness",
];

/// One measured operation, run over and over.
#[async_trait]
pub(crate) trait Op: Send {
    async fn run(&mut self) -> Result<()>;

    /// Closes its connection, if it has one of its own.
    async fn close(self: Box<Self>) {}
}

/// A named operation in the interleaved measurement.
pub(crate) struct Variant {
    pub(crate) metric: String,
    pub(crate) op: Box<dyn Op>,
    /// Paced: each operation timed on its own, with a pause between operations, so work a call
    /// leaves in the background (a pool's return check) is done before the next: the latency a
    /// caller sees when lock calls are not back to back. Otherwise back to back: throughput.
    pub(crate) paced: bool,
}

impl Variant {
    pub(crate) fn new(metric: impl Into<String>, op: impl Op + 'static) -> Self {
        Self::boxed(metric, Box::new(op))
    }

    pub(crate) fn boxed(metric: impl Into<String>, op: Box<dyn Op>) -> Self {
        Self {
            metric: metric.into(),
            op,
            paced: true,
        }
    }

    /// The same, run back to back.
    pub(crate) fn back_to_back(mut self) -> Self {
        self.paced = false;
        self
    }
}

/// Runs every variant for `plan.slice`, round after round (each round starting one variant
/// later), after a short warm-up; returns, per variant, each slice's median time of one
/// operation in microseconds. (The median, not the mean: on a shared machine a slice catches
/// stalls of other tenants' making, milliseconds long, which a mean would report as ours.)
pub(crate) async fn interleave(variants: &mut [Variant], plan: &Plan) -> Result<Vec<Vec<f64>>> {
    for v in variants.iter_mut() {
        for _ in 0..plan.warmup_ops {
            v.op.run().await.map_err(|e| context(&v.metric, &e))?;
        }
    }
    let n = variants.len();
    let mut samples = vec![Vec::with_capacity(plan.rounds); n];
    for round in 0..plan.rounds {
        for k in 0..n {
            let i = (k + round) % n;
            let v = &mut variants[i];
            let start = Instant::now();
            let mut times = Vec::new();
            loop {
                let op_start = Instant::now();
                v.op.run().await.map_err(|e| context(&v.metric, &e))?;
                times.push(op_start.elapsed().as_secs_f64() * 1e6);
                if v.paced {
                    tokio::time::sleep(plan.pace).await;
                }
                if start.elapsed() >= plan.slice && times.len() >= 3 {
                    samples[i].push(median(&times).unwrap_or(f64::NAN));
                    break;
                }
            }
        }
    }
    Ok(samples)
}

pub(crate) fn context(what: &str, error: &BoxError) -> BoxError {
    format!("{what}: {error}").into()
}

fn expect(condition: bool, what: &str) -> Result<()> {
    if condition {
        Ok(())
    } else {
        Err(what.to_owned().into())
    }
}

// ---- operations through the library ----

/// Acquire + release through the provider.
pub(crate) struct ProviderCycle<P> {
    pub(crate) provider: P,
    pub(crate) name: String,
    pub(crate) owner: String,
}

#[async_trait]
impl<P: LockProvider> Op for ProviderCycle<P> {
    async fn run(&mut self) -> Result<()> {
        let record = self
            .provider
            .acquire(&self.name, AT_MOST, &self.owner)
            .await?
            .ok_or("the lock was not free")?;
        expect(
            self.provider.release(&record, Duration::ZERO).await?,
            "the release matched no row",
        )
    }
}

/// An acquire of a lock another owner holds, through the provider.
pub(crate) struct ProviderSkip<P> {
    pub(crate) provider: P,
    pub(crate) owner: String,
}

#[async_trait]
impl<P: LockProvider> Op for ProviderSkip<P> {
    async fn run(&mut self) -> Result<()> {
        let got = self.provider.acquire(HELD, AT_MOST, &self.owner).await?;
        expect(got.is_none(), "acquired a lock held by another owner")
    }
}

/// [`ProviderSkip`] inside one more `tokio::time::timeout`, as the executor wraps each store
/// call: separates the cost of that timer from the rest of the executor.
pub(crate) struct TimedProviderSkip<P>(pub(crate) ProviderSkip<P>);

#[async_trait]
impl<P: LockProvider> Op for TimedProviderSkip<P> {
    async fn run(&mut self) -> Result<()> {
        tokio::time::timeout(Duration::from_secs(5), self.0.run())
            .await
            .map_err(|_| "timed out")?
    }
}

/// The provider's skip call in a task of its own, awaited through a oneshot channel, as the
/// executor runs each store call: separates the cost of that hand-off from the rest.
pub(crate) struct SpawnedProviderSkip<P>(pub(crate) P);

#[async_trait]
impl<P: LockProvider + Clone> Op for SpawnedProviderSkip<P> {
    async fn run(&mut self) -> Result<()> {
        let provider = self.0.clone();
        let (reply, answer) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let _ = reply.send(provider.acquire(HELD, AT_MOST, "bench-provider").await);
        });
        let got = answer.await.map_err(|_| "the spawned call panicked")??;
        expect(got.is_none(), "acquired a lock held by another owner")
    }
}

/// `execute(cfg, empty task)` through the executor: `expect_run` says whether it must run.
pub(crate) struct ExecutorRun {
    pub(crate) executor: LockingTaskExecutor,
    pub(crate) cfg: LockConfig,
    pub(crate) expect_run: bool,
}

#[async_trait]
impl Op for ExecutorRun {
    async fn run(&mut self) -> Result<()> {
        let ran = self.executor.execute(&self.cfg, async {}).await?;
        expect(ran.is_some() == self.expect_run, "unexpected run or skip")
    }
}

#[scheduled_lock(name = "bench-macro", at_most = "1m", executor = executor)]
async fn macro_cycle(executor: &LockingTaskExecutor) {}

#[scheduled_lock(name = "bench-held", at_most = "1m", executor = executor)]
async fn macro_skip(executor: &LockingTaskExecutor) {}

/// A `#[scheduled_lock]` function with an empty body (its lock free, or held elsewhere).
pub(crate) struct MacroRun {
    pub(crate) executor: LockingTaskExecutor,
    pub(crate) skip: bool,
}

#[async_trait]
impl Op for MacroRun {
    async fn run(&mut self) -> Result<()> {
        if self.skip {
            expect(
                macro_skip(&self.executor).await?.is_none(),
                "ran a held lock",
            )
        } else {
            expect(
                macro_cycle(&self.executor).await?.is_some(),
                "skipped a free lock",
            )
        }
    }
}

/// Takes [`HELD`] for another owner for an hour: the lock every skip meets.
pub(crate) async fn hold_elsewhere<P: LockProvider>(provider: &P) -> Result<()> {
    match provider
        .acquire(HELD, Duration::from_hours(1), OTHER_OWNER)
        .await?
    {
        Some(_) => Ok(()),
        None => Err("could not take the held lock".into()),
    }
}

/// The executor of the library variants: the provider as given, a fixed owner id.
pub(crate) fn executor<P: LockProvider>(provider: P, owner: &str) -> Result<LockingTaskExecutor> {
    Ok(LockingTaskExecutor::builder(provider)
        .owner_id(owner)
        .build()?)
}

// ---- contention ----

/// What one racer's acquire attempt got.
pub(crate) enum Attempt {
    /// Won, with the fencing token where the variant has one.
    Won(Option<i64>),
    Held,
}

/// One contender for the lock: a replica with its own connection or pool.
#[async_trait]
pub(crate) trait Racer: Send {
    async fn acquire(&mut self) -> Result<Attempt>;
    async fn release(&mut self) -> Result<()>;
    /// Connections the racer has open (its pool's size), if it has a pool.
    fn connections(&self) -> Option<u32> {
        None
    }
    async fn close(self: Box<Self>);
}

/// Where a raw variant's statements run: on a connection of its own (the floor), or each on a
/// connection checked out of a pool for that statement and given back after it (how the
/// providers use their pool, without any provider code).
pub(crate) enum Conn<DB: Database> {
    Own(DB::Connection),
    Pool(Pool<DB>),
}

/// A connection for one statement (see [`Conn`]).
pub(crate) enum ConnRef<'a, DB: Database> {
    Own(&'a mut DB::Connection),
    Pooled(PoolConnection<DB>),
}

impl<DB: Database> Conn<DB> {
    pub(crate) async fn get(&mut self) -> Result<ConnRef<'_, DB>> {
        Ok(match self {
            Self::Own(conn) => ConnRef::Own(conn),
            Self::Pool(pool) => ConnRef::Pooled(pool.acquire().await?),
        })
    }

    pub(crate) async fn close(self) {
        if let Self::Own(conn) = self {
            let _ = conn.close().await;
        }
    }
}

impl<DB: Database> std::ops::Deref for ConnRef<'_, DB> {
    type Target = DB::Connection;

    fn deref(&self) -> &DB::Connection {
        match self {
            Self::Own(conn) => conn,
            Self::Pooled(conn) => conn,
        }
    }
}

impl<DB: Database> std::ops::DerefMut for ConnRef<'_, DB> {
    fn deref_mut(&mut self) -> &mut DB::Connection {
        match self {
            Self::Own(conn) => conn,
            Self::Pooled(conn) => conn,
        }
    }
}

/// A raw skip: the acquire statement(s) on a lock another owner holds.
pub(crate) struct RawSkip<R>(pub(crate) R);

#[async_trait]
impl<R: Racer> Op for RawSkip<R> {
    async fn run(&mut self) -> Result<()> {
        match self.0.acquire().await? {
            Attempt::Held => Ok(()),
            Attempt::Won(_) => Err("acquired a lock held by another owner".into()),
        }
    }

    async fn close(self: Box<Self>) {
        Box::new(self.0).close().await;
    }
}

/// A raw cycle: acquire + release of a free lock.
pub(crate) struct RawCycle<R>(pub(crate) R);

#[async_trait]
impl<R: Racer> Op for RawCycle<R> {
    async fn run(&mut self) -> Result<()> {
        match self.0.acquire().await? {
            Attempt::Won(_) => self.0.release().await,
            Attempt::Held => Err("the lock was not free".into()),
        }
    }

    async fn close(self: Box<Self>) {
        Box::new(self.0).close().await;
    }
}

/// A racer going through a provider.
pub(crate) struct ProviderRacer<P> {
    pub(crate) provider: P,
    pub(crate) name: String,
    pub(crate) owner: String,
    pub(crate) held: Option<LockRecord>,
    /// Closes the racer's pool.
    pub(crate) closer: CloseFuture,
    /// The racer's pool.
    pub(crate) gauge: Gauge,
}

/// A future that closes a pool or connection when awaited.
pub(crate) type CloseFuture =
    std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'static>>;

#[async_trait]
impl<P: LockProvider> Racer for ProviderRacer<P> {
    async fn acquire(&mut self) -> Result<Attempt> {
        match self
            .provider
            .acquire(&self.name, AT_MOST, &self.owner)
            .await?
        {
            Some(record) => {
                let token = record.fencing_token();
                self.held = Some(record);
                Ok(Attempt::Won(token))
            }
            None => Ok(Attempt::Held),
        }
    }

    async fn release(&mut self) -> Result<()> {
        let record = self.held.take().ok_or("release without a lock")?;
        expect(
            self.provider.release(&record, Duration::ZERO).await?,
            "the release matched no row",
        )
    }

    fn connections(&self) -> Option<u32> {
        Some((self.gauge)().0)
    }

    async fn close(self: Box<Self>) {
        self.closer.await;
    }
}

/// The outcome of one contention slice.
#[derive(Debug, Default, Clone)]
pub(crate) struct Contention {
    pub(crate) seconds: f64,
    pub(crate) attempts: u64,
    pub(crate) acquisitions: u64,
    pub(crate) errors: u64,
    pub(crate) overlaps: u64,
    pub(crate) duplicate_tokens: u64,
    /// The largest pool a racer ended with, and all racers' pools together.
    pub(crate) max_connections: u32,
    pub(crate) total_connections: u32,
    pub(crate) first_error: Option<String>,
}

/// Races `racers` on their lock for `duration`: each loops acquire → (if won) enter the
/// critical section → release, as fast as it can. The critical section checks that nobody else
/// is in it (a holder counter, with a yield inside so another task could run), and every won
/// fencing token is kept to check that none repeats.
pub(crate) async fn contend(racers: Vec<Box<dyn Racer>>, duration: Duration) -> Contention {
    let n = racers.len();
    let start = Arc::new(Barrier::new(n));
    let holders = Arc::new(AtomicU32::new(0));
    let tokens = Arc::new(Mutex::new(Vec::<i64>::new()));
    let mut tasks = Vec::with_capacity(n);
    for mut racer in racers {
        let start = start.clone();
        let holders = holders.clone();
        let tokens = tokens.clone();
        tasks.push(tokio::spawn(async move {
            let mut out = Contention::default();
            start.wait().await;
            let begun = Instant::now();
            let deadline = begun + duration;
            while Instant::now() < deadline {
                out.attempts += 1;
                match racer.acquire().await {
                    Ok(Attempt::Won(token)) => {
                        out.acquisitions += 1;
                        if holders.fetch_add(1, Ordering::SeqCst) != 0 {
                            out.overlaps += 1;
                        }
                        tokio::task::yield_now().await;
                        holders.fetch_sub(1, Ordering::SeqCst);
                        if let Some(token) = token {
                            tokens
                                .lock()
                                .unwrap_or_else(std::sync::PoisonError::into_inner)
                                .push(token);
                        }
                        if let Err(e) = racer.release().await {
                            out.errors += 1;
                            out.first_error
                                .get_or_insert_with(|| format!("release: {e}"));
                        }
                    }
                    Ok(Attempt::Held) => {}
                    Err(e) => {
                        out.errors += 1;
                        out.first_error
                            .get_or_insert_with(|| format!("acquire: {e}"));
                    }
                }
            }
            out.seconds = begun.elapsed().as_secs_f64();
            if let Some(n) = racer.connections() {
                out.max_connections = n;
                out.total_connections = n;
            }
            racer.close().await;
            out
        }));
    }
    let mut total = Contention::default();
    for task in tasks {
        match task.await {
            Ok(one) => {
                total.seconds = total.seconds.max(one.seconds);
                total.attempts += one.attempts;
                total.acquisitions += one.acquisitions;
                total.errors += one.errors;
                total.overlaps += one.overlaps;
                total.max_connections = total.max_connections.max(one.max_connections);
                total.total_connections += one.total_connections;
                if total.first_error.is_none() {
                    total.first_error = one.first_error;
                }
            }
            Err(e) => {
                total.errors += 1;
                total
                    .first_error
                    .get_or_insert_with(|| format!("racer task: {e}"));
            }
        }
    }
    let mut tokens = std::mem::take(
        &mut *tokens
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    let before = tokens.len();
    tokens.sort_unstable();
    tokens.dedup();
    total.duplicate_tokens = (before - tokens.len()) as u64;
    total
}

// ---- pool pressure ----

/// The outcome of holding many locks at once on a small pool.
#[derive(Debug, Default, Clone)]
pub(crate) struct Pressure {
    pub(crate) all_held: Duration,
    pub(crate) all_released: Duration,
    pub(crate) max_pool_size: u32,
    /// Connections in use while every lock was held (after the pool's return checks settled).
    pub(crate) busy_while_held: usize,
    pub(crate) errors: u64,
    pub(crate) first_error: Option<String>,
}

/// Size and idle count of a pool.
pub(crate) type Gauge = Arc<dyn Fn() -> (u32, usize) + Send + Sync>;

/// `locks` tasks each run `executor.execute` on a lock of its own and wait inside it until all
/// hold theirs (a barrier); the pool is looked at while all are held, then all finish and
/// release. Completes only if held locks do not keep connections.
pub(crate) async fn pool_pressure(
    executor: &LockingTaskExecutor,
    gauge: &Gauge,
    locks: usize,
    prefix: &str,
) -> Result<Pressure> {
    let barrier = Arc::new(Barrier::new(locks + 1));
    let (go, proceed) = tokio::sync::watch::channel(false);
    let errors = Arc::new(AtomicU64::new(0));
    let first_error = Arc::new(Mutex::new(None::<String>));
    let max_size = Arc::new(AtomicU32::new(0));
    let sampling = {
        let gauge = gauge.clone();
        let max_size = max_size.clone();
        tokio::spawn(async move {
            loop {
                max_size.fetch_max(gauge().0, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
    };
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(locks);
    for i in 0..locks {
        let executor = executor.clone();
        let barrier = barrier.clone();
        let errors = errors.clone();
        let first_error = first_error.clone();
        let cfg = LockConfig::new(format!("{prefix}-{i}"), AT_MOST)?;
        let mut proceed = proceed.clone();
        tasks.push(tokio::spawn(async move {
            let inside = barrier.clone();
            let outcome = executor
                .execute(&cfg, async move {
                    inside.wait().await;
                    // Hold until the pool has been looked at.
                    let _ = proceed.wait_for(|go| *go).await;
                })
                .await;
            let problem = match outcome {
                Ok(Some(())) => None,
                Ok(None) => Some("skipped: lock held".to_owned()),
                Err(e) => Some(e.to_string()),
            };
            if let Some(problem) = problem {
                errors.fetch_add(1, Ordering::Relaxed);
                first_error
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .get_or_insert(problem);
                barrier.wait().await; // let the others through
            }
        }));
    }
    barrier.wait().await;
    let all_held = started.elapsed();
    // The last connections may still be in the pool's return check; give it a moment.
    let settle = Instant::now();
    let mut busy = usize::MAX;
    while settle.elapsed() < Duration::from_secs(1) {
        let (size, idle) = gauge();
        busy = (size as usize).saturating_sub(idle);
        if busy == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let _ = go.send(true);
    for task in tasks {
        task.await?;
    }
    let all_released = started.elapsed();
    sampling.abort();
    let first_error = first_error
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take();
    Ok(Pressure {
        all_held,
        all_released,
        max_pool_size: max_size.load(Ordering::Relaxed),
        busy_while_held: busy,
        errors: errors.load(Ordering::Relaxed),
        first_error,
    })
}

// ---- leader latch load ----

/// Counts the calls a latch makes to its store.
#[derive(Debug, Default)]
pub(crate) struct Calls {
    pub(crate) acquire_won: AtomicU64,
    pub(crate) acquire_held: AtomicU64,
    pub(crate) extend: AtomicU64,
    pub(crate) release: AtomicU64,
    pub(crate) holder: AtomicU64,
}

impl Calls {
    fn reset(&self) {
        for c in [
            &self.acquire_won,
            &self.acquire_held,
            &self.extend,
            &self.release,
            &self.holder,
        ] {
            c.store(0, Ordering::SeqCst);
        }
    }

    /// Statements, given how many statements each kind of call sends.
    #[allow(clippy::cast_precision_loss)] // small counts
    pub(crate) fn statements(&self, per: &StatementsPerCall) -> f64 {
        let n = |c: &AtomicU64| c.load(Ordering::SeqCst) as f64;
        n(&self.acquire_won) * per.acquire_won
            + n(&self.acquire_held) * per.acquire_held
            + n(&self.extend) * per.extend
            + n(&self.release) * per.release
            + n(&self.holder) * per.holder
    }
}

/// Statements sent per provider call, as captured.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StatementsPerCall {
    pub(crate) acquire_won: f64,
    pub(crate) acquire_held: f64,
    pub(crate) extend: f64,
    pub(crate) release: f64,
    pub(crate) holder: f64,
}

/// A provider that counts the calls made through it.
pub(crate) struct Counting<P> {
    inner: P,
    calls: Arc<Calls>,
}

#[async_trait]
impl<P: LockProvider> LockProvider for Counting<P> {
    async fn acquire(
        &self,
        name: &str,
        at_most: Duration,
        owner: &str,
    ) -> shedlock_core::Result<Option<LockRecord>> {
        let got = self.inner.acquire(name, at_most, owner).await;
        let counter = match &got {
            Ok(Some(_)) => &self.calls.acquire_won,
            _ => &self.calls.acquire_held,
        };
        counter.fetch_add(1, Ordering::SeqCst);
        got
    }

    async fn extend(
        &self,
        record: &LockRecord,
        at_most: Duration,
    ) -> shedlock_core::Result<Option<LockRecord>> {
        self.calls.extend.fetch_add(1, Ordering::SeqCst);
        self.inner.extend(record, at_most).await
    }

    async fn release(
        &self,
        record: &LockRecord,
        at_least: Duration,
    ) -> shedlock_core::Result<bool> {
        self.calls.release.fetch_add(1, Ordering::SeqCst);
        self.inner.release(record, at_least).await
    }

    async fn holder(&self, name: &str) -> shedlock_core::Result<Option<LockRecord>> {
        self.calls.holder.fetch_add(1, Ordering::SeqCst);
        self.inner.holder(name).await
    }

    fn max_name_len(&self) -> usize {
        self.inner.max_name_len()
    }
}

/// The latch timings of the load test: the defaults divided by this.
pub(crate) const LATCH_SCALE: u32 = 10;

/// Statements per second of a leader and of a follower, at the latch's default timings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LatchLoad {
    pub(crate) leader: f64,
    pub(crate) follower: f64,
}

/// Starts a leader, then a follower, on the same election, with the default timings divided by
/// [`LATCH_SCALE`]; counts their store calls over `window` once both run, and converts the
/// rates back to the default timings (the calls are timer-driven, so they scale linearly).
pub(crate) async fn latch_load<P: LockProvider + Clone>(
    provider: P,
    election: &str,
    window: Duration,
    per: &StatementsPerCall,
) -> Result<LatchLoad> {
    let config = |owner: &str| {
        LeaderLatchConfig::builder(election)
            .owner_id(owner)
            .lease(LeaderLatchConfig::DEFAULT_LEASE / LATCH_SCALE)
            .renew_interval(LeaderLatchConfig::DEFAULT_RENEW_INTERVAL / LATCH_SCALE)
            .renew_deadline(LeaderLatchConfig::DEFAULT_RENEW_DEADLINE / LATCH_SCALE)
            .acquire_interval(LeaderLatchConfig::DEFAULT_ACQUIRE_INTERVAL / LATCH_SCALE)
            .shutdown_grace(Duration::from_secs(1))
            .build()
    };
    let leader_calls = Arc::new(Calls::default());
    let follower_calls = Arc::new(Calls::default());
    let leader = LeaderLatch::start(
        Counting {
            inner: provider.clone(),
            calls: leader_calls.clone(),
        },
        config("bench-leader")?,
    )?;
    tokio::time::timeout(Duration::from_secs(10), leader.wait_for_leadership())
        .await
        .map_err(|_| "the first latch did not lead within 10 s")?
        .ok_or("the latch stopped")?;
    let follower = LeaderLatch::start(
        Counting {
            inner: provider,
            calls: follower_calls.clone(),
        },
        config("bench-follower")?,
    )?;
    // Let the follower make its first attempt, then count.
    tokio::time::sleep(LeaderLatchConfig::DEFAULT_ACQUIRE_INTERVAL / LATCH_SCALE).await;
    leader_calls.reset();
    follower_calls.reset();
    let start = Instant::now();
    tokio::time::sleep(window).await;
    let seconds = start.elapsed().as_secs_f64();
    let leader_statements = leader_calls.statements(per);
    let follower_statements = follower_calls.statements(per);
    let still_leading = leader.is_leader() && !follower.is_leader();
    follower.close().await?;
    leader.close().await?;
    expect(still_leading, "leadership moved during the window")?;
    let scale = f64::from(LATCH_SCALE);
    Ok(LatchLoad {
        leader: leader_statements / seconds / scale,
        follower: follower_statements / seconds / scale,
    })
}
