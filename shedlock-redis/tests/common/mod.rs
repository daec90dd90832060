//! What the Redis test files share: providers on the test servers under fresh prefixes and a
//! plain client. URLs, names, private servers and the conformance harness come from
//! `shedlock-test-support`.

// Each test binary uses a different part of this module.
#![allow(dead_code)]

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
            .connect(&urls)
            .await
            .expect("connect to SHEDLOCK_TEST_REDLOCK_URLS"),
    )
}

/// Lock `name` as each master at `urls` holds it (under `key_prefix`), in their order: read by
/// a single-server provider on each, as an operator looks at one master.
pub(crate) async fn master_records<I, S>(
    urls: I,
    key_prefix: &str,
    name: &str,
) -> Vec<Result<Option<shedlock_core::LockRecord>, shedlock_core::Error>>
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    use shedlock_core::LockInspector as _;
    let mut records = Vec::new();
    for url in urls {
        let master = RedisLockProvider::builder()
            .key_prefix(key_prefix)
            .connect(url.as_ref())
            .await
            .expect("connect to a master");
        records.push(master.lock_record(name).await);
    }
    records
}
