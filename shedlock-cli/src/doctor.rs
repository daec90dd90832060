//! `doctor`: is the store usable from here, and if not, what to do about it. One line per
//! check (`ok`, `info`, `warning` or `problem`, with how to fix it); exit 5 on any problem (a
//! warning is a setup that can lose a grant, not an error). Each store's module checks what is
//! its own (SQL: table, columns, privileges, and on PostgreSQL the replication topology
//! ([`postgres_topology`]); RedLock: each master; ZooKeeper: the root's nodes and access to
//! them); every store's clock is compared with this machine's ([`clock`]) and its locks
//! counted ([`count_locks`]).

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

/// PostgreSQL's replication as the server the tool reached sees it: a standby (in recovery:
/// locks cannot be written there, a problem) or a primary, with each standby streaming from it
/// and whether it replicates synchronously (a failover to an asynchronous standby can lose the
/// last grants: a warning). Returns whether there was a problem.
pub(crate) async fn postgres_topology(pool: &sqlx::PgPool) -> Result<bool, Failure> {
    let failed = |e: sqlx::Error| Failure::new(Exit::Error, format!("reading the topology: {e}"));
    let in_recovery: bool = sqlx::query_scalar("SELECT pg_is_in_recovery()")
        .fetch_one(pool)
        .await
        .map_err(failed)?;
    if in_recovery {
        out!("problem  this server is a standby (in recovery): no lock can be written here");
        out!(
            "fix      point the URL at the primary, or give every server so that the provider \
             follows the primary: postgres://user@host1:5432,host2:5432/db?\
             target_session_attrs=read-write (PgLockProvider::connect_to_primary)"
        );
        return Ok(true);
    }
    let standbys: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT coalesce(application_name, ''), coalesce(state, ''), coalesce(sync_state, '') \
         FROM pg_stat_replication ORDER BY application_name",
    )
    .fetch_all(pool)
    .await
    .map_err(failed)?;
    if standbys.is_empty() {
        out!(
            "info     this server is a primary without a streaming standby: a failover has \
             nothing to promote (or this user may not see pg_stat_replication)"
        );
        return Ok(false);
    }
    out!(
        "info     this server is a primary with {} streaming standby(s)",
        standbys.len()
    );
    for (name, state, sync) in &standbys {
        let name = if name.is_empty() { "(unnamed)" } else { name };
        if matches!(sync.as_str(), "sync" | "quorum") {
            out!("ok       standby `{name}` ({state}) replicates synchronously ({sync})");
        } else {
            out!(
                "warning  standby `{name}` ({state}) replicates asynchronously ({sync}): if it \
                 is promoted, the last grants may be lost and a lock granted twice (fencing \
                 tokens stay in order); name it in synchronous_standby_names to prevent this \
                 (docs/RELIABILITY.md, \"PostgreSQL: a standby promoted\")"
            );
        }
    }
    Ok(false)
}
