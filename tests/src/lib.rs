//! The test harness of shedlock-rs's end-to-end tests: the `replica` binary (the replica program
//! of [`shedlock_demo`], whose `cluster` example is the demo), the graceful-drain tests' `drainer`
//! ([`drainer`]), private throwaway servers ([`throwaway`], [`private_redis`], [`private_etcd`]), a
//! private `PgBouncer` in transaction mode ([`pgbouncer`]), a TCP proxy that cuts or black-holes a
//! connection ([`proxy`]), test certificates made at run time and servers that use them ([`tls`],
//! [`tls_servers`]) and a log capture for assertions on `tracing` output ([`log_capture`]).
//!
//! Multi-process tests (crash, restart, lost connectivity, clock skew) start the `replica` binary
//! (`env!("CARGO_BIN_EXE_replica")`) with `run` and their own `--job` specs, lock table, run-log
//! table and session, and read its events and run log through [`shedlock_demo`]. The
//! graceful-drain tests start the package's other binary, `drainer`.
#![warn(missing_docs)]

pub mod drainer;
pub mod log_capture;
pub mod pgbouncer;
pub mod private_etcd;
pub mod private_redis;
pub mod proxy;
pub mod throwaway;
pub mod tls;
pub mod tls_servers;
