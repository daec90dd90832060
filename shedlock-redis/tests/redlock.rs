//! `RedLockProvider` against three real, independent Redis masters: the conformance suite
//! and RedLock specifics (majorities, token agreement). Needs `SHEDLOCK_TEST_REDLOCK_URLS`;
//! skipped without it, failed without it when `CI=true`.

mod common;

use common::RedisHarness;

mod conformance {
    use super::*;

    async fn harness() -> Option<RedisHarness> {
        Some(RedisHarness::redlock(common::redlock("conformance").await?))
    }

    shedlock_core::conformance_tests!(harness());
}
