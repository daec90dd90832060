//! The acquisitions this provider (and its clones) has in flight, per lock name: what lets an
//! acquire whose answer was lost recognise the lease the database granted it.
//!
//! When the connection breaks after an acquire statement was sent, the database may have
//! committed it: the lock is then held by this holder until `lock_at_most_for`, although the
//! caller heard nothing. The row tells, but only if no other acquisition of the same name by
//! this holder could have written it: none may have overlapped the lost one in this process.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Acquisitions in flight by lock name.
#[derive(Debug, Default)]
pub(crate) struct Claims {
    inner: Mutex<HashMap<Arc<str>, Entry>>,
}

#[derive(Debug)]
struct Entry {
    in_flight: u32,
    /// No two acquisitions of the name overlapped since it was last idle.
    alone: bool,
}

impl Claims {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, Entry>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An acquisition of `name` begins; it ends when the returned guard drops.
    pub(crate) fn begin(self: &Arc<Self>, name: &str) -> InFlight {
        let name: Arc<str> = name.into();
        let mut entries = self.lock();
        match entries.get_mut(&name) {
            Some(entry) => {
                entry.in_flight += 1;
                entry.alone = false;
            }
            None => {
                entries.insert(
                    Arc::clone(&name),
                    Entry {
                        in_flight: 1,
                        alone: true,
                    },
                );
            }
        }
        InFlight {
            claims: Arc::clone(self),
            name,
        }
    }
}

/// One acquisition in flight.
#[derive(Debug)]
pub(crate) struct InFlight {
    claims: Arc<Claims>,
    name: Arc<str>,
}

impl InFlight {
    /// Whether no other acquisition of this name in this process overlapped this one: a
    /// lease of this holder granted during it can only be its own.
    pub(crate) fn alone(&self) -> bool {
        self.claims
            .lock()
            .get(&self.name)
            .is_some_and(|entry| entry.in_flight == 1 && entry.alone)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut entries = self.claims.lock();
        if let Some(entry) = entries.get_mut(&self.name) {
            entry.in_flight -= 1;
            if entry.in_flight == 0 {
                entries.remove(&self.name);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_acquisitions_are_never_alone() {
        let claims = Arc::new(Claims::default());
        let first = claims.begin("a");
        assert!(first.alone());
        let other_name = claims.begin("b");
        assert!(first.alone() && other_name.alone());
        let second = claims.begin("a");
        assert!(!first.alone() && !second.alone());
        drop(second);
        assert!(
            !first.alone(),
            "an overlap stays known until the name is idle"
        );
        drop(first);
        assert!(claims.begin("a").alone());
        drop(other_name);
        assert!(
            claims.lock().is_empty(),
            "entries go with their last acquisition"
        );
    }
}
