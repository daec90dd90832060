//! The fleet's board (`Board`) on one server, through Sentinel, on a Redis Cluster and on the
//! RedLock masters: the conformance kit's board and fleet cases on each, the key layout, a
//! corrupt entry, versions past a lost counter, and the RedLock board on its one master.
//! Skipped without the servers, failed without them when `CI=true`.

mod common;

use std::sync::Arc;

use shedlock_conformance::ServerHarness;
use shedlock_core::{Board, LockProvider};

/// Where a harness's boards live.
#[derive(Debug, Clone, Copy)]
enum Store {
    Redis,
    Sentinel,
    Cluster,
    RedLock,
}

/// The locks of one provider, and a board under a fresh prefix of the same store per call
/// (each provider of `common` has a fresh key prefix, so a board prefix of its own); `None`
/// when the store's URL is not set (skipped).
async fn harness(store: Store) -> Option<ServerHarness> {
    let (locks, _) = on(store).await?;
    let harness = ServerHarness::new(move |_| Arc::clone(&locks));
    Some(
        harness.with_boards(move || async move {
            on(store).await.expect("the store answered before").1
        }),
    )
}

/// A provider on `store` under a fresh key prefix, as locks and as a board.
async fn on(store: Store) -> Option<(Arc<dyn LockProvider>, Arc<dyn Board>)> {
    fn both(provider: impl LockProvider + Board) -> (Arc<dyn LockProvider>, Arc<dyn Board>) {
        let provider = Arc::new(provider);
        (Arc::clone(&provider) as Arc<dyn LockProvider>, provider)
    }
    Some(match store {
        Store::Redis => both(common::redis("board").await?),
        Store::Sentinel => both(common::sentinel("board").await?),
        Store::Cluster => both(common::cluster("board").await?),
        Store::RedLock => both(common::redlock("board").await?),
    })
}

mod redis {
    use super::*;
    shedlock_conformance::fleet_tests!(harness(Store::Redis));
}

mod sentinel {
    use super::*;
    shedlock_conformance::fleet_tests!(harness(Store::Sentinel));
}

mod cluster {
    use super::*;
    shedlock_conformance::fleet_tests!(harness(Store::Cluster));
}

mod redlock {
    use super::*;
    shedlock_conformance::fleet_tests!(harness(Store::RedLock));
}

mod specifics {
    use redis::AsyncCommands;
    use shedlock_core::{Board, BoardCondition, Error, LockProvider, Operation};
    use shedlock_redis::RedisLockProvider;

    use crate::common;

    /// The board's three keys sit under the board prefix with the `{board}` hash tag; nothing
    /// of it is under the lock prefix.
    #[tokio::test]
    async fn the_board_has_keys_of_its_own() {
        let Some(provider) = common::redis("layout").await else {
            return;
        };
        let prefix = provider.board_key_prefix().to_owned();
        assert_eq!(prefix, format!("board:{}", provider.key_prefix()));
        assert!(provider.board().is_some(), "the provider offers its board");
        provider
            .board_write("paused/a", "{}", BoardCondition::Always, None)
            .await
            .unwrap();
        let mut redis = common::operator().await;
        let mut keys: Vec<String> = redis.keys(format!("{prefix}*")).await.unwrap();
        keys.sort();
        assert_eq!(
            keys,
            ["entries", "index", "version"].map(|k| format!("{prefix}{{board}}:{k}"))
        );
        let under_locks: Vec<String> = redis
            .keys(format!("{}*", provider.key_prefix()))
            .await
            .unwrap();
        assert_eq!(under_locks, Vec::<String>::new());
        let stored: String = redis
            .hget(format!("{prefix}{{board}}:entries"), "paused/a")
            .await
            .unwrap();
        assert!(stored.ends_with("::{}"), "kept until removed: {stored}");
    }

    /// A configured board prefix is used, and one overlapping the lock keys is refused.
    #[tokio::test]
    async fn a_board_prefix_is_configured_and_checked() {
        let Some(url) = common::redis_url() else {
            return;
        };
        let key_prefix = common::unique_key_prefix("layout");
        let board_prefix = format!("fleet:{key_prefix}");
        let provider = RedisLockProvider::builder()
            .key_prefix(&key_prefix)
            .board_key_prefix(&board_prefix)
            .connect(&url)
            .await
            .unwrap();
        assert_eq!(provider.board_key_prefix(), board_prefix);
        let refused = RedisLockProvider::builder()
            .key_prefix(&key_prefix)
            .board_key_prefix(format!("{key_prefix}board:"))
            .connect(&url)
            .await;
        assert!(
            matches!(
                refused,
                Err(Error::InvalidConfig {
                    field: "board_key_prefix",
                    ..
                })
            ),
            "{refused:?}"
        );
    }

    /// An entry that is not what the scripts write fails reads and writes of it with a store
    /// error naming the entry, and changes nothing.
    #[tokio::test]
    async fn a_corrupt_entry_is_a_store_error() {
        let Some(provider) = common::redis("corrupt").await else {
            return;
        };
        let entries = format!("{}{{board}}:entries", provider.board_key_prefix());
        provider
            .board_write("c/a", "x", BoardCondition::Always, None)
            .await
            .unwrap();
        let mut redis = common::operator().await;
        let () = redis.hset(&entries, "c/a", "garbage").await.unwrap();
        let read = provider.board_read("c/").await;
        let Err(Error::Store {
            operation, source, ..
        }) = &read
        else {
            panic!("{read:?}");
        };
        assert_eq!(*operation, Operation::Jobs);
        assert!(source.to_string().contains("c/a"), "{source}");
        let write = provider
            .board_write("c/a", "y", BoardCondition::Always, None)
            .await;
        assert!(matches!(write, Err(Error::Store { .. })), "{write:?}");
        let stored: String = redis.hget(&entries, "c/a").await.unwrap();
        assert_eq!(stored, "garbage", "nothing changed");
    }

    /// Versions grow across a removal and a new write of a key, and past a counter deleted by
    /// hand while the key's entry stays.
    #[tokio::test]
    async fn versions_grow_past_a_removal_and_a_lost_counter() {
        let Some(provider) = common::redis("versions").await else {
            return;
        };
        let write = |value: &'static str| {
            let provider = provider.clone();
            async move {
                provider
                    .board_write("v/a", value, BoardCondition::Always, None)
                    .await
                    .unwrap()
                    .unwrap()
            }
        };
        let first = write("one").await;
        assert!(
            provider
                .board_remove("v/a", BoardCondition::Version(first))
                .await
                .unwrap()
        );
        let second = write("two").await;
        assert!(second > first, "{second} after {first}");
        let mut redis = common::operator().await;
        let () = redis
            .del(format!("{}{{board}}:version", provider.board_key_prefix()))
            .await
            .unwrap();
        let third = write("three").await;
        assert!(third > second, "{third} after {second}");
    }
}

/// RedLock keeps the board on one master, the same whatever order the masters are named in.
mod redlock_master {
    use redis::AsyncCommands;
    use shedlock_core::{Board, BoardCondition};
    use shedlock_redis::RedLockProvider;

    use crate::common;

    #[tokio::test]
    async fn the_board_lives_on_the_master_that_sorts_first() {
        let Some(provider) = common::redlock("board-master").await else {
            return;
        };
        let mut urls = common::redlock_urls().expect("set");
        urls.reverse();
        let reversed = RedLockProvider::builder()
            .key_prefix(provider.key_prefix())
            .connect(&urls)
            .await
            .unwrap();
        assert_eq!(provider.board_master(), reversed.board_master());
        let version = provider
            .board_write("run/a", "asked", BoardCondition::Absent, None)
            .await
            .unwrap()
            .expect("absent");
        let read = reversed.board_read("run/").await.unwrap();
        assert_eq!(read.len(), 1);
        assert_eq!(
            (read[0].value.as_str(), read[0].version),
            ("asked", version)
        );

        let entries = format!("{}{{board}}:entries", provider.board_key_prefix());
        let mut holding = Vec::new();
        for url in &urls {
            let mut master = common::connection(url).await;
            let held: bool = master.hexists(&entries, "run/a").await.unwrap();
            if held {
                holding.push(url.trim_end_matches('/').to_owned());
            }
        }
        assert_eq!(holding.len(), 1, "{holding:?}");
        assert!(
            provider.board_master().starts_with(&holding[0]),
            "{} on {holding:?}",
            provider.board_master()
        );
    }
}
