//! What a replica runs: [`JobSpec`], one periodic locked job, given on the command line as
//! `--job NAME[,every=DUR][,at_most=DUR][,at_least=DUR][,work=DUR[..DUR]][,keep_alive][,catch_up][,run_late][,leader_only][,fail]`.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use shedlock_core::{LockConfig, parse_duration};

use crate::database::BoxError;

/// One periodic job: a fixed-rate schedule of `every` (aligned to the Unix epoch, so all
/// replicas name the same fires); the replica that claims a fire "works" for a random time in
/// `work`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "one field per command-line flag of the --job spec, each independent"
)]
pub struct JobSpec {
    /// The job's short name; the lock is named `<prefix><name>`.
    pub name: String,
    /// The schedule period. Defaults to 1 s.
    pub every: Duration,
    /// The lock's `at_most`. Defaults to 10 s.
    pub at_most: Duration,
    /// The lock's `at_least`. Defaults to zero.
    pub at_least: Duration,
    /// How long a run works: uniformly random in this range. Defaults to 100 ms..500 ms.
    pub work: (Duration, Duration),
    /// Whether the lock is kept alive while the run works. Defaults to off.
    pub keep_alive: bool,
    /// Whether the job catches up on its latest fire at start ([`shedlock_core::Job::catch_up`]).
    /// Defaults to off.
    pub catch_up: bool,
    /// Whether a fire met while the lock is held runs late when the lock frees inside its
    /// window ([`shedlock_core::scheduler::OnHeld::RunLate`]). Defaults to off (skipped).
    pub run_late: bool,
    /// Whether the job runs only on the leader of the replicas' election
    /// ([`shedlock_core::Job::leader_only`]). Defaults to off.
    pub leader_only: bool,
    /// Whether each run fails once its work is done (its body returns an `Err`, which the
    /// store records as the job's last error). Defaults to off.
    pub fail: bool,
}

impl JobSpec {
    /// A job named `name` with the defaults above.
    #[must_use]
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            every: Duration::from_secs(1),
            at_most: Duration::from_secs(10),
            at_least: Duration::ZERO,
            work: (Duration::from_millis(100), Duration::from_millis(500)),
            keep_alive: false,
            catch_up: false,
            run_late: false,
            leader_only: false,
            fail: false,
        }
    }

    /// The lock configuration of this job, with its name prefixed.
    ///
    /// # Errors
    ///
    /// An invalid name or durations (see [`LockConfig`]).
    pub fn lock_config(&self, prefix: &str) -> Result<LockConfig, BoxError> {
        Ok(LockConfig::builder(format!("{prefix}{}", self.name))
            .at_most(self.at_most)
            .at_least(self.at_least)
            .keep_alive(self.keep_alive)
            .build()?)
    }

    /// A random work time in [`work`](Self::work).
    #[must_use]
    pub fn random_work(&self) -> Duration {
        let (low, high) = self.work;
        let Some(span) = high.checked_sub(low) else {
            return low;
        };
        let span = u64::try_from(span.as_micros()).unwrap_or(u64::MAX);
        low + Duration::from_micros(crate::random::random_below(span.saturating_add(1)))
    }
}

impl FromStr for JobSpec {
    type Err = BoxError;

    /// Parses `NAME[,every=DUR][,at_most=DUR][,at_least=DUR][,work=DUR[..DUR]][,keep_alive][,catch_up][,run_late][,leader_only][,fail]`;
    /// durations as in `#[scheduled_lock]` (`"500ms"`, `"2s"`, `"1m30s"`, `"PT1S"`).
    ///
    /// ```
    /// use std::time::Duration;
    /// use shedlock_demo::job::JobSpec;
    ///
    /// let job: JobSpec = "sync,every=500ms,at_most=2s,work=100ms..300ms,catch_up".parse()?;
    /// assert!(job.catch_up);
    /// assert_eq!(job.name, "sync");
    /// assert_eq!(job.every, Duration::from_millis(500));
    /// assert_eq!(job.work, (Duration::from_millis(100), Duration::from_millis(300)));
    /// assert_eq!(job.to_string().parse::<JobSpec>()?, job);
    /// # Ok::<(), shedlock_demo::database::BoxError>(())
    /// ```
    fn from_str(spec: &str) -> Result<Self, BoxError> {
        let mut parts = spec.split(',');
        let name = parts.next().unwrap_or_default().trim();
        if name.is_empty() || name.contains('=') {
            return Err(format!("job spec {spec:?} does not start with a job name").into());
        }
        let mut job = Self::new(name);
        let duration = |key: &str, value: &str| -> Result<Duration, BoxError> {
            parse_duration(value).map_err(|e| format!("job {name:?}: {key}={value:?}: {e}").into())
        };
        for part in parts {
            let (key, value) = part.split_once('=').unwrap_or((part, ""));
            match key.trim() {
                "every" => job.every = duration(key, value)?,
                "at_most" => job.at_most = duration(key, value)?,
                "at_least" => job.at_least = duration(key, value)?,
                "work" => {
                    job.work = if let Some((low, high)) = value.split_once("..") {
                        (duration(key, low)?, duration(key, high)?)
                    } else {
                        let d = duration(key, value)?;
                        (d, d)
                    };
                }
                "keep_alive" if value.is_empty() || value == "true" => job.keep_alive = true,
                "keep_alive" if value == "false" => job.keep_alive = false,
                "catch_up" if value.is_empty() || value == "true" => job.catch_up = true,
                "catch_up" if value == "false" => job.catch_up = false,
                "run_late" if value.is_empty() || value == "true" => job.run_late = true,
                "run_late" if value == "false" => job.run_late = false,
                "leader_only" if value.is_empty() || value == "true" => job.leader_only = true,
                "leader_only" if value == "false" => job.leader_only = false,
                "fail" if value.is_empty() || value == "true" => job.fail = true,
                "fail" if value == "false" => job.fail = false,
                other => {
                    return Err(format!(
                        "job {name:?}: unknown setting {other:?} (valid: every, at_most, at_least, \
                         work, keep_alive, catch_up, run_late, leader_only, fail)"
                    )
                    .into());
                }
            }
        }
        if job.every.is_zero() {
            return Err(format!("job {name:?}: every must be above zero").into());
        }
        if job.work.1 < job.work.0 {
            return Err(format!("job {name:?}: work range ends before it starts").into());
        }
        // Reject what the lock would reject, now rather than at the first tick.
        job.lock_config("")?;
        Ok(job)
    }
}

impl fmt::Display for JobSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = |d: Duration| format!("{}ms", d.as_millis());
        write!(
            f,
            "{},every={},at_most={},at_least={},work={}..{}",
            self.name,
            ms(self.every),
            ms(self.at_most),
            ms(self.at_least),
            ms(self.work.0),
            ms(self.work.1)
        )?;
        if self.keep_alive {
            f.write_str(",keep_alive")?;
        }
        if self.catch_up {
            f.write_str(",catch_up")?;
        }
        if self.run_late {
            f.write_str(",run_late")?;
        }
        if self.leader_only {
            f.write_str(",leader_only")?;
        }
        if self.fail {
            f.write_str(",fail")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_specs_are_errors() {
        for spec in [
            "",
            "every=1s",
            "a,every=0s",
            "a,every=soon",
            "a,colour=blue",
            "a,work=2s..1s",
            "a,at_most=1s,at_least=2s",
            "a,at_most=0s",
        ] {
            assert!(spec.parse::<JobSpec>().is_err(), "{spec:?} was accepted");
        }
    }

    #[test]
    fn flags_parse_and_print_back() {
        let job: JobSpec = "a,every=2s,catch_up,run_late,fail".parse().expect("valid");
        assert!(job.catch_up && job.run_late && job.fail && !job.keep_alive && !job.leader_only);
        assert_eq!(
            job.to_string().parse::<JobSpec>().expect("its own text"),
            job
        );
        let off: JobSpec = "a,run_late=false".parse().expect("valid");
        assert!(!off.run_late);
        assert!("a,run_late=maybe".parse::<JobSpec>().is_err());
    }

    #[test]
    fn random_work_stays_in_range() {
        let job: JobSpec = "a,work=10ms..20ms".parse().expect("valid");
        for _ in 0..1000 {
            let work = job.random_work();
            assert!(
                (Duration::from_millis(10)..=Duration::from_millis(20)).contains(&work),
                "{work:?}"
            );
        }
        let fixed: JobSpec = "a,work=7ms".parse().expect("valid");
        assert_eq!(fixed.random_work(), Duration::from_millis(7));
    }
}
