//! `#[scheduled_lock]`: run an `async fn` only when its lock is free, so that a task scheduled
//! on every replica runs on one of them at a time.
//!
//! Use it through [`shedlock-core`](https://docs.rs/shedlock-core), which re-exports it (feature
//! `macros`, on by default) and whose hidden support module the generated code calls: `use
//! shedlock_core::scheduled_lock;`, then `#[scheduled_lock(name = "nightly-report", at_most =
//! "10m")]` on an `async fn`. Its documentation, with every argument, the examples (compiled
//! and run as shedlock-core's doc tests) and what the attribute expands to, is on
//! [`shedlock_core::scheduled_lock`](https://docs.rs/shedlock-core/latest/shedlock_core/attr.scheduled_lock.html).
#![warn(missing_docs)]

mod args;
mod errors;
mod expand;
mod name;

use proc_macro::TokenStream;

/// The attribute is implemented in the `shedlock-macros` crate and used through shedlock-core's
/// re-export, `shedlock_core::scheduled_lock` (feature `macros`, on by default), whose
/// documentation has every argument, the examples and what the attribute expands to.
#[proc_macro_attribute]
pub fn scheduled_lock(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::scheduled_lock(args.into(), item.into()).into()
}
