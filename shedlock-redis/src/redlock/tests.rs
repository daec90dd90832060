//! RedLock internals against the test masters.

use super::*;
use crate::proposals::MAX_NAMES;

/// An instance that acquires ever new lock names keeps a bounded amount of token
/// knowledge (it used to keep one entry per name for its whole life).
#[tokio::test]
async fn token_knowledge_stays_bounded() {
    let urls = match std::env::var("SHEDLOCK_TEST_REDLOCK_URLS") {
        Ok(urls) if !urls.is_empty() => urls,
        _ if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("SHEDLOCK_TEST_REDLOCK_URLS is not set but CI=true")
        }
        _ => {
            eprintln!("skipped: SHEDLOCK_TEST_REDLOCK_URLS not set");
            return;
        }
    };
    let urls: Vec<&str> = urls.split(',').map(str::trim).collect();
    let prefix = format!(
        "{}:",
        shedlock_conformance::unique_lock_name("test-bounded")
    );
    let provider = RedLockProvider::builder()
        .key_prefix(&prefix)
        .holder("bounded")
        .connect(&urls)
        .await
        .unwrap();
    for i in 0..MAX_NAMES + 100 {
        let lock =
            LockConfiguration::new(format!("name-{i}"), Duration::from_secs(30), Duration::ZERO)
                .unwrap();
        let lease = provider.acquire(&lock).await.unwrap().unwrap();
        assert!(provider.release(&lease).await.unwrap());
    }
    let known = provider.tokens.names();
    for url in urls {
        let mut redis = redis::Client::open(url)
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        for i in 0..MAX_NAMES + 100 {
            let () = redis::cmd("DEL")
                .arg(format!("{prefix}name-{i}"))
                .query_async(&mut redis)
                .await
                .unwrap();
        }
    }
    assert!(known <= MAX_NAMES, "{known} lock names remembered");
}
