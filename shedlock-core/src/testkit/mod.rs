//! Tools for testing lock stores, feature `testkit`: the provider [`ConformanceSuite`], the
//! [`AdminSuite`] for [`LockAdmin`](crate::admin::LockAdmin), the [`JobStateSuite`] for the job
//! state a store records, and [`FaultyProvider`], a wrapper that fails or hangs on demand.
//!
//! # Checking a store
//!
//! Every store, built-in or your own, should pass the conformance suite. Call it from a test with a
//! fresh provider. It panics with the list of failed cases.
//!
//! ```
//! use shedlock_core::InMemoryLockProvider;
//! use shedlock_core::testkit::ConformanceSuite;
//!
//! #[tokio::test(start_paused = true)]
//! async fn in_memory_store_conforms() {
//!     ConformanceSuite::new(InMemoryLockProvider::new()).run().await;
//! }
//! # // Run it here too, so the example is checked:
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() { ConformanceSuite::new(InMemoryLockProvider::new()).run().await; }
//! ```
//!
//! The suite works on real databases, where time is not paused. Its waits are a few multiples of
//! [`ConformanceSuite::time_unit`] (default 300 ms), so a run takes a few seconds. Lock names carry
//! a random prefix, so runs can share a table.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::{Instant, sleep};

use crate::error::Result;
#[cfg(doc)]
use crate::fire::FireClaim;
use crate::owner::random_u64;

mod admin;

use crate::provider::{LockProvider, LockRecord};
pub use admin::AdminSuite;

mod faulty;

pub use faulty::{Fault, FaultyProvider, Operation};

mod cases;
mod fire;
mod jobs;
mod pause;

pub use jobs::JobStateSuite;
pub use pause::PauseSuite;

type CaseResult = std::result::Result<(), String>;

/// Names the step of a case that failed, so a report says which call went wrong. A case makes
/// several calls of the same kind. Example: `second release of the same acquisition: release(…)
/// returned …`.
trait Step<T> {
    fn step(self, step: &str) -> Result<T, String>;
}

impl<T> Step<T> for Result<T, String> {
    fn step(self, step: &str) -> Result<T, String> {
        self.map_err(|e| format!("{step}: {e}"))
    }
}

/// The provider conformance suite: the contract of [`LockProvider`] as executable checks.
///
/// The lock cases:
///
/// - the lock is created, and names are independent;
/// - a second acquire is refused, for another owner and for the same owner;
/// - a relock right after release works (10 rounds);
/// - the lock expires after `at_most`;
/// - `at_least` holds after an early release and ends on time;
/// - a late release frees at once;
/// - a release after expiry, with nobody else holding the lock, still acts: it returns `true` and
///   applies `at_least`;
/// - extend works once and repeatedly, and is refused after release and after expiry;
/// - a late release or extend after expiry does not touch the new holder's lock;
/// - fencing tokens strictly increase across holders;
/// - of two owners racing, exactly one wins each round;
/// - a concurrent fuzz ends with exact counts: 8 tasks, 2 names, 100 runs each, with a
///   read–yield–write counter inside the lock;
/// - names over [`max_name_len`](LockProvider::max_name_len), a zero or oversized `at_most` and an
///   oversized `at_least` are rejected before the store is asked;
/// - `holder` reports the holder, if supported.
///
/// The fire-claim cases ([`LockProvider::claim_fire`]):
///
/// - each [`FireClaim`] case, and that none but `Claimed` writes;
/// - one winner among concurrent claimers;
/// - the recorded fire survives release and expiry, and is untouched by acquire, extend and
///   release;
/// - a later fire is claimable, and over-long names are rejected.
///
/// A store without fire claims has these cases *skipped*, see [`run`](Self::run) and
/// [`SuiteReport`]. [`require_fire_claims`](Self::require_fire_claims) makes them fail instead.
pub struct ConformanceSuite {
    provider: Arc<dyn LockProvider>,
    prefix: String,
    unit: Duration,
    fuzz_runs: usize,
    require_fire_claims: bool,
}

/// What a [`ConformanceSuite`] run found: failed and skipped cases, each with why. Its `Display`
/// lists both, for a test's output.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SuiteReport {
    passed: usize,
    failed: Vec<(&'static str, String)>,
    skipped: Vec<(&'static str, String)>,
}

impl SuiteReport {
    /// How many cases passed.
    #[must_use]
    pub fn passed(&self) -> usize {
        self.passed
    }

    /// The failed cases and why.
    #[must_use]
    pub fn failed(&self) -> &[(&'static str, String)] {
        &self.failed
    }

    /// The cases skipped because the store lacks an optional operation, and why.
    #[must_use]
    pub fn skipped(&self) -> &[(&'static str, String)] {
        &self.skipped
    }

    fn record(&mut self, case: &'static str, result: CaseResult) {
        match result {
            Ok(()) => self.passed += 1,
            Err(why) => self.fail(case, why),
        }
    }

    fn fail(&mut self, case: &'static str, why: String) {
        self.failed.push((case, why));
    }

    fn skip(&mut self, case: &'static str, why: &str) {
        self.skipped.push((case, why.to_owned()));
    }
}

impl std::fmt::Display for SuiteReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} passed, {} failed, {} skipped",
            self.passed,
            self.failed.len(),
            self.skipped.len()
        )?;
        for (case, why) in &self.failed {
            write!(f, "\n- failed {case}: {why}")?;
        }
        for (case, why) in &self.skipped {
            write!(f, "\n- skipped {case}: {why}")?;
        }
        Ok(())
    }
}

impl ConformanceSuite {
    /// A suite for `provider`. An `Arc<dyn LockProvider>` works too.
    pub fn new(provider: impl LockProvider) -> Self {
        Self {
            provider: Arc::new(provider),
            prefix: format!("ct{:08x}", random_u64() & 0xffff_ffff),
            unit: Duration::from_millis(300),
            fuzz_runs: 100,
            require_fire_claims: false,
        }
    }

    /// Fail, rather than skip, the fire-claim cases when the store does not support
    /// [`claim_fire`](LockProvider::claim_fire). Set it for every store that should have them.
    #[must_use]
    pub fn require_fire_claims(mut self, required: bool) -> Self {
        self.require_fire_claims = required;
        self
    }

    /// The base duration of the suite's locks and waits. Defaults to 300 ms. Raise it for a store
    /// whose clock has coarse resolution. It must be at least ten of its ticks.
    #[must_use]
    pub fn time_unit(mut self, unit: Duration) -> Self {
        self.unit = unit;
        self
    }

    /// Runs per task in the concurrent fuzz case. Defaults to 100.
    #[must_use]
    pub fn fuzz_runs(mut self, runs: usize) -> Self {
        self.fuzz_runs = runs;
        self
    }

    /// Runs every case and panics, naming each failed case and why, if any failed. Skipped cases,
    /// for an optional operation the store lacks, are printed to stderr and returned.
    ///
    /// # Panics
    ///
    /// When the provider breaks the contract.
    pub async fn run(self) -> SuiteReport {
        let report = self.outcome().await;
        assert!(
            report.failed().is_empty(),
            "lock provider conformance failed: {report}"
        );
        if !report.skipped().is_empty() {
            // A notice for the test's output (shown with --nocapture or on failure), like the
            // skip notice of a database test; and a warning for whoever collects logs.
            tracing::warn!(
                skipped = report.skipped().len(),
                "conformance cases skipped"
            );
            #[allow(clippy::print_stderr)]
            {
                eprintln!("lock provider conformance: {report}");
            }
        }
        report
    }

    /// Runs every case and returns the failures as text. The text is empty when all passed.
    pub async fn report(&self) -> String {
        let mut failures = String::new();
        for (case, why) in self.outcome().await.failed() {
            let _ = writeln!(failures, "- {case}: {why}");
        }
        failures
    }

    /// Runs every case and returns what passed, failed and was skipped.
    pub async fn outcome(&self) -> SuiteReport {
        let mut report = SuiteReport::default();
        self.lock_cases(&mut report).await;
        self.fire_cases(&mut report).await;
        report
    }

    fn name(&self, case: &str) -> String {
        format!("{}-{case}", self.prefix)
    }

    async fn acquire(
        &self,
        name: &str,
        at_most: Duration,
        owner: &str,
    ) -> Result<Option<LockRecord>, String> {
        self.provider
            .acquire(name, at_most, owner)
            .await
            .map_err(|e| format!("acquire({name:?}, {owner:?}) failed: {e}"))
    }

    async fn must_acquire(
        &self,
        name: &str,
        at_most: Duration,
        owner: &str,
    ) -> Result<LockRecord, String> {
        self.acquire(name, at_most, owner)
            .await?
            .ok_or_else(|| format!("acquire({name:?}, {owner:?}) was refused on a free lock"))
    }

    async fn must_refuse(&self, name: &str, owner: &str, why: &str) -> CaseResult {
        match self.acquire(name, self.unit * 10, owner).await? {
            None => Ok(()),
            Some(r) => Err(format!("acquire by {owner:?} succeeded ({r}) {why}")),
        }
    }

    /// Like [`must_refuse`](Self::must_refuse) for a lock that holds only until `since + limit`. If
    /// the machine stalled past that, a success proves nothing and is given back.
    async fn must_refuse_before(
        &self,
        name: &str,
        owner: &str,
        why: &str,
        since: Instant,
        limit: Duration,
    ) -> CaseResult {
        match self.acquire(name, self.unit * 10, owner).await? {
            None => Ok(()),
            Some(record) if since.elapsed() >= limit => {
                self.release(&record, Duration::ZERO).await.map(drop)
            }
            Some(r) => Err(format!("acquire by {owner:?} succeeded ({r}) {why}")),
        }
    }

    async fn release(&self, record: &LockRecord, at_least: Duration) -> Result<bool, String> {
        self.provider
            .release(record, at_least)
            .await
            .map_err(|e| format!("release({record}) failed: {e}"))
    }

    async fn extend(
        &self,
        record: &LockRecord,
        at_most: Duration,
    ) -> Result<Option<LockRecord>, String> {
        self.provider
            .extend(record, at_most)
            .await
            .map_err(|e| format!("extend({record}) failed: {e}"))
    }

    /// Polls acquire by `owner` until it succeeds or `limit` passes.
    async fn acquire_within(
        &self,
        name: &str,
        owner: &str,
        limit: Duration,
    ) -> Result<(LockRecord, Duration), String> {
        let start = Instant::now();
        loop {
            if let Some(record) = self.acquire(name, self.unit * 10, owner).await? {
                return Ok((record, start.elapsed()));
            }
            if start.elapsed() > limit {
                return Err(format!("{name:?} was still held after {limit:?}"));
            }
            sleep(self.unit / 20).await;
        }
    }

    /// Waits until `record`'s lock has expired by the store's clock, without taking it.
    async fn wait_expired(&self, record: &LockRecord) -> CaseResult {
        let limit = Instant::now() + self.unit * 20;
        loop {
            match self.provider.holder(record.name()).await {
                Ok(None) => return Ok(()),
                Ok(Some(_)) => {}
                Err(e) if e.is_unsupported() => {
                    // No read-only query: wait the lock's length plus a margin.
                    let length = (record.lock_until() - record.locked_at())
                        .to_std()
                        .unwrap_or_default();
                    sleep(length + self.unit).await;
                    return Ok(());
                }
                Err(e) => return Err(format!("holder({:?}) failed: {e}", record.name())),
            }
            if Instant::now() > limit {
                return Err(format!("{record} did not expire"));
            }
            sleep(self.unit / 20).await;
        }
    }
}
