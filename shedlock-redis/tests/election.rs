//! Leader election and keep-alive over `RedisLockProvider` (one server) and `RedLockProvider`
//! (three masters): three candidates, each on its own connections through a proxy that can be
//! cut. Needs `SHEDLOCK_TEST_REDIS_URL` and `SHEDLOCK_TEST_REDLOCK_URLS`; skipped without them,
//! failed without them when `CI=true`.

mod common;

use std::sync::Arc;
use std::time::Duration;

use shedlock_conformance::election::{Candidate, leader_handover};
use shedlock_conformance::{CutProxy, ProxyMode, upstream_of};
use shedlock_core::{ElectionConfig, Elector, Error, LockConfiguration, LockProvider};
use shedlock_redis::RedisLockProvider;
use shedlock_runtime::{LockContext, LockingTaskExecutor, TaskResult};
use shedlock_test_support::{stores, tests_per_store};

const CONFIG: ElectionConfig = ElectionConfig {
    lease_duration: Duration::from_millis(2_000),
    renew_deadline: Duration::from_millis(1_500),
    retry_period: Duration::from_millis(400),
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Store {
    Redis,
    RedLock,
}

/// One instance: its provider, on connections of its own through proxies.
struct Instance {
    provider: Arc<dyn LockProvider>,
    proxies: Vec<CutProxy>,
}

impl Instance {
    async fn connect(store: Store, holder: &str, prefix: &str) -> Option<Instance> {
        let urls = match store {
            Store::Redis => vec![common::redis_url()?],
            Store::RedLock => common::redlock_urls()?,
        };
        let (mut proxies, mut through) = (Vec::new(), Vec::new());
        for url in &urls {
            let proxy = CutProxy::start(&upstream_of(url).unwrap()).await.unwrap();
            through.push(proxy.url_through(url).unwrap());
            proxies.push(proxy);
        }
        let builder = RedisLockProvider::builder()
            .key_prefix(prefix)
            .holder(holder)
            .timeout(Duration::from_millis(250));
        let provider: Arc<dyn LockProvider> = match store {
            Store::Redis => Arc::new(builder.connect(&through[0]).await.unwrap()),
            Store::RedLock => Arc::new(builder.redlock().connect(through).await.unwrap()),
        };
        Some(Instance { provider, proxies })
    }

    fn cut(&self) {
        for proxy in &self.proxies {
            proxy.set(ProxyMode::Reset);
        }
    }
}

/// The election scenario every store passes (one leader, stable; a graceful resign hands over
/// at once through the release hints; a leader whose connections are cut steps down before
/// another is elected; terms only increase).
async fn election(store: Store) {
    let prefix = common::unique_key_prefix("election");
    let mut candidates = Vec::new();
    for who in 0..3 {
        let Some(instance) = Instance::connect(store, &format!("candidate-{who}"), &prefix).await
        else {
            return;
        };
        let elector: Arc<dyn Elector> = Arc::new(Arc::clone(&instance.provider));
        candidates.push(Candidate::new(elector, move || {
            instance.cut();
            std::future::ready(())
        }));
    }
    leader_handover(&format!("{store:?}"), CONFIG, candidates).await;
}

tests_per_store! {
    election: redis_election(Store::Redis), redlock_election(Store::RedLock);
}

const LEASE: Duration = Duration::from_millis(1_000);
const INTERVAL: Duration = Duration::from_millis(300);

/// Two instances of one store under a fresh prefix, each on connections of its own: one holds
/// the lock `lock` for its job (kept alive every `INTERVAL`), the other asks for it.
struct Rivals {
    holder: Instance,
    executor: LockingTaskExecutor,
    /// Keeps the other instance's proxies open.
    _other: Instance,
    other: LockingTaskExecutor,
    lock: LockConfiguration,
}

impl Rivals {
    /// `None` when skipped.
    async fn connect(store: Store, lock: &str) -> Option<Rivals> {
        let prefix = common::unique_key_prefix(lock);
        let holder = Instance::connect(store, "holder", &prefix).await?;
        let other = Instance::connect(store, "other", &prefix).await?;
        Some(Rivals {
            executor: LockingTaskExecutor::from_shared(Arc::clone(&holder.provider)),
            other: LockingTaskExecutor::from_shared(Arc::clone(&other.provider)),
            holder,
            _other: other,
            lock: LockConfiguration::new(lock, LEASE, Duration::ZERO).unwrap(),
        })
    }

    /// Runs `job` under the lock on the holder, with keep-alive.
    async fn run<T>(&self, job: impl Future<Output = T>) -> Result<TaskResult<T>, Error> {
        self.executor
            .execute_with_keep_alive(&self.lock, INTERVAL, job)
            .await
    }
}

/// Keep-alive (the auto-extend of RedLock clients): a job running three times its lease keeps
/// the lock, with no re-acquire, while another instance polls all along; right after, the
/// other gets it.
async fn keep_alive_holds_the_lock(store: Store) {
    let Some(rivals) = Rivals::connect(store, "long_job").await else {
        return;
    };
    let (executor, other) = (&rivals.executor, &rivals.other);
    let store = format!("{store:?}");
    stores::keep_alive_holds_the_lock(&store, executor, other, &rivals.lock, INTERVAL).await;
}

/// The holder's connections are cut while its job runs: by the time another instance, polling
/// from the moment of the cut, holds the lock (once the lease ran out), the cut holder's context
/// already says the lease is lost; the job's lost-lock signal fires; and the new lease's token is
/// greater. (What is compared is the holder's own verdict at the moment of the takeover, not
/// which of two tasks a loaded machine happens to wake first.)
async fn lost_lock_signal_when_cut(store: Store) {
    let Some(rivals) = Rivals::connect(store, "cut_job").await else {
        return;
    };
    let outcome = rivals.run(async {
        let ctx = LockContext::current().unwrap();
        rivals.holder.cut();
        let poller = tokio::spawn({
            let (other, lock) = (rivals.other.clone(), rivals.lock.clone());
            let ctx = ctx.clone();
            async move {
                loop {
                    if let Some(taken) = other.try_lock(&lock).await.unwrap() {
                        return (taken, ctx.is_cancelled());
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        });
        ctx.cancelled().await;
        let (taken, lost_when_taken) = poller.await.unwrap();
        (lost_when_taken, ctx.fencing_token(), taken)
    });
    let (lost_when_taken, token, taken) = tokio::time::timeout(10 * LEASE, outcome)
        .await
        .expect("the lost-lock signal fires and the lock is taken over")
        .unwrap()
        .into_executed()
        .unwrap();
    assert!(
        lost_when_taken,
        "{store:?}: another instance held the lock while the cut holder still trusted its lease"
    );
    assert!(taken.fencing_token() > token);
    let _: Result<(), Error> = taken.release().await;
}

tests_per_store! {
    keep_alive_holds_the_lock:
        redis_keep_alive_holds_the_lock(Store::Redis),
        redlock_keep_alive_holds_the_lock(Store::RedLock);
    lost_lock_signal_when_cut:
        redis_lost_lock_signal_when_cut(Store::Redis),
        redlock_lost_lock_signal_when_cut(Store::RedLock);
}
