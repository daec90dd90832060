//! What the Redis test files share: providers per holder on the test servers, a plain client,
//! and the conformance harness. URLs, names and private servers come from
//! `shedlock-test-support`.

// Each test binary uses a different part of this module.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use shedlock_core::LockProvider;
use shedlock_core::conformance::Harness;
use shedlock_redis::{RedLockProvider, RedisLockProvider};
pub(crate) use shedlock_test_support::{redis_url, redlock_urls, unique_key_prefix};

/// A plain client, as an operator's `redis-cli`.
pub(crate) async fn connection(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// A provider on the single test server under a fresh prefix; `None` when skipped.
pub(crate) async fn redis(holder: &str) -> Option<RedisLockProvider> {
    let url = redis_url()?;
    Some(
        RedisLockProvider::builder()
            .key_prefix(unique_key_prefix("redis"))
            .holder(holder)
            .connect(&url)
            .await
            .expect("connect to SHEDLOCK_TEST_REDIS_URL"),
    )
}

/// A provider on the RedLock test masters under a fresh prefix; `None` when skipped.
pub(crate) async fn redlock(holder: &str) -> Option<RedLockProvider> {
    let urls = redlock_urls()?;
    Some(
        RedLockProvider::builder()
            .key_prefix(unique_key_prefix("redlock"))
            .holder(holder)
            // The default per-master timeout (1 s): on a loaded machine a 250 ms one marks a
            // master down now and then, and a lock whose release missed another master is then
            // refused until a probe sees the first back.
            .connect_redlock(&urls)
            .await
            .expect("connect to SHEDLOCK_TEST_REDLOCK_URLS"),
    )
}

/// The conformance harness for a real server: providers per holder, and real waiting.
pub(crate) struct RedisHarness {
    provider_for: Box<ProviderFor>,
}

type ProviderFor = dyn Fn(&str) -> Arc<dyn LockProvider> + Send + Sync;

impl RedisHarness {
    pub(crate) fn single(provider: RedisLockProvider) -> Self {
        RedisHarness {
            provider_for: Box::new(move |holder| Arc::new(provider.with_holder(holder).unwrap())),
        }
    }

    pub(crate) fn redlock(provider: RedLockProvider) -> Self {
        RedisHarness {
            provider_for: Box::new(move |holder| Arc::new(provider.with_holder(holder).unwrap())),
        }
    }
}

#[shedlock_core::async_trait]
impl Harness for RedisHarness {
    async fn provider(&self, holder: &str) -> Arc<dyn LockProvider> {
        (self.provider_for)(holder)
    }

    async fn pass_time(&self, duration: Duration) {
        tokio::time::sleep(duration).await;
    }
}
