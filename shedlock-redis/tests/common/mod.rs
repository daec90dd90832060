//! What the Redis test files share: providers on the test servers under fresh prefixes and a
//! plain client. URLs, names, private servers and the conformance harness come from
//! `shedlock-test-support`.

// Each test binary uses a different part of this module.
#![allow(dead_code)]

pub(crate) mod failover;

pub(crate) use shedlock_conformance::unique_key_prefix;
use shedlock_redis::{RedLockProvider, RedisLockProvider, RedisLockProviderBuilder};
pub(crate) use shedlock_test_support::{redis_url, redlock_urls};

/// A lock hash as versions before tick claims wrote it (no `last_tick`): an expired lease of
/// holder `x` with token 5.
pub(crate) const HASH_BEFORE_TICKS: [(&str, &str); 4] = [
    ("holder", "x"),
    ("token", "5"),
    ("locked_at", "1000"),
    ("lock_until", "2000"),
];

/// A plain client, as an operator's `redis-cli`.
pub(crate) async fn connection(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// A plain client on the single test server (call it after [`redis`] gave a provider).
pub(crate) async fn operator() -> redis::aio::MultiplexedConnection {
    connection(&redis_url().expect("SHEDLOCK_TEST_REDIS_URL")).await
}

/// A builder of the tests' providers: under a fresh prefix made of `base`, as `holder`.
fn builder(base: &str, holder: &str) -> RedisLockProviderBuilder {
    RedisLockProvider::builder()
        .key_prefix(unique_key_prefix(base))
        .holder(holder)
}

/// A provider on the single test server under a fresh prefix; `None` when skipped.
pub(crate) async fn redis(holder: &str) -> Option<RedisLockProvider> {
    let url = redis_url()?;
    let connected = builder("redis", holder).connect(&url).await;
    Some(connected.expect("connect to SHEDLOCK_TEST_REDIS_URL"))
}

/// `SHEDLOCK_TEST_REDIS_SENTINEL_URLS` (the sentinels, `redis://host:port` separated by
/// commas) and `SHEDLOCK_TEST_REDIS_SENTINEL_MASTER` (the master's name) as one
/// `redis+sentinel://` URL; `None` when skipped.
pub(crate) fn sentinel_url() -> Option<String> {
    let every = "every server: eval \"$(bash .ci/services.sh start)\"";
    let sentinels = shedlock_conformance::env::env_url(
        "SHEDLOCK_TEST_REDIS_SENTINEL_URLS",
        "Redis Sentinel",
        &format!(
            "redis://127.0.0.1:26379,redis://127.0.0.1:26380,redis://127.0.0.1:26381; {every}"
        ),
    )?;
    let master = shedlock_conformance::env::env_url(
        "SHEDLOCK_TEST_REDIS_SENTINEL_MASTER",
        "Redis Sentinel",
        &format!("shedlock; {every}"),
    )?;
    let hosts: Vec<&str> = sentinels
        .split(',')
        .map(|url| {
            url.trim()
                .trim_start_matches("redis://")
                .trim_end_matches('/')
        })
        .collect();
    Some(format!("redis+sentinel://{}/{master}", hosts.join(",")))
}

/// A provider on the test Sentinel set's master under a fresh prefix; `None` when skipped.
pub(crate) async fn sentinel(holder: &str) -> Option<RedisLockProvider> {
    let url = sentinel_url()?;
    let connected = builder("sentinel", holder).connect(&url).await;
    Some(connected.expect("connect through SHEDLOCK_TEST_REDIS_SENTINEL_URLS"))
}

/// `SHEDLOCK_TEST_REDIS_CLUSTER_URL`: the test cluster, `redis+cluster://host:port,…`.
pub(crate) fn cluster_url() -> Option<String> {
    shedlock_conformance::env::env_url(
        "SHEDLOCK_TEST_REDIS_CLUSTER_URL",
        "Redis Cluster",
        "redis+cluster://127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002; every server: eval \"$(bash .ci/services.sh start)\"",
    )
}

/// A provider on the test cluster under a fresh prefix; `None` when skipped.
pub(crate) async fn cluster(holder: &str) -> Option<RedisLockProvider> {
    let url = cluster_url()?;
    let connected = builder("cluster", holder).connect(&url).await;
    Some(connected.expect("connect to SHEDLOCK_TEST_REDIS_CLUSTER_URL"))
}

/// A provider on the RedLock test masters under a fresh prefix; `None` when skipped.
pub(crate) async fn redlock(holder: &str) -> Option<RedLockProvider> {
    let urls = redlock_urls()?;
    // The default per-master timeout (1 s): on a loaded machine a 250 ms one marks a master
    // down now and then, and a lock whose release missed another master is then refused until
    // a probe sees the first back.
    let connected = builder("redlock", holder).redlock().connect(&urls).await;
    Some(connected.expect("connect to SHEDLOCK_TEST_REDLOCK_URLS"))
}

/// Another process's provider on the single test server, under `provider`'s prefix: it shares
/// no connection or state with `provider`.
pub(crate) async fn another_redis(provider: &RedisLockProvider, holder: &str) -> RedisLockProvider {
    RedisLockProvider::builder()
        .key_prefix(provider.key_prefix())
        .holder(holder)
        .connect(&redis_url().expect("SHEDLOCK_TEST_REDIS_URL"))
        .await
        .expect("connect to SHEDLOCK_TEST_REDIS_URL")
}

/// Another process's provider on the RedLock test masters, under `provider`'s prefix: it
/// knows no token yet.
pub(crate) async fn another_redlock(provider: &RedLockProvider, holder: &str) -> RedLockProvider {
    RedLockProvider::builder()
        .key_prefix(provider.key_prefix())
        .holder(holder)
        .connect(redlock_urls().expect("SHEDLOCK_TEST_REDLOCK_URLS"))
        .await
        .expect("connect to SHEDLOCK_TEST_REDLOCK_URLS")
}

/// The conformance suite and the inspection cases, in a module `conformance`, on the provider
/// `$open` (`redis` or `redlock` of this module) gives: one provider per holder on one store,
/// the first as inspector.
#[macro_export]
macro_rules! conformance_suites {
    ($open:ident) => {
        mod conformance {
            use std::sync::Arc;

            use shedlock_conformance::ServerHarness;

            use $crate::common;

            async fn harness() -> Option<ServerHarness> {
                let provider = common::$open("conformance").await?;
                let inspector = provider.clone();
                Some(
                    ServerHarness::new(move |holder| {
                        Arc::new(provider.with_holder(holder).expect("valid holder"))
                    })
                    .with_inspector(inspector),
                )
            }

            shedlock_conformance::conformance_tests!(harness());

            mod inspection {
                use super::*;
                shedlock_conformance::inspection_tests!(harness());
            }
        }
    };
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
