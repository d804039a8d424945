//! Helpers of the shedlock-rs benchmark: statistics over interleaved slices, the report (a table
//! per database, or JSON rows), and Java ShedLock's SQL statements loaded at run time for the
//! comparison baseline.
//!
//! The benchmark itself is this crate's `locks` bench target, which needs Postgres, MariaDB and
//! SQLite and runs only under `cargo bench`:
//!
//! ```text
//! cargo bench -p shedlock-bench -- --quick          # about a minute, all three databases
//! cargo bench -p shedlock-bench -- --quick --json   # the same as JSON rows on stdout
//! ```
//!
//! See `BENCHMARKS.md` at the repository root for what it measures and the figures.
#![warn(missing_docs)]

pub mod java;
pub mod report;
pub mod stats;
