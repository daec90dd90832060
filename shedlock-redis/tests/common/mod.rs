//! What the Redis test files share: server URLs (skip locally, fail on CI), providers per
//! holder, and the conformance harness.

// Each test binary uses a different part of this module.
#![allow(dead_code)]

pub(crate) mod proxy;
pub(crate) mod server;

use std::sync::Arc;
use std::time::Duration;

use shedlock_core::LockProvider;
use shedlock_core::conformance::Harness;
use shedlock_redis::{RedLockProvider, RedisLockProvider};

/// The value of `var`, or `None` after one line saying the tests were skipped.
///
/// # Panics
/// When the variable is missing and `CI=true`: on CI a server that is not there is a failure,
/// never a silent skip.
pub(crate) fn env_url(var: &str, what: &str, example: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("{var} is not set but CI=true: the {what} tests must run on CI (e.g. {example})")
        }
        _ => {
            // Written to stderr directly: cargo test would capture `println!` of a passing test.
            let line =
                format!("skipped: {var} not set (set it to run {what} tests, e.g. {example})\n");
            let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
            None
        }
    }
}

/// `SHEDLOCK_TEST_REDIS_URL`.
pub(crate) fn redis_url() -> Option<String> {
    env_url("SHEDLOCK_TEST_REDIS_URL", "Redis", "redis://127.0.0.1:6379")
}

/// `SHEDLOCK_TEST_REDLOCK_URLS`, split at commas.
pub(crate) fn redlock_urls() -> Option<Vec<String>> {
    let urls = env_url(
        "SHEDLOCK_TEST_REDLOCK_URLS",
        "RedLock",
        "redis://127.0.0.1:6380,redis://127.0.0.1:6381,redis://127.0.0.1:6382",
    )?;
    Some(urls.split(',').map(|u| u.trim().to_owned()).collect())
}

/// A plain client, as an operator's `redis-cli`.
pub(crate) async fn connection(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// A key prefix no other test (thread or process) uses.
pub(crate) fn unique_prefix(base: &str) -> String {
    format!(
        "{}:",
        shedlock_core::conformance::unique_lock_name(&format!("test-{base}"))
    )
}

/// A provider on the single test server under a fresh prefix; `None` when skipped.
pub(crate) async fn redis(holder: &str) -> Option<RedisLockProvider> {
    let url = redis_url()?;
    Some(
        RedisLockProvider::builder()
            .key_prefix(unique_prefix("redis"))
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
            .key_prefix(unique_prefix("redlock"))
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
