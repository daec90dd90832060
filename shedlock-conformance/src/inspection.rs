//! The inspection contract ([`LockInspector`]) every store of this workspace offers: what a
//! store's tests add to [`Harness`] ([`InspectionHarness`]) and call with
//! [`inspection_tests!`](crate::inspection_tests).
//!
//! ```ignore
//! shedlock_conformance::inspection_tests!(async { Some(MyHarness::connect().await) });
//! ```

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;

use super::{Harness, LONG, acquire, acquire_and_release, config, hold, unique_lock_name};
use shedlock_core::{
    LockConfiguration, LockInspector, LockLease, LockProvider, LockQuery, LockRecord,
};

/// A [`Harness`] whose store can also be inspected.
#[async_trait]
pub trait InspectionHarness: Harness {
    /// An inspector over the store the harness's providers use.
    async fn inspector(&self) -> Arc<dyn LockInspector>;
}

/// Store times are rounded (milliseconds on most stores): two readings of one clock compare
/// within this.
const ROUNDING: Duration = Duration::from_millis(1);

fn not_before(later: SystemTime, earlier: SystemTime) -> bool {
    later + ROUNDING >= earlier
}

/// The record of lock `name`, which must have one (`why`).
async fn record_of(inspector: &dyn LockInspector, name: &str, why: &str) -> LockRecord {
    inspector.lock_record(name).await.expect("read").expect(why)
}

/// A case of an operator's release: providers `a` and `b`, the store's inspector, and a lock
/// of `a`'s (its unique name made of `base`, its configuration and lease), held for `LONG`
/// with `lock_at_least_for` as long, so that only an operator's release ends it early.
async fn operator_case<H: InspectionHarness>(h: &H, base: &str) -> OperatorCase {
    let (a, b) = (h.provider("a").await, h.provider("b").await);
    let name = unique_lock_name(base);
    let config = config(&name, LONG, LONG);
    let lease = acquire(&a, &config).await.expect("acquired");
    (a, b, h.inspector().await, name, config, lease)
}

/// What [`operator_case`] sets up.
type OperatorCase = (
    Arc<dyn LockProvider>,
    Arc<dyn LockProvider>,
    Arc<dyn LockInspector>,
    String,
    LockConfiguration,
    LockLease,
);

/// A held lock reads back as its holder was granted it: holder, token and times of the lease,
/// `held`, and a read time within the lease (the store's clock).
pub async fn held_lock_reads_as_granted<H: InspectionHarness>(h: &H) {
    let (a, inspector) = (h.provider("a").await, h.inspector().await);
    let name = unique_lock_name("inspect-held");
    let lease = hold(&a, &name).await;
    let record = record_of(&*inspector, &name, "a record for a held lock").await;
    assert_eq!(record.name, name);
    assert_eq!(record.holder, a.holder());
    assert_eq!(record.fencing_token, lease.fencing_token());
    assert_eq!(record.locked_at, lease.locked_at());
    assert_eq!(record.lock_until, lease.lock_until());
    assert!(record.held, "{record:?}");
    assert!(
        not_before(record.read_at, record.locked_at) && record.read_at < record.lock_until,
        "read at {:?}, outside the lease {record:?}",
        record.read_at
    );
    assert!(record.remaining() <= LONG && !record.remaining().is_zero());
    let now = inspector.store_time().await.expect("store time");
    assert!(
        not_before(now, record.read_at),
        "the store's clock went back"
    );
    assert!(a.release(&lease).await.expect("release"));
}

/// A released lock keeps its record, no longer held; a name never used has none.
pub async fn released_lock_reads_as_free<H: InspectionHarness>(h: &H) {
    let (a, inspector) = (h.provider("a").await, h.inspector().await);
    let name = unique_lock_name("inspect-free");
    let lease = acquire_and_release(&a, &config(&name, LONG, Duration::ZERO)).await;
    let record = record_of(&*inspector, &name, "a record after release").await;
    assert!(!record.held, "{record:?}");
    assert_eq!(record.remaining(), Duration::ZERO);
    assert_eq!(
        (record.holder.as_str(), record.fencing_token),
        (a.holder(), lease.fencing_token())
    );
    let unused = unique_lock_name("inspect-none");
    assert_eq!(inspector.lock_record(&unused).await.expect("read"), None);
}

/// Listing returns the locks a query asks for, in name order, a page at a time.
pub async fn locks_are_listed_by_page<H: InspectionHarness>(h: &H) {
    let (a, inspector) = (h.provider("a").await, h.inspector().await);
    let prefix = unique_lock_name("inspect-list");
    let names: Vec<String> = (0..5).map(|i| format!("{prefix}-{i}")).collect();
    for name in names.iter().rev() {
        hold(&a, name).await;
    }
    let listed = |records: Vec<LockRecord>| {
        records
            .into_iter()
            .map(|record| record.name)
            .collect::<Vec<_>>()
    };
    let all = LockQuery::all().prefix(format!("{prefix}-"));
    assert_eq!(
        listed(inspector.list_locks(&all).await.expect("list")),
        names
    );
    let page = all.clone().limit(2);
    assert_eq!(
        listed(inspector.list_locks(&page).await.expect("list")),
        names[..2]
    );
    let next = page.after(&names[1]);
    assert_eq!(
        listed(inspector.list_locks(&next).await.expect("list")),
        names[2..4]
    );
    let everything = listed(inspector.list_locks(&LockQuery::all()).await.expect("list"));
    assert!(
        everything.windows(2).all(|pair| pair[0] < pair[1]),
        "not in name order"
    );
    assert!(names.iter().all(|name| everything.contains(name)));
}

/// An operator's release ends exactly the lease named by holder and token, at once: a wrong
/// holder or token changes nothing, and the holder's own release then finds nothing.
pub async fn operator_release_ends_only_that_lease<H: InspectionHarness>(h: &H) {
    let (a, b, inspector, name, c, lease) = operator_case(h, "inspect-release").await;
    let token = lease.fencing_token();
    let holder = a.holder().to_owned();
    let shown = record_of(&*inspector, &name, "a record").await;
    let release = |holder: String, token| {
        let inspector = Arc::clone(&inspector);
        let mut record = shown.clone();
        (record.holder, record.fencing_token) = (holder, token);
        async move { inspector.release_lock(&record).await.expect("release_lock") }
    };
    assert!(!release("someone-else".into(), token).await, "wrong holder");
    assert!(!release(holder.clone(), token + 1).await, "wrong token");
    assert!(acquire(&b, &c).await.is_none(), "still held");
    assert!(release(holder.clone(), token).await, "the live lease");
    assert!(!release(holder, token).await, "already ended");
    let record = record_of(&*inspector, &name, "a record").await;
    assert!(
        !record.held,
        "ended whatever its lock_at_least_for: {record:?}"
    );
    assert!(!a.release(&lease).await.expect("release"), "nothing left");
    assert!(acquire(&b, &c).await.is_some(), "free again");
}

/// After an operator's release, the holder's late extension and release change nothing: neither
/// takes the lock back, whatever its `lock_at_least_for`, and the next holder gets it.
pub async fn late_holder_cannot_take_back_an_operator_release<H: InspectionHarness>(h: &H) {
    let (a, b, inspector, name, c, lease) = operator_case(h, "inspect-late").await;
    let shown = record_of(&*inspector, &name, "a record").await;
    assert_eq!(
        (shown.holder.as_str(), shown.fencing_token),
        (a.holder(), lease.fencing_token()),
        "the record shows the live lease"
    );
    let released = inspector.release_lock(&shown).await.expect("release_lock");
    assert!(released, "the live lease");
    let extended = a.extend(&lease, LONG, LONG).await.expect("extend");
    assert!(extended.is_none(), "extended after the operator's release");
    assert!(!a.release(&lease).await.expect("release"), "released twice");
    let record = record_of(&*inspector, &name, "a record").await;
    assert!(!record.held, "taken back by its late holder: {record:?}");
    assert!(acquire(&b, &c).await.is_some(), "free for the next holder");
}

/// Generates one `#[tokio::test]` per inspection case for an [`InspectionHarness`]; a harness
/// expression evaluating to `None` skips, as for
/// [`conformance_tests!`](crate::conformance_tests).
#[macro_export]
macro_rules! inspection_tests {
    ($harness:expr) => {
        $crate::__conformance_cases!(($harness) $crate::inspection:
            held_lock_reads_as_granted,
            released_lock_reads_as_free,
            locks_are_listed_by_page,
            operator_release_ends_only_that_lease,
            late_holder_cannot_take_back_an_operator_release,
        );
    };
}
