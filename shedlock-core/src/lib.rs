// A build without some features documents the links to what they add as links to docs.rs, where
// every feature is on.
#![cfg_attr(
    not(feature = "scheduler"),
    doc = "[`Scheduler`]: https://docs.rs/shedlock-core/latest/shedlock_core/struct.Scheduler.html"
)]
#![cfg_attr(
    not(feature = "scheduler"),
    doc = "[`Job`]: https://docs.rs/shedlock-core/latest/shedlock_core/struct.Job.html"
)]
#![cfg_attr(
    not(feature = "scheduler"),
    doc = "[`JobSpec`]: https://docs.rs/shedlock-core/latest/shedlock_core/struct.JobSpec.html"
)]
#![cfg_attr(
    not(feature = "scheduler"),
    doc = "[`scheduler`]: https://docs.rs/shedlock-core/latest/shedlock_core/scheduler/"
)]
#![cfg_attr(
    not(feature = "testkit"),
    doc = "[`testkit`]: https://docs.rs/shedlock-core/latest/shedlock_core/testkit/"
)]
//! Task locks with Java ShedLock's semantics, and leader election, over the database your replicas
//! share. Stores are separate crates. [Guide](https://github.com/shedlock-rs/shedlock-rs).
//!
//! **An application** needs only the root: `#[scheduled_lock]`, or a [`LockingTaskExecutor`] and
//! [`LockConfig`], a [`Scheduler`] of [`Job`]s, whose settings a [`JobSpec`] reads from a
//! configuration file, a [`LeaderLatch`], [`current_lock`], [`shutdown_signal`], [`Shutdown`],
//! [`parse_duration`], and [`InMemoryLockProvider`] for tests.
//!
//! The modules: [`provider`] for store authors, with the store contract `LockProvider` and its
//! helpers, [`admin`] for operator tools listing and freeing locks, [`latch`], [`scheduler`] and
//! [`current`] for the rest of the latch, the scheduler and the task's lock, and [`owner`] for
//! owner ids.
//!
//! ```no_run
//! use std::time::Duration;
//! use shedlock_core::{LockingTaskExecutor, scheduled_lock};
//! use shedlock_sqlx::PgLockProvider;
//!
//! #[scheduled_lock(name = "nightly-report", at_most = "10m", at_least = "30s")]
//! async fn nightly_report() -> Result<(), std::io::Error> {
//!     // ... runs on one replica per tick; the others skip ...
//!     Ok(())
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     // A small pool of its own; the table is Java ShedLock's (`shedlock`).
//!     let provider = PgLockProvider::connect("postgres://app@db/app").await?;
//!     provider.create_table_if_not_exists().await?;
//!     let executor = LockingTaskExecutor::builder(provider)
//!         .default_at_most(Duration::from_secs(600))
//!         .build()?;
//!     executor.install_default()?; // what #[scheduled_lock] uses unless given `executor = ...`
//!
//!     // From your scheduler (or a `Scheduler`), on every replica:
//!     match nightly_report().await? {
//!         Some(Ok(())) => tracing::info!("ran the report"),
//!         Some(Err(e)) => tracing::error!("the report failed: {e}"),
//!         None => tracing::debug!("another replica holds the lock: skipped"),
//!     }
//!     executor.shutdown(Duration::from_secs(10)).await; // waits for every release
//!     Ok(())
//! }
//! ```
//!
//! `Ok(None)` is a skip. A store failure is an `Err`. Without a database, in tests or in one
//! process:
//!
//! ```
//! use std::time::Duration;
//! use shedlock_core::{InMemoryLockProvider, LockConfig, LockingTaskExecutor};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> shedlock_core::Result<()> {
//! let executor = LockingTaskExecutor::new(InMemoryLockProvider::new())?;
//! let cfg = LockConfig::builder("nightly-report")
//!     .at_most(Duration::from_secs(600)) // freed after 10 min if this replica dies
//!     .at_least(Duration::from_secs(30)) // held 30 s even if the run is faster
//!     .build()?;
//! let ran = executor.execute(&cfg, async { /* the job */ }).await?;
//! assert!(ran.is_some(), "nobody else held the lock");
//! # Ok(()) }
//! ```
//!
//! # Feature flags
//!
//! - `macros` (default): `#[scheduled_lock]`.
//! - `scheduler` (default): [`Scheduler`], with fixed rates and cron.
//! - `metrics`: counters and a task-duration histogram through the `metrics` facade, named in
//!   [`metrics`].
//! - `testkit`: [`testkit`], the conformance suite a store runs.
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod admin;
mod config;
pub mod current;
mod drain;
mod error;
mod executor;
mod fire;
pub mod jobs;
mod keepalive;
pub mod latch;
mod memory;
pub mod metrics;
mod observe;
mod outage;
pub mod owner;
pub mod pause;
pub mod provider;
#[cfg(feature = "scheduler")]
mod schedule;
#[cfg(feature = "scheduler")]
pub mod scheduler;
mod shutdown;
mod signal;
#[cfg(test)]
mod test_observe;
#[cfg(feature = "testkit")]
pub mod testkit;
pub mod trigger;

#[doc(hidden)]
#[path = "macro_support.rs"]
pub mod __private;

// What an application types.
pub use config::{LockConfig, LockConfigBuilder};
#[doc(inline)]
pub use current::current_lock;
pub use drain::Drained;
pub use error::{Error, Result};
pub use executor::{
    Execution, LockGuard, LockingTaskExecutor, LockingTaskExecutorBuilder, default_executor,
};
#[doc(inline)]
pub use latch::{LeaderLatch, LeaderLatchConfig};
pub use memory::InMemoryLockProvider;
#[cfg(feature = "scheduler")]
#[doc(inline)]
pub use scheduler::{Job, JobSpec, RunContext, Schedule, Scheduler};
pub use shedlock_duration::{ParseError as DurationParseError, parse as parse_duration};
pub use shutdown::{Shutdown, ShutdownReport};
pub use signal::shutdown_signal;

// The old root paths of the modules' items, kept for one release (removed in the next).
#[doc(hidden)]
pub use admin::{ELECTION_MARK, LockAdmin, LockEntry, election_owner_id};
#[doc(hidden)]
pub use current::{
    LockHandle, assert_locked, is_locked, set_lock_assertions, without_lock_assertions,
};
#[doc(hidden)]
pub use latch::{
    KnownLeader, LeaderEvent, LeaderEvents, LeaderLatchConfigBuilder, LeaderState, LeaderTerm,
    StepDownReason,
};
#[doc(hidden)]
pub use owner::{MAX_OWNER_ID_LEN, OWNER_ID_ENV, default_owner_id};
#[doc(hidden)]
pub use provider::{
    DEFAULT_CALL_TIMEOUT, DEFAULT_MAX_NAME_LEN, Fire, FireClaim, LockProvider, LockRecord,
    MAX_DURATION, async_trait, chrono, fire_decision, validate_at_least, validate_at_most,
    validate_name,
};
#[cfg(feature = "scheduler")]
#[doc(hidden)]
pub use scheduler::{JobOutput, JobStatus, LastRun, OnHeld, RunOutcome};
// The attribute's documentation lives here, beside the code its expansion calls, so that its
// examples are shedlock-core's doc tests (a proc-macro crate's doc tests would build this crate
// and tokio a second time, for the host). Some examples schedule, hence the `scheduler` gate.
#[cfg(feature = "macros")]
#[doc(inline)]
#[cfg_attr(feature = "scheduler", doc = include_str!("scheduled_lock.md"))]
#[cfg_attr(
    not(feature = "scheduler"),
    doc = "Runs an `async fn` under a lock: when several replicas call it at the same time, one \
           runs the body and the others skip it. (Its examples are in the docs of a build with \
           the `scheduler` feature, on by default.)\n"
)]
pub use shedlock_macros::scheduled_lock;
