// Without the `scheduler` feature the link goes to docs.rs, where every feature is on.
#![cfg_attr(
    not(feature = "scheduler"),
    doc = "[`JobStatus`]: https://docs.rs/shedlock-core/latest/shedlock_core/scheduler/struct.JobStatus.html"
)]
#![cfg_attr(
    feature = "scheduler",
    doc = "[`JobStatus`]: crate::scheduler::JobStatus"
)]
//! The JSON that operator tools print, as serde types. They are the `shedlock` CLI's `--json`
//! output: [`LockView`] for `list` and `show`, [`LeaderView`] for `leader`, [`JobView`] for `jobs`,
//! [`RunView`] for `history` and [`ForgetView`] for `forget`. A scheduler's `/status` uses
//! [`JobStatus`], which serialises the same way.
//!
//! This is where the shape is documented. Each field below is a key, in this order. Times are RFC
//! 3339 in UTC with every digit the store keeps (`2026-12-01T21:38:47.748002Z`). So a printed time
//! passed back to `shedlock unlock --locked-at` matches the stored one exactly. A value that is
//! unknown or does not apply is `null`.
//!
//! ```
//! use chrono::{TimeZone, Utc};
//! use shedlock_core::admin::{LockEntry, model::LockView};
//! use shedlock_core::provider::LockRecord;
//!
//! let at = |s: i64| Utc.timestamp_opt(1_764_625_127 + s, 748_002_000).unwrap();
//! let record = LockRecord::new("nightly-report", "pod-7:1:3fa2c1", at(0), at(591))
//!     .with_fencing_token(Some(1_764_621_062_123_456));
//! let entry = LockEntry::new(record, at(59), None);
//! assert_eq!(
//!     serde_json::to_string_pretty(&LockView::from(&entry))?,
//!     r#"{
//!   "name": "nightly-report",
//!   "state": "held",
//!   "held": true,
//!   "election": false,
//!   "holder": "pod-7:1:3fa2c1",
//!   "locked_at": "2025-12-01T21:38:47.748002Z",
//!   "lock_until": "2025-12-01T21:48:38.748002Z",
//!   "remaining_ms": 532000,
//!   "fencing_token": 1764621062123456,
//!   "last_fire": null,
//!   "store_now": "2025-12-01T21:39:46.748002Z"
//! }"#
//! );
//! # Ok::<(), serde_json::Error>(())
//! ```

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{AdminAction, LockEntry, election_owner_id};
#[cfg(doc)]
use crate::jobs::RunOutcome;
use crate::jobs::{DefinitionEntry, RunEntry};
use crate::pause::{Pause, honours_pause};

/// A lock's state word: `"held"`, `"free"`, or `"leader"` for a held
/// [`LeaderLatch`](crate::LeaderLatch) row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum LockState {
    /// Not held by the store's clock.
    Free,
    /// Held.
    Held,
    /// A held election row.
    Leader,
}

impl LockState {
    /// The state of `entry` when it was read.
    #[must_use]
    pub fn of(entry: &LockEntry) -> Self {
        match (entry.is_held(), entry.is_election()) {
            (false, _) => Self::Free,
            (true, false) => Self::Held,
            (true, true) => Self::Leader,
        }
    }

    /// The word, as in the JSON: `"free"`, `"held"` or `"leader"`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Free => "free",
            Self::Held => "held",
            Self::Leader => "leader",
        }
    }
}

/// One lock, as `shedlock show NAME --json` prints it. `list --json` prints an array of them. It
/// has every field of the table and of `show`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LockView {
    /// The lock's name.
    pub name: String,
    /// Its state when read.
    pub state: LockState,
    /// Whether it was held: `lock_until` after the store's now.
    pub held: bool,
    /// Whether a leader latch wrote the row ([`LockEntry::is_election`]).
    pub election: bool,
    /// The holder's owner id (`locked_by`), kept after the lock ends.
    pub holder: String,
    /// When the holder took it, by the store's clock.
    pub locked_at: DateTime<Utc>,
    /// Until when it is held unless released or extended.
    pub lock_until: DateTime<Utc>,
    /// How long it stays held, in milliseconds. `null` when free.
    pub remaining_ms: Option<u64>,
    /// The acquisition's fencing token. `null` on a table without tokens.
    pub fencing_token: Option<i64>,
    /// The last fire a scheduler recorded on the row. `null` if none.
    pub last_fire: Option<DateTime<Utc>>,
    /// The store's clock when the row was read.
    pub store_now: DateTime<Utc>,
}

impl From<&LockEntry> for LockView {
    fn from(entry: &LockEntry) -> Self {
        let r = entry.record();
        Self {
            name: r.name().to_owned(),
            state: LockState::of(entry),
            held: entry.is_held(),
            election: entry.is_election(),
            holder: r.owner().to_owned(),
            locked_at: r.locked_at(),
            lock_until: r.lock_until(),
            remaining_ms: entry.remaining().map(millis),
            fencing_token: r.fencing_token(),
            last_fire: entry.last_fire(),
            store_now: entry.store_now(),
        }
    }
}

/// An election, as `shedlock leader NAME --json` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LeaderView {
    /// The election's name, which is its row's.
    pub name: String,
    /// The leader's owner id, without the election mark. `null` when the lease has ended.
    pub leader: Option<String>,
    /// The row's holder as stored, with the mark. It is kept after the lease ends.
    pub holder: String,
    /// Whether a leader latch wrote the row. `false` means it may be a task lock.
    pub election: bool,
    /// The term's fencing token. `null` on a table without tokens.
    pub fencing_token: Option<i64>,
    /// When the term began, by the store's clock.
    pub since: DateTime<Utc>,
    /// Until when the lease holds unless renewed.
    pub lease_until: DateTime<Utc>,
    /// How long the lease has left, in milliseconds. `null` when it has ended.
    pub lease_left_ms: Option<u64>,
    /// The store's clock when the row was read.
    pub store_now: DateTime<Utc>,
}

impl From<&LockEntry> for LeaderView {
    fn from(entry: &LockEntry) -> Self {
        let r = entry.record();
        Self {
            name: r.name().to_owned(),
            leader: entry
                .is_held()
                .then(|| election_owner_id(r.owner()).to_owned()),
            holder: r.owner().to_owned(),
            election: entry.is_election(),
            fencing_token: r.fencing_token(),
            since: r.locked_at(),
            lease_until: r.lock_until(),
            lease_left_ms: entry.remaining().map(millis),
            store_now: entry.store_now(),
        }
    }
}

/// One recorded run, as `shedlock history JOB --json` prints them, newest first, and as
/// [`JobView::last_run`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RunView {
    /// The scheduled instant of the fire it ran.
    pub fire: DateTime<Utc>,
    /// The owner id of the replica that ran it.
    pub runner: String,
    /// When it took the lock, by the store clock.
    pub started: DateTime<Utc>,
    /// When it released the lock, by the store clock.
    pub ended: DateTime<Utc>,
    /// How long it ran, in milliseconds.
    pub duration_ms: u64,
    /// `"succeeded"`, `"failed"`, `"panicked"` or `"cancelled"` ([`RunOutcome::kind`]).
    pub outcome: String,
    /// The error text of a failed run. `null` otherwise.
    pub error: Option<String>,
}

impl RunView {
    /// Whether the run counts as a failure: `failed` or `panicked`.
    #[must_use]
    pub fn is_failure(&self) -> bool {
        matches!(self.outcome.as_str(), "failed" | "panicked")
    }
}

impl From<&RunEntry> for RunView {
    fn from(run: &RunEntry) -> Self {
        Self {
            fire: run.fire,
            runner: run.runner.clone(),
            started: run.started,
            ended: run.ended,
            duration_ms: millis(run.duration()),
            outcome: run.outcome.kind().to_owned(),
            error: run.outcome.error().map(str::to_owned),
        }
    }
}

/// A replica that publishes a job ([`DefinitionEntry`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ReplicaView {
    /// The replica's owner id.
    pub replica: String,
    /// Its shedlock-core version.
    pub version: String,
    /// When it last published the job, by the store clock.
    pub published: DateTime<Utc>,
    /// When its entry expires unless it publishes again, by the store clock.
    pub expires: DateTime<Utc>,
}

/// The schedule of a published spec: as written, in words, its zone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ScheduleView {
    /// As written: the cron expression, or `every` and a fixed rate's period (`"every 5m"`). `null`
    /// when no definition gives it.
    pub schedule: Option<String>,
    /// In words ([`Schedule::describe`]). `null` when unknown, or when the spec did not parse. Its
    /// cron or period is then still in `schedule`.
    ///
    /// [`Schedule::describe`]: https://docs.rs/shedlock-core/latest/shedlock_core/struct.Schedule.html#method.describe
    pub schedule_words: Option<String>,
    /// The IANA zone of a cron schedule. `null` for a fixed rate, aligned to the Unix epoch.
    pub zone: Option<String>,
}

/// One distinct spec among the replicas publishing a job, with the replicas that publish it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SpecView {
    /// The spec's JSON as the replicas published it, in the `JobSpec`'s serde form.
    pub spec: String,
    /// Its schedule.
    #[serde(flatten)]
    pub schedule: ScheduleView,
    /// The owner ids of the replicas that publish it, sorted.
    pub replicas: Vec<String>,
}

/// One job, as `shedlock jobs --json` prints them, in an array sorted by job name. Built by
/// [`JobView::collect`] from the store's definitions and lock rows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct JobView {
    /// The job's name, or the lock name for a row that records state but has no live definition.
    pub job: String,
    /// The lock its fires take.
    pub lock_name: String,
    /// Its schedule, from the newest publication: as written, in words, and its zone. All are
    /// `null` when no replica publishes the job.
    #[serde(flatten)]
    pub schedule: ScheduleView,
    /// The next fire after the store's now by that schedule. `null` when unknown.
    pub next_fire: Option<DateTime<Utc>>,
    /// The last recorded run. `null` if none was recorded.
    pub last_run: Option<RunView>,
    /// When the last successful run ended. `null` if none was recorded.
    pub last_success: Option<DateTime<Utc>>,
    /// Runs that failed or panicked since the last success.
    pub consecutive_failures: u32,
    /// Whether the lock row records job state. `false` means no row yet, or a table without the
    /// state columns.
    pub state_recorded: bool,
    /// Whether the job's lock was held when read, as by a run in progress.
    pub held: bool,
    /// The replicas that publish the job, sorted by owner id.
    pub replicas: Vec<ReplicaView>,
    /// Whether the replicas publish different specs, as in a rolling deploy or a configuration that
    /// differs between replicas. See `specs`.
    pub disagreeing: bool,
    /// Each distinct spec and the replicas publishing it, newest publication first.
    pub specs: Vec<SpecView>,
    /// The pause in force when read: since, until (`null`: until resumed), by whom and why.
    /// `null` when the job is not paused, or its pause has ended.
    #[serde(default)]
    pub paused: Option<Pause>,
    /// Replicas that run the job but ignore pauses, as their published version predates pause
    /// support ([`PAUSE_SINCE`](crate::pause::PAUSE_SINCE)). Listed only while the job is paused.
    /// Java `ShedLock` replicas publish nothing and ignore pauses too.
    #[serde(default)]
    pub pause_ignored_by: Vec<String>,
    /// The last pause, resume or unlock: what, by whom, when. `null` if none was recorded.
    #[serde(default)]
    pub last_action: Option<AdminAction>,
    /// The store's clock when read.
    pub store_now: DateTime<Utc>,
}

/// The keys of a published spec that say when it fires, read leniently. A spec from a newer version
/// with keys this one does not know still shows its schedule.
#[cfg(feature = "scheduler")]
#[derive(Deserialize)]
struct SpecKeys {
    cron: Option<String>,
    zone: Option<String>,
    every: Option<String>,
}

#[cfg(feature = "scheduler")]
type Schedule = crate::Schedule;
/// Without the `scheduler` feature, published specs are not read. Their schedules are unknown.
#[cfg(not(feature = "scheduler"))]
type Schedule = std::convert::Infallible;

impl ScheduleView {
    /// The schedule of the spec `json`, and the schedule itself where it parses.
    #[cfg(feature = "scheduler")]
    fn of_spec(json: &str) -> (Self, Option<Schedule>) {
        let Ok(keys) = serde_json::from_str::<SpecKeys>(json) else {
            return (Self::default(), None);
        };
        let schedule = match (&keys.cron, &keys.every) {
            (Some(cron), None) => {
                Schedule::cron_in(cron, keys.zone.as_deref().unwrap_or("UTC")).ok()
            }
            (None, Some(every)) => shedlock_duration::parse(every)
                .ok()
                .and_then(|period| Schedule::every(period).ok()),
            _ => None,
        };
        let schedule_words = schedule.as_ref().map(Schedule::describe);
        let view = match keys {
            SpecKeys {
                cron: Some(cron),
                zone,
                ..
            } => Self {
                schedule: Some(cron),
                schedule_words,
                zone: Some(zone.unwrap_or_else(|| "UTC".to_owned())),
            },
            SpecKeys {
                every: Some(every), ..
            } => Self {
                schedule: Some(format!("every {every}")),
                schedule_words,
                zone: None,
            },
            _ => Self::default(),
        };
        (view, schedule)
    }

    #[cfg(not(feature = "scheduler"))]
    fn of_spec(_: &str) -> (Self, Option<Schedule>) {
        (Self::default(), None)
    }
}

#[cfg(feature = "scheduler")]
fn next_after(schedule: Option<&Schedule>, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    schedule?.next_after(now)
}

#[cfg(not(feature = "scheduler"))]
fn next_after(_: Option<&Schedule>, _: DateTime<Utc>) -> Option<DateTime<Utc>> {
    None
}

/// Whether two published specs say the same as JSON values, key order and spacing aside.
#[cfg(feature = "scheduler")]
fn same_spec(a: &str, b: &str) -> bool {
    match (
        serde_json::from_str::<serde_json::Value>(a),
        serde_json::from_str::<serde_json::Value>(b),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => a.trim() == b.trim(),
    }
}

/// Whether two published specs say the same as text. Without the `scheduler` feature, specs are not
/// read.
#[cfg(not(feature = "scheduler"))]
fn same_spec(a: &str, b: &str) -> bool {
    a.trim() == b.trim()
}

impl JobView {
    /// The jobs of a store, sorted by job name. There is one per job name its replicas publish
    /// ([`LockAdmin::definitions`]), joined by lock name with the lock rows ([`LockAdmin::list`])
    /// for the recorded state. There is also one per lock row that recorded a run but has no live
    /// definition, named by the lock, with its schedule unknown. The next fire is the first after
    /// `store_now`, the store's clock when read.
    ///
    /// A pure function, so tools and tests build the same views from the same reads. Published
    /// specs are read with the `scheduler` feature, on by default. Without it every schedule is
    /// unknown.
    ///
    /// [`LockAdmin::definitions`]: super::LockAdmin::definitions
    /// [`LockAdmin::list`]: super::LockAdmin::list
    #[must_use]
    pub fn collect(
        definitions: &[DefinitionEntry],
        entries: &[LockEntry],
        store_now: DateTime<Utc>,
    ) -> Vec<Self> {
        let mut jobs: Vec<Self> = Vec::new();
        let mut names: Vec<(&str, &str)> = definitions
            .iter()
            .map(|d| (d.definition.job.as_str(), d.definition.lock_name.as_str()))
            .collect();
        names.sort_unstable();
        names.dedup();
        for (job, lock_name) in names {
            let mut published: Vec<&DefinitionEntry> = definitions
                .iter()
                .filter(|d| d.definition.job == job && d.definition.lock_name == lock_name)
                .collect();
            published.sort_by(|a, b| a.replica.cmp(&b.replica));
            let entry = entries.iter().find(|e| e.record().name() == lock_name);
            jobs.push(Self::build(job, lock_name, &published, entry, store_now));
        }
        for entry in entries {
            let recorded = entry.state().is_some_and(|s| s.last_run.is_some())
                || entry.pause().is_some()
                || entry.last_action().is_some();
            let name = entry.record().name();
            if recorded && !jobs.iter().any(|j| j.lock_name == name) {
                jobs.push(Self::build(name, name, &[], Some(entry), store_now));
            }
        }
        jobs.sort_by(|a, b| (&a.job, &a.lock_name).cmp(&(&b.job, &b.lock_name)));
        jobs
    }

    fn build(
        job: &str,
        lock_name: &str,
        published: &[&DefinitionEntry],
        entry: Option<&LockEntry>,
        store_now: DateTime<Utc>,
    ) -> Self {
        // Distinct specs, the newest publication's first.
        let mut by_newest = published.to_vec();
        by_newest.sort_by_key(|d| std::cmp::Reverse(d.published));
        let mut specs: Vec<(SpecView, Option<Schedule>)> = Vec::new();
        for d in by_newest {
            let text = &d.definition.spec;
            if let Some((spec, _)) = specs.iter_mut().find(|(s, _)| same_spec(&s.spec, text)) {
                spec.replicas.push(d.replica.clone());
            } else {
                let (schedule, parsed) = ScheduleView::of_spec(text);
                let view = SpecView {
                    spec: text.clone(),
                    schedule,
                    replicas: vec![d.replica.clone()],
                };
                specs.push((view, parsed));
            }
        }
        for (spec, _) in &mut specs {
            spec.replicas.sort();
        }
        let (schedule, next_fire) = specs.first().map_or_else(
            || (ScheduleView::default(), None),
            |(spec, parsed)| {
                (
                    spec.schedule.clone(),
                    next_after(parsed.as_ref(), store_now),
                )
            },
        );
        let state = entry.and_then(LockEntry::state);
        let paused = entry
            .filter(|e| e.is_paused())
            .and_then(LockEntry::pause)
            .cloned();
        let pause_ignored_by = if paused.is_some() {
            published
                .iter()
                .filter(|d| !honours_pause(&d.version))
                .map(|d| d.replica.clone())
                .collect()
        } else {
            Vec::new()
        };
        Self {
            job: job.to_owned(),
            lock_name: lock_name.to_owned(),
            schedule,
            next_fire,
            last_run: state.and_then(|s| s.last_run.as_ref()).map(RunView::from),
            last_success: state.and_then(|s| s.last_success),
            consecutive_failures: state.map_or(0, |s| s.consecutive_failures),
            state_recorded: state.is_some(),
            held: entry.is_some_and(LockEntry::is_held),
            replicas: published
                .iter()
                .map(|d| ReplicaView {
                    replica: d.replica.clone(),
                    version: d.version.clone(),
                    published: d.published,
                    expires: d.expires,
                })
                .collect(),
            disagreeing: specs.len() > 1,
            specs: specs.into_iter().map(|(spec, _)| spec).collect(),
            paused,
            pause_ignored_by,
            last_action: entry.and_then(LockEntry::last_action).cloned(),
            store_now,
        }
    }

    /// Whether its last counted run failed or panicked: `consecutive_failures > 0`.
    #[must_use]
    pub fn is_failing(&self) -> bool {
        self.consecutive_failures > 0
    }
}

/// The job an operator's name means, and the lock its fires take: what the CLI's job commands and
/// the dashboard's actions act on.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobTarget {
    /// The job's name, or the lock's for a row no replica publishes.
    pub job: String,
    /// The lock its fires take: the one pauses and triggers are written to.
    pub lock: String,
    /// Whether a replica publishes a job on that lock now, so one can take a trigger.
    pub published: bool,
}

impl JobTarget {
    /// The job `name` means: a job a replica publishes by its name, else by its lock's name, else
    /// a lock row of that name (a job can be paused before any replica publishes it). A published
    /// job wins over a leftover row of the same name, as after a job's lock was renamed. `None`:
    /// no such job or row.
    ///
    /// ```
    /// use chrono::Utc;
    /// use shedlock_core::admin::model::JobTarget;
    /// use shedlock_core::jobs::{Definition, DefinitionEntry};
    ///
    /// let now = Utc::now();
    /// let published = DefinitionEntry::new(
    ///     Definition::new("report", "report-lock", r#"{"every":"1m"}"#),
    ///     "pod-1", "0.2.0", now, now,
    /// );
    /// let target = JobTarget::resolve(&[published], &[], "report").expect("published");
    /// assert_eq!((target.job.as_str(), target.lock.as_str()), ("report", "report-lock"));
    /// assert!(target.published);
    /// assert!(JobTarget::resolve(&[], &[], "report").is_none());
    /// ```
    #[must_use]
    pub fn resolve(
        definitions: &[DefinitionEntry],
        entries: &[LockEntry],
        name: &str,
    ) -> Option<Self> {
        let published = definitions
            .iter()
            .find(|d| d.definition.job == name)
            .or_else(|| definitions.iter().find(|d| d.definition.lock_name == name));
        if let Some(d) = published {
            return Some(Self {
                job: d.definition.job.clone(),
                lock: d.definition.lock_name.clone(),
                published: true,
            });
        }
        entries
            .iter()
            .any(|e| e.record().name() == name)
            .then(|| Self {
                job: name.to_owned(),
                lock: name.to_owned(),
                published: false,
            })
    }
}

/// What `shedlock forget JOB --json` prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ForgetView {
    /// The job whose definitions were removed.
    pub job: String,
    /// How many definitions were removed, one per replica.
    pub removed: u64,
}

impl ForgetView {
    /// What forgetting `job` removed.
    #[must_use]
    pub fn new(job: impl Into<String>, removed: u64) -> Self {
        Self {
            job: job.into(),
            removed,
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;
    use crate::jobs::{Definition, JobState, RunOutcome};
    use crate::provider::LockRecord;

    fn at(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_764_620_000 + secs, 123_456_000)
            .single()
            .expect("a valid time")
    }

    #[test]
    fn a_leader_view_names_the_leader_only_while_the_lease_holds() {
        let record = LockRecord::new("scheduler", "pod-2:1:cc#election", at(0), at(15));
        let held = LeaderView::from(&LockEntry::new(record.clone(), at(2), None));
        assert_eq!(
            serde_json::to_string(&held).expect("serialises"),
            r#"{"name":"scheduler","leader":"pod-2:1:cc","holder":"pod-2:1:cc#election","election":true,"fencing_token":null,"since":"2025-12-01T20:13:20.123456Z","lease_until":"2025-12-01T20:13:35.123456Z","lease_left_ms":13000,"store_now":"2025-12-01T20:13:22.123456Z"}"#
        );
        let ended = LeaderView::from(&LockEntry::new(record.clone(), at(20), None));
        assert_eq!((ended.leader, ended.lease_left_ms), (None, None));
        let view = LockView::from(&LockEntry::new(record, at(2), Some(at(-60))));
        assert_eq!(view.state, LockState::Leader);
        assert_eq!(view.last_fire, Some(at(-60)));
        let text = serde_json::to_string(&view).expect("serialises");
        assert!(text.contains(r#""state":"leader""#), "{text}");
        assert_eq!(
            serde_json::from_str::<LockView>(&text).expect("reads back"),
            view
        );
    }

    fn definition(
        job: &str,
        lock: &str,
        replica: &str,
        spec: &str,
        published: i64,
    ) -> DefinitionEntry {
        DefinitionEntry::new(
            Definition::new(job, lock, spec),
            replica,
            "0.2.0",
            at(published),
            at(published + 30),
        )
    }

    fn run(lock: &str, outcome: RunOutcome) -> RunEntry {
        RunEntry::new(lock, at(-600), "pod-1", at(-599), at(-597), outcome)
    }

    #[test]
    fn a_paused_job_shows_its_pause_and_the_replicas_that_ignore_it() {
        let spec = r#"{"name":"sync","every":"5m"}"#;
        let mut old = definition("sync", "sync", "pod-old", spec, -10);
        old.version = "0.1.0".into();
        let defs = [definition("sync", "sync", "pod-new", spec, -10), old];
        let pause = Pause::new(at(-60), Some(at(60)), "ann", Some("upstream down"));
        let action = AdminAction::new(super::super::ActionKind::Paused, "ann", at(-60));
        let row = |now: i64| {
            LockEntry::new(LockRecord::new("sync", "", at(-60), at(-60)), at(now), None)
                .with_pause(Some(pause.clone()))
                .with_last_action(Some(action.clone()))
        };
        let paused = JobView::collect(&defs, &[row(0)], at(0));
        assert_eq!(paused[0].paused.as_ref(), Some(&pause));
        assert_eq!(paused[0].pause_ignored_by, ["pod-old"]);
        assert_eq!(paused[0].last_action.as_ref(), Some(&action));
        // At its end the pause no longer holds: not shown, nobody flagged, the action stays.
        let ended = JobView::collect(&defs, &[row(60)], at(60));
        assert_eq!(ended[0].paused, None);
        assert!(ended[0].pause_ignored_by.is_empty());
        assert_eq!(ended[0].last_action.as_ref(), Some(&action));
        // A job paused before any replica published it is listed by its lock name.
        let alone = JobView::collect(&[], &[row(0)], at(0));
        assert_eq!(alone.len(), 1);
        assert_eq!(alone[0].paused.as_ref(), Some(&pause));
        let text = serde_json::to_string(&paused[0]).expect("serialises");
        assert!(
            text.contains(r#""paused":{"since":"2025-12-01T20:12:20.123456Z","until":"2025-12-01T20:14:20.123456Z","by":"ann","reason":"upstream down"}"#),
            "{text}"
        );
        assert_eq!(
            serde_json::from_str::<JobView>(&text).expect("reads back"),
            paused[0]
        );
    }

    #[test]
    fn jobs_join_definitions_and_rows_by_lock_name() {
        let every =
            r#"{"name":"sync","every":"5m","keep_alive":false,"catch_up":false,"on_held":"skip"}"#;
        let nightly = r#"{"name":"report","lock_name":"report-lock","cron":"0 0 3 * * *","zone":"Europe/Berlin"}"#;
        let nightly_reordered = r#"{"zone":"Europe/Berlin", "cron":"0 0 3 * * *","lock_name":"report-lock","name":"report"}"#;
        let hourly = r#"{"name":"report","lock_name":"report-lock","cron":"0 0 * * * *","zone":"Europe/Berlin","new_key":1}"#;
        let defs = [
            definition("report", "report-lock", "pod-2", nightly, -10),
            definition("report", "report-lock", "pod-1", nightly_reordered, -20),
            definition("report", "report-lock", "pod-3", hourly, -5),
            definition("sync", "sync", "pod-1", every, -20),
        ];
        let failed = JobState::default()
            .after(run("report-lock", RunOutcome::Succeeded))
            .after(run(
                "report-lock",
                RunOutcome::Failed("no route to host".into()),
            ))
            .after(run("report-lock", RunOutcome::Panicked));
        let orphan = JobState::default().after(run("old-job", RunOutcome::Succeeded));
        let row = |name: &str, until: i64| LockRecord::new(name, "pod-1", at(-599), at(until));
        let entries = [
            LockEntry::new(row("old-job", -590), at(0), None).with_state(orphan),
            LockEntry::new(row("report-lock", 60), at(0), None).with_state(failed),
            // A row that never recorded a run (a plain lock, an election) is no job.
            LockEntry::new(row("plain", -590), at(0), None).with_state(JobState::default()),
            LockEntry::new(row("java", -590), at(0), None),
        ];
        let jobs = JobView::collect(&defs, &entries, at(0));
        let names: Vec<&str> = jobs.iter().map(|j| j.job.as_str()).collect();
        assert_eq!(names, ["old-job", "report", "sync"]);

        let old = &jobs[0];
        assert_eq!(old.lock_name, "old-job");
        assert_eq!(old.schedule, ScheduleView::default());
        assert_eq!(
            (old.next_fire, old.held, old.disagreeing),
            (None, false, false)
        );
        assert!(old.replicas.is_empty() && old.specs.is_empty());
        assert_eq!(old.last_success, Some(at(-597)));

        let report = &jobs[1];
        assert_eq!(report.lock_name, "report-lock");
        assert!(report.held && report.state_recorded && report.is_failing());
        assert_eq!(report.consecutive_failures, 2);
        assert_eq!(report.last_success, Some(at(-597)));
        let last = report.last_run.as_ref().expect("a last run");
        assert_eq!(
            (last.outcome.as_str(), last.error.as_deref()),
            ("panicked", None)
        );
        assert_eq!(last.duration_ms, 2_000);
        // The newest publication (pod-3's) gives the schedule; the two spellings of the
        // nightly spec are one spec.
        assert!(report.disagreeing);
        assert_eq!(report.schedule.schedule.as_deref(), Some("0 0 * * * *"));
        assert_eq!(
            report.schedule.schedule_words.as_deref(),
            Some("every hour")
        );
        assert_eq!(report.schedule.zone.as_deref(), Some("Europe/Berlin"));
        let specs: Vec<(&str, Vec<&str>)> = report
            .specs
            .iter()
            .map(|s| {
                (
                    s.schedule.schedule.as_deref().unwrap_or_default(),
                    s.replicas.iter().map(String::as_str).collect(),
                )
            })
            .collect();
        assert_eq!(
            specs,
            [
                ("0 0 * * * *", vec!["pod-3"]),
                ("0 0 3 * * *", vec!["pod-1", "pod-2"])
            ]
        );
        let replicas: Vec<&str> = report.replicas.iter().map(|r| r.replica.as_str()).collect();
        assert_eq!(replicas, ["pod-1", "pod-2", "pod-3"]);
        // 2025-12-01T20:13:20 UTC is 21:13 in Berlin: the next whole hour.
        assert_eq!(
            report.next_fire,
            Some(Utc.with_ymd_and_hms(2025, 12, 1, 21, 0, 0).unwrap())
        );

        let sync = &jobs[2];
        assert_eq!(sync.schedule.schedule.as_deref(), Some("every 5m"));
        assert_eq!(
            sync.schedule.schedule_words.as_deref(),
            Some("every 5 minutes")
        );
        assert_eq!(sync.schedule.zone, None);
        assert!(!sync.state_recorded && !sync.held && !sync.disagreeing && !sync.is_failing());
        assert_eq!(
            sync.next_fire,
            Some(Utc.with_ymd_and_hms(2025, 12, 1, 20, 15, 0).unwrap())
        );

        let text = serde_json::to_string(&jobs).expect("serialises");
        assert_eq!(
            serde_json::from_str::<Vec<JobView>>(&text).expect("reads back"),
            jobs
        );
        let value: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(value[1]["schedule_words"], "every hour");
        assert_eq!(value[1]["last_run"]["outcome"], "panicked");
        assert_eq!(value[1]["specs"][1]["schedule"], "0 0 3 * * *");
    }

    #[test]
    fn a_spec_that_does_not_parse_still_shows_what_it_can() {
        let defs = [
            definition("a", "a", "pod-1", "not json", 0),
            definition(
                "b",
                "b",
                "pod-1",
                r#"{"name":"b","cron":"61 * * * * *"}"#,
                0,
            ),
        ];
        let jobs = JobView::collect(&defs, &[], at(0));
        assert_eq!(jobs[0].schedule, ScheduleView::default());
        assert_eq!(jobs[1].schedule.schedule.as_deref(), Some("61 * * * * *"));
        assert_eq!(jobs[1].schedule.schedule_words, None);
        assert_eq!(jobs[1].next_fire, None);
        let view = RunView::from(&run("a", RunOutcome::Failed("boom".into())));
        assert!(view.is_failure());
        assert_eq!(view.error.as_deref(), Some("boom"));
    }
}
