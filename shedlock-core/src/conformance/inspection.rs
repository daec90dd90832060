//! The inspection contract ([`LockInspector`]) every store of this workspace offers: what a
//! store's tests add to [`Harness`] ([`InspectionHarness`]) and call with
//! [`inspection_tests!`](crate::inspection_tests).
//!
//! ```ignore
//! shedlock_core::inspection_tests!(async { Some(MyHarness::connect().await) });
//! ```

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;

use super::{Harness, LONG, acquire, config, unique_lock_name};
use crate::{LockInspector, LockQuery};

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

/// A held lock reads back as its holder was granted it: holder, token and times of the lease,
/// `held`, and a read time within the lease (the store's clock).
pub async fn held_lock_reads_as_granted<H: InspectionHarness>(h: &H) {
    let (a, inspector) = (h.provider("a").await, h.inspector().await);
    let name = unique_lock_name("inspect-held");
    let lease = acquire(&a, &config(&name, LONG, Duration::ZERO))
        .await
        .expect("acquired");
    let record = inspector
        .lock_record(&name)
        .await
        .expect("read")
        .expect("a record for a held lock");
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
    let lease = acquire(&a, &config(&name, LONG, Duration::ZERO))
        .await
        .expect("acquired");
    assert!(a.release(&lease).await.expect("release"));
    let record = inspector
        .lock_record(&name)
        .await
        .expect("read")
        .expect("a record after release");
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
        acquire(&a, &config(name, LONG, Duration::ZERO))
            .await
            .expect("acquired");
    }
    let listed = |records: Vec<crate::LockRecord>| {
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
    let (a, b, inspector) = (
        h.provider("a").await,
        h.provider("b").await,
        h.inspector().await,
    );
    let name = unique_lock_name("inspect-release");
    let c = config(&name, LONG, LONG);
    let lease = acquire(&a, &c).await.expect("acquired");
    let token = lease.fencing_token();
    let holder = a.holder().to_owned();
    let release = |holder: String, token| {
        let (inspector, name) = (Arc::clone(&inspector), name.clone());
        async move {
            inspector
                .release_lock(&name, &holder, token)
                .await
                .expect("release_lock")
        }
    };
    assert!(!release("someone-else".into(), token).await, "wrong holder");
    assert!(!release(holder.clone(), token + 1).await, "wrong token");
    assert!(acquire(&b, &c).await.is_none(), "still held");
    assert!(release(holder.clone(), token).await, "the live lease");
    assert!(!release(holder, token).await, "already ended");
    let record = inspector
        .lock_record(&name)
        .await
        .expect("read")
        .expect("record");
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
    let (a, b, inspector) = (
        h.provider("a").await,
        h.provider("b").await,
        h.inspector().await,
    );
    let name = unique_lock_name("inspect-late");
    let c = config(&name, LONG, LONG);
    let lease = acquire(&a, &c).await.expect("acquired");
    let released = inspector
        .release_lock(&name, a.holder(), lease.fencing_token())
        .await
        .expect("release_lock");
    assert!(released, "the live lease");
    let extended = a.extend(&lease, LONG, LONG).await.expect("extend");
    assert!(extended.is_none(), "extended after the operator's release");
    assert!(!a.release(&lease).await.expect("release"), "released twice");
    let record = inspector
        .lock_record(&name)
        .await
        .expect("read")
        .expect("record");
    assert!(!record.held, "taken back by its late holder: {record:?}");
    assert!(acquire(&b, &c).await.is_some(), "free for the next holder");
}

/// Generates one `#[tokio::test]` per inspection case for an [`InspectionHarness`]; a harness
/// expression evaluating to `None` skips, as for
/// [`conformance_tests!`](crate::conformance_tests).
#[macro_export]
macro_rules! inspection_tests {
    ($harness:expr) => {
        $crate::inspection_tests!(@cases ($harness)
            held_lock_reads_as_granted,
            released_lock_reads_as_free,
            locks_are_listed_by_page,
            operator_release_ends_only_that_lease,
            late_holder_cannot_take_back_an_operator_release,
        );
    };
    (@cases ($harness:expr) $($case:ident,)*) => {
        $(
            #[::tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                if let ::core::option::Option::Some(harness) = $harness.await {
                    $crate::conformance::inspection::$case(&harness).await;
                }
            }
        )*
    };
}
