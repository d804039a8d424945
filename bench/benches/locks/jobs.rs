//! The `jobs` part (issue 27): what recording a run costs the release that ends it.
//!
//! **Release with its record against the plain release.** Each sample is an acquire, not
//! timed, then the timed release of what it won: `release(record, 0)`, or
//! `release_run(record, 0, &RunReport::new(fire, outcome))` with the outcome `Succeeded`, or
//! `Failed` with an error text of [`ERROR_LEN`] characters. A fourth variant is the same
//! successful `release_run` on a provider built with `.history(HistoryPolicy::keep(100))`, which
//! also writes one history entry and prunes the lock's entries to the newest 100. Each variant
//! has a lock name of its own. The samples alternate: sample `k` of every variant is taken in the
//! order [`rotation`]`(k, n)`, with the run's pause after each, until each variant has had its
//! slice of time; a round's figure per variant is the median of its samples, and a ratio is the
//! median over rounds of the round's ratios. The history variant is warmed up past its `keep`,
//! so every measured write also prunes one entry, as in a service that has run a while.
//!
//! **Round trips.** The same calls through a provider behind the counting proxy
//! ([`Proxy`]), [`WIRE_CALLS`] of each after a warm-up, counting only from the start of the
//! release to its answer; on the SQL stores also the statements sent (the sink), which is all
//! SQLite has. A recorded release is one statement like the plain release (target: no extra
//! round trip); history on costs what the store's history write costs, reported as it is.
//!
//! etcd keeps no run history, so it has no history variant. A store whose `release_run`
//! answers unsupported (a table without the job state columns) has no rows here; the run says
//! so on stderr.

use std::time::{Duration, Instant};

use shedlock_bench::report::{Row, Target};
use shedlock_bench::stats::{median, median_ratio, rotation};
use shedlock_core::admin::LockAdmin;
use shedlock_core::jobs::{RunOutcome, RunReport};
use shedlock_core::provider::chrono::{DateTime, Utc};
use shedlock_core::provider::{LockProvider, LockRecord};

use crate::harness::{AT_MOST, Plan, Result};
use crate::sink::capture;
use crate::stores::{WIRE_CALLS, per_call};
use crate::wire::Proxy;

/// The history each measured run is kept in, on the history-on provider.
pub(crate) const KEEP: u32 = 100;
/// The error text of the failed variant, in characters.
pub(crate) const ERROR_LEN: usize = 200;

const FLOOR: &str = "jobs: release, plain (floor)";
const SUCCEEDED: &str = "jobs: release_run, succeeded";
const FAILED: &str = "jobs: release_run, failed (200-character error)";
const HISTORY: &str = "jobs: release_run, succeeded, history on (keep 100)";

/// What the release of a sample records.
#[derive(Debug, Clone)]
enum Kind {
    Plain,
    Run(RunReport),
}

impl Kind {
    fn of(outcome: Option<RunOutcome>, fire: DateTime<Utc>) -> Self {
        outcome.map_or(Self::Plain, |outcome| {
            Self::Run(RunReport::new(fire, outcome))
        })
    }

    async fn release<P: LockProvider>(&self, provider: &P, record: &LockRecord) -> Result<bool> {
        Ok(match self {
            Self::Plain => provider.release(record, Duration::ZERO).await?,
            Self::Run(report) => provider.release_run(record, Duration::ZERO, report).await?,
        })
    }
}

/// The providers of one store: `off` as the README sets it up, `on` the same with history
/// (`None`: the store keeps no history).
pub(crate) struct Providers<'a, P> {
    pub(crate) off: &'a P,
    pub(crate) on: Option<&'a P>,
}

/// One measured way to release.
struct Releaser<'a, P> {
    metric: &'static str,
    provider: &'a P,
    name: &'static str,
    kind: Kind,
}

impl<P: LockProvider> Releaser<'_, P> {
    /// Acquires (not timed), then releases: the release's time in microseconds.
    async fn sample(&self) -> Result<f64> {
        let record = self
            .provider
            .acquire(self.name, AT_MOST, "bench-jobs")
            .await?
            .ok_or_else(|| format!("{}: the lock was not free", self.metric))?;
        let start = Instant::now();
        let released = self.kind.release(self.provider, &record).await?;
        let us = start.elapsed().as_secs_f64() * 1e6;
        if released {
            Ok(us)
        } else {
            Err(format!("{}: the release matched no row", self.metric).into())
        }
    }
}

/// A failed run's error text: [`ERROR_LEN`] characters, as a connection error with its context
/// might read.
pub(crate) fn error_text() -> String {
    let phrase = "error returned from database: connection refused (os error 111) while \
                  reading the report queue; ";
    phrase.chars().cycle().take(ERROR_LEN).collect()
}

/// The four variants, in the order of the rows.
fn releasers<'a, P>(providers: &Providers<'a, P>, fire: DateTime<Utc>) -> Vec<Releaser<'a, P>> {
    let succeeded = || Some(RunOutcome::Succeeded);
    let mut all = vec![
        (FLOOR, providers.off, "bench-jobs-plain", None),
        (SUCCEEDED, providers.off, "bench-jobs-run", succeeded()),
        (
            FAILED,
            providers.off,
            "bench-jobs-failed",
            Some(RunOutcome::Failed(error_text())),
        ),
    ];
    if let Some(on) = providers.on {
        all.push((HISTORY, on, "bench-jobs-history", succeeded()));
    }
    all.into_iter()
        .map(|(metric, provider, name, outcome)| Releaser {
            metric,
            provider,
            name,
            kind: Kind::of(outcome, fire),
        })
        .collect()
}

/// Whether the store records runs; prints why not when it does not.
pub(crate) async fn supported<P: LockProvider>(db: &str, provider: &P) -> Result<bool> {
    let record = provider
        .acquire("bench-jobs-probe", AT_MOST, "bench-jobs")
        .await?
        .ok_or("jobs: the probe lock was not free")?;
    let report = RunReport::new(Utc::now(), RunOutcome::Succeeded);
    match provider.release_run(&record, Duration::ZERO, &report).await {
        Ok(true) => Ok(true),
        Ok(false) => Err("jobs: the probe's release_run matched no row".into()),
        Err(e) if e.is_unsupported() => {
            eprintln!("{db}: release_run is unsupported ({e}): the jobs figures are left out");
            provider.release(&record, Duration::ZERO).await?;
            Ok(false)
        }
        Err(e) => Err(e.into()),
    }
}

/// The part's rows for one store: the timed variants on `providers`, then the counts on
/// `wired` (the same providers behind `proxy`; without a proxy, the statements on `providers`).
pub(crate) async fn run<P: LockProvider + LockAdmin>(
    db: &str,
    providers: &Providers<'_, P>,
    wired: Option<(&Providers<'_, P>, &Proxy)>,
    plan: &Plan,
) -> Result<Vec<Row>> {
    if !supported(db, providers.off).await? {
        return Ok(Vec::new());
    }
    let fire = Utc::now();
    let variants = releasers(providers, fire);
    let values = alternate(&variants, plan).await?;
    check_history(providers).await?;
    let metrics: Vec<&str> = variants.iter().map(|v| v.metric).collect();
    let of = |metric: &str| {
        metrics
            .iter()
            .position(|m| *m == metric)
            .map_or(&[][..], |i| &values[i][..])
    };
    let mut rows = Vec::new();
    for &metric in &metrics {
        rows.push(
            Row::new(db, metric, median(of(metric)).unwrap_or(f64::NAN), "us/op")
                .ratio(median_ratio(of(metric), of(FLOOR)), FLOOR),
        );
    }
    let versus = |metric: &str, name: &str| {
        let ratio = median_ratio(of(metric), of(FLOOR));
        Row::new(db, name, ratio.unwrap_or(f64::NAN), "x")
            .ratio(ratio, FLOOR)
            .target(Target::RatioAtMost(1.05))
    };
    rows.push(versus(SUCCEEDED, "release_run ÷ release"));
    rows.push(versus(
        FAILED,
        "release_run (failed, 200-char error) ÷ release",
    ));
    if providers.on.is_some() {
        rows.push(
            Row::new(
                db,
                "history on ÷ off per run",
                median_ratio(of(HISTORY), of(SUCCEEDED)).unwrap_or(f64::NAN),
                "x",
            )
            .ratio(median_ratio(of(HISTORY), of(FLOOR)), FLOOR),
        );
    }
    rows.extend(match wired {
        Some((wired, proxy)) => counts(db, wired, Some(proxy), fire).await?,
        None => counts(db, providers, None, fire).await?,
    });
    Ok(rows)
}

/// Checks that the history-on variant's lock kept exactly its newest [`KEEP`] runs (it ran more)
/// and that the recorded releases with history off wrote none: the figures are of what they
/// say.
async fn check_history<P: LockAdmin>(providers: &Providers<'_, P>) -> Result<()> {
    let limit = usize::try_from(KEEP).unwrap_or(usize::MAX) + 1;
    if let Some(on) = providers.on {
        let kept = on.history("bench-jobs-history", limit).await?.len();
        if kept != limit - 1 {
            return Err(format!("jobs: history on kept {kept} runs, not {KEEP}").into());
        }
    }
    for name in ["bench-jobs-run", "bench-jobs-failed"] {
        let written = match providers.off.history(name, limit).await {
            Ok(runs) => runs.len(),
            // A store that keeps no history (etcd) has none to read.
            Err(e) if e.is_unsupported() => 0,
            Err(e) => return Err(e.into()),
        };
        if written != 0 {
            return Err(format!("jobs: history off wrote {written} runs of {name}").into());
        }
    }
    Ok(())
}

/// Runs the variants' samples alternating ([`rotation`]) for `plan.jobs_rounds` rounds of
/// `plan.jobs_slice` per variant, after a warm-up (the history variant's past its `keep`); per
/// variant, each round's median release time (µs).
async fn alternate<P: LockProvider>(
    variants: &[Releaser<'_, P>],
    plan: &Plan,
) -> Result<Vec<Vec<f64>>> {
    let history_warmup = usize::try_from(KEEP).unwrap_or(usize::MAX) + 10;
    for v in variants {
        let warmup = if v.metric == HISTORY {
            plan.warmup_ops.max(history_warmup)
        } else {
            plan.warmup_ops
        };
        for _ in 0..warmup {
            v.sample().await?;
        }
    }
    let n = variants.len();
    let round = plan.jobs_slice * u32::try_from(n).unwrap_or(u32::MAX);
    let mut medians = vec![Vec::with_capacity(plan.jobs_rounds); n];
    let mut k = 0;
    for _ in 0..plan.jobs_rounds {
        let start = Instant::now();
        let mut times = vec![Vec::new(); n];
        while start.elapsed() < round || times[0].len() < 3 {
            for i in rotation(k, n) {
                times[i].push(variants[i].sample().await?);
                tokio::time::sleep(plan.pace).await;
            }
            k += 1;
        }
        for (m, t) in medians.iter_mut().zip(&times) {
            m.push(median(t).unwrap_or(f64::NAN));
        }
    }
    Ok(medians)
}

/// Round trips (through `proxy`) and statements (captured, SQL) per release, per recorded
/// release and per recorded release with history on, and the differences.
async fn counts<P: LockProvider>(
    db: &str,
    providers: &Providers<'_, P>,
    proxy: Option<&Proxy>,
    fire: DateTime<Utc>,
) -> Result<Vec<Row>> {
    let report = RunReport::new(fire, RunOutcome::Succeeded);
    let mut kinds = vec![
        ("release", providers.off, Kind::Plain),
        ("release_run", providers.off, Kind::Run(report.clone())),
    ];
    if let Some(on) = providers.on {
        kinds.push(("release_run, history on", on, Kind::Run(report)));
    }
    // Per kind: round trips, statements, bytes both ways.
    let mut per = vec![(0.0, 0.0, 0.0); kinds.len()];
    let n = f64::from(WIRE_CALLS);
    for ((what, provider, kind), per) in kinds.iter().zip(&mut per) {
        let name = format!("bench-jobs-wire-{}", what.replace([',', ' '], ""));
        let one = async || -> Result<(u64, u64, usize)> {
            let record = provider
                .acquire(&name, AT_MOST, "bench-jobs")
                .await?
                .ok_or("jobs: the lock was not free")?;
            let since = proxy.map(Proxy::counts).unwrap_or_default();
            let (released, sql) = capture(kind.release(*provider, &record)).await;
            if !released? {
                return Err(format!("jobs: the {what} matched no row").into());
            }
            Ok((since.0, since.1, sql.len()))
        };
        one().await?; // warm-up: connections, scripts
        let (mut trips, mut bytes) = (0.0, 0.0);
        let mut statements = 0;
        for _ in 0..WIRE_CALLS {
            let (t0, b0, sql) = one().await?;
            if let Some(proxy) = proxy {
                let (t, b) = per_call(proxy, (t0, b0), 1);
                trips += t;
                bytes += b;
            }
            statements += sql;
        }
        #[allow(clippy::cast_precision_loss)] // a few statements
        let statements = statements as f64;
        *per = (trips / n, statements / n, bytes / n);
    }
    let mut rows = Vec::new();
    let sql = per[0].1 > 0.0;
    for ((what, _, _), (trips, statements, bytes)) in kinds.iter().zip(per.iter().copied()) {
        if proxy.is_some() {
            rows.push(Row::new(db, format!("round trips per {what}"), trips, "rt"));
            rows.push(Row::new(db, format!("bytes per {what}"), bytes, "B"));
        }
        if sql {
            rows.push(Row::new(
                db,
                format!("statements per {what}"),
                statements,
                "stmt",
            ));
        }
    }
    let extra = |what: &str, unit: &str, value: f64| Row::new(db, what, value, unit);
    let history = per.get(2).copied();
    if proxy.is_some() {
        rows.push(
            extra(
                "extra round trips per release_run (vs release)",
                "rt",
                per[1].0 - per[0].0,
            )
            .target(Target::ValueAtMost(0.0)),
        );
        if let Some(on) = history {
            rows.push(extra(
                "extra round trips per run, history on (vs off)",
                "rt",
                on.0 - per[1].0,
            ));
        }
    }
    if sql {
        rows.push(
            extra(
                "extra statements per release_run (vs release)",
                "stmt",
                per[1].1 - per[0].1,
            )
            .target(Target::ValueAtMost(0.0)),
        );
        if let Some(on) = history {
            rows.push(extra(
                "extra statements per run, history on (vs off)",
                "stmt",
                on.1 - per[1].1,
            ));
        }
    }
    Ok(rows)
}
