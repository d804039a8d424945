//! The cron expressions and time zones of shedlock-rs schedules.
//!
//! `shedlock-core` checks them at run time, when a `Schedule` is built. `shedlock-macros` checks
//! them the same way at compile time. Each mistake has one message.
//!
//! An expression has six fields, seconds first: `sec min hour day-of-month month day-of-week`. An
//! optional seventh field gives the year. An expression can also be a nickname (`@daily`). It is
//! parsed by the [`croner`] crate. When croner refuses it, croner parses each field alone, with the
//! others set to `*`. This names the field at fault, its value and the values the field takes:
//!
//! ```
//! let err = shedlock_cron::parse("0 0 25 * * *").unwrap_err();
//! assert_eq!(
//!     err.to_string(),
//!     "cron \"0 0 25 * * *\": the hours field \"25\" is out of range 0-23"
//! );
//! assert!(shedlock_cron::parse("0 */15 * * * MON-FRI").is_ok());
//!
//! let err = shedlock_cron::zone("Europe/Berlln").unwrap_err();
//! assert_eq!(
//!     err.to_string(),
//!     "unknown time zone \"Europe/Berlln\": use an IANA name such as \"Europe/Berlin\" or \"UTC\""
//! );
//! ```
#![warn(missing_docs)]

use std::fmt;
use std::str::FromStr;

use chrono::{TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::errors::CronError;
use croner::parser::{CronParser, Seconds};

/// Why a cron expression or a time zone was refused.
///
/// Its `Display` names what is wrong and what to write instead. Croner's own error, when there is
/// one, is the [`source`](std::error::Error::source).
#[derive(Debug)]
pub struct Invalid {
    message: String,
    source: Option<CronError>,
}

impl Invalid {
    fn new(message: String, source: Option<CronError>) -> Self {
        Self { message, source }
    }

    /// What is wrong, as `Display` shows it.
    #[must_use]
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The message and croner's error, for callers that wrap them in an error of their own.
    #[must_use]
    pub fn into_parts(self) -> (String, Option<CronError>) {
        (self.message, self.source)
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Invalid {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_ref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// A field of an expression: its name and the values it takes. The values are those croner's
/// documentation gives.
struct Field {
    name: &'static str,
    range: &'static str,
    takes: &'static str,
}

const FIELDS: [Field; 7] = [
    Field {
        name: "seconds",
        range: "0-59",
        takes: "0-59 with * , - /",
    },
    Field {
        name: "minutes",
        range: "0-59",
        takes: "0-59 with * , - /",
    },
    Field {
        name: "hours",
        range: "0-23",
        takes: "0-23 with * , - /",
    },
    Field {
        name: "day-of-month",
        range: "1-31",
        takes: "1-31 with * , - / ? L W",
    },
    Field {
        name: "month",
        range: "1-12",
        takes: "1-12 or JAN-DEC with * , - /",
    },
    Field {
        name: "day-of-week",
        range: "0-7",
        takes: "0-7 (0 and 7 are Sunday) or SUN-SAT with * , - / ? L #",
    },
    Field {
        name: "year",
        range: "1-5000",
        takes: "1-5000 with * , - /",
    },
];

fn parser() -> CronParser {
    CronParser::builder().seconds(Seconds::Required).build()
}

/// Parses a cron expression with seconds, as a shedlock-rs `Schedule` takes it.
///
/// # Errors
///
/// Returns [`Invalid`] in three cases:
///
/// - The expression does not have six or seven fields.
/// - Croner refuses a field. The message names the field, its value and what it takes.
/// - The expression never fires, such as on 31 February.
///
/// ```
/// assert_eq!(
///     shedlock_cron::parse("0 3 * * *").unwrap_err().to_string(),
///     "cron \"0 3 * * *\" has 5 fields; write six, seconds first: sec min hour day-of-month \
///      month day-of-week (e.g. \"0 0 3 * * *\" for 03:00 daily)"
/// );
/// ```
pub fn parse(expression: &str) -> Result<Cron, Invalid> {
    let trimmed = expression.trim();
    let nickname = trimmed.starts_with('@');
    let fields: Vec<&str> = trimmed.split_whitespace().collect();
    if !nickname && !(6..=7).contains(&fields.len()) {
        return Err(Invalid::new(
            format!(
                "cron {expression:?} has {} fields; write six, seconds first: sec min hour \
                 day-of-month month day-of-week (e.g. \"0 0 3 * * *\" for 03:00 daily)",
                fields.len()
            ),
            None,
        ));
    }
    let cron = match parser().parse(trimmed) {
        Ok(cron) => cron,
        Err(error) if nickname => {
            return Err(Invalid::new(
                format!(
                    "cron {expression:?} is not a known nickname: use @yearly, @annually, \
                     @monthly, @weekly, @daily or @hourly, or six fields"
                ),
                Some(error),
            ));
        }
        Err(error) => return Err(field_error(expression, &fields, error)),
    };
    // An expression that can never fire (31 February) is refused too.
    let probe = Utc.with_ymd_and_hms(2000, 1, 1, 0, 0, 0).single();
    if probe.is_none_or(|p| cron.find_next_occurrence(&p, false).is_err()) {
        return Err(Invalid::new(
            format!("cron {expression:?} never fires: no date from the year 2000 on matches it"),
            None,
        ));
    }
    Ok(cron)
}

/// The error for an expression croner refused. It names the first field that croner refuses alone.
/// Within a list (`1,25`) it names the first element that croner refuses alone.
fn field_error(expression: &str, fields: &[&str], error: CronError) -> Invalid {
    let refused = |index: usize, value: &str| {
        let probe: Vec<&str> = (0..fields.len())
            .map(|i| if i == index { value } else { "*" })
            .collect();
        parser().parse(&probe.join(" ")).err()
    };
    for (index, (value, field)) in fields.iter().zip(&FIELDS).enumerate() {
        let Some(field_error) = refused(index, value) else {
            continue;
        };
        let element = value
            .split(',')
            .filter(|_| value.contains(','))
            .find_map(|element| refused(index, element).map(|e| (element, e)));
        let (shown, cause) = match element {
            Some((element, cause)) => (format!("{value:?}: {element:?}"), cause),
            None => (format!("{value:?}"), field_error),
        };
        let what = if out_of_bounds(&cause) {
            format!("is out of range {}", field.range)
        } else {
            format!("is not valid; it takes {}", field.takes)
        };
        let name = field.name;
        return Invalid::new(
            format!("cron {expression:?}: the {name} field {shown} {what}"),
            Some(cause),
        );
    }
    // Every field parses alone: croner's own words.
    Invalid::new(
        format!("cron {expression:?} does not parse: {error}"),
        Some(error),
    )
}

/// Whether croner refused a value for being outside the field's range rather than for its syntax.
///
/// Croner's messages for a range say "out of bounds". The `#` of a weekday (`MON#6`) is reported as
/// syntax. Its bound is not the field's range.
fn out_of_bounds(error: &CronError) -> bool {
    matches!(error, CronError::ComponentError(message)
        if message.contains("out of bounds") && !message.contains("Nth"))
}

/// The IANA time zone `name` (`"Europe/Berlin"`, `"UTC"`).
///
/// # Errors
///
/// [`Invalid`] when the tz database does not know the name.
pub fn zone(name: &str) -> Result<Tz, Invalid> {
    Tz::from_str(name).map_err(|_| {
        Invalid::new(
            format!(
                "unknown time zone {name:?}: use an IANA name such as \"Europe/Berlin\" or \"UTC\""
            ),
            None,
        )
    })
}

/// The README's Rust example, compiled as a doc test. The README is what crates.io shows.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

#[cfg(test)]
mod tests {
    use super::*;

    fn message(expression: &str) -> String {
        parse(expression).expect_err(expression).to_string()
    }

    #[test]
    fn names_each_field_its_value_and_range() {
        for (expression, expected) in [
            (
                "60 0 0 * * *",
                "the seconds field \"60\" is out of range 0-59",
            ),
            (
                "0 61 0 * * *",
                "the minutes field \"61\" is out of range 0-59",
            ),
            (
                "0 0 25 * * *",
                "the hours field \"25\" is out of range 0-23",
            ),
            (
                "0 0 0 32 * *",
                "the day-of-month field \"32\" is out of range 1-31",
            ),
            (
                "0 0 0 * 13 *",
                "the month field \"13\" is out of range 1-12",
            ),
            (
                "0 0 0 * * 8",
                "the day-of-week field \"8\" is out of range 0-7",
            ),
            (
                "0 0 0 1 1 * 0",
                "the year field \"0\" is out of range 1-5000",
            ),
            (
                "0 0 20-25 * * *",
                "the hours field \"20-25\" is out of range 0-23",
            ),
            (
                "0 0 1,25 * * *",
                "the hours field \"1,25\": \"25\" is out of range 0-23",
            ),
            (
                "0 0 x * * *",
                "the hours field \"x\" is not valid; it takes 0-23 with * , - /",
            ),
            (
                "0 */0 * * * *",
                "the minutes field \"*/0\" is not valid; it takes 0-59 with * , - /",
            ),
            (
                "0 0 0 * * MON#6",
                "the day-of-week field \"MON#6\" is not valid; it takes 0-7 (0 and 7 are Sunday) \
                 or SUN-SAT with * , - / ? L #",
            ),
        ] {
            assert_eq!(
                message(expression),
                format!("cron {expression:?}: {expected}")
            );
        }
    }

    #[test]
    fn keeps_croners_error_as_the_source() {
        let err = parse("0 0 25 * * *").expect_err("hour 25");
        let source = std::error::Error::source(&err).map(ToString::to_string);
        assert_eq!(
            source.as_deref(),
            Some("Component error: Number out of bounds.")
        );
    }

    #[test]
    fn counts_fields_and_knows_nicknames() {
        assert!(message("").starts_with("cron \"\" has 0 fields; write six"));
        assert!(message("* * * * *").starts_with("cron \"* * * * *\" has 5 fields"));
        assert_eq!(
            message("@fortnightly"),
            "cron \"@fortnightly\" is not a known nickname: use @yearly, @annually, @monthly, \
             @weekly, @daily or @hourly, or six fields"
        );
        assert!(parse("@daily").is_ok());
        assert!(parse("0 0 3 * * * 2030").is_ok());
    }

    #[test]
    fn refuses_an_expression_that_never_fires() {
        assert_eq!(
            message("0 0 0 31 2 *"),
            "cron \"0 0 0 31 2 *\" never fires: no date from the year 2000 on matches it"
        );
    }

    #[test]
    fn zones() {
        assert_eq!(
            zone("Europe/Berlin").map(chrono_tz::Tz::name).ok(),
            Some("Europe/Berlin")
        );
        assert!(zone("Mars/Olympus").is_err());
    }
}
