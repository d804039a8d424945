//! What a replica process reports on its standard output: one JSON object per line.
//!
//! This is the interface between a replica and whatever started it (the [cluster](crate::cluster)
//! orchestrator, or a test): parse each line with [`Event::parse`]; lines that are not events
//! are ignored (logs go to standard error anyway).
//!
//! ```
//! use shedlock_demo::event::Event;
//!
//! let line = r#"{"event":"skipped","replica":"r2","job":"sync","tick":7}"#;
//! assert_eq!(
//!     Event::parse(line),
//!     Some(Event::Skipped { replica: "r2".into(), job: "sync".into(), tick: 7 })
//! );
//! assert_eq!(Event::parse("not an event"), None);
//! ```

use std::fmt;

use serde::{Deserialize, Serialize};

/// One thing that happened in a replica.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Event {
    /// The replica is connected and about to schedule its jobs.
    Ready {
        /// The replica's label (`r1`, …).
        replica: String,
        /// Its process id.
        pid: u32,
        /// The owner id it writes to `locked_by`.
        owner: String,
        /// Its own wall clock at that moment (ms since the Unix epoch), so a test can check that
        /// a replica under `faketime` really sees a skewed clock.
        wall_ms: i64,
    },
    /// The replica claimed the fire of `job` on `tick` and its run started.
    Ran {
        /// The replica's label.
        replica: String,
        /// The job's short name.
        job: String,
        /// The fire's tick: its instant `F` in ms since the Unix epoch / the job's period (the
        /// same number on every replica).
        tick: u64,
        /// The acquisition's fencing token, if the store has tokens.
        token: Option<i64>,
        /// The trigger id of a run an operator asked for (`shedlock trigger`), else absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        trigger: Option<i64>,
    },
    /// A run finished.
    Done {
        /// The replica's label.
        replica: String,
        /// The job's short name.
        job: String,
        /// The tick it ran for.
        tick: u64,
        /// How long the run took (ms, the replica's monotonic clock).
        millis: u64,
        /// Whether the lock was lost during the run (another replica may have run it too).
        lock_lost: bool,
    },
    /// Another replica claimed the fire of `tick`, or the lock was held: the run was skipped.
    Skipped {
        /// The replica's label.
        replica: String,
        /// The job's short name.
        job: String,
        /// The tick that was skipped.
        tick: u64,
    },
    /// The fire's window passed without this replica claiming it (its claim came too late,
    /// or the store failed while the window was open): counted `missed` by its scheduler.
    /// Another replica may still have run it.
    Missed {
        /// The replica's label.
        replica: String,
        /// The job's short name.
        job: String,
        /// The fire's tick.
        tick: u64,
        /// Why it was missed.
        reason: String,
    },
    /// An operator paused the job: its scheduler refused the fire of `tick` and counted it
    /// `paused`.
    Paused {
        /// The replica's label.
        replica: String,
        /// The job's short name.
        job: String,
        /// The fire's tick.
        tick: u64,
    },
    /// Locking (or recording the run) failed: the run did not happen, or its record is incomplete.
    Error {
        /// The replica's label.
        replica: String,
        /// The job's short name.
        job: String,
        /// The tick.
        tick: u64,
        /// What went wrong.
        message: String,
    },
    /// Leader mode: this replica's latch won the election; a term began.
    Elected {
        /// The replica's label.
        replica: String,
        /// The latch's term number (1, 2, … per replica).
        term: u64,
        /// The term's fencing token, if the store has tokens.
        token: Option<i64>,
        /// This replica's wall clock when it saw the term begin (µs since the Unix epoch).
        wall_us: i64,
    },
    /// Leader mode: the term ended (observed at the moment it ended: the local deadline, a
    /// refused renew, or a resign/close).
    SteppedDown {
        /// The replica's label.
        replica: String,
        /// The term that ended.
        term: u64,
        /// Why (`StepDownReason`'s text).
        reason: String,
        /// This replica's wall clock when the term ended (µs since the Unix epoch).
        wall_us: i64,
    },
    /// Leader mode: this replica follows; `leader` is the owner id of the leader it saw, if any.
    Following {
        /// The replica's label.
        replica: String,
        /// The known leader's owner id.
        leader: Option<String>,
        /// This replica's wall clock (µs since the Unix epoch).
        wall_us: i64,
    },
    /// The replica stopped (deadline, signal, or its standard input closed) after its runs in
    /// flight finished.
    Stopped {
        /// The replica's label.
        replica: String,
        /// Runs it made (leader mode: terms it led).
        runs: u64,
        /// Fires it skipped (claimed elsewhere, or met while the lock was held).
        skipped: u64,
        /// Errors it reported.
        errors: u64,
        /// Fires it counted missed.
        #[serde(default)]
        missed: u64,
    },
}

impl Event {
    /// Parses one line of a replica's output; `None` if it is not an event.
    #[must_use]
    pub fn parse(line: &str) -> Option<Self> {
        let line = line.trim();
        if !line.starts_with('{') {
            return None;
        }
        serde_json::from_str(line).ok()
    }

    /// The event as one line of JSON (without the newline).
    #[must_use]
    pub fn to_line(&self) -> String {
        // Serialising a plain enum of strings and numbers cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The replica that reported it.
    #[must_use]
    pub fn replica(&self) -> &str {
        match self {
            Self::Ready { replica, .. }
            | Self::Ran { replica, .. }
            | Self::Done { replica, .. }
            | Self::Skipped { replica, .. }
            | Self::Missed { replica, .. }
            | Self::Paused { replica, .. }
            | Self::Error { replica, .. }
            | Self::Elected { replica, .. }
            | Self::SteppedDown { replica, .. }
            | Self::Following { replica, .. }
            | Self::Stopped { replica, .. } => replica,
        }
    }
}

/// One human-readable line (`run --text`, e.g. under docker compose).
impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ready {
                replica,
                pid,
                owner,
                ..
            } => write!(f, "{replica} ready: pid {pid}, owner {owner}"),
            Self::Ran {
                replica,
                job,
                token,
                trigger,
                ..
            } => {
                write!(f, "{replica} runs {job}")?;
                if let Some(trigger) = trigger {
                    write!(f, " now, as an operator asked (trigger {trigger})")?;
                }
                if let Some(token) = token {
                    write!(f, " (fencing token {token})")?;
                }
                Ok(())
            }
            Self::Done {
                replica,
                job,
                millis,
                lock_lost,
                ..
            } => {
                write!(f, "{replica} finished {job} in {millis} ms")?;
                if *lock_lost {
                    f.write_str(" (its lock was lost during the run)")?;
                }
                Ok(())
            }
            Self::Skipped { replica, job, .. } => {
                write!(f, "{replica} skipped {job}: locked elsewhere")
            }
            Self::Paused { replica, job, .. } => {
                write!(f, "{replica} skipped {job}: paused by an operator")
            }
            Self::Missed {
                replica,
                job,
                reason,
                ..
            } => write!(f, "{replica} missed {job}: {reason}"),
            Self::Error {
                replica,
                job,
                message,
                ..
            } => write!(f, "{replica} could not run {job}: {message}"),
            Self::Elected {
                replica,
                term,
                token,
                ..
            } => match token {
                Some(token) => write!(f, "{replica} leads (term {term}, fencing token {token})"),
                None => write!(f, "{replica} leads (term {term})"),
            },
            Self::SteppedDown {
                replica,
                term,
                reason,
                ..
            } => write!(f, "{replica} stepped down (term {term}): {reason}"),
            Self::Following {
                replica, leader, ..
            } => match leader {
                Some(leader) => write!(f, "{replica} follows {leader}"),
                None => write!(f, "{replica} follows (no leader seen)"),
            },
            Self::Stopped {
                replica,
                runs,
                skipped,
                errors,
                missed,
            } => write!(
                f,
                "{replica} stopped: {runs} runs, {skipped} skipped, {missed} missed, {errors} errors"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_round_trips_through_a_line() {
        let events = [
            Event::Ready {
                replica: "r1".into(),
                pid: 42,
                owner: "host:42:abc".into(),
                wall_ms: 1_700_000_000_000,
            },
            Event::Ran {
                replica: "r1".into(),
                job: "sync".into(),
                tick: 9,
                token: Some(3),
                trigger: None,
            },
            Event::Ran {
                replica: "r2".into(),
                job: "sync".into(),
                tick: 10,
                token: Some(4),
                trigger: Some(77),
            },
            Event::Paused {
                replica: "r3".into(),
                job: "sync".into(),
                tick: 11,
            },
            Event::Done {
                replica: "r1".into(),
                job: "sync".into(),
                tick: 9,
                millis: 1400,
                lock_lost: false,
            },
            Event::Error {
                replica: "r3".into(),
                job: "report".into(),
                tick: 9,
                message: "database is locked\nsecond line \"quoted\"".into(),
            },
            Event::Elected {
                replica: "r2".into(),
                term: 3,
                token: None,
                wall_us: 1_700_000_000_000_123,
            },
            Event::SteppedDown {
                replica: "r2".into(),
                term: 3,
                reason: "closed".into(),
                wall_us: 1_700_000_000_000_456,
            },
            Event::Following {
                replica: "r1".into(),
                leader: Some("host:7:abc".into()),
                wall_us: 1,
            },
            Event::Missed {
                replica: "r2".into(),
                job: "sync".into(),
                tick: 10,
                reason: "its window passed".into(),
            },
            Event::Stopped {
                replica: "r1".into(),
                runs: 4,
                skipped: 5,
                errors: 0,
                missed: 1,
            },
        ];
        for event in events {
            let line = event.to_line();
            assert!(!line.contains('\n'), "{line}");
            assert!(event.to_string().starts_with(event.replica()), "{event}");
            assert_eq!(Event::parse(&line), Some(event));
        }
    }
}
