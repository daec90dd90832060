//! Compile-time behaviour of `#[scheduled]` and `#[scheduler_lock]`: every mistake is an error
//! on the offending token (`tests/ui/fail`, with the expected output in `.stderr`), and every
//! supported form compiles and runs (`tests/ui/pass`).
//!
//! Regenerate the expected output with
//! `TRYBUILD=overwrite cargo test -p shedlock-macros --test ui`, then read each changed
//! `.stderr`. The test crates see the facade with its default features (this crate's
//! dev-dependencies), which keeps trybuild's own build small.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/fail/*.rs");
    cases.pass("tests/ui/pass/*.rs");
}
