//! When a scheduled job fires: [`Schedule`] (feature `scheduler`).
//!
//! Schedule arithmetic is pure. It takes an instant and answers instants, never reading a clock. So
//! every replica computes the same fires, and tests need no waiting.

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, LocalResult, NaiveDateTime, Offset, TimeZone, Timelike, Utc};
use chrono_tz::Tz;
use croner::Cron;

use crate::config::check_max;
use crate::error::{Error, Result};
use crate::fire::Fire;

/// How far around a daylight-saving transition the cron arithmetic looks. No zone in the tz
/// database shifts by more than this, and no two transitions of a zone are this close.
const DST_MARGIN: chrono::Duration = chrono::Duration::hours(3);

/// When a job fires: a fixed rate aligned to the Unix epoch, or a cron expression with seconds in
/// an IANA time zone. Every replica computes the same instants from the same schedule. A fire's
/// identity is its instant, never a clock reading.
///
/// # Fixed rate
///
/// [`Schedule::every`] fires at every whole multiple of the period since the Unix epoch, on every
/// replica, whenever it started. So `every 1m` fires at :00 of each minute, and `every 1h` on the
/// hour, UTC.
///
/// # Cron
///
/// [`Schedule::cron`] takes six fields, `sec min hour day-of-month month day-of-week`, and an
/// optional year. The [`croner`] crate parses them, with ranges, lists, steps, month and day names,
/// `L`, `W` and `#`. Daylight saving is handled here, the same way on every platform:
///
/// - A wall time that does not exist that day, in the gap when clocks go forward, fires at the
///   first instant after the gap, as cron(8) does. For example, `0 30 2 * * *` in Europe/Berlin
///   fires at 03:00 CEST on the last Sunday of March.
/// - A wall time that occurs twice, when clocks go back, fires once, at its first occurrence.
/// - A wildcard or a step in the hour field, as in `0 */15 * * * *` or `0 0 * * * *`, fires by
///   elapsed time through both transitions. Every wall time that exists fires, each occurrence of a
///   repeated one too, and none in a gap. So `every 15 minutes` stays 15 minutes apart.
///
/// ```
/// use chrono::{TimeZone, Utc};
/// use shedlock_core::Schedule;
///
/// let every_minute = Schedule::every(std::time::Duration::from_secs(60))?;
/// let t = Utc.with_ymd_and_hms(2026, 12, 1, 10, 0, 30).unwrap();
/// assert_eq!(every_minute.next_after(t), Some(Utc.with_ymd_and_hms(2026, 12, 1, 10, 1, 0).unwrap()));
///
/// let nightly = Schedule::cron_in("0 0 3 * * *", "Europe/Berlin")?;
/// // 03:00 in Berlin in winter is 02:00 UTC.
/// assert_eq!(nightly.next_after(t), Some(Utc.with_ymd_and_hms(2026, 12, 2, 2, 0, 0).unwrap()));
/// let fire = nightly.fire_containing(t).expect("a fire before");
/// assert_eq!(fire.at(), Utc.with_ymd_and_hms(2026, 12, 1, 2, 0, 0).unwrap());
/// # Ok::<(), shedlock_core::Error>(())
/// ```
#[derive(Clone)]
pub struct Schedule {
    kind: Kind,
}

#[derive(Clone)]
enum Kind {
    Rate { every_ms: i64 },
    Cron(Box<CronSchedule>),
}

#[derive(Clone)]
struct CronSchedule {
    expression: String,
    cron: Cron,
    zone: Tz,
    /// A wildcard or step in the hour field: fire by elapsed time across transitions.
    elapsed: bool,
}

impl Schedule {
    /// A fixed rate. It fires at every whole multiple of `period` since the Unix epoch (UTC).
    ///
    /// # Errors
    ///
    /// [`Error::is_invalid_schedule`] for a zero period, one that is not a whole number of
    /// milliseconds, or one above 365 days. Fire instants are whole milliseconds.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shedlock_core::Schedule;
    ///
    /// assert!(Schedule::every(Duration::from_secs(30)).is_ok());
    /// assert!(Schedule::every(Duration::from_micros(1500)).unwrap_err().is_invalid_schedule());
    /// ```
    pub fn every(period: Duration) -> Result<Self> {
        if period.is_zero() {
            return Err(Error::invalid_schedule(
                "the period of a fixed rate is zero",
                None,
            ));
        }
        if !period.subsec_nanos().is_multiple_of(1_000_000) {
            return Err(Error::invalid_schedule(
                format!(
                    "the period of a fixed rate ({period:?}) is not a whole number of \
                     milliseconds; fire instants are whole milliseconds"
                ),
                None,
            ));
        }
        check_max("the period of a fixed rate", period).map_err(Error::into_invalid_schedule)?;
        let every_ms = i64::try_from(period.as_millis())
            .map_err(|_| Error::invalid_schedule("the period of a fixed rate is too long", None))?;
        Ok(Self {
            kind: Kind::Rate { every_ms },
        })
    }

    /// A cron expression with seconds, in UTC. See [`cron_in`](Self::cron_in).
    ///
    /// # Errors
    ///
    /// As [`cron_in`](Self::cron_in).
    pub fn cron(expression: &str) -> Result<Self> {
        Self::cron_in(expression, "UTC")
    }

    /// A cron expression with seconds, in the IANA time zone `zone`. The fields are `sec min hour
    /// day-of-month month day-of-week [year]`. Zones look like `"Europe/Berlin"`,
    /// `"America/New_York"` or `"UTC"`.
    ///
    /// # Errors
    ///
    /// [`Error::is_invalid_schedule`] for an expression that does not parse, lacks the seconds
    /// field or never fires, or a zone the tz database does not know. For one that does not parse,
    /// the message names the field, its value and what it takes, and the parser's error is the
    /// [`source`](std::error::Error::source). `#[scheduled_lock]` reports a literal `cron` or
    /// `zone` with the same words at compile time.
    ///
    /// ```
    /// use shedlock_core::Schedule;
    ///
    /// assert!(Schedule::cron_in("0 */15 * * * *", "Europe/Berlin").is_ok());
    /// let err = Schedule::cron_in("0 0 3 * * *", "Europe/Berlln").unwrap_err();
    /// assert_eq!(
    ///     err.to_string(),
    ///     "invalid schedule: unknown time zone \"Europe/Berlln\": use an IANA name such as \
    ///      \"Europe/Berlin\" or \"UTC\""
    /// );
    /// # Ok::<(), shedlock_core::Error>(())
    /// ```
    pub fn cron_in(expression: &str, zone: &str) -> Result<Self> {
        let schedule_error = |invalid: shedlock_cron::Invalid| {
            let (message, source) = invalid.into_parts();
            Error::invalid_schedule(message, source.map(Into::into))
        };
        let tz = shedlock_cron::zone(zone).map_err(schedule_error)?;
        let cron = shedlock_cron::parse(expression).map_err(schedule_error)?;
        let elapsed = hour_field_is_open(expression);
        Ok(Self {
            kind: Kind::Cron(Box::new(CronSchedule {
                expression: expression.trim().to_owned(),
                cron,
                zone: tz,
                elapsed,
            })),
        })
    }

    /// The first fire strictly after `t`, or `None` if the schedule never fires again.
    #[must_use]
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match &self.kind {
            Kind::Rate { every_ms } => {
                let ms = t.timestamp_millis();
                let n = ms.div_euclid(*every_ms).checked_add(1)?;
                DateTime::from_timestamp_millis(n.checked_mul(*every_ms)?)
            }
            Kind::Cron(c) => c.next_after(t),
        }
    }

    /// The last fire at or before `t`, or `None` if there is none.
    #[must_use]
    pub fn last_at_or_before(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match &self.kind {
            Kind::Rate { every_ms } => {
                let n = t.timestamp_millis().div_euclid(*every_ms);
                DateTime::from_timestamp_millis(n.checked_mul(*every_ms)?)
            }
            Kind::Cron(c) => c.last_at_or_before(t),
        }
    }

    /// The fire whose window `[F, next)` contains `t`, if any.
    ///
    /// ```
    /// use std::time::Duration;
    /// use chrono::{TimeZone, Utc};
    /// use shedlock_core::Schedule;
    ///
    /// let s = Schedule::every(Duration::from_secs(60))?;
    /// let t = Utc.with_ymd_and_hms(2026, 12, 1, 10, 0, 30).unwrap();
    /// let fire = s.fire_containing(t).expect("always one");
    /// assert_eq!(fire.at(), Utc.with_ymd_and_hms(2026, 12, 1, 10, 0, 0).unwrap());
    /// assert_eq!(fire.next(), Utc.with_ymd_and_hms(2026, 12, 1, 10, 1, 0).unwrap());
    /// # Ok::<(), shedlock_core::Error>(())
    /// ```
    #[must_use]
    pub fn fire_containing(&self, t: DateTime<Utc>) -> Option<Fire> {
        let at = self.last_at_or_before(t)?;
        Fire::new(at, self.next_after(at)?).ok()
    }

    /// The first fire strictly after `t`, with its window.
    #[must_use]
    pub fn next_fire_after(&self, t: DateTime<Utc>) -> Option<Fire> {
        let at = self.next_after(t)?;
        Fire::new(at, self.next_after(at)?).ok()
    }

    /// The shortest gap between two consecutive fires. For a fixed rate it is the period. For cron
    /// it is the shortest among the fires of the two years from `from`, daylight-saving days
    /// included.
    #[must_use]
    pub fn shortest_gap(&self, from: DateTime<Utc>) -> Duration {
        match &self.kind {
            Kind::Rate { every_ms } => Duration::from_millis(every_ms.unsigned_abs()),
            Kind::Cron(_) => {
                let end = from + chrono::Duration::days(731);
                let mut shortest = Duration::MAX;
                let mut at = self.next_after(from);
                // Bounded: a per-second expression would take 63 M steps over two years; the
                // first 100,000 fires show its gap.
                for _ in 0..100_000 {
                    let Some(current) = at.filter(|a| *a < end) else {
                        break;
                    };
                    let Some(next) = self.next_after(current) else {
                        break;
                    };
                    let gap = (next - current).to_std().unwrap_or_default();
                    shortest = shortest.min(gap);
                    at = Some(next);
                }
                shortest
            }
        }
    }
    /// The schedule in words, for operators' tools: `every 5 minutes`, `every hour at :15`, `at
    /// 03:00 every day (Europe/Berlin)`, `at 09:30 Monday to Friday (UTC)`, `at 00:00 on the last
    /// day of every month (UTC)`.
    ///
    /// A fixed rate is its period in the largest whole unit. A common cron shape is worded here,
    /// any other by the [`croner`] crate's `describe`, as in `at minute 0 and 30, of hour 8-17
    /// (UTC)`, or else shown as the expression itself. A schedule that names wall times or days
    /// carries its zone in parentheses, since its fires follow that zone's clock.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shedlock_core::Schedule;
    ///
    /// assert_eq!(Schedule::every(Duration::from_mins(5))?.describe(), "every 5 minutes");
    /// assert_eq!(Schedule::cron("0 */15 * * * *")?.describe(), "every 15 minutes");
    /// assert_eq!(
    ///     Schedule::cron_in("0 0 3 * * *", "Europe/Berlin")?.describe(),
    ///     "at 03:00 every day (Europe/Berlin)"
    /// );
    /// assert_eq!(
    ///     Schedule::cron("0 30 9 * * MON-FRI")?.describe(),
    ///     "at 09:30 Monday to Friday (UTC)"
    /// );
    /// # Ok::<(), shedlock_core::Error>(())
    /// ```
    #[must_use]
    pub fn describe(&self) -> String {
        match &self.kind {
            Kind::Rate { every_ms } => describe_rate(every_ms.unsigned_abs()),
            Kind::Cron(c) => {
                let (words, zoned) = describe_cron(&c.expression).unwrap_or_else(|| {
                    let words = c.cron.describe();
                    let words = words.trim().trim_end_matches('.');
                    let mut chars = words.chars();
                    let words = match chars.next() {
                        Some(first) => first.to_lowercase().chain(chars).collect(),
                        None => format!("cron {}", c.expression),
                    };
                    (words, true)
                });
                if zoned {
                    format!("{words} ({})", c.zone.name())
                } else {
                    words
                }
            }
        }
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Rate { every_ms } => write!(
                f,
                "every {}",
                shedlock_duration::format(Duration::from_millis(every_ms.unsigned_abs()))
            ),
            Kind::Cron(c) => write!(f, "cron {:?} in {}", c.expression, c.zone.name()),
        }
    }
}

impl fmt::Debug for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Schedule({self})")
    }
}

/// Two schedules are equal when written the same: the same period, or the same trimmed cron
/// expression in the same zone.
impl PartialEq for Schedule {
    fn eq(&self, other: &Self) -> bool {
        self.period() == other.period() && self.cron_parts() == other.cron_parts()
    }
}

impl Eq for Schedule {}

impl Schedule {
    /// A fixed rate's period. `None` for cron.
    pub(crate) fn period(&self) -> Option<Duration> {
        match &self.kind {
            Kind::Rate { every_ms } => Some(Duration::from_millis(every_ms.unsigned_abs())),
            Kind::Cron(_) => None,
        }
    }

    /// A cron schedule's expression and IANA zone name. `None` for a fixed rate.
    pub(crate) fn cron_parts(&self) -> Option<(&str, &str)> {
        match &self.kind {
            Kind::Rate { .. } => None,
            Kind::Cron(c) => Some((&c.expression, c.zone.name())),
        }
    }
}

/// A fixed rate's period in words: `every minute`, `every 5 minutes`, `every 1500 milliseconds`.
fn describe_rate(every_ms: u64) -> String {
    const UNITS: [(u64, &str); 5] = [
        (86_400_000, "day"),
        (3_600_000, "hour"),
        (60_000, "minute"),
        (1_000, "second"),
        (1, "millisecond"),
    ];
    let (size, unit) = UNITS
        .into_iter()
        .find(|(size, _)| every_ms.is_multiple_of(*size))
        .unwrap_or((1, "millisecond"));
    match every_ms / size {
        1 => format!("every {unit}"),
        n => format!("every {n} {unit}s"),
    }
}

/// The days of the week as cron numbers them (0 and 7 are Sunday).
const WEEKDAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// A common cron shape in words, and whether they name wall times or days, so the zone matters.
/// `None` for any other shape, which the caller words otherwise. The expression has parsed.
fn describe_cron(expression: &str) -> Option<(String, bool)> {
    let expanded = match expression.to_ascii_lowercase().as_str() {
        "@hourly" => "0 0 * * * *",
        "@daily" | "@midnight" => "0 0 0 * * *",
        "@weekly" => "0 0 0 * * 0",
        "@monthly" => "0 0 0 1 * *",
        _ => expression,
    };
    let fields: Vec<&str> = expanded.split_whitespace().collect();
    let (sec, min, hour, dom, month, dow) = match fields[..] {
        [sec, min, hour, dom, month, dow] => (sec, min, hour, dom, month, dow),
        [sec, min, hour, dom, month, dow, year] if any(year) => (sec, min, hour, dom, month, dow),
        _ => return None,
    };
    if !any(month) {
        return None;
    }
    let days = describe_days(dom, dow)?;
    let (time, clock) = match (number(sec), step(sec)) {
        _ if any(sec) && any(min) && any(hour) => ("every second".to_owned(), false),
        (None, Some(n)) if 60 % n == 0 && any(min) && any(hour) => {
            (format!("every {n} seconds"), false)
        }
        (Some(s), _) => describe_minutes_hours(s, min, hour)?,
        _ => return None,
    };
    Some(if !days.is_empty() {
        (format!("{time} {days}"), true)
    } else if time.starts_with("at ") {
        (format!("{time} every day"), true)
    } else {
        (time, clock)
    })
}

/// The time part of a cron expression whose seconds field is the number `sec`, and whether it names
/// wall times.
fn describe_minutes_hours(sec: u32, min: &str, hour: &str) -> Option<(String, bool)> {
    let at_second = |text: String| match sec {
        0 => Some(text),
        _ => None,
    };
    if any(min) && any(hour) {
        return Some(match sec {
            0 => ("every minute".to_owned(), false),
            s => (format!("every minute at second {s}"), false),
        });
    }
    if let Some(n) = step(min).filter(|n| 60 % n == 0)
        && any(hour)
    {
        return Some((at_second(format!("every {n} minutes"))?, false));
    }
    let m = number(min)?;
    if any(hour) {
        return Some(match (m, sec) {
            (0, 0) => ("every hour".to_owned(), false),
            (m, 0) => (format!("every hour at :{m:02}"), false),
            (m, s) => (format!("every hour at :{m:02}:{s:02}"), false),
        });
    }
    if let Some(n) = step(hour).filter(|n| 24 % n == 0) {
        return Some((at_second(format!("every {n} hours at :{m:02}"))?, true));
    }
    let hours = hour.split(',').map(number).collect::<Option<Vec<u32>>>()?;
    let times: Vec<String> = hours
        .iter()
        .map(|h| match sec {
            0 => format!("{h:02}:{m:02}"),
            s => format!("{h:02}:{m:02}:{s:02}"),
        })
        .collect();
    Some((format!("at {}", and_list(&times)), true))
}

/// The day part. It is empty when every day fires. It has words for days of the week, a day of the
/// month or the month's last day. `None` for any other shape.
fn describe_days(dom: &str, dow: &str) -> Option<String> {
    match (any(dom), any(dow)) {
        (true, true) => Some(String::new()),
        (false, true) if dom.eq_ignore_ascii_case("L") => {
            Some("on the last day of every month".to_owned())
        }
        (false, true) => Some(format!("on day {} of every month", number(dom)?)),
        (true, false) => {
            if let Some((from, to)) = dow.split_once('-') {
                let (from, to) = (weekday(from)?, weekday(to)?);
                return (from < to).then(|| format!("{} to {}", WEEKDAYS[from], WEEKDAYS[to % 7]));
            }
            let days = dow
                .split(',')
                .map(|d| weekday(d).map(|d| WEEKDAYS[d % 7].to_owned()))
                .collect::<Option<Vec<String>>>()?;
            Some(match days.len() {
                1 => format!("every {}", days[0]),
                _ => format!("on {}", and_list(&days)),
            })
        }
        (false, false) => None,
    }
}

/// A day-of-week field's value as cron numbers it, by number or three-letter name. The numbers run
/// 0–7, with Sunday both 0 and 7.
fn weekday(text: &str) -> Option<usize> {
    const NAMES: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
    if let Some(n) = number(text) {
        return usize::try_from(n).ok().filter(|n| *n <= 7);
    }
    NAMES.iter().position(|n| n.eq_ignore_ascii_case(text))
}

/// `a`, `a and b`, `a, b and c`.
fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// Whether a field matches every value (`*`, or `?` in a day field).
fn any(field: &str) -> bool {
    field == "*" || field == "?"
}

/// A field that is one plain number.
fn number(field: &str) -> Option<u32> {
    field
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| field.parse().ok())
        .flatten()
}

/// The step of a field stepping from its start (`*/5`, `0/5`).
fn step(field: &str) -> Option<u32> {
    let (start, n) = field.split_once('/')?;
    (start == "*" || start == "0")
        .then(|| number(n))
        .flatten()
        .filter(|n| *n > 0)
}

/// Whether the hour field has a wildcard or a step (`*`, `*/2`, `1-23/2`). It reads the
/// expression's text, because the parser keeps no trace of how a field was written. `@hourly`
/// counts as open. The expression has parsed, so it has its six or seven fields.
fn hour_field_is_open(expression: &str) -> bool {
    let trimmed = expression.trim();
    if let Some(nickname) = trimmed.strip_prefix('@') {
        return nickname.eq_ignore_ascii_case("hourly");
    }
    trimmed
        .split_whitespace()
        .nth(2)
        .is_some_and(|hour| hour.contains('*') || hour.contains('/') || hour == "?")
}

fn whole_second(m: NaiveDateTime) -> NaiveDateTime {
    m.with_nanosecond(0).unwrap_or(m)
}

impl CronSchedule {
    fn offset_at(&self, t: DateTime<Utc>) -> chrono::FixedOffset {
        self.zone.offset_from_utc_datetime(&t.naive_utc()).fix()
    }

    fn wall(&self, t: DateTime<Utc>) -> NaiveDateTime {
        t.with_timezone(&self.zone).naive_local()
    }

    /// The instants a matching wall time `m` fires at, by the daylight-saving rules.
    fn instants(&self, m: NaiveDateTime) -> [Option<DateTime<Utc>>; 2] {
        match self.zone.from_local_datetime(&m) {
            LocalResult::Single(x) => [Some(x.with_timezone(&Utc)), None],
            LocalResult::Ambiguous(a, b) => {
                let (a, b) = (a.with_timezone(&Utc), b.with_timezone(&Utc));
                let (first, second) = (a.min(b), a.max(b));
                [Some(first), self.elapsed.then_some(second)]
            }
            LocalResult::None if self.elapsed => [None, None],
            LocalResult::None => [self.gap_end(m), None],
        }
    }

    /// The first instant after the gap that swallowed the wall time `m`.
    fn gap_end(&self, m: NaiveDateTime) -> Option<DateTime<Utc>> {
        // With the offset in force before the gap, `m` maps past the transition.
        let before = self.offset_at(m.and_utc() - chrono::Duration::days(1));
        let upper = m.and_utc() - chrono::Duration::seconds(i64::from(before.local_minus_utc()));
        let (mut lo, mut hi) = (upper.timestamp() - 86_400, upper.timestamp());
        let at = |secs: i64| DateTime::from_timestamp(secs, 0).map(|t| self.offset_at(t));
        // `lo` has the old offset, `hi` the new one; transitions fall on whole seconds.
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if at(mid)? == before {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let hi = DateTime::from_timestamp(hi, 0)?;
        (self.offset_at(hi) != before).then_some(hi)
    }

    /// The first matching wall time strictly after `m`. Cron instants are whole seconds. So the
    /// parser is given `m` without its fraction, which a whole-second match cannot equal.
    fn naive_next(&self, m: NaiveDateTime) -> Option<NaiveDateTime> {
        self.cron
            .find_next_occurrence(&whole_second(m).and_utc(), false)
            .ok()
            .map(|d| d.naive_utc())
    }

    /// The last matching wall time before `m`, or at or before it if `inclusive`. An inclusive call
    /// takes `m` without its fraction. Exclusive calls get whole seconds only.
    fn naive_prev(&self, m: NaiveDateTime, inclusive: bool) -> Option<NaiveDateTime> {
        self.cron
            .find_previous_occurrence(&whole_second(m).and_utc(), inclusive)
            .ok()
            .map(|d| d.naive_utc())
    }

    /// No transition within the margin around `t`.
    fn steady_around(&self, t: DateTime<Utc>) -> bool {
        let here = self.offset_at(t);
        self.offset_at(t - DST_MARGIN) == here && self.offset_at(t + DST_MARGIN) == here
    }

    fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let local = self.wall(t);
        if self.steady_around(t) {
            let m = self.naive_next(local)?;
            if let LocalResult::Single(x) = self.zone.from_local_datetime(&m) {
                let x = x.with_timezone(&Utc);
                if x > t && self.steady_around(x) {
                    return Some(x);
                }
            }
        }
        // Near a transition: every wall time within the margin is a candidate.
        let mut best: Option<DateTime<Utc>> = None;
        let mut m = self.naive_next(local - DST_MARGIN)?;
        loop {
            for x in self.instants(m).into_iter().flatten() {
                if x > t && best.is_none_or(|b| x < b) {
                    best = Some(x);
                }
            }
            if let Some(b) = best
                && m > self.wall(b) + DST_MARGIN
            {
                return best;
            }
            match self.naive_next(m) {
                Some(next) => m = next,
                None => return best,
            }
        }
    }

    fn last_at_or_before(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let local = self.wall(t);
        if self.steady_around(t) {
            let m = self.naive_prev(local, true)?;
            if let LocalResult::Single(x) = self.zone.from_local_datetime(&m) {
                let x = x.with_timezone(&Utc);
                if x <= t && self.steady_around(x) {
                    return Some(x);
                }
            }
        }
        let mut best: Option<DateTime<Utc>> = None;
        let mut m = self.naive_prev(local + DST_MARGIN, true)?;
        loop {
            for x in self.instants(m).into_iter().flatten() {
                if x <= t && best.is_none_or(|b| x > b) {
                    best = Some(x);
                }
            }
            if let Some(b) = best
                && m < self.wall(b) - DST_MARGIN
            {
                return best;
            }
            match self.naive_prev(m, false) {
                Some(prev) => m = prev,
                None => return best,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap()
    }

    /// The fires in `[from, until)`.
    fn fires(s: &Schedule, from: DateTime<Utc>, until: DateTime<Utc>) -> Vec<DateTime<Utc>> {
        let mut out = Vec::new();
        let mut at = s.next_after(from - chrono::Duration::milliseconds(1));
        while let Some(a) = at.filter(|a| *a < until) {
            out.push(a);
            at = s.next_after(a);
        }
        out
    }

    #[test]
    fn a_rate_is_aligned_to_the_epoch() {
        let s = Schedule::every(Duration::from_mins(1)).unwrap();
        let t = utc(2026, 12, 1, 10, 0, 30);
        assert_eq!(s.next_after(t), Some(utc(2026, 12, 1, 10, 1, 0)));
        assert_eq!(s.last_at_or_before(t), Some(utc(2026, 12, 1, 10, 0, 0)));
        // An instant on a fire: next is strictly after, last is the fire itself.
        let f = utc(2026, 12, 1, 10, 1, 0);
        assert_eq!(s.next_after(f), Some(utc(2026, 12, 1, 10, 2, 0)));
        assert_eq!(s.last_at_or_before(f), Some(f));
        // Odd periods align to the epoch too: 7 s fires at multiples of 7 s since 1970.
        let s7 = Schedule::every(Duration::from_secs(7)).unwrap();
        let n = s7.next_after(t).unwrap();
        assert_eq!(n.timestamp() % 7, 0);
        assert!(n > t && n - t <= chrono::Duration::seconds(7));
        // Milliseconds.
        let ms = Schedule::every(Duration::from_millis(250)).unwrap();
        let t = utc(2026, 12, 1, 10, 0, 0) + chrono::Duration::milliseconds(260);
        assert_eq!(
            ms.next_after(t),
            Some(utc(2026, 12, 1, 10, 0, 0) + chrono::Duration::milliseconds(500))
        );
        assert_eq!(s.shortest_gap(t), Duration::from_mins(1));
        assert_eq!(s.to_string(), "every 1m");
    }

    #[test]
    fn rates_finer_than_a_millisecond_or_zero_are_refused() {
        for bad in [
            Duration::ZERO,
            Duration::from_micros(999),
            Duration::from_micros(1500),
            Duration::from_hours(400 * 24),
        ] {
            let err = Schedule::every(bad).unwrap_err();
            assert!(err.is_invalid_config(), "{bad:?}: {err}");
        }
        assert!(Schedule::every(Duration::from_millis(1)).is_ok());
    }

    #[test]
    fn cron_with_seconds_in_utc() {
        let s = Schedule::cron("*/10 * * * * *").unwrap();
        let t = utc(2026, 12, 1, 10, 0, 5);
        assert_eq!(s.next_after(t), Some(utc(2026, 12, 1, 10, 0, 10)));
        assert_eq!(s.last_at_or_before(t), Some(utc(2026, 12, 1, 10, 0, 0)));
        let fire = s.fire_containing(t).unwrap();
        assert_eq!(
            (fire.at(), fire.next()),
            (utc(2026, 12, 1, 10, 0, 0), utc(2026, 12, 1, 10, 0, 10))
        );
        assert_eq!(s.shortest_gap(t), Duration::from_secs(10));
        let weekly = Schedule::cron("30 15 9 * * MON").unwrap();
        // 2026-12-01 is a Tuesday: the next Monday is the 7th.
        assert_eq!(weekly.next_after(t), Some(utc(2026, 12, 7, 9, 15, 30)));
        assert_eq!(
            weekly.last_at_or_before(t),
            Some(utc(2026, 11, 30, 9, 15, 30))
        );
        assert_eq!(weekly.to_string(), "cron \"30 15 9 * * MON\" in UTC");
    }

    #[test]
    fn a_zone_shifts_the_wall_time() {
        let s = Schedule::cron_in("0 0 3 * * *", "Europe/Berlin").unwrap();
        // Summer: CEST is UTC+2.
        assert_eq!(
            s.next_after(utc(2026, 7, 1, 12, 0, 0)),
            Some(utc(2026, 7, 2, 1, 0, 0))
        );
        let ny = Schedule::cron_in("0 0 9 * * *", "America/New_York").unwrap();
        assert_eq!(
            ny.next_after(utc(2026, 12, 1, 0, 0, 0)),
            Some(utc(2026, 12, 1, 14, 0, 0))
        );
    }

    /// Berlin, 2026-03-29: 02:00 CET becomes 03:00 CEST (01:00 UTC).
    #[test]
    fn spring_forward_in_berlin() {
        let day = (utc(2026, 3, 28, 12, 0, 0), utc(2026, 3, 30, 12, 0, 0));
        // A wall time in the gap fires at the first instant after it, once.
        let s = Schedule::cron_in("0 30 2 * * *", "Europe/Berlin").unwrap();
        assert_eq!(
            fires(&s, day.0, day.1),
            vec![
                utc(2026, 3, 29, 1, 0, 0),  // 03:00 CEST, the gap's end
                utc(2026, 3, 30, 0, 30, 0)  // 02:30 CEST the next day
            ]
        );
        assert_eq!(
            s.fire_containing(utc(2026, 3, 29, 5, 0, 0)).unwrap().at(),
            utc(2026, 3, 29, 1, 0, 0)
        );
        // Every minute of the gap hour: they all collapse into one fire at the gap's end.
        let each = Schedule::cron_in("0 * 2 * * *", "Europe/Berlin").unwrap();
        let on_the_day = fires(&each, utc(2026, 3, 29, 0, 0, 0), utc(2026, 3, 29, 12, 0, 0));
        assert_eq!(on_the_day, vec![utc(2026, 3, 29, 1, 0, 0)]);
        // Elapsed spacing: every 15 minutes stays 15 minutes apart across the gap.
        let quarter = Schedule::cron_in("0 */15 * * * *", "Europe/Berlin").unwrap();
        let around = fires(
            &quarter,
            utc(2026, 3, 29, 0, 30, 0),
            utc(2026, 3, 29, 1, 31, 0),
        );
        assert_eq!(
            around,
            vec![
                utc(2026, 3, 29, 0, 30, 0),
                utc(2026, 3, 29, 0, 45, 0),
                utc(2026, 3, 29, 1, 0, 0),
                utc(2026, 3, 29, 1, 15, 0),
                utc(2026, 3, 29, 1, 30, 0),
            ]
        );
        // Hourly: one hour apart, the missing 02:00 is not made up.
        let hourly = Schedule::cron_in("0 0 * * * *", "Europe/Berlin").unwrap();
        let around = fires(
            &hourly,
            utc(2026, 3, 28, 23, 0, 0),
            utc(2026, 3, 29, 2, 0, 1),
        );
        assert_eq!(
            around,
            vec![
                utc(2026, 3, 28, 23, 0, 0),
                utc(2026, 3, 29, 0, 0, 0),
                utc(2026, 3, 29, 1, 0, 0),
                utc(2026, 3, 29, 2, 0, 0),
            ]
        );
    }

    /// Berlin, 2026-10-25: 03:00 CEST becomes 02:00 CET (01:00 UTC). 02:xx occurs twice.
    #[test]
    fn fall_back_in_berlin() {
        let s = Schedule::cron_in("0 30 2 * * *", "Europe/Berlin").unwrap();
        let on_the_day = fires(&s, utc(2026, 10, 24, 23, 0, 0), utc(2026, 10, 25, 23, 0, 0));
        // Once, at the first 02:30 (CEST, 00:30 UTC), not again at 02:30 CET.
        assert_eq!(on_the_day, vec![utc(2026, 10, 25, 0, 30, 0)]);
        assert_eq!(
            s.fire_containing(utc(2026, 10, 25, 1, 45, 0)).unwrap().at(),
            utc(2026, 10, 25, 0, 30, 0),
            "inside the repeated hour, the fire is still the first 02:30"
        );
        // Elapsed spacing: every 15 minutes through both 02:xx hours.
        let quarter = Schedule::cron_in("0 */15 * * * *", "Europe/Berlin").unwrap();
        let around = fires(
            &quarter,
            utc(2026, 10, 24, 23, 45, 0),
            utc(2026, 10, 25, 1, 16, 0),
        );
        let expected: Vec<_> = (0..7)
            .map(|i| utc(2026, 10, 24, 23, 45, 0) + chrono::Duration::minutes(15 * i))
            .collect();
        assert_eq!(around, expected);
        let hourly = Schedule::cron_in("0 0 * * * *", "Europe/Berlin").unwrap();
        let around = fires(
            &hourly,
            utc(2026, 10, 24, 23, 0, 0),
            utc(2026, 10, 25, 2, 0, 1),
        );
        assert_eq!(
            around,
            vec![
                utc(2026, 10, 24, 23, 0, 0),
                utc(2026, 10, 25, 0, 0, 0), // 02:00 CEST
                utc(2026, 10, 25, 1, 0, 0), // 02:00 CET
                utc(2026, 10, 25, 2, 0, 0),
            ]
        );
        // Backward arithmetic agrees with forward through the repeated hour.
        for w in expected.windows(2) {
            assert_eq!(
                quarter.last_at_or_before(w[1] - chrono::Duration::seconds(1)),
                Some(w[0])
            );
        }
    }

    /// New York, 2026-03-08 02:00 EST → 03:00 EDT (07:00 UTC). 2026-11-01 02:00 EDT → 01:00 EST.
    #[test]
    fn both_transitions_in_new_york() {
        let s = Schedule::cron_in("0 30 2 * * *", "America/New_York").unwrap();
        assert_eq!(
            fires(&s, utc(2026, 3, 8, 0, 0, 0), utc(2026, 3, 9, 0, 0, 0)),
            vec![utc(2026, 3, 8, 7, 0, 0)]
        );
        let s = Schedule::cron_in("0 30 1 * * *", "America/New_York").unwrap();
        assert_eq!(
            fires(&s, utc(2026, 11, 1, 0, 0, 0), utc(2026, 11, 2, 0, 0, 0)),
            vec![utc(2026, 11, 1, 5, 30, 0)],
            "01:30 EDT only"
        );
        let hourly = Schedule::cron_in("0 0 * * * *", "America/New_York").unwrap();
        let gaps: Vec<_> = fires(
            &hourly,
            utc(2026, 11, 1, 3, 0, 0),
            utc(2026, 11, 1, 9, 0, 0),
        )
        .windows(2)
        .map(|w| w[1] - w[0])
        .collect();
        assert_eq!(gaps, vec![chrono::Duration::hours(1); 5]);
    }

    /// The exact run-time texts. `macro-tests/tests/ui/fail/schedule_errors.stderr` has the same
    /// words at compile time.
    #[test]
    fn bad_expressions_and_zones_say_what_to_fix() {
        let message = |expression: &str, zone: &str| {
            let err = Schedule::cron_in(expression, zone).unwrap_err();
            assert!(
                err.is_invalid_schedule() && err.is_invalid_config(),
                "{err}"
            );
            err.to_string()
        };
        for (expression, expected) in [
            (
                "60 0 3 * * *",
                "cron \"60 0 3 * * *\": the seconds field \"60\" is out of range 0-59",
            ),
            (
                "0 60 3 * * *",
                "cron \"0 60 3 * * *\": the minutes field \"60\" is out of range 0-59",
            ),
            (
                "0 0 25 * * *",
                "cron \"0 0 25 * * *\": the hours field \"25\" is out of range 0-23",
            ),
            (
                "0 0 3 32 * *",
                "cron \"0 0 3 32 * *\": the day-of-month field \"32\" is out of range 1-31",
            ),
            (
                "0 0 3 * 13 *",
                "cron \"0 0 3 * 13 *\": the month field \"13\" is out of range 1-12",
            ),
            (
                "0 0 3 * * 8",
                "cron \"0 0 3 * * 8\": the day-of-week field \"8\" is out of range 0-7",
            ),
            (
                "0 0 three * * *",
                "cron \"0 0 three * * *\": the hours field \"three\" is not valid; it takes \
                 0-23 with * , - /",
            ),
            (
                "0 3 * * *",
                "cron \"0 3 * * *\" has 5 fields; write six, seconds first: sec min hour \
                 day-of-month month day-of-week (e.g. \"0 0 3 * * *\" for 03:00 daily)",
            ),
            (
                "0 0 0 31 2 *",
                "cron \"0 0 0 31 2 *\" never fires: no date from the year 2000 on matches it",
            ),
        ] {
            assert_eq!(
                message(expression, "UTC"),
                format!("invalid schedule: {expected}")
            );
        }
        let err = Schedule::cron("0 0 25 * * *").unwrap_err();
        assert_eq!(
            std::error::Error::source(&err).map(ToString::to_string),
            Some("Component error: Number out of bounds.".to_owned()),
            "croner's error is the source"
        );
        assert_eq!(
            message("0 0 3 * * *", "Mars/Olympus"),
            "invalid schedule: unknown time zone \"Mars/Olympus\": use an IANA name such as \
             \"Europe/Berlin\" or \"UTC\""
        );
    }

    #[test]
    fn schedules_in_words() {
        let rates = [
            (Duration::from_secs(1), "every second"),
            (Duration::from_secs(30), "every 30 seconds"),
            (Duration::from_secs(90), "every 90 seconds"),
            (Duration::from_mins(1), "every minute"),
            (Duration::from_mins(5), "every 5 minutes"),
            (Duration::from_hours(1), "every hour"),
            (Duration::from_hours(6), "every 6 hours"),
            (Duration::from_hours(24), "every day"),
            (Duration::from_hours(48), "every 2 days"),
            (Duration::from_millis(1500), "every 1500 milliseconds"),
        ];
        for (period, words) in rates {
            let schedule = Schedule::every(period).expect("valid");
            assert_eq!(schedule.describe(), words, "{period:?}");
        }
        let crons = [
            ("* * * * * *", "every second"),
            ("*/10 * * * * *", "every 10 seconds"),
            ("0 * * * * *", "every minute"),
            ("30 * * * * *", "every minute at second 30"),
            ("0 */5 * * * *", "every 5 minutes"),
            ("0 0/15 * * * *", "every 15 minutes"),
            ("0 0 * * * *", "every hour"),
            ("@hourly", "every hour"),
            ("0 15 * * * *", "every hour at :15"),
            ("0 5 */6 * * *", "every 6 hours at :05 (Europe/Berlin)"),
            ("0 0 3 * * *", "at 03:00 every day (Europe/Berlin)"),
            ("@daily", "at 00:00 every day (Europe/Berlin)"),
            ("30 0 3 * * *", "at 03:00:30 every day (Europe/Berlin)"),
            (
                "0 0 6,18 * * *",
                "at 06:00 and 18:00 every day (Europe/Berlin)",
            ),
            (
                "0 30 9 * * MON-FRI",
                "at 09:30 Monday to Friday (Europe/Berlin)",
            ),
            (
                "0 30 9 * * 1-5",
                "at 09:30 Monday to Friday (Europe/Berlin)",
            ),
            ("0 0 0 * * 0", "at 00:00 every Sunday (Europe/Berlin)"),
            ("0 0 0 * * 7", "at 00:00 every Sunday (Europe/Berlin)"),
            ("@weekly", "at 00:00 every Sunday (Europe/Berlin)"),
            (
                "0 0 8 * * mon,wed,fri",
                "at 08:00 on Monday, Wednesday and Friday (Europe/Berlin)",
            ),
            (
                "0 0 0 1 * *",
                "at 00:00 on day 1 of every month (Europe/Berlin)",
            ),
            (
                "0 0 0 L * *",
                "at 00:00 on the last day of every month (Europe/Berlin)",
            ),
            (
                "0 */5 * * * MON-FRI",
                "every 5 minutes Monday to Friday (Europe/Berlin)",
            ),
            ("0 0 3 * * * *", "at 03:00 every day (Europe/Berlin)"),
            // Other shapes: croner's words, with the zone.
            (
                "0 0,30 8-17 * * *",
                "at minute 0 and 30, of hour 8-17 (Europe/Berlin)",
            ),
            (
                "0 0 3 1 JAN *",
                "at 03:00, on day 1, in January (Europe/Berlin)",
            ),
            (
                "0 0 12 * * 1#2",
                "at 12:00, on the 2nd Monday of the month (Europe/Berlin)",
            ),
        ];
        for (expression, words) in crons {
            let schedule = Schedule::cron_in(expression, "Europe/Berlin").expect(expression);
            assert_eq!(schedule.describe(), words, "{expression}");
        }
        assert_eq!(
            Schedule::cron("0 0 3 * * *").expect("valid").describe(),
            "at 03:00 every day (UTC)"
        );
    }

    #[test]
    fn bad_periods_are_schedule_errors() {
        let err = Schedule::every(Duration::ZERO).unwrap_err();
        assert!(err.is_invalid_schedule(), "{err}");
        assert_eq!(
            err.to_string(),
            "invalid schedule: the period of a fixed rate is zero"
        );
        let err = Schedule::every(Duration::from_hours(400 * 24)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid schedule: the period of a fixed rate (400d) is above the maximum of 365 days"
        );
    }

    #[test]
    fn the_shortest_gap_of_a_cron_sees_daylight_saving() {
        let s = Schedule::cron_in("0 30 2 * * *", "Europe/Berlin").unwrap();
        // Spring forward moves 02:30 to 03:00 (23 h 30 min after the day before's 02:30), and
        // 03:00 to the next day's 02:30 is 23 h 30 min as well.
        assert_eq!(
            s.shortest_gap(utc(2026, 1, 1, 0, 0, 0)),
            Duration::from_mins(23 * 60 + 30)
        );
    }
}
