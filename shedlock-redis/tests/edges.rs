//! The store's edges, on one server and on RedLock: lock state reset behind the providers'
//! backs (keys deleted by hand, a flush, a failover to a replica that missed the last grant),
//! values corrupted by hand, and passwords. Needs `SHEDLOCK_TEST_REDIS_URL`,
//! `SHEDLOCK_TEST_REDLOCK_URLS` and `redis-server`; skipped without them, failed without them
//! when `CI=true`.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use redis::AsyncCommands as _;
use shedlock_core::{Error, LockConfiguration, LockLease, LockProvider};
use shedlock_redis::{RedLockProvider, RedisLockProvider};

use common::server::TestServer;

const LEASE: Duration = Duration::from_secs(30);

fn config(name: &str) -> LockConfiguration {
    LockConfiguration::new(name, LEASE, Duration::ZERO).unwrap()
}

/// A plain client, as an operator's `redis-cli`.
async fn connection(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// A stale holder's lease is dead: it can neither release nor extend the lock.
async fn assert_dead(provider: &dyn LockProvider, stale: &LockLease) {
    assert!(
        !provider.release(stale).await.unwrap(),
        "the stale lease released the lock"
    );
    assert!(
        provider
            .extend(stale, LEASE, Duration::ZERO)
            .await
            .unwrap()
            .is_none(),
        "the stale lease was extended"
    );
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
async fn write_corrupt(redis: &mut redis::aio::MultiplexedConnection, key: &str, field: &str, value: &str) {
    let fields = [
        ("holder", "x"),
        ("token", "5"),
        ("locked_at", "1000"),
        ("lock_until", "2000"),
    ];
    let () = redis.hset_multiple(key, &fields).await.unwrap();
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

    /// An operator deletes a held lock's hash (the usual way to reset a lock) while its
    /// holder still runs. The next lease, of the same instance or another, has a token above
    /// the stale one, and the stale lease can touch neither.
    #[tokio::test]
    async fn deleted_key_keeps_tokens_increasing() {
        let Some(a) = common::redis("a").await else {
            return;
        };
        let url = common::redis_url().unwrap();
        let mut redis = connection(&url).await;
        let lock = config("reset");
        let stale = a.acquire(&lock).await.unwrap().unwrap();
        let () = redis.del(a.key("reset")).await.unwrap();
        // The same instance's next tick, while the stale run still runs.
        let again = a.acquire(&lock).await.unwrap().expect("the deleted lock is free");
        assert!(
            again.fencing_token() > stale.fencing_token(),
            "token {} after {}",
            again.fencing_token(),
            stale.fencing_token()
        );
        assert_dead(&a, &stale).await;
        assert!(a.release(&again).await.unwrap());

        // Another instance after another reset.
        let () = redis.del(a.key("reset")).await.unwrap();
        let b = RedisLockProvider::builder()
            .key_prefix(a.key_prefix())
            .holder("b")
            .connect(&url)
            .await
            .unwrap();
        let other = b.acquire(&lock).await.unwrap().unwrap();
        assert!(other.fencing_token() > again.fencing_token());
        assert_dead(&a, &again).await;
        assert!(b.release(&other).await.unwrap());
    }

    /// `FLUSHALL` empties the server: tokens still go on above the earlier ones.
    #[tokio::test]
    async fn flushed_server_keeps_tokens_increasing() {
        let Some(server) = TestServer::start(&[]) else {
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
        assert!(lease.fencing_token() > last, "{} after {last}", lease.fencing_token());
    }

    /// A failover to a replica that missed the last grant (Sentinel or a managed Redis
    /// promoting a replica): the new primary grants the lock again while the first holder
    /// still runs (one server's weakness, documented), but the new token is above the stale
    /// one, so a resource that checks tokens refuses the stale holder once it saw the new.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn failover_to_a_lagging_replica_keeps_tokens_increasing() {
        let Some(primary) = TestServer::start(&[]) else {
            return;
        };
        let port = primary.url().rsplit(':').next().unwrap().to_owned();
        let Some(replica) = TestServer::start(&[
            "--replicaof",
            "127.0.0.1",
            &port,
            // Loads the primary's data from the socket: no dump file in the working directory.
            "--repl-diskless-load",
            "on-empty-db",
        ]) else {
            return;
        };
        let a = RedisLockProvider::builder()
            .holder("a")
            .connect(&primary.url())
            .await
            .unwrap();
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
        let b = RedisLockProvider::builder()
            .holder("b")
            .connect(&replica.url())
            .await
            .unwrap();
        let fresh = b
            .acquire(&lock)
            .await
            .unwrap()
            .expect("the promoted replica never saw the stale grant");
        assert!(
            fresh.fencing_token() > stale.fencing_token(),
            "token {} after {}",
            fresh.fencing_token(),
            stale.fencing_token()
        );
        // The stale holder's instance reaches the new primary too.
        let a_after_failover = RedisLockProvider::builder()
            .holder("a")
            .connect(&replica.url())
            .await
            .unwrap();
        assert_dead(&a_after_failover, &stale).await;
    }

    /// Values written by hand that are not numbers: a store error naming key and field, and
    /// the hash is left as it was; never a grant, never a token restarting low.
    #[tokio::test]
    async fn corrupt_fields_fail_closed() {
        let Some(provider) = common::redis("corrupt").await else {
            return;
        };
        let mut redis = connection(&common::redis_url().unwrap()).await;
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

    /// A live lease whose times were overwritten by hand: release and extend report it.
    #[tokio::test]
    async fn corrupt_live_lease_fails_release_and_extend() {
        let Some(provider) = common::redis("corrupt-live").await else {
            return;
        };
        let mut redis = connection(&common::redis_url().unwrap()).await;
        let lease = provider.acquire(&config("live")).await.unwrap().unwrap();
        let key = provider.key("live");
        let () = redis.hset(&key, "lock_until", "later").await.unwrap();
        assert_corrupt(provider.release(&lease).await, &key, "lock_until");
        assert_corrupt(
            provider.extend(&lease, LEASE, Duration::ZERO).await,
            &key,
            "lock_until",
        );
        let () = redis.hset(&key, "lock_until", "99999999999999").await.unwrap();
        let () = redis.hset(&key, "locked_at", "").await.unwrap();
        assert_corrupt(provider.release(&lease).await, &key, "locked_at");
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
        let b = RedLockProvider::builder()
            .key_prefix(a.key_prefix())
            .holder("b")
            .connect_redlock(&urls)
            .await
            .unwrap();
        let fresh = b.acquire(&lock).await.unwrap().expect("the deleted lock is free");
        assert!(
            fresh.fencing_token() > stale.fencing_token(),
            "token {} after {}",
            fresh.fencing_token(),
            stale.fencing_token()
        );
        assert_dead(&a, &stale).await;
        for state in b.lock_states("reset").await {
            assert_eq!(state.unwrap().unwrap().fencing_token, fresh.fencing_token());
        }
        assert!(b.release(&fresh).await.unwrap());
    }

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
                assert_eq!(holder, "x", "granted on a master despite the corrupt {field}");
            }
        }
        let key = provider.key("one");
        write_corrupt(&mut masters[0], &key, "token", "garbage").await;
        let lease = provider
            .acquire(&config("one"))
            .await
            .unwrap()
            .expect("two sound masters of three grant");
        let states = provider.lock_states("one").await;
        assert!(states[0].is_err(), "{:?}", states[0]);
        for state in &states[1..] {
            let state = state.as_ref().unwrap().as_ref().unwrap();
            assert_eq!(state.fencing_token, lease.fencing_token());
        }
        assert!(provider.release(&lease).await.unwrap());
    }
}

mod secrets {
    use super::*;

    const SECRET: &str = "pw-5ecret-9";

    fn assert_hidden(what: &str, shown: &str) {
        assert!(!shown.contains(SECRET), "{what} shows the password: {shown}");
    }

    /// URLs that do not parse, servers that are not there, wrong passwords, a RedLock quorum
    /// that fails: no error, `Debug` or `Display` shows the password.
    #[tokio::test]
    async fn passwords_never_shown() {
        let free_port = || {
            std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port()
        };
        let (dead_1, dead_2) = (free_port(), free_port());
        let urls = [
            format!("redis://:{SECRET}@[::1"),
            format!("redis://user:{SECRET}@host:notaport"),
            format!("redis://user:{SECRET}@127.0.0.1/notadb"),
            format!("http://user:{SECRET}@127.0.0.1"),
            format!("redis://user:{SECRET}@127.0.0.1:{dead_1}"),
        ];
        for url in &urls {
            let error = RedisLockProvider::connect(url).await.unwrap_err();
            assert_hidden(url, &format!("{error} {error:?}"));
            let error = RedLockProvider::connect([url]).await.unwrap_err();
            assert_hidden(url, &format!("{error} {error:?}"));
        }

        let Some(server) = TestServer::start(&["--user", "alice", "on", &format!(">{SECRET}"), "~*", "&*", "+@all"])
        else {
            return;
        };
        let port = server.url().rsplit(':').next().unwrap().to_owned();
        let wrong = format!("redis://alice:wrong-{SECRET}@127.0.0.1:{port}");
        let error = RedisLockProvider::connect(&wrong).await.unwrap_err();
        assert!(matches!(error, Error::Store { .. }), "{error:?}");
        assert_hidden("a wrong password", &format!("{error} {error:?}"));

        let right = format!("redis://alice:{SECRET}@127.0.0.1:{port}");
        let builder = RedisLockProvider::builder().holder("h");
        assert_hidden("the builder", &format!("{builder:?}"));
        let single = builder.clone().connect(&right).await.unwrap();
        assert_hidden("the provider", &format!("{single:?} {}", single.server()));
        let lease = single.acquire(&config("auth")).await.unwrap().unwrap();
        assert!(single.release(&lease).await.unwrap());

        // Two of three masters are not there: the quorum error lists them, without passwords.
        let dead = |port: u16| format!("redis://alice:{SECRET}@127.0.0.1:{port}");
        let error = builder
            .clone()
            .connect_redlock([right.clone(), dead(dead_1), dead(dead_2)])
            .await
            .unwrap_err();
        let shown = format!("{error} {error:?}");
        assert!(shown.contains(&format!("127.0.0.1:{dead_2}")), "{shown}");
        assert_hidden("a failed quorum", &shown);
        let redlock = builder.connect_redlock([&right]).await.unwrap();
        assert_hidden("the RedLock provider", &format!("{redlock:?} {:?}", redlock.servers()));
    }
}

mod settings {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use super::*;

    /// What the providers log, as text.
    #[derive(Clone, Default)]
    struct Logs(Arc<Mutex<Vec<u8>>>);

    impl Write for Logs {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Logs {
        fn take(&self) -> String {
            String::from_utf8(std::mem::take(&mut *self.0.lock().unwrap())).unwrap()
        }
    }

    /// A server that may evict keys without an expiry (`allkeys-*`) could drop a lock hash
    /// during its lease: both providers warn at connect, naming server and policy (and never
    /// the password); a server that does not evict them gets no warning.
    #[tokio::test]
    async fn evicting_server_is_warned_about() {
        const SECRET: &str = "evict-pw-7";
        let Some(evicting) = TestServer::start(&[
            "--maxmemory-policy",
            "allkeys-lru",
            "--requirepass",
            SECRET,
        ]) else {
            return;
        };
        let Some(keeping) = TestServer::start(&["--maxmemory-policy", "volatile-lru"]) else {
            return;
        };
        let logs = Logs::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .finish();
        let _guard = tracing::subscriber::set_default(subscriber);
        let url = evicting.url().replace("redis://", &format!("redis://:{SECRET}@"));
        let address = &evicting.url()["redis://".len()..];

        RedisLockProvider::connect(&url).await.unwrap();
        let logged = logs.take();
        assert!(
            logged.contains("WARN") && logged.contains("allkeys-lru") && logged.contains(address),
            "{logged}"
        );
        assert!(!logged.contains(SECRET), "{logged}");

        RedLockProvider::connect([&url, &keeping.url()]).await.unwrap();
        let logged = logs.take();
        assert_eq!(logged.matches("WARN").count(), 1, "{logged}");
        assert!(logged.contains(address) && !logged.contains(SECRET), "{logged}");

        RedisLockProvider::connect(&keeping.url()).await.unwrap();
        let logged = logs.take();
        assert!(!logged.contains("WARN"), "{logged}");
    }
}
