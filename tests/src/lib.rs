//! The replica program of shedlock-rs's end-to-end tests and of the `cluster` demo, as a library.
//!
//! One program, [`cli::main`], serves as the package's `replica` binary and as the `cluster`
//! example: its `cluster` command ([`cluster`]) starts several processes of itself with the `run`
//! command ([`replica`]), each running locked jobs against one shared database and reporting
//! [`event::Event`]s as JSON lines; every run is recorded with the database's clock in the
//! [`runlog`], from which the orchestrator counts overlapping runs (there must be none).
//!
//! Multi-process tests (crash, restart, lost connectivity, clock skew) start the same binary
//! (`env!("CARGO_BIN_EXE_replica")`) with `run` and their own `--job` specs, lock table, run-log
//! table and session, and read its events and run log through this library. The graceful-drain
//! tests start the package's other binary, `drainer` ([`drainer`]).
#![warn(missing_docs)]

pub mod cli;
pub mod cluster;
pub mod database;
pub mod demo;
pub mod drainer;
pub mod event;
pub mod heartbeat;
pub mod job;
pub mod leader;
pub mod log_capture;
pub mod proxy;
mod random;
pub mod replica;
pub mod runlog;
mod store;
pub mod throwaway;
