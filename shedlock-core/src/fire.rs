//! Fire claims: the store operation behind "each fire runs at most once across replicas".
//!
//! A scheduled job fires at instants its schedule computes (every replica computes the same
//! ones). A *fire* is the pair (job, scheduled instant `F`); its window is `[F, next)`, where
//! `next` is the schedule's following instant. [`LockProvider::claim_fire`] decides, in one
//! atomic step on the store's clock, whether this replica runs it.
//!
//! [`LockProvider::claim_fire`]: crate::LockProvider::claim_fire

use std::fmt;

use chrono::{DateTime, Utc};

use crate::error::{Error, Result};
use crate::provider::LockRecord;

/// One fire of a scheduled job: its instant `F` and the start of the next fire, which ends `F`'s
/// window.
///
/// Both instants come from the schedule, never from a clock reading, so every replica names the
/// same fire the same way.
///
/// ```
/// use chrono::{TimeZone, Utc};
/// use shedlock_core::Fire;
///
/// let at = Utc.with_ymd_and_hms(2026, 12, 1, 3, 0, 0).unwrap();
/// let fire = Fire::new(at, at + chrono::Duration::days(1))?;
/// assert_eq!(fire.at(), at);
/// assert!(Fire::new(at, at).is_err(), "a window must not be empty");
/// # Ok::<(), shedlock_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fire {
    at: DateTime<Utc>,
    next: DateTime<Utc>,
}

impl Fire {
    /// The fire scheduled at `at`, whose window ends where the next fire (`next`) starts.
    ///
    /// # Errors
    ///
    /// [`Error::is_invalid_config`] if `next` is not after `at` (an empty window).
    pub fn new(at: DateTime<Utc>, next: DateTime<Utc>) -> Result<Self> {
        if next <= at {
            return Err(Error::invalid_config(format!(
                "a fire's window must not be empty: the next fire ({next}) is not after the fire ({at})"
            )));
        }
        Ok(Self { at, next })
    }

    /// The scheduled instant `F` (UTC).
    #[must_use]
    pub fn at(&self) -> DateTime<Utc> {
        self.at
    }

    /// The next fire's instant: the end (exclusive) of this fire's window.
    #[must_use]
    pub fn next(&self) -> DateTime<Utc> {
        self.next
    }
}

impl fmt::Display for Fire {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "fire at {} (window until {})", self.at, self.next)
    }
}

/// What a [`claim_fire`](crate::LockProvider::claim_fire) met. Only [`Claimed`](Self::Claimed)
/// wrote anything; every other case left the store as it was.
///
/// The cases are checked in this order, each with the store's own "now":
/// 1. `now < F`: [`TooEarly`](Self::TooEarly);
/// 2. `now >= next`: [`WindowPassed`](Self::WindowPassed);
/// 3. the recorded fire is `F` or later: [`ClaimedElsewhere`](Self::ClaimedElsewhere);
/// 4. the lock is held (`lock_until > now`): [`Held`](Self::Held);
/// 5. otherwise the store records `F` and takes the lock as
///    [`acquire`](crate::LockProvider::acquire) does: [`Claimed`](Self::Claimed).
///
/// Every case but `Claimed` carries the store's `now`, from which a scheduler learns how far its
/// own clock is from the store's.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FireClaim {
    /// This replica runs the fire: `F` is recorded and the lock is taken. The record's
    /// `locked_at` is the store's "now" of the claim.
    Claimed(LockRecord),
    /// The fire's instant has not come yet by the store's clock.
    TooEarly {
        /// The store's clock when it decided.
        now: DateTime<Utc>,
    },
    /// The fire's window had ended by the store's clock: it is missed, unless another replica
    /// claimed it.
    WindowPassed {
        /// The store's clock when it decided.
        now: DateTime<Utc>,
    },
    /// This fire (or a later one) was already claimed.
    ClaimedElsewhere {
        /// The store's clock when it decided.
        now: DateTime<Utc>,
        /// The fire recorded for the job (`F` or later).
        recorded: DateTime<Utc>,
    },
    /// The fire is not claimed yet, but the lock is held (a previous run is still going, or a
    /// plain lock user holds it). The fire is counted, never queued.
    Held {
        /// The store's clock when it decided.
        now: DateTime<Utc>,
    },
}

impl FireClaim {
    /// The record, if this replica claimed the fire.
    #[must_use]
    pub fn claimed(&self) -> Option<&LockRecord> {
        match self {
            Self::Claimed(record) => Some(record),
            _ => None,
        }
    }

    /// The store's clock when it decided: the claim's `locked_at`, or the `now` of any other
    /// case.
    #[must_use]
    pub fn store_now(&self) -> DateTime<Utc> {
        match self {
            Self::Claimed(record) => record.locked_at(),
            Self::TooEarly { now }
            | Self::WindowPassed { now }
            | Self::ClaimedElsewhere { now, .. }
            | Self::Held { now } => *now,
        }
    }
}

/// The fire claim's decision without its effects, for stores that read the row, decide in their
/// own code and then write conditionally (in-memory, compare-and-set stores).
///
/// `recorded` is the fire recorded for the job, `lock_until` the row's (`None` for no row).
/// Returns `None` when the store should claim (record `F`, take the lock), or the case to answer.
///
/// ```
/// use chrono::{Duration, TimeZone, Utc};
/// use shedlock_core::{Fire, FireClaim, fire_decision};
///
/// let f = Utc.with_ymd_and_hms(2026, 12, 1, 3, 0, 0).unwrap();
/// let fire = Fire::new(f, f + Duration::minutes(1))?;
/// let now = f + Duration::seconds(1);
/// assert_eq!(fire_decision(&fire, now, None, None), None, "claim it");
/// assert_eq!(
///     fire_decision(&fire, now, Some(f), None),
///     Some(FireClaim::ClaimedElsewhere { now, recorded: f })
/// );
/// # Ok::<(), shedlock_core::Error>(())
/// ```
#[must_use]
pub fn fire_decision(
    fire: &Fire,
    now: DateTime<Utc>,
    recorded: Option<DateTime<Utc>>,
    lock_until: Option<DateTime<Utc>>,
) -> Option<FireClaim> {
    if now < fire.at() {
        return Some(FireClaim::TooEarly { now });
    }
    if now >= fire.next() {
        return Some(FireClaim::WindowPassed { now });
    }
    if let Some(recorded) = recorded.filter(|r| *r >= fire.at()) {
        return Some(FireClaim::ClaimedElsewhere { now, recorded });
    }
    if lock_until.is_some_and(|until| until > now) {
        return Some(FireClaim::Held { now });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Duration, TimeZone};

    fn fire() -> Fire {
        let at = Utc.with_ymd_and_hms(2026, 12, 1, 3, 0, 0).unwrap();
        Fire::new(at, at + Duration::seconds(10)).unwrap()
    }

    #[test]
    fn the_cases_are_checked_in_the_documented_order() {
        let f = fire();
        let at = f.at();
        let before = at - Duration::milliseconds(1);
        let inside = at + Duration::seconds(5);
        let after = f.next();
        let held = Some(inside + Duration::seconds(1));
        // Too early wins over everything else.
        assert_eq!(
            fire_decision(&f, before, Some(at), held),
            Some(FireClaim::TooEarly { now: before })
        );
        // The window's end is exclusive and wins over a recorded fire.
        assert_eq!(
            fire_decision(&f, after, Some(at), held),
            Some(FireClaim::WindowPassed { now: after })
        );
        // A recorded fire at F or later wins over a held lock.
        assert_eq!(
            fire_decision(&f, inside, Some(at), held),
            Some(FireClaim::ClaimedElsewhere {
                now: inside,
                recorded: at
            })
        );
        // An older recorded fire does not count; the held lock does.
        assert_eq!(
            fire_decision(&f, inside, Some(at - Duration::seconds(10)), held),
            Some(FireClaim::Held { now: inside })
        );
        // A lock that ends exactly now is free, as for acquire.
        assert_eq!(fire_decision(&f, inside, None, Some(inside)), None);
        // F itself is inside the window.
        assert_eq!(fire_decision(&f, at, None, None), None);
    }

    #[test]
    fn store_now_is_the_claims_locked_at_or_the_cases_now() {
        let now = fire().at();
        let record = LockRecord::new("job", "me", now, now + Duration::seconds(1));
        assert_eq!(FireClaim::Claimed(record.clone()).store_now(), now);
        assert_eq!(FireClaim::Claimed(record.clone()).claimed(), Some(&record));
        assert_eq!(FireClaim::Held { now }.store_now(), now);
        assert!(FireClaim::Held { now }.claimed().is_none());
    }
}
