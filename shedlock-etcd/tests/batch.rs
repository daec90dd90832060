//! `acquire_many` on a real cluster, counted by the cluster: the requests every member
//! started (`grpc_server_started_total` in its `/metrics`), by method, around a batch. The
//! only test of its binary, so that nothing else of this crate talks to the cluster meanwhile.
//! Needs `SHEDLOCK_TEST_ETCD_URL` (skipped without it; failed without it when `CI=true`).

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use shedlock_core::{LockConfiguration, LockProvider, Tick};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Requests started by method (`Txn`, `LeaseGrant`, …), summed over the members.
async fn started() -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for endpoint in common::etcd_url().expect("endpoints").split(',') {
        let address = endpoint.trim().trim_start_matches("http://");
        let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
        let request = format!("GET /metrics HTTP/1.0\r\nHost: {address}\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).await.unwrap();
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("grpc_server_started_total{grpc_method=\"") else {
                continue;
            };
            let (method, rest) = rest.split_once('"').unwrap();
            let count: f64 = rest.rsplit(' ').next().unwrap().parse().unwrap();
            *counts.entry(method.to_owned()).or_default() += count as u64;
        }
    }
    counts
}

/// The requests started since `before`, by method (those that started any).
async fn since(before: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    started()
        .await
        .into_iter()
        .map(|(method, n)| {
            let earlier = before.get(&method).copied().unwrap_or(0);
            (method, n - earlier)
        })
        .filter(|(_, n)| *n > 0)
        .collect()
}

fn counts(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(m, n)| (m.to_string(), *n)).collect()
}

/// A batch of 100 tick claims: 2 reads (64 locks each at most), 100 lease grants, one
/// transaction; where 100 acquires cost 100 reads, 100 grants and 100 transactions. Refused
/// on the tick, the batch is its 2 reads. Round trips: 3 (read, grants, transaction), as one
/// acquire of a tick.
#[tokio::test]
async fn a_batch_of_100_ticks_is_one_transaction() {
    let Some(provider) = common::provider("batch-count").await else {
        return;
    };
    let tick = Tick::new(SystemTime::now());
    let claims = |base: &str| -> Vec<LockConfiguration> {
        (0..100)
            .map(|i| {
                let name = format!("{base}-{i:03}");
                LockConfiguration::new(name, Duration::from_secs(600), Duration::ZERO)
                    .unwrap()
                    .for_tick(tick)
            })
            .collect()
    };
    let configs = claims("job");

    let before = started().await;
    let granted = provider.acquire_many(&configs).await;
    let free = since(&before).await;
    assert!(
        granted.iter().all(|a| matches!(a, Ok(Some(_)))),
        "{granted:?}"
    );
    let before = started().await;
    let refused = provider.acquire_many(&configs).await;
    let held = since(&before).await;
    assert!(refused.iter().all(|a| matches!(a, Ok(None))), "{refused:?}");
    eprintln!("batch of 100 ticks: free {free:?}, refused {held:?}");
    assert_eq!(free, counts(&[("LeaseGrant", 100), ("Txn", 3)]));
    assert_eq!(held, counts(&[("Txn", 2)]));

    // One acquire per lock, all at once (the trait's default), for the figures it replaces.
    let singles = claims("single");
    let before = started().await;
    let tasks: Vec<_> = singles
        .iter()
        .map(|config| {
            let (provider, config) = (provider.clone(), config.clone());
            tokio::spawn(async move { provider.acquire(&config).await })
        })
        .collect();
    for task in tasks {
        assert!(task.await.unwrap().unwrap().is_some(), "free");
    }
    let default = since(&before).await;
    eprintln!("100 acquires of a tick at once: {default:?}");
    assert_eq!(default, counts(&[("LeaseGrant", 100), ("Txn", 200)]));
}
