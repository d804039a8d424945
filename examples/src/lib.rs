//! The examples' crate: each example in `examples/` is one self-contained file that copies into
//! a new project as is, with the dependencies of this crate's `Cargo.toml` it uses (no helper
//! crate; only the `cluster` demo runs the `shedlock-tests` replica program). This library only
//! compiles the READMEs' Rust examples as doc tests.
#![warn(missing_docs)]

/// The README's Rust examples, compiled as doc tests so they stay true to the code.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The crate READMEs' Rust examples (what crates.io shows), compiled here because they use
/// shedlock-core and shedlock-sqlx together.
#[doc = include_str!("../../shedlock-core/README.md")]
#[doc = include_str!("../../shedlock-sqlx/README.md")]
#[doc = include_str!("../../shedlock-macros/README.md")]
#[cfg(doctest)]
pub struct CrateReadmeDoctests;
