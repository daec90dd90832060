//! `RedisLockProvider` against a real Redis: the conformance suite and Redis specifics (key
//! layout, release hints, inspection, bad input). Needs `SHEDLOCK_TEST_REDIS_URL`; skipped
//! without it, failed without it when `CI=true`.

mod common;

conformance_suites!(redis);

mod specifics {
    use std::collections::HashMap;
    use std::time::{Duration, SystemTime};

    use redis::AsyncCommands as _;
    use shedlock_core::{Error, LockConfiguration, LockInspector, LockProvider, LockQuery, Tick};
    use shedlock_redis::RedisLockProvider;

    use crate::common;
    use shedlock_test_support::RedisServer;

    fn config(name: &str, lease: Duration, at_least: Duration) -> LockConfiguration {
        LockConfiguration::new(name, lease, at_least).unwrap()
    }

    /// One hash per lock, no expiry, fields on Redis's clock; inspection reads it back.
    #[tokio::test]
    async fn lock_is_one_hash_that_outlives_the_lease() {
        let Some(provider) = common::redis("inspect").await else {
            return;
        };
        let lease = provider
            .acquire(&config("report", Duration::from_secs(30), Duration::ZERO))
            .await
            .unwrap()
            .unwrap();
        let mut redis = common::operator().await;
        let key = provider.key("report");
        let fields: HashMap<String, String> = redis.hgetall(&key).await.unwrap();
        assert_eq!(fields["holder"], "inspect");
        assert_eq!(fields["token"], lease.fencing_token().to_string());
        let ttl: i64 = redis.pttl(&key).await.unwrap();
        assert_eq!(ttl, -1, "the lock hash must not expire");

        let state = provider.lock_record("report").await.unwrap().unwrap();
        assert!(state.held);
        assert_eq!(state.holder, "inspect");
        assert_eq!(state.fencing_token, lease.fencing_token());
        assert_eq!(state.lock_until, lease.lock_until());
        assert!(
            state
                .to_string()
                .starts_with("report: held by inspect until ")
        );
        assert!(provider.release(&lease).await.unwrap());
        let listed = provider.list_locks(&LockQuery::all()).await.unwrap();
        assert_eq!(listed.len(), 1, "{listed:?}");
        assert!(!listed[0].held);
        assert!(provider.lock_record("never-used").await.unwrap().is_none());
    }

    /// A refused attempt (the lock held, or acquired within the window) writes nothing: the
    /// hash stays as it was, token included. The conformance suite sees only that tokens
    /// increase; this is what it cannot see.
    #[tokio::test]
    async fn refused_attempts_change_nothing() {
        let Some(a) = common::redis("refused").await else {
            return;
        };
        let b = a.with_holder("b").unwrap();
        let mut redis = common::operator().await;
        let key = a.key("refused");
        let lock = config("refused", Duration::from_secs(30), Duration::ZERO);
        let lease = a.acquire(&lock).await.unwrap().unwrap();
        let held: HashMap<String, String> = redis.hgetall(&key).await.unwrap();
        assert!(b.acquire(&lock).await.unwrap().is_none());
        let after: HashMap<String, String> = redis.hgetall(&key).await.unwrap();
        assert_eq!(after, held, "a refusal of a held lock wrote");
        assert!(a.release(&lease).await.unwrap());
        let released: HashMap<String, String> = redis.hgetall(&key).await.unwrap();
        let within = lock.clone().unless_acquired_within(Duration::from_secs(60));
        assert!(b.acquire(&within).await.unwrap().is_none());
        let after: HashMap<String, String> = redis.hgetall(&key).await.unwrap();
        assert_eq!(after, released, "a refusal within the window wrote");
    }

    /// A hash written before ticks (no `last_tick` field) reads as "no tick granted": a claim
    /// is granted and sets `last_tick`, which extend and release keep; the same tick claimed
    /// again is refused and writes nothing.
    #[tokio::test]
    async fn hash_written_before_ticks_is_granted_a_tick() {
        let Some(provider) = common::redis("ticks").await else {
            return;
        };
        let mut redis = common::operator().await;
        let key = provider.key("old-layout");
        let () = redis
            .hset_multiple(&key, &common::HASH_BEFORE_TICKS)
            .await
            .unwrap();
        let lock = config("old-layout", Duration::from_secs(30), Duration::ZERO);
        let tick = Tick::new(SystemTime::now());
        let lease = provider
            .acquire(&lock.clone().for_tick(tick))
            .await
            .unwrap()
            .expect("a hash without last_tick takes a tick");
        assert!(lease.fencing_token() > 5);
        let last_tick = || async {
            let mut redis = common::operator().await;
            let last: Option<String> = redis.hget(&key, "last_tick").await.unwrap();
            last
        };
        assert_eq!(last_tick().await, Some(tick.millis().to_string()));
        let lease = provider
            .extend(&lease, Duration::from_secs(30), Duration::ZERO)
            .await
            .unwrap()
            .unwrap();
        assert!(provider.release(&lease).await.unwrap());
        assert_eq!(
            last_tick().await,
            Some(tick.millis().to_string()),
            "extend or release lost the last tick"
        );
        let released: HashMap<String, String> = redis.hgetall(&key).await.unwrap();
        assert!(
            provider
                .acquire(&lock.clone().for_tick(tick))
                .await
                .unwrap()
                .is_none()
        );
        let after: HashMap<String, String> = redis.hgetall(&key).await.unwrap();
        assert_eq!(after, released, "a refused tick wrote");
    }

    /// A release that frees the lock publishes its name; one held on by `lock_at_least_for`
    /// does not.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn release_publishes_a_hint_when_the_lock_is_free() {
        let Some(provider) = common::redis("hints").await else {
            return;
        };
        let mut hints = provider.release_hints().expect("hints are on by default");
        // The subscription is set up in the background: publish until it is.
        let free = config("free", Duration::from_secs(30), Duration::ZERO);
        let hint = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                let lease = provider.acquire(&free).await.unwrap().unwrap();
                assert!(provider.release(&lease).await.unwrap());
                if let Ok(Ok(name)) =
                    tokio::time::timeout(Duration::from_millis(100), hints.recv()).await
                {
                    return name;
                }
            }
        })
        .await
        .expect("a release hint arrives");
        assert_eq!(&*hint, "free");
        while hints.try_recv().is_ok() {}

        let held_on = config("held-on", Duration::from_secs(30), Duration::from_secs(30));
        let lease = provider.acquire(&held_on).await.unwrap().unwrap();
        assert!(provider.release(&lease).await.unwrap());
        let lease = provider.acquire(&free).await.unwrap().unwrap();
        assert!(provider.release(&lease).await.unwrap());
        let next = tokio::time::timeout(Duration::from_secs(5), hints.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&*next, "free", "a lock still held was announced as free");
    }

    /// A key of another type at a lock's name: a clear error naming the key, no panic.
    #[tokio::test]
    async fn key_of_the_wrong_type_is_reported() {
        let Some(provider) = common::redis("wrongtype").await else {
            return;
        };
        let mut redis = common::operator().await;
        let key = provider.key("taken");
        let () = redis.set(&key, "someone else's").await.unwrap();
        let lock = config("taken", Duration::from_secs(30), Duration::ZERO);
        let error = provider.acquire(&lock).await.unwrap_err();
        let message = error.to_string();
        assert!(matches!(error, Error::Store { .. }), "{error:?}");
        assert!(
            message.contains("WRONGTYPE") && message.contains(&key),
            "{message}"
        );
        assert!(provider.lock_record("taken").await.is_err());
        assert!(provider.list_locks(&LockQuery::all()).await.is_err());
    }

    #[tokio::test]
    async fn bad_settings_name_the_setting() {
        let field = |r: Result<RedisLockProvider, Error>| match r {
            Err(Error::InvalidConfig { field, .. }) => field,
            other => panic!("expected InvalidConfig, got {other:?}"),
        };
        let url = "redis://127.0.0.1:1";
        let builder = RedisLockProvider::builder;
        assert_eq!(
            field(builder().key_prefix("").connect(url).await),
            "key_prefix"
        );
        assert_eq!(
            field(builder().key_prefix("a*").connect(url).await),
            "key_prefix"
        );
        assert_eq!(field(builder().holder("").connect(url).await), "holder");
        assert_eq!(
            field(builder().timeout(Duration::ZERO).connect(url).await),
            "timeout"
        );
        assert_eq!(
            field(builder().release_channel("").connect(url).await),
            "release_channel"
        );
        assert_eq!(
            field(RedisLockProvider::connect("http://x:secret@host").await),
            "url"
        );
        let error = RedisLockProvider::connect("redis://:secret@[::1")
            .await
            .unwrap_err();
        assert!(
            !format!("{error} {error:?}").contains("secret"),
            "{error:?}"
        );
    }

    /// Nothing listens on the port: connect fails at once with the address, no panic.
    #[tokio::test]
    async fn unreachable_server_is_a_store_error() {
        let port = shedlock_test_support::stores::free_port();
        let error = RedisLockProvider::connect(&format!("redis://127.0.0.1:{port}"))
            .await
            .unwrap_err();
        assert!(matches!(error, Error::Store { .. }), "{error:?}");
        assert!(
            error.to_string().contains(&format!("127.0.0.1:{port}")),
            "{error}"
        );
    }

    /// A wrong password: a store error that says so and never shows the password.
    #[tokio::test]
    async fn wrong_password_is_reported_without_the_password() {
        let Some(server) = RedisServer::start(&["--requirepass", "right-secret"]) else {
            return;
        };
        let url = server.url().replace("redis://", "redis://:wrong-secret@");
        let error = RedisLockProvider::connect(&url).await.unwrap_err();
        let shown = format!("{error} {error:?}");
        assert!(matches!(error, Error::Store { .. }), "{error:?}");
        assert!(
            !shown.contains("wrong-secret") && !shown.contains("right-secret"),
            "{shown}"
        );
        assert!(
            shown.contains("WRONGPASS") || shown.to_lowercase().contains("auth"),
            "{shown}"
        );

        let right = server.url().replace("redis://", "redis://:right-secret@");
        let provider = RedisLockProvider::connect(&right).await.unwrap();
        assert!(!format!("{provider:?}").contains("right-secret"));
        let lock = config("with-password", Duration::from_secs(5), Duration::ZERO);
        assert!(provider.acquire(&lock).await.unwrap().is_some());
    }

    /// The server dies under a provider: operations fail with errors (no panic, no hang past
    /// the timeout), and work again once it is back. Its data is gone, yet tokens go on above
    /// the earlier ones (they come from the server's clock).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn server_restart_fails_cleanly_then_recovers() {
        let Some(mut server) = RedisServer::start(&[]) else {
            return;
        };
        let provider = RedisLockProvider::builder()
            .timeout(Duration::from_millis(500))
            .connect(&server.url())
            .await
            .unwrap();
        let lock = config("restart", Duration::from_secs(5), Duration::ZERO);
        let lease = provider.acquire(&lock).await.unwrap().unwrap();
        assert!(provider.release(&lease).await.unwrap());
        server.kill();
        let started = tokio::time::Instant::now();
        assert!(matches!(
            provider.acquire(&lock).await,
            Err(Error::Store { .. })
        ));
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "no answer took {:?}",
            started.elapsed()
        );
        server.restart();
        let again = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                if let Ok(Some(lease)) = provider.acquire(&lock).await {
                    return lease;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await
        .expect("the provider reconnects");
        shedlock_test_support::stores::assert_token_above(&again, &lease);
    }
}
