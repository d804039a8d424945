//! Compile-time behaviour of `#[scheduled_lock]`: the errors users see (`ui/fail`, with the
//! expected `.stderr` committed next to each file) and the shapes that must compile warning-free
//! (`ui/pass`). Regenerate the `.stderr` files with
//! `TRYBUILD=overwrite cargo test -p shedlock-macros --test ui`, then read them.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("tests/ui/pass/*.rs");
    cases.compile_fail("tests/ui/fail/*.rs");
}
