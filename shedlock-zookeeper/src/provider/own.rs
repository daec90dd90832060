//! What a provider remembers of its own last write per lock, so that release and extend need
//! no read while nobody else wrote the node; pruned so that it holds about as many entries as
//! the provider has live leases, however many lock names it ever used.

use std::collections::HashMap;
use std::sync::Arc;

/// No sweep below this many entries: a sweep is a pass over the map.
const MIN_SWEEP: usize = 64;

/// This provider's last write to a lock node.
#[derive(Debug, Clone)]
pub(super) struct OwnWrite {
    pub(super) token: u64,
    /// The node version the write produced.
    pub(super) version: i32,
    /// The lease end the write stored (ensemble time, ms).
    pub(super) lock_until_ms: i64,
    /// The node's incarnation child (see `record`).
    pub(super) incarnation: Arc<str>,
    /// The last tick granted the node held at that version, which later writes keep.
    pub(super) tick_ms: Option<i64>,
}

/// Own writes by lock name. Entries go when their lease is released or found lost; leases
/// never released (dropped, or their release failed) go at the next sweep after they ended.
/// A sweep runs when the map has doubled since the last one (and holds at least
/// [`MIN_SWEEP`] entries), so there are never more than `max(64, 2 × leases live at the last
/// sweep)` entries, at an amortised constant cost per write.
#[derive(Debug, Default)]
pub(super) struct OwnWrites {
    writes: HashMap<Arc<str>, OwnWrite>,
    sweep_at: usize,
}

impl OwnWrites {
    /// Remembers `write` for lock `name`; `now_ms` (ensemble time) decides which leases ended.
    pub(super) fn insert(&mut self, name: &str, write: OwnWrite, now_ms: i64) {
        self.writes.insert(Arc::from(name), write);
        if self.writes.len() >= self.sweep_at.max(MIN_SWEEP) {
            // An ended lease's entry only saves a read to a release or extension that will
            // find the lease over anyway.
            self.writes.retain(|_, w| w.lock_until_ms > now_ms);
            self.sweep_at = 2 * self.writes.len();
            self.writes.shrink_to(self.sweep_at.max(MIN_SWEEP));
        }
    }

    /// The last write for lock `name` if it was for the lease of `token`.
    pub(super) fn get(&self, name: &str, token: u64) -> Option<&OwnWrite> {
        self.writes.get(name).filter(|w| w.token == token)
    }

    /// Forgets lock `name` if its last write was for the lease of `token`.
    pub(super) fn remove(&mut self, name: &str, token: u64) {
        if self.get(name, token).is_some() {
            self.writes.remove(name);
        }
    }

    pub(super) fn len(&self) -> usize {
        self.writes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(token: u64, lock_until_ms: i64) -> OwnWrite {
        OwnWrite {
            token,
            version: 1,
            lock_until_ms,
            incarnation: Arc::from("5f0c"),
            tick_ms: None,
        }
    }

    #[test]
    fn ended_leases_are_swept_so_entries_follow_live_leases() {
        let mut own = OwnWrites::default();
        // 10 000 names, each lease 5 ms long, taken 1 ms apart and never released.
        for i in 0..10_000_i64 {
            own.insert(&format!("job-{i}"), write(i as u64, i + 5), i);
            assert!(own.len() <= MIN_SWEEP, "{} entries at {i}", own.len());
        }
        // Leases that are live are all kept…
        let mut own = OwnWrites::default();
        for i in 0..1_000_i64 {
            own.insert(&format!("job-{i}"), write(1, 10_000), i);
        }
        assert_eq!(own.len(), 1_000);
        // …and go at the first sweep after they ended, within as many writes again.
        for i in 0..2_000_i64 {
            let now = 20_000 + i;
            own.insert(&format!("other-{i}"), write(1, now + 5), now);
            assert!(own.len() <= 2 * 1_000, "{} entries", own.len());
        }
        assert!(own.len() <= MIN_SWEEP, "{}", own.len());
    }

    #[test]
    fn entries_are_per_lease() {
        let mut own = OwnWrites::default();
        own.insert("a", write(7, 100), 0);
        assert!(own.get("a", 7).is_some());
        assert!(own.get("a", 8).is_none(), "another lease of the same lock");
        own.remove("a", 8);
        assert_eq!(own.len(), 1, "not removed by another lease");
        own.remove("a", 7);
        assert_eq!(own.len(), 0);
    }
}
