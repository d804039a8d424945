//! `#[scheduled_lock]`: run an `async fn` only when its lock is free, so a task scheduled on every
//! replica runs on one of them at a time.
//!
//! Use it through [`shedlock-core`](https://docs.rs/shedlock-core), which re-exports it behind the
//! feature `macros`, on by default, and whose hidden support module the generated code calls. Write
//! `use shedlock_core::scheduled_lock;`, then put `#[scheduled_lock(name = "nightly-report",
//! at_most = "10m")]` on an `async fn`. Its documentation on
//! [`shedlock_core::scheduled_lock`](https://docs.rs/shedlock-core/latest/shedlock_core/attr.scheduled_lock.html)
//! has every argument, the examples, run as shedlock-core's doc tests, and what the attribute
//! expands to.
#![warn(missing_docs)]

mod args;
mod errors;
mod expand;
mod name;

use proc_macro::TokenStream;

/// The attribute is implemented in the `shedlock-macros` crate. Use it through shedlock-core's
/// re-export, `shedlock_core::scheduled_lock`, whose documentation has every argument, the examples
/// and what the attribute expands to.
#[proc_macro_attribute]
pub fn scheduled_lock(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::scheduled_lock(args.into(), item.into()).into()
}
