//! Names no other test (thread or process) uses, so that tests share one server without
//! seeing each other's locks.

use std::sync::atomic::{AtomicU64, Ordering};

/// A lock name unique to this process and call, so tests can share one store.
pub fn unique_lock_name(base: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!(
        "{base}-{}-{}-{nanos:x}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// A table name: a unique lock name as an SQL identifier (`-` becomes `_`).
pub fn unique_table(base: &str) -> String {
    unique_lock_name(base).replace('-', "_")
}

/// A key prefix for a key-value store, ending in `:`.
pub fn unique_key_prefix(base: &str) -> String {
    format!("{}:", unique_lock_name(&format!("test-{base}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_differ_per_call_and_fit_their_store() {
        let (a, b) = (unique_table("t"), unique_table("t"));
        assert_ne!(a, b);
        assert!(a.starts_with("t_") && !a.contains('-'), "{a}");
        assert!(unique_key_prefix("k").starts_with("test-k-"));
        assert!(unique_key_prefix("k").ends_with(':'));
    }
}
