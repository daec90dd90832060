//! Lock state reset behind the providers' backs, on one server and on RedLock: keys deleted
//! by hand (the usual way to reset a lock), a flush, a restart, a failover to a replica that
//! missed the last grant. Tokens must stay above every stale holder's, and a stale lease must
//! touch nothing. Needs `SHEDLOCK_TEST_REDIS_URL`, `SHEDLOCK_TEST_REDLOCK_URLS` and
//! `redis-server`; skipped without them, failed without them when `CI=true`.

mod common;

use std::time::Duration;

use common::connection;
use redis::AsyncCommands as _;
use shedlock_core::{LockConfiguration, LockProvider};
use shedlock_redis::RedisLockProvider;
use shedlock_test_support::RedisServer;
use shedlock_test_support::stores::{assert_stale_lease_refused, take_over};

const LEASE: Duration = Duration::from_secs(30);

fn config(name: &str) -> LockConfiguration {
    LockConfiguration::new(name, LEASE, Duration::ZERO).unwrap()
}

mod single {
    use super::*;

    /// An operator deletes a held lock's hash (the usual way to reset a lock) while its
    /// holder still runs. The next lease, of the same instance or another, has a token above
    /// the stale one, and the stale lease can touch neither.
    #[tokio::test]
    async fn deleted_key_keeps_tokens_increasing() {
        let Some(a) = common::redis("a").await else {
            return;
        };
        let mut redis = common::operator().await;
        let lock = config("reset");
        let stale = a.acquire(&lock).await.unwrap().unwrap();
        let () = redis.del(a.key("reset")).await.unwrap();
        // The same instance's next tick, while the stale run still runs.
        let again = take_over(&a, &lock, &stale).await;
        assert_stale_lease_refused(&a, &stale).await;
        assert!(a.release(&again).await.unwrap());

        // Another instance after another reset.
        let () = redis.del(a.key("reset")).await.unwrap();
        let b = common::another_redis(&a, "b").await;
        let other = take_over(&b, &lock, &again).await;
        assert_stale_lease_refused(&a, &again).await;
        assert!(b.release(&other).await.unwrap());
    }

    /// `FLUSHALL` empties the server: tokens still go on above the earlier ones.
    #[tokio::test]
    async fn flushed_server_keeps_tokens_increasing() {
        let Some(server) = RedisServer::start(&[]) else {
            return;
        };
        let provider = RedisLockProvider::connect(&server.url()).await.unwrap();
        let lock = config("flushed");
        let mut last = 0;
        for _ in 0..3 {
            let lease = provider.acquire(&lock).await.unwrap().unwrap();
            assert!(lease.fencing_token() > last);
            last = lease.fencing_token();
            assert!(provider.release(&lease).await.unwrap());
        }
        let () = redis::cmd("FLUSHALL")
            .query_async(&mut connection(&server.url()).await)
            .await
            .unwrap();
        let lease = provider.acquire(&lock).await.unwrap().unwrap();
        assert!(
            lease.fencing_token() > last,
            "{} after {last}",
            lease.fencing_token()
        );
    }

    /// A failover to a replica that missed the last grant (Sentinel or a managed Redis
    /// promoting a replica): the new primary grants the lock again while the first holder
    /// still runs (one server's weakness, documented), but the new token is above the stale
    /// one, so a resource that checks tokens refuses the stale holder once it saw the new.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn failover_to_a_lagging_replica_keeps_tokens_increasing() {
        let Some(primary) = RedisServer::start(&[]) else {
            return;
        };
        let port = primary.url().rsplit(':').next().unwrap().to_owned();
        let Some(replica) = RedisServer::start(&[
            "--replicaof",
            "127.0.0.1",
            &port,
            // Loads the primary's data from the socket: no dump file in the working directory.
            "--repl-diskless-load",
            "on-empty-db",
        ]) else {
            return;
        };
        let instance = async |holder: &str, server: &RedisServer| {
            RedisLockProvider::builder()
                .holder(holder)
                .connect(&server.url())
                .await
                .unwrap()
        };
        let a = instance("a", &primary).await;
        let lock = config("failover");
        let first = a.acquire(&lock).await.unwrap().unwrap();
        assert!(a.release(&first).await.unwrap());
        // Until the replica has the release.
        let mut to_primary = connection(&primary.url()).await;
        tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                let acked: i64 = redis::cmd("WAIT")
                    .arg(1)
                    .arg(100)
                    .query_async(&mut to_primary)
                    .await
                    .unwrap();
                if acked >= 1 {
                    return;
                }
            }
        })
        .await
        .expect("the replica syncs");
        // The link breaks: the next grant stays on the primary, which then fails over.
        let () = redis::cmd("REPLICAOF")
            .arg("NO")
            .arg("ONE")
            .query_async(&mut connection(&replica.url()).await)
            .await
            .unwrap();
        let stale = a.acquire(&lock).await.unwrap().unwrap();
        // The promoted replica never saw the stale grant.
        take_over(&instance("b", &replica).await, &lock, &stale).await;
        // The stale holder's instance reaches the new primary too.
        let a_after_failover = instance("a", &replica).await;
        assert_stale_lease_refused(&a_after_failover, &stale).await;
    }
}

mod redlock {
    use super::*;

    /// The lock's hash is deleted on every master while its holder still runs; another
    /// instance, which knows no token for the lock, takes it with a token above the stale
    /// one, and the stale lease can touch neither.
    #[tokio::test]
    async fn deleted_keys_keep_tokens_increasing() {
        let Some(a) = common::redlock("a").await else {
            return;
        };
        let urls = common::redlock_urls().unwrap();
        let lock = config("reset");
        let stale = a.acquire(&lock).await.unwrap().unwrap();
        for url in &urls {
            let () = connection(url).await.del(a.key("reset")).await.unwrap();
        }
        let b = common::another_redlock(&a, "b").await;
        let fresh = take_over(&b, &lock, &stale).await;
        assert_stale_lease_refused(&a, &stale).await;
        for state in common::master_records(&urls, b.key_prefix(), "reset").await {
            assert_eq!(state.unwrap().unwrap().fencing_token, fresh.fencing_token());
        }
        assert!(b.release(&fresh).await.unwrap());
    }
}
