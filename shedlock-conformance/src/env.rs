//! A test server's URL from the environment. A test that finds none prints one visible
//! `skipped: …` line and returns; under `CI=true` a missing server is a failure, never a silent
//! skip: what a store's tests need on a newcomer's laptop and on CI alike.

use std::fmt::Display;

/// Whether this run is CI's (`CI=true`), where nothing may be skipped.
pub fn on_ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// Says on stderr that a test is skipped and why (`skipped: <reason>`).
///
/// # Panics
/// Under `CI=true`: on CI whatever a test needs must be there.
pub fn skip(reason: impl Display) {
    assert!(
        !on_ci(),
        "CI=true, so this is a failure, not a skip: {reason}"
    );
    // Written to stderr directly: cargo test captures `println!` of a passing test.
    let line = format!("skipped: {reason}\n");
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
}

/// The value of `var`, or `None` after [`skip`] said which variable to set for `what` (e.g.
/// `PostgreSQL`), with `example` as a value. The value itself is never printed: it may hold a
/// password.
///
/// # Panics
/// When the variable is missing or empty and `CI=true`.
pub fn env_url(var: &str, what: &str, example: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            skip(format_args!(
                "{var} not set (set it to run {what} tests, e.g. {example})"
            ));
            None
        }
    }
}
