//! One lock as the inspection methods read it.

use std::fmt;
use std::time::SystemTime;

use crate::keys::system_time;
use crate::node::StateParts;

/// A lock's hash, read with `lock_state` or `list_locks`.
///
/// `held` is decided by the server's clock at the moment of reading (`lock_until > now`).
/// [`Display`](fmt::Display) prints one line for a person:
/// `nightly: held by web-1:4121:a83e until 2025-06-01T12:00:00.000Z (token 7)`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedisLockState {
    /// The lock's name.
    pub name: String,
    /// When the current or last lease ends (server clock).
    pub lock_until: SystemTime,
    /// When the current or last lease was granted (server clock).
    pub locked_at: SystemTime,
    /// Who holds or last held the lock.
    pub locked_by: String,
    /// The token of the last acquisition.
    pub fencing_token: u64,
    /// Whether the lease was still running when the hash was read (server clock).
    pub held: bool,
}

impl RedisLockState {
    pub(crate) fn from_parts(
        name: String,
        (locked_by, fencing_token, locked_at, lock_until, now): StateParts,
    ) -> Self {
        RedisLockState {
            name,
            lock_until: system_time(lock_until),
            locked_at: system_time(locked_at),
            locked_by,
            fencing_token,
            held: lock_until > now,
        }
    }
}

impl fmt::Display for RedisLockState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = if self.held { "held" } else { "last held" };
        write!(
            f,
            "{}: {state} by {} until {} (token {})",
            self.name,
            self.locked_by,
            humantime::format_rfc3339_millis(self.lock_until),
            self.fencing_token
        )
    }
}
