//! [`JobStateSuite`]: the contract of job state, definitions and history as executable checks.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::{Instant, sleep};

use crate::admin::{LockAdmin, LockEntry};
use crate::jobs::{Definition, JobState, MAX_ERROR_LEN, RunEntry, RunOutcome, RunReport};
use crate::owner::random_u64;
use crate::provider::{LockRecord, ReleaseRequest};

type CaseResult = std::result::Result<(), String>;

/// The job state suite: what [`release_run`](crate::provider::LockProvider::release_run),
/// [`publish_definitions`](crate::provider::LockProvider::publish_definitions) and the job side of
/// [`LockAdmin`] promise, checked against a store. Run it next to
/// [`ConformanceSuite`](super::ConformanceSuite) and [`AdminSuite`](super::AdminSuite) in the tests
/// of a store that records job state. It panics with the list of failed cases.
///
/// The cases:
///
/// - a recorded release frees the lock as a plain one does, honouring `at_least`;
/// - the row's state then shows the run exactly: fire, runner, start = `locked_at`, end, outcome
///   and error text, quotes, non-ASCII and a NUL (stored as U+FFFD) included;
/// - failures and panics count up, and a cancelled run changes no count;
/// - a success resets the count and sets the last success, which later failures leave alone;
/// - a release whose lock was taken over answers `false` and records nothing;
/// - a recorded release sent again for the same acquisition releases again and counts once;
/// - an error text cut to [`MAX_ERROR_LEN`] reads back whole;
/// - a batch of releases ([`release_runs`](crate::provider::LockProvider::release_runs)) answers
///   each release as `release_run` would, in order: one whose lock was acquired again since, by
///   the same owner, or whose input is invalid fails alone and records nothing;
/// - definitions are listed per job and replica in order, republished in place, forgotten per job,
///   and expire;
/// - with [`with_history`](Self::with_history), the history keeps exactly the newest runs, newest
///   first, after three times as many.
///
/// ```
/// use shedlock_core::{InMemoryLockProvider, jobs::HistoryPolicy};
/// use shedlock_core::testkit::JobStateSuite;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let store = InMemoryLockProvider::new().with_history(HistoryPolicy::keep(5));
/// JobStateSuite::new(store).with_history(5).run().await;
/// # }
/// ```
///
/// Its waits, for a lock's expiry or a definition's, are a few multiples of
/// [`time_unit`](Self::time_unit) (default 1 s). They are polled with a deadline. Names carry a
/// random prefix, so runs can share a table.
pub struct JobStateSuite {
    store: Arc<dyn LockAdmin>,
    prefix: String,
    history: Option<u32>,
    unit: Duration,
}

impl JobStateSuite {
    /// A suite for `store`. An `Arc` of a store works too.
    pub fn new(store: impl LockAdmin) -> Self {
        Self {
            store: Arc::new(store),
            prefix: format!("js{:08x}", random_u64() & 0xffff_ffff),
            history: None,
            unit: Duration::from_secs(1),
        }
    }

    /// The store was built to keep `keep` runs of history per lock. Check that it does.
    #[must_use]
    pub fn with_history(mut self, keep: u32) -> Self {
        self.history = Some(keep);
        self
    }

    /// The suite's unit of waiting. Locks and definitions it lets expire last one unit. Use the
    /// store's resolution or more. For example, etcd leases are whole seconds.
    #[must_use]
    pub fn time_unit(mut self, unit: Duration) -> Self {
        self.unit = unit;
        self
    }

    /// Runs every case and panics, naming each failed case and why, if any failed.
    ///
    /// # Panics
    ///
    /// When the store breaks the contract.
    pub async fn run(self) {
        let report = self.report().await;
        assert!(report.is_empty(), "job state conformance failed:\n{report}");
    }

    /// Runs every case and returns the failures as text. The text is empty when all passed.
    pub async fn report(&self) -> String {
        let mut failures = String::new();
        macro_rules! case {
            ($name:ident) => {
                if let Err(why) = self.$name().await {
                    let _ = writeln!(failures, "- {}: {why}", stringify!($name));
                }
            };
        }
        case!(a_recorded_release_frees_and_records_the_run);
        case!(outcomes_count_as_documented);
        case!(a_recorded_release_honours_at_least);
        case!(a_lost_lock_records_nothing);
        case!(a_release_sent_again_counts_once);
        case!(a_capped_error_reads_back_whole);
        case!(a_batch_of_releases_answers_each_alone);
        case!(definitions_are_listed_replaced_and_forgotten);
        case!(definitions_expire);
        if self.history.is_some() {
            case!(history_keeps_the_newest_runs);
        }
        failures
    }

    fn name(&self, case: &str) -> String {
        format!("{}-{case}", self.prefix)
    }

    async fn acquire(
        &self,
        name: &str,
        owner: &str,
        at_most: Duration,
    ) -> Result<LockRecord, String> {
        self.store
            .acquire(name, at_most, owner)
            .await
            .map_err(|e| format!("acquire({name:?}, {owner:?}) failed: {e}"))?
            .ok_or_else(|| format!("acquire({name:?}, {owner:?}) was refused on a free lock"))
    }

    /// Acquires `name` for a minute and releases it with `outcome` for `fire`.
    async fn run_once(
        &self,
        name: &str,
        owner: &str,
        fire: DateTime<Utc>,
        outcome: RunOutcome,
    ) -> Result<(LockRecord, RunEntry), String> {
        let record = self.acquire(name, owner, Duration::from_mins(1)).await?;
        let report = RunReport::new(fire, outcome);
        match self
            .store
            .release_run(&record, Duration::ZERO, &report)
            .await
        {
            Ok(true) => {}
            Ok(false) => return Err(format!("release_run({record}) returned false")),
            Err(e) => return Err(format!("release_run({record}) failed: {e}")),
        }
        let state = self.state(name).await?;
        let last = state
            .last_run
            .ok_or_else(|| format!("after release_run({record}) the row shows no last run"))?;
        Ok((record, last))
    }

    async fn entry(&self, name: &str) -> Result<LockEntry, String> {
        self.store
            .entry(name)
            .await
            .map_err(|e| format!("entry({name:?}) failed: {e}"))?
            .ok_or_else(|| format!("entry({name:?}) found no row"))
    }

    async fn state(&self, name: &str) -> Result<JobState, String> {
        self.entry(name)
            .await?
            .state()
            .cloned()
            .ok_or_else(|| format!("entry({name:?}) has no job state (LockEntry::state is None)"))
    }

    fn fire(seconds_ago: i64) -> DateTime<Utc> {
        // Whole seconds: every store keeps them exactly.
        let now = Utc::now().timestamp();
        DateTime::from_timestamp(now - seconds_ago, 0).unwrap_or_default()
    }

    async fn a_recorded_release_frees_and_records_the_run(&self) -> CaseResult {
        let name = self.name("record");
        let fire = Self::fire(5);
        let error = "it's \"broken\": ünïcödé {x} \\ 100% \0 nul";
        let (record, last) = self
            .run_once(&name, "owner-a", fire, RunOutcome::Failed(error.into()))
            .await?;
        let expected = RunEntry::new(
            &name,
            fire,
            "owner-a",
            record.locked_at(),
            last.ended,
            RunOutcome::Failed(error.into()),
        );
        if last != expected {
            return Err(format!(
                "the last run reads {last:?}, expected {expected:?}"
            ));
        }
        if last.ended < last.started {
            return Err(format!(
                "the run ended ({}) before it started ({})",
                last.ended, last.started
            ));
        }
        // Freed as a plain release frees (at_least zero).
        let next = self
            .acquire(&name, "owner-b", Duration::from_mins(1))
            .await?;
        let _ = self.store.release(&next, Duration::ZERO).await;
        // The state survives the next acquisition and its plain release.
        let state = self.state(&name).await?;
        if state.last_run.as_ref() != Some(&expected) || state.consecutive_failures != 1 {
            return Err(format!(
                "a later plain acquisition changed the state: {state:?}"
            ));
        }
        Ok(())
    }

    async fn outcomes_count_as_documented(&self) -> CaseResult {
        let name = self.name("count");
        let failures = |state: &JobState| state.consecutive_failures;
        self.run_once(&name, "o", Self::fire(50), RunOutcome::Failed("one".into()))
            .await?;
        let (_, last) = self
            .run_once(&name, "o", Self::fire(40), RunOutcome::Panicked)
            .await?;
        let state = self.state(&name).await?;
        if failures(&state) != 2
            || state.last_success.is_some()
            || last.outcome != RunOutcome::Panicked
        {
            return Err(format!("after a failure and a panic: {state:?}"));
        }
        self.run_once(&name, "o", Self::fire(30), RunOutcome::Cancelled)
            .await?;
        let state = self.state(&name).await?;
        if failures(&state) != 2 || state.last_run.map(|r| r.outcome) != Some(RunOutcome::Cancelled)
        {
            return Err(format!(
                "a cancelled run changed the count: {:?}",
                self.state(&name).await?
            ));
        }
        let (_, ok) = self
            .run_once(&name, "o", Self::fire(20), RunOutcome::Succeeded)
            .await?;
        let state = self.state(&name).await?;
        if failures(&state) != 0 || state.last_success != Some(ok.ended) {
            return Err(format!(
                "after a success: {state:?} (the run ended {})",
                ok.ended
            ));
        }
        self.run_once(&name, "o", Self::fire(10), RunOutcome::Failed("two".into()))
            .await?;
        let state = self.state(&name).await?;
        if failures(&state) != 1 || state.last_success != Some(ok.ended) {
            return Err(format!(
                "a failure after the success: {state:?} (last success must stay {})",
                ok.ended
            ));
        }
        Ok(())
    }

    async fn a_recorded_release_honours_at_least(&self) -> CaseResult {
        let name = self.name("least");
        let record = self
            .acquire(&name, "owner-a", Duration::from_mins(2))
            .await?;
        let report = RunReport::new(Self::fire(1), RunOutcome::Succeeded);
        match self
            .store
            .release_run(&record, Duration::from_mins(1), &report)
            .await
        {
            Ok(true) => {}
            other => return Err(format!("release_run with at_least 1m answered {other:?}")),
        }
        match self
            .store
            .acquire(&name, Duration::from_mins(1), "owner-b")
            .await
        {
            Ok(None) => {}
            other => {
                return Err(format!(
                    "the lock was not kept to at_least: acquire answered {other:?}"
                ));
            }
        }
        let state = self.state(&name).await?;
        if state.last_run.map(|r| r.outcome) != Some(RunOutcome::Succeeded) {
            return Err(format!(
                "the run was not recorded: {:?}",
                self.state(&name).await?
            ));
        }
        Ok(())
    }

    async fn a_lost_lock_records_nothing(&self) -> CaseResult {
        let name = self.name("lost");
        let first = self.acquire(&name, "owner-a", self.unit).await?;
        // Wait until the lock expired and another owner took it.
        let deadline = Instant::now() + self.unit * 20;
        let second = loop {
            match self
                .store
                .acquire(&name, Duration::from_mins(1), "owner-b")
                .await
            {
                Ok(Some(record)) => break record,
                Ok(None) if Instant::now() < deadline => sleep(self.unit / 10).await,
                Ok(None) => return Err("the first acquisition never expired".into()),
                Err(e) => return Err(format!("acquire by owner-b failed: {e}")),
            }
        };
        let report = RunReport::new(Self::fire(3), RunOutcome::Failed("late".into()));
        match self
            .store
            .release_run(&first, Duration::ZERO, &report)
            .await
        {
            Ok(false) => {}
            other => {
                return Err(format!(
                    "the late release_run answered {other:?}, expected Ok(false)"
                ));
            }
        }
        let state = self.state(&name).await?;
        if state != JobState::default() {
            return Err(format!("the late release_run recorded {state:?}"));
        }
        let entry = self.entry(&name).await?;
        if entry.record().owner() != "owner-b" || !entry.is_held() {
            return Err(format!(
                "the late release_run touched the new holder's lock: {entry}"
            ));
        }
        let _ = self.store.release(&second, Duration::ZERO).await;
        Ok(())
    }

    /// A recorded release sent again for the same acquisition (after a lost reply) releases again
    /// and counts the run once.
    async fn a_release_sent_again_counts_once(&self) -> CaseResult {
        let name = self.name("again");
        let record = self
            .acquire(&name, "owner-a", Duration::from_mins(1))
            .await?;
        let report = RunReport::new(Self::fire(4), RunOutcome::Failed("once".into()));
        for attempt in ["first", "second"] {
            match self
                .store
                .release_run(&record, Duration::ZERO, &report)
                .await
            {
                Ok(true) => {}
                other => {
                    return Err(format!("the {attempt} release_run answered {other:?}"));
                }
            }
        }
        let state = self.state(&name).await?;
        if state.consecutive_failures != 1 {
            return Err(format!(
                "one run released twice counted {} failures",
                state.consecutive_failures
            ));
        }
        Ok(())
    }

    async fn a_capped_error_reads_back_whole(&self) -> CaseResult {
        let name = self.name("capped");
        let outcome = RunOutcome::Failed("é\"'".repeat(MAX_ERROR_LEN)).capped();
        let (_, last) = self
            .run_once(&name, "o", Self::fire(2), outcome.clone())
            .await?;
        if last.outcome != outcome {
            let got = last.outcome.error().map_or(0, |e| e.chars().count());
            return Err(format!(
                "a {MAX_ERROR_LEN}-character error read back as {got} characters"
            ));
        }
        Ok(())
    }

    /// A batch of four releases: a success, a lock since released and acquired again by the same
    /// owner, an invalid `at_least` and a failure. Each is answered on its own, in order, and only the two of their
    /// own locks record.
    async fn a_batch_of_releases_answers_each_alone(&self) -> CaseResult {
        let names: Vec<String> = (0..4).map(|i| self.name(&format!("batch{i}"))).collect();
        let mut records = Vec::new();
        for name in &names {
            records.push(
                self.acquire(name, "owner-a", Duration::from_mins(1))
                    .await?,
            );
        }
        // The second lock is released and acquired again by the same owner, as a replica's next
        // fire may be: the record of the first acquisition is stale.
        let stale = &records[1];
        match self.store.release(stale, Duration::ZERO).await {
            Ok(true) => {}
            other => return Err(format!("release({stale}) answered {other:?}")),
        }
        let taken = self
            .acquire(stale.name(), "owner-a", Duration::from_mins(1))
            .await?;
        let fire = Self::fire(6);
        let runs = [
            RunReport::new(fire, RunOutcome::Succeeded),
            RunReport::new(fire, RunOutcome::Succeeded),
            RunReport::new(fire, RunOutcome::Succeeded),
            RunReport::new(fire, RunOutcome::Failed("batch".into())),
        ];
        let requests = [
            ReleaseRequest::new(&records[0], Duration::ZERO, &runs[0]),
            ReleaseRequest::new(stale, Duration::ZERO, &runs[1]),
            ReleaseRequest::new(&records[2], Duration::MAX, &runs[2]),
            ReleaseRequest::new(&records[3], Duration::ZERO, &runs[3]),
        ];
        let answers = self
            .store
            .release_runs(&requests)
            .await
            .map_err(|e| format!("release_runs failed whole: {e}"))?;
        let shape: Vec<String> = answers
            .iter()
            .map(|a| match a {
                Ok(done) => done.to_string(),
                Err(e) if e.is_invalid_config() => "invalid".into(),
                Err(e) => format!("error: {e}"),
            })
            .collect();
        if shape != ["true", "false", "invalid", "true"] {
            return Err(format!(
                "release_runs answered {shape:?}, expected [true, false, invalid, true]"
            ));
        }
        for (i, recorded) in [(0, true), (1, false), (2, false), (3, true)] {
            let name = &names[i];
            let entry = self.entry(name).await?;
            let last_run = entry.state().and_then(|job| job.last_run.clone());
            let current = entry.record();
            let retaken = i == 1
                && (current.fencing_token() != taken.fencing_token()
                    || current.locked_at() != taken.locked_at());
            if last_run.is_some() != recorded || entry.is_held() == recorded || retaken {
                return Err(format!(
                    "after the batch, release {i} ({}) shows {entry} with last run {:?}",
                    if recorded { "released" } else { "refused" },
                    last_run
                ));
            }
        }
        let failures = self.state(&names[3]).await?.consecutive_failures;
        if failures != 1 {
            return Err(format!(
                "the batch's failed run counted {failures} failures, expected 1"
            ));
        }
        for record in [&taken, &records[2]] {
            let _ = self.store.release(record, Duration::ZERO).await;
        }
        Ok(())
    }

    async fn definitions(&self) -> Result<Vec<(String, String, String, String)>, String> {
        let entries = self
            .store
            .definitions()
            .await
            .map_err(|e| format!("definitions() failed: {e}"))?;
        for entry in &entries {
            if entry.expires <= entry.published {
                return Err(format!(
                    "an entry expires before it was published: {entry:?}"
                ));
            }
        }
        Ok(entries
            .into_iter()
            .filter(|e| e.definition.job.starts_with(&self.prefix))
            .map(|e| {
                (
                    e.definition.job,
                    e.replica,
                    e.definition.spec,
                    e.definition.lock_name,
                )
            })
            .collect())
    }

    async fn publish(&self, replica: &str, defs: &[Definition], ttl: Duration) -> CaseResult {
        self.store
            .publish_definitions(replica, crate::jobs::VERSION, defs, ttl)
            .await
            .map_err(|e| format!("publish_definitions({replica:?}) failed: {e}"))
    }

    async fn definitions_are_listed_replaced_and_forgotten(&self) -> CaseResult {
        let job_a = self.name("it's \"a\" job ü");
        let job_b = self.name("b");
        let def = |job: &str, spec: &str| Definition::new(job, format!("{job}-lock"), spec);
        let hour = Duration::from_hours(1);
        self.publish("replica-2", &[def(&job_a, r#"{"every":"2m"}"#)], hour)
            .await?;
        self.publish(
            "replica-1",
            &[def(&job_b, "{}"), def(&job_a, r#"{"every":"1m"}"#)],
            hour,
        )
        .await?;
        let row = |job: &str, replica: &str, spec: &str| {
            (
                job.to_owned(),
                replica.to_owned(),
                spec.to_owned(),
                format!("{job}-lock"),
            )
        };
        let first = vec![
            row(&job_b, "replica-1", "{}"),
            row(&job_a, "replica-1", r#"{"every":"1m"}"#),
            row(&job_a, "replica-2", r#"{"every":"2m"}"#),
        ];
        self.expect_definitions(first, "after publishing").await?;
        // Published again: replaced in place.
        self.publish("replica-2", &[def(&job_a, r#"{"every":"1m"}"#)], hour)
            .await?;
        let second = vec![
            row(&job_b, "replica-1", "{}"),
            row(&job_a, "replica-1", r#"{"every":"1m"}"#),
            row(&job_a, "replica-2", r#"{"every":"1m"}"#),
        ];
        self.expect_definitions(second, "after publishing again")
            .await?;
        let removed = self
            .store
            .forget(&job_a)
            .await
            .map_err(|e| format!("forget({job_a:?}) failed: {e}"))?;
        if removed != 2 {
            return Err(format!(
                "forget({job_a:?}) removed {removed} entries, expected 2"
            ));
        }
        self.expect_definitions(vec![row(&job_b, "replica-1", "{}")], "after forget")
            .await?;
        let _ = self.store.forget(&job_b).await;
        Ok(())
    }

    /// The definitions of this suite's jobs are `expected`, in (job, replica) order.
    async fn expect_definitions(
        &self,
        mut expected: Vec<(String, String, String, String)>,
        when: &str,
    ) -> CaseResult {
        expected.sort();
        let listed = self.definitions().await?;
        if listed == expected {
            Ok(())
        } else {
            Err(format!(
                "{when}: definitions listed {listed:?}, expected {expected:?} in that order"
            ))
        }
    }

    async fn definitions_expire(&self) -> CaseResult {
        let job = self.name("expiring");
        self.publish("replica-1", &[Definition::new(&job, &job, "{}")], self.unit)
            .await?;
        if !self.definitions().await?.iter().any(|d| d.0 == job) {
            return Err(format!(
                "a definition published for {:?} was not listed right after",
                self.unit
            ));
        }
        let deadline = Instant::now() + self.unit * 20;
        loop {
            if !self.definitions().await?.iter().any(|d| d.0 == job) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "a definition published for {:?} was still listed {:?} later",
                    self.unit,
                    self.unit * 20
                ));
            }
            sleep(self.unit / 10).await;
        }
    }

    async fn history_keeps_the_newest_runs(&self) -> CaseResult {
        let keep = self.history.unwrap_or(1);
        let name = self.name("history");
        let runs = i64::from(keep) * 3;
        let base = Self::fire(10_000);
        let fire_of = |i: i64| base + chrono::Duration::seconds(i);
        for i in 0..runs {
            let outcome = if i % 2 == 0 {
                RunOutcome::Succeeded
            } else {
                RunOutcome::Failed(format!("run {i}"))
            };
            self.run_once(&name, "o", fire_of(i), outcome).await?;
        }
        let history = self
            .store
            .history(&name, usize::try_from(runs).unwrap_or(usize::MAX))
            .await
            .map_err(|e| format!("history({name:?}) failed: {e}"))?;
        let fires: Vec<DateTime<Utc>> = history.iter().map(|r| r.fire).collect();
        let expected: Vec<DateTime<Utc>> = (0..i64::from(keep))
            .map(|k| fire_of(runs - 1 - k))
            .collect();
        if fires != expected {
            return Err(format!(
                "after {runs} runs with a bound of {keep}, history holds {} runs with fires {fires:?}, \
                 expected the newest {keep}, newest first: {expected:?}",
                fires.len()
            ));
        }
        let newest = &history[0];
        let expected_outcome = if (runs - 1) % 2 == 0 {
            RunOutcome::Succeeded
        } else {
            RunOutcome::Failed(format!("run {}", runs - 1))
        };
        if newest.outcome != expected_outcome || newest.lock_name != name || newest.runner != "o" {
            return Err(format!("the newest entry reads {newest:?}"));
        }
        let limited = self
            .store
            .history(&name, 2)
            .await
            .map_err(|e| format!("history({name:?}, 2) failed: {e}"))?;
        if limited.len() != 2.min(history.len()) || limited[..] != history[..limited.len()] {
            return Err(format!("history with a limit of 2 read {limited:?}"));
        }
        Ok(())
    }
}
