//! Pausing a job's fires across the cluster: [`Pause`], as a store keeps it, and [`PauseFor`], how
//! long an operator asks for.
//!
//! A pause is kept in the job's lock row, keyed by the lock name, and checked by the fire claim
//! itself ([`FireClaim::Paused`](crate::provider::FireClaim::Paused)), so it costs no extra round
//! trip. It applies to fire claims only: [`acquire`](crate::provider::LockProvider::acquire),
//! [`execute`](crate::LockingTaskExecutor::execute) and leader elections ignore it. A run in
//! progress continues; a resume, or the pause's end passing, takes effect at the next fire.
//! Replicas of a version before 0.2.0 ([`PAUSE_SINCE`]) and Java ShedLock replicas do not check
//! it. The rules and the operator's commands are in docs/operating.md, "Pause, resume".

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::error::{Error, Result};

/// The first version of this library whose schedulers honour a pause. A replica that published
/// its definitions with an older version ignores pauses, and `shedlock jobs` says so.
pub const PAUSE_SINCE: &str = "0.2.0";

/// Whether a replica that published its definitions with `version` honours pauses: a version at or
/// after [`PAUSE_SINCE`]. A version that does not read as `MAJOR.MINOR.PATCH` does not.
///
/// ```
/// use shedlock_core::pause::honours_pause;
///
/// assert!(honours_pause("0.2.0") && honours_pause("1.0.0-rc.1") && honours_pause("0.10.3"));
/// assert!(!honours_pause("0.1.0") && !honours_pause("java"));
/// ```
#[must_use]
pub fn honours_pause(version: &str) -> bool {
    fn triple(version: &str) -> Option<(u64, u64, u64)> {
        let core = version.split(['-', '+']).next()?;
        let mut parts = core.split('.').map(str::parse::<u64>);
        let triple = (
            parts.next()?.ok()?,
            parts.next()?.ok()?,
            parts.next()?.ok()?,
        );
        parts.next().is_none().then_some(triple)
    }
    match (triple(version), triple(PAUSE_SINCE)) {
        (Some(v), Some(since)) => v >= since,
        _ => false,
    }
}

/// The longest pause reason a store keeps, in characters (a `VARCHAR(255)` column).
pub const MAX_REASON_LEN: usize = 255;

/// A job's pause as the store keeps it: since when (the store's clock), until when (`None`: until
/// resumed), who paused it and why.
///
/// ```
/// use chrono::{Duration, Utc};
/// use shedlock_core::pause::Pause;
///
/// let since = Utc::now();
/// let pause = Pause::new(since, Some(since + Duration::hours(1)), "ops@bastion", Some("bad upstream"));
/// assert!(pause.holds_at(since + Duration::minutes(59)));
/// assert!(!pause.holds_at(since + Duration::hours(1)), "the end is exclusive");
/// assert!(Pause::new(since, None, "ops@bastion", None).holds_at(since + Duration::days(400)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Pause {
    /// When the pause was set, by the store's clock.
    pub since: DateTime<Utc>,
    /// When it ends by itself, by the store's clock. `None` lasts until a resume.
    pub until: Option<DateTime<Utc>>,
    /// Who paused the job (the operator's name, see [`validate_actor`]).
    pub by: String,
    /// Why, as the operator said it.
    pub reason: Option<String>,
}

impl Pause {
    /// A pause set at `since` by `by`.
    #[must_use]
    pub fn new(
        since: DateTime<Utc>,
        until: Option<DateTime<Utc>>,
        by: impl Into<String>,
        reason: Option<&str>,
    ) -> Self {
        Self {
            since,
            until,
            by: by.into(),
            reason: reason.map(str::to_owned),
        }
    }

    /// Whether the pause refuses a fire claimed at `now` (the store's clock): it has no end, or
    /// its end is after `now`.
    #[must_use]
    pub fn holds_at(&self, now: DateTime<Utc>) -> bool {
        self.until.is_none_or(|until| now < until)
    }
}

impl fmt::Display for Pause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.until {
            Some(until) => write!(f, "paused until {until} by {}", self.by)?,
            None => write!(f, "paused until resumed by {}", self.by)?,
        }
        match &self.reason {
            Some(reason) => write!(f, ": {reason}"),
            None => Ok(()),
        }
    }
}

/// How long a pause lasts, as asked. The store turns it into [`Pause::until`] on its own clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PauseFor {
    /// Until a resume.
    UntilResumed,
    /// For this long from the store's now: above zero, at most
    /// [`MAX_DURATION`](crate::provider::MAX_DURATION).
    For(Duration),
    /// Until this instant, which must be after the store's now and within
    /// [`MAX_DURATION`](crate::provider::MAX_DURATION) of it.
    Until(DateTime<Utc>),
}

impl PauseFor {
    /// The pause's end for a pause set at `now` (the store's clock), `None` for
    /// [`UntilResumed`](Self::UntilResumed).
    ///
    /// # Errors
    ///
    /// [`Error::is_invalid_config`] for an end that is not after `now` or more than
    /// [`MAX_DURATION`](crate::provider::MAX_DURATION) after it, or a duration that is zero or
    /// above it. Nothing is written then.
    pub fn until(self, now: DateTime<Utc>) -> Result<Option<DateTime<Utc>>> {
        match self {
            Self::UntilResumed => Ok(None),
            Self::For(length) => {
                if length.is_zero() {
                    return Err(Error::invalid_config(
                        "a pause of zero length ends at once; give a length above zero",
                    ));
                }
                crate::config::check_max("a pause", length)?;
                let length = chrono::Duration::from_std(length)
                    .map_err(|_| Error::invalid_config("a pause's length is out of range"))?;
                Ok(Some(now + length))
            }
            Self::Until(until) if until > now => {
                // As for a length: within MAX_DURATION, which every store's time column holds.
                let longest = chrono::Duration::from_std(crate::provider::MAX_DURATION)
                    .unwrap_or(chrono::Duration::MAX);
                if until - now > longest {
                    return Err(Error::invalid_config(format!(
                        "a pause must end within 365 days: {until} is later; pause until resumed \
                         instead. Nothing was paused"
                    )));
                }
                Ok(Some(until))
            }
            Self::Until(until) => Err(Error::invalid_config(format!(
                "a pause must end in the future: {until} is not after the store's now ({now}); \
                 nothing was paused"
            ))),
        }
    }
}

/// Checks an operator's name, as pauses, resumes and unlocks record it: 1 to 255 characters, no
/// control characters (it is shown in terminals and pages).
///
/// # Errors
///
/// [`Error::is_invalid_config`], saying what to fix.
pub fn validate_actor(actor: &str) -> Result<()> {
    check_text("the operator's name", actor, 255)?;
    if actor.trim().is_empty() {
        return Err(Error::invalid_config(
            "the operator's name must not be empty (the CLI takes it from --as, or user@host)",
        ));
    }
    Ok(())
}

/// Checks a pause reason: at most [`MAX_REASON_LEN`] characters, no control characters.
///
/// # Errors
///
/// [`Error::is_invalid_config`], saying what to fix.
pub fn validate_reason(reason: &str) -> Result<()> {
    check_text("a pause reason", reason, MAX_REASON_LEN)
}

fn check_text(what: &str, text: &str, max: usize) -> Result<()> {
    let len = text.chars().count();
    if len > max {
        return Err(Error::invalid_config(format!(
            "{what} is {len} characters long; at most {max} are kept"
        )));
    }
    if let Some(c) = text.chars().find(|c| c.is_control() || is_bidi_control(*c)) {
        return Err(Error::invalid_config(format!(
            "{what} contains the control character {c:?}; use plain text"
        )));
    }
    Ok(())
}

/// The bidirectional controls (embeddings, overrides, isolates and marks) that reorder what a
/// terminal or page shows around them.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn pause_lengths_turn_into_ends_on_the_stores_clock() {
        let now = Utc.with_ymd_and_hms(2026, 12, 5, 3, 0, 0).unwrap();
        assert_eq!(PauseFor::UntilResumed.until(now).unwrap(), None);
        assert_eq!(
            PauseFor::For(Duration::from_hours(1)).until(now).unwrap(),
            Some(now + chrono::Duration::hours(1))
        );
        let later = now + chrono::Duration::seconds(1);
        assert_eq!(PauseFor::Until(later).until(now).unwrap(), Some(later));
        for bad in [
            PauseFor::Until(now),
            PauseFor::Until(now - chrono::Duration::days(1)),
            PauseFor::For(Duration::ZERO),
            PauseFor::For(Duration::from_hours(400 * 24)),
            PauseFor::Until(now + chrono::Duration::days(366)),
        ] {
            let error = bad.until(now).expect_err("refused");
            assert!(error.is_invalid_config(), "{bad:?}: {error}");
        }
    }

    #[test]
    fn actors_and_reasons_are_plain_bounded_text() {
        validate_actor("ops@bastion").unwrap();
        validate_reason("").unwrap();
        validate_reason("upstream \"x\" is down; <b>retry</b> later").unwrap();
        for bad in [
            "",
            "  ",
            "a\nb",
            "evil\u{1b}[2J",
            "ann\u{202e}nimda",
            &"x".repeat(256),
        ] {
            assert!(
                validate_actor(bad).unwrap_err().is_invalid_config(),
                "{bad:?}"
            );
        }
        assert!(validate_reason("a\rb").unwrap_err().is_invalid_config());
        assert!(validate_reason(&"é".repeat(255)).is_ok());
        assert!(validate_reason(&"é".repeat(256)).is_err());
    }

    #[test]
    fn a_pause_reads_as_a_sentence() {
        let since = Utc.with_ymd_and_hms(2026, 12, 5, 3, 0, 0).unwrap();
        let pause = Pause::new(since, None, "ann", Some("upstream down"));
        assert_eq!(
            pause.to_string(),
            "paused until resumed by ann: upstream down"
        );
    }
}
