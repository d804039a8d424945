//! Task locks with Java ShedLock's semantics, and leader election, over the database your
//! replicas already share.
//!
//! See the [README](https://github.com/shedlock-rs/shedlock-rs) for the guide; the items below are
//! the reference. In short: a [`LockingTaskExecutor`] over a [`LockProvider`] runs a task only if
//! its lock is free, and `#[scheduled_lock]` does the same for an `async fn`. The stores are
//! their own crates: `shedlock-sqlx` (Postgres, MySQL/MariaDB, SQLite), `shedlock-redis`,
//! `shedlock-etcd`.
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
//! `Ok(None)` is a skip, a store failure an `Err`. Without a database (tests, one process),
//! [`InMemoryLockProvider`] and the executor directly:
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
//! - `scheduler` (default): [`Scheduler`], [`Job`] and [`Schedule`]: jobs on fixed rates or
//!   cron schedules, each fire at most once across replicas (see [`Scheduler`]).
//! - `metrics`: counters and a duration histogram through the `metrics` facade: attempts,
//!   acquisitions, skips, extensions, losses, errors and release failures per lock name, and
//!   `shedlock_task_duration_seconds`. The label is the lock name, so templated names make one
//!   series per value.
//! - `testkit`: [`testkit::ConformanceSuite`], the provider conformance suite.
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod admin;
mod config;
mod current;
mod drain;
mod error;
mod executor;
mod fire;
mod keepalive;
mod latch;
mod memory;
mod observe;
mod owner;
mod provider;
#[cfg(feature = "scheduler")]
mod schedule;
#[cfg(feature = "scheduler")]
mod scheduler;
mod signal;
#[cfg(test)]
mod test_observe;
#[cfg(feature = "testkit")]
pub mod testkit;

#[doc(hidden)]
#[path = "macro_support.rs"]
pub mod __private;

pub use admin::{ELECTION_MARK, LockAdmin, LockEntry, election_owner_id};
/// The `#[async_trait]` attribute [`LockProvider`] implementations need, re-exported so a custom
/// store depends on nothing else.
pub use async_trait::async_trait;
/// The `chrono` crate, whose `DateTime<Utc>` [`LockRecord`] and [`Fire`] carry.
pub use chrono;
pub use config::{
    DEFAULT_MAX_NAME_LEN, LockConfig, LockConfigBuilder, MAX_DURATION, validate_at_least,
    validate_at_most, validate_name,
};
pub use current::{
    LockHandle, assert_locked, current_lock, is_locked, set_lock_assertions,
    without_lock_assertions,
};
pub use drain::Drained;
pub use error::{Error, Result};
pub use executor::{
    DEFAULT_CALL_TIMEOUT, Execution, LockGuard, LockingTaskExecutor, LockingTaskExecutorBuilder,
    default_executor,
};
pub use fire::{Fire, FireClaim, fire_decision};
pub use latch::{
    KnownLeader, LeaderEvent, LeaderEvents, LeaderLatch, LeaderLatchConfig,
    LeaderLatchConfigBuilder, LeaderState, LeaderTerm, StepDownReason,
};
pub use memory::InMemoryLockProvider;
pub use owner::{MAX_OWNER_ID_LEN, OWNER_ID_ENV, default_owner_id};
pub use provider::{LockProvider, LockRecord};
#[cfg(feature = "scheduler")]
pub use schedule::Schedule;
#[cfg(feature = "scheduler")]
pub use scheduler::{
    Job, JobOutput, JobStatus, LastRun, OnHeld, RunContext, RunOutcome, Scheduler,
};
pub use shedlock_duration::{ParseError as DurationParseError, parse as parse_duration};
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
pub use signal::shutdown_signal;
