//! Batched claims ([`LockProvider::acquire_many`]): the scheduler asks for the locks of all the
//! ticks due at one instant in one call. Each lock is answered as [`LockProvider::acquire`]
//! would have, in the order asked; two instances asking for the same locks in opposite orders
//! never deadlock and never both get one. Part of
//! [`conformance_tests!`](crate::conformance_tests).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use shedlock_core::{LockConfiguration, LockLease, LockProvider, Tick};

use crate::{Harness, LONG, acquire, acquire_and_release, config, unique_lock_name};

/// `provider`'s answers to `configs` in one batch, each a lease or a refusal (a store error
/// fails the case).
async fn ask(
    provider: &Arc<dyn LockProvider>,
    configs: &[LockConfiguration],
) -> Vec<Option<LockLease>> {
    let answers = provider.acquire_many(configs).await;
    assert_eq!(answers.len(), configs.len(), "one answer per lock asked");
    answers
        .into_iter()
        .zip(configs)
        .map(|(answer, c)| match answer {
            Ok(lease) => lease,
            Err(error) => panic!(
                "store error on a batched acquire of `{}`: {error}",
                c.name()
            ),
        })
        .collect()
}

/// One batch of locks in every state a tick meets: never used, free, held by another instance,
/// held by the asker itself, expired, acquired within the asked window, and a tick already
/// granted. Each is answered as a single acquire would be, in the order asked, and the leases
/// granted are live (released and extended as usual).
pub async fn batch_answers_each_lock_as_acquire_would<H: Harness>(h: &H) {
    let (a, b) = (h.provider("a").await, h.provider("b").await);
    let lease_len = h.short_lease();
    let base = unique_lock_name("batch-mixed");
    let name = |what: &str| format!("{base}-{what}");
    let long = |what: &str| config(&name(what), LONG, Duration::ZERO);

    let free = long("free");
    acquire_and_release(&b, &free).await;
    let held = long("held");
    acquire(&b, &held).await.expect("free");
    let own = long("own");
    acquire(&a, &own).await.expect("free");
    let expired = config(&name("expired"), lease_len, Duration::ZERO);
    let expired_lease = acquire(&b, &expired).await.expect("free");
    let recent = long("recent");
    acquire_and_release(&b, &recent).await;
    let tick = Tick::new(SystemTime::now());
    let (ticked, next_ticked) = (long("ticked"), long("ticked-next"));
    acquire_and_release(&b, &ticked.clone().for_tick(tick)).await;
    acquire_and_release(&b, &next_ticked.clone().for_tick(tick)).await;
    h.pass_time(lease_len + lease_len / 4).await;

    let configs = [
        long("new"),
        free.clone(),
        held,
        own,
        expired,
        recent.clone().unless_acquired_within(LONG),
        ticked.for_tick(tick),
        next_ticked.for_tick(Tick::new(tick.time() + Duration::from_secs(1))),
    ];
    let answers = ask(&a, &configs).await;
    let granted: Vec<bool> = answers.iter().map(Option::is_some).collect();
    assert_eq!(
        granted,
        [true, true, false, false, true, false, false, true],
        "granted per lock: new, free, held by another, held by the asker, expired, acquired \
         within the window, tick granted before, the next tick"
    );
    for (lease, c) in answers.iter().zip(&configs) {
        let Some(lease) = lease else { continue };
        assert_eq!(lease.name(), c.name(), "an answer for another lock");
        assert_eq!(lease.holder(), a.holder());
    }
    let taken_over = answers[4].as_ref().expect("expired lock granted");
    assert!(taken_over.fencing_token() > expired_lease.fencing_token());
    assert!(
        acquire(&b, &free).await.is_none(),
        "a lock granted in a batch was not held"
    );
    for lease in answers.into_iter().flatten() {
        let extended = a
            .extend(&lease, LONG, Duration::ZERO)
            .await
            .expect("extend")
            .expect("a lease granted in a batch extends");
        assert!(a.release(&extended).await.expect("release"));
    }
}

/// An empty batch asks nothing and answers nothing; a batch of one is an acquire.
pub async fn batch_of_none_or_one<H: Harness>(h: &H) {
    let a = h.provider("a").await;
    assert!(ask(&a, &[]).await.is_empty());
    let c = config(&unique_lock_name("batch-one"), LONG, Duration::ZERO);
    let lease = ask(&a, std::slice::from_ref(&c))
        .await
        .remove(0)
        .expect("free");
    assert!(ask(&a, &[c]).await[0].is_none(), "held");
    assert!(a.release(&lease).await.expect("release"));
}

/// Two instances ask for the same 1,000 locks at once, one in order, one in reverse, three
/// times over: every lock is granted to exactly one of them each round, and neither batch
/// fails (a store that locks rows or keys in the order asked would deadlock here).
pub async fn opposite_batches_never_deadlock<H: Harness>(h: &H) {
    let (a, b) = (h.provider("a").await, h.provider("b").await);
    let base = unique_lock_name("batch-order");
    let configs: Vec<LockConfiguration> = (0..1000)
        .map(|i| config(&format!("{base}-{i:04}"), LONG, Duration::ZERO))
        .collect();
    let reversed: Vec<LockConfiguration> = configs.iter().rev().cloned().collect();
    for round in 0..3 {
        let (from_a, from_b) = tokio::join!(ask(&a, &configs), ask(&b, &reversed));
        let mut holders = vec![0u32; configs.len()];
        for (i, lease) in from_a.iter().enumerate() {
            holders[i] += u32::from(lease.is_some());
        }
        for (i, lease) in from_b.iter().enumerate() {
            holders[configs.len() - 1 - i] += u32::from(lease.is_some());
        }
        let twice = holders.iter().filter(|&&n| n > 1).count();
        let none = holders.iter().filter(|&&n| n == 0).count();
        assert_eq!(
            (twice, none),
            (0, 0),
            "round {round}: locks granted twice, and to nobody, of 1,000 free ones"
        );
        for (provider, leases) in [(&a, from_a), (&b, from_b)] {
            for lease in leases.into_iter().flatten() {
                assert!(provider.release(&lease).await.expect("release"));
            }
        }
    }
}
