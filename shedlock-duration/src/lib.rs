//! The duration grammar of shedlock-rs, so that `"1h30m"` means the same everywhere.
//!
//! `shedlock-core` reads it in configuration files, through serde. `shedlock-macros` checks it at
//! compile time.
//!
//! Two forms are accepted:
//!
//! - **Human**: one or more `<integer><unit>` parts with units `d`, `h`, `m`, `s`, `ms`. Each unit
//!   appears at most once, from the largest to the smallest. Examples: `"10m"`, `"1h30m"`,
//!   `"500ms"`, `"2s"`, `"1d12h"`.
//! - **ISO-8601**: `P[nD][T[nH][nM][n[.fff]S]]`, case-insensitive. Examples: `"PT10M"`,
//!   `"PT1H30M"`, `"PT0.5S"`, `"P1DT2H"`.
//!
//! ```
//! use std::time::Duration;
//! use shedlock_duration::parse;
//!
//! assert_eq!(parse("1h30m")?, Duration::from_secs(5400));
//! assert_eq!(parse("PT0.5S")?, Duration::from_millis(500));
//! assert!(parse("10 minutes").is_err());
//! # Ok::<(), shedlock_duration::ParseError>(())
//! ```
#![warn(missing_docs)]

use std::fmt;
use std::time::Duration;

/// Why a duration string was rejected. Its `Display` says what to write instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    input: String,
    reason: String,
}

impl ParseError {
    fn new(input: &str, reason: impl Into<String>) -> Self {
        Self {
            input: input.to_owned(),
            reason: reason.into(),
        }
    }

    /// The part of the message after the input, such as `unknown unit "min"`.
    #[must_use]
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid duration {:?}: {}; write it like \"10m\", \"1h30m\", \"500ms\" or \"PT10M\"",
            self.input, self.reason
        )
    }
}

impl std::error::Error for ParseError {}

/// Parses a human (`"1h30m"`) or ISO-8601 (`"PT1H30M"`) duration.
///
/// # Errors
///
/// Returns a [`ParseError`] that names the problem. The text is refused when it is empty, has an
/// unknown or repeated unit, or has units out of order. It is also refused for a number without a
/// unit, or for a value that overflows.
pub fn parse(input: &str) -> Result<Duration, ParseError> {
    if input.is_empty() {
        return Err(ParseError::new(input, "it is empty"));
    }
    if input.starts_with(['P', 'p']) {
        parse_iso(input)
    } else {
        parse_human(input)
    }
}

const HUMAN_UNITS: [(&str, u64); 5] = [
    ("d", 86_400_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1_000),
    ("ms", 1),
];

fn parse_human(input: &str) -> Result<Duration, ParseError> {
    let mut rest = input;
    let mut total_ms: u64 = 0;
    let mut last_rank: Option<usize> = None;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(ParseError::new(
                input,
                format!("expected a number at {rest:?}"),
            ));
        }
        let (number, tail) = rest.split_at(digits);
        let unit_len = tail.bytes().take_while(u8::is_ascii_alphabetic).count();
        let (unit, tail) = tail.split_at(unit_len);
        if unit.is_empty() {
            return Err(ParseError::new(
                input,
                format!("the number {number} has no unit (use d, h, m, s or ms)"),
            ));
        }
        let Some(rank) = HUMAN_UNITS.iter().position(|(u, _)| *u == unit) else {
            return Err(ParseError::new(
                input,
                format!("unknown unit {unit:?} (use d, h, m, s or ms)"),
            ));
        };
        if last_rank.is_some_and(|last| rank <= last) {
            return Err(ParseError::new(
                input,
                format!("unit {unit:?} is repeated or out of order (largest unit first)"),
            ));
        }
        last_rank = Some(rank);
        let value: u64 = number
            .parse()
            .map_err(|_| ParseError::new(input, "the number is too large"))?;
        total_ms = value
            .checked_mul(HUMAN_UNITS[rank].1)
            .and_then(|ms| total_ms.checked_add(ms))
            .ok_or_else(|| ParseError::new(input, "the duration is too large"))?;
        rest = tail;
    }
    Ok(Duration::from_millis(total_ms))
}

fn parse_iso(input: &str) -> Result<Duration, ParseError> {
    let upper = input.to_ascii_uppercase();
    let body = &upper[1..];
    let (date, time) = match body.split_once('T') {
        Some((date, time)) => {
            if time.is_empty() {
                return Err(ParseError::new(input, "nothing follows the 'T'"));
            }
            (date, Some(time))
        }
        None => (body, None),
    };
    if date.is_empty() && time.is_none() {
        return Err(ParseError::new(input, "nothing follows the 'P'"));
    }
    let mut total = Duration::ZERO;
    total = add_iso_parts(input, date, &[('D', 86_400)], total)?;
    if let Some(time) = time {
        total = add_iso_parts(input, time, &[('H', 3_600), ('M', 60), ('S', 1)], total)?;
    }
    Ok(total)
}

/// Adds the `<number><designator>` parts of one ISO-8601 section. Only seconds take a fraction.
fn add_iso_parts(
    input: &str,
    section: &str,
    designators: &[(char, u64)],
    mut total: Duration,
) -> Result<Duration, ParseError> {
    let mut rest = section;
    let mut last_rank: Option<usize> = None;
    while !rest.is_empty() {
        let len = rest
            .bytes()
            .take_while(|b| b.is_ascii_digit() || *b == b'.')
            .count();
        let (number, tail) = rest.split_at(len);
        let Some(designator) = tail.chars().next() else {
            return Err(ParseError::new(
                input,
                format!("the number {number} has no designator"),
            ));
        };
        let Some(rank) = designators.iter().position(|(d, _)| *d == designator) else {
            return Err(ParseError::new(
                input,
                format!("unexpected {designator:?} in an ISO-8601 duration"),
            ));
        };
        if number.is_empty() {
            return Err(ParseError::new(
                input,
                format!("{designator:?} has no number before it"),
            ));
        }
        if last_rank.is_some_and(|last| rank <= last) {
            return Err(ParseError::new(
                input,
                format!("{designator:?} is repeated or out of order"),
            ));
        }
        last_rank = Some(rank);
        let seconds_per_unit = designators[rank].1;
        let part = if let Some((whole, fraction)) = number.split_once('.') {
            if designator != 'S' {
                return Err(ParseError::new(input, "only seconds may have a fraction"));
            }
            iso_seconds_with_fraction(input, whole, fraction)?
        } else {
            let value: u64 = number
                .parse()
                .map_err(|_| ParseError::new(input, format!("{number:?} is not a number")))?;
            value
                .checked_mul(seconds_per_unit)
                .map(Duration::from_secs)
                .ok_or_else(|| ParseError::new(input, "the duration is too large"))?
        };
        total = total
            .checked_add(part)
            .ok_or_else(|| ParseError::new(input, "the duration is too large"))?;
        rest = &tail[designator.len_utf8()..];
    }
    Ok(total)
}

fn iso_seconds_with_fraction(
    input: &str,
    whole: &str,
    fraction: &str,
) -> Result<Duration, ParseError> {
    if fraction.is_empty() || fraction.len() > 9 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ParseError::new(
            input,
            "the fraction of seconds needs 1 to 9 digits",
        ));
    }
    let secs: u64 = if whole.is_empty() {
        0
    } else {
        whole
            .parse()
            .map_err(|_| ParseError::new(input, format!("{whole:?} is not a number")))?
    };
    let mut nanos: u32 = fraction
        .parse()
        .map_err(|_| ParseError::new(input, "the fraction of seconds is not a number"))?;
    for _ in fraction.len()..9 {
        nanos *= 10;
    }
    Ok(Duration::new(secs, nanos))
}

/// Formats a duration in the human form that [`parse`] reads back.
///
/// Examples of the output: `"1h30m"`, `"500ms"`, `"0s"`.
///
/// Sub-millisecond parts are dropped.
///
/// ```
/// use std::time::Duration;
/// assert_eq!(shedlock_duration::format(Duration::from_secs(5400)), "1h30m");
/// ```
#[must_use]
pub fn format(duration: Duration) -> String {
    let mut ms = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
    if ms == 0 {
        return "0s".to_owned();
    }
    let mut out = String::new();
    for (unit, size) in HUMAN_UNITS {
        let count = ms / size;
        if count > 0 {
            out.push_str(&count.to_string());
            out.push_str(unit);
            ms %= size;
        }
    }
    out
}

/// Formats a duration for reading at a glance: its two largest units, the rest dropped, and
/// milliseconds under a second. Operator tools show ages and time left this way.
///
/// ```
/// use std::time::Duration;
/// assert_eq!(shedlock_duration::approx(Duration::from_secs(5400 + 59)), "1h30m");
/// assert_eq!(shedlock_duration::approx(Duration::from_secs(90_061)), "1d1h");
/// assert_eq!(shedlock_duration::approx(Duration::from_millis(1_500)), "1s");
/// assert_eq!(shedlock_duration::approx(Duration::from_millis(250)), "250ms");
/// ```
#[must_use]
pub fn approx(duration: Duration) -> String {
    let ms = duration.as_millis();
    if ms < 1_000 {
        return format!("{ms}ms");
    }
    let mut left = duration.as_secs();
    let mut out = String::new();
    let mut shown = 0;
    for (unit, size) in [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)] {
        let count = left / size;
        if count > 0 || shown > 0 {
            if count > 0 {
                out.push_str(&count.to_string());
                out.push_str(unit);
            }
            shown += 1;
            left %= size;
        }
        if shown == 2 {
            break;
        }
    }
    out
}

/// The README's Rust example, compiled as a doc test. The README is what crates.io shows.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> Duration {
        parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn human_forms() {
        assert_eq!(ok("10m"), Duration::from_mins(10));
        assert_eq!(ok("1h30m"), Duration::from_mins(90));
        assert_eq!(ok("500ms"), Duration::from_millis(500));
        assert_eq!(ok("2s"), Duration::from_secs(2));
        assert_eq!(ok("1d2h3m4s5ms"), Duration::from_millis(93_784_005));
        assert_eq!(ok("0s"), Duration::ZERO);
    }

    #[test]
    fn iso_forms() {
        assert_eq!(ok("PT10M"), Duration::from_mins(10));
        assert_eq!(ok("pt1h30m"), Duration::from_mins(90));
        assert_eq!(ok("PT0.5S"), Duration::from_millis(500));
        assert_eq!(ok("PT.25S"), Duration::from_millis(250));
        assert_eq!(ok("P1DT2H"), Duration::from_hours(26));
        assert_eq!(ok("P2D"), Duration::from_hours(48));
    }

    #[test]
    fn rejects_with_a_reason() {
        for (input, needle) in [
            ("", "empty"),
            ("10", "no unit"),
            ("10min", "unknown unit"),
            ("5s1m", "out of order"),
            ("1m1m", "repeated"),
            ("m", "expected a number"),
            ("10 m", "no unit"),
            ("-1s", "expected a number"),
            ("P", "nothing follows"),
            ("PT", "nothing follows"),
            ("PT1.5M", "fraction"),
            ("PT5X", "unexpected"),
            ("PTM", "no number"),
            ("PT1S1M", "out of order"),
            ("99999999999999999999s", "too large"),
            ("213503982334601d", "too large"),
        ] {
            let err = parse(input).expect_err(input);
            assert!(
                err.to_string().contains(needle),
                "{input:?}: {err} lacks {needle:?}"
            );
        }
    }

    #[test]
    fn format_round_trips() {
        for s in ["1h30m", "500ms", "1d12h", "2s", "10m"] {
            assert_eq!(format(ok(s)), s);
        }
        assert_eq!(format(Duration::ZERO), "0s");
    }
}
