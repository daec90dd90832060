//! The test servers' URLs from the environment (`source /tmp/env.sh` or the CI script sets
//! them). A test that finds none prints one visible `skipped: …` line and returns; under
//! `CI=true` a missing server is a failure, never a silent skip.

use std::fmt::Display;

/// Whether this run is CI's (`CI=true`), where nothing may be skipped.
pub fn on_ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// Says on stderr that a test is skipped and why (`skipped: <reason>`).
///
/// # Panics
/// Under `CI=true`: on CI whatever a test needs must be there.
pub fn skip(reason: impl Display) {
    assert!(
        !on_ci(),
        "CI=true, so this is a failure, not a skip: {reason}"
    );
    // Written to stderr directly: cargo test captures `println!` of a passing test.
    let line = format!("skipped: {reason}\n");
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
}

/// The value of `var`, or `None` after [`skip`] said which variable to set for `what` (e.g.
/// `PostgreSQL`), with `example` as a value. The value itself is never printed: it may hold a
/// password.
///
/// # Panics
/// When the variable is missing or empty and `CI=true`.
pub fn env_url(var: &str, what: &str, example: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            skip(format_args!(
                "{var} not set (set it to run {what} tests, e.g. {example})"
            ));
            None
        }
    }
}

/// `SHEDLOCK_TEST_PG_URL`.
pub fn pg_url() -> Option<String> {
    env_url(
        "SHEDLOCK_TEST_PG_URL",
        "PostgreSQL",
        "postgres://root@127.0.0.1:5432/test",
    )
}

/// `SHEDLOCK_TEST_MYSQL_URL`.
pub fn mysql_url() -> Option<String> {
    env_url(
        "SHEDLOCK_TEST_MYSQL_URL",
        "MySQL/MariaDB",
        "mysql://root@127.0.0.1:3306/test",
    )
}

/// `SHEDLOCK_TEST_REDIS_URL`: the single Redis server.
pub fn redis_url() -> Option<String> {
    env_url("SHEDLOCK_TEST_REDIS_URL", "Redis", "redis://127.0.0.1:6379")
}

/// `SHEDLOCK_TEST_REDLOCK_URLS`: the independent RedLock masters, split at commas.
pub fn redlock_urls() -> Option<Vec<String>> {
    let urls = env_url(
        "SHEDLOCK_TEST_REDLOCK_URLS",
        "RedLock",
        "redis://127.0.0.1:6380,redis://127.0.0.1:6381,redis://127.0.0.1:6382",
    )?;
    Some(urls.split(',').map(|u| u.trim().to_owned()).collect())
}

/// `SHEDLOCK_TEST_ZK_URL`: the ensemble's connect string.
pub fn zk_url() -> Option<String> {
    env_url(
        "SHEDLOCK_TEST_ZK_URL",
        "ZooKeeper",
        "127.0.0.1:2181,127.0.0.1:2182,127.0.0.1:2183 (eval \"$(bash .ci/zookeeper.sh start)\")",
    )
}

/// `SHEDLOCK_TEST_ETCD_URL`: the etcd cluster's endpoints, comma-separated.
pub fn etcd_url() -> Option<String> {
    env_url(
        "SHEDLOCK_TEST_ETCD_URL",
        "etcd",
        "http://127.0.0.1:2379,http://127.0.0.1:22379,http://127.0.0.1:32379 (eval \"$(bash .ci/etcd.sh start)\")",
    )
}

/// `SHEDLOCK_TEST_WEBDRIVER_URL`: a WebDriver server driving a browser, for the dashboard's
/// browser tests (`.ci/run` starts Debian's `chromedriver` for Chromium).
pub fn webdriver_url() -> Option<String> {
    env_url(
        "SHEDLOCK_TEST_WEBDRIVER_URL",
        "browser (dashboard)",
        "http://127.0.0.1:4444 (apt-get install chromium chromium-driver; chromedriver --port=4444)",
    )
}
