//! Job state kept in the store, for operators: how each run ended, a [`RunOutcome`] recorded by the
//! release of its lock as a [`RunReport`], the [`JobState`] that follows, the runs kept as history
//! ([`RunEntry`], [`HistoryPolicy`]) and the definitions replicas publish ([`Definition`],
//! [`DefinitionEntry`]).
//!
//! # What a store records, and when
//!
//! A scheduler's run hands its [`RunReport`] to the release of its lock,
//! [`LockProvider::release_run`], which writes it in the same guarded step and with the same
//! durability. On Postgres, with `synchronous_commit = off`, a server crash may lose the last
//! fraction of a second of releases and their records alike.
//!
//! **Recording never fails or delays the release.** A store without the columns answers
//! [`Error::is_unsupported`] at once, without asking the server. Any other error of a recorded
//! release, such as a column dropped after the provider looked, makes the caller run the plain
//! [`release`](LockProvider::release). Both cases are logged once.
//!
//! # Which outcomes count
//!
//! | outcome | `consecutive_failures` | `last_success` |
//! |---|---|---|
//! | `succeeded` | reset to 0 | set to the run's end |
//! | `failed`, `panicked` | plus one | unchanged |
//! | `cancelled` (shutdown's grace ran out, the leader term ended) | unchanged | unchanged |
//!
//! A cancelled run was stopped from outside, so it neither counts as a failure nor resets the
//! count. [`JobState::after`] is this table as code, for stores that decide in their own code.
//!
//! Only runs of a fire are recorded: a scheduler's, and those of
//! `LockingTaskExecutor::execute_fire` (feature `scheduler`), whose task's output tells the outcome
//! through [`TaskOutcome`]. A lock taken with [`execute`](crate::LockingTaskExecutor::execute) has
//! no fire and no job. Its release is the plain one.
//!
//! [`LockProvider::release_run`]: crate::provider::LockProvider::release_run
//! [`LockProvider`]: crate::provider::LockProvider

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

#[cfg(doc)]
use crate::error::Error;
#[cfg(doc)]
use crate::provider::LockProvider;

/// The longest error text a store keeps, in characters. Longer texts are cut to this length with
/// `…` as their last character (see [`RunOutcome::capped`]).
pub const MAX_ERROR_LEN: usize = 1000;

/// What a task's output says about its run, for the outcome its release records: `()` succeeded,
/// and a `Result` failed with its error's `Display` when it is an `Err`.
///
/// ```
/// use shedlock_core::jobs::{RunOutcome, TaskOutcome};
///
/// assert_eq!(().outcome(), RunOutcome::Succeeded);
/// assert_eq!(Ok::<u8, String>(1).outcome(), RunOutcome::Succeeded);
/// assert_eq!(Err::<u8, _>("disk full").outcome(), RunOutcome::Failed("disk full".into()));
/// ```
pub trait TaskOutcome {
    /// How the run that produced this output ended.
    fn outcome(&self) -> RunOutcome;
}

impl TaskOutcome for () {
    fn outcome(&self) -> RunOutcome {
        RunOutcome::Succeeded
    }
}

impl<T, E: std::fmt::Display> TaskOutcome for Result<T, E> {
    fn outcome(&self) -> RunOutcome {
        match self {
            Ok(_) => RunOutcome::Succeeded,
            Err(error) => RunOutcome::Failed(error.to_string()),
        }
    }
}

/// How one run ended. In JSON, `"outcome"` is `"succeeded"`, `"failed"`, `"panicked"` or
/// `"cancelled"`. A failed run also has `"error"`, the message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", content = "error", rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunOutcome {
    /// The body returned `()` or `Ok(())`.
    Succeeded,
    /// The body returned an `Err`, kept as its `Display`. Logged and counted, not retried.
    Failed(String),
    /// The body panicked. Logged and counted as an error. The scheduler goes on.
    Panicked,
    /// The run was stopped: its leader term ended, or shutdown's grace ran out.
    Cancelled,
}

impl RunOutcome {
    /// The outcome's name as stores keep it: `succeeded`, `failed`, `panicked` or `cancelled`.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Succeeded => "succeeded",
            Self::Failed(_) => "failed",
            Self::Panicked => "panicked",
            Self::Cancelled => "cancelled",
        }
    }

    /// The error text of a failed run.
    #[must_use]
    pub fn error(&self) -> Option<&str> {
        match self {
            Self::Failed(error) => Some(error),
            _ => None,
        }
    }

    /// The outcome a store kept as `kind` and `error` (see [`kind`](Self::kind)). `None` for a kind
    /// this version does not know.
    ///
    /// ```
    /// use shedlock_core::jobs::RunOutcome;
    ///
    /// let failed = RunOutcome::Failed("no route to host".into());
    /// assert_eq!(RunOutcome::from_parts(failed.kind(), failed.error()), Some(failed));
    /// assert_eq!(RunOutcome::from_parts("exploded", None), None);
    /// ```
    #[must_use]
    pub fn from_parts(kind: &str, error: Option<&str>) -> Option<Self> {
        Some(match kind {
            "succeeded" => Self::Succeeded,
            "failed" => Self::Failed(error.unwrap_or_default().to_owned()),
            "panicked" => Self::Panicked,
            "cancelled" => Self::Cancelled,
            _ => return None,
        })
    }

    /// Whether it counts as a failure. `failed` and `panicked` do (see the module's table).
    #[must_use]
    pub fn is_failure(&self) -> bool {
        matches!(self, Self::Failed(_) | Self::Panicked)
    }

    /// The same outcome with its error text cut to [`MAX_ERROR_LEN`] characters. A NUL character
    /// becomes U+FFFD, since Postgres text cannot hold it.
    ///
    /// ```
    /// use shedlock_core::jobs::{MAX_ERROR_LEN, RunOutcome};
    ///
    /// let long = RunOutcome::Failed("x".repeat(5000)).capped();
    /// let text = long.error().unwrap();
    /// assert_eq!(text.chars().count(), MAX_ERROR_LEN);
    /// assert!(text.ends_with('…'));
    /// let nul = RunOutcome::Failed("a\0b".into()).capped();
    /// assert_eq!(nul.error(), Some("a\u{FFFD}b"));
    /// ```
    #[must_use]
    pub fn capped(self) -> Self {
        match self {
            Self::Failed(error) => {
                let error = if error.contains('\0') {
                    error.replace('\0', "\u{FFFD}")
                } else {
                    error
                };
                if error.chars().count() > MAX_ERROR_LEN {
                    let mut cut: String = error.chars().take(MAX_ERROR_LEN - 1).collect();
                    cut.push('…');
                    Self::Failed(cut)
                } else {
                    Self::Failed(error)
                }
            }
            other => other,
        }
    }
}

/// What the release of a run's lock records: the fire it ran and how it ended. The runner is the
/// lock record's owner. The start is its `locked_at`, the claim by the store's clock. The end is
/// the store's now when it releases.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunReport {
    /// The scheduled instant of the fire the run ran.
    pub fire: DateTime<Utc>,
    /// How it ended. Its error text is already capped (see [`RunOutcome::capped`]).
    pub outcome: RunOutcome,
}

impl RunReport {
    /// A report of a run of `fire` that ended with `outcome`. Its error text is capped here.
    #[must_use]
    pub fn new(fire: DateTime<Utc>, outcome: RunOutcome) -> Self {
        Self {
            fire,
            outcome: outcome.capped(),
        }
    }
}

/// One recorded run: of which lock and fire, on which replica, when, and how it ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RunEntry {
    /// The lock name the run held.
    pub lock_name: String,
    /// The scheduled instant of the fire it ran.
    pub fire: DateTime<Utc>,
    /// The owner id of the replica that ran it.
    pub runner: String,
    /// When it took the lock, by the store clock.
    pub started: DateTime<Utc>,
    /// When it released the lock, by the store clock.
    pub ended: DateTime<Utc>,
    /// How it ended.
    #[serde(flatten)]
    pub outcome: RunOutcome,
}

impl RunEntry {
    /// An entry. `outcome`'s error text is capped (see [`RunOutcome::capped`]).
    #[must_use]
    pub fn new(
        lock_name: impl Into<String>,
        fire: DateTime<Utc>,
        runner: impl Into<String>,
        started: DateTime<Utc>,
        ended: DateTime<Utc>,
        outcome: RunOutcome,
    ) -> Self {
        Self {
            lock_name: lock_name.into(),
            fire,
            runner: runner.into(),
            started,
            ended,
            outcome: outcome.capped(),
        }
    }

    /// How long the run took. Zero if the clock stepped back.
    #[must_use]
    pub fn duration(&self) -> Duration {
        (self.ended - self.started).to_std().unwrap_or_default()
    }
}

/// A job's state as its lock's row keeps it: the last run, the last success and the failures since.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct JobState {
    /// The last recorded run.
    pub last_run: Option<RunEntry>,
    /// When the last successful run ended, by the store clock.
    pub last_success: Option<DateTime<Utc>>,
    /// Runs that failed or panicked since the last success. Cancelled runs do not count.
    pub consecutive_failures: u32,
}

impl JobState {
    /// A state from its parts, as a store read them.
    #[must_use]
    pub fn new(
        last_run: Option<RunEntry>,
        last_success: Option<DateTime<Utc>>,
        consecutive_failures: u32,
    ) -> Self {
        Self {
            last_run,
            last_success,
            consecutive_failures,
        }
    }

    /// The state after `run`, per the module's table. For stores that decide in their own code.
    ///
    /// ```
    /// use chrono::Utc;
    /// use shedlock_core::jobs::{JobState, RunEntry, RunOutcome};
    ///
    /// let now = Utc::now();
    /// let run = |outcome| RunEntry::new("report", now, "pod-1", now, now, outcome);
    /// let failed = JobState::default().after(run(RunOutcome::Panicked));
    /// let cancelled = failed.clone().after(run(RunOutcome::Cancelled));
    /// assert_eq!(cancelled.consecutive_failures, 1);
    /// let ok = cancelled.after(run(RunOutcome::Succeeded));
    /// assert_eq!((ok.consecutive_failures, ok.last_success), (0, Some(now)));
    /// ```
    #[must_use]
    pub fn after(self, run: RunEntry) -> Self {
        let (last_success, consecutive_failures) = match &run.outcome {
            RunOutcome::Succeeded => (Some(run.ended), 0),
            outcome if outcome.is_failure() => (
                self.last_success,
                self.consecutive_failures.saturating_add(1),
            ),
            _ => (self.last_success, self.consecutive_failures),
        };
        Self {
            last_run: Some(run),
            last_success,
            consecutive_failures,
        }
    }
}

/// How much history a store keeps. The newest `keep` runs are kept per lock name. If `max_age` is
/// set, none older than it are kept. Each write prunes, so the bound holds after every write
/// whose pruning succeeded (a store may write the entry and prune apart, and keep more until a
/// later prune succeeds). History is off unless a store is given a policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct HistoryPolicy {
    /// The most runs kept per lock name. At least 1.
    pub keep: u32,
    /// Runs that ended longer ago than this are removed as new ones are written.
    pub max_age: Option<Duration>,
}

impl HistoryPolicy {
    /// The default number of runs kept per lock name.
    pub const DEFAULT_KEEP: u32 = 100;

    /// Keeps the newest `keep` runs per lock name. A `keep` of 0 is taken as 1.
    #[must_use]
    pub fn keep(keep: u32) -> Self {
        Self {
            keep: keep.max(1),
            max_age: None,
        }
    }

    /// Also removes runs that ended longer than `max_age` ago.
    #[must_use]
    pub fn max_age(mut self, max_age: Duration) -> Self {
        self.max_age = Some(max_age);
        self
    }
}

impl Default for HistoryPolicy {
    fn default() -> Self {
        Self::keep(Self::DEFAULT_KEEP)
    }
}

/// A job's definition as one replica publishes it. It has the job and lock names, the replica's
/// version, and its [`JobSpec`] as JSON. Stores keep the text as it is.
///
// Without the `scheduler` feature the link goes to docs.rs, where every feature is on.
#[cfg_attr(feature = "scheduler", doc = "[`JobSpec`]: crate::JobSpec")]
#[cfg_attr(
    not(feature = "scheduler"),
    doc = "[`JobSpec`]: https://docs.rs/shedlock-core/latest/shedlock_core/struct.JobSpec.html"
)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Definition {
    /// The job's name.
    pub job: String,
    /// The lock its fires take.
    pub lock_name: String,
    /// The JSON of the job's `JobSpec`.
    pub spec: String,
}

impl Definition {
    /// A definition from its parts.
    #[must_use]
    pub fn new(
        job: impl Into<String>,
        lock_name: impl Into<String>,
        spec: impl Into<String>,
    ) -> Self {
        Self {
            job: job.into(),
            lock_name: lock_name.into(),
            spec: spec.into(),
        }
    }
}

/// A published definition as a store lists it: which replica published it, with which shedlock-core
/// version, when it last did, and until when the entry stands unless published again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct DefinitionEntry {
    /// The definition.
    #[serde(flatten)]
    pub definition: Definition,
    /// The owner id of the replica that published it.
    pub replica: String,
    /// The shedlock-core version of that replica.
    pub version: String,
    /// When it last published it, by the store clock.
    pub published: DateTime<Utc>,
    /// When the entry expires unless published again, by the store clock.
    pub expires: DateTime<Utc>,
}

impl DefinitionEntry {
    /// An entry from its parts, as a store read them.
    #[must_use]
    pub fn new(
        definition: Definition,
        replica: impl Into<String>,
        version: impl Into<String>,
        published: DateTime<Utc>,
        expires: DateTime<Utc>,
    ) -> Self {
        Self {
            definition,
            replica: replica.into(),
            version: version.into(),
            published,
            expires,
        }
    }
}

/// The version of shedlock-core a replica publishes with its definitions.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
