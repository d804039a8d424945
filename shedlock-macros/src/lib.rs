//! `#[scheduled_lock]`: run an `async fn` only when its lock is free, so that a task scheduled
//! on every replica runs on one of them at a time.
//!
//! Use it through [`shedlock-core`](https://docs.rs/shedlock-core), which re-exports it (feature
//! `macros`, on by default) and whose hidden support module the generated code calls:
//!
//! ```
//! use shedlock_core::scheduled_lock;
//!
//! #[scheduled_lock(name = "nightly-report", at_most = "10m", at_least = "30s")]
//! async fn nightly_report() {
//!     // ...
//! }
//! ```
//!
//! See [`macro@scheduled_lock`] for every argument and what the attribute expands to.
#![warn(missing_docs)]

mod args;
mod errors;
mod expand;
mod name;

use proc_macro::TokenStream;

/// Runs an `async fn` under a lock: when several replicas call it at the same time, one runs the
/// body and the others skip it.
///
/// ```
/// use shedlock_core::scheduled_lock;
///
/// #[scheduled_lock(name = "nightly-report", at_most = "10m", at_least = "30s")]
/// async fn nightly_report(day: u32) -> u32 {
///     // ... the work ...
///     day
/// }
/// ```
///
/// Call it from your scheduler on every replica. The return type `T` becomes
/// `Result<Option<T>, shedlock_core::Error>`:
///
/// - `Ok(Some(output))`: the lock was free; the body ran here and returned `output` (a body that
///   returns `Err(e)` gives `Ok(Some(Err(e)))`);
/// - `Ok(None)`: another replica (or task) holds the lock; the body did not run. This is a skip,
///   not a failure: nothing is queued or retried;
/// - `Err(error)`: whether the lock is free could not be found out (a store failure or timeout,
///   an invalid templated name, no executor, no `at_most`); the body did not run.
///
/// The lock is released when the body returns, fails or panics (the panic then continues to the
/// caller), honouring `at_least`; and if the returned future is dropped mid-run.
///
/// # Arguments
///
/// | argument | | |
/// |---|---|---|
/// | `name = "..."` | required | The lock's name: one row per name in the store. May use the function's arguments: `"report-{tenant}"`. |
/// | `at_most = "10m"` | required unless the executor has a `default_at_most` | If the replica running the body dies, the lock frees itself after this long. Set it well above the task's normal run time. A string is checked at compile time; a `Duration` expression (`at_most = REPORT_AT_MOST`, `Duration::from_secs(600)`) is checked when the function is called (an invalid one is its `Err`). |
/// | `at_least = "30s"` | default: the executor's `default_at_least` (zero unless set); `"0s"` for the `<fn>_job()` of a scheduled function | A run that ends sooner keeps the lock until this long after it started, so replicas whose timers fire a little apart do not each run the task. At most `at_most`. A string or a `Duration` expression, as for `at_most`. |
/// | `executor = <expr>` | default: the process-wide default executor | The `LockingTaskExecutor` to run under (store, owner id, timeouts), evaluated in the function's scope on each call: `self.locks`, `&self.locks`, an argument, `Arc<LockingTaskExecutor>`, ... |
/// | `keep_alive` | default off | Extend the lock every `at_most / 2` while the body runs, so a run may outlive `at_most` as long as its process is alive and reaches the store. |
/// | `every = "1m"` | optional | A fixed-rate schedule (aligned to the Unix epoch, whole milliseconds): also generates `<fn>_job()`, the `shedlock_core::Job` to register with a `Scheduler`. |
/// | `cron = "0 0 3 * * *"` | optional | A cron schedule with seconds (instead of `every`), checked at compile time; also generates `<fn>_job()`. |
/// | `zone = "Europe/Berlin"` | default `"UTC"`, only with `cron` | The IANA zone the cron expression is read in, checked at compile time. |
///
/// A scheduled function takes no arguments and uses no `executor = self...` (the scheduler
/// calls it with nothing); both are compile errors that say to register a closure with
/// `Job::new` instead. Its body must return `()` or `Result<(), E: Display>`. Register it in one
/// line, `scheduler.add(report_job()?)?`; the function itself stays callable as before.
///
/// ```
/// use std::time::Duration;
/// use shedlock_core::{InMemoryLockProvider, LockingTaskExecutor, Scheduler, scheduled_lock};
///
/// #[scheduled_lock(name = "nightly", at_most = "10m", cron = "0 0 3 * * *", zone = "Europe/Berlin")]
/// async fn nightly() -> Result<(), std::io::Error> {
///     Ok(())
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> shedlock_core::Result<()> {
/// let scheduler = Scheduler::new(LockingTaskExecutor::new(InMemoryLockProvider::new())?);
/// scheduler.add(nightly_job()?)?;
/// # Ok(()) }
/// ```
///
/// Durations are strings, checked at compile time: `"10m"`, `"1h30m"`, `"500ms"`, `"2s"`,
/// `"1d"` (units `d`, `h`, `m`, `s`, `ms`, largest first), or ISO-8601 such as `"PT10M"` and
/// `"PT0.5S"`; at most 365 days.
///
/// # Compile-time checks
///
/// Every mistake below is a compile error on the offending token, all reported at once, with the
/// function still defined so the mistakes do not cascade to its callers: the function is not an
/// `async fn`, or is `const`, `unsafe` or `extern`; `name` is missing, empty, longer than 64
/// characters (templates: its fixed text), padded with white space or not a string literal; an
/// unknown argument (the message lists the valid ones) or one given twice; a malformed duration;
/// a zero `at_most`; `at_least` longer than `at_most`; a name placeholder that names no argument.
///
/// At run time, the templated name is checked (empty, too long for the store, padded), and so
/// is `at_most` when it comes from the executor.
///
/// # Name templates
///
/// `{arg}` in the name is replaced by the argument `arg`, formatted with `Display`; `{{` and
/// `}}` are literal braces. Each distinct name is its own lock:
///
/// ```
/// use std::time::Duration;
/// use shedlock_core::{InMemoryLockProvider, LockingTaskExecutor, current_lock, scheduled_lock};
///
/// #[scheduled_lock(name = "report-{tenant}", at_most = "10m", executor = locks)]
/// async fn report(locks: &LockingTaskExecutor, tenant: &str) -> String {
///     current_lock().expect("held").name().to_owned()
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> shedlock_core::Result<()> {
/// let locks = LockingTaskExecutor::new(InMemoryLockProvider::new())?;
/// assert_eq!(report(&locks, "eu").await?.as_deref(), Some("report-eu"));
/// # Ok(()) }
/// ```
///
/// # The default executor
///
/// Without `executor = ...`, the function runs under the executor installed once at startup
/// with `LockingTaskExecutor::install_default`; if none is installed, calls return an error
/// that says so.
///
/// ```
/// use std::time::Duration;
/// use shedlock_core::{InMemoryLockProvider, LockingTaskExecutor, scheduled_lock};
///
/// #[scheduled_lock(name = "cleanup", at_least = "30s")]
/// async fn cleanup() -> usize {
///     42 // rows deleted
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> shedlock_core::Result<()> {
/// // At startup (use a shared store, such as shedlock-sqlx's, in a real service):
/// LockingTaskExecutor::builder(InMemoryLockProvider::new())
///     .default_at_most(Duration::from_secs(600)) // for functions that leave at_most out
///     .build()?
///     .install_default()?;
///
/// // On every tick, on every replica:
/// match cleanup().await? {
///     Some(deleted) => println!("deleted {deleted} rows"),
///     None => println!("another replica is cleaning up"),
/// }
/// # Ok(()) }
/// ```
///
/// # Methods, and an executor per service
///
/// Methods (`&self`, `&mut self`, `self`), generics, `where` clauses, `impl Trait` arguments,
/// lifetimes, attributes and doc comments all work. The generated future is `Send` whenever the
/// body's is, so it can be spawned on a multi-threaded runtime.
///
/// ```
/// use shedlock_core::{InMemoryLockProvider, LockingTaskExecutor, scheduled_lock};
///
/// struct Billing {
///     locks: LockingTaskExecutor,
///     invoices_sent: u32,
/// }
///
/// impl Billing {
///     /// Sends the day's invoices (once across replicas).
///     #[scheduled_lock(name = "send-invoices", at_most = "15m", executor = self.locks)]
///     async fn send_invoices(&mut self) -> Result<u32, std::io::Error> {
///         self.invoices_sent += 3;
///         Ok(3)
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> shedlock_core::Result<()> {
/// let mut billing = Billing {
///     locks: LockingTaskExecutor::new(InMemoryLockProvider::new())?,
///     invoices_sent: 0,
/// };
/// match billing.send_invoices().await? {
///     Some(Ok(sent)) => assert_eq!(sent, 3),
///     Some(Err(io)) => eprintln!("the task failed: {io}"), // the lock is released
///     None => {}                                             // skipped
/// }
/// # Ok(()) }
/// ```
///
/// # Inside the body: the lock itself
///
/// The body runs as a locked task, so `shedlock_core::current_lock()` gives its lock (fencing
/// token, lost-lock signal, extension) and `shedlock_core::assert_locked()` holds.
///
/// ```
/// use std::time::Duration;
/// use shedlock_core::{InMemoryLockProvider, LockingTaskExecutor, current_lock, scheduled_lock};
///
/// #[scheduled_lock(name = "import", at_most = "5m", executor = locks)]
/// async fn import(locks: &LockingTaskExecutor) -> shedlock_core::Result<()> {
///     shedlock_core::assert_locked();
///     let lock = current_lock().expect("inside the lock");
///     // Pass the token to downstream writes, so a stale holder's writes can be rejected.
///     let _token: Option<i64> = lock.fencing_token();
///     // A long batch: ask for more time (ShedLock's LockExtender).
///     lock.extend(Duration::from_secs(600)).await?;
///     // Or stop when the lock is lost: `tokio::select! { _ = lock.lost() => ..., ... }`.
///     assert!(!lock.is_lost());
///     Ok(())
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> shedlock_core::Result<()> {
/// let locks = LockingTaskExecutor::new(InMemoryLockProvider::new())?;
/// import(&locks).await?.expect("not held elsewhere")?;
/// # Ok(()) }
/// ```
///
/// A long task that should keep its lock for as long as it runs uses `keep_alive`:
///
/// ```
/// use shedlock_core::{LockingTaskExecutor, scheduled_lock};
///
/// #[scheduled_lock(name = "reindex", at_most = "2m", keep_alive, executor = locks)]
/// async fn reindex(locks: &LockingTaskExecutor) {
///     // Extended every minute while it runs; `current_lock()` tells if it was lost anyway.
/// }
/// ```
///
/// # What it expands to
///
/// The function keeps its signature except for the return type, and runs its body through
/// `LockingTaskExecutor::execute`. Written by hand, the function of the previous section is:
///
/// ```
/// use std::time::Duration;
/// use shedlock_core::{LockConfig, LockingTaskExecutor};
///
/// async fn report(
///     locks: &LockingTaskExecutor,
///     tenant: &str,
/// ) -> Result<Option<String>, shedlock_core::Error> {
///     let config = LockConfig::builder(format!("report-{tenant}"))
///         .at_most(Duration::from_secs(600)) // "10m", parsed at compile time
///         .build()?; // the templated name is checked here
///     // Without `executor = ...`: `shedlock_core::default_executor()?.clone()`.
///     let executor = locks.clone();
///     executor
///         .execute(&config, async move {
///             // the body, with `return` and `?` returning from it
///             format!("ran for {tenant}")
///         })
///         .await
/// }
/// ```
///
/// (The generated code calls the same functions through `shedlock_core`'s hidden support
/// module, so it needs nothing in scope but the attribute.)
#[proc_macro_attribute]
pub fn scheduled_lock(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::scheduled_lock(args.into(), item.into()).into()
}
