//! Database URLs from the environment (skipped locally, failed on CI) and table names unique
//! to one test. Shared with other crates' tests that run against the same servers
//! (`#[path = "…/shedlock-sqlx/tests/common/env.rs"]`).

/// The URL in `var`, or `None` after one line saying the tests were skipped.
///
/// # Panics
/// When the variable is missing and `CI=true`: on CI a database that is not there is a failure,
/// never a silent skip.
pub(crate) fn database_url(var: &str, database: &str, example: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var("CI").as_deref() == Ok("true") => {
            panic!(
                "{var} is not set but CI=true: the {database} tests must run on CI (e.g. {example})"
            )
        }
        _ => {
            // Written to stderr directly: cargo test would capture `println!` of a passing test.
            let line = format!(
                "skipped: {var} not set (set it to run {database} tests, e.g. {example})\n"
            );
            let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
            None
        }
    }
}

/// A table name no other test (thread or process) uses: a unique lock name, as an identifier.
pub(crate) fn unique_table(base: &str) -> String {
    shedlock_core::conformance::unique_lock_name(base).replace('-', "_")
}
