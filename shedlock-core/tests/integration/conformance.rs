//! The provider conformance suite against the in-memory store, on paused time.

use shedlock_core::InMemoryLockProvider;
use shedlock_core::testkit::ConformanceSuite;

#[tokio::test(start_paused = true)]
async fn in_memory_provider_conforms() {
    let report = ConformanceSuite::new(InMemoryLockProvider::new())
        .require_fire_claims(true)
        .run()
        .await;
    assert!(report.skipped().is_empty(), "{report}");
    assert!(
        report.passed() >= 26,
        "every case ran, the fire cases too: {report}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_memory_provider_conforms_in_real_time_on_threads() {
    ConformanceSuite::new(InMemoryLockProvider::new())
        .time_unit(std::time::Duration::from_millis(200))
        .run()
        .await;
}

/// The suite must catch a store that breaks the contract, or it proves nothing.
mod broken_stores {
    use std::time::Duration;

    use async_trait::async_trait;
    use shedlock_core::testkit::ConformanceSuite;
    use shedlock_core::{
        InMemoryLockProvider, Result,
        provider::{LockProvider, LockRecord},
    };

    /// Releases whatever the record names, even another acquisition's lock.
    struct CarelessRelease(InMemoryLockProvider);

    #[async_trait]
    impl LockProvider for CarelessRelease {
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
            // Pretend to be the current holder: a release that ignores who holds the lock.
            match self.0.holder(record.name()).await? {
                Some(current) => self.0.release(&current, at_least).await,
                None => Ok(false),
            }
        }
        async fn holder(&self, name: &str) -> Result<Option<LockRecord>> {
            self.0.holder(name).await
        }
    }

    /// Ignores `at_least`.
    struct NoAtLeast(InMemoryLockProvider);

    #[async_trait]
    impl LockProvider for NoAtLeast {
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
        async fn release(&self, record: &LockRecord, _at_least: Duration) -> Result<bool> {
            self.0.release(record, Duration::ZERO).await
        }
    }

    /// A release of an expired lock that nobody else took: refused (as a `lock_until > now`
    /// condition in the release would do), or answered `true` without writing the row; or a
    /// second release of one acquisition answered `false` (as a store that deletes the record on
    /// release would, though the trait's docs say a release may be called again).
    #[derive(Default)]
    struct ExpiredRelease {
        inner: InMemoryLockProvider,
        refuses: bool,
        releases_once: bool,
        released: std::sync::Mutex<Vec<(String, Option<i64>)>>,
    }

    #[async_trait]
    impl LockProvider for ExpiredRelease {
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
            shedlock_core::provider::validate_at_least(at_least)?;
            if self.releases_once {
                let key = (record.name().to_owned(), record.fencing_token());
                let again = {
                    let mut released = self
                        .released
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    let again = released.contains(&key);
                    released.push(key);
                    again
                };
                if again {
                    return Ok(false);
                }
                return self.inner.release(record, at_least).await;
            }
            match self.inner.holder(record.name()).await? {
                None => Ok(!self.refuses),
                Some(_) => self.inner.release(record, at_least).await,
            }
        }
        async fn holder(&self, name: &str) -> Result<Option<LockRecord>> {
            self.inner.holder(name).await
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_release_after_expiry_that_does_not_act_is_caught() {
        for refuses in [true, false] {
            let report = ConformanceSuite::new(ExpiredRelease {
                refuses,
                ..ExpiredRelease::default()
            })
            .report()
            .await;
            assert!(
                report.contains("- release_after_expiry_acts:"),
                "refuses = {refuses}:\n{report}"
            );
            if !refuses {
                // Nothing else in the suite notices a release that answers without writing.
                assert_eq!(report.lines().count(), 1, "{report}");
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_careless_release_is_caught() {
        let report = ConformanceSuite::new(CarelessRelease(InMemoryLockProvider::new()))
            .report()
            .await;
        assert!(
            report.contains("late_release_and_extend_spare_new_holder"),
            "{report}"
        );
    }

    /// The report names the case and the step within it that failed.
    #[tokio::test(start_paused = true)]
    async fn a_failure_names_the_step_of_its_case() {
        let report = ConformanceSuite::new(ExpiredRelease {
            releases_once: true,
            ..ExpiredRelease::default()
        })
        .report()
        .await;
        let line = report
            .lines()
            .find(|l| l.contains("extend_once_and_repeatedly"))
            .unwrap_or_else(|| panic!("the case failed:\n{report}"));
        assert!(
            line.contains(
                "second release of the same acquisition (with its original record) returned false"
            ),
            "{line}"
        );
    }

    /// Forwards everything but `claim_fire` (whose default answers unsupported).
    struct NoFireClaims(InMemoryLockProvider);

    #[async_trait]
    impl LockProvider for NoFireClaims {
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

    #[tokio::test(start_paused = true)]
    async fn a_store_without_fire_claims_is_skipped_visibly_not_failed() {
        let report = ConformanceSuite::new(NoFireClaims(InMemoryLockProvider::new()))
            .run()
            .await;
        assert!(report.failed().is_empty(), "{report}");
        assert_eq!(report.skipped().len(), 10, "{report}");
        assert!(
            report
                .skipped()
                .iter()
                .all(|(case, why)| case.starts_with("fire_") && why.contains("claim_fire")),
            "{report}"
        );
        assert!(report.to_string().contains("10 skipped"), "{report}");
        // Required, the same store fails.
        let failures = ConformanceSuite::new(NoFireClaims(InMemoryLockProvider::new()))
            .require_fire_claims(true)
            .report()
            .await;
        assert!(failures.contains("fire_probe"), "{failures}");
    }

    /// Claims every fire in its window, ignoring the recorded fire.
    struct ForgetfulFires(InMemoryLockProvider);

    #[async_trait]
    impl LockProvider for ForgetfulFires {
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
        async fn holder(&self, name: &str) -> Result<Option<LockRecord>> {
            self.0.holder(name).await
        }
        async fn claim_fire(
            &self,
            name: &str,
            fire: &shedlock_core::provider::Fire,
            at_most: Duration,
            owner: &str,
        ) -> Result<shedlock_core::provider::FireClaim> {
            use shedlock_core::provider::FireClaim;
            match self.0.claim_fire(name, fire, at_most, owner).await? {
                FireClaim::ClaimedElsewhere { now, holder, .. } => {
                    match self.0.acquire(name, at_most, owner).await? {
                        Some(record) => Ok(FireClaim::Claimed(record)),
                        None => Ok(FireClaim::Held { now, holder }),
                    }
                }
                other => Ok(other),
            }
        }
    }

    /// Answers every reply that names a holder with the holder's owner replaced.
    struct WrongHolder(InMemoryLockProvider);

    #[async_trait]
    impl LockProvider for WrongHolder {
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
        async fn holder(&self, name: &str) -> Result<Option<LockRecord>> {
            self.0.holder(name).await
        }
        async fn claim_fire(
            &self,
            name: &str,
            fire: &shedlock_core::provider::Fire,
            at_most: Duration,
            owner: &str,
        ) -> Result<shedlock_core::provider::FireClaim> {
            use shedlock_core::provider::FireClaim;
            let other = |h: LockRecord| {
                LockRecord::new(h.name(), "someone-else", h.locked_at(), h.lock_until())
                    .with_fencing_token(h.fencing_token())
            };
            Ok(match self.0.claim_fire(name, fire, at_most, owner).await? {
                FireClaim::ClaimedElsewhere {
                    now,
                    recorded,
                    holder,
                } => FireClaim::ClaimedElsewhere {
                    now,
                    recorded,
                    holder: other(holder),
                },
                FireClaim::Held { now, holder } => FireClaim::Held {
                    now,
                    holder: other(holder),
                },
                reply => reply,
            })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_store_that_names_the_wrong_holder_is_caught() {
        let report = ConformanceSuite::new(WrongHolder(InMemoryLockProvider::new()))
            .report()
            .await;
        for case in ["fire_claimed_once", "fire_held_writes_nothing"] {
            assert!(report.contains(case), "{case}:\n{report}");
        }
        assert!(report.contains("someone-else"), "{report}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_store_that_forgets_fires_is_caught() {
        let report = ConformanceSuite::new(ForgetfulFires(InMemoryLockProvider::new()))
            .report()
            .await;
        for case in [
            "fire_claimed_once",
            "fire_survives_release_and_expiry",
            "fire_untouched_by_acquire_extend_release",
        ] {
            assert!(report.contains(case), "{case}:\n{report}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn ignoring_at_least_is_caught() {
        let report = ConformanceSuite::new(NoAtLeast(InMemoryLockProvider::new()))
            .report()
            .await;
        assert!(report.contains("at_least_holds_then_ends"), "{report}");
    }
}
