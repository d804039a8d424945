//! A job's settings as data: [`JobSpec`], also read from configuration files.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::OnHeld;
use crate::config::LockConfig;
use crate::error::{Error, Result};
use crate::schedule::Schedule;

/// A job's settings: its name, [`Schedule`], lock settings, catch-up and what it does with a fire
/// met held. A [`Job`](crate::Job) is a `JobSpec` and a body, see
/// [`Job::from_spec`](crate::Job::from_spec). [`Job::spec`](crate::Job::spec) and
/// [`JobStatus::spec`](crate::scheduler::JobStatus::spec) give it back.
///
/// The fields are public. Set them in code, or read them from a configuration file or the
/// environment. [`Scheduler::add`](crate::Scheduler::add) checks them either way. Deserialising
/// runs the same checks except the two only the scheduler knows, the store's longest lock name and
/// the executor's `default_at_most`.
///
/// # In a configuration file
///
/// It implements [`serde::Deserialize`] and [`serde::Serialize`]. Durations are text in the grammar
/// of [`parse_duration`](crate::parse_duration), such as `"10m"`, `"1h30m"`, `"500ms"` or
/// `"PT10M"`. The keys:
///
/// | key | value | default |
/// |---|---|---|
/// | `name` | the job's name | required |
/// | `cron` | a cron expression with seconds, as [`Schedule::cron_in`] takes it | `cron` or `every` is required |
/// | `zone` | the IANA time zone of `cron` | `"UTC"` |
/// | `every` | a fixed rate's period, as [`Schedule::every`] takes it | |
/// | `at_most` | the lock's `at_most` | the executor's `default_at_most` |
/// | `at_least` | the lock's `at_least` | `"0s"` |
/// | `keep_alive` | `true` to extend the lock while a run lasts | `false` |
/// | `catch_up` | `true` to claim the latest fire at start ([`Job::catch_up`](crate::Job::catch_up)) | `false` |
/// | `on_held` | `"skip"` or `"run_late"` ([`OnHeld`]) | `"skip"` |
/// | `lock_name` | a lock name other than `name` | `name` |
///
/// Unknown keys are refused, and every error names the job and the key:
///
/// ```
/// use std::time::Duration;
/// use shedlock_core::{Schedule, scheduler::JobSpec};
///
/// let spec: JobSpec = serde_json::from_str(
///     r#"{ "name": "report", "cron": "0 0 3 * * *", "zone": "Europe/Berlin", "at_most": "10m" }"#,
/// )?;
/// assert_eq!(spec.schedule, Schedule::cron_in("0 0 3 * * *", "Europe/Berlin")?);
/// assert_eq!(spec.at_most, Some(Duration::from_secs(600)));
///
/// let err = serde_json::from_str::<JobSpec>(
///     r#"{ "name": "report", "every": "1m", "at_most": "10 minutes" }"#,
/// )
/// .unwrap_err();
/// assert!(err.to_string().starts_with(
///     "invalid lock configuration: job \"report\": at_most: invalid duration \"10 minutes\""
/// ));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Serialising writes the same keys back, with durations in their shortest human form, to the
/// millisecond. Only `lock_name`, `at_most` and `at_least` are left out, when unset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawJobSpec", into = "RawJobSpec")]
#[non_exhaustive]
pub struct JobSpec {
    /// The job's name, unique in its scheduler. It is its lock's name unless `lock_name` is set.
    pub name: String,
    /// A lock name other than the job's name, to share a row with a Java ShedLock job, say.
    pub lock_name: Option<String>,
    /// When the job fires.
    pub schedule: Schedule,
    /// The lock's `at_most`. `None` means the executor's `default_at_most`.
    pub at_most: Option<Duration>,
    /// The lock's `at_least`. `None` means zero (see [`Job::at_least`](crate::Job::at_least)).
    pub at_least: Option<Duration>,
    /// Extend the lock while a run lasts.
    pub keep_alive: bool,
    /// Claim the latest fire at or before the store's now once at start.
    pub catch_up: bool,
    /// What to do with a fire met while the lock is held.
    pub on_held: OnHeld,
}

impl JobSpec {
    /// A job named `name` firing on `schedule`, every other setting at its default.
    #[must_use]
    pub fn new(name: impl Into<String>, schedule: Schedule) -> Self {
        Self {
            name: name.into(),
            lock_name: None,
            schedule,
            at_most: None,
            at_least: None,
            keep_alive: false,
            catch_up: false,
            on_held: OnHeld::Skip,
        }
    }

    /// The lock name: `lock_name`, or the job's name.
    #[must_use]
    pub fn lock_name(&self) -> &str {
        self.lock_name.as_deref().unwrap_or(&self.name)
    }

    /// Checks the settings, with the executor's `default_at_most` and the store's longest lock
    /// name, at `now` by the store's clock. Returns the job's [`LockConfig`]. Its `at_most` is
    /// `None` only when neither the job nor the default sets one. Every error names the job.
    pub(crate) fn lock_config(
        &self,
        default_at_most: Option<Duration>,
        max_name_len: usize,
        now: DateTime<Utc>,
    ) -> Result<LockConfig> {
        let context = format!("job {:?}", self.name);
        let at_least = self.at_least.unwrap_or(Duration::ZERO);
        let mut builder = LockConfig::builder(self.lock_name())
            .max_name_len(max_name_len)
            .at_least(at_least)
            .keep_alive(self.keep_alive);
        if let Some(at_most) = self.at_most.or(default_at_most) {
            builder = builder.at_most(at_most);
        }
        let cfg = builder.build().map_err(|e| e.in_context(&context))?;
        if self.schedule.next_after(now).is_none() {
            return Err(Error::invalid_config(format!(
                "{context}: its schedule ({}) never fires again",
                self.schedule
            )));
        }
        let gap = self.schedule.shortest_gap(now);
        if !at_least.is_zero() && at_least >= gap {
            return Err(Error::invalid_config(format!(
                "{context}: at_least ({}) is not shorter than its schedule's shortest gap ({}): \
                 every other fire would find the lock still held",
                shedlock_duration::format(at_least),
                shedlock_duration::format(gap)
            )));
        }
        Ok(cfg)
    }
}

/// The serde form of [`JobSpec`]: the schedule as `cron` and `zone`, or `every`, durations as text.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawJobSpec {
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lock_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cron: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    zone: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    every: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    at_most: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    at_least: Option<String>,
    #[serde(default)]
    keep_alive: bool,
    #[serde(default)]
    catch_up: bool,
    #[serde(default)]
    on_held: OnHeld,
}

impl TryFrom<RawJobSpec> for JobSpec {
    type Error = Error;

    fn try_from(raw: RawJobSpec) -> Result<Self> {
        let context = format!("job {:?}", raw.name);
        let duration = |key: &str, text: Option<String>| -> Result<Option<Duration>> {
            text.map(|t| {
                shedlock_duration::parse(&t).map_err(|e| {
                    Error::invalid_config_with(format!("{context}: {key}: {e}"), e.clone())
                })
            })
            .transpose()
        };
        let schedule = match (raw.cron, raw.every) {
            (Some(cron), None) => Schedule::cron_in(&cron, raw.zone.as_deref().unwrap_or("UTC"))
                .map_err(|e| e.in_context(&format!("{context}: cron")))?,
            (None, Some(every)) if raw.zone.is_none() => {
                let period = duration("every", Some(every))?.unwrap_or_default();
                Schedule::every(period).map_err(|e| e.in_context(&format!("{context}: every")))?
            }
            (None, Some(_)) => {
                return Err(Error::invalid_config(format!(
                    "{context}: zone is for a cron schedule; a fixed rate (every) is aligned to \
                     the Unix epoch"
                )));
            }
            (Some(_), Some(_)) => {
                return Err(Error::invalid_config(format!(
                    "{context}: both cron and every are set; give one schedule"
                )));
            }
            (None, None) => {
                return Err(Error::invalid_config(format!(
                    "{context}: no schedule; set cron (with an optional zone) or every"
                )));
            }
        };
        let spec = Self {
            at_most: duration("at_most", raw.at_most)?,
            at_least: duration("at_least", raw.at_least)?,
            name: raw.name,
            lock_name: raw.lock_name,
            schedule,
            keep_alive: raw.keep_alive,
            catch_up: raw.catch_up,
            on_held: raw.on_held,
        };
        // The store's column and the executor's default are checked by `Scheduler::add`.
        spec.lock_config(None, usize::MAX, Utc::now())?;
        Ok(spec)
    }
}

impl From<JobSpec> for RawJobSpec {
    fn from(spec: JobSpec) -> Self {
        let format = |d: Option<Duration>| d.map(shedlock_duration::format);
        let (cron, zone) = match spec.schedule.cron_parts() {
            Some((cron, zone)) => (Some(cron.to_owned()), Some(zone.to_owned())),
            None => (None, None),
        };
        Self {
            name: spec.name,
            lock_name: spec.lock_name,
            cron,
            zone,
            every: format(spec.schedule.period()),
            at_most: format(spec.at_most),
            at_least: format(spec.at_least),
            keep_alive: spec.keep_alive,
            catch_up: spec.catch_up,
            on_held: spec.on_held,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<JobSpec, String> {
        serde_json::from_str(json).map_err(|e| e.to_string())
    }

    #[test]
    fn a_spec_reads_every_key_and_writes_them_back() {
        let spec = parse(
            r#"{"name":"report","lock_name":"report-lock","cron":"0 0 3 * * *",
                "zone":"Europe/Berlin","at_most":"PT10M","at_least":"30s","keep_alive":true,
                "catch_up":true,"on_held":"run_late"}"#,
        )
        .expect("valid");
        let mut expected = JobSpec::new(
            "report",
            Schedule::cron_in("0 0 3 * * *", "Europe/Berlin").expect("valid"),
        );
        expected.lock_name = Some("report-lock".into());
        expected.at_most = Some(Duration::from_mins(10));
        expected.at_least = Some(Duration::from_secs(30));
        expected.keep_alive = true;
        expected.catch_up = true;
        expected.on_held = OnHeld::RunLate;
        assert_eq!(spec, expected);
        assert_eq!(spec.lock_name(), "report-lock");
        assert_eq!(
            serde_json::to_string(&spec).expect("serialises"),
            r#"{"name":"report","lock_name":"report-lock","cron":"0 0 3 * * *","zone":"Europe/Berlin","at_most":"10m","at_least":"30s","keep_alive":true,"catch_up":true,"on_held":"run_late"}"#
        );

        let rate = parse(r#"{"name":"sync","every":"1m30s"}"#).expect("valid");
        assert_eq!(
            rate,
            JobSpec::new(
                "sync",
                Schedule::every(Duration::from_secs(90)).expect("ok")
            )
        );
        let text = serde_json::to_string(&rate).expect("serialises");
        assert_eq!(
            text,
            r#"{"name":"sync","every":"1m30s","keep_alive":false,"catch_up":false,"on_held":"skip"}"#
        );
        assert_eq!(parse(&text), Ok(rate), "round trip");
        let utc = parse(r#"{"name":"n","cron":"0 0 3 * * *"}"#).expect("valid");
        assert_eq!(
            utc.schedule,
            Schedule::cron("0 0 3 * * *").expect("valid"),
            "zone defaults to UTC"
        );
    }

    #[test]
    fn every_bad_value_names_the_job_and_the_key() {
        let cases = [
            (
                r#"{"name":"sync","every":"1m","at_most":"10 minutes"}"#,
                "invalid lock configuration: job \"sync\": at_most: invalid duration \"10 \
                 minutes\"",
            ),
            (
                r#"{"name":"sync","every":"soon"}"#,
                "invalid lock configuration: job \"sync\": every: invalid duration \"soon\"",
            ),
            (
                r#"{"name":"sync","every":"0s"}"#,
                "invalid schedule: job \"sync\": every: the period of a fixed rate is zero",
            ),
            (
                r#"{"name":"sync","cron":"0 0 3 * * *","zone":"Europe/Berlln"}"#,
                "invalid schedule: job \"sync\": cron: unknown time zone \"Europe/Berlln\"",
            ),
            (
                r#"{"name":"sync","every":"1m","zone":"Europe/Berlin"}"#,
                "invalid lock configuration: job \"sync\": zone is for a cron schedule",
            ),
            (
                r#"{"name":"sync","every":"1m","cron":"0 * * * * *"}"#,
                "invalid lock configuration: job \"sync\": both cron and every are set",
            ),
            (
                r#"{"name":"sync"}"#,
                "invalid lock configuration: job \"sync\": no schedule; set cron",
            ),
            (
                r#"{"name":"sync","every":"1m","at_most":"10s","at_least":"11s"}"#,
                "invalid lock configuration: job \"sync\": at_least (11s) is longer than \
                 at_most (10s)",
            ),
            (
                r#"{"name":"sync","every":"1m","at_most":"5m","at_least":"1m"}"#,
                "invalid lock configuration: job \"sync\": at_least (1m) is not shorter than \
                 its schedule's shortest gap (1m)",
            ),
            (
                r#"{"name":" sync","every":"1m"}"#,
                "invalid lock configuration: job \" sync\": the lock name \" sync\" has \
                 leading or trailing white space",
            ),
            (
                r#"{"name":"sync","every":"1m","on_held":"queue"}"#,
                "unknown variant `queue`, expected `skip` or `run_late`",
            ),
            (
                r#"{"name":"sync","every":"1m","at_mots":"1m"}"#,
                "unknown field `at_mots`",
            ),
        ];
        for (json, want) in cases {
            let err = parse(json).expect_err(json);
            assert!(err.starts_with(want), "{json}:\n{err}\nwant: {want}");
        }
    }

    #[test]
    fn the_scheduler_and_deserialising_check_alike() {
        let now = Utc::now();
        let mut spec = JobSpec::new("sync", Schedule::every(Duration::from_mins(1)).expect("ok"));
        let cfg = spec
            .lock_config(None, 64, now)
            .expect("no at_most is left to the caller");
        assert_eq!(cfg.at_most(), None);
        spec.at_most = Some(Duration::from_secs(10));
        spec.at_least = Some(Duration::from_secs(11));
        let err = spec
            .lock_config(None, 64, now)
            .expect_err("at_least too long");
        assert_eq!(
            err.to_string(),
            "invalid lock configuration: job \"sync\": at_least (11s) is longer than at_most \
             (10s); at_least must not exceed at_most"
        );
        spec.at_least = None;
        spec.name = "n".repeat(65);
        assert!(spec.lock_config(None, 64, now).is_err());
        assert!(spec.lock_config(None, 80, now).is_ok(), "the store's limit");
    }
}
