//! [`Summary`], the outcome of a demo run: computed from the replicas' run records and events,
//! printed as the run's last line and parsed back by the tests.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io::Write;
use std::str::FromStr;

use super::Tally;
use crate::database::BoxError;
use crate::job::JobSpec;
use crate::runlog::{RunRecord, fires_run_twice, overlaps};

/// The outcome of a demo run, printed as its last line (`summary: runs=… skipped=… overlaps=…`).
///
/// ```
/// use shedlock_demo::cluster::Summary;
/// let line = "summary: runs=9 skipped=20 errors=0 overlaps=0 fires_run_twice=0 missed=0 interrupted=0 lost=0 died=0 replicas=3 runs.report=5 runs.sync=4";
/// let summary: Summary = line.parse()?;
/// assert_eq!(summary.overlaps, 0);
/// assert_eq!(summary.per_job["sync"], 4);
/// assert_eq!(summary.to_string(), line);
/// # Ok::<(), shedlock_demo::database::BoxError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Runs recorded in the run log (by all replicas).
    pub runs: u64,
    /// Fires skipped by a replica: claimed by another, or met while the lock was held.
    pub skipped: u64,
    /// Attempts that failed (store or run-log errors).
    pub errors: u64,
    /// Pairs of runs of one job whose intervals intersect (database clock). Must be 0.
    pub overlaps: u64,
    /// Fires run by more than one replica (from the run log's fire column). Must be 0.
    pub fires_run_twice: u64,
    /// Fires that a replica counted missed (their window passed before it claimed them, or
    /// the store failed) and that no replica ran. A fire claimed elsewhere is not missed.
    pub missed: u64,
    /// Runs without an end: their replica died mid-run.
    pub interrupted: u64,
    /// Runs that lost their lock before they ended.
    pub lost: u64,
    /// Replicas that died before they were asked to stop.
    pub died: u64,
    /// Replicas started.
    pub replicas: u64,
    /// Runs per job.
    pub per_job: BTreeMap<String, u64>,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "summary: runs={} skipped={} errors={} overlaps={} fires_run_twice={} missed={} interrupted={} lost={} died={} replicas={}",
            self.runs,
            self.skipped,
            self.errors,
            self.overlaps,
            self.fires_run_twice,
            self.missed,
            self.interrupted,
            self.lost,
            self.died,
            self.replicas
        )?;
        for (job, runs) in &self.per_job {
            write!(f, " runs.{job}={runs}")?;
        }
        Ok(())
    }
}

impl FromStr for Summary {
    type Err = BoxError;

    fn from_str(line: &str) -> Result<Self, BoxError> {
        let rest = line
            .trim()
            .strip_prefix("summary:")
            .ok_or_else(|| format!("not a summary line: {line:?}"))?;
        let mut summary = Self::default();
        for pair in rest.split_whitespace() {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| format!("summary field without a value: {pair:?}"))?;
            let value: u64 = value
                .parse()
                .map_err(|e| format!("summary field {pair:?}: {e}"))?;
            match key {
                "runs" => summary.runs = value,
                "skipped" => summary.skipped = value,
                "errors" => summary.errors = value,
                "overlaps" => summary.overlaps = value,
                "fires_run_twice" => summary.fires_run_twice = value,
                "missed" => summary.missed = value,
                "interrupted" => summary.interrupted = value,
                "lost" => summary.lost = value,
                "died" => summary.died = value,
                "replicas" => summary.replicas = value,
                other => match other.strip_prefix("runs.") {
                    Some(job) => {
                        summary.per_job.insert(job.to_owned(), value);
                    }
                    None => return Err(format!("unknown summary field {other:?}").into()),
                },
            }
        }
        Ok(summary)
    }
}

/// Prints the overlaps and the per-job counts, and returns the summary.
pub(super) fn summarise(
    specs: &[JobSpec],
    records: &[RunRecord],
    tally: &Tally,
    replicas: usize,
    out: &mut dyn Write,
) -> std::io::Result<Summary> {
    let found = overlaps(records);
    let twice = fires_run_twice(records);
    for (job, fire_us, runs) in &twice {
        writeln!(
            out,
            "FIRE RUN TWICE: {job} at {fire_us} µs ran {runs} times"
        )?;
    }
    let ran: BTreeSet<(&str, u64)> = records
        .iter()
        .map(|r| (r.job.as_str(), u64::try_from(r.tick).unwrap_or(0)))
        .collect();
    let missed = tally
        .missed
        .iter()
        .filter(|(job, tick)| !ran.contains(&(job.as_str(), *tick)))
        .count() as u64;
    for overlap in &found {
        writeln!(
            out,
            "OVERLAP in {}: {} ran [{}, {}) and {} ran [{}, {}) (µs, database clock)",
            overlap.first.job,
            overlap.first.replica,
            overlap.first.started_us,
            overlap.first.effective_end(),
            overlap.second.replica,
            overlap.second.started_us,
            overlap.second.effective_end()
        )?;
    }
    let summary = Summary {
        runs: records.len() as u64,
        skipped: tally.skipped,
        errors: tally.errors,
        overlaps: found.len() as u64,
        fires_run_twice: twice.len() as u64,
        missed,
        interrupted: records.iter().filter(|r| r.ended_us.is_none()).count() as u64,
        lost: tally.lost,
        died: tally.died,
        replicas: replicas as u64,
        per_job: per_job(specs, records),
    };
    for job in specs {
        let mut by_replica = BTreeMap::<&str, usize>::new();
        for record in records.iter().filter(|r| r.job == job.name) {
            *by_replica.entry(record.replica.as_str()).or_default() += 1;
        }
        writeln!(
            out,
            "{:<8} {} runs ({})",
            job.name,
            summary.per_job.get(&job.name).copied().unwrap_or(0),
            by_replica
                .iter()
                .map(|(r, n)| format!("{r}: {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        )?;
    }
    Ok(summary)
}

fn per_job(specs: &[JobSpec], records: &[RunRecord]) -> BTreeMap<String, u64> {
    let mut counts: BTreeMap<String, u64> = specs.iter().map(|j| (j.name.clone(), 0)).collect();
    for record in records {
        *counts.entry(record.job.clone()).or_default() += 1;
    }
    counts
}
