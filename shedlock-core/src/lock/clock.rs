//! Wall clocks for the in-memory store, injectable so tests are deterministic.

use std::fmt::Debug;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// The clock of a lock store: where `locked_at` and `lock_until` come from.
///
/// SQL providers use the database's clock and never this trait; the in-memory provider uses it
/// so tests can move time by hand.
pub trait Clock: Send + Sync + Debug + 'static {
    /// The current wall-clock time of the store.
    fn now(&self) -> SystemTime;
}

/// The operating system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// A wall clock that follows tokio's clock, so `tokio::time::pause()` and `advance()` move it.
///
/// It starts at the system time of its creation and then advances with `tokio::time::Instant`.
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    origin: SystemTime,
    origin_instant: tokio::time::Instant,
}

impl TokioClock {
    /// A clock starting now. Call it inside a tokio runtime when time is paused.
    pub fn new() -> Self {
        Self::starting_at(SystemTime::now())
    }

    /// A clock showing `origin` now, e.g. a date just before a daylight-saving change.
    pub fn starting_at(origin: SystemTime) -> Self {
        TokioClock {
            origin,
            origin_instant: tokio::time::Instant::now(),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for TokioClock {
    fn now(&self) -> SystemTime {
        self.origin + self.origin_instant.elapsed()
    }
}

/// A clock that moves only when told to.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use shedlock_core::{Clock, ManualClock};
///
/// let clock = ManualClock::new(SystemTime::UNIX_EPOCH);
/// clock.advance(Duration::from_secs(5));
/// assert_eq!(clock.now(), SystemTime::UNIX_EPOCH + Duration::from_secs(5));
/// ```
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<SystemTime>,
}

impl ManualClock {
    /// A clock showing `start`.
    pub fn new(start: SystemTime) -> Self {
        ManualClock {
            now: Mutex::new(start),
        }
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        *self.now.lock().unwrap_or_else(|e| e.into_inner()) += by;
    }

    /// Sets the clock to `to` (also backwards).
    pub fn set(&self, to: SystemTime) {
        *self.now.lock().unwrap_or_else(|e| e.into_inner()) = to;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        *self.now.lock().unwrap_or_else(|e| e.into_inner())
    }
}
