//! Every function shape `#[scheduled_lock]` supports compiles without a warning.
#![deny(warnings, clippy::pedantic)]

use std::borrow::Cow;
use std::fmt::{Debug, Display};
use std::sync::Arc;

use shedlock_core::{LockingTaskExecutor, scheduled_lock};

/// A free function with every argument.
#[scheduled_lock(
    name = "report-{tenant}-{{v2}}",
    at_most = "1h30m",
    at_least = "PT0.5S",
    executor = locks,
    keep_alive
)]
pub async fn report(locks: &LockingTaskExecutor, tenant: &str) -> Result<u32, std::io::Error> {
    Ok(u32::try_from(tenant.len()).unwrap_or(0))
}

/// A scheduled function: a fixed rate, and cron in a zone; `nightly_job()` registers it.
#[scheduled_lock(name = "tick", at_most = "10s", every = "1m")]
pub async fn tick() {}

/// Cron in a zone, returning a `Result`.
#[scheduled_lock(
    name = "nightly",
    at_most = "10m",
    cron = "0 0 3 * * *",
    zone = "Europe/Berlin"
)]
pub async fn nightly() -> Result<(), std::io::Error> {
    Ok(())
}

/// Durations from code: a constant and a call, also on a scheduled function.
const SYNC_AT_MOST: std::time::Duration = std::time::Duration::from_mins(5);

/// `at_most` and `at_least` as `Duration` expressions.
#[scheduled_lock(name = "sync", at_most = SYNC_AT_MOST, at_least = std::time::Duration::from_secs(2))]
pub async fn sync() {}

/// A scheduled function whose durations are expressions.
#[scheduled_lock(name = "sweep", at_most = SYNC_AT_MOST, at_least = std::time::Duration::ZERO, every = "1m")]
pub async fn sweep() {}

/// No return type, the default executor, `keep_alive = false`.
#[scheduled_lock(name = "cleanup", at_most = "500ms", keep_alive = false)]
pub async fn cleanup() {}

/// Generics, a where clause, `impl Trait` arguments and return, lifetimes.
#[scheduled_lock(name = "generic-{id}", at_most = "10m", executor = Arc::clone(&locks))]
pub async fn generic<'a, T, const N: usize>(
    locks: Arc<LockingTaskExecutor>,
    id: impl Display,
    items: &'a [T; N],
    _unused: impl Debug + Send,
) -> (impl Display, Cow<'a, [T]>)
where
    T: Clone + Display,
{
    (N, Cow::Borrowed(&items[..]))
}

/// Patterns and `mut` arguments.
#[scheduled_lock(name = "patterns-{count}", at_most = "1m", executor = locks)]
pub async fn patterns(locks: LockingTaskExecutor, mut count: u8, (a, b): (u8, u8)) -> u8 {
    count += a + b;
    drop(locks);
    count
}

/// A service holding its executor.
pub struct Service {
    locks: LockingTaskExecutor,
    total: u64,
}

impl Service {
    /// `&self` and a field executor.
    #[scheduled_lock(name = "read", at_most = "1m", executor = self.locks)]
    #[must_use = "the result says whether it ran"]
    pub async fn read(&self) -> u64 {
        self.total
    }

    /// `&mut self`, borrowed executor, inner attributes.
    #[scheduled_lock(name = "write", at_most = "1m", executor = &self.locks)]
    pub async fn write(&mut self, by: u64) -> &mut Self {
        #![allow(clippy::needless_pass_by_ref_mut)]
        self.total += by;
        self
    }

    /// `self` by value, returning `Self`.
    #[scheduled_lock(name = "into", at_most = "1m", executor = self.locks.clone())]
    pub async fn into_reset(mut self) -> Self {
        self.total = 0;
        self
    }

    /// `self: Arc<Self>`.
    #[scheduled_lock(name = "shared", at_most = "1m", executor = self.locks)]
    pub async fn shared(self: Arc<Self>) -> u64 {
        self.total
    }
}

fn main() {
    let locks = LockingTaskExecutor::new(shedlock_core::InMemoryLockProvider::new())
        .expect("valid executor");
    // Creating the futures type-checks every call; they are not run.
    drop(report(&locks, "eu"));
    drop(cleanup());
    drop(tick());
    drop(nightly());
    drop(tick_job());
    drop(nightly_job());
    drop(sync());
    drop(sweep());
    drop(sweep_job());
    drop(generic(Arc::new(locks.clone()), 7, &["a".to_owned()], ()));
    drop(patterns(locks.clone(), 1, (2, 3)));
    let mut service = Service { locks, total: 0 };
    drop(service.read());
    drop(service.write(1));
    drop(
        Arc::new(Service {
            locks: service.locks.clone(),
            total: 1,
        })
        .shared(),
    );
    drop(service.into_reset());
}
