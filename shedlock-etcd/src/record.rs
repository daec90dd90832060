//! The value of a lock's record key (`<prefix>locks/<name>`): JSON, readable with etcdctl.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use shedlock_core::LockLease;

/// What a lock record holds. Times are milliseconds since the epoch, read from the clock of
/// the instance that wrote the record (etcd has none); they are for people and for
/// `unless_acquired_within`, never for deciding whether the lock is held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LockValue {
    pub(crate) holder: String,
    /// The acquisition's fencing token. Absent in the record an acquisition writes: the
    /// token is then the record's own `mod_revision` (the revision of that transaction).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) token: Option<u64>,
    pub(crate) locked_at_ms: u64,
    pub(crate) lock_until_ms: u64,
}

impl LockValue {
    /// The record of `lease` (with its token, as release and extend write it), held until
    /// `lock_until_ms`.
    pub(crate) fn of_lease(lease: &LockLease, lock_until_ms: u64) -> Self {
        LockValue {
            holder: lease.holder().to_owned(),
            token: Some(lease.fencing_token()),
            locked_at_ms: to_ms(lease.locked_at()),
            lock_until_ms,
        }
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub(crate) fn decode(bytes: &[u8]) -> Result<Self, String> {
        serde_json::from_slice(bytes).map_err(|e| e.to_string())
    }

    /// The record's token, given the revision that last wrote it.
    pub(crate) fn token_at(&self, mod_revision: i64) -> u64 {
        self.token
            .unwrap_or_else(|| u64::try_from(mod_revision).unwrap_or_default())
    }
}

/// The value of a lock's tick key: the last tick granted, in decimal milliseconds since the
/// epoch (negative before it), readable with etcdctl.
pub(crate) fn encode_tick(millis: i64) -> Vec<u8> {
    millis.to_string().into_bytes()
}

pub(crate) fn decode_tick(bytes: &[u8]) -> Result<i64, String> {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|text| text.parse().ok())
        .ok_or_else(|| "not a tick in milliseconds".to_owned())
}

/// Now, on this instance's clock, in whole milliseconds (what records store).
pub(crate) fn now_ms() -> u64 {
    to_ms(SystemTime::now())
}

pub(crate) fn to_ms(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or_default()
}

/// A time from milliseconds since the epoch; one past what `SystemTime` holds (a record
/// edited by hand) reads as the largest whole second it holds near there, never a panic.
pub(crate) fn from_ms(ms: u64) -> SystemTime {
    UNIX_EPOCH
        .checked_add(Duration::from_millis(ms))
        .unwrap_or_else(|| UNIX_EPOCH + Duration::from_secs(i64::MAX as u64 / 2))
}

/// Now, on this instance's clock, in whole microseconds (when run records started and ended:
/// fine enough that runs of different locks rarely share a start).
pub(crate) fn now_us() -> u64 {
    to_us(SystemTime::now())
}

pub(crate) fn to_us(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .unwrap_or_default()
}

/// A time from microseconds since the epoch (every `u64` of them fits).
pub(crate) fn from_us(us: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_micros(us)
}

pub(crate) fn ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_and_takes_its_token_from_the_revision_when_absent() {
        let value = LockValue {
            holder: "web-1".into(),
            token: None,
            locked_at_ms: 5,
            lock_until_ms: 9,
        };
        let bytes = value.encode();
        assert_eq!(
            std::str::from_utf8(&bytes).unwrap(),
            r#"{"holder":"web-1","locked_at_ms":5,"lock_until_ms":9}"#
        );
        let back = LockValue::decode(&bytes).unwrap();
        assert_eq!(back, value);
        assert_eq!(back.token_at(42), 42);
        assert_eq!(
            LockValue {
                token: Some(7),
                ..back
            }
            .token_at(42),
            7
        );
        assert!(LockValue::decode(b"not json").is_err());
        assert!(from_ms(u64::MAX) > from_ms(0), "no overflow panic");
    }

    #[test]
    fn a_tick_reads_back() {
        for tick in [1_764_300_000_000, -2, 0] {
            assert_eq!(decode_tick(&encode_tick(tick)), Ok(tick));
        }
        assert_eq!(encode_tick(5), b"5");
        assert!(decode_tick(b"soon").is_err());
        assert!(decode_tick(b"").is_err());
    }
}
