//! `acquire_many` on a real ensemble, on the wire: the provider talks to one server through a
//! proxy in this test that counts its requests and round trips (a request sent while none is
//! awaiting its answer starts one; pings are left out), and can hold a transaction back while
//! another instance takes a lock. Needs `SHEDLOCK_TEST_ZK_URL`
//! (skipped without it; failed without it when `CI=true`).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use shedlock_core::{LockConfiguration, LockProvider};
use shedlock_zookeeper::ZkLockProvider;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::time::Instant;

/// What the proxy saw since the last [`Wire::take`].
#[derive(Debug, Default)]
struct Wire {
    requests: AtomicU64,
    round_trips: AtomicU64,
    /// Requests sent and not answered yet.
    awaiting: AtomicI64,
    /// Set: the next transaction (`multi`) is held back until `release` is notified.
    hold_next_multi: AtomicBool,
    /// Notified when a transaction is held back.
    holding: Notify,
    release: Notify,
}

impl Wire {
    /// (requests, round trips) since the last take.
    fn take(&self) -> (u64, u64) {
        (
            self.requests.swap(0, Ordering::SeqCst),
            self.round_trips.swap(0, Ordering::SeqCst),
        )
    }
}

/// ZooKeeper's ping's xid, in requests and answers.
const PING_XID: i32 = -2;

/// The operation code of a transaction (`multi`).
const MULTI_OP: i32 = 14;

/// A proxy to the first server of the connect string, counting what passes on `wire`.
async fn counting_proxy(wire: Arc<Wire>) -> String {
    let server = common::zk_url()
        .expect("connect string")
        .split(',')
        .next()
        .expect("a server")
        .to_owned();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let upstream = TcpStream::connect(&server).await.unwrap();
            let (client_in, client_out) = client.into_split();
            let (server_in, server_out) = upstream.into_split();
            tokio::spawn(relay(client_in, server_out, Arc::clone(&wire), true));
            tokio::spawn(relay(server_in, client_out, Arc::clone(&wire), false));
        }
    });
    address
}

/// How long an answer takes from the server to the client through the proxy: well above
/// the time the client takes to send requests made together, so the round trips counted are
/// the ones the client waits for, on a loopback that answers in microseconds.
const LATENCY: Duration = Duration::from_millis(20);

/// Copies frames (a 4-byte length, then the body whose first 4 bytes are the xid), answers
/// (`!to_server`) after [`LATENCY`], counting requests and answers as they are delivered. The
/// first frame each way is the session handshake.
async fn relay(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    wire: Arc<Wire>,
    to_server: bool,
) {
    let (frames, mut delivered) = tokio::sync::mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    tokio::spawn(async move {
        let mut handshake = true;
        while let Some((due, frame)) = delivered.recv().await {
            tokio::time::sleep_until(due).await;
            let xid = i32::from_be_bytes(frame[4..8].try_into().unwrap());
            let op = frame
                .get(8..12)
                .map(|b| i32::from_be_bytes(b.try_into().unwrap()));
            if to_server
                && op == Some(MULTI_OP)
                && wire.hold_next_multi.swap(false, Ordering::SeqCst)
            {
                wire.holding.notify_one();
                wire.release.notified().await;
            }
            if !std::mem::take(&mut handshake) && xid != PING_XID {
                if !to_server {
                    wire.awaiting.fetch_sub(1, Ordering::SeqCst);
                } else {
                    wire.requests.fetch_add(1, Ordering::SeqCst);
                    if wire.awaiting.fetch_add(1, Ordering::SeqCst) == 0 {
                        wire.round_trips.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
            if to.write_all(&frame).await.is_err() {
                return;
            }
        }
    });
    let delay = if to_server { Duration::ZERO } else { LATENCY };
    loop {
        let Ok(len) = from.read_i32().await else {
            return;
        };
        let mut frame = len.to_be_bytes().to_vec();
        frame.resize(4 + len.max(4) as usize, 0);
        if from
            .read_exact(&mut frame[4..4 + len.max(0) as usize])
            .await
            .is_err()
            || frames.send((Instant::now() + delay, frame)).is_err()
        {
            return;
        }
    }
}

/// A batch of 100 locks costs 3 requests when they are free (the clock write and one
/// multiRead, sent together, then one transaction) and 2 when they are held, where 100
/// acquires cost 300 and 200. The client (`zookeeper-client` 0.11) leaves Nagle's algorithm on,
/// so the multiRead waits on the wire for the clock write's acknowledgement, which the server
/// (here the proxy's kernel) sends with its answer: 3 round trips, and 2; the same holds for
/// the two requests `acquire` sends together.
#[tokio::test]
async fn a_batch_of_100_is_three_requests() {
    if common::zk_url().is_none() {
        return;
    }
    let wire = Arc::new(Wire::default());
    let address = counting_proxy(Arc::clone(&wire)).await;
    let provider = ZkLockProvider::builder(address)
        .root(common::unique_zk_root("batch-count"))
        .holder("tester")
        .connect()
        .await
        .expect("connect through the proxy");
    provider.create_schema().await.expect("create the schema");
    let lease = Duration::from_secs(600);
    let configs: Vec<LockConfiguration> = (0..100)
        .map(|i| LockConfiguration::new(format!("job-{i:03}"), lease, Duration::ZERO).unwrap())
        .collect();

    wire.take();
    let granted = provider.acquire_many(&configs).await;
    let free = wire.take();
    assert!(
        granted.iter().all(|a| matches!(a, Ok(Some(_)))),
        "{granted:?}"
    );
    let refused = provider.acquire_many(&configs).await;
    let held = wire.take();
    assert!(refused.iter().all(|a| matches!(a, Ok(None))), "{refused:?}");
    eprintln!("batch of 100: free {free:?}, held {held:?} (requests, round trips)");
    assert!(free.0 == 3 && free.1 <= 3, "free: {free:?}");
    assert!(held.0 == 2 && held.1 <= 2, "held: {held:?}");

    // The trait's default, for the figures it replaces: one acquire per lock, all at once.
    for lease in granted.into_iter().flatten().flatten() {
        provider.release(&lease).await.unwrap();
    }
    wire.take();
    let tasks: Vec<_> = configs
        .iter()
        .map(|config| {
            let (provider, config) = (provider.clone(), config.clone());
            tokio::spawn(async move { provider.acquire(&config).await })
        })
        .collect();
    for task in tasks {
        assert!(task.await.unwrap().unwrap().is_some(), "released");
    }
    let default = wire.take();
    eprintln!("100 acquires at once, free: {default:?} (requests, round trips)");
    assert_eq!(default.0, 300);
}

/// Another instance takes one of the batch's locks between the batch's read and its
/// transaction (held back by the proxy meanwhile): the transaction fails on that lock's
/// compare-and-set, that lock is refused, and the others are still granted, each in a
/// transaction of its own.
#[tokio::test]
async fn a_lock_taken_after_the_read_refuses_only_itself() {
    if common::zk_url().is_none() {
        return;
    }
    let wire = Arc::new(Wire::default());
    let address = counting_proxy(Arc::clone(&wire)).await;
    let root = common::unique_zk_root("batch-race");
    let provider = ZkLockProvider::builder(address)
        .root(root.clone())
        .holder("tester")
        .connect()
        .await
        .expect("connect through the proxy");
    provider.create_schema().await.expect("create the schema");
    let other = ZkLockProvider::builder(common::zk_url().unwrap())
        .root(root)
        .holder("other")
        .connect()
        .await
        .expect("connect");
    let lease = Duration::from_secs(600);
    let configs: Vec<LockConfiguration> = ["a", "b", "c", "new"]
        .into_iter()
        .map(|name| LockConfiguration::new(name, lease, Duration::ZERO).unwrap())
        .collect();
    // Nodes that exist (the compare-and-set path), and one that does not (a create).
    for config in &configs[..3] {
        let lease = other.acquire(config).await.unwrap().expect("free");
        assert!(other.release(&lease).await.unwrap());
    }

    wire.hold_next_multi.store(true, Ordering::SeqCst);
    let batch = tokio::spawn({
        let (provider, configs) = (provider.clone(), configs.clone());
        async move { provider.acquire_many(&configs).await }
    });
    wire.holding.notified().await;
    let taken = other.acquire(&configs[1]).await.unwrap().expect("free");
    wire.release.notify_one();
    let answers = batch.await.unwrap();

    let granted: Vec<bool> = answers
        .iter()
        .map(|a| a.as_ref().expect("no store error").is_some())
        .collect();
    assert_eq!(granted, [true, false, true, true], "a, b (taken), c, new");
    assert!(
        other.acquire(&configs[0]).await.unwrap().is_none(),
        "a is held"
    );
    for lease in answers.into_iter().flatten().flatten() {
        assert!(provider.release(&lease).await.unwrap(), "{}", lease.name());
    }
    assert!(other.release(&taken).await.unwrap(), "b stayed the other's");
}
