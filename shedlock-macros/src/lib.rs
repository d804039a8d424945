//! `#[scheduled_lock]`: run an `async fn` only when its lock is free. So a task scheduled on every
//! replica runs on one of them at a time.
//!
//! Use it through [`shedlock-core`](https://docs.rs/shedlock-core), which re-exports it. The
//! re-export is behind the feature `macros`, on by default. The generated code calls
//! shedlock-core's hidden support module. Write `use shedlock_core::scheduled_lock;`. Then put
//! `#[scheduled_lock(name = "nightly-report", at_most = "10m")]` on an `async fn`.
//!
//! The documentation is on
//! [`shedlock_core::scheduled_lock`](https://docs.rs/shedlock-core/latest/shedlock_core/attr.scheduled_lock.html).
//! It has every argument, the examples and what the attribute expands to. The examples are compiled
//! and run as shedlock-core's doc tests.
#![warn(missing_docs)]

mod args;
mod errors;
mod expand;
mod name;

use proc_macro::TokenStream;

/// The attribute is implemented in the `shedlock-macros` crate.
///
/// Use it through shedlock-core's re-export, `shedlock_core::scheduled_lock`. The re-export is
/// behind the feature `macros`, on by default. Its documentation has every argument, the examples
/// and what the attribute expands to.
#[proc_macro_attribute]
pub fn scheduled_lock(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::scheduled_lock(args.into(), item.into()).into()
}
