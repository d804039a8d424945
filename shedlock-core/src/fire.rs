//! Fire claims: the store operation behind "each fire runs at most once across replicas".
//!
//! Every replica computes the same fire instants from a job's schedule. A *fire* is the pair (job,
//! scheduled instant `F`), with the window `[F, next)` up to the schedule's following instant.
//! [`LockProvider::claim_fire`] decides, in one atomic step on the store's clock, whether this
//! replica runs it.
//!
//! [`LockProvider::claim_fire`]: crate::provider::LockProvider::claim_fire

use std::fmt;

use chrono::{DateTime, Utc};

use crate::error::{Error, Result};
use crate::pause::Pause;
use crate::provider::LockRecord;

/// One fire of a scheduled job: its instant `F` and the next fire's, which ends `F`'s window. Both
/// come from the schedule, never from a clock reading, so every replica names the same fire the
/// same way.
///
/// ```
/// use chrono::{TimeZone, Utc};
/// use shedlock_core::provider::Fire;
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
    /// [`Error::is_invalid_config`] if `next` is not after `at`, which is an empty window.
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

/// What a [`claim_fire`](crate::provider::LockProvider::claim_fire) met. Only
/// [`Claimed`](Self::Claimed) wrote anything. Every other case left the store as it was.
///
/// The cases are checked in this order, each with the store's own "now":
/// 1. `now < F`: [`TooEarly`](Self::TooEarly);
/// 2. `now >= next`: [`WindowPassed`](Self::WindowPassed);
/// 3. the row keeps a pause that holds at `now`: [`Paused`](Self::Paused) (see
///    [`pause`](crate::pause));
/// 4. the recorded fire is `F` or later: [`ClaimedElsewhere`](Self::ClaimedElsewhere);
/// 5. the lock is held (`lock_until > now`): [`Held`](Self::Held);
/// 6. otherwise the store records `F` and takes the lock as
///    [`acquire`](crate::provider::LockProvider::acquire) does: [`Claimed`](Self::Claimed).
///
/// Every case but `Claimed` carries the store's `now`, from which a scheduler learns how far its
/// own clock is from the store's. [`ClaimedElsewhere`](Self::ClaimedElsewhere) and
/// [`Held`](Self::Held) also carry the lock's row, its `holder`, read in the same atomic step. From
/// it a scheduler tells whether a claim of its own whose reply was lost committed, see
/// docs/guarantees.md, "Lost replies", and when a held lock frees.
///
/// More cases may come, because the enum is `#[non_exhaustive]`. Match with a `_` arm.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FireClaim {
    /// This replica runs the fire: `F` is recorded and the lock is taken. The record's `locked_at`
    /// is the store's "now" of the claim.
    Claimed(LockRecord),
    /// The fire's instant has not come yet by the store's clock.
    TooEarly {
        /// The store's clock when it decided.
        now: DateTime<Utc>,
    },
    /// The fire's window had ended by the store's clock. It is missed, unless another replica
    /// claimed it.
    WindowPassed {
        /// The store's clock when it decided.
        now: DateTime<Utc>,
    },
    /// An operator paused the job: the fire is not run, by any replica that honours pauses. It is
    /// counted `paused`, not missed. A store without pauses never answers it.
    Paused {
        /// The store's clock when it decided.
        now: DateTime<Utc>,
        /// When the pause ends by itself. `None` lasts until a resume.
        until: Option<DateTime<Utc>>,
    },
    /// This fire or a later one was already claimed. The claimer is another replica, or a claim of
    /// this one whose reply was lost. `holder` tells which.
    ClaimedElsewhere {
        /// The store's clock when it decided.
        now: DateTime<Utc>,
        /// The fire recorded for the job: `F` or later.
        recorded: DateTime<Utc>,
        /// The lock's row as the store had it, naming whoever claimed the recorded fire last or
        /// took the lock since. Its `lock_until` may be past, and the lock is then free.
        holder: LockRecord,
    },
    /// The fire is not claimed yet, but the lock is held. A previous run is still going, or a plain
    /// lock user holds it. The fire is counted, never queued.
    Held {
        /// The store's clock when it decided.
        now: DateTime<Utc>,
        /// Who holds the lock, since when and until when. Here `lock_until > now`.
        holder: LockRecord,
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

    /// The lock's row as the store saw it when it did not claim
    /// ([`ClaimedElsewhere`](Self::ClaimedElsewhere), [`Held`](Self::Held)). The new record for
    /// [`Claimed`](Self::Claimed). `None` when the case says nothing about the lock.
    #[must_use]
    pub fn holder(&self) -> Option<&LockRecord> {
        match self {
            Self::Claimed(record)
            | Self::ClaimedElsewhere { holder: record, .. }
            | Self::Held { holder: record, .. } => Some(record),
            Self::TooEarly { .. } | Self::WindowPassed { .. } | Self::Paused { .. } => None,
        }
    }

    /// The store's clock when it decided. It is the claim's `locked_at`, or the `now` of any other
    /// case.
    #[must_use]
    pub fn store_now(&self) -> DateTime<Utc> {
        match self {
            Self::Claimed(record) => record.locked_at(),
            Self::TooEarly { now }
            | Self::WindowPassed { now }
            | Self::Paused { now, .. }
            | Self::ClaimedElsewhere { now, .. }
            | Self::Held { now, .. } => *now,
        }
    }
}

/// The fire claim's decision without its effects, for stores that read the row, decide in their own
/// code and then write conditionally, such as in-memory and compare-and-set stores.
///
/// `row` is the lock's row, or `None` for no row, `recorded` the fire recorded in it and `pause`
/// the pause it keeps, both ignored without a row. Returns `None` when the store should claim, by recording `F` and taking the lock,
/// else the case to answer.
///
/// ```
/// use chrono::{Duration, TimeZone, Utc};
/// use shedlock_core::{provider::{Fire, FireClaim, LockRecord, fire_decision}};
///
/// let f = Utc.with_ymd_and_hms(2026, 12, 1, 3, 0, 0).unwrap();
/// let fire = Fire::new(f, f + Duration::minutes(1))?;
/// let now = f + Duration::seconds(1);
/// assert_eq!(fire_decision(&fire, now, None, None, None), None, "claim it");
/// let row = LockRecord::new("nightly", "host-a:42:x1", f, f + Duration::seconds(30));
/// assert_eq!(
///     fire_decision(&fire, now, Some(&row), Some(f), None),
///     Some(FireClaim::ClaimedElsewhere { now, recorded: f, holder: row.clone() })
/// );
/// let paused = shedlock_core::pause::Pause::new(f, None, "ann", None);
/// assert_eq!(
///     fire_decision(&fire, now, Some(&row), Some(f), Some(&paused)),
///     Some(FireClaim::Paused { now, until: None })
/// );
/// # Ok::<(), shedlock_core::Error>(())
/// ```
#[must_use]
pub fn fire_decision(
    fire: &Fire,
    now: DateTime<Utc>,
    row: Option<&LockRecord>,
    recorded: Option<DateTime<Utc>>,
    pause: Option<&Pause>,
) -> Option<FireClaim> {
    if now < fire.at() {
        return Some(FireClaim::TooEarly { now });
    }
    if now >= fire.next() {
        return Some(FireClaim::WindowPassed { now });
    }
    let row = row?;
    if let Some(pause) = pause.filter(|pause| pause.holds_at(now)) {
        return Some(FireClaim::Paused {
            now,
            until: pause.until,
        });
    }
    if let Some(recorded) = recorded.filter(|r| *r >= fire.at()) {
        return Some(FireClaim::ClaimedElsewhere {
            now,
            recorded,
            holder: row.clone(),
        });
    }
    if row.lock_until() > now {
        return Some(FireClaim::Held {
            now,
            holder: row.clone(),
        });
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
        let held = LockRecord::new("job", "other", at, inside + Duration::seconds(1))
            .with_fencing_token(Some(3));
        let row = Some(&held);
        // Too early wins over everything else.
        assert_eq!(
            fire_decision(&f, before, row, Some(at), None),
            Some(FireClaim::TooEarly { now: before })
        );
        // The window's end is exclusive and wins over a recorded fire.
        assert_eq!(
            fire_decision(&f, after, row, Some(at), None),
            Some(FireClaim::WindowPassed { now: after })
        );
        // A pause that holds wins over a recorded fire and a held lock, after the window.
        let until = inside + Duration::seconds(1);
        let paused = Pause::new(at, Some(until), "ann", Some("upstream down"));
        assert_eq!(
            fire_decision(&f, inside, row, Some(at), Some(&paused)),
            Some(FireClaim::Paused {
                now: inside,
                until: Some(until),
            })
        );
        assert_eq!(
            fire_decision(&f, after, row, Some(at), Some(&paused)),
            Some(FireClaim::WindowPassed { now: after })
        );
        // A pause whose end has come refuses nothing; one without a row is ignored.
        assert_eq!(
            fire_decision(
                &f,
                until,
                Some(&held.clone().with_lock_until(until)),
                None,
                Some(&paused)
            ),
            None
        );
        assert_eq!(fire_decision(&f, inside, None, None, Some(&paused)), None);
        // A recorded fire at F or later wins over a held lock; the reply carries the row.
        assert_eq!(
            fire_decision(&f, inside, row, Some(at), None),
            Some(FireClaim::ClaimedElsewhere {
                now: inside,
                recorded: at,
                holder: held.clone(),
            })
        );
        // An older recorded fire does not count; the held lock does, and says who holds it.
        assert_eq!(
            fire_decision(&f, inside, row, Some(at - Duration::seconds(10)), None),
            Some(FireClaim::Held {
                now: inside,
                holder: held.clone(),
            })
        );
        // A lock that ends exactly now is free, as for acquire.
        let ended = held.clone().with_lock_until(inside);
        assert_eq!(fire_decision(&f, inside, Some(&ended), None, None), None);
        // A recorded fire without a row is ignored (the fire lives in the row).
        assert_eq!(fire_decision(&f, inside, None, Some(at), None), None);
        // F itself is inside the window.
        assert_eq!(fire_decision(&f, at, None, None, None), None);
    }

    #[test]
    fn store_now_is_the_claims_locked_at_or_the_cases_now() {
        let now = fire().at();
        let record = LockRecord::new("job", "me", now, now + Duration::seconds(1));
        assert_eq!(FireClaim::Claimed(record.clone()).store_now(), now);
        assert_eq!(FireClaim::Claimed(record.clone()).claimed(), Some(&record));
        let held = FireClaim::Held {
            now,
            holder: record.clone(),
        };
        assert_eq!(held.store_now(), now);
        assert!(held.claimed().is_none());
        assert_eq!(held.holder(), Some(&record));
        assert_eq!(FireClaim::TooEarly { now }.holder(), None);
    }
}
