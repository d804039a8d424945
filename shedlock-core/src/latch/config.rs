//! [`LeaderLatchConfig`]: the election's name and timings, validated on construction.

use std::fmt;
use std::time::Duration;

use serde::Deserialize;

use crate::config::{DEFAULT_MAX_NAME_LEN, HumanDuration, check_max, validate_name};
use crate::error::{Error, Result};
use crate::owner::validate_owner_id;

/// The settings of a [`LeaderLatch`](crate::LeaderLatch). They say which election, who this replica
/// is, and the four timings that decide how fast leadership moves.
///
/// | setting | default | meaning |
/// |---|---|---|
/// | `lease` | 15 s | how long the row stays held without a renew: the store's safety net when a leader dies |
/// | `renew_interval` | half of `renew_deadline` (5 s) | the leader renews this long after its last successful renew was sent, or after half of `renew_deadline` if that is sooner (so a failed renew has time to be retried) |
/// | `renew_deadline` | two thirds of `lease` (10 s) | the leader steps down locally this long after its last successful renew was sent |
/// | `acquire_interval` | 2 s | followers try to take the row this often; a failed renew is retried this often |
/// | `acquire_jitter` | a quarter of `acquire_interval` | a random extra wait in `[0, jitter]` before each follower attempt |
/// | `call_timeout` | `acquire_interval` | the most one store call may take |
/// | `shutdown_grace` | 5 s | how long [`close`](crate::LeaderLatch::close) and [`resign`](crate::LeaderLatch::resign) let leader-only work finish |
///
/// [`build`](LeaderLatchConfigBuilder::build) checks these rules, and so does deserializing:
///
/// - `renew_interval < renew_deadline < lease`. A renew is then attempted before leadership lapses,
///   and a leader steps down before its row can be taken.
/// - `call_timeout <= acquire_interval` and `acquire_jitter <= acquire_interval`.
/// - `renew_interval + call_timeout < renew_deadline`. A renew sent on time can then finish or time
///   out before the deadline.
/// - No zero durations except the jitter and the grace, and none above
///   [`MAX_DURATION`](crate::provider::MAX_DURATION).
///
/// It implements [`serde::Deserialize`] with human durations (`"15s"`, `"1m30s"`, `"500ms"`,
/// `"PT15S"`). So it can come straight from a configuration file. Unknown keys are rejected.
///
/// Unset timings follow the ones that are set, as the table says. With `lease(30s)` they are 20 s
/// and 10 s. Setting only the lease is valid with the default `acquire_interval` for any lease over
/// 6 s. An error says which of the values it names were defaults or derived.
///
/// ```
/// use std::time::Duration;
/// use shedlock_core::LeaderLatchConfig;
///
/// let cfg = LeaderLatchConfig::builder("scheduler")
///     .lease(Duration::from_secs(30))
///     .renew_interval(Duration::from_secs(10))
///     .renew_deadline(Duration::from_secs(20))
///     .build()?;
/// assert_eq!(cfg.acquire_interval(), Duration::from_secs(2));
///
/// // The same from a configuration file (here JSON; TOML or YAML work the same way):
/// let from_file: LeaderLatchConfig = serde_json::from_str(
///     r#"{ "name": "scheduler", "lease": "30s", "renew_interval": "10s", "renew_deadline": "20s" }"#,
/// )?;
/// assert_eq!(from_file, cfg);
///
/// // Invalid combinations are errors, not panics:
/// let err = LeaderLatchConfig::builder("scheduler").renew_deadline(Duration::from_secs(20)).build();
/// assert!(err.unwrap_err().to_string()
///     .contains("renew_deadline (20s) must be shorter than lease (15s, the default)"));
///
/// // Setting only the lease derives the renew timings from it:
/// let cfg = LeaderLatchConfig::builder("scheduler").lease(Duration::from_secs(60)).build()?;
/// assert_eq!((cfg.renew_deadline(), cfg.renew_interval()), (Duration::from_secs(40), Duration::from_secs(20)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "RawConfig")]
pub struct LeaderLatchConfig {
    name: String,
    owner_id: Option<String>,
    lease: Duration,
    renew_interval: Duration,
    renew_deadline: Duration,
    acquire_interval: Duration,
    acquire_jitter: Duration,
    call_timeout: Duration,
    shutdown_grace: Duration,
}

impl LeaderLatchConfig {
    /// The default `lease`: 15 s.
    pub const DEFAULT_LEASE: Duration = Duration::from_secs(15);
    /// The default `renew_interval` with the default lease: 5 s, half of `renew_deadline`.
    pub const DEFAULT_RENEW_INTERVAL: Duration = Duration::from_secs(5);
    /// The default `renew_deadline` with the default lease: 10 s, two thirds of `lease`.
    pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(10);
    /// The default `acquire_interval`: 2 s.
    pub const DEFAULT_ACQUIRE_INTERVAL: Duration = Duration::from_secs(2);
    /// The default `shutdown_grace`: 5 s.
    pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

    /// The default settings for the election `name`.
    ///
    /// # Errors
    ///
    /// [`Error::is_invalid_config`] when the name is empty, longer than [`DEFAULT_MAX_NAME_LEN`]
    /// characters, padded with white space or contains NUL.
    ///
    /// ```
    /// let cfg = shedlock_core::LeaderLatchConfig::new("scheduler")?;
    /// assert_eq!(cfg.lease(), std::time::Duration::from_secs(15));
    /// # Ok::<(), shedlock_core::Error>(())
    /// ```
    pub fn new(name: impl Into<String>) -> Result<Self> {
        Self::builder(name).build()
    }

    /// Starts a configuration for the election `name`, which is one row in the lock table.
    pub fn builder(name: impl Into<String>) -> LeaderLatchConfigBuilder {
        LeaderLatchConfigBuilder {
            name: name.into(),
            owner_id: None,
            lease: None,
            renew_interval: None,
            renew_deadline: None,
            acquire_interval: None,
            acquire_jitter: None,
            call_timeout: None,
            shutdown_grace: Self::DEFAULT_SHUTDOWN_GRACE,
        }
    }

    /// The election's name: the lock row all candidates compete for.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The owner id set in the configuration, if any. Otherwise the latch uses
    /// [`default_owner_id`](crate::owner::default_owner_id).
    #[must_use]
    pub fn owner_id(&self) -> Option<&str> {
        self.owner_id.as_deref()
    }

    /// How long the row stays held without a renew. It is the `at_most` of each acquire and renew.
    #[must_use]
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// How long after its last successful renew was sent the leader renews again, at most
    /// `renew_deadline / 2`. See [`LeaderLatchConfigBuilder::renew_interval`].
    #[must_use]
    pub fn renew_interval(&self) -> Duration {
        self.renew_interval
    }

    /// How long after its last successful acquire or renew was sent the leader steps down locally.
    #[must_use]
    pub fn renew_deadline(&self) -> Duration {
        self.renew_deadline
    }

    /// How often followers try to take the row, and how soon a failed renew is retried.
    #[must_use]
    pub fn acquire_interval(&self) -> Duration {
        self.acquire_interval
    }

    /// The most a follower adds, at random, to each `acquire_interval`.
    #[must_use]
    pub fn acquire_jitter(&self) -> Duration {
        self.acquire_jitter
    }

    /// The most one store call may take.
    #[must_use]
    pub fn call_timeout(&self) -> Duration {
        self.call_timeout
    }

    /// How long leader-only work may take to finish after [`close`](crate::LeaderLatch::close) or
    /// [`resign`](crate::LeaderLatch::resign), before it is cancelled.
    #[must_use]
    pub fn shutdown_grace(&self) -> Duration {
        self.shutdown_grace
    }
}

impl fmt::Debug for LeaderLatchConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = shedlock_duration::format;
        f.debug_struct("LeaderLatchConfig")
            .field("name", &self.name)
            .field("owner_id", &self.owner_id)
            .field("lease", &d(self.lease))
            .field("renew_interval", &d(self.renew_interval))
            .field("renew_deadline", &d(self.renew_deadline))
            .field("acquire_interval", &d(self.acquire_interval))
            .field("acquire_jitter", &d(self.acquire_jitter))
            .field("call_timeout", &d(self.call_timeout))
            .field("shutdown_grace", &d(self.shutdown_grace))
            .finish()
    }
}

/// Builds a [`LeaderLatchConfig`]. [`build`](Self::build) checks the combination.
#[must_use]
#[derive(Debug, Clone)]
pub struct LeaderLatchConfigBuilder {
    name: String,
    owner_id: Option<String>,
    lease: Option<Duration>,
    renew_interval: Option<Duration>,
    renew_deadline: Option<Duration>,
    acquire_interval: Option<Duration>,
    acquire_jitter: Option<Duration>,
    call_timeout: Option<Duration>,
    shutdown_grace: Duration,
}

impl LeaderLatchConfigBuilder {
    /// This replica's owner id, written to `locked_by`. Defaults to
    /// [`default_owner_id`](crate::owner::default_owner_id). Every candidate of an election needs
    /// its own id.
    pub fn owner_id(mut self, owner_id: impl Into<String>) -> Self {
        self.owner_id = Some(owner_id.into());
        self
    }

    /// How long the row stays held without a renew. Defaults to 15 s. After a leader dies, the
    /// others take over within `lease + acquire_interval + acquire_jitter`.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease);
        self
    }

    /// How long after its last successful renew was sent the leader renews again. Defaults to half
    /// of `renew_deadline`. A larger value is accepted, but the leader then renews at half of
    /// `renew_deadline`, so a failed renew has time to be retried.
    pub fn renew_interval(mut self, interval: Duration) -> Self {
        self.renew_interval = Some(interval);
        self
    }

    /// How long after its last successful acquire or renew was sent the leader steps down locally.
    /// Defaults to two thirds of the lease. Shorter than the lease, so the leader steps down before
    /// anyone else can take the row.
    pub fn renew_deadline(mut self, deadline: Duration) -> Self {
        self.renew_deadline = Some(deadline);
        self
    }

    /// How often followers try to take the row, and how soon a failed renew is retried. Defaults to
    /// 2 s. After a graceful [`close`](crate::LeaderLatch::close), another replica leads within
    /// about this long.
    pub fn acquire_interval(mut self, interval: Duration) -> Self {
        self.acquire_interval = Some(interval);
        self
    }

    /// The most added at random to each follower wait, so candidates started together do not query
    /// in lockstep. Defaults to a quarter of `acquire_interval`. Zero turns it off.
    pub fn acquire_jitter(mut self, jitter: Duration) -> Self {
        self.acquire_jitter = Some(jitter);
        self
    }

    /// The most one store call may take. Defaults to `acquire_interval`. A hung call never keeps a
    /// leader past its `renew_deadline` either way.
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = Some(timeout);
        self
    }

    /// How long leader-only work may take to finish after [`close`](crate::LeaderLatch::close) or
    /// [`resign`](crate::LeaderLatch::resign), never past the term's own deadline. Defaults to 5 s.
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// Checks the settings and builds the configuration.
    ///
    /// # Errors
    ///
    /// [`Error::is_invalid_config`], naming the setting and the rule, for an invalid name or owner
    /// id, or for a broken rule of [`LeaderLatchConfig`].
    pub fn build(self) -> Result<LeaderLatchConfig> {
        let invalid =
            |msg: String| Error::invalid_config(format!("leader latch {:?}: {msg}", self.name));
        validate_name(&self.name, DEFAULT_MAX_NAME_LEN)?;
        if let Some(id) = &self.owner_id {
            validate_owner_id(id)?;
        }
        // Each value with where it came from, for the error messages.
        let lease = Timing::given_or(self.lease, LeaderLatchConfig::DEFAULT_LEASE, "the default");
        let renew_deadline = Timing::given_or(
            self.renew_deadline,
            lease.value * 2 / 3,
            "two thirds of lease",
        );
        let renew_interval = Timing::given_or(
            self.renew_interval,
            renew_deadline.value / 2,
            "half of renew_deadline",
        );
        let acquire_interval = Timing::given_or(
            self.acquire_interval,
            LeaderLatchConfig::DEFAULT_ACQUIRE_INTERVAL,
            "the default",
        );
        let acquire_jitter = Timing::given_or(
            self.acquire_jitter,
            acquire_interval.value / 4,
            "a quarter of acquire_interval",
        );
        let call_timeout = Timing::given_or(
            self.call_timeout,
            acquire_interval.value,
            "acquire_interval",
        );
        let durations = [
            ("lease", lease.value, false),
            ("renew_interval", renew_interval.value, false),
            ("renew_deadline", renew_deadline.value, false),
            ("acquire_interval", acquire_interval.value, false),
            ("acquire_jitter", acquire_jitter.value, true),
            ("call_timeout", call_timeout.value, false),
            ("shutdown_grace", self.shutdown_grace, true),
        ];
        for (what, value, zero_ok) in durations {
            if value.is_zero() && !zero_ok {
                return Err(invalid(format!("{what} is zero")));
            }
            check_max(what, value).map_err(|e| invalid(strip_prefix(&e)))?;
        }
        if renew_interval.value >= renew_deadline.value {
            return Err(invalid(format!(
                "renew_interval ({renew_interval}) must be shorter than renew_deadline \
                 ({renew_deadline}), so a renew is attempted before leadership lapses"
            )));
        }
        if renew_deadline.value >= lease.value {
            return Err(invalid(format!(
                "renew_deadline ({renew_deadline}) must be shorter than lease ({lease}), so a \
                 leader steps down before another replica can take the row"
            )));
        }
        if call_timeout.value > acquire_interval.value {
            return Err(invalid(format!(
                "call_timeout ({call_timeout}) must not be longer than acquire_interval \
                 ({acquire_interval})"
            )));
        }
        if renew_interval.value + call_timeout.value >= renew_deadline.value {
            return Err(invalid(format!(
                "renew_interval ({renew_interval}) + call_timeout ({call_timeout}) must be \
                 shorter than renew_deadline ({renew_deadline}), so a renew sent on time can \
                 finish before the deadline"
            )));
        }
        if acquire_jitter.value > acquire_interval.value {
            return Err(invalid(format!(
                "acquire_jitter ({acquire_jitter}) must not be longer than acquire_interval \
                 ({acquire_interval})"
            )));
        }
        Ok(LeaderLatchConfig {
            name: self.name,
            owner_id: self.owner_id,
            lease: lease.value,
            renew_interval: renew_interval.value,
            renew_deadline: renew_deadline.value,
            acquire_interval: acquire_interval.value,
            acquire_jitter: acquire_jitter.value,
            call_timeout: call_timeout.value,
            shutdown_grace: self.shutdown_grace,
        })
    }
}

/// A timing and where it came from. It was set in code or the file, or it is a default, and
/// `origin` says which.
struct Timing {
    value: Duration,
    origin: Option<&'static str>,
}

impl Timing {
    fn given_or(given: Option<Duration>, default: Duration, origin: &'static str) -> Self {
        match given {
            Some(value) => Self {
                value,
                origin: None,
            },
            None => Self {
                value: default,
                origin: Some(origin),
            },
        }
    }
}

/// `10s`, or `10s, two thirds of lease` for a value that was not set.
impl fmt::Display for Timing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&shedlock_duration::format(self.value))?;
        match self.origin {
            Some(origin) => write!(f, ", {origin}"),
            None => Ok(()),
        }
    }
}

/// The message of an invalid-config error without its "invalid lock configuration: " prefix.
fn strip_prefix(error: &Error) -> String {
    let text = error.to_string();
    match text.split_once(": ") {
        Some((_, rest)) => rest.to_owned(),
        None => text,
    }
}

/// The serde form: human durations, with every key but `name` optional.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    name: String,
    #[serde(default)]
    owner_id: Option<String>,
    #[serde(default)]
    lease: Option<HumanDuration>,
    #[serde(default)]
    renew_interval: Option<HumanDuration>,
    #[serde(default)]
    renew_deadline: Option<HumanDuration>,
    #[serde(default)]
    acquire_interval: Option<HumanDuration>,
    #[serde(default)]
    acquire_jitter: Option<HumanDuration>,
    #[serde(default)]
    call_timeout: Option<HumanDuration>,
    #[serde(default)]
    shutdown_grace: Option<HumanDuration>,
}

impl TryFrom<RawConfig> for LeaderLatchConfig {
    type Error = Error;

    fn try_from(raw: RawConfig) -> Result<Self> {
        let mut builder = LeaderLatchConfig::builder(raw.name);
        if let Some(id) = raw.owner_id {
            builder = builder.owner_id(id);
        }
        if let Some(HumanDuration(d)) = raw.lease {
            builder = builder.lease(d);
        }
        if let Some(HumanDuration(d)) = raw.renew_interval {
            builder = builder.renew_interval(d);
        }
        if let Some(HumanDuration(d)) = raw.renew_deadline {
            builder = builder.renew_deadline(d);
        }
        if let Some(HumanDuration(d)) = raw.acquire_interval {
            builder = builder.acquire_interval(d);
        }
        if let Some(HumanDuration(d)) = raw.acquire_jitter {
            builder = builder.acquire_jitter(d);
        }
        if let Some(HumanDuration(d)) = raw.call_timeout {
            builder = builder.call_timeout(d);
        }
        if let Some(HumanDuration(d)) = raw.shutdown_grace {
            builder = builder.shutdown_grace(d);
        }
        builder.build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: Duration = Duration::from_secs(1);

    fn message(r: Result<LeaderLatchConfig>) -> String {
        let err = r.expect_err("should be rejected");
        assert!(err.is_invalid_config(), "{err}");
        err.to_string()
    }

    #[test]
    fn defaults_are_the_documented_ones() {
        let cfg = LeaderLatchConfig::new("scheduler").expect("valid");
        assert_eq!(cfg.name(), "scheduler");
        assert_eq!(cfg.owner_id(), None);
        assert_eq!(cfg.lease(), 15 * SEC);
        assert_eq!(cfg.renew_interval(), 5 * SEC);
        assert_eq!(cfg.renew_deadline(), 10 * SEC);
        assert_eq!(cfg.acquire_interval(), 2 * SEC);
        assert_eq!(cfg.acquire_jitter(), Duration::from_millis(500));
        assert_eq!(cfg.call_timeout(), 2 * SEC);
        assert_eq!(cfg.shutdown_grace(), 5 * SEC);
    }

    #[test]
    fn derived_defaults_follow_acquire_interval() {
        let cfg = LeaderLatchConfig::builder("e")
            .acquire_interval(SEC)
            .build()
            .expect("valid");
        assert_eq!(cfg.call_timeout(), SEC);
        assert_eq!(cfg.acquire_jitter(), Duration::from_millis(250));
    }

    #[test]
    fn rejects_each_invalid_combination_with_a_clear_message() {
        let b = || LeaderLatchConfig::builder("e");
        let cases = [
            (
                b().renew_interval(10 * SEC),
                "renew_interval (10s) must be shorter than renew_deadline (10s, two thirds of \
                 lease)",
            ),
            (
                b().renew_deadline(15 * SEC),
                "renew_deadline (15s) must be shorter than lease (15s, the default)",
            ),
            (
                b().lease(8 * SEC).renew_deadline(10 * SEC),
                "renew_deadline (10s) must be shorter than lease (8s)",
            ),
            (
                b().call_timeout(3 * SEC),
                "call_timeout (3s) must not be longer than acquire_interval (2s, the default)",
            ),
            (
                b().renew_interval(8 * SEC).renew_deadline(9 * SEC),
                "renew_interval (8s) + call_timeout (2s, acquire_interval) must be shorter than \
                 renew_deadline (9s)",
            ),
            (
                b().lease(6 * SEC),
                "renew_interval (2s, half of renew_deadline) + call_timeout (2s, \
                 acquire_interval) must be shorter than renew_deadline (4s, two thirds of lease)",
            ),
            (
                b().acquire_jitter(3 * SEC),
                "acquire_jitter (3s) must not be longer than acquire_interval (2s, the default)",
            ),
            (b().lease(Duration::ZERO), "lease is zero"),
            (
                b().acquire_interval(Duration::ZERO),
                "acquire_interval is zero",
            ),
            (b().call_timeout(Duration::ZERO), "call_timeout is zero"),
            (
                b().lease(crate::provider::MAX_DURATION + SEC),
                "lease (365d1s) is above the maximum",
            ),
            (b().owner_id(""), "owner id is empty"),
        ];
        for (builder, expected) in cases {
            let msg = message(builder.clone().build());
            assert!(msg.contains(expected), "{builder:?}: {msg}");
        }
        assert!(message(LeaderLatchConfig::new("")).contains("empty"));
        assert!(message(LeaderLatchConfig::new("x".repeat(65))).contains("65 characters"));
        // The message names the election.
        assert!(
            message(b().lease(SEC).build())
                .starts_with("invalid lock configuration: leader latch \"e\": ")
        );
    }

    #[test]
    fn unset_renew_timings_follow_the_lease_and_the_deadline() {
        for lease in [7 * SEC, 15 * SEC, 60 * SEC, 3600 * SEC] {
            let cfg = LeaderLatchConfig::builder("e")
                .lease(lease)
                .build()
                .expect("a lease over 6 s alone is valid");
            assert_eq!(cfg.renew_deadline(), lease * 2 / 3, "{lease:?}");
            assert_eq!(cfg.renew_interval(), lease / 3, "{lease:?}");
        }
        let cfg = LeaderLatchConfig::builder("e")
            .renew_deadline(8 * SEC)
            .build()
            .expect("valid");
        assert_eq!(cfg.renew_interval(), 4 * SEC, "half of the deadline set");
        assert_eq!(cfg.lease(), 15 * SEC);
        let cfg = LeaderLatchConfig::builder("e")
            .lease(30 * SEC)
            .renew_interval(3 * SEC)
            .build()
            .expect("valid");
        assert_eq!(cfg.renew_interval(), 3 * SEC, "a value set is kept");
        assert_eq!(cfg.renew_deadline(), 20 * SEC);
    }

    #[test]
    fn zero_jitter_and_zero_grace_are_allowed() {
        let cfg = LeaderLatchConfig::builder("e")
            .acquire_jitter(Duration::ZERO)
            .shutdown_grace(Duration::ZERO)
            .build()
            .expect("valid");
        assert_eq!(cfg.acquire_jitter(), Duration::ZERO);
        assert_eq!(cfg.shutdown_grace(), Duration::ZERO);
    }

    #[test]
    fn deserializes_human_durations_and_validates() {
        let cfg: LeaderLatchConfig = serde_json::from_str(
            r#"{"name":"jobs","owner_id":"pod-1","lease":"PT30S","renew_interval":"10s",
                "renew_deadline":"20s","acquire_interval":"1s500ms","acquire_jitter":"0s",
                "call_timeout":"1s","shutdown_grace":"1m"}"#,
        )
        .expect("valid");
        assert_eq!(
            cfg,
            LeaderLatchConfig::builder("jobs")
                .owner_id("pod-1")
                .lease(30 * SEC)
                .renew_interval(10 * SEC)
                .renew_deadline(20 * SEC)
                .acquire_interval(Duration::from_millis(1500))
                .acquire_jitter(Duration::ZERO)
                .call_timeout(SEC)
                .shutdown_grace(60 * SEC)
                .build()
                .expect("valid")
        );
        let minimal: LeaderLatchConfig = serde_json::from_str(r#"{"name":"jobs"}"#).expect("valid");
        assert_eq!(minimal, LeaderLatchConfig::new("jobs").expect("valid"));

        let err = |json: &str| {
            serde_json::from_str::<LeaderLatchConfig>(json)
                .expect_err("should be rejected")
                .to_string()
        };
        assert!(err(r#"{"name":"jobs","lease":"15 seconds"}"#).contains("invalid duration"));
        assert!(err(r#"{"name":"jobs","lease":15}"#).contains("a duration string"));
        assert!(
            err(r#"{"name":"jobs","renew_deadline":"20s"}"#).contains("must be shorter than lease")
        );
        assert!(err(r#"{"name":"jobs","leese":"20s"}"#).contains("unknown field `leese`"));
        assert!(err(r#"{"lease":"20s"}"#).contains("missing field `name`"));
    }

    #[test]
    fn debug_shows_human_durations() {
        let text = format!("{:?}", LeaderLatchConfig::new("e").expect("valid"));
        assert!(text.contains("lease: \"15s\""), "{text}");
    }
}
