//! ZooKeeper roots no other test (thread or process) uses, built on the conformance kit's
//! `unique_lock_name`.

use shedlock_conformance::unique_lock_name;

/// The parent node of every ZooKeeper test root.
pub const ZK_TEST_PARENT: &str = "/shedlock-test";

/// A ZooKeeper root under [`ZK_TEST_PARENT`].
pub fn unique_zk_root(base: &str) -> String {
    format!("{ZK_TEST_PARENT}/{}", unique_lock_name(base))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_differ_per_call_and_sit_under_the_parent() {
        assert_ne!(unique_zk_root("r"), unique_zk_root("r"));
        assert!(unique_zk_root("r").starts_with("/shedlock-test/r-"));
    }
}
