//! The tests that assert on what this process logs (`shedlock_tests::log_capture`) or on the spans
//! it exports through OpenTelemetry: each installs a `tracing` subscriber for its thread. They have
//! a binary of their own, so that no other test's code registers `tracing` call sites in this
//! process while they install and drop subscribers.

mod fault_stale_connections;
mod otel_span;
mod scheduler_java_table;
mod startup_store;
