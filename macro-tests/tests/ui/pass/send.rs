//! The generated future is `Send` whenever the body's is, so it can be spawned.
#![deny(warnings, clippy::pedantic)]

use std::sync::Arc;

use shedlock_core::{LockingTaskExecutor, current_lock, scheduled_lock};

fn assert_send<T: Send>(_: &T) {}

#[scheduled_lock(name = "send-{tenant}", at_most = "1m", executor = locks)]
async fn job(locks: Arc<LockingTaskExecutor>, tenant: String) -> Option<i64> {
    tokio::task::yield_now().await;
    current_lock().and_then(|lock| lock.fencing_token())
}

#[scheduled_lock(name = "default", at_most = "1m", keep_alive)]
async fn with_default_executor(data: Vec<u8>) -> usize {
    tokio::task::yield_now().await;
    data.len()
}

struct Holder {
    locks: LockingTaskExecutor,
}

impl Holder {
    #[scheduled_lock(name = "method", at_most = "1m", executor = self.locks)]
    async fn method(&self) {
        tokio::task::yield_now().await;
    }
}

fn main() {
    let locks = Arc::new(
        LockingTaskExecutor::new(shedlock_core::InMemoryLockProvider::new()).expect("valid"),
    );
    assert_send(&job(locks, "eu".to_owned()));
    assert_send(&with_default_executor(vec![1]));
    let holder = Holder {
        locks: LockingTaskExecutor::new(shedlock_core::InMemoryLockProvider::new()).expect("valid"),
    };
    assert_send(&holder.method());
}
