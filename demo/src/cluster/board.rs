//! The board: the live view of a run, one line per job's fire saying which replica ran it and
//! which skipped it, printed once every live replica has decided.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::time::Duration;

use tokio::time::Instant;

use crate::event::Event;
use crate::job::JobSpec;

/// The tick board: collects each replica's decision for one (tick, job) and prints one line per
/// group once every live replica has decided (or the group is old).
pub(super) struct Board {
    periods: HashMap<String, u64>,
    /// The first tick's fire time (ms since the epoch): tick numbers count from it, so jobs
    /// with one period share numbers.
    base_ms: Option<u64>,
    groups: BTreeMap<(u64, String), Group>,
    printed: BTreeSet<(u64, String)>,
    /// Job → (replica, tick) of the run in progress.
    pub(super) running: HashMap<String, (String, u64)>,
}

struct Group {
    tick: u64,
    opened: Instant,
    ran: Vec<(String, Option<i64>)>,
    skipped: Vec<String>,
    missed: Vec<(String, String)>,
    errors: Vec<(String, String)>,
    decided: BTreeSet<String>,
}

/// How long a tick group waits for slow or dead replicas before it is printed anyway.
const GROUP_PATIENCE: Duration = Duration::from_millis(1500);

impl Board {
    pub(super) fn new(jobs: &[JobSpec]) -> Self {
        Self {
            periods: jobs
                .iter()
                .map(|j| {
                    (
                        j.name.clone(),
                        u64::try_from(j.every.as_millis()).unwrap_or(1).max(1),
                    )
                })
                .collect(),
            base_ms: None,
            groups: BTreeMap::new(),
            printed: BTreeSet::new(),
            running: HashMap::new(),
        }
    }

    fn period(&self, job: &str) -> u64 {
        self.periods.get(job).copied().unwrap_or(1)
    }

    fn key(&self, job: &str, tick: u64) -> (u64, String) {
        (tick.saturating_mul(self.period(job)), job.to_owned())
    }

    /// The tick's number for display: 1 for the first tick seen.
    fn number(&self, job: &str, tick: u64) -> u64 {
        let period = self.period(job);
        let fire_ms = tick.saturating_mul(period);
        fire_ms.saturating_sub(self.base_ms.unwrap_or(fire_ms)) / period + 1
    }

    fn group(&mut self, job: &str, tick: u64) -> Option<&mut Group> {
        let key = self.key(job, tick);
        if self.printed.contains(&key) {
            return None;
        }
        self.base_ms.get_or_insert(key.0);
        Some(self.groups.entry(key).or_insert_with(|| Group {
            tick,
            opened: Instant::now(),
            ran: Vec::new(),
            skipped: Vec::new(),
            missed: Vec::new(),
            errors: Vec::new(),
            decided: BTreeSet::new(),
        }))
    }

    /// Records an event; returns a line to print at once for a decision that came too late for
    /// its group's line.
    pub(super) fn record(&mut self, event: &Event) -> Option<String> {
        let late = |board: &Self, job: &str, tick: u64, what: &str| {
            let n = board.number(job, tick);
            Some(format!("{:>4}  {job:<8} (late) {what}", format!("#{n}")))
        };
        match event {
            Event::Ran {
                replica,
                job,
                tick,
                token,
                ..
            } => {
                self.running.insert(job.clone(), (replica.clone(), *tick));
                match self.group(job, *tick) {
                    Some(group) => {
                        group.ran.push((replica.clone(), *token));
                        group.decided.insert(replica.clone());
                    }
                    None => return late(self, job, *tick, &format!("ran: {replica}")),
                }
            }
            Event::Skipped { replica, job, tick } | Event::Paused { replica, job, tick } => {
                match self.group(job, *tick) {
                    Some(group) => {
                        group.skipped.push(replica.clone());
                        group.decided.insert(replica.clone());
                    }
                    None => return late(self, job, *tick, &format!("skipped: {replica}")),
                }
            }
            Event::Missed {
                replica,
                job,
                tick,
                reason,
            } => match self.group(job, *tick) {
                Some(group) => {
                    group.missed.push((replica.clone(), reason.clone()));
                    group.decided.insert(replica.clone());
                }
                None => return late(self, job, *tick, &format!("missed: {replica}: {reason}")),
            },
            Event::Error {
                replica,
                job,
                tick,
                message,
            } => match self.group(job, *tick) {
                Some(group) => {
                    group.errors.push((replica.clone(), message.clone()));
                    group.decided.insert(replica.clone());
                }
                None => return late(self, job, *tick, &format!("error: {replica}: {message}")),
            },
            Event::Done { replica, job, .. }
                if self.running.get(job).is_some_and(|(r, _)| r == replica) =>
            {
                self.running.remove(job);
            }
            _ => {}
        }
        None
    }

    /// The lines of the groups, in tick order, that are due: complete (every replica in `live`
    /// decided), old, or all of them with `all`. A due group waits for the groups before it.
    pub(super) fn flush(&mut self, live: &BTreeSet<String>, all: bool) -> Vec<String> {
        let mut lines = Vec::new();
        while let Some(entry) = self.groups.first_entry() {
            let group = entry.get();
            if !(all || live.is_subset(&group.decided) || group.opened.elapsed() >= GROUP_PATIENCE)
            {
                break;
            }
            let (key, group) = entry.remove_entry();
            lines.push(self.line(&key.1, &group, live));
            self.printed.insert(key);
        }
        lines
    }

    fn line(&self, job: &str, group: &Group, live: &BTreeSet<String>) -> String {
        let n = self.number(job, group.tick);
        let ran = if group.ran.is_empty() {
            "-".to_owned()
        } else {
            group
                .ran
                .iter()
                .map(|(r, token)| match token {
                    Some(t) => format!("{r} (token {t})"),
                    None => r.clone(),
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut skipped = group.skipped.clone();
        skipped.sort();
        let mut text = format!(
            "{:>4}  {job:<8} ran: {ran:<28} skipped: {}",
            format!("#{n}"),
            if skipped.is_empty() {
                "-".to_owned()
            } else {
                skipped.join(" ")
            }
        );
        if group.ran.is_empty() && group.errors.is_empty() {
            match self.running.get(job) {
                Some((r, t)) if *t < group.tick && live.contains(r) => {
                    let m = self.number(job, *t);
                    let _ = write!(text, "   ({r} still running #{m})");
                }
                Some((r, _)) if !live.contains(r) => {
                    let _ = write!(text, "   ({r} died holding the lock; it frees at at_most)");
                }
                _ => {}
            }
        }
        for (r, reason) in &group.missed {
            let _ = write!(text, "   missed by {r}: {reason}");
        }
        for (r, message) in &group.errors {
            let _ = write!(text, "   error on {r}: {message}");
        }
        text
    }
}
