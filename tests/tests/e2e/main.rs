//! The end-to-end and multi-process tests, one module per scenario, in one test binary: one link
//! instead of one per file, and their tests run side by side (most of their time is waiting on
//! replica processes and private servers) instead of one binary after another. Run one scenario
//! with a filter: `cargo test -p shedlock-tests --test e2e fault_network::`.
//!
//! libtest starts a binary's tests in the order of their names, 4 at a time here: the scenarios
//! with the longest tests (`cluster_restarts_soak`, about 40 s each with the databases;
//! `cluster_scheduler`, about 20 s each) sort first, so that no long test starts last (43-44 s
//! for the binary when the 20 s ones were `scheduler_processes`, 32-35 s after, without
//! databases on 2 cores).
//!
//! The tests that assert on this process's log (`tracing`) are in their own binary, `tests/logs/`.
//! Here `cluster_restarts_soak` installs a global subscriber (DEBUG of the shedlock crates, kept
//! in memory until the binary exits) only to print a failing fire's log; nothing asserts on it.

mod fault_support;

mod cluster_restarts_soak;
mod cluster_scheduler;
mod cluster_scheduler_etcd;
#[cfg(feature = "apalis")]
mod cron_apalis;
// The dashboard in headless Chromium: shedlock-web, served with axum (the `web` feature).
#[cfg(feature = "web")]
mod dashboard_browser;
mod drain_processes;
mod e2e_demo;
mod fault_clock;
mod fault_crash;
mod fault_input;
mod fault_network;
mod fault_restart;
mod fault_store;
mod job_state_processes;
mod leader_processes;
mod leader_redis;
mod lost_reply;
mod macro_sqlite;
mod pooler_pgbouncer;
mod shutdown_handover;
mod steer_processes;
mod time_zones;
// apalis and shedlock-apalis, with the tower layer: the features `apalis` and `web`, on by default.
#[cfg(all(feature = "apalis", feature = "web"))]
mod tower_apalis;
// axum and the tower layer: the package's `web` feature, on by default.
#[cfg(feature = "web")]
mod tower_layer;
