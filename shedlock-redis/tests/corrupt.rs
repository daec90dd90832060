//! Lock hashes corrupted by hand, on one server and on RedLock: a store error naming key
//! and field, nothing written; never a grant, never a token starting over. Needs
//! `SHEDLOCK_TEST_REDIS_URL` and `SHEDLOCK_TEST_REDLOCK_URLS`; skipped without them, failed
//! without them when `CI=true`.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::connection;
use redis::AsyncCommands as _;
use shedlock_core::{Error, LockConfiguration, LockInspector as _, LockProvider};

const LEASE: Duration = Duration::from_secs(30);

fn config(name: &str) -> LockConfiguration {
    LockConfiguration::new(name, LEASE, Duration::ZERO).unwrap()
}

/// A store error whose message names `key` and `field`.
fn assert_corrupt(result: Result<impl std::fmt::Debug, Error>, key: &str, field: &str) {
    let error = match result {
        Err(error @ Error::Store { .. }) => error,
        other => panic!("{key} with a corrupt {field}: expected a store error, got {other:?}"),
    };
    let message = error.to_string();
    assert!(
        message.contains(key) && message.contains(&format!("`{field}`")),
        "{message}"
    );
}

/// An expired lease of holder `x` with token 5, then `field` overwritten by hand.
async fn write_corrupt(
    redis: &mut redis::aio::MultiplexedConnection,
    key: &str,
    field: &str,
    value: &str,
) {
    let () = redis
        .hset_multiple(key, &common::HASH_BEFORE_TICKS)
        .await
        .unwrap();
    let () = redis.hset(key, field, value).await.unwrap();
}

/// Garbage no number parser may read as a token or a time: not a number, signs, fractions,
/// exponents, spaces, and numbers Lua cannot hold exactly.
const GARBAGE: [&str; 8] = [
    "abc",
    "",
    "-5",
    "1.5",
    "1e3",
    " 7",
    "9007199254740993",
    "18446744073709551616",
];

mod single {
    use super::*;

    /// Values written by hand that are not numbers: a store error naming key and field, and
    /// the hash is left as it was; never a grant, never a token restarting low.
    #[tokio::test]
    async fn corrupt_fields_fail_closed() {
        let Some(provider) = common::redis("corrupt").await else {
            return;
        };
        let mut redis = common::operator().await;
        let mut case = 0;
        for field in ["token", "locked_at", "lock_until"] {
            for value in GARBAGE {
                case += 1;
                let name = format!("corrupt-{case}");
                let key = provider.key(&name);
                write_corrupt(&mut redis, &key, field, value).await;
                let before: HashMap<String, String> = redis.hgetall(&key).await.unwrap();
                assert_corrupt(provider.acquire(&config(&name)).await, &key, field);
                let after: HashMap<String, String> = redis.hgetall(&key).await.unwrap();
                assert_eq!(before, after, "{field} = {value:?}: the hash was changed");
                assert_corrupt(provider.lock_record(&name).await, &key, field);
            }
        }
        for field in ["holder", "token", "locked_at", "lock_until"] {
            let name = format!("missing-{field}");
            let key = provider.key(&name);
            write_corrupt(&mut redis, &key, "token", "5").await;
            let () = redis.hdel(&key, field).await.unwrap();
            assert_corrupt(provider.acquire(&config(&name)).await, &key, field);
        }
    }

    /// A `last_tick` that is not a whole number (a sign allowed) within 2^53: a claim for a
    /// tick is a store error naming it, with nothing written; an acquisition without a tick
    /// does not read it.
    #[tokio::test]
    async fn corrupt_last_tick_fails_a_tick_claim_closed() {
        let Some(provider) = common::redis("corrupt-tick").await else {
            return;
        };
        let mut redis = common::operator().await;
        let tick = shedlock_core::Tick::new(std::time::SystemTime::now());
        let bad = [
            "abc",
            "",
            "1.5",
            "1e3",
            " 7",
            "--5",
            "9007199254740993",
            "-9007199254740993",
        ];
        for (case, value) in bad.into_iter().enumerate() {
            let name = format!("corrupt-tick-{case}");
            let key = provider.key(&name);
            write_corrupt(&mut redis, &key, "last_tick", value).await;
            let before: HashMap<String, String> = redis.hgetall(&key).await.unwrap();
            let claim = config(&name).for_tick(tick);
            assert_corrupt(provider.acquire(&claim).await, &key, "last_tick");
            let after: HashMap<String, String> = redis.hgetall(&key).await.unwrap();
            assert_eq!(before, after, "last_tick = {value:?}: the hash was changed");
        }
        let lease = provider
            .acquire(&config("corrupt-tick-0"))
            .await
            .unwrap()
            .expect("without a tick, last_tick is not read");
        assert!(provider.release(&lease).await.unwrap());
    }

    /// A live lease whose times were overwritten by hand: release and extend report it.
    #[tokio::test]
    async fn corrupt_live_lease_fails_release_and_extend() {
        let Some(provider) = common::redis("corrupt-live").await else {
            return;
        };
        let mut redis = common::operator().await;
        let lease = provider.acquire(&config("live")).await.unwrap().unwrap();
        let key = provider.key("live");
        let () = redis.hset(&key, "lock_until", "later").await.unwrap();
        assert_corrupt(provider.release(&lease).await, &key, "lock_until");
        assert_corrupt(
            provider.extend(&lease, LEASE, Duration::ZERO).await,
            &key,
            "lock_until",
        );
        let () = redis
            .hset(&key, "lock_until", "99999999999999")
            .await
            .unwrap();
        let () = redis.hset(&key, "locked_at", "").await.unwrap();
        assert_corrupt(provider.release(&lease).await, &key, "locked_at");
    }
}

mod redlock {
    use super::*;

    /// Corrupt values on every master: a store error naming the field, nothing granted. On
    /// one master only: it counts as a failed master, and the other two grant the lock.
    #[tokio::test]
    async fn corrupt_fields_fail_closed() {
        let Some(provider) = common::redlock("corrupt").await else {
            return;
        };
        let urls = common::redlock_urls().unwrap();
        let mut masters = Vec::new();
        for url in &urls {
            masters.push(connection(url).await);
        }
        for (case, field) in ["token", "lock_until"].into_iter().enumerate() {
            let name = format!("everywhere-{case}");
            let key = provider.key(&name);
            for master in &mut masters {
                write_corrupt(master, &key, field, "garbage").await;
            }
            assert_corrupt(provider.acquire(&config(&name)).await, &key, field);
            for master in &mut masters {
                let holder: String = master.hget(&key, "holder").await.unwrap();
                assert_eq!(
                    holder, "x",
                    "granted on a master despite the corrupt {field}"
                );
            }
        }
        let key = provider.key("one");
        write_corrupt(&mut masters[0], &key, "token", "garbage").await;
        let lease = provider
            .acquire(&config("one"))
            .await
            .unwrap()
            .expect("two sound masters of three grant");
        let states = common::master_records(&urls, provider.key_prefix(), "one").await;
        assert!(states[0].is_err(), "{:?}", states[0]);
        for state in &states[1..] {
            let state = state.as_ref().unwrap().as_ref().unwrap();
            assert_eq!(state.fencing_token, lease.fencing_token());
        }
        assert!(provider.release(&lease).await.unwrap());
    }
}
