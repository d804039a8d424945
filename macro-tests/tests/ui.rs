//! Compile-time behaviour of `#[scheduled_lock]`: the errors users see (`ui/fail`, with the
//! expected `.stderr` committed next to each file). Regenerate the `.stderr` files with
//! `TRYBUILD=overwrite cargo test -p shedlock-macro-tests --test ui`, then read them.
//!
//! The shapes that must compile warning-free (`ui/pass`) are not trybuild cases: they are the
//! plain test targets `pass_shapes` and `pass_send` (see `Cargo.toml`), built under their own
//! `#![deny(warnings, clippy::pedantic)]` and run like trybuild would run them. With only
//! compile-fail cases trybuild runs `cargo check` (no code generation), which keeps its own build
//! of the dev-dependencies cheap.

#[test]
fn ui() {
    trybuild::TestCases::new().compile_fail("tests/ui/fail/*.rs");
}
