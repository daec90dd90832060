//! RedLock token proposals: what a provider and its clones know of the masters' tokens and
//! clocks, so that a proposal is usually taken in the first round.
//!
//! A master takes a proposal only if it is above its stored token and at most the per-master
//! timeout behind its clock (µs), so a proposal follows the masters' clocks: the highest
//! clock read from a master, moved on by this instance's monotonic clock since (slowed by the
//! clock drift factor, so that it stays behind rather than ahead), and, per lock name, the
//! lowest proposal not known to be behind while that is above the clock estimate (tokens
//! granted in the same microsecond, a master's clock ahead of the others). A guess that
//! is behind costs one more round: the master answers with the lowest proposal it would take.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// How many lock names may keep a floor of their own. Floors the clock estimate has passed
/// are dropped when the map reaches this size, and if tokens still run ahead of the clocks for
/// more names than this, all floors are: forgetting one costs that lock one more round.
pub(crate) const MAX_NAMES: usize = 1024;

/// The next proposals of one provider and its clones.
#[derive(Debug)]
pub(crate) struct Proposals {
    state: Mutex<State>,
    /// The clock drift factor: the estimate advances by `1 − drift` of the elapsed time.
    drift: f64,
}

#[derive(Debug, Default)]
struct State {
    /// Per lock name, the lowest proposal not known to be behind, kept while it is above the
    /// clock estimate.
    floors: HashMap<Arc<str>, u64>,
    /// The highest master clock read (µs since the epoch) and when its answer arrived.
    clock: Option<(u64, Instant)>,
}

impl State {
    fn estimate(&self, drift: f64) -> u64 {
        self.clock.map_or(0, |(read_us, at)| {
            let elapsed_us = at.elapsed().as_secs_f64() * 1e6 * (1.0 - drift);
            read_us.saturating_add(elapsed_us as u64)
        })
    }
}

impl Proposals {
    pub(crate) fn new(drift: f64) -> Self {
        Proposals {
            state: Mutex::default(),
            drift,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The proposal for the next acquisition of `name`.
    pub(crate) fn next(&self, name: &str) -> u64 {
        let state = self.state();
        let floor = state.floors.get(name).copied().unwrap_or(1);
        floor.max(state.estimate(self.drift))
    }

    /// Takes in what a round taught: the highest clock a master answered with (µs), and the
    /// lowest proposal for `name` not known to be behind.
    pub(crate) fn learn(&self, name: &str, clock_us: Option<u64>, floor: u64) {
        let mut state = self.state();
        if let Some(read_us) = clock_us
            && read_us >= state.estimate(self.drift)
        {
            state.clock = Some((read_us, Instant::now()));
        }
        let estimate = state.estimate(self.drift);
        let known = state.floors.get(name).copied().unwrap_or(0);
        if floor.max(known) <= estimate {
            state.floors.remove(name);
            return;
        }
        if known < floor {
            state.floors.insert(Arc::from(name), floor);
        }
        if state.floors.len() > MAX_NAMES {
            state.floors.retain(|_, floor| *floor > estimate);
            if state.floors.len() > MAX_NAMES {
                state.floors.clear();
            }
        }
    }

    /// How many lock names have a floor of their own.
    #[cfg(test)]
    pub(crate) fn names(&self) -> usize {
        self.state().floors.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proposals_follow_the_clock_and_the_floors() {
        let proposals = Proposals::new(0.01);
        assert_eq!(proposals.next("a"), 1, "nothing known yet");
        proposals.learn("a", None, 7);
        assert_eq!(proposals.next("a"), 7);
        assert_eq!(proposals.next("b"), 1);
        let clock = 1_800_000_000_000_000;
        proposals.learn("a", Some(clock), 0);
        assert!(proposals.next("b") >= clock);
        assert_eq!(proposals.names(), 0, "a floor below the clock is useless");
        proposals.learn("a", None, clock + 60_000_000);
        assert_eq!(proposals.next("a"), clock + 60_000_000);
        assert!(proposals.next("b") < clock + 60_000_000);
        // A slower master's clock does not pull the estimate back.
        proposals.learn("b", Some(clock - 5_000_000), 0);
        assert!(proposals.next("b") >= clock);
    }

    #[test]
    fn floors_stay_bounded() {
        let proposals = Proposals::new(0.01);
        let clock = 1_800_000_000_000_000;
        proposals.learn("x", Some(clock), 0);
        // Names acquired once, each a token just above the clock: the clock passes them.
        for i in 0..10 * MAX_NAMES as u64 {
            proposals.learn(&format!("once-{i}"), None, clock + 1 + i / 1000);
        }
        assert!(proposals.names() <= MAX_NAMES, "{}", proposals.names());
        // Tokens far ahead of the clock for more names than the bound: still bounded.
        for i in 0..2 * MAX_NAMES as u64 {
            proposals.learn(&format!("ahead-{i}"), None, clock + 3_600_000_000);
        }
        assert!(proposals.names() <= MAX_NAMES, "{}", proposals.names());
    }
}
