//! `Store::list_locks` and `Store::lock_record` read the locks through the provider's
//! inspector on every backend, Redis and RedLock included (they used to refuse). Each server
//! backend is skipped without its URL, and fails without it when `CI=true`.

use std::time::Duration;

use shedlock::LockConfiguration;
use shedlock_conformance::unique_table;
use shedlock_harness::{Backend, DEFAULT_ACQUIRE_TIMEOUT, Store, StoreConfig, database_url};

async fn a_held_lock_is_listed_and_read(backend: Backend) {
    let Some(url) = database_url(backend) else {
        return;
    };
    let table = unique_table("harness_inspect");
    let store = Store::connect(&StoreConfig {
        backend,
        url,
        lock_table: table.clone(),
        journal_table: format!("{table}_journal"),
        holder: "inspector".to_owned(),
        max_connections: 2,
        acquire_timeout: DEFAULT_ACQUIRE_TIMEOUT,
    })
    .await
    .expect("connect");
    store
        .create_tables(&format!("{table}_journal"))
        .await
        .expect("tables");
    let config = LockConfiguration::new("job", Duration::from_secs(60), Duration::ZERO).unwrap();
    let lease = store
        .provider()
        .acquire(&config)
        .await
        .unwrap()
        .expect("free");
    let record = store.lock_record("job").await.unwrap().expect("a record");
    assert_eq!(
        (record.holder.as_str(), record.fencing_token, record.held),
        ("inspector", lease.fencing_token(), true),
        "{backend}"
    );
    let listed = store.list_locks().await.unwrap();
    assert_eq!(listed.len(), 1, "{backend}: {listed:?}");
    assert_eq!(listed[0].name, "job");
    store.drop_tables(&format!("{table}_journal")).await;
}

/// One test per backend, named after it.
macro_rules! on_each_backend {
    ($($name:ident: $backend:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                a_held_lock_is_listed_and_read(Backend::$backend).await;
            }
        )*
    };
}

on_each_backend! {
    sqlite: Sqlite,
    postgres: Postgres,
    mysql: MySql,
    redis: Redis,
    redlock: RedLock,
}
