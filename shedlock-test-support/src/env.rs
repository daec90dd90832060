//! The URLs of the servers this workspace's tests use, from the environment, read with the
//! conformance kit's [`env_url`]: without one a test is skipped (one `skipped: …` line per test
//! binary, every skip counted: `bash .ci/services.sh skipped`); under `CI=true` it fails.
//! `eval "$(bash .ci/services.sh start)"` starts every server and sets every variable (`.ci/run`
//! does the same).

use shedlock_conformance::env::env_url;

/// `SHEDLOCK_TEST_PG_URL`.
pub fn pg_url() -> Option<String> {
    env_url(
        "SHEDLOCK_TEST_PG_URL",
        "PostgreSQL",
        "postgres://root@127.0.0.1:5432/test; every server: eval \"$(bash .ci/services.sh start)\"",
    )
}

/// `SHEDLOCK_TEST_MYSQL_URL`.
pub fn mysql_url() -> Option<String> {
    env_url(
        "SHEDLOCK_TEST_MYSQL_URL",
        "MySQL/MariaDB",
        "mysql://root@127.0.0.1:3306/test; every server: eval \"$(bash .ci/services.sh start)\"",
    )
}

/// `SHEDLOCK_TEST_REDIS_URL`: the single Redis server.
pub fn redis_url() -> Option<String> {
    env_url(
        "SHEDLOCK_TEST_REDIS_URL",
        "Redis",
        "redis://127.0.0.1:6379; every server: eval \"$(bash .ci/services.sh start)\"",
    )
}

/// `SHEDLOCK_TEST_REDLOCK_URLS`: the independent RedLock masters, split at commas.
pub fn redlock_urls() -> Option<Vec<String>> {
    let urls = env_url(
        "SHEDLOCK_TEST_REDLOCK_URLS",
        "RedLock",
        "redis://127.0.0.1:6380,redis://127.0.0.1:6381,redis://127.0.0.1:6382; every server: eval \"$(bash .ci/services.sh start)\"",
    )?;
    Some(urls.split(',').map(|u| u.trim().to_owned()).collect())
}

/// `SHEDLOCK_TEST_ZK_URL`: the ensemble's connect string.
pub fn zk_url() -> Option<String> {
    env_url(
        "SHEDLOCK_TEST_ZK_URL",
        "ZooKeeper",
        "127.0.0.1:2181,127.0.0.1:2182,127.0.0.1:2183; every server: eval \"$(bash .ci/services.sh start)\", this ensemble alone: eval \"$(bash .ci/zookeeper.sh start)\"",
    )
}

/// `SHEDLOCK_TEST_ETCD_URL`: the etcd cluster's endpoints, comma-separated.
pub fn etcd_url() -> Option<String> {
    env_url(
        "SHEDLOCK_TEST_ETCD_URL",
        "etcd",
        "http://127.0.0.1:2379,http://127.0.0.1:22379,http://127.0.0.1:32379; every server: eval \"$(bash .ci/services.sh start)\", this cluster alone: eval \"$(bash .ci/etcd.sh start)\"",
    )
}

/// `SHEDLOCK_TEST_WEBDRIVER_URL`: a WebDriver server driving a browser, for the dashboard's
/// browser tests (`.ci/services.sh start` starts Debian's `chromedriver` for Chromium).
pub fn webdriver_url() -> Option<String> {
    env_url(
        "SHEDLOCK_TEST_WEBDRIVER_URL",
        "browser (dashboard)",
        "http://127.0.0.1:4444; every server: eval \"$(bash .ci/services.sh start)\", this one alone: apt-get install chromium chromium-driver; chromedriver --port=4444",
    )
}
