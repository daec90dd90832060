//! The lease a lock node holds, on ensemble time.
//!
//! ZooKeeper gives clients no clock, but every write's `Stat` carries `mtime`, set by the
//! ensemble's leader when it orders the write, and `mzxid`, the write's transaction id. So a
//! node's data states its lease *relative to the write that stored it*:
//!
//! ```text
//! holder=web-1:4121:a83e   who holds (held) the lock
//! lease_ms=60000           lock_until = max(mtime + lease_ms, locked_at + hold_ms)
//! hold_ms=0
//! token=…                  absent in the write that created the node: its czxid
//! locked_at_ms=…           absent in the acquiring write: locked_at is that write's mtime
//! incarnation=5f0c…        names the child node created with this lock node
//! tick_ms=…                the last tick granted (`Tick::millis`); absent until one is
//! ```
//!
//! An acquisition writes `lease_ms = lock_at_most_for`; an extension writes it again (the new
//! `mtime` is "now"); a release writes `lease_ms = 0, hold_ms = lock_at_least_for`, which gives
//! exactly `lock_until = max(now, locked_at + lock_at_least_for)`.
//!
//! Ticks: an acquisition for a tick writes it as `tick_ms`; every other write (an acquisition
//! without a tick, a release, an extension, an operator's release) carries the node's
//! `tick_ms` over unchanged, and each of them is a compare-and-set on the version it was read
//! (or written) at, so none can drop a tick granted in between. Lock nodes are persistent
//! (nothing but an operator deletes them), so the tick outlives the lease that claimed it.
//! Nodes written before ticks have no `tick_ms`: no tick granted yet.
//!
//! Fencing tokens: the first acquisition (which creates the node) gets the node's `czxid`, each
//! later one the previous token + 1, written by compare-and-set on the node's version. The k-th
//! token is at most the zxid of the k-th acquiring write (every write takes a new zxid), so a
//! node deleted by hand and created again starts above every token it ever gave.
//!
//! Incarnation: node versions start again at 0 when a node is deleted and created again, so a
//! compare-and-set on the version alone could land on a new node that happens to be at the
//! version an old holder remembers. Each lock node is therefore created together with a child
//! of a random name, recorded in its data; every later write is a transaction that first
//! checks that this child still exists, which it does only in the node it was created with.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use zookeeper_client::Stat;

/// Longest lease in milliseconds (about 1000 years), so that time arithmetic never overflows.
const MAX_LEASE_MILLIS: i64 = 31_556_952_000_000;

/// The lease as a lock node stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LeaseRecord {
    pub(crate) holder: String,
    pub(crate) lease_ms: i64,
    pub(crate) hold_ms: i64,
    pub(crate) token: Option<u64>,
    pub(crate) locked_at_ms: Option<i64>,
    /// The name of the child created with the node (`None`: a node written by hand).
    pub(crate) incarnation: Option<String>,
    /// The last tick granted (`None`: none yet).
    pub(crate) tick_ms: Option<i64>,
}

impl LeaseRecord {
    /// What an acquisition writes: a lease of `lock_at_most_for` from the write itself, with
    /// `token` (`None` when the write creates the node: the token is its czxid), in the node
    /// of `incarnation`, with last tick `tick_ms`.
    pub(crate) fn acquisition(
        holder: &str,
        lock_at_most_for: Duration,
        token: Option<u64>,
        incarnation: &str,
        tick_ms: Option<i64>,
    ) -> Self {
        LeaseRecord {
            holder: holder.to_owned(),
            lease_ms: millis(lock_at_most_for),
            hold_ms: 0,
            token,
            locked_at_ms: None,
            incarnation: Some(incarnation.to_owned()),
            tick_ms,
        }
    }

    /// What an extension (`lease_ms = lock_at_most_for`) or a release (`lease_ms = 0`,
    /// `hold_ms = lock_at_least_for`) of the lease `(token, locked_at)` writes, keeping the
    /// node's last tick `tick_ms`.
    pub(crate) fn renewal(
        holder: &str,
        token: u64,
        locked_at: SystemTime,
        lease: Duration,
        hold: Duration,
        incarnation: &str,
        tick_ms: Option<i64>,
    ) -> Self {
        LeaseRecord {
            holder: holder.to_owned(),
            lease_ms: millis(lease),
            hold_ms: millis(hold),
            token: Some(token),
            locked_at_ms: Some(epoch_millis(locked_at)),
            incarnation: Some(incarnation.to_owned()),
            tick_ms,
        }
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut text = format!(
            "holder={}\nlease_ms={}\nhold_ms={}\n",
            self.holder, self.lease_ms, self.hold_ms
        );
        if let Some(token) = self.token {
            text.push_str(&format!("token={token}\n"));
        }
        if let Some(at) = self.locked_at_ms {
            text.push_str(&format!("locked_at_ms={at}\n"));
        }
        if let Some(incarnation) = &self.incarnation {
            text.push_str(&format!("incarnation={incarnation}\n"));
        }
        if let Some(tick) = self.tick_ms {
            text.push_str(&format!("tick_ms={tick}\n"));
        }
        text.into_bytes()
    }

    /// Reads what [`encode`](Self::encode) wrote; anything else is an error saying what.
    pub(crate) fn decode(data: &[u8]) -> Result<Self, String> {
        let text = std::str::from_utf8(data).map_err(|_| "not UTF-8 text".to_owned())?;
        let mut record = LeaseRecord {
            holder: String::new(),
            lease_ms: -1,
            hold_ms: 0,
            token: None,
            locked_at_ms: None,
            incarnation: None,
            tick_ms: None,
        };
        let mut has_holder = false;
        for line in text.lines().filter(|l| !l.is_empty()) {
            let (key, value) = line
                .split_once('=')
                .ok_or_else(|| format!("line {line:?} is not key=value"))?;
            let number = |v: &str| {
                v.parse::<i64>()
                    .ok()
                    .filter(|n| (0..=MAX_LEASE_MILLIS * 2).contains(n) || key == "locked_at_ms")
                    .ok_or_else(|| format!("{key}={v:?} is not a valid number"))
            };
            match key {
                "holder" => {
                    record.holder = value.to_owned();
                    has_holder = true;
                }
                "lease_ms" => record.lease_ms = number(value)?.min(MAX_LEASE_MILLIS),
                "hold_ms" => record.hold_ms = number(value)?.min(MAX_LEASE_MILLIS),
                "locked_at_ms" => record.locked_at_ms = Some(number(value)?),
                "token" => {
                    record.token = Some(
                        value
                            .parse()
                            .map_err(|_| format!("token={value:?} is not a valid number"))?,
                    );
                }
                "incarnation" => {
                    // It names a child node: one path component of plain characters.
                    if value.is_empty()
                        || value.len() > 32
                        || !value.bytes().all(|b| b.is_ascii_alphanumeric())
                    {
                        return Err(format!("incarnation={value:?} is not a valid node name"));
                    }
                    record.incarnation = Some(value.to_owned());
                }
                // Any millisecond, before the epoch too, as `Tick::millis`.
                "tick_ms" => {
                    record.tick_ms = Some(
                        value
                            .parse()
                            .map_err(|_| format!("tick_ms={value:?} is not a valid number"))?,
                    );
                }
                _ => return Err(format!("unknown key {key:?}")),
            }
        }
        if !has_holder || record.lease_ms < 0 {
            return Err("holder or lease_ms missing".to_owned());
        }
        Ok(record)
    }

    /// The fencing token of the lease this node holds.
    pub(crate) fn token(&self, stat: &Stat) -> u64 {
        self.token.unwrap_or(stat.czxid.max(0) as u64)
    }

    /// When the lease was granted (ensemble time, ms since the epoch).
    pub(crate) fn locked_at_ms(&self, stat: &Stat) -> i64 {
        self.locked_at_ms.unwrap_or(stat.mtime)
    }

    /// When the lease ends (ensemble time, ms since the epoch).
    pub(crate) fn lock_until_ms(&self, stat: &Stat) -> i64 {
        let leased = stat.mtime.saturating_add(self.lease_ms);
        let held = self.locked_at_ms(stat).saturating_add(self.hold_ms);
        leased.max(held)
    }
}

/// A fresh incarnation name: 64 random bits in hex (std's randomly keyed hasher, as
/// `shedlock_core::default_holder` does), so two creations of a node never share one.
pub(crate) fn new_incarnation() -> String {
    use std::hash::BuildHasher as _;
    let random = std::collections::hash_map::RandomState::new().hash_one(SystemTime::now());
    format!("{random:016x}")
}

/// A duration in whole milliseconds, rounded up, capped at about 1000 years.
pub(crate) fn millis(duration: Duration) -> i64 {
    let millis = duration.as_nanos().div_ceil(1_000_000);
    i64::try_from(millis).map_or(MAX_LEASE_MILLIS, |m| m.min(MAX_LEASE_MILLIS))
}

/// Milliseconds since the epoch (negative before it).
pub(crate) fn epoch_millis(time: SystemTime) -> i64 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_millis()).unwrap_or(i64::MAX),
        Err(before) => -i64::try_from(before.duration().as_millis()).unwrap_or(i64::MAX),
    }
}

/// The instant `ms` milliseconds after the epoch.
pub(crate) fn system_time(ms: i64) -> SystemTime {
    let magnitude = Duration::from_millis(ms.unsigned_abs());
    if ms >= 0 {
        UNIX_EPOCH.checked_add(magnitude)
    } else {
        UNIX_EPOCH.checked_sub(magnitude)
    }
    .unwrap_or(UNIX_EPOCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(czxid: i64, mtime: i64) -> Stat {
        Stat {
            czxid,
            mzxid: czxid + 10,
            mtime,
            ..zero_stat()
        }
    }

    fn zero_stat() -> Stat {
        Stat {
            czxid: 0,
            mzxid: 0,
            pzxid: 0,
            ctime: 0,
            mtime: 0,
            version: 0,
            cversion: 0,
            aversion: 0,
            ephemeral_owner: 0,
            data_length: 0,
            num_children: 0,
        }
    }

    #[test]
    fn acquisition_takes_its_time_from_its_own_write() {
        let created = LeaseRecord::acquisition("a", Duration::from_secs(60), None, "5f0c", None);
        let decoded = LeaseRecord::decode(&created.encode()).unwrap();
        assert_eq!(decoded, created);
        let written = stat(0x1_0000_0007, 1_000);
        assert_eq!(decoded.token(&written), 0x1_0000_0007, "the node's czxid");
        assert_eq!(decoded.locked_at_ms(&written), 1_000);
        assert_eq!(decoded.lock_until_ms(&written), 61_000);
        let next = LeaseRecord::acquisition(
            "b",
            Duration::from_secs(1),
            Some(0x1_0000_0008),
            "5f0c",
            None,
        );
        let decoded = LeaseRecord::decode(&next.encode()).unwrap();
        assert_eq!(decoded.token(&stat(0x1_0000_0007, 9_000)), 0x1_0000_0008);
        assert_eq!(decoded.lock_until_ms(&stat(0x1_0000_0007, 9_000)), 10_000);
    }

    #[test]
    fn release_keeps_the_lock_until_lock_at_least_for() {
        let locked_at = system_time(1_000);
        let release = |hold| {
            LeaseRecord::renewal(
                "a",
                7,
                locked_at,
                Duration::ZERO,
                Duration::from_millis(hold),
                "5f0c",
                None,
            )
        };
        // Released at 1 500 with lock_at_least_for 2 s: held until 3 000.
        assert_eq!(release(2_000).lock_until_ms(&stat(9, 1_500)), 3_000);
        // Released at 5 000: free from 5 000 on.
        assert_eq!(release(2_000).lock_until_ms(&stat(9, 5_000)), 5_000);
        let decoded = LeaseRecord::decode(&release(2_000).encode()).unwrap();
        assert_eq!(
            decoded.token(&stat(9, 1_500)),
            7,
            "the token survives later writes"
        );
        assert_eq!(decoded.locked_at_ms(&stat(9, 1_500)), 1_000);
    }

    #[test]
    fn the_last_tick_reads_back_and_nodes_from_before_ticks_have_none() {
        for tick in [Some(1_764_300_000_000), Some(-2), None] {
            let record = LeaseRecord::acquisition("a", Duration::from_secs(1), None, "5f0c", tick);
            assert_eq!(LeaseRecord::decode(&record.encode()).unwrap().tick_ms, tick);
        }
        let old = b"holder=a\nlease_ms=0\nhold_ms=0\ntoken=7\nlocked_at_ms=5\nincarnation=5f0c\n";
        assert_eq!(LeaseRecord::decode(old).unwrap().tick_ms, None);
    }

    #[test]
    fn foreign_data_is_an_error_naming_what_is_wrong() {
        for data in [
            &b"\xff"[..],
            b"",
            b"holder=a",
            b"holder=a\nlease_ms=x\n",
            b"holder=a\nlease_ms=-5\n",
            b"holder=a\nlease_ms=5\nnope=1\n",
            b"holder=a\nlease_ms=5\nincarnation=../x\n",
            b"holder=a\nlease_ms=5\nincarnation=\n",
            b"holder=a\nlease_ms=5\ntick_ms=soon\n",
            b"just text",
        ] {
            assert!(LeaseRecord::decode(data).is_err(), "{data:?}");
        }
    }

    #[test]
    fn incarnations_are_valid_node_names_and_differ() {
        let (a, b) = (new_incarnation(), new_incarnation());
        assert_ne!(a, b);
        let record = LeaseRecord::acquisition("a", Duration::from_secs(1), None, &a, None);
        let decoded = LeaseRecord::decode(&record.encode()).unwrap();
        assert_eq!(decoded.incarnation.as_deref(), Some(a.as_str()));
    }

    #[test]
    fn times_convert_both_ways_without_panicking() {
        assert_eq!(epoch_millis(system_time(1_234)), 1_234);
        assert_eq!(epoch_millis(system_time(-5)), -5);
        assert_eq!(millis(Duration::from_micros(800_001)), 801);
        assert_eq!(millis(Duration::MAX), MAX_LEASE_MILLIS);
        let _ = system_time(i64::MIN);
        let _ = system_time(i64::MAX);
    }
}
