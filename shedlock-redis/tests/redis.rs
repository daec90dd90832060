//! `RedisLockProvider` against a real Redis: the conformance suite and Redis specifics (key
//! layout, release hints, inspection, bad input). Needs `SHEDLOCK_TEST_REDIS_URL`; skipped
//! without it, failed without it when `CI=true`.

mod common;

use common::RedisHarness;

mod conformance {
    use super::*;

    async fn harness() -> Option<RedisHarness> {
        Some(RedisHarness::single(common::redis("conformance").await?))
    }

    shedlock_core::conformance_tests!(harness());
}
