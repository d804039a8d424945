//! shedlock-core's integration tests, one module per area, in one test binary (one link, and
//! their tests run side by side). `signal.rs` keeps a binary of its own: tokio's SIGTERM handler
//! stays installed for the process. Run one area with a filter:
//! `cargo test -p shedlock-core --test integration executor::`.

mod admin;
mod conformance;
mod drain;
mod executor;
mod jobs;
mod old_paths;
mod pause;
