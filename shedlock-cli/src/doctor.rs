//! `doctor`: is the store usable from here, and if not, what to do about it. One line per
//! check (`ok`, `info` or `problem`, with how to fix it); exit 5 on any problem. Each store's
//! module checks what is its own (SQL: table, columns, privileges; RedLock: each master;
//! ZooKeeper: the root's nodes and access to them); every store's clock is compared with this
//! machine's ([`clock`]) and its locks counted ([`count_locks`]).

use std::time::{Duration, SystemTime};

use shedlock_core::{LockInspector, LockQuery};

use crate::failure::{Exit, Failure};
use crate::table::timestamp;

/// Reports the store's clock (`what`: "database", "Redis", …) against this machine's: locks
/// never read this machine's clock, so the difference is information, never a problem.
pub(crate) async fn clock(
    inspector: &dyn LockInspector,
    what: &str,
) -> Result<SystemTime, Failure> {
    let before = SystemTime::now();
    let store = inspector.store_time().await.map_err(Failure::error)?;
    let after = SystemTime::now();
    let round_trip = after.duration_since(before).unwrap_or(Duration::ZERO);
    // The store read its clock somewhere within the round trip: compare with the middle.
    let local = before + round_trip / 2;
    let (difference, direction) = match store.duration_since(local) {
        Ok(ahead) => (ahead, "ahead of"),
        Err(behind) => (behind.duration(), "behind"),
    };
    out!(
        "info     {what} clock {} is {} {direction} this machine's (± {}); this does not \
         matter for correctness: leases are decided on the {what} clock",
        timestamp(store),
        millis(difference),
        millis(round_trip / 2)
    );
    Ok(store)
}

pub(crate) fn millis(duration: Duration) -> String {
    format!("{} ms", duration.as_millis())
}

/// How many locks `doctor` reads at a time while it counts them.
const COUNT_PAGE: usize = 1000;

/// A store that answered when its provider connected: says so (`what` names it, `shown` is its
/// URL as it may be shown), then checks its clock (`clock_of` in messages) and counts its locks.
pub(crate) async fn reachable(
    inspector: &dyn LockInspector,
    what: &str,
    shown: &str,
    clock_of: &str,
) -> Result<Exit, Failure> {
    out!("ok       {what} {shown} is reachable");
    clock(inspector, clock_of).await?;
    count_locks(inspector).await?;
    Ok(Exit::Ok)
}

/// `ok  N locks, M held`, counted a page at a time: never every lock in one read.
pub(crate) async fn count_locks(inspector: &dyn LockInspector) -> Result<(), Failure> {
    let (mut count, mut held) = (0, 0);
    let mut query = LockQuery::all().limit(COUNT_PAGE);
    loop {
        let page = inspector.list_locks(&query).await.map_err(Failure::error)?;
        count += page.len();
        held += page.iter().filter(|record| record.held).count();
        match page.last() {
            Some(last) if page.len() == COUNT_PAGE => query = query.after(last.name.clone()),
            _ => break,
        }
    }
    out!("ok       {count} locks, {held} held");
    Ok(())
}
