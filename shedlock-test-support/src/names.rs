//! Names no other test (thread or process) uses, so that tests share one server without
//! seeing each other's locks. All are built on the conformance suite's
//! [`unique_lock_name`] (the public one of `shedlock-core`'s `test-util` feature).

pub use shedlock_conformance::unique_lock_name;

/// The parent node of every ZooKeeper test root.
pub const ZK_TEST_PARENT: &str = "/shedlock-test";

/// A table name: a unique lock name as an SQL identifier (`-` becomes `_`).
pub fn unique_table(base: &str) -> String {
    unique_lock_name(base).replace('-', "_")
}

/// A Redis key prefix, ending in `:`.
pub fn unique_key_prefix(base: &str) -> String {
    format!("{}:", unique_lock_name(&format!("test-{base}")))
}

/// A ZooKeeper root under [`ZK_TEST_PARENT`].
pub fn unique_zk_root(base: &str) -> String {
    format!("{ZK_TEST_PARENT}/{}", unique_lock_name(base))
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
        assert!(unique_zk_root("r").starts_with("/shedlock-test/r-"));
    }
}
