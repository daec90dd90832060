//! What `EtcdLockProvider` guarantees beyond the conformance suite, against a real etcd
//! cluster: tokens above every earlier one after the keys were deleted by hand (etcdctl, as an
//! operator resets a lock), a stale holder refused after such a reset, ticks on locks written
//! before ticks, release hints, and configuration errors naming the field. Needs `SHEDLOCK_TEST_ETCD_URL`; skipped without it,
//! failed without it when `CI=true`.

mod common;

use std::process::Command;
use std::time::{Duration, SystemTime};

use shedlock_conformance::unique_lock_name;
use shedlock_core::{Error, LockConfiguration, LockInspector, LockProvider, Tick};
use shedlock_etcd::EtcdLockProvider;
use shedlock_test_support::stores::{assert_stale_lease_refused, free_port, take_over};

fn config(name: &str) -> LockConfiguration {
    LockConfiguration::new(name, Duration::from_secs(60), Duration::ZERO).unwrap()
}

/// `etcdctl <args>` on the test cluster, as an operator runs it: what it printed.
fn etcdctl(args: &[&str]) -> String {
    let url = common::etcd_url().expect("SHEDLOCK_TEST_ETCD_URL");
    let output = Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", &url])
        .args(args)
        .output()
        .expect("run etcdctl (Debian's etcd-client; .ci/etcd.sh installs it)");
    assert!(output.status.success(), "etcdctl {args:?} failed");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `etcdctl del --prefix <prefix>` on the test cluster: every key the provider wrote.
fn delete_all_by_hand(prefix: &str) {
    etcdctl(&["del", "--prefix", prefix]);
}

#[tokio::test]
async fn tokens_stay_above_every_earlier_one_after_the_keys_are_deleted_by_hand() {
    let Some(provider) = common::provider("reset").await else {
        return;
    };
    let name = unique_lock_name("reset");
    let first = provider
        .acquire(&config(&name))
        .await
        .unwrap()
        .expect("acquired");
    delete_all_by_hand(provider.prefix());
    assert_eq!(
        provider.lock_record(&name).await.unwrap(),
        None,
        "the record is gone"
    );
    let other = provider.with_holder("other").unwrap();
    let second = take_over(&other, &config(&name), &first).await;
    // The holder from before the reset can neither release nor extend the new lease.
    assert_stale_lease_refused(&provider, &first).await;
    assert!(
        other.acquire(&config(&name)).await.unwrap().is_none(),
        "still held"
    );
    assert!(other.release(&second).await.unwrap());
}

/// A lock written before ticks (a record without a tick key) has no last tick: its next claim
/// is granted, and the tick kept in `ticks/<name>` through the release, so it is refused the
/// second time. A tick key shedlock did not write is an error naming it.
#[tokio::test]
async fn a_lock_from_before_ticks_is_granted_a_tick() {
    let Some(provider) = common::provider("old-record").await else {
        return;
    };
    let name = unique_lock_name("old-record");
    // What a release by a version before ticks left.
    let record = format!("{}locks/{name}", provider.prefix());
    let old = r#"{"holder":"web-1","token":41,"locked_at_ms":1000,"lock_until_ms":1000}"#;
    etcdctl(&["put", &record, old]);
    let tick = Tick::new(SystemTime::now());
    let c = config(&name).for_tick(tick);
    let lease = provider.acquire(&c).await.unwrap().expect("no last tick");
    assert!(lease.fencing_token() > 41);
    assert!(provider.release(&lease).await.unwrap());
    let tick_key = format!("{}ticks/{name}", provider.prefix());
    let kept = etcdctl(&["get", "--print-value-only", &tick_key]);
    assert_eq!(
        kept.trim(),
        tick.millis().to_string(),
        "the tick outlives the release"
    );
    assert!(
        provider.acquire(&c).await.unwrap().is_none(),
        "granted once"
    );
    etcdctl(&["put", &tick_key, "soon"]);
    let error = provider.acquire(&c).await.unwrap_err();
    assert!(
        matches!(&error, Error::Store { .. }) && format!("{error:#}").contains(&tick_key),
        "a tick key shedlock did not write is an error naming it: {error:#}"
    );
}

#[tokio::test]
async fn a_release_wakes_the_hint_subscribers() {
    let Some(provider) = common::provider("hints").await else {
        return;
    };
    let mut hints = provider.release_hints().expect("etcd gives release hints");
    let name = unique_lock_name("hints");
    let holder = provider.with_holder("holder").unwrap();
    // The watch starts in the background: acquire and release until a hint arrives.
    let hinted = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let lease = holder.acquire(&config(&name)).await.unwrap().expect("free");
            assert!(holder.release(&lease).await.unwrap());
            match tokio::time::timeout(Duration::from_millis(500), hints.recv()).await {
                Ok(Ok(released)) => return released,
                Ok(Err(error)) => panic!("hint channel: {error}"),
                Err(_) => continue,
            }
        }
    })
    .await
    .expect("a hint within 10 s");
    assert_eq!(&*hinted, name.as_str());
}

#[tokio::test]
async fn bad_configuration_is_refused_naming_the_field() {
    let field = |error: Error| match error {
        Error::InvalidConfig { field, .. } => field,
        other => panic!("not a configuration error: {other}"),
    };
    let cases = [
        (EtcdLockProvider::builder(" , "), "endpoints"),
        (EtcdLockProvider::builder("etcd1:2379"), "endpoints"),
        (
            EtcdLockProvider::builder("http://127.0.0.1:2379").prefix(""),
            "prefix",
        ),
        (
            EtcdLockProvider::builder("http://127.0.0.1:2379").holder(""),
            "holder",
        ),
        (
            EtcdLockProvider::builder("http://127.0.0.1:2379").credentials("", "pw"),
            "user",
        ),
        (
            EtcdLockProvider::builder("http://127.0.0.1:2379").credentials("app", ""),
            "password",
        ),
        (
            EtcdLockProvider::builder("http://127.0.0.1:2379").request_timeout(Duration::ZERO),
            "request_timeout",
        ),
        (
            EtcdLockProvider::builder("http://127.0.0.1:2379").run_retention(Duration::ZERO),
            "run_retention",
        ),
        (
            EtcdLockProvider::builder("http://127.0.0.1:2379").runs_per_lock(0),
            "runs_per_lock",
        ),
    ];
    for (builder, expected) in cases {
        assert_eq!(field(builder.connect().await.unwrap_err()), expected);
    }
}

#[tokio::test]
async fn an_unreachable_cluster_is_a_store_error_within_the_request_timeout() {
    // Nothing listens on port 1.
    let started = std::time::Instant::now();
    let error = EtcdLockProvider::builder("http://127.0.0.1:1")
        .request_timeout(Duration::from_millis(500))
        .connect()
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Store { .. }), "{error}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let cause = std::error::Error::source(&error).map(ToString::to_string);
    let cause = cause.unwrap_or_default();
    assert!(
        cause.contains("tcp connect error"),
        "the cause is named: {cause}"
    );
}

/// A provider on `endpoints` (some of them dead or cut) under a prefix of its own, made of
/// `base`, with a 2 s request timeout.
async fn provider_on(endpoints: String, base: &str) -> EtcdLockProvider {
    EtcdLockProvider::builder(endpoints)
        .prefix(common::unique_key_prefix(base))
        .request_timeout(Duration::from_secs(2))
        .connect()
        .await
        .expect("connect through the endpoints that answer")
}

/// A member that refuses connections is left for the next endpoint: every operation succeeds.
#[tokio::test]
async fn a_dead_first_endpoint_is_left_for_the_next() {
    let Some(url) = common::etcd_url() else {
        return;
    };
    let dead = format!("http://127.0.0.1:{}", free_port());
    let provider = provider_on(format!("{dead},{url}"), "dead-first").await;
    let name = unique_lock_name("dead-first");
    for _ in 0..4 {
        let lease = provider
            .acquire(&config(&name))
            .await
            .unwrap()
            .expect("free");
        let extended = provider.extend(&lease, Duration::from_secs(60), Duration::ZERO);
        assert!(extended.await.unwrap().is_some());
        assert!(provider.release(&lease).await.unwrap());
    }
}

/// `lock_at_least_for` below etcd's shortest lease (about 2 s) is honoured to the
/// millisecond while the holder lives: the lock is free again soon after
/// `locked_at + lock_at_least_for`, not when a 2 s lease runs out (which would skip the next
/// tick of a per-second job).
#[tokio::test]
async fn a_short_lock_at_least_for_ends_on_time() {
    let Some(provider) = common::provider("short-least").await else {
        return;
    };
    let (a, b) = (
        provider.with_holder("a").unwrap(),
        provider.with_holder("b").unwrap(),
    );
    let at_least = Duration::from_millis(400);
    let config = LockConfiguration::new(
        unique_lock_name("short-least"),
        Duration::from_secs(60),
        at_least,
    )
    .unwrap();
    let lease = a.acquire(&config).await.unwrap().expect("free");
    assert!(a.release(&lease).await.unwrap());
    assert!(
        b.acquire(&config).await.unwrap().is_none(),
        "held for lock_at_least_for"
    );
    tokio::time::sleep(at_least + Duration::from_millis(600)).await;
    let next = b.acquire(&config).await.unwrap();
    assert!(
        next.is_some(),
        "still held 1 s after a lock_at_least_for of 400 ms"
    );
    // A job that ran longer than lock_at_least_for frees the lock at release.
    let next = next.unwrap();
    tokio::time::sleep(at_least).await;
    assert!(b.release(&next).await.unwrap());
    assert!(
        a.acquire(&config).await.unwrap().is_some(),
        "free at once after a long job"
    );
}

/// The connection to the member in use cut while a lease is held — silently (a partition:
/// nothing forwarded, nothing reset), then with resets: at most the call in flight fails, as a
/// store error within the request timeout; the provider moves to the next member, extends and
/// releases the held lease there, and goes on working.
#[tokio::test]
async fn a_member_cut_off_mid_use_is_left_for_the_next() {
    let Some(url) = common::etcd_url() else {
        return;
    };
    let mut endpoints: Vec<&str> = url.split(',').collect();
    let first = endpoints.remove(0);
    let proxy = shedlock_conformance::CutProxy::start(first.trim_start_matches("http://"))
        .await
        .unwrap();
    let through = format!("http://{},{}", proxy.addr(), endpoints.join(","));
    let provider = provider_on(through, "cut-member").await;
    let name = unique_lock_name("cut-member");
    for mode in [
        shedlock_conformance::ProxyMode::Blackhole,
        shedlock_conformance::ProxyMode::Reset,
    ] {
        proxy.set(shedlock_conformance::ProxyMode::Open);
        let lease = provider
            .acquire(&config(&name))
            .await
            .unwrap()
            .expect("free");
        proxy.set(mode);
        // The call in flight when the member went silent may fail (within the request
        // timeout, as a store error, never a hang); the next one goes to another member.
        let mut failures = Vec::new();
        let extended = loop {
            match provider
                .extend(&lease, Duration::from_secs(60), Duration::ZERO)
                .await
            {
                Ok(extended) => break extended.expect("still held"),
                Err(error) if failures.is_empty() => failures.push(error.to_string()),
                Err(error) => panic!("{mode:?}: failed twice: {failures:?}, then {error}"),
            }
        };
        assert_eq!(extended.fencing_token(), lease.fencing_token());
        assert!(provider.release(&extended).await.unwrap(), "{mode:?}");
        let again = provider
            .acquire(&config(&name))
            .await
            .unwrap()
            .expect("free again");
        assert!(again.fencing_token() > lease.fencing_token(), "{mode:?}");
        assert!(provider.release(&again).await.unwrap(), "{mode:?}");
    }
}
