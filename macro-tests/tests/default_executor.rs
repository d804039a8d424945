//! Functions without `executor = ...` use the process-wide default executor. Installing it is
//! once per process, so this test has a binary of its own.

use std::time::Duration;

use shedlock_core::{InMemoryLockProvider, LockingTaskExecutor, current_lock, scheduled_lock};

#[scheduled_lock(name = "default-{n}", at_least = "1s")]
async fn job(n: u32) -> String {
    current_lock()
        .map(|lock| format!("{} by {}", lock.name(), lock.record().owner()))
        .unwrap_or_default()
}

#[tokio::test(start_paused = true)]
async fn functions_without_an_executor_use_the_installed_default() {
    let error = job(1)
        .await
        .expect_err("no default executor is installed yet");
    assert!(error.is_no_executor(), "{error}");
    assert!(error.to_string().contains("install_default"), "{error}");

    LockingTaskExecutor::builder(InMemoryLockProvider::new())
        .owner_id("the-default")
        .default_at_most(Duration::from_mins(1))
        .build()
        .expect("valid")
        .install_default()
        .expect("first install");

    assert_eq!(
        job(1).await.expect("store ok").as_deref(),
        Some("default-1 by the-default"),
        "the default executor and its default_at_most are used"
    );
    assert_eq!(
        job(1).await.expect("store ok"),
        None,
        "at_least = 1s still holds it"
    );
    tokio::time::advance(Duration::from_secs(1)).await;
    assert!(
        job(1).await.expect("store ok").is_some(),
        "free again after at_least"
    );
}
