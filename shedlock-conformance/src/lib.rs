//! The conformance kit of shedlock: the contract every [`LockProvider`] must meet, as a reusable
//! test suite, with the inspection ([`inspection`]), run-record ([`runs`], [`longevity`]) and
//! election ([`election`]) suites, and the fleet's board ([`fleet`]). A store's author adds this crate as a dev-dependency; every
//! store of the shedlock workspace is tested with it exactly so.
//!
//! A provider's tests implement [`Harness`] and call [`conformance_tests!`](crate::conformance_tests),
//! which generates one `#[tokio::test]` per case (the calling crate needs `tokio` with the
//! `macros` and `rt-multi-thread` features):
//!
//! ```ignore
//! shedlock_conformance::conformance_tests!(async { Some(MyHarness::connect().await) });
//! ```
//!
//! The harness expression may return `None` to skip (after printing why), e.g. when a database
//! URL is not set.

pub mod batches;
pub mod election;
pub mod env;
pub mod fleet;
pub mod history;
pub mod inspection;
pub mod longevity;
mod names;
mod proxy;
pub mod reruns;
pub mod runs;
mod server;
pub mod ticks;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;

use shedlock_core::{LockConfiguration, LockLease, LockProvider};
use shedlock_runtime::{LockContext, LockingTaskExecutor, TaskResult};

pub use names::{unique_key_prefix, unique_lock_name, unique_table};
pub use proxy::{CutProxy, ProxyMode, upstream_of, url_at};
pub use server::ServerHarness;

/// What the suite needs from a store under test.
#[async_trait]
pub trait Harness: Send + Sync {
    /// A provider acting as the instance `holder`; all providers of one harness share a store.
    async fn provider(&self, holder: &str) -> Arc<dyn LockProvider>;

    /// Lets `duration` of store time pass (a real wait for a database, a clock step for a fake).
    async fn pass_time(&self, duration: Duration);

    /// The lease the suite uses for expiry tests: long enough for a few round trips,
    /// short enough to wait for.
    fn short_lease(&self) -> Duration {
        Duration::from_millis(800)
    }
}

fn config(name: &str, at_most: Duration, at_least: Duration) -> LockConfiguration {
    LockConfiguration::new(name, at_most, at_least).expect("valid test configuration")
}

const LONG: Duration = Duration::from_secs(60);

async fn acquire(
    provider: &Arc<dyn LockProvider>,
    config: &LockConfiguration,
) -> Option<LockLease> {
    provider
        .acquire(config)
        .await
        .expect("store error on acquire")
}

/// `provider`'s lease on the free lock `name`, for `LONG`.
async fn hold(provider: &Arc<dyn LockProvider>, name: &str) -> LockLease {
    acquire(provider, &config(name, LONG, Duration::ZERO))
        .await
        .expect("acquired")
}

/// Takes the lock of `config` and releases it at once: the released lease.
async fn acquire_and_release(
    provider: &Arc<dyn LockProvider>,
    config: &LockConfiguration,
) -> LockLease {
    let lease = acquire(provider, config).await.expect("acquired");
    assert!(provider.release(&lease).await.expect("release"));
    lease
}

/// Whether `provider` extends `lease` to `LONG`.
async fn extends(provider: &Arc<dyn LockProvider>, lease: &LockLease) -> bool {
    provider
        .extend(lease, LONG, Duration::ZERO)
        .await
        .expect("extend")
        .is_some()
}

/// `provider` can neither release nor extend the `stale` lease (`what` it is, for the
/// messages): the current lease of `config` stays, and `other` is refused the lock.
async fn assert_dead(
    provider: &Arc<dyn LockProvider>,
    stale: &LockLease,
    what: &str,
    other: &Arc<dyn LockProvider>,
    config: &LockConfiguration,
) {
    assert!(
        !provider.release(stale).await.expect("release"),
        "{what} released the current lease"
    );
    assert!(
        !extends(provider, stale).await,
        "{what} extended the current lease"
    );
    assert!(
        acquire(other, config).await.is_none(),
        "{what} disturbed the current lease"
    );
}

/// A second acquisition of a held lock fails, for another holder and for the same one.
pub async fn second_lock_fails<H: Harness>(h: &H) {
    let (a, b) = (h.provider("a").await, h.provider("b").await);
    let c = config(&unique_lock_name("second"), LONG, Duration::ZERO);
    assert!(acquire(&a, &c).await.is_some(), "first acquisition");
    assert!(
        acquire(&b, &c).await.is_none(),
        "another holder acquired a held lock"
    );
    assert!(
        acquire(&a, &c).await.is_none(),
        "the same holder acquired its held lock again"
    );
}

/// Two lock names do not affect each other.
pub async fn names_are_independent<H: Harness>(h: &H) {
    let a = h.provider("a").await;
    let first = config(&unique_lock_name("indep1"), LONG, Duration::ZERO);
    let second = config(&unique_lock_name("indep2"), LONG, Duration::ZERO);
    assert!(acquire(&a, &first).await.is_some());
    assert!(acquire(&a, &second).await.is_some());
}

/// A released lock can be taken again at once, ten times over, by either holder.
pub async fn relock_after_release<H: Harness>(h: &H) {
    let providers = [h.provider("a").await, h.provider("b").await];
    let c = config(&unique_lock_name("relock"), LONG, Duration::ZERO);
    for round in 0..10 {
        let provider = &providers[round % 2];
        let lease = acquire(provider, &c)
            .await
            .unwrap_or_else(|| panic!("round {round}: not acquired"));
        assert!(
            provider.release(&lease).await.expect("release"),
            "round {round}: release refused"
        );
    }
}

/// An unreleased lock frees itself after `lock_at_most_for`, and only then.
pub async fn expires_after_lock_at_most_for<H: Harness>(h: &H) {
    let (a, b) = (h.provider("a").await, h.provider("b").await);
    let lease_len = h.short_lease();
    let c = config(&unique_lock_name("expiry"), lease_len, Duration::ZERO);
    assert!(acquire(&a, &c).await.is_some());
    assert!(acquire(&b, &c).await.is_none(), "acquired before expiry");
    h.pass_time(lease_len + lease_len / 4).await;
    assert!(acquire(&b, &c).await.is_some(), "not acquired after expiry");
}

/// After release, `lock_at_least_for` keeps the lock until `locked_at + lock_at_least_for`,
/// and no longer.
pub async fn lock_at_least_for_holds_after_release<H: Harness>(h: &H) {
    let (a, b) = (h.provider("a").await, h.provider("b").await);
    let at_least = h.short_lease();
    let c = config(&unique_lock_name("atleast"), LONG, at_least);
    acquire_and_release(&a, &c).await;
    assert!(
        acquire(&b, &c).await.is_none(),
        "lock_at_least_for not honoured"
    );
    h.pass_time(at_least + at_least / 4).await;
    assert!(
        acquire(&b, &c).await.is_some(),
        "lock_at_least_for held too long"
    );
}

/// `lock_at_least_for` counts from the latest acquisition: a lock taken again after an earlier
/// lease ended records the new `locked_at`, and its release keeps it `lock_at_least_for` past
/// that (a store that kept the earlier `locked_at` would free it at once).
pub async fn lock_at_least_for_counts_from_each_acquisition<H: Harness>(h: &H) {
    let (a, b) = (h.provider("a").await, h.provider("b").await);
    let at_least = h.short_lease();
    let c = config(&unique_lock_name("atleast-again"), LONG, at_least);
    let first = acquire_and_release(&a, &c).await;
    h.pass_time(at_least + at_least / 4).await;
    let second = acquire(&b, &c).await.expect("free after lock_at_least_for");
    assert!(
        second.locked_at() > first.locked_at(),
        "locked_at was not moved to the new acquisition"
    );
    assert!(b.release(&second).await.expect("release"));
    assert!(
        acquire(&a, &c).await.is_none(),
        "lock_at_least_for not honoured after the lock was taken again"
    );
}

/// A lease can be extended once and repeatedly; each extension moves `lock_until` forward,
/// keeps the fencing token, and keeps the lock past the original expiry.
pub async fn extend_once_and_repeatedly<H: Harness>(h: &H) {
    let (a, b) = (h.provider("a").await, h.provider("b").await);
    // The only deadline the case depends on: the first extension must reach the store within
    // this lease (one round trip, with two short leases of room for a loaded machine).
    let first = 2 * h.short_lease();
    let c = config(&unique_lock_name("extend"), first, Duration::ZERO);
    let mut lease = acquire(&a, &c).await.expect("acquired");
    let token = lease.fencing_token();
    for round in 0..3u32 {
        // Every extension asks for the same long lease, so `lock_until` moves forward only if
        // the store counts it from the extension, not from the acquisition.
        let extended = a
            .extend(&lease, LONG, Duration::ZERO)
            .await
            .expect("extend")
            .unwrap_or_else(|| panic!("extension {round} refused"));
        assert!(
            extended.lock_until() > lease.lock_until(),
            "extension {round}: lock_until did not move"
        );
        assert_eq!(
            extended.fencing_token(),
            token,
            "extension {round} changed the token"
        );
        lease = extended;
        assert!(acquire(&b, &c).await.is_none(), "acquired an extended lock");
        // After the first extension, past the first lease's expiry (which the extension
        // outlasts, checked by the next round's acquire); then a little store time, so that
        // the next extension falls on a later tick of the store's clock.
        h.pass_time(if round == 0 {
            first + first / 4
        } else {
            first / 8
        })
        .await;
    }
    assert!(a.release(&lease).await.expect("release"));
    assert!(acquire(&b, &c).await.is_some());
}

/// An expired lease and a released lease cannot be extended.
pub async fn expired_or_released_cannot_be_extended<H: Harness>(h: &H) {
    let a = h.provider("a").await;
    let lease_len = h.short_lease();
    let released = config(&unique_lock_name("ext-released"), LONG, Duration::ZERO);
    let lease = acquire_and_release(&a, &released).await;
    assert!(!extends(&a, &lease).await, "a released lease was extended");

    let expired = config(&unique_lock_name("ext-expired"), lease_len, Duration::ZERO);
    let lease = acquire(&a, &expired).await.expect("acquired");
    h.pass_time(lease_len + lease_len / 4).await;
    assert!(!extends(&a, &lease).await, "an expired lease was extended");
}

/// A lease from an earlier acquisition (an old handle) can neither release nor extend the
/// current one, even for the same holder.
pub async fn old_lease_is_dead<H: Harness>(h: &H) {
    let (a, b) = (h.provider("a").await, h.provider("b").await);
    let c = config(&unique_lock_name("oldlease"), LONG, Duration::ZERO);
    let old = acquire_and_release(&a, &c).await;
    let current = acquire(&a, &c).await.expect("acquired again");
    assert_dead(&a, &old, "an old lease", &b, &c).await;
    assert!(a.release(&current).await.expect("release"));
}

/// A holder whose lease expired and was taken over cannot release or extend the new
/// holder's lock.
pub async fn taken_over_holder_cannot_touch_new_lease<H: Harness>(h: &H) {
    let (a, b, c3) = (
        h.provider("a").await,
        h.provider("b").await,
        h.provider("c").await,
    );
    let lease_len = h.short_lease();
    let c = config(&unique_lock_name("takeover"), lease_len, Duration::ZERO);
    let stale = acquire(&a, &c).await.expect("acquired");
    h.pass_time(lease_len + lease_len / 4).await;
    // The new holder takes a long lease, so that nothing below depends on how fast the
    // machine is.
    let long = config(c.name(), LONG, Duration::ZERO);
    let fresh = acquire(&b, &long).await.expect("taken over");
    assert!(fresh.fencing_token() > stale.fencing_token());
    assert_dead(&a, &stale, "the stale holder", &c3, &long).await;
    assert!(b.release(&fresh).await.expect("release"));
}

/// Fencing tokens strictly increase across acquire, release, expiry and takeover.
pub async fn fencing_tokens_strictly_increase<H: Harness>(h: &H) {
    let (a, b) = (h.provider("a").await, h.provider("b").await);
    let lease_len = h.short_lease();
    let c = config(&unique_lock_name("tokens"), lease_len, Duration::ZERO);
    // Released leases are long ones, so that each release meets its live lease however slow
    // the machine; only the expiring one is short.
    let long = config(c.name(), LONG, Duration::ZERO);
    let mut tokens = Vec::new();
    for _ in 0..3 {
        let lease = acquire(&a, &long).await.expect("acquired");
        tokens.push(lease.fencing_token());
        assert!(a.release(&lease).await.expect("release"));
    }
    let expiring = acquire(&a, &c).await.expect("acquired");
    tokens.push(expiring.fencing_token());
    h.pass_time(lease_len + lease_len / 4).await;
    let taken = acquire(&b, &long).await.expect("taken over");
    tokens.push(taken.fencing_token());
    let extended = b
        .extend(&taken, LONG, Duration::ZERO)
        .await
        .expect("extend")
        .expect("live");
    assert_eq!(extended.fencing_token(), taken.fencing_token());
    assert!(b.release(&extended).await.expect("release"));
    tokens.push(acquire(&a, &c).await.expect("acquired").fencing_token());
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "tokens did not strictly increase: {tokens:?}"
    );
}

/// `unless_acquired_within`: a free lock acquired more recently than the window is refused
/// (and left as it was); an older acquisition, a first use and an expired lease are not.
pub async fn recent_acquisition_is_refused_within_window<H: Harness>(h: &H) {
    let (a, b) = (h.provider("a").await, h.provider("b").await);
    let lease_len = h.short_lease();
    let c = config(&unique_lock_name("window"), LONG, Duration::ZERO);
    let first = acquire(&b, &c.clone().unless_acquired_within(LONG))
        .await
        .expect("first use is not refused by the window");
    assert!(b.release(&first).await.expect("release"));
    assert!(
        refused_within(&a, &c, LONG).await,
        "a lock acquired within the window was granted"
    );
    assert!(
        refused_within(&b, &c, LONG).await,
        "the window applies to the last holder too"
    );
    h.pass_time(lease_len + lease_len / 4).await;
    let later = acquire(&a, &c.clone().unless_acquired_within(lease_len))
        .await
        .expect("an acquisition older than the window refused the lock");
    assert!(
        later.fencing_token() > first.fencing_token(),
        "tokens went back after refused attempts"
    );
    assert!(a.release(&later).await.expect("release"));

    // An expired lease, never released: refused while its acquisition is within the window.
    let expiring = config(&unique_lock_name("window-exp"), lease_len, Duration::ZERO);
    acquire(&a, &expiring).await.expect("acquired");
    h.pass_time(lease_len + lease_len / 4).await;
    assert!(
        refused_within(&b, &expiring, LONG).await,
        "an expired lease acquired within the window was taken"
    );
    assert!(
        !refused_within(&b, &expiring, lease_len).await,
        "an expired lease acquired before the window was refused"
    );
}

/// Whether `provider` is refused the lock of `config` because it was acquired within `window`.
async fn refused_within(
    provider: &Arc<dyn LockProvider>,
    config: &LockConfiguration,
    window: Duration,
) -> bool {
    acquire(provider, &config.clone().unless_acquired_within(window))
        .await
        .is_none()
}

/// A lease whose acquire answer arrives after its local deadline (`lock_at_most_for` after the
/// request; here the answer is held back, as by a pause or a slow network) is never handed to
/// the task, and is released so another instance can take the lock.
pub async fn late_acquire_answer_is_not_used<H: Harness>(h: &H) {
    let lease_len = h.short_lease();
    let slow = LockingTaskExecutor::new(SlowAnswers {
        inner: h.provider("slow").await,
        delay: lease_len + lease_len / 4,
    });
    let b = h.provider("b").await;
    let c = config(&unique_lock_name("late-answer"), lease_len, Duration::ZERO);
    let ran = slow.execute(&c, async {}).await.expect("no store error");
    assert_eq!(ran, TaskResult::Skipped, "a late lease was used");
    let lease = acquire(&b, &c)
        .await
        .expect("the late lease was neither released nor expired");
    assert!(b.release(&lease).await.expect("release"));
}

/// A provider whose acquire answers arrive `delay` after the store acted.
#[derive(Debug)]
struct SlowAnswers {
    inner: Arc<dyn LockProvider>,
    delay: Duration,
}

#[async_trait]
impl LockProvider for SlowAnswers {
    async fn acquire(
        &self,
        config: &LockConfiguration,
    ) -> Result<Option<LockLease>, shedlock_core::Error> {
        let answer = self.inner.acquire(config).await;
        tokio::time::sleep(self.delay).await;
        answer
    }
    async fn release(&self, lease: &LockLease) -> Result<bool, shedlock_core::Error> {
        self.inner.release(lease).await
    }
    async fn extend(
        &self,
        lease: &LockLease,
        lock_at_most_for: Duration,
        lock_at_least_for: Duration,
    ) -> Result<Option<LockLease>, shedlock_core::Error> {
        self.inner
            .extend(lease, lock_at_most_for, lock_at_least_for)
            .await
    }
    fn holder(&self) -> &str {
        self.inner.holder()
    }
}

/// 8 workers over 2 lock names, each name guarding a plain counter read, paused and written
/// back under the lock; every worker retries until it did its quota. Lost updates show as a
/// wrong final count.
pub async fn lost_update_fuzz<H: Harness>(h: &H) {
    const WORKERS: usize = 8;
    const QUOTA: u64 = 10;
    let mut providers = Vec::new();
    for worker in 0..WORKERS {
        providers.push(h.provider(&format!("w{worker}")).await);
    }
    let names = [unique_lock_name("fuzz1"), unique_lock_name("fuzz2")];
    let fuzz = counter_fuzz(providers, names, QUOTA).await;
    let expected = QUOTA * (WORKERS as u64 / 2);
    for name in &fuzz.names {
        assert_eq!(name.count, expected, "lost updates on {}", name.name);
    }
}

/// What [`counter_fuzz`] saw on one of its two lock names.
#[derive(Debug)]
pub struct FuzzedName {
    /// The lock name.
    pub name: String,
    /// The counter's final value: the executions under this name, unless an update was lost.
    pub count: u64,
    /// The fencing token of each execution, in the order they ran (the lock serialises them).
    pub tokens: Vec<u64>,
}

/// What [`counter_fuzz`] saw.
#[derive(Debug)]
pub struct Fuzzed {
    /// Per lock name, in the order given.
    pub names: [FuzzedName; 2],
    /// Errors the executor returned (each printed, then retried).
    pub errors: u64,
}

/// The lost-update fuzz for a store's own tests: worker `w` runs with `providers[w]` on
/// `names[w % 2]`, each name guarding a plain counter read, paused and written back under the
/// lock; every worker retries a skipped or failed execution until it did `quota` (and panics
/// after 100 000 attempts).
pub async fn counter_fuzz(
    providers: Vec<Arc<dyn LockProvider>>,
    names: [String; 2],
    quota: u64,
) -> Fuzzed {
    let counters: Arc<[AtomicU64; 2]> = Arc::default();
    let tokens: Arc<[Mutex<Vec<u64>>; 2]> = Arc::default();
    let errors = Arc::new(AtomicU64::new(0));
    let mut workers = Vec::new();
    for (worker, provider) in providers.into_iter().enumerate() {
        let executor = LockingTaskExecutor::from_shared(provider);
        let index = worker % 2;
        let lock = config(&names[index], LONG, Duration::ZERO);
        let (counters, tokens, errors) = (
            Arc::clone(&counters),
            Arc::clone(&tokens),
            Arc::clone(&errors),
        );
        workers.push(tokio::spawn(async move {
            let mut done = 0;
            let mut attempts = 0u64;
            while done < quota {
                attempts += 1;
                assert!(attempts < 100_000, "worker {worker} starved");
                let counter = &counters[index];
                let outcome = executor
                    .execute(&lock, async {
                        let token = LockContext::current()
                            .expect("runs under the lock")
                            .fencing_token();
                        tokens[index].lock().expect("not poisoned").push(token);
                        // Deliberately not atomic: only the lock makes this safe.
                        let seen = counter.load(Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        counter.store(seen + 1, Ordering::SeqCst);
                    })
                    .await;
                match outcome {
                    Ok(TaskResult::Executed(())) => done += 1,
                    Ok(TaskResult::Skipped) => tokio::task::yield_now().await,
                    Err(error) => {
                        eprintln!("worker {worker}: {error}");
                        errors.fetch_add(1, Ordering::SeqCst);
                        tokio::task::yield_now().await;
                    }
                }
            }
        }));
    }
    for worker in workers {
        worker.await.expect("worker panicked");
    }
    let [first, second] = names;
    let name = |index: usize, name: String| FuzzedName {
        name,
        count: counters[index].load(Ordering::SeqCst),
        tokens: std::mem::take(&mut *tokens[index].lock().expect("not poisoned")),
    };
    Fuzzed {
        names: [name(0, first), name(1, second)],
        errors: errors.load(Ordering::SeqCst),
    }
}

/// Generates one `#[tokio::test]` per conformance case.
///
/// `$harness` is an expression evaluating to a future of `Option<impl Harness>`; `None` skips
/// the case (the harness should print why). The calling crate needs `tokio` with the `macros`
/// and `rt-multi-thread` features.
#[macro_export]
macro_rules! conformance_tests {
    ($harness:expr) => {
        $crate::__conformance_cases!(($harness) $crate:
            second_lock_fails,
            names_are_independent,
            relock_after_release,
            expires_after_lock_at_most_for,
            lock_at_least_for_holds_after_release,
            lock_at_least_for_counts_from_each_acquisition,
            extend_once_and_repeatedly,
            expired_or_released_cannot_be_extended,
            old_lease_is_dead,
            taken_over_holder_cannot_touch_new_lease,
            fencing_tokens_strictly_increase,
            recent_acquisition_is_refused_within_window,
            late_acquire_answer_is_not_used,
            lost_update_fuzz,
        );
        $crate::__conformance_cases!(($harness) $crate::ticks:
            tick_is_granted_once,
            tick_of_an_expired_lease_stays_granted,
            tick_spacing_is_kept,
            claims_without_a_tick_leave_it_alone,
            held_lock_refuses_a_new_tick,
            tick_far_ahead_is_refused,
            many_locks_claim_one_tick_once,
            skewed_clocks_run_each_tick_once,
        );
        $crate::__conformance_cases!(($harness) $crate::batches:
            batch_answers_each_lock_as_acquire_would,
            batch_of_none_or_one,
            opposite_batches_never_deadlock,
        );
    };
}

/// What [`conformance_tests!`](crate::conformance_tests),
/// [`inspection_tests!`](crate::inspection_tests) and [`runs_tests!`](crate::runs_tests)
/// expand to: one `#[tokio::test]` per case, calling the case of that name in `$module` with
/// the harness, or skipping when there is none. Not public API.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases {
    (($harness:expr) $module:path:) => {};
    (($harness:expr) $module:path: $case:ident, $($rest:ident,)*) => {
        #[::tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $case() {
            use $module as __shedlock_cases;
            if let ::core::option::Option::Some(harness) = $harness.await {
                __shedlock_cases::$case(&harness).await;
            }
        }

        $crate::__conformance_cases!(($harness) $module: $($rest,)*);
    };
}
