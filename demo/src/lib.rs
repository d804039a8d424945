//! The replica program of shedlock-rs's `cluster` demo and of its end-to-end tests, as a library.
//!
//! One program, [`cli::main`], serves as the `cluster` example of this package and as the
//! `replica` binary of `shedlock-tests`: its `cluster` command ([`cluster`]) starts several
//! processes of itself with the `run` command ([`replica`]), each running locked jobs against one
//! shared database and reporting [`event::Event`]s as JSON lines; every run is recorded with the
//! database's clock in the [`runlog`], from which the orchestrator counts overlapping runs (there
//! must be none).
//!
//! Multi-process tests (crash, restart, lost connectivity, clock skew) start the same program
//! (shedlock-tests' `env!("CARGO_BIN_EXE_replica")`) with `run` and their own `--job` specs, lock
//! table, run-log table and session, and read its events and run log through this library.
//!
//! # Features
//!
//! Only SQLite (`sqlite:`, the default: a file in a temporary directory) is always built, so
//! that the first `cargo run --example cluster` builds one database driver. `postgres` adds
//! `postgres://` (and the leader tests' [`heartbeat`]s), `mysql` adds `mysql://` (MySQL and
//! MariaDB), `redis` adds `redis://` (shedlock-redis) and `etcd` adds `etcd://` (shedlock-etcd);
//! without its feature such a URL is refused with an error naming it:
//!
//! ```text
//! cargo run --example cluster --features postgres -- --database-url postgres://…
//! ```
//!
//! shedlock-tests, which runs the replica program on every store, enables them all.
#![warn(missing_docs)]

pub mod cli;
pub mod cluster;
pub mod database;
pub mod demo;
pub mod event;
#[cfg(feature = "postgres")]
pub mod heartbeat;
pub mod job;
pub mod leader;
mod random;
pub mod replica;
pub mod runlog;
pub mod store;
