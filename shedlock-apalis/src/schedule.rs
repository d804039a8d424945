//! [`FireSchedule`]: the schedule a [`CronFireLayer`](crate::CronFireLayer) bounds each tick's
//! window with.

use std::fmt;

use apalis_cron::Config;
use chrono::{DateTime, TimeDelta, TimeZone, Utc};

/// A schedule that tells the fire after an instant. A [`CronFireLayer`](crate::CronFireLayer)
/// uses it to name a tick's fire: the tick's instant and the next one, which ends its window.
///
/// apalis-cron's own [`Schedule`](apalis_cron::Schedule) trait cannot: it tells the tick after
/// *now*, and changes as it goes. This trait is implemented for:
/// - [`cron::Schedule`], the schedule of [`CronScheduler::new`](apalis_cron::CronScheduler::new),
///   read in UTC as that backend does;
/// - [`apalis_cron::Config`] of a `cron::Schedule` and a chrono time zone, which is a backend's
///   schedule with its zone: `backend.config().clone()`, for a backend built with
///   [`with_timezone`](apalis_cron::CronScheduler::with_timezone);
/// - shedlock-core's [`Schedule`](shedlock_core::Schedule).
///
/// For a schedule of your own, implement it with the same instants as its
/// [`Schedule`](apalis_cron::Schedule) implementation.
///
/// ```
/// use std::str::FromStr;
/// use chrono::{TimeZone, Utc};
/// use shedlock_apalis::FireSchedule;
///
/// let every_ten_seconds = cron::Schedule::from_str("*/10 * * * * *").unwrap();
/// let at = Utc.with_ymd_and_hms(2026, 12, 5, 3, 0, 0).unwrap();
/// assert_eq!(every_ten_seconds.next_after(at), Some(at + chrono::Duration::seconds(10)));
/// assert!(every_ten_seconds.is_fire(at));
/// assert!(!every_ten_seconds.is_fire(at + chrono::Duration::seconds(1)));
/// ```
pub trait FireSchedule {
    /// The first fire strictly after `t`, or `None` if the schedule never fires again.
    fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>>;

    /// Whether the schedule fires at `t`. Ticks are whole seconds, so this asks for the fire
    /// after the millisecond before `t`.
    fn is_fire(&self, t: DateTime<Utc>) -> bool {
        t.checked_sub_signed(TimeDelta::milliseconds(1))
            .and_then(|before| self.next_after(before))
            == Some(t)
    }
}

impl FireSchedule for cron::Schedule {
    fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.after(&t).next()
    }
}

impl<Tz> FireSchedule for Config<cron::Schedule, Tz>
where
    Tz: TimeZone,
{
    fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let local = t.with_timezone(self.timezone());
        self.schedule()
            .after(&local)
            .next()
            .map(|next| next.with_timezone(&Utc))
    }
}

impl FireSchedule for shedlock_core::Schedule {
    fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        shedlock_core::Schedule::next_after(self, t)
    }
}

/// Why a tick has no fire: the [`CronFireService`](crate::CronFireService) answers it as an error,
/// and the tick is not run.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TickError {
    /// The tick's timestamp, in seconds since the Unix epoch, is not a date chrono represents.
    OutOfRange {
        /// The tick's timestamp.
        timestamp: u64,
    },
    /// The layer's schedule does not fire at the tick: the layer and the worker's backend were
    /// given different schedules.
    NotAFire {
        /// The tick's instant.
        at: DateTime<Utc>,
    },
    /// The schedule never fires after the tick, so the tick's window has no end.
    LastFire {
        /// The tick's instant.
        at: DateTime<Utc>,
    },
}

impl fmt::Display for TickError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::OutOfRange { timestamp } => write!(
                f,
                "the tick's timestamp {timestamp} is out of range; the tick is not run"
            ),
            Self::NotAFire { at } => write!(
                f,
                "the tick at {at} is not a fire of the CronFireLayer's schedule; give the layer \
                 the schedule and time zone of the worker's CronScheduler; the tick is not run"
            ),
            Self::LastFire { at } => write!(
                f,
                "the schedule never fires after the tick at {at}, so its window has no end; \
                 the tick is not run"
            ),
        }
    }
}

impl std::error::Error for TickError {}

#[cfg(test)]
mod tests {
    use std::str::FromStr as _;

    use apalis_cron::timezone::Europe::Berlin;
    use chrono::{TimeZone as _, Utc};

    use super::*;

    #[test]
    fn a_config_reads_its_schedule_in_its_zone() {
        // Every day at 03:00, in Berlin: 02:00 UTC in winter.
        let schedule = cron::Schedule::from_str("0 0 3 * * *").unwrap();
        let config = Config::new(schedule.clone(), Berlin);
        let fire = Utc.with_ymd_and_hms(2026, 12, 5, 2, 0, 0).unwrap();
        assert!(config.is_fire(fire));
        assert_eq!(
            config.next_after(fire),
            Some(fire + chrono::Duration::days(1))
        );
        // The bare schedule is read in UTC.
        assert!(!schedule.is_fire(fire));
        assert!(schedule.is_fire(fire + chrono::Duration::hours(1)));
    }

    #[test]
    fn a_schedule_that_ends_has_no_fire_after_its_last() {
        let once = cron::Schedule::from_str("0 0 0 1 1 * 2030").unwrap();
        let at = Utc.with_ymd_and_hms(2030, 1, 1, 0, 0, 0).unwrap();
        assert!(once.is_fire(at));
        assert_eq!(once.next_after(at), None);
    }

    #[test]
    fn shedlock_core_schedules_are_fire_schedules() {
        let every = shedlock_core::Schedule::every(std::time::Duration::from_secs(5)).unwrap();
        let at = Utc.with_ymd_and_hms(2026, 12, 5, 0, 0, 10).unwrap();
        assert!(FireSchedule::is_fire(&every, at));
        assert_eq!(
            FireSchedule::next_after(&every, at),
            Some(at + chrono::Duration::seconds(5))
        );
    }
}
