//! The pause suite against the in-memory store, and against a store whose pauses do nothing.

use std::time::Duration;

use async_trait::async_trait;
use shedlock_core::testkit::PauseSuite;
use shedlock_core::{
    InMemoryLockProvider, Result,
    admin::{LockAdmin, LockEntry},
    pause::{Pause, PauseFor},
    provider::{Fire, FireClaim, LockProvider, LockRecord},
};

#[tokio::test(start_paused = true)]
async fn in_memory_store_passes_the_pause_suite() {
    PauseSuite::new(InMemoryLockProvider::new()).run().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_memory_store_passes_the_pause_suite_in_real_time() {
    PauseSuite::new(InMemoryLockProvider::new())
        .time_unit(Duration::from_millis(200))
        .run()
        .await;
}

/// A store that answers a pause but keeps none: the suite must say so.
struct Forgetful(InMemoryLockProvider);

#[async_trait]
impl LockProvider for Forgetful {
    async fn acquire(
        &self,
        name: &str,
        at_most: Duration,
        owner: &str,
    ) -> Result<Option<LockRecord>> {
        self.0.acquire(name, at_most, owner).await
    }
    async fn extend(&self, record: &LockRecord, at_most: Duration) -> Result<Option<LockRecord>> {
        self.0.extend(record, at_most).await
    }
    async fn release(&self, record: &LockRecord, at_least: Duration) -> Result<bool> {
        self.0.release(record, at_least).await
    }
    async fn claim_fire(
        &self,
        name: &str,
        fire: &Fire,
        at_most: Duration,
        owner: &str,
    ) -> Result<FireClaim> {
        self.0.claim_fire(name, fire, at_most, owner).await
    }
}

#[async_trait]
impl LockAdmin for Forgetful {
    async fn entry(&self, name: &str) -> Result<Option<LockEntry>> {
        self.0.entry(name).await
    }
    async fn unlock(&self, expected: &LockRecord, actor: &str) -> Result<bool> {
        self.0.unlock(expected, actor).await
    }
    async fn pause(
        &self,
        name: &str,
        how_long: PauseFor,
        reason: Option<&str>,
        actor: &str,
    ) -> Result<Pause> {
        let pause = self.0.pause(name, how_long, reason, actor).await?;
        self.0.resume(name, actor).await?;
        Ok(pause)
    }
    async fn resume(&self, name: &str, actor: &str) -> Result<Option<Pause>> {
        self.0.resume(name, actor).await
    }
}

#[tokio::test(start_paused = true)]
async fn a_store_that_keeps_no_pause_fails_the_suite() {
    let report = PauseSuite::new(Forgetful(InMemoryLockProvider::new()))
        .report()
        .await;
    for case in [
        "a_paused_fire_is_refused_and_writes_nothing",
        "paused_comes_after_the_window_and_before_the_recorded_fire",
        "a_pause_for_a_length_ends_by_itself",
        "a_new_pause_replaces_the_last",
    ] {
        assert!(report.contains(case), "{case} not reported:\n{report}");
    }
    assert!(
        !report.contains("an_unlock_records_its_actor"),
        "unlock is not broken:\n{report}"
    );
}
