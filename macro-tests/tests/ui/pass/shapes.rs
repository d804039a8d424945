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

/// Schedules from code: a constant cron expression and zone, a `String` from a function, a
/// `Duration` period; checked when `<fn>_job()` is called.
const SYNC_CRON: &str = "0 */5 * * * *";
const SYNC_ZONE: &str = "Europe/Berlin";

/// The cron expression of a job, as read from a configuration.
#[must_use]
pub fn configured_cron() -> String {
    "0 0 3 * * *".to_owned()
}

/// `cron` and `zone` as constants.
#[scheduled_lock(name = "const-cron", at_most = "1m", cron = SYNC_CRON, zone = SYNC_ZONE)]
pub async fn const_cron() {}

/// `cron` from a call, `zone` a literal.
#[scheduled_lock(name = "call-cron", at_most = SYNC_AT_MOST, cron = configured_cron(), zone = "UTC")]
pub async fn call_cron() -> Result<(), std::io::Error> {
    Ok(())
}

/// `every` as a `Duration` expression.
#[scheduled_lock(name = "expr-every", at_most = "1m", every = std::time::Duration::from_secs(30))]
pub async fn expr_every() {}

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

/// Body shapes, each on one line too (rustc's `unused_braces` looks at one-line blocks only).
/// A bare literal tail.
#[scheduled_lock(name = "literal", at_most = "1m")]
pub async fn literal() -> u32 {
    1
}

/// One-line bodies: a literal, a path, a block, a call, empty, unit, `impl Trait`, generic, an
/// inner `async` block, scheduled, a method.
#[rustfmt::skip]
pub mod one_line {
    use shedlock_core::scheduled_lock;

    const SEVEN: u32 = 7;

    #[scheduled_lock(name = "one-line-literal", at_most = "1m")]
    pub async fn literal() -> u32 { 1 }

    #[scheduled_lock(name = "one-line-path", at_most = "1m")]
    pub async fn path() -> u32 { SEVEN }

    #[scheduled_lock(name = "one-line-block", at_most = "1m")]
    pub async fn block() -> u32 { let x = { 2 }; x + 1 }

    #[scheduled_lock(name = "one-line-call", at_most = "1m")]
    pub async fn call() -> Option<u32> { Some(3) }

    #[scheduled_lock(name = "one-line-empty", at_most = "1m")]
    pub async fn empty() {}

    #[scheduled_lock(name = "one-line-unit", at_most = "1m")]
    pub async fn unit(out: &mut Vec<u8>) { out.clear(); }

    #[scheduled_lock(name = "one-line-impl", at_most = "1m")]
    pub async fn impl_trait() -> impl std::fmt::Display { 4 }

    #[scheduled_lock(name = "one-line-generic", at_most = "1m")]
    pub async fn generic<T: Default>() -> T { T::default() }

    #[scheduled_lock(name = "one-line-async", at_most = "1m")]
    pub async fn inner_async() -> u32 { async { 5 }.await }

    #[scheduled_lock(name = "one-line-scheduled", at_most = "1m", every = "1m")]
    pub async fn scheduled() -> Result<(), std::io::Error> { Ok(()) }

    pub struct Service(pub shedlock_core::LockingTaskExecutor);

    impl Service {
        #[scheduled_lock(name = "one-line-method", at_most = "1m", executor = self.0)]
        pub async fn method(&self) -> u32 { 8 }
    }
}

/// A block as the tail.
#[scheduled_lock(name = "block-tail", at_most = "1m")]
pub async fn block_tail() -> u32 {
    {
        let x = 2;
        x * 2
    }
}

/// An early `return x;`.
#[scheduled_lock(name = "early-return", at_most = "1m")]
pub async fn early_return(flag: bool) -> u32 {
    if flag {
        return 1;
    }
    2
}

/// `?` on a `Result`.
#[scheduled_lock(name = "question-mark", at_most = "1m")]
pub async fn question_mark(text: &str) -> Result<u32, std::num::ParseIntError> {
    let n: u32 = text.parse()?;
    Ok(n + 1)
}

/// A unit body with statements.
#[scheduled_lock(name = "unit-body", at_most = "1m")]
pub async fn unit_body(out: &mut Vec<u32>) {
    out.push(1);
}

/// An empty body with a unit return type written out.
#[scheduled_lock(name = "empty-unit", at_most = "1m")]
#[allow(clippy::unused_unit)]
pub async fn empty_unit() -> () {}

/// An inner `async` block awaited as the tail.
#[scheduled_lock(name = "inner-async", at_most = "1m")]
pub async fn inner_async() -> u32 {
    let inner = async { 3 };
    inner.await
}

/// `impl Trait` in return position with a literal tail.
#[scheduled_lock(name = "impl-return", at_most = "1m")]
pub async fn impl_return() -> impl Display {
    5
}

/// A generic function with a literal tail.
#[scheduled_lock(name = "generic-literal", at_most = "1m")]
pub async fn generic_literal<T: Default + Send>() -> T {
    T::default()
}

/// let-else.
#[scheduled_lock(name = "let-else", at_most = "1m")]
pub async fn let_else(value: Option<u32>) -> u32 {
    let Some(value) = value else {
        return 0;
    };
    value
}

/// A `match` as the tail.
#[scheduled_lock(name = "match-tail", at_most = "1m")]
pub async fn match_tail(value: Option<u32>) -> u32 {
    match value {
        Some(v) => v * 2,
        None => 1,
    }
}

/// An inline `const` block as the tail.
#[scheduled_lock(name = "const-tail", at_most = "1m")]
pub async fn const_tail() -> u32 {
    const { 7 }
}

/// A body that diverges.
#[scheduled_lock(name = "diverges", at_most = "1m")]
pub async fn diverges() -> u32 {
    loop {
        tokio::task::yield_now().await;
    }
}

/// A scheduled function with a literal tail.
#[scheduled_lock(name = "scheduled-literal", at_most = "1m", every = "1m")]
pub async fn scheduled_literal() -> Result<(), std::io::Error> {
    Ok(())
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

    /// `&self` with a literal tail.
    #[scheduled_lock(name = "constant", at_most = "1m", executor = self.locks)]
    pub async fn constant(&self) -> u64 {
        8
    }

    /// `&self` with a block tail and `?`.
    #[scheduled_lock(name = "checked", at_most = "1m", executor = self.locks)]
    pub async fn checked(&self, by: u64) -> Option<u64> {
        {
            let total = self.total.checked_add(by)?;
            Some(total)
        }
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
    drop(const_cron_job());
    drop(call_cron_job());
    drop(expr_every_job());
    drop(const_cron());
    drop(call_cron());
    drop(expr_every());
    drop(generic(Arc::new(locks.clone()), 7, &["a".to_owned()], ()));
    drop(patterns(locks.clone(), 1, (2, 3)));
    drop(literal());
    drop(one_line::literal());
    drop(one_line::path());
    drop(one_line::block());
    drop(one_line::call());
    drop(one_line::empty());
    let mut bytes = Vec::new();
    drop(one_line::unit(&mut bytes));
    drop(one_line::impl_trait());
    drop(one_line::generic::<u8>());
    drop(one_line::inner_async());
    drop(one_line::scheduled());
    drop(one_line::scheduled_job());
    drop(one_line::Service(locks.clone()).method());
    drop(block_tail());
    drop(early_return(true));
    drop(question_mark("1"));
    let mut out = Vec::new();
    drop(unit_body(&mut out));
    drop(empty_unit());
    drop(inner_async());
    drop(impl_return());
    drop(generic_literal::<u32>());
    drop(let_else(Some(1)));
    drop(match_tail(None));
    drop(const_tail());
    drop(diverges());
    drop(scheduled_literal());
    drop(scheduled_literal_job());
    let mut service = Service { locks, total: 0 };
    drop(service.constant());
    drop(service.checked(1));
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
