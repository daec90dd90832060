//! Run records on one server and on the RedLock masters: the run-record conformance cases,
//! a stalled holder's late end, retention, and records corrupted by hand. Needs
//! `SHEDLOCK_TEST_REDIS_URL` and `SHEDLOCK_TEST_REDLOCK_URLS`; skipped without them, failed
//! without them when `CI=true`.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{connection, redis_url, redlock_urls, unique_key_prefix};
use redis::AsyncCommands as _;
use shedlock_core::conformance::unique_lock_name;
use shedlock_core::{Error, LockProvider, RunEnd, RunOutcome, RunQuery, RunStart};
use shedlock_redis::{RedLockProvider, RedisLockProvider, RedisLockProviderBuilder};
use shedlock_test_support::runs::{
    assert_runs_error, end_runs, late_end_of_a_stalled_holder, run_tokens,
};
use shedlock_test_support::{RedisServer, ServerHarness};

fn builder(holder: &str) -> RedisLockProviderBuilder {
    RedisLockProvider::builder()
        .key_prefix(unique_key_prefix("runs"))
        .holder(holder)
}

async fn redis_with(builder: RedisLockProviderBuilder) -> Option<RedisLockProvider> {
    let url = redis_url()?;
    Some(
        builder
            .connect(&url)
            .await
            .expect("connect to SHEDLOCK_TEST_REDIS_URL"),
    )
}

async fn redlock_with(builder: RedisLockProviderBuilder) -> Option<RedLockProvider> {
    let urls = redlock_urls()?;
    Some(
        builder
            .redlock()
            .connect(&urls)
            .await
            .expect("connect to SHEDLOCK_TEST_REDLOCK_URLS"),
    )
}

/// The record of `start` as the store holds it.
async fn only_run(provider: &dyn LockProvider, lock: &str) -> shedlock_core::RunRecord {
    let log = provider.run_log().expect("a run log");
    let records = log.runs(&RunQuery::lock(lock)).await.expect("runs");
    let [record] = &records[..] else {
        panic!("one record expected: {records:?}")
    };
    record.clone()
}

/// Only the newest `runs_per_lock` records of a lock stay.
async fn the_newest_runs_stay(provider: &dyn LockProvider) {
    let log = provider.run_log().expect("a run log");
    let lock = unique_lock_name("runs-kept");
    end_runs(log, &lock, 1..=5).await;
    assert_eq!(run_tokens(log, &lock).await, [5, 4, 3]);
}

/// A record edited by hand into something the scripts never write: reads and ends fail with
/// a store error naming the key and field, and nothing panics.
async fn corrupt_record_is_a_store_error(
    provider: &dyn LockProvider,
    prefix: &str,
    urls: &[String],
) {
    let log = provider.run_log().expect("a run log");
    let lock = unique_lock_name("runs-corrupt");
    let start = RunStart::new(&lock, "job", None, "a", 7);
    log.run_started(&start).await.unwrap();
    let key = format!("runs:{prefix}records:{lock}");
    let field = "00000000000000000007:0000000001";
    for url in urls {
        let mut redis = connection(url).await;
        let () = redis.hset(&key, field, "{not json").await.unwrap();
    }
    let read = log.runs(&RunQuery::lock(&lock)).await;
    let end = log.run_finished(&start, &RunEnd::succeeded()).await;
    assert_runs_error(read, &lock, &[&key, field]);
    assert_runs_error(end, &lock, &[&key, field]);
    let mut redis = connection(&urls[0]).await;
    let kept: String = redis.hget(&key, field).await.unwrap();
    assert_eq!(kept, "{not json", "nothing was written over it");
}

/// The cases of both providers: `$connect` connects a builder's provider, `$urls` are the
/// servers it is on.
macro_rules! shared_cases {
    ($connect:ident, $urls:expr) => {
        mod conformance {
            use super::*;

            async fn harness() -> Option<ServerHarness> {
                let provider = $connect(builder("a")).await?;
                let log = provider.clone();
                Some(
                    ServerHarness::new(move |holder| {
                        Arc::new(provider.with_holder(holder).unwrap())
                    })
                    .with_run_log(log),
                )
            }

            shedlock_core::runs_tests!(harness());
        }

        #[tokio::test]
        async fn a_late_end_does_not_overwrite_the_first() {
            let Some(stalled) = $connect(builder("stalled")).await else {
                return;
            };
            let other = stalled.with_holder("other").unwrap();
            late_end_of_a_stalled_holder(&stalled, &other).await;
        }

        #[tokio::test]
        async fn the_newest_runs_per_lock_stay() {
            if let Some(provider) = $connect(builder("a").runs_per_lock(3)).await {
                the_newest_runs_stay(&provider).await;
            }
        }

        #[tokio::test]
        async fn a_corrupt_record_is_a_store_error() {
            let Some(provider) = $connect(builder("a")).await else {
                return;
            };
            let prefix = provider.key_prefix().to_owned();
            corrupt_record_is_a_store_error(&provider, &prefix, &$urls).await;
        }
    };
}

mod single {
    use super::*;

    shared_cases!(redis_with, [redis_url().unwrap()]);

    #[tokio::test]
    async fn records_expire_with_the_retention() {
        let Some(provider) = redis_with(builder("a").run_retention(Duration::from_secs(60))).await
        else {
            return;
        };
        let lock = unique_lock_name("runs-expire");
        let log = provider.run_log().unwrap();
        log.run_started(&RunStart::new(&lock, "job", None, "a", 1))
            .await
            .unwrap();
        let mut redis = connection(&redis_url().unwrap()).await;
        let prefix = format!("runs:{}", provider.key_prefix());
        for key in [
            format!("{prefix}records:{lock}"),
            format!("{prefix}started:{lock}"),
        ] {
            let ttl: i64 = redis.pttl(&key).await.unwrap();
            assert!((1..=60_000).contains(&ttl), "{key} expires in {ttl} ms");
        }
        let locks: Vec<String> = redis.zrange(format!("{prefix}locks"), 0, -1).await.unwrap();
        assert_eq!(locks, std::slice::from_ref(&lock));
        assert_eq!(only_run(&provider, &lock).await.fencing_token, 1);
    }

    /// A write deletes the lock's records started longer than the retention before it
    /// (Redis time), and keeps the others.
    #[tokio::test]
    async fn runs_older_than_the_retention_go() {
        let retention = Duration::from_secs(1);
        let Some(provider) = redis_with(builder("a").run_retention(retention)).await else {
            return;
        };
        let log = provider.run_log().unwrap();
        let lock = unique_lock_name("runs-aged");
        let mut started = Vec::new();
        for token in 1..=3 {
            let start = RunStart::new(&lock, "job", None, "a", token);
            started.push(log.run_started(&start).await.unwrap().started_at);
            // Time has to pass on Redis's clock; nothing to wait on but time.
            if token < 3 {
                tokio::time::sleep(retention * 3 / 5).await;
            }
        }
        let records = log.runs(&RunQuery::lock(&lock)).await.unwrap();
        let tokens: Vec<u64> = records.iter().map(|r| r.fencing_token).collect();
        // The first started more than the retention before the third; the second is kept
        // when it started within the retention (it did, unless this machine stalled).
        let cutoff = started[2] - retention;
        let expected: Vec<u64> = [3, 2]
            .into_iter()
            .filter(|&token| started[token as usize - 1] >= cutoff)
            .collect();
        assert!(started[0] < cutoff, "{started:?}");
        assert_eq!(tokens, expected, "{started:?}");
    }

    #[tokio::test]
    async fn bad_run_settings_name_their_field() {
        for (builder, field) in [
            (builder("a").runs_per_lock(0), "runs_per_lock"),
            (builder("a").run_retention(Duration::ZERO), "run_retention"),
            (
                builder("a").key_prefix("x:").runs_key_prefix("x:runs:"),
                "runs_key_prefix",
            ),
        ] {
            match builder.connect("redis://127.0.0.1:1").await {
                Err(Error::InvalidConfig { field: got, .. }) => assert_eq!(got, field),
                other => panic!("{field}: expected invalid config, got {other:?}"),
            }
        }
    }
}

mod redlock {
    use super::*;

    fn builder(holder: &str) -> RedisLockProviderBuilder {
        super::builder(holder).key_prefix(unique_key_prefix("redlock-runs"))
    }

    shared_cases!(redlock_with, redlock_urls().unwrap());

    /// A record on a minority of the masters is not a run; an end on a minority is not its end.
    #[tokio::test]
    async fn a_minority_decides_nothing() {
        let Some(provider) = redlock_with(builder("a")).await else {
            return;
        };
        let urls = redlock_urls().unwrap();
        let lock = unique_lock_name("runs-minority");
        let log = provider.run_log().unwrap();
        let start = RunStart::new(&lock, "job", None, "a", 3);
        log.run_started(&start).await.unwrap();
        let key = format!("runs:{}records:{lock}", provider.key_prefix());
        let field = "00000000000000000003:0000000001";
        // One master alone holds an end, as when the end reached only it.
        let mut first = connection(&urls[0]).await;
        let running: String = first.hget(&key, field).await.unwrap();
        let ended = running.replace("\"running\"", "\"succeeded\"");
        let () = first.hset(&key, field, &ended).await.unwrap();
        let record = only_run(&provider, &lock).await;
        assert_eq!(record.outcome, RunOutcome::Running, "{record:?}");
        // A second master agrees: now a majority holds the end.
        let () = connection(&urls[1])
            .await
            .hset(&key, field, &ended)
            .await
            .unwrap();
        assert_eq!(
            only_run(&provider, &lock).await.outcome,
            RunOutcome::Succeeded
        );
        // A run that only one master holds is not listed.
        let () = connection(&urls[2]).await.del(&key).await.unwrap();
        let () = first.del(&key).await.unwrap();
        let records = log.runs(&RunQuery::lock(&lock)).await.unwrap();
        assert!(records.is_empty(), "{records:?}");
    }

    /// With one master of three down, runs are recorded and read on the other two; with two
    /// down, recording and reading fail with a store error, and nothing panics.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_majority_must_answer() {
        let Some(mut servers) = (0..3)
            .map(|_| RedisServer::start(&[]))
            .collect::<Option<Vec<RedisServer>>>()
        else {
            return;
        };
        let provider = RedLockProvider::builder()
            .holder("a")
            .timeout(Duration::from_millis(250))
            .connect(servers.iter().map(RedisServer::url))
            .await
            .unwrap();
        let log = provider.run_log().unwrap();
        let lock = unique_lock_name("runs-quorum");
        servers[0].kill();
        let start = RunStart::new(&lock, "job", None, "a", 1);
        log.run_started(&start).await.unwrap();
        log.run_finished(&start, &RunEnd::succeeded())
            .await
            .unwrap();
        assert_eq!(
            only_run(&provider, &lock).await.outcome,
            RunOutcome::Succeeded
        );

        servers[1].kill();
        let next = RunStart::new(&lock, "job", None, "a", 2);
        for result in [
            log.run_started(&next).await.map(drop),
            log.run_finished(&next, &RunEnd::succeeded()).await,
            log.runs(&RunQuery::lock(&lock)).await.map(drop),
        ] {
            assert_runs_error(result, &lock, &[]);
        }
    }
}
