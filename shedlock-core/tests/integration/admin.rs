//! The admin suite against the in-memory store, and against stores that break the contract.

use std::time::Duration;

use async_trait::async_trait;
use shedlock_core::testkit::AdminSuite;
use shedlock_core::{
    InMemoryLockProvider, Result,
    admin::{LockAdmin, LockEntry},
    provider::{LockProvider, LockRecord},
};

#[tokio::test(start_paused = true)]
async fn in_memory_store_passes_the_admin_suite() {
    AdminSuite::new(InMemoryLockProvider::new()).run().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_memory_store_passes_the_admin_suite_in_real_time() {
    AdminSuite::new(InMemoryLockProvider::new()).run().await;
}

#[tokio::test(start_paused = true)]
async fn freeing_sets_lock_until_to_the_stores_now_and_nothing_else() {
    let store = InMemoryLockProvider::new();
    let record = store
        .acquire("job", Duration::from_mins(1), "pod-a")
        .await
        .expect("ok")
        .expect("free");
    tokio::time::advance(Duration::from_secs(7)).await;
    assert!(store.unlock(&record, "test").await.expect("ok"));
    let entry = store.entry("job").await.expect("ok").expect("a row");
    assert_eq!(entry.record().owner(), "pod-a");
    assert_eq!(entry.record().locked_at(), record.locked_at());
    assert_eq!(entry.record().fencing_token(), record.fencing_token());
    assert_eq!(
        entry.record().lock_until(),
        record.locked_at() + chrono::Duration::seconds(7)
    );
    assert_eq!(entry.store_now(), entry.record().lock_until());
    assert!(!entry.is_held());
}

/// A store that passes the lock contract but whose admin surface is careless or missing.
mod broken_stores {
    use super::*;

    /// A store with only the default admin bodies (a custom store that has not implemented it).
    struct NoAdmin(InMemoryLockProvider);

    /// Frees whatever holds the name: an `unlock` that ignores the values it was given.
    struct CarelessUnlock(InMemoryLockProvider);

    macro_rules! delegate_provider {
        ($t:ty) => {
            #[async_trait]
            impl LockProvider for $t {
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
        };
    }
    delegate_provider!(NoAdmin);
    delegate_provider!(CarelessUnlock);

    impl LockAdmin for NoAdmin {}

    #[async_trait]
    impl LockAdmin for CarelessUnlock {
        async fn list(&self) -> Result<Vec<LockEntry>> {
            self.0.list().await
        }
        async fn unlock(&self, expected: &LockRecord, actor: &str) -> Result<bool> {
            match self.0.entry(expected.name()).await? {
                Some(current) => self.0.unlock(current.record(), actor).await,
                None => Ok(false),
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_careless_unlock_is_caught() {
        let report = AdminSuite::new(CarelessUnlock(InMemoryLockProvider::new()))
            .report()
            .await;
        assert!(
            report.contains("- unlock_after_retake_by_same_owner_refused:"),
            "{report}"
        );
        assert!(
            report.contains("- unlock_with_other_values_refused:"),
            "{report}"
        );
        // The default bodies (entry from list, force_unlock from entry + unlock) are sound.
        assert!(!report.contains("force_unlock"), "{report}");
        assert!(!report.contains("list_and_entry"), "{report}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_store_without_an_admin_surface_fails_every_case_but_ddl() {
        let report = AdminSuite::new(NoAdmin(InMemoryLockProvider::new()))
            .report()
            .await;
        assert!(report.contains("does not support `list`"), "{report}");
        assert!(!report.contains("ddl_and_create_table_agree"), "{report}");
        assert!(
            !report.contains("freeing_keeps_the_recorded_fire"),
            "no claim_fire: skipped"
        );
    }
}
