//! The figures of BENCHMARKS.md's etcd section, as ignored tests (they need the test cluster
//! and a quiet machine; they print, they assert only that the runs worked):
//!
//! `eval "$(bash .ci/etcd.sh start)"; cargo test --release -p shedlock-etcd --lib figures -- --ignored --nocapture --test-threads 1`
//!
//! - acquire + release pairs per second through `EtcdLockProvider` against a bare loop sending
//!   the same requests over the same connection (lease grant, acquiring transaction, releasing
//!   transaction with the lease revoked), without the provider around them;
//! - graceful handover of `EtcdElector`: a leader's `resign()` to the other candidate's
//!   `on_elected`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use shedlock_core::{ElectionConfig, LockConfiguration, LockProvider};
use shedlock_runtime::LeaderElection;
use shedlock_test_support::throughput::count_pairs;
use tokio::sync::mpsc;

use crate::client::Client;
use crate::record::{LockValue, now_ms};
use crate::wire;
use crate::{EtcdElector, EtcdLockProvider};

const LEASE: Duration = Duration::from_secs(300);
const ROUNDS: usize = 4;
const WARMUP: Duration = Duration::from_millis(300);
const WINDOW: Duration = Duration::from_millis(1500);

async fn provider(part: &str) -> EtcdLockProvider {
    let url = std::env::var("SHEDLOCK_TEST_ETCD_URL").expect("SHEDLOCK_TEST_ETCD_URL");
    EtcdLockProvider::builder(url)
        .prefix(format!("bench-{part}-{}/", std::process::id()))
        .holder("bench")
        .connect()
        .await
        .expect("connect")
}

/// `workers` tasks looping `pair` for `window` after a warm-up; pairs per second.
async fn pairs_per_second<F, Fut>(workers: usize, window: Duration, pair: F) -> f64
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    count_pairs(
        workers,
        WARMUP,
        window,
        || Duration::ZERO,
        move |w| {
            let pair = pair(w);
            async move {
                pair.await;
                Ok(())
            }
        },
    )
    .await
    .expect("the pairs do not fail")
    .per_second()
}

/// The provider's requests for one pair, sent by hand on `client` (`held`, `lock`: the lock's
/// keys). Returns whether the lock was taken.
async fn bare_pair(client: &Client, held: &[u8], lock: &[u8]) -> bool {
    let Ok(grant) = client.grant(LEASE.as_secs() as i64).await else {
        return false;
    };
    let value = LockValue {
        holder: "bare".into(),
        token: None,
        locked_at_ms: now_ms(),
        lock_until_ms: now_ms() + LEASE.as_millis() as u64,
    };
    let acquired = client
        .txn_on_leases(
            wire::TxnRequest {
                compare: vec![wire::created_at(held, 0)],
                success: vec![
                    wire::put(held, b"bare".to_vec(), grant.id),
                    wire::put(lock, value.encode(), 0),
                ],
                failure: Vec::new(),
            },
            &[grant.id],
        )
        .await;
    let Some(acquired) = acquired.ok().filter(|r| r.succeeded) else {
        return false;
    };
    let released = client
        .txn(wire::TxnRequest {
            compare: vec![wire::created_at(held, acquired.revision())],
            success: vec![
                wire::get(held),
                wire::delete(held),
                wire::put(lock, value.encode(), 0),
            ],
            failure: Vec::new(),
        })
        .await;
    if let Ok(released) = released
        && let Some(kv) = released.range(0).first()
    {
        client.revoke_later(kv.lease);
    }
    true
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "figures for BENCHMARKS.md: needs the test cluster and a quiet machine"]
async fn figures_acquire_release_pairs() {
    let provider = provider("pairs").await;
    println!(
        "| workers | mode | ours (pairs/s) | bare loop (pairs/s) | ratio (median of {ROUNDS} rounds) |"
    );
    println!("|---|---|---|---|---|");
    for workers in [1, 8, 32] {
        for contended in [false, true] {
            let name = move |w: usize| {
                if contended {
                    "contended".to_owned()
                } else {
                    format!("lock-{w}")
                }
            };
            let (mut ours, mut bare, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
            for round in 0..ROUNDS {
                let p = provider.clone();
                let run_ours = || {
                    let p = p.clone();
                    pairs_per_second(workers, WINDOW, move |w| {
                        let (p, name) = (p.clone(), name(w));
                        async move {
                            let config =
                                LockConfiguration::new(name, LEASE, Duration::ZERO).unwrap();
                            if let Ok(Some(lease)) = p.acquire(&config).await {
                                let _ = p.release(&lease).await;
                            }
                        }
                    })
                };
                let (client, keys) = (provider.client.clone(), Arc::clone(&provider.keys));
                let run_bare = || {
                    let (client, keys) = (client.clone(), Arc::clone(&keys));
                    pairs_per_second(workers, WINDOW, move |w| {
                        let (client, keys, name) = (
                            client.clone(),
                            Arc::clone(&keys),
                            format!("bare-{}", name(w)),
                        );
                        async move {
                            bare_pair(&client, &keys.held(&name), &keys.lock(&name)).await;
                        }
                    })
                };
                // Interleaved, alternating which goes first.
                let (a, b) = if round % 2 == 0 {
                    let a = run_ours().await;
                    (a, run_bare().await)
                } else {
                    let b = run_bare().await;
                    (run_ours().await, b)
                };
                ours.push(a);
                bare.push(b);
                ratios.push(a / b.max(f64::MIN_POSITIVE));
            }
            println!(
                "| {workers} | {} | {:.0} | {:.0} | {:.2} ({:.2}–{:.2}) |",
                if contended {
                    "contended"
                } else {
                    "uncontended"
                },
                median(ours),
                median(bare),
                median(ratios.clone()),
                ratios.iter().copied().fold(f64::INFINITY, f64::min),
                ratios.iter().copied().fold(0.0, f64::max),
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "figures for BENCHMARKS.md: needs the test cluster and a quiet machine"]
async fn figures_graceful_handover() {
    const HANDOVERS: usize = 20;
    let config = ElectionConfig {
        lease_duration: Duration::from_secs(3),
        renew_deadline: Duration::from_secs(2),
        retry_period: Duration::from_millis(500),
    };
    let elector: EtcdElector = provider("handover").await.elector();
    let (tx, mut rx) = mpsc::unbounded_channel::<(usize, Instant)>();
    let candidate = |index: usize| {
        let tx = tx.clone();
        LeaderElection::builder("handover", elector.clone())
            .config(config)
            .on_elected(move |_| {
                let _ = tx.send((index, Instant::now()));
            })
            .start()
            .expect("start")
    };
    let mut elections = vec![candidate(0)];
    let (mut leader, _) = rx.recv().await.expect("a leader");
    elections.push(candidate(1));
    let mut samples = Vec::new();
    for _ in 0..HANDOVERS {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let resigned_at = Instant::now();
        elections[leader].resign().await;
        let (next, at) = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("a successor within 10 s")
            .expect("a successor");
        assert_ne!(next, leader, "the resigned candidate was elected again");
        samples.push((at - resigned_at).as_secs_f64() * 1e3);
        elections[leader] = candidate(leader);
        leader = next;
    }
    for election in &elections {
        election.resign().await;
    }
    let mut sorted = samples.clone();
    sorted.sort_by(f64::total_cmp);
    println!(
        "graceful handover, n = {HANDOVERS}: median {:.1} ms, p90 {:.1} ms, min {:.1} / max {:.1} ms",
        median(samples),
        sorted[sorted.len() * 9 / 10],
        sorted[0],
        sorted[sorted.len() - 1]
    );
}
