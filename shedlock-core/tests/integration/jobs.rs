//! The job state suite against the in-memory store, and against stores that break its contract.

use std::time::Duration;

use async_trait::async_trait;
use shedlock_core::testkit::JobStateSuite;
use shedlock_core::{
    InMemoryLockProvider, Result,
    admin::{LockAdmin, LockEntry},
    jobs::{Definition, DefinitionEntry, HistoryPolicy, RunEntry, RunOutcome, RunReport},
    provider::{LockProvider, LockRecord},
};

#[tokio::test(start_paused = true)]
async fn in_memory_store_passes_the_job_state_suite() {
    let store = InMemoryLockProvider::new().with_history(HistoryPolicy::keep(7));
    JobStateSuite::new(store).with_history(7).run().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_memory_store_passes_the_job_state_suite_in_real_time() {
    let store = InMemoryLockProvider::new().with_history(HistoryPolicy::default());
    JobStateSuite::new(store)
        .with_history(HistoryPolicy::DEFAULT_KEEP)
        .time_unit(Duration::from_millis(200))
        .run()
        .await;
}

#[tokio::test(start_paused = true)]
async fn history_prunes_by_age_as_it_writes() {
    let store = InMemoryLockProvider::new()
        .with_history(HistoryPolicy::keep(100).max_age(Duration::from_mins(1)));
    let at = chrono::Utc::now();
    for _ in 0..3 {
        let record = store
            .acquire("job", Duration::from_secs(10), "me")
            .await
            .expect("ok")
            .expect("free");
        let report = RunReport::new(at, RunOutcome::Succeeded);
        assert!(
            store
                .release_run(&record, Duration::ZERO, &report)
                .await
                .expect("ok")
        );
        tokio::time::advance(Duration::from_secs(40)).await;
    }
    // Runs ended at 0 s, 40 s and 80 s; the third write (at 80 s) removed the first.
    let history = store.history("job", 10).await.expect("ok");
    assert_eq!(history.len(), 2, "{history:#?}");
}

/// Stores that pass the lock contract but record job state wrongly.
mod broken_stores {
    use super::*;

    /// What each broken store gets wrong.
    #[derive(Clone, Copy, PartialEq)]
    enum Flaw {
        /// Records the run even when the lock was taken over.
        RecordsLostRuns,
        /// Counts a cancelled run as a failure.
        CancelledCounts,
        /// Keeps every run: no bound.
        Unbounded,
    }

    struct Broken {
        inner: InMemoryLockProvider,
        flaw: Flaw,
        extra: std::sync::Mutex<Vec<RunEntry>>,
    }

    impl Broken {
        fn new(flaw: Flaw) -> Self {
            Self {
                inner: InMemoryLockProvider::new().with_history(HistoryPolicy::keep(3)),
                flaw,
                extra: std::sync::Mutex::new(Vec::new()),
            }
        }
    }

    #[async_trait]
    impl LockProvider for Broken {
        async fn acquire(
            &self,
            name: &str,
            at_most: Duration,
            owner: &str,
        ) -> Result<Option<LockRecord>> {
            self.inner.acquire(name, at_most, owner).await
        }
        async fn extend(
            &self,
            record: &LockRecord,
            at_most: Duration,
        ) -> Result<Option<LockRecord>> {
            self.inner.extend(record, at_most).await
        }
        async fn release(&self, record: &LockRecord, at_least: Duration) -> Result<bool> {
            self.inner.release(record, at_least).await
        }
        async fn release_run(
            &self,
            record: &LockRecord,
            at_least: Duration,
            run: &RunReport,
        ) -> Result<bool> {
            let mut run = run.clone();
            if self.flaw == Flaw::CancelledCounts && run.outcome == RunOutcome::Cancelled {
                run = RunReport::new(run.fire, RunOutcome::Panicked);
            }
            let acted = self.inner.release_run(record, at_least, &run).await?;
            if self.flaw == Flaw::RecordsLostRuns && !acted {
                // Records it under the current holder's acquisition.
                if let Some(current) = self.inner.entry(record.name()).await? {
                    self.inner
                        .release_run(current.record(), at_least, &run)
                        .await?;
                }
            }
            if acted && self.flaw == Flaw::Unbounded {
                let entry = self.inner.history(record.name(), 1).await?;
                self.extra.lock().expect("not poisoned").extend(entry);
            }
            Ok(acted)
        }
        async fn publish_definitions(
            &self,
            replica: &str,
            version: &str,
            definitions: &[Definition],
            ttl: Duration,
        ) -> Result<()> {
            self.inner
                .publish_definitions(replica, version, definitions, ttl)
                .await
        }
    }

    #[async_trait]
    impl LockAdmin for Broken {
        async fn list(&self) -> Result<Vec<LockEntry>> {
            self.inner.list().await
        }
        async fn definitions(&self) -> Result<Vec<DefinitionEntry>> {
            self.inner.definitions().await
        }
        async fn forget(&self, job: &str) -> Result<u64> {
            self.inner.forget(job).await
        }
        async fn history(&self, lock_name: &str, limit: usize) -> Result<Vec<RunEntry>> {
            if self.flaw == Flaw::Unbounded {
                let mut all: Vec<RunEntry> = self.extra.lock().expect("not poisoned").clone();
                all.retain(|r| r.lock_name == lock_name);
                all.reverse();
                all.truncate(limit);
                return Ok(all);
            }
            self.inner.history(lock_name, limit).await
        }
    }

    async fn report(flaw: Flaw) -> String {
        JobStateSuite::new(Broken::new(flaw))
            .with_history(3)
            .report()
            .await
    }

    #[tokio::test(start_paused = true)]
    async fn a_store_that_records_a_lost_run_is_caught() {
        let report = report(Flaw::RecordsLostRuns).await;
        assert!(
            report.contains("- a_lost_lock_records_nothing:"),
            "{report}"
        );
        assert!(!report.contains("outcomes_count"), "{report}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_store_that_counts_cancelled_runs_is_caught() {
        let report = report(Flaw::CancelledCounts).await;
        assert!(
            report.contains("- outcomes_count_as_documented:"),
            "{report}"
        );
        assert!(!report.contains("a_lost_lock"), "{report}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_store_that_keeps_every_run_is_caught() {
        let report = report(Flaw::Unbounded).await;
        assert!(
            report.contains("- history_keeps_the_newest_runs:"),
            "{report}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_store_without_job_state_fails_every_case() {
        struct Plain(InMemoryLockProvider);
        #[async_trait]
        impl LockProvider for Plain {
            async fn acquire(
                &self,
                name: &str,
                at_most: Duration,
                owner: &str,
            ) -> Result<Option<LockRecord>> {
                self.0.acquire(name, at_most, owner).await
            }
            async fn extend(
                &self,
                record: &LockRecord,
                at_most: Duration,
            ) -> Result<Option<LockRecord>> {
                self.0.extend(record, at_most).await
            }
            async fn release(&self, record: &LockRecord, at_least: Duration) -> Result<bool> {
                self.0.release(record, at_least).await
            }
        }
        #[async_trait]
        impl LockAdmin for Plain {
            async fn list(&self) -> Result<Vec<LockEntry>> {
                self.0.list().await
            }
        }
        let report = JobStateSuite::new(Plain(InMemoryLockProvider::new()))
            .report()
            .await;
        assert_eq!(report.lines().count(), 9, "{report}");
        assert!(report.contains("unsupported"), "{report}");
    }
}
