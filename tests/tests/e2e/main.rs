//! The end-to-end and multi-process tests, one module per scenario, in one test binary: one link
//! instead of one per file, and their tests run side by side (most of their time is waiting on
//! replica processes and private servers) instead of one binary after another. Run one scenario
//! with a filter: `cargo test -p shedlock-tests --test e2e fault_network::`.
//!
//! The tests that capture this process's log (`tracing`) are in their own binary, `tests/logs/`.

mod fault_support;

mod drain_processes;
mod e2e_demo;
mod fault_clock;
mod fault_crash;
mod fault_input;
mod fault_network;
mod fault_restart;
mod fault_store;
mod leader_processes;
mod leader_redis;
mod macro_sqlite;
mod scheduler_processes;
mod time_zones;
