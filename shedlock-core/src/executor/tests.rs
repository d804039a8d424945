//! The executor's unit tests.

use super::*;
use crate::InMemoryLockProvider;

/// The only test in this binary that installs a default executor. The slot is process-wide and
/// cannot be emptied. So no other test can see or disturb it.
#[test]
fn a_second_install_default_is_refused_and_keeps_the_first() {
    let first = LockingTaskExecutor::builder(InMemoryLockProvider::new())
        .owner_id("first")
        .build()
        .expect("valid");
    let second = LockingTaskExecutor::builder(InMemoryLockProvider::new())
        .owner_id("second")
        .build()
        .expect("valid");
    first.install_default().expect("nothing installed yet");
    let err = second
        .install_default()
        .expect_err("a default is already installed");
    assert!(err.is_already_installed(), "{err}");
    let installed = default_executor().expect("installed");
    assert_eq!(installed.owner_id(), "first", "the first install stays");
    assert!(
        Arc::ptr_eq(&installed.inner, &first.inner),
        "the very executor installed first, not a copy of its settings"
    );
    // Installing the same executor again is refused too.
    assert!(
        first
            .install_default()
            .is_err_and(|e| e.is_already_installed())
    );
}
