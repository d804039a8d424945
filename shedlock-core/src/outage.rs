//! A failing store, logged once per outage. The leader latch and each scheduled job keep an
//! [`Outage`] of their store calls. They log its first failure, and a change of cause, with
//! guidance, the rest at DEBUG, and its end at INFO with how many calls failed and for how long.

use std::time::Duration;

use tokio::time::Instant;

use crate::error::Error;

/// The cause of a store failure, as an outage groups them. A new cause is logged again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cause {
    /// The lock table does not exist.
    MissingTable,
    /// The lock table's columns do not fit.
    Schema,
    /// A call got no answer within its timeout.
    Timeout,
    /// The store rejected the input, such as a name or owner id its columns cannot hold.
    InvalidConfig,
    /// Anything else. The store is down, unreachable, or refused the credentials.
    Backend,
}

impl Cause {
    pub(crate) fn of(error: &Error) -> Self {
        if error.is_missing_table() {
            Self::MissingTable
        } else if error.is_schema() {
            Self::Schema
        } else if error.is_timeout() {
            Self::Timeout
        } else if error.is_invalid_config() {
            Self::InvalidConfig
        } else {
            Self::Backend
        }
    }

    /// Whether retrying cannot help, because the store is set up wrong, not unreachable.
    #[cfg_attr(
        not(feature = "scheduler"),
        allow(dead_code, reason = "used by the scheduler")
    )]
    pub(crate) fn is_misconfiguration(self) -> bool {
        matches!(
            self,
            Self::MissingTable | Self::Schema | Self::InvalidConfig
        )
    }
}

/// One caller's run of failing store calls.
#[derive(Debug, Default)]
pub(crate) struct Outage {
    failures: u64,
    cause: Option<Cause>,
    since: Option<Instant>,
}

impl Outage {
    /// Counts a failed call. Answers `Some(cause)` when the failure is to be logged in full: the
    /// first of the outage, or one whose cause differs from the last logged. Answers `None` while
    /// the same outage goes on, which the caller logs at DEBUG.
    pub(crate) fn failed(&mut self, error: &Error) -> Option<Cause> {
        self.failures += 1;
        self.since.get_or_insert_with(Instant::now);
        let cause = Cause::of(error);
        if self.cause == Some(cause) {
            return None;
        }
        self.cause = Some(cause);
        Some(cause)
    }

    /// How many calls failed in this outage so far.
    pub(crate) fn failures(&self) -> u64 {
        self.failures
    }

    /// A call succeeded. It ends the outage, if there was one. It then returns how many calls
    /// failed in it and how long it lasted.
    pub(crate) fn recovered(&mut self) -> Option<(u64, Duration)> {
        let ended = self
            .since
            .map(|since| (self.failures, since.elapsed()))
            .filter(|(failures, _)| *failures > 0);
        *self = Self::default();
        ended
    }
}

/// `d` in whole milliseconds, for a log field.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_outage_is_reported_once_per_cause_and_ends_with_its_count_and_length() {
        let mut outage = Outage::default();
        assert_eq!(outage.recovered(), None, "no outage, nothing to report");
        let down = Error::backend_message("x");
        assert_eq!(outage.failed(&down), Some(Cause::Backend));
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(outage.failed(&down), None);
        let missing = Error::missing_table("t", "create it", std::io::Error::other("x"));
        assert_eq!(outage.failed(&missing), Some(Cause::MissingTable));
        assert_eq!(outage.failures(), 3);
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(outage.recovered(), Some((3, Duration::from_secs(5))));
        assert_eq!(outage.recovered(), None);
        assert_eq!(outage.failed(&down), Some(Cause::Backend), "a new outage");
    }

    #[test]
    fn misconfiguration_is_the_table_or_the_input_not_the_connection() {
        let cases = [
            (
                Error::missing_table("t", "x", std::io::Error::other("x")),
                true,
            ),
            (Error::schema("x", None), true),
            (Error::invalid_config("x"), true),
            (Error::timeout("acquire", Duration::from_secs(1)), false),
            (Error::backend_message("refused"), false),
        ];
        for (error, misconfigured) in cases {
            assert_eq!(
                Cause::of(&error).is_misconfiguration(),
                misconfigured,
                "{error}"
            );
        }
    }
}
