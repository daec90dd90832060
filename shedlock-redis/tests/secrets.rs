//! Passwords and server settings: no error, `Debug` or log line shows a password, and a
//! server whose `maxmemory-policy` may evict lock hashes is warned about. Needs
//! `redis-server`; skipped without it, failed without it when `CI=true`.

mod common;

use std::time::Duration;

use shedlock_core::{Error, LockConfiguration, LockProvider};
use shedlock_redis::{RedLockProvider, RedisLockProvider};
use shedlock_test_support::RedisServer;
use shedlock_test_support::stores::free_port;

const LEASE: Duration = Duration::from_secs(30);

fn config(name: &str) -> LockConfiguration {
    LockConfiguration::new(name, LEASE, Duration::ZERO).unwrap()
}

mod secrets {
    use super::*;

    const SECRET: &str = "pw-5ecret-9";

    fn assert_hidden(what: &str, shown: &str) {
        assert!(
            !shown.contains(SECRET),
            "{what} shows the password: {shown}"
        );
    }

    /// URLs that do not parse, servers that are not there, wrong passwords, a RedLock quorum
    /// that fails: no error, `Debug` or `Display` shows the password.
    #[tokio::test]
    async fn passwords_never_shown() {
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

        let Some(server) = RedisServer::start(&[
            "--user",
            "alice",
            "on",
            &format!(">{SECRET}"),
            "~*",
            "&*",
            "+@all",
        ]) else {
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
            .redlock()
            .connect([right.clone(), dead(dead_1), dead(dead_2)])
            .await
            .unwrap_err();
        let shown = format!("{error} {error:?}");
        assert!(shown.contains(&format!("127.0.0.1:{dead_2}")), "{shown}");
        assert_hidden("a failed quorum", &shown);
        let redlock = builder.redlock().connect([&right]).await.unwrap();
        assert_hidden(
            "the RedLock provider",
            &format!("{redlock:?} {:?}", redlock.servers()),
        );
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
        let Some(evicting) =
            RedisServer::start(&["--maxmemory-policy", "allkeys-lru", "--requirepass", SECRET])
        else {
            return;
        };
        let Some(keeping) = RedisServer::start(&["--maxmemory-policy", "volatile-lru"]) else {
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
        let url = evicting
            .url()
            .replace("redis://", &format!("redis://:{SECRET}@"));
        let address = &evicting.url()["redis://".len()..];

        RedisLockProvider::connect(&url).await.unwrap();
        let logged = logs.take();
        assert!(
            logged.contains("WARN") && logged.contains("allkeys-lru") && logged.contains(address),
            "{logged}"
        );
        assert!(!logged.contains(SECRET), "{logged}");

        RedLockProvider::connect([&url, &keeping.url()])
            .await
            .unwrap();
        let logged = logs.take();
        assert_eq!(logged.matches("WARN").count(), 1, "{logged}");
        assert!(
            logged.contains(address) && !logged.contains(SECRET),
            "{logged}"
        );

        RedisLockProvider::connect(&keeping.url()).await.unwrap();
        let logged = logs.take();
        assert!(!logged.contains("WARN"), "{logged}");
    }
}
