//! Batched claims (`acquire_many`) on private servers: what a batch costs (the `EVALSHA` calls
//! the servers count in `INFO commandstats`), how long a full chunk runs on the server, and a
//! lock that cannot be read failing alone. The batch cases every store passes are in the
//! conformance suites (`redis.rs`, `redlock.rs`).

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use redis::AsyncCommands as _;
use shedlock_core::{Error, LockConfiguration, LockProvider};
use shedlock_redis::{RedLockProvider, RedisLockProvider};
use shedlock_test_support::RedisServer;

const PREFIX: &str = "batch:";

fn configs(base: &str, count: usize) -> Vec<LockConfiguration> {
    (0..count)
        .map(|i| {
            LockConfiguration::new(
                format!("{base}-{i:04}"),
                Duration::from_secs(60),
                Duration::ZERO,
            )
            .unwrap()
        })
        .collect()
}

fn granted(answers: &[Result<Option<shedlock_core::LockLease>, Error>]) -> usize {
    answers
        .iter()
        .filter(|answer| matches!(answer, Ok(Some(_))))
        .count()
}

/// Per command the server ran since its stats were reset (the scripts' own commands too):
/// calls that did not fail, and total µs.
async fn command_stats(url: &str) -> HashMap<String, (u64, u64)> {
    let mut redis = common::connection(url).await;
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut redis)
        .await
        .unwrap();
    let mut stats = HashMap::new();
    for line in info.lines() {
        let Some((command, fields)) = line
            .strip_prefix("cmdstat_")
            .and_then(|l| l.split_once(':'))
        else {
            continue;
        };
        let field = |name: &str| {
            fields
                .split(',')
                .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        let calls = field("calls") - field("failed_calls");
        stats.insert(command.to_owned(), (calls, field("usec")));
    }
    stats
}

/// The `EVALSHA` calls since the stats were reset, and their total time on the server (µs).
/// A call failed with `NOSCRIPT` (the first of a script on a server, which the client then
/// loads and calls again) does not count: once per script and server, not per batch.
async fn evalsha(url: &str) -> (u64, u64) {
    command_stats(url)
        .await
        .get("evalsha")
        .copied()
        .unwrap_or_default()
}

async fn reset_stats(url: &str) {
    let mut redis = common::connection(url).await;
    let () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(&mut redis)
        .await
        .unwrap();
}

/// One server: a batch is one script call per 500 locks, whatever their states; a batch of
/// none calls nothing. Prints what a full chunk costs the server.
#[tokio::test]
async fn redis_batch_is_one_script_call_per_chunk() {
    let Some(server) = RedisServer::start(&[]) else {
        return;
    };
    let url = server.url();
    let provider = RedisLockProvider::builder()
        .key_prefix(PREFIX)
        .holder("a")
        .connect(&url)
        .await
        .unwrap();
    // Loads the script, so that what follows counts no NOSCRIPT retry.
    let warm = &configs("warm", 1)[0];
    provider.acquire(warm).await.unwrap().unwrap();

    reset_stats(&url).await;
    let hundred = configs("hundred", 100);
    assert_eq!(granted(&provider.acquire_many(&hundred).await), 100);
    let held = provider.acquire_many(&hundred).await;
    assert!(held.iter().all(|answer| matches!(answer, Ok(None))));
    assert!(provider.acquire_many(&[]).await.is_empty());
    let (calls, _) = evalsha(&url).await;
    assert_eq!(calls, 2, "two batches of 100 free, then held, locks");

    // A single acquire, for comparison: the default acquire_many made one of these per lock.
    reset_stats(&url).await;
    for config in &configs("single", 100) {
        provider.acquire(config).await.unwrap().unwrap();
    }
    let (single_calls, single_us) = evalsha(&url).await;
    assert_eq!(single_calls, 100);

    reset_stats(&url).await;
    let thousand = configs("thousand", 1000);
    let started = Instant::now();
    assert_eq!(granted(&provider.acquire_many(&thousand).await), 1000);
    let round_trips = started.elapsed();
    let (calls, usec) = evalsha(&url).await;
    assert_eq!(calls, 2, "1,000 locks are two chunks of 500");
    println!(
        "one server: a batch of 1,000 free locks = {calls} EVALSHA, {} µs per 500-lock call on \
         the server ({round_trips:?} for both as the client saw them); a single acquire {} µs \
         on the server",
        usec / calls,
        single_us / single_calls
    );
}

/// RedLock: a batch of 100 is one script call per master; the locks a majority holds for
/// another instance are refused and their grants taken back, in one more call on each master
/// that granted them.
#[tokio::test]
async fn redlock_batch_is_one_script_call_per_master() {
    let Some(servers) = (0..3)
        .map(|_| RedisServer::start(&[]))
        .collect::<Option<Vec<_>>>()
    else {
        return;
    };
    let urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    let provider = RedLockProvider::builder()
        .key_prefix(PREFIX)
        .holder("a")
        .connect(&urls)
        .await
        .unwrap();
    // Loads the script and teaches the provider the masters' clocks (its first proposal).
    provider
        .acquire(&configs("warm", 1)[0])
        .await
        .unwrap()
        .unwrap();
    let hundred = configs("hundred", 100);
    // Ten of them held by `b` on masters 0 and 1 (a majority), with one token.
    for url in &urls[..2] {
        let mut redis = common::connection(url).await;
        for config in &hundred[..10] {
            let () = redis
                .hset_multiple(
                    format!("{PREFIX}{}", config.name()),
                    &[
                        ("holder", "b"),
                        ("token", "5"),
                        ("locked_at", "1000"),
                        ("lock_until", "9999999999999"),
                    ],
                )
                .await
                .unwrap();
        }
    }
    for url in &urls {
        reset_stats(url).await;
    }
    let answers = provider.acquire_many(&hundred).await;
    assert!(
        answers[..10]
            .iter()
            .all(|answer| matches!(answer, Ok(None)))
    );
    assert_eq!(granted(&answers[10..]), 90);
    let mut calls = Vec::new();
    for url in &urls {
        calls.push(evalsha(url).await.0);
    }
    assert_eq!(
        calls,
        [1, 1, 2],
        "EVALSHA per master: the batch, and on master 2 the undo of the ten locks it granted"
    );
    let mut third = common::connection(&urls[2]).await;
    for config in &hundred[..10] {
        let exists: bool = third
            .exists(format!("{PREFIX}{}", config.name()))
            .await
            .unwrap();
        assert!(
            !exists,
            "{}: the grant no majority joined is undone",
            config.name()
        );
    }

    for url in &urls {
        reset_stats(url).await;
    }
    let fresh = configs("fresh", 100);
    assert_eq!(granted(&provider.acquire_many(&fresh).await), 100);
    for url in &urls {
        assert_eq!(
            evalsha(url).await.0,
            1,
            "{url}: one call for 100 free locks"
        );
    }
}

/// A lock whose hash the script cannot read fails alone, naming its key; the batch's other
/// locks are answered. A server that does not answer fails every lock, each error naming its
/// lock.
#[tokio::test]
async fn unreadable_lock_fails_alone_and_a_dead_server_fails_each() {
    let Some(mut server) = RedisServer::start(&[]) else {
        return;
    };
    let url = server.url();
    let provider = RedisLockProvider::builder()
        .key_prefix(PREFIX)
        .holder("a")
        .timeout(Duration::from_millis(500))
        .connect(&url)
        .await
        .unwrap();
    let locks = configs("alone", 4);
    let mut redis = common::connection(&url).await;
    let corrupt = format!("{PREFIX}{}", locks[1].name());
    let () = redis.hset(&corrupt, "token", "garbage").await.unwrap();
    let wrong_type = format!("{PREFIX}{}", locks[2].name());
    let () = redis.set(&wrong_type, "a string").await.unwrap();
    let answers = provider.acquire_many(&locks).await;
    assert!(matches!(answers[0], Ok(Some(_))));
    assert!(matches!(answers[3], Ok(Some(_))));
    let message = |answer: &Result<_, Error>| match answer {
        Err(error @ Error::Store { .. }) => {
            format!("{error} {}", std::error::Error::source(error).unwrap())
        }
        other => panic!("expected a store error, got {other:?}"),
    };
    let shown = message(&answers[1]);
    assert!(
        shown.contains(&corrupt) && shown.contains("`token`"),
        "{shown}"
    );
    let shown = message(&answers[2]);
    assert!(
        shown.contains(&wrong_type) && shown.contains("WRONGTYPE"),
        "{shown}"
    );

    server.kill();
    let others = configs("dead", 3);
    let answers = provider.acquire_many(&others).await;
    for (answer, config) in answers.iter().zip(&others) {
        let shown = message(answer);
        assert!(shown.contains(config.name()), "{shown}");
    }
}
