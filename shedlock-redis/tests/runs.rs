//! Run records on one server and on the RedLock masters: the run-record conformance cases,
//! a stalled holder's late end, retention, and records corrupted by hand. Needs
//! `SHEDLOCK_TEST_REDIS_URL` and `SHEDLOCK_TEST_REDLOCK_URLS`; skipped without them, failed
//! without them when `CI=true`.

mod common;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{connection, redis_url, redlock_urls, unique_key_prefix};
use redis::AsyncCommands as _;
use shedlock_conformance::ServerHarness;
use shedlock_conformance::history::{
    assert_runs_error, end_runs, late_end_of_a_stalled_holder, run_tokens,
};
use shedlock_conformance::unique_lock_name;
use shedlock_core::{Error, LockProvider, RUN_TRIM_SLACK, RunEnd, RunOutcome, RunQuery, RunStart};
use shedlock_redis::{RedLockProvider, RedisLockProvider, RedisLockProviderBuilder};
use shedlock_test_support::RedisServer;

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

/// The retention of the sweep test: long enough for a write and a read on a loaded machine.
const SWEEP_RETENTION: Duration = Duration::from_secs(2);

/// Redis's clock (`TIME`) on the server at `url`.
async fn redis_time(url: &str) -> SystemTime {
    let (seconds, micros): (u64, u64) = redis::cmd("TIME")
        .query_async(&mut connection(url).await)
        .await
        .unwrap();
    UNIX_EPOCH + Duration::from_secs(seconds) + Duration::from_micros(micros)
}

/// Whether each server at `urls` holds run `id` of `lock` under `runs_prefix`: in the lock's
/// hash, its sorted set, and the index of every lock.
async fn held(urls: &[String], runs_prefix: &str, lock: &str, id: &str) -> Vec<[bool; 3]> {
    let mut held = Vec::new();
    for url in urls {
        let mut redis = connection(url).await;
        let in_hash: bool = redis
            .hexists(format!("{runs_prefix}records:{lock}"), id)
            .await
            .unwrap();
        let in_set: Option<f64> = redis
            .zscore(format!("{runs_prefix}started:{lock}"), id)
            .await
            .unwrap();
        let in_index: Option<f64> = redis
            .zscore(format!("{runs_prefix}index"), format!("{id}:{lock}"))
            .await
            .unwrap();
        held.push([in_hash, in_set.is_some(), in_index.is_some()]);
    }
    held
}

/// Item 2 on Redis: a lock that never runs again loses its records past the retention to the
/// writes of other locks (at most `RUN_TRIM_SLACK` of them), on every server, although its
/// keys live on (they expire a retention after the lock's last write).
async fn old_runs_are_swept(provider: &dyn LockProvider, runs_prefix: &str, urls: &[String]) {
    let log = provider.run_log().expect("a run log");
    let (idle, busy) = (unique_lock_name("runs-idle"), unique_lock_name("runs-busy"));
    let first = RunStart::new(&idle, "job", None, "a", 1);
    log.run_started(&first).await.unwrap();
    log.run_finished(&first, &RunEnd::succeeded())
        .await
        .unwrap();
    // A later run of the same lock: its write keeps the lock's keys for a retention more.
    tokio::time::sleep(SWEEP_RETENTION * 3 / 5).await;
    let second = RunStart::new(&idle, "job", None, "a", 2);
    let second_at = log.run_started(&second).await.unwrap().started_at;
    log.run_finished(&second, &RunEnd::succeeded())
        .await
        .unwrap();
    // The first is past the retention on Redis's clock after this (nothing else to wait on).
    tokio::time::sleep(SWEEP_RETENTION * 3 / 5).await;
    for token in 1..=u64::from(RUN_TRIM_SLACK) {
        let start = RunStart::new(&busy, "job", None, "a", token);
        log.run_started(&start).await.unwrap();
        log.run_finished(&start, &RunEnd::succeeded())
            .await
            .unwrap();
    }
    let first_id = "00000000000000000001:0000000001";
    assert_eq!(
        held(urls, runs_prefix, &idle, first_id).await,
        vec![[false; 3]; urls.len()],
        "the first run is past the retention on every server"
    );
    let second_id = "00000000000000000002:0000000001";
    let second_held = held(urls, runs_prefix, &idle, second_id).await;
    // Kept unless this machine stalled past its retention too.
    if redis_time(&urls[0]).await < second_at + SWEEP_RETENTION - Duration::from_millis(100) {
        assert_eq!(
            second_held,
            vec![[true; 3]; urls.len()],
            "within the retention"
        );
        assert_eq!(run_tokens(log, &idle).await, [2]);
    }
}

/// A run still live (running, heartbeat not passed) is kept past `runs_per_lock` (1) and the
/// retention, so its heartbeat goes on: trimming history never stops a job that still runs
/// (its runner stops when a renewal finds no record). Once it ended, the bounds take it.
async fn live_run_outlives_the_bounds(provider: &dyn LockProvider) {
    let log = provider.run_log().expect("a run log");
    let lock = unique_lock_name("runs-live-kept");
    let lease = Duration::from_secs(30);
    let long = RunStart::new(&lock, "job", None, "a", 1).alive_for(lease);
    log.run_started(&long).await.unwrap();
    // The next ticks' runs (its lock passed at lock_at_most_for), past runs_per_lock.
    end_runs(log, &lock, 2..=4).await;
    assert!(
        log.run_alive(&long, lease).await.unwrap(),
        "kept past runs_per_lock"
    );
    // And past the retention, on Redis's clock (nothing to wait on but time).
    tokio::time::sleep(SWEEP_RETENTION / 2 + Duration::from_millis(200)).await;
    end_runs(log, &lock, 5..=5).await;
    assert!(
        log.run_alive(&long, lease).await.unwrap(),
        "kept past the retention"
    );
    assert_eq!(run_tokens(log, &lock).await, [5, 1]);
    log.run_finished(&long, &RunEnd::succeeded()).await.unwrap();
    assert_eq!(
        run_tokens(log, &lock).await,
        [5],
        "ended, it is one too many"
    );
}

/// Item 1 on Redis: two locks with 1000 failed runs each (errors of `MAX_ERROR_LEN` bytes) read
/// by pages: a page is the newest records and no more, and paging with `before` walks the
/// whole history of one lock and of both without gaps or repeats.
async fn long_histories_page(provider: &dyn LockProvider, urls: &[String]) {
    const RUNS: u64 = 1000;
    let log = provider.run_log().expect("a run log");
    let locks = [
        unique_lock_name("runs-long-a"),
        unique_lock_name("runs-long-b"),
    ];
    let error = "e".repeat(shedlock_core::MAX_ERROR_LEN);
    let marker = RunStart::new(unique_lock_name("runs-long-marker"), "job", None, "a", 1);
    let since = log.run_started(&marker).await.unwrap().started_at;
    let write = |lock: &str| {
        let (lock, error) = (lock.to_owned(), error.clone());
        async move {
            for token in 2..=RUNS + 1 {
                let start = RunStart::new(&lock, "job", None, "a", token);
                log.run_started(&start).await.unwrap();
                let end = RunEnd::with_error(RunOutcome::Failed, error.as_str());
                log.run_finished(&start, &end).await.unwrap();
            }
        }
    };
    futures_util::join!(write(&locks[0]), write(&locks[1]));
    let page = log
        .runs(&RunQuery::all().since(since).limit(50))
        .await
        .unwrap();
    assert_eq!(page.len(), 50);
    assert!(
        page.iter().all(|r| r.fencing_token > RUNS + 1 - 50),
        "the newest"
    );
    assert!(
        page.iter()
            .all(|r| r.error.as_deref() == Some(error.as_str()))
    );
    let walk = |query: RunQuery| async move {
        let mut seen: Vec<shedlock_core::RunRecord> = Vec::new();
        let mut query = query.limit(150);
        loop {
            let page = log.runs(&query).await.unwrap();
            assert!(page.len() <= 150);
            let Some(last) = page.last() else { break };
            query = query.before(last.cursor());
            seen.extend(page);
        }
        seen
    };
    let one = walk(RunQuery::lock(&locks[1])).await;
    let tokens: Vec<u64> = one.iter().map(|r| r.fencing_token).collect();
    assert_eq!(tokens, (2..=RUNS + 1).rev().collect::<Vec<_>>(), "one lock");
    let both = walk(RunQuery::all().since(since)).await;
    assert_eq!(both.len() as u64, 2 * RUNS + 1, "both locks and the marker");
    assert!(
        both.windows(2).all(|w| w[0].cursor() > w[1].cursor()),
        "newest first, no repeats"
    );
    let _ = urls;
}

/// Writes `days` of a fleet's history through `harness` and counts in every
/// server what is kept: each lock's hash and set hold the same runs, at most `runs_per_lock`
/// (the scripts trim on every write, so with no slack), the index holds exactly the runs the
/// hashes hold, and there are no other keys than those.
async fn month_stays_bounded(
    harness: &ServerHarness,
    runs_prefix: &str,
    urls: &[String],
    days: u32,
) {
    use shedlock_conformance::longevity::{LOCKS, RUNS_PER_LOCK, month_of_history};
    {
        let figures = month_of_history(harness, days).await;
        println!("redis ({} server(s)) {figures}", urls.len());
        for url in urls {
            let mut redis = connection(url).await;
            let prefix = runs_prefix;
            let mut records = 0;
            let locks = (0..LOCKS)
                .map(|i| format!("{}-{i:03}", figures.prefix))
                .chain([format!("{}-marker", figures.prefix)]);
            for lock in locks {
                let in_hash: usize = redis.hlen(format!("{prefix}records:{lock}")).await.unwrap();
                let in_set: usize = redis
                    .zcard(format!("{prefix}started:{lock}"))
                    .await
                    .unwrap();
                assert_eq!(in_hash, in_set, "{lock}: hash and set hold the same runs");
                assert!(in_hash <= RUNS_PER_LOCK as usize, "{lock} keeps {in_hash}");
                records += in_hash;
            }
            let indexed: usize = redis
                .zcount(format!("{prefix}index"), "-inf", "+inf")
                .await
                .unwrap();
            let keys: Vec<String> = redis.keys(format!("{prefix}*")).await.unwrap();
            let mut bytes = 0u64;
            for key in &keys {
                let usage: Option<u64> = redis::cmd("MEMORY")
                    .arg("USAGE")
                    .arg(key)
                    .query_async(&mut redis)
                    .await
                    .unwrap();
                bytes += usage.unwrap_or(0);
            }
            println!(
                "  {url}: {records} records in {} keys, {indexed} in the index, {bytes} bytes",
                keys.len()
            );
            if urls.len() == 1 {
                let read = figures.kept + 1;
                assert_eq!(read, records, "what a read finds is what is stored");
            } else {
                // A RedLock master may have missed a write that a majority took.
                assert!(
                    records <= LOCKS * RUNS_PER_LOCK as usize + 1,
                    "{records} records"
                );
            }
            assert_eq!(
                indexed, records,
                "the index holds the stored runs, no others"
            );
            assert!(keys.len() <= 2 * (LOCKS + 1) + 1, "{} keys", keys.len());
        }
    }
}

/// The cases of both providers: `$connect` connects a builder's provider, `$urls` are the
/// servers it is on.
macro_rules! shared_cases {
    ($connect:ident, $urls:expr) => {
        mod conformance {
            use super::*;

            pub(super) async fn harness() -> Option<ServerHarness> {
                let provider = $connect(builder("a")).await?;
                let (holders, keeping) = (provider.clone(), provider.clone());
                Some(
                    ServerHarness::new(move |holder| {
                        Arc::new(holders.with_holder(holder).unwrap())
                    })
                    .with_run_log(provider)
                    .with_run_log_keeping(move |retention, runs_per_lock| {
                        Arc::new(
                            keeping
                                .with_run_retention(retention, runs_per_lock)
                                .unwrap(),
                        )
                    }),
                )
            }

            shedlock_conformance::runs_tests!(harness());
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

        #[tokio::test]
        async fn old_runs_of_a_lock_that_no_longer_runs_are_swept() {
            if let Some(provider) = $connect(builder("a").run_retention(SWEEP_RETENTION)).await {
                let runs_prefix = format!("runs:{}", provider.key_prefix());
                old_runs_are_swept(&provider, &runs_prefix, &$urls).await;
            }
        }

        #[tokio::test]
        async fn a_live_run_outlives_the_bounds() {
            let builder = builder("a")
                .runs_per_lock(1)
                .run_retention(SWEEP_RETENTION / 2);
            if let Some(provider) = $connect(builder).await {
                live_run_outlives_the_bounds(&provider).await;
            }
        }

        /// A read without a limit goes by pages of 500 (no script replies a whole history)
        /// and returns every record once, newest first.
        #[tokio::test]
        async fn a_read_without_a_limit_returns_everything() {
            let Some(provider) = $connect(builder("a").runs_per_lock(1500)).await else {
                return;
            };
            let log = provider.run_log().unwrap();
            let lock = unique_lock_name("runs-unlimited");
            end_runs(log, &lock, 1..=1200).await;
            let tokens = run_tokens(log, &lock).await;
            assert_eq!(tokens, (1..=1200).rev().collect::<Vec<u64>>());
            let limited = log.runs(&RunQuery::lock(&lock).limit(700)).await.unwrap();
            let tokens: Vec<u64> = limited.iter().map(|r| r.fencing_token).collect();
            assert_eq!(tokens, (501..=1200).rev().collect::<Vec<u64>>());
        }

        #[tokio::test]
        async fn long_histories_page_without_gaps() {
            if let Some(provider) = $connect(builder("a")).await {
                long_histories_page(&provider, &$urls).await;
            }
        }

        /// A month of a fleet's history: what the store keeps stays within the settings,
        /// counted in Redis itself (every master's keys on RedLock).
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_month_of_history_stays_bounded() {
            for days in [1, 30] {
                let Some(provider) = $connect(builder("a")).await else {
                    return;
                };
                let runs_prefix = format!("runs:{}", provider.key_prefix());
                let keeping = provider.clone();
                let harness = ServerHarness::new(move |holder| {
                    Arc::new(provider.with_holder(holder).unwrap())
                })
                .with_run_log_keeping(move |retention, runs_per_lock| {
                    Arc::new(
                        keeping
                            .with_run_retention(retention, runs_per_lock)
                            .unwrap(),
                    )
                });
                month_stays_bounded(&harness, &runs_prefix, &$urls, days).await;
            }
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
            format!("{prefix}index"),
        ] {
            let ttl: i64 = redis.pttl(&key).await.unwrap();
            assert!((1..=60_000).contains(&ttl), "{key} expires in {ttl} ms");
        }
        let indexed: Vec<String> = redis.zrange(format!("{prefix}index"), 0, -1).await.unwrap();
        assert_eq!(indexed, [format!("00000000000000000001:0000000001:{lock}")]);
        assert_eq!(only_run(&provider, &lock).await.fencing_token, 1);
    }

    /// Runs written without the index (by the previous version, which kept none) are indexed
    /// at their lock's next write, and then read across locks.
    #[tokio::test]
    async fn runs_from_before_the_index_are_indexed_at_the_next_write() {
        let Some(provider) = redis_with(builder("a")).await else {
            return;
        };
        let log = provider.run_log().unwrap();
        let lock = unique_lock_name("runs-unindexed");
        let since = log
            .run_started(&RunStart::new(&lock, "job", None, "a", 1))
            .await
            .unwrap()
            .started_at;
        end_runs(log, &lock, 2..=3).await;
        let index = format!("runs:{}index", provider.key_prefix());
        let mut redis = connection(&redis_url().unwrap()).await;
        let () = redis.del(&index).await.unwrap();
        let across = RunQuery::all().since(since);
        assert_eq!(log.runs(&across).await.unwrap(), [], "not indexed");
        end_runs(log, &lock, 4..=4).await;
        let read = log.runs(&across).await.unwrap();
        let tokens: Vec<u64> = read.iter().map(|r| r.fencing_token).collect();
        assert_eq!(tokens, [4, 3, 2, 1]);
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

    /// Runs that a minority holds (writes that reached one master only) and are newer than
    /// the others take the first places of that master's answers: pages are still full and
    /// walk every run a majority holds, one lock and all locks, without gaps or repeats.
    #[tokio::test]
    async fn minority_runs_leave_no_gaps_in_pages() {
        let Some(provider) = redlock_with(builder("a")).await else {
            return;
        };
        let urls = redlock_urls().unwrap();
        let log = provider.run_log().unwrap();
        let lock = unique_lock_name("runs-minority-pages");
        let since = log
            .run_started(&RunStart::new(&lock, "job", None, "a", 1))
            .await
            .unwrap()
            .started_at;
        end_runs(log, &lock, 2..=30).await;
        // Newer runs on one master each, different ones: never a majority.
        for (master, url) in urls.iter().take(2).enumerate() {
            let alone = RedisLockProvider::builder()
                .key_prefix(provider.key_prefix())
                .connect(url)
                .await
                .unwrap();
            let tokens = 100 * (master as u64 + 1)..=100 * (master as u64 + 1) + 19;
            end_runs(alone.run_log().unwrap(), &lock, tokens).await;
        }
        for query in [RunQuery::lock(&lock), RunQuery::all().since(since)] {
            let mut tokens = Vec::new();
            let mut query = query.limit(5);
            loop {
                let page = log.runs(&query).await.unwrap();
                let Some(last) = page.last() else { break };
                query = query.before(last.cursor());
                // Full pages while runs remain (a short page reads as the end to a reader).
                assert_eq!(page.len(), 5.min(30 - tokens.len()), "{page:?}");
                tokens.extend(page.iter().map(|r| r.fencing_token));
            }
            assert_eq!(tokens, (1..=30).rev().collect::<Vec<u64>>(), "{query:?}");
        }
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
