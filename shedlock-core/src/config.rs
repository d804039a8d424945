//! What to lock and for how long: [`LockConfig`], validated on construction.

use std::fmt;
use std::time::Duration;

use serde::Deserialize;

use crate::error::{Error, Result};

/// The longest lock name Java ShedLock's table holds (`name VARCHAR(64)`), the default limit.
/// Stores re-check names against their own column through
/// [`LockProvider::max_name_len`](crate::provider::LockProvider::max_name_len).
pub const DEFAULT_MAX_NAME_LEN: usize = 64;

/// The longest `at_most`, `at_least`, lease or timeout accepted: 365 days. Longer is almost
/// certainly a mistake, such as a unit error, and MySQL's `TIMESTAMP` column ends in January 2038.
pub const MAX_DURATION: Duration = Duration::from_hours(365 * 24);

/// One lock: its name, how long it may be held at most, and how long at least.
///
/// - `at_most` is the safety net. If the holder dies, the lock frees itself after it. Set it well
///   above the task's normal run time. It may be left out when the executor has a default (see
///   [`LockingTaskExecutorBuilder::default_at_most`](crate::LockingTaskExecutorBuilder::default_at_most)).
/// - `at_least` is the minimum hold. A run that ends early keeps the lock until `locked_at +
///   at_least`. So replicas whose timers fire a little apart do not each run the task. Unset, it is
///   the executor's [`default_at_least`](crate::LockingTaskExecutorBuilder::default_at_least).
/// - `keep_alive` extends the lock every `at_most / 2` while the task runs. It is off by default.
///   With it, a task may outlive `at_most` as long as its process is alive and reaches the store.
///
/// ```
/// use std::time::Duration;
/// use shedlock_core::LockConfig;
///
/// let cfg = LockConfig::builder("nightly-report")
///     .at_most(Duration::from_secs(600))
///     .at_least(Duration::from_secs(30))
///     .build()?;
/// assert_eq!(cfg.name(), "nightly-report");
///
/// // Every mistake is an error, not a panic:
/// assert!(LockConfig::new("", Duration::from_secs(1)).is_err());
/// assert!(LockConfig::new("job", Duration::ZERO).is_err());
///
/// // From a configuration file, with human durations (JSON here; TOML or YAML work the same):
/// let from_file: LockConfig = serde_json::from_str(
///     r#"{ "name": "nightly-report", "at_most": "10m", "at_least": "30s" }"#,
/// )?;
/// assert_eq!(from_file, cfg);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// It implements [`serde::Deserialize`]. `name` is required. `at_most`, `at_least`, `keep_alive`
/// and `max_name_len` are optional. Durations are text such as `"10m"`, `"1h30m"`, `"500ms"` or
/// `"PT10M"`. Unknown keys are rejected. The result is validated as
/// [`build`](LockConfigBuilder::build) does.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize)]
#[serde(try_from = "RawLockConfig")]
pub struct LockConfig {
    name: String,
    at_most: Option<Duration>,
    at_least: Option<Duration>,
    keep_alive: bool,
}

impl LockConfig {
    /// A lock named `name`, held at most `at_most`, with no minimum hold.
    ///
    /// # Errors
    ///
    /// An [`Error::is_invalid_config`] error when the name is empty, padded with white space, has a
    /// NUL character or is longer than [`DEFAULT_MAX_NAME_LEN`] characters, see
    /// [`LockConfigBuilder::max_name_len`]. Also when `at_most` is zero or above [`MAX_DURATION`].
    pub fn new(name: impl Into<String>, at_most: Duration) -> Result<Self> {
        Self::builder(name).at_most(at_most).build()
    }

    /// Starts a configuration. See [`LockConfigBuilder`].
    pub fn builder(name: impl Into<String>) -> LockConfigBuilder {
        LockConfigBuilder {
            name: name.into(),
            at_most: None,
            at_least: None,
            keep_alive: false,
            max_name_len: DEFAULT_MAX_NAME_LEN,
        }
    }

    /// The lock's name: one row per name in the store.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The longest hold, or `None` to use the executor's default.
    #[must_use]
    pub fn at_most(&self) -> Option<Duration> {
        self.at_most
    }

    /// The shortest hold set on the lock, zero when unset. See
    /// [`at_least_if_set`](Self::at_least_if_set).
    #[must_use]
    pub fn at_least(&self) -> Duration {
        self.at_least.unwrap_or(Duration::ZERO)
    }

    /// The shortest hold, or `None` to use the executor's default.
    #[must_use]
    pub fn at_least_if_set(&self) -> Option<Duration> {
        self.at_least
    }

    /// Whether the executor extends the lock while the task runs.
    #[must_use]
    pub fn keep_alive(&self) -> bool {
        self.keep_alive
    }

    /// `at_most` and `at_least`, each from the executor's default when unset, checked together. An
    /// error names the lock and the values that were defaults.
    pub(crate) fn effective(
        &self,
        default_at_most: Option<Duration>,
        default_at_least: Duration,
    ) -> Result<(Duration, Duration)> {
        let at_least = self.at_least.unwrap_or(default_at_least);
        let Some(at_most) = self.at_most.or(default_at_most) else {
            return Err(Error::invalid_config(format!(
                "lock {:?} has no at_most and the executor has no default_at_most; set one of them",
                self.name
            )));
        };
        if at_least > at_most {
            let source = |set: bool, what: &str| {
                if set {
                    format!("the lock's {what}")
                } else {
                    format!("the executor's default_{what}")
                }
            };
            return Err(Error::invalid_config(format!(
                "lock {:?}: at_least ({}, {}) is longer than at_most ({}, {}); set both on the \
                 lock or change the executor's defaults",
                self.name,
                shedlock_duration::format(at_least),
                source(self.at_least.is_some(), "at_least"),
                shedlock_duration::format(at_most),
                source(self.at_most.is_some(), "at_most"),
            )));
        }
        validate_durations(at_most, at_least)?;
        Ok((at_most, at_least))
    }
}

/// Builds a [`LockConfig`]. [`build`](Self::build) validates it.
///
/// ```
/// use std::time::Duration;
/// let cfg = shedlock_core::LockConfig::builder("sync")
///     .at_most(Duration::from_secs(60))
///     .keep_alive(true)
///     .build()?;
/// assert!(cfg.keep_alive());
/// # Ok::<(), shedlock_core::Error>(())
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct LockConfigBuilder {
    name: String,
    at_most: Option<Duration>,
    at_least: Option<Duration>,
    keep_alive: bool,
    max_name_len: usize,
}

impl LockConfigBuilder {
    /// The longest name accepted, in characters. Defaults to [`DEFAULT_MAX_NAME_LEN`]. Raise it
    /// only for a store whose column is wider. The executor also checks names against the store's
    /// own [`max_name_len`](crate::provider::LockProvider::max_name_len).
    pub fn max_name_len(mut self, max: usize) -> Self {
        self.max_name_len = max;
        self
    }

    /// The longest hold. Unset means the executor's default.
    pub fn at_most(mut self, at_most: Duration) -> Self {
        self.at_most = Some(at_most);
        self
    }

    /// The shortest hold. Unset means the executor's default, which is zero unless set.
    pub fn at_least(mut self, at_least: Duration) -> Self {
        self.at_least = Some(at_least);
        self
    }

    /// Extend the lock every `at_most / 2` while the task runs. Defaults to off.
    pub fn keep_alive(mut self, keep_alive: bool) -> Self {
        self.keep_alive = keep_alive;
        self
    }

    /// Checks and returns the configuration.
    ///
    /// # Errors
    ///
    /// An [`Error::is_invalid_config`] error that says what to fix. The causes are a bad name (see
    /// [`validate_name`]), a zero `at_most`, `at_least > at_most`, or a duration above
    /// [`MAX_DURATION`].
    pub fn build(self) -> Result<LockConfig> {
        validate_name(&self.name, self.max_name_len)?;
        match (self.at_most, self.at_least) {
            (Some(at_most), at_least) => {
                validate_durations(at_most, at_least.unwrap_or(Duration::ZERO))?;
            }
            (None, Some(at_least)) => check_max("at_least", at_least)?,
            (None, None) => {}
        }
        Ok(LockConfig {
            name: self.name,
            at_most: self.at_most,
            at_least: self.at_least,
            keep_alive: self.keep_alive,
        })
    }
}

/// The serde form of [`LockConfig`]: human durations, with every key but `name` optional.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLockConfig {
    name: String,
    #[serde(default)]
    at_most: Option<HumanDuration>,
    #[serde(default)]
    at_least: Option<HumanDuration>,
    #[serde(default)]
    keep_alive: bool,
    #[serde(default)]
    max_name_len: Option<usize>,
}

impl TryFrom<RawLockConfig> for LockConfig {
    type Error = Error;

    fn try_from(raw: RawLockConfig) -> Result<Self> {
        let mut builder = LockConfig::builder(raw.name).keep_alive(raw.keep_alive);
        if let Some(HumanDuration(d)) = raw.at_most {
            builder = builder.at_most(d);
        }
        if let Some(HumanDuration(d)) = raw.at_least {
            builder = builder.at_least(d);
        }
        if let Some(max) = raw.max_name_len {
            builder = builder.max_name_len(max);
        }
        builder.build()
    }
}

/// A duration written as text in the shared grammar (`"15s"`, `"PT15S"`), for configuration files.
pub(crate) struct HumanDuration(pub(crate) Duration);

impl<'de> Deserialize<'de> for HumanDuration {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = HumanDuration;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration string such as \"15s\", \"1m30s\", \"500ms\" or \"PT15S\"")
            }

            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<HumanDuration, E> {
                shedlock_duration::parse(text)
                    .map(HumanDuration)
                    .map_err(E::custom)
            }
        }
        deserializer.deserialize_str(Visitor)
    }
}

/// Checks a lock name: not empty, at most `max_len` characters, no leading or trailing white space,
/// as MySQL/MariaDB compare `'a'` and `'a '` as equal, and no NUL character, which Postgres cannot
/// store. Store implementations call it with their own column's limit.
///
/// # Errors
///
/// An [`Error::is_invalid_config`] error naming the problem.
///
/// ```
/// use shedlock_core::provider::validate_name;
/// assert!(validate_name("report-eu", 64).is_ok());
/// assert!(validate_name(&"x".repeat(65), 64).is_err());
/// assert!(validate_name(" padded", 64).is_err());
/// ```
pub fn validate_name(name: &str, max_len: usize) -> Result<()> {
    if name.is_empty() {
        return Err(Error::invalid_config("the lock name is empty"));
    }
    let len = name.chars().count();
    if len > max_len {
        return Err(Error::invalid_config(format!(
            "the lock name {:?} is {len} characters long; the store allows at most {max_len}",
            truncate_for_message(name)
        )));
    }
    if name.trim() != name {
        return Err(Error::invalid_config(format!(
            "the lock name {name:?} has leading or trailing white space"
        )));
    }
    if name.contains('\0') {
        return Err(Error::invalid_config(format!(
            "the lock name {name:?} contains a NUL character"
        )));
    }
    Ok(())
}

fn truncate_for_message(name: &str) -> String {
    const SHOWN: usize = 40;
    if name.chars().count() <= SHOWN {
        name.to_owned()
    } else {
        let mut s: String = name.chars().take(SHOWN).collect();
        s.push('…');
        s
    }
}

/// Checks the `at_most` a store is asked to hold or extend a lock for: not zero and at most
/// [`MAX_DURATION`]. Stores call it before any query, though the executor has checked already, so a
/// duration past a `TIMESTAMP` column's range never reaches SQL.
///
/// # Errors
///
/// An [`Error::is_invalid_config`] error naming the problem.
///
/// ```
/// use std::time::Duration;
/// assert!(shedlock_core::provider::validate_at_most(Duration::from_secs(60)).is_ok());
/// assert!(shedlock_core::provider::validate_at_most(Duration::MAX).is_err());
/// ```
pub fn validate_at_most(at_most: Duration) -> Result<()> {
    validate_durations(at_most, Duration::ZERO)
}

/// Checks the `at_least` of a release. It must be at most [`MAX_DURATION`]. Zero is fine.
///
/// # Errors
///
/// An [`Error::is_invalid_config`] error naming the problem.
pub fn validate_at_least(at_least: Duration) -> Result<()> {
    check_max("at_least", at_least)
}

/// Checks `at_most` and `at_least` together.
pub(crate) fn validate_durations(at_most: Duration, at_least: Duration) -> Result<()> {
    if at_most.is_zero() {
        return Err(Error::invalid_config(
            "at_most is zero; the lock would expire at once (use at least a few seconds)",
        ));
    }
    check_max("at_most", at_most)?;
    check_max("at_least", at_least)?;
    if at_least > at_most {
        return Err(Error::invalid_config(format!(
            "at_least ({}) is longer than at_most ({}); at_least must not exceed at_most",
            shedlock_duration::format(at_least),
            shedlock_duration::format(at_most)
        )));
    }
    Ok(())
}

/// Rejects a duration above [`MAX_DURATION`]. `what` names the setting in the message.
pub(crate) fn check_max(what: &str, value: Duration) -> Result<()> {
    if value > MAX_DURATION {
        return Err(Error::invalid_config(format!(
            "{what} ({}) is above the maximum of 365 days",
            shedlock_duration::format(value)
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_mins(1);

    fn message(r: Result<LockConfig>) -> String {
        let err = r.expect_err("should be rejected");
        assert!(err.is_invalid_config());
        err.to_string()
    }

    #[test]
    fn accepts_a_plain_config() {
        let cfg = LockConfig::builder("job")
            .at_most(MIN)
            .at_least(Duration::from_secs(5))
            .build()
            .expect("valid");
        assert_eq!(cfg.at_most(), Some(MIN));
        assert_eq!(cfg.at_least(), Duration::from_secs(5));
        assert!(!cfg.keep_alive());
    }

    #[test]
    fn rejects_bad_names() {
        assert!(message(LockConfig::new("", MIN)).contains("empty"));
        let long = "n".repeat(DEFAULT_MAX_NAME_LEN + 1);
        assert!(message(LockConfig::new(long, MIN)).contains("65 characters"));
        assert!(message(LockConfig::new("job ", MIN)).contains("white space"));
        assert!(message(LockConfig::new("a\0b", MIN)).contains("NUL"));
        // 64 multi-byte characters are fine: the limit counts characters, as the column does.
        assert!(LockConfig::new("é".repeat(DEFAULT_MAX_NAME_LEN), MIN).is_ok());
        // A wider column is configured explicitly.
        let wide = LockConfig::builder("w".repeat(200))
            .at_most(MIN)
            .max_name_len(255)
            .build();
        assert!(wide.is_ok());
    }

    #[test]
    fn rejects_bad_durations() {
        assert!(message(LockConfig::new("job", Duration::ZERO)).contains("zero"));
        let too_long = MAX_DURATION + Duration::from_secs(1);
        assert!(message(LockConfig::new("job", too_long)).contains("maximum"));
        let msg = message(
            LockConfig::builder("job")
                .at_most(Duration::from_secs(10))
                .at_least(Duration::from_secs(11))
                .build(),
        );
        assert!(
            msg.contains("at_least (11s) is longer than at_most (10s)"),
            "{msg}"
        );
        assert!(
            message(LockConfig::builder("job").at_least(too_long).build()).contains("at_least")
        );
    }

    #[test]
    fn missing_at_most_uses_the_default_and_is_rechecked() {
        let zero = Duration::ZERO;
        let cfg = LockConfig::builder("job")
            .at_least(Duration::from_secs(30))
            .build()
            .expect("at_most may be left out");
        assert!(
            cfg.effective(None, zero)
                .expect_err("no default")
                .to_string()
                .contains("default_at_most")
        );
        let msg = cfg
            .effective(Some(Duration::from_secs(10)), zero)
            .expect_err("at_least above the default")
            .to_string();
        assert!(
            msg.contains(
                "lock \"job\": at_least (30s, the lock's at_least) is longer than at_most \
                 (10s, the executor's default_at_most)"
            ),
            "{msg}"
        );
        assert_eq!(
            cfg.effective(Some(MIN), zero).ok(),
            Some((MIN, Duration::from_secs(30)))
        );
        // An at_most set on the lock is not the executor's.
        let own = LockConfig::builder("job")
            .at_most(MIN)
            .build()
            .expect("valid");
        assert_eq!(
            own.effective(Some(Duration::from_secs(1)), zero).ok(),
            Some((MIN, zero))
        );
    }

    #[test]
    fn missing_at_least_uses_the_default_and_is_checked_against_at_most() {
        let unset = LockConfig::new("job", Duration::from_secs(10)).expect("valid");
        assert_eq!(unset.at_least_if_set(), None);
        assert_eq!(
            unset.effective(None, Duration::from_secs(3)).ok(),
            Some((Duration::from_secs(10), Duration::from_secs(3)))
        );
        let msg = unset
            .effective(None, MIN)
            .expect_err("the default at_least above the lock's at_most")
            .to_string();
        assert!(
            msg.contains(
                "lock \"job\": at_least (1m, the executor's default_at_least) is longer than \
                 at_most (10s, the lock's at_most)"
            ),
            "{msg}"
        );
        // A lock that sets at_least, even to zero, keeps it.
        let zero = LockConfig::builder("job")
            .at_most(Duration::from_secs(10))
            .at_least(Duration::ZERO)
            .build()
            .expect("valid");
        assert_eq!(
            zero.effective(None, Duration::from_secs(3)).ok(),
            Some((Duration::from_secs(10), Duration::ZERO))
        );
    }

    #[test]
    fn deserializes_human_durations_and_validates() {
        let cfg: LockConfig = serde_json::from_str(
            r#"{"name":"report","at_most":"PT10M","at_least":"30s","keep_alive":true}"#,
        )
        .expect("valid");
        assert_eq!(
            cfg,
            LockConfig::builder("report")
                .at_most(Duration::from_mins(10))
                .at_least(Duration::from_secs(30))
                .keep_alive(true)
                .build()
                .expect("valid")
        );
        let minimal: LockConfig = serde_json::from_str(r#"{"name":"report"}"#).expect("valid");
        assert_eq!(minimal.at_most(), None, "left to the executor's default");
        let err = |json: &str| {
            serde_json::from_str::<LockConfig>(json)
                .expect_err("should be rejected")
                .to_string()
        };
        assert!(err(r#"{"name":"r","at_most":"10 minutes"}"#).contains("invalid duration"));
        assert!(err(r#"{"name":"r","at_most":600}"#).contains("a duration string"));
        assert!(
            err(r#"{"name":"r","at_most":"10s","at_least":"11s"}"#)
                .contains("at_least (11s) is longer than at_most (10s)")
        );
        assert!(err(r#"{"name":"","at_most":"10s"}"#).contains("empty"));
        assert!(err(r#"{"name":"r","at_mots":"10s"}"#).contains("unknown field `at_mots`"));
    }
}
