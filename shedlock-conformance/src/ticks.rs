//! Tick claims ([`LockConfiguration::for_tick`]): the store grants each tick of a lock at most
//! once, whoever claims it and however late; and the scheduler, on top, runs each cron tick
//! once across instances whose clocks disagree. Part of
//! [`conformance_tests!`](crate::conformance_tests).

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use futures_util::future::join_all;
use shedlock_core::{Clock, LockConfiguration, LockLease, LockProvider, Tick};
use shedlock_runtime::{
    Job, JobLock, JobRegistry, RunContext, Schedule, Scheduler, SchedulerConfig,
};

use crate::{Harness, LONG, acquire, acquire_and_release, config, unique_lock_name};

/// A tick in whole seconds from now on the test's clock (stores without a tick's `ahead` bound
/// do not compare it with their clock).
fn tick_at(seconds_from_now: i64) -> Tick {
    let now = SystemTime::now();
    let at = match u64::try_from(seconds_from_now) {
        Ok(after) => now + Duration::from_secs(after),
        Err(_) => now - Duration::from_secs(seconds_from_now.unsigned_abs()),
    };
    Tick::new(at)
}

async fn claim(
    provider: &Arc<dyn LockProvider>,
    config: &LockConfiguration,
    tick: Tick,
) -> Option<LockLease> {
    acquire(provider, &config.clone().for_tick(tick)).await
}

/// A tick granted and released is refused to every instance (the one that ran it too), and so
/// is every earlier tick; a later one is granted, with a greater token.
pub async fn tick_is_granted_once<H: Harness>(h: &H) {
    let (a, b) = (h.provider("a").await, h.provider("b").await);
    let c = config(&unique_lock_name("tick-once"), LONG, Duration::ZERO);
    let tick = tick_at(0);
    let first = acquire_and_release(&a, &c.clone().for_tick(tick)).await;
    assert!(
        claim(&b, &c, tick).await.is_none(),
        "a granted tick was granted again to another instance"
    );
    assert!(
        claim(&a, &c, tick).await.is_none(),
        "a granted tick was granted again to its holder"
    );
    assert!(
        claim(&b, &c, tick_at(-1)).await.is_none(),
        "an earlier tick was granted after a later one"
    );
    let next = claim(&b, &c, tick_at(1)).await.expect("the next tick");
    assert!(next.fencing_token() > first.fencing_token());
    assert!(b.release(&next).await.expect("release"));
}

/// A tick whose holder died (its lease expired, never released) is still granted: another
/// instance is refused it, and gets the next one.
pub async fn tick_of_an_expired_lease_stays_granted<H: Harness>(h: &H) {
    let (a, b) = (h.provider("a").await, h.provider("b").await);
    let lease_len = h.short_lease();
    let c = config(&unique_lock_name("tick-expired"), lease_len, Duration::ZERO);
    let tick = tick_at(0);
    claim(&a, &c, tick).await.expect("free");
    h.pass_time(lease_len + lease_len / 4).await;
    assert!(
        claim(&b, &c, tick).await.is_none(),
        "the tick of an expired lease was granted again"
    );
    let next = claim(&b, &c, tick_at(1)).await.expect("the next tick");
    assert!(b.release(&next).await.expect("release"));
}

/// With a spacing (a fixed-rate period), a tick is granted only that long after the last one.
pub async fn tick_spacing_is_kept<H: Harness>(h: &H) {
    let (a, b) = (h.provider("a").await, h.provider("b").await);
    let c = config(&unique_lock_name("tick-spacing"), LONG, Duration::ZERO);
    let period = Duration::from_secs(10);
    let base = tick_at(0);
    let at = |ms: i64| {
        let time = base.time() + Duration::from_millis(ms.unsigned_abs());
        Tick::new(time).with_spacing(period)
    };
    acquire_and_release(&a, &c.clone().for_tick(at(0))).await;
    assert!(
        claim(&b, &c, at(3_000)).await.is_none(),
        "a tick within the spacing of the last one was granted"
    );
    assert!(
        claim(&b, &c, at(9_999)).await.is_none(),
        "a tick a millisecond short of the spacing was granted"
    );
    let lease = claim(&b, &c, at(10_000))
        .await
        .expect("a tick the spacing after the last one");
    assert!(b.release(&lease).await.expect("release"));
}

/// Acquisitions without a tick (runs by hand, reruns) neither check nor move the last tick.
pub async fn claims_without_a_tick_leave_it_alone<H: Harness>(h: &H) {
    let (a, b) = (h.provider("a").await, h.provider("b").await);
    let c = config(&unique_lock_name("tick-untouched"), LONG, Duration::ZERO);
    let tick = tick_at(0);
    acquire_and_release(&a, &c.clone().for_tick(tick)).await;
    acquire_and_release(&b, &c).await;
    assert!(
        claim(&b, &c, tick).await.is_none(),
        "an acquisition without a tick reset the last tick"
    );
    let next = claim(&a, &c, tick_at(1))
        .await
        .expect("an acquisition without a tick moved the last tick ahead");
    assert!(a.release(&next).await.expect("release"));
}

/// A held lock refuses a new tick as any acquisition (overlap protection stays); once free,
/// the same tick is granted: a refused claim changed nothing.
pub async fn held_lock_refuses_a_new_tick<H: Harness>(h: &H) {
    let (a, b) = (h.provider("a").await, h.provider("b").await);
    let c = config(&unique_lock_name("tick-held"), LONG, Duration::ZERO);
    let held = claim(&a, &c, tick_at(0)).await.expect("free");
    let next = tick_at(1);
    assert!(
        claim(&b, &c, next).await.is_none(),
        "a held lock was granted for a new tick"
    );
    assert!(a.release(&held).await.expect("release"));
    let lease = claim(&b, &c, next)
        .await
        .expect("a refused claim while held spent the tick");
    assert!(b.release(&lease).await.expect("release"));
}

/// A tick further ahead of the store's clock than it allows is refused and leaves no trace:
/// a clock far ahead cannot block the fleet's next ticks.
pub async fn tick_far_ahead_is_refused<H: Harness>(h: &H) {
    let a = h.provider("a").await;
    let c = config(&unique_lock_name("tick-ahead"), LONG, Duration::ZERO);
    let hour = Duration::from_secs(3600);
    let year_ahead = tick_at(365 * 24 * 3600).ahead_at_most(hour);
    assert!(
        claim(&a, &c, year_ahead).await.is_none(),
        "a tick a year ahead of the store's clock was granted"
    );
    // 2001: behind every store's clock, and before any test's tick.
    let past = Tick::new(SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000));
    let lease = claim(&a, &c, past.ahead_at_most(hour))
        .await
        .expect("a refused tick far ahead was kept as the last tick");
    assert!(a.release(&lease).await.expect("release"));
    let far = tick_at(365 * 24 * 3600).ahead_at_most(2 * 365 * 24 * hour);
    let lease = claim(&a, &c, far)
        .await
        .expect("a tick within its ahead bound");
    assert!(a.release(&lease).await.expect("release"));
}

/// Two instances claim the same tick of 200 locks at once, in opposite orders: every lock is
/// granted exactly once, without a deadlock; claimed again by both, none is; the next tick is
/// granted once per lock again.
pub async fn many_locks_claim_one_tick_once<H: Harness>(h: &H) {
    let (a, b) = (h.provider("a").await, h.provider("b").await);
    let base = unique_lock_name("tick-many");
    let configs: Vec<LockConfiguration> = (0..200)
        .map(|i| config(&format!("{base}-{i:03}"), LONG, Duration::ZERO))
        .collect();
    for tick in [tick_at(0), tick_at(1)] {
        let granted = claim_all(&a, &b, &configs, tick).await;
        assert_eq!(
            granted.len(),
            configs.len(),
            "locks granted (of {}) for one tick by two instances",
            configs.len()
        );
        for (provider, lease) in &granted {
            assert!(provider.release(lease).await.expect("release"));
        }
        let again = claim_all(&a, &b, &configs, tick).await;
        assert!(
            again.is_empty(),
            "{} locks granted their tick a second time",
            again.len()
        );
    }
}

/// `a` claims `configs` in order and `b` in reverse, all at once: the leases granted.
async fn claim_all(
    a: &Arc<dyn LockProvider>,
    b: &Arc<dyn LockProvider>,
    configs: &[LockConfiguration],
    tick: Tick,
) -> Vec<(Arc<dyn LockProvider>, LockLease)> {
    let claims = configs
        .iter()
        .map(|c| (a, c))
        .chain(configs.iter().rev().map(|c| (b, c)))
        .map(|(provider, c)| async move {
            claim(provider, c, tick)
                .await
                .map(|lease| (Arc::clone(provider), lease))
        });
    let mut granted: Vec<_> = join_all(claims).await.into_iter().flatten().collect();
    granted.sort_by(|x, y| x.1.name().cmp(y.1.name()));
    let mut names: Vec<&str> = granted.iter().map(|(_, lease)| lease.name()).collect();
    names.dedup();
    assert_eq!(
        names.len(),
        granted.len(),
        "one lock granted twice for one tick"
    );
    granted
}

/// A wall clock `offset` ahead of (or behind) the system's: an instance's host clock.
#[derive(Debug)]
struct SkewedClock {
    ahead: bool,
    offset: Duration,
}

impl Clock for SkewedClock {
    fn now(&self) -> SystemTime {
        match self.ahead {
            true => SystemTime::now() + self.offset,
            false => SystemTime::now() - self.offset,
        }
    }
}

/// Three instances, whose clocks are 450 ms ahead of the store's, on it, and 300 ms behind it,
/// run a per-second cron job of 100 ms with `lock_at_least_for = "500ms"` over about five
/// seconds: no tick runs twice. Before tick claims, the late instance found the lock free again
/// and ran every other tick a second time (an outside review counted 11 seconds of 22).
/// Each run names its tick (its fire time, the same on every instance).
/// Real time, the store's clock: about 6 s.
pub async fn skewed_clocks_run_each_tick_once<H: Harness>(h: &H) {
    let lock = unique_lock_name("tick-skew");
    let runs: Arc<Mutex<Vec<SystemTime>>> = Arc::default();
    let job = {
        let runs = Arc::clone(&runs);
        Job::new(
            "skewed",
            Schedule::cron("* * * * * *").expect("cron"),
            move |()| {
                let runs = Arc::clone(&runs);
                async move {
                    let tick = RunContext::current().and_then(|run| run.tick());
                    runs.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(tick.expect("a scheduled run has its tick"));
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
        )
        .with_lock(
            JobLock::new(lock)
                .expect("lock name")
                .lock_at_most_for(Duration::from_secs(30))
                .expect("lease")
                .lock_at_least_for(Duration::from_millis(500))
                .expect("at least"),
        )
    };
    let mut instances = Vec::new();
    for (holder, ahead, offset) in [
        ("ahead", true, 450),
        ("on-time", true, 0),
        ("behind", false, 300),
    ] {
        let scheduler = Scheduler::builder()
            .shared_provider(h.provider(holder).await)
            .clock(Arc::new(SkewedClock {
                ahead,
                offset: Duration::from_millis(offset),
            }))
            .config(SchedulerConfig::default())
            .registry(JobRegistry::new(()).add(job.clone()))
            .start()
            .await
            .expect("scheduler starts");
        instances.push(scheduler);
    }
    tokio::time::sleep(Duration::from_millis(5_600)).await;
    for instance in &instances {
        instance.shutdown().await;
    }
    let runs = runs.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let mut ticks = runs.clone();
    ticks.sort_unstable();
    let all = ticks.len();
    ticks.dedup();
    println!(
        "skewed clocks (+450 ms, 0, -300 ms; per-second cron, 5.6 s): {all} runs, {} ticks",
        ticks.len()
    );
    assert!(all >= 3, "too few runs in 5.6 s: {runs:?}");
    assert_eq!(
        all,
        ticks.len(),
        "a tick ran twice across skewed clocks ({all} runs for {} ticks)",
        ticks.len()
    );
}
