//! Where things live in etcd's key space: every key of a provider starts with its prefix.

use shedlock_core::Error;

/// The key prefix unless [configured](crate::EtcdLockProviderBuilder::prefix).
pub const DEFAULT_PREFIX: &str = "shedlock/";

/// The keys of one prefix.
///
/// - `<prefix>locks/<name>`: the lock's record (last holder, token, times); stays after
///   release, like a row of the SQL table.
/// - `<prefix>held/<name>`: exists while a lease holds the lock; attached to that etcd lease,
///   so etcd deletes it when the lease runs out.
/// - `<prefix>least/<name>`: exists until `lock_at_least_for` has passed; attached to a lease
///   of that length.
/// - `<prefix>ticks/<name>`: the last tick granted (`Tick::millis`, decimal); on no lease,
///   written only by the grant of a tick, so it outlives the lease that claimed it.
/// - `<prefix>run/<name>/<id>`: run records, a lock's newest first; `<prefix>run-time/…`: the
///   index of every lock's runs by start; `<prefix>run-alive/<name>/<id>`: heartbeats of
///   running runs; `<prefix>run-leases/…`: the leases run records live on (see `runs`).
/// - `<prefix>elections/<name>/<lease>`: the candidates of an election.
/// - `<prefix>board/<key>`: the fleet's board (see `board`).
#[derive(Debug, Clone)]
pub(crate) struct Keys {
    prefix: String,
}

impl Keys {
    pub(crate) fn new(prefix: String) -> Result<Self, Error> {
        if prefix.is_empty() {
            return Err(Error::invalid_config(
                "prefix",
                "must not be empty: lock keys would sit among every other key of the cluster (the default is \"shedlock/\")",
            ));
        }
        if prefix.chars().any(char::is_control) {
            return Err(Error::invalid_config(
                "prefix",
                format!("must not contain control characters: {prefix:?}"),
            ));
        }
        Ok(Keys { prefix })
    }

    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    fn key(&self, section: &str, name: &str) -> Vec<u8> {
        format!("{}{section}/{name}", self.prefix).into_bytes()
    }

    pub(crate) fn lock(&self, name: &str) -> Vec<u8> {
        self.key("locks", name)
    }

    pub(crate) fn held(&self, name: &str) -> Vec<u8> {
        self.key("held", name)
    }

    pub(crate) fn least(&self, name: &str) -> Vec<u8> {
        self.key("least", name)
    }

    pub(crate) fn tick(&self, name: &str) -> Vec<u8> {
        self.key("ticks", name)
    }

    /// The key of board entry `key` (`board/<key>`, the key as it is: etcd keys are bytes and
    /// sort bytewise).
    pub(crate) fn board(&self, key: &str) -> Vec<u8> {
        self.key("board", key)
    }

    /// The start of a section's keys (`<prefix><section>/`).
    pub(crate) fn section(&self, section: &str) -> Vec<u8> {
        self.key(section, "")
    }

    /// The lock name of a key in `section`, if it is one.
    pub(crate) fn name_in<'k>(&self, section: &str, key: &'k [u8]) -> Option<&'k str> {
        let start = self.section(section);
        let rest = key.strip_prefix(start.as_slice())?;
        std::str::from_utf8(rest).ok()
    }

    /// The key of run `token`/`attempt` of lock `name` (`run/<lock>/<id>`): a lock's records
    /// sort newest first ([`run_id`]).
    pub(crate) fn run(&self, name: &str, token: u64, attempt: u32) -> Vec<u8> {
        let mut key = self.runs_of(name);
        key.extend_from_slice(run_id(token, attempt).as_bytes());
        key
    }

    /// The start of the run keys of lock `name` (`run/<lock>/`): only that lock's, since
    /// [`escape`] keeps `/` out of the name.
    pub(crate) fn runs_of(&self, name: &str) -> Vec<u8> {
        self.key("run", &format!("{}/", escape(name)))
    }

    /// The heartbeat key of run `token`/`attempt` of lock `name` (`run-alive/<lock>/<id>`).
    pub(crate) fn alive(&self, name: &str, token: u64, attempt: u32) -> Vec<u8> {
        let mut key = self.alive_of(name);
        key.extend_from_slice(run_id(token, attempt).as_bytes());
        key
    }

    /// The start of the heartbeat keys of lock `name`.
    pub(crate) fn alive_of(&self, name: &str) -> Vec<u8> {
        self.key("run-alive", &format!("{}/", escape(name)))
    }

    /// The key of a run in the index of every lock's runs by start
    /// (`run-time/<start>-<id>-<lock>`): newest first, as [`RunCursor`] orders them, then by
    /// lock.
    pub(crate) fn by_time(&self, at: TimeKey<'_>) -> Vec<u8> {
        let mut key = self.by_time_from(at.started_us, at.token, at.attempt);
        key.extend_from_slice(escape(&at.lock).as_bytes());
        key
    }

    /// Where the index keys of runs at (`started_us`, `token`, `attempt`) start, whatever
    /// their lock.
    pub(crate) fn by_time_from(&self, started_us: u64, token: u64, attempt: u32) -> Vec<u8> {
        self.key(
            "run-time",
            &format!("{:016x}-{}-", u64::MAX - started_us, run_id(token, attempt)),
        )
    }

    /// The run an index key names (`run-time/…`), if it is one.
    pub(crate) fn parse_by_time(&self, key: &[u8]) -> Option<TimeKey<'static>> {
        let rest = self.name_in("run-time", key)?;
        let (started, rest) = rest.split_at_checked(16)?;
        let rest = rest.strip_prefix('-')?;
        let (token, rest) = rest.split_at_checked(16)?;
        let rest = rest.strip_prefix('-')?;
        let (attempt, rest) = rest.split_at_checked(8)?;
        let lock = rest.strip_prefix('-')?;
        Some(TimeKey {
            lock: std::borrow::Cow::Owned(unescape(lock)?),
            started_us: u64::MAX - u64::from_str_radix(started, 16).ok()?,
            token: u64::MAX - u64::from_str_radix(token, 16).ok()?,
            attempt: u32::MAX - u32::from_str_radix(attempt, 16).ok()?,
        })
    }

    /// The key of time bucket `index` of the run records kept for `retention_ms` (one etcd
    /// lease shared by the records written in that bucket).
    pub(crate) fn bucket(&self, retention_ms: u64, index: u64) -> Vec<u8> {
        let mut key = self.buckets_of(retention_ms);
        key.extend_from_slice(format!("{index:016x}").as_bytes());
        key
    }

    /// The start of the bucket keys of records kept for `retention_ms`.
    pub(crate) fn buckets_of(&self, retention_ms: u64) -> Vec<u8> {
        self.key("run-leases", &format!("{retention_ms:016x}/"))
    }

    /// The start of the candidate keys of election `name`.
    pub(crate) fn election(&self, name: &str) -> Vec<u8> {
        self.key("elections", &format!("{name}/"))
    }
}

/// A run in the index of runs by start time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TimeKey<'a> {
    pub(crate) lock: std::borrow::Cow<'a, str>,
    /// Microseconds since the epoch.
    pub(crate) started_us: u64,
    pub(crate) token: u64,
    pub(crate) attempt: u32,
}

/// A run's id within its lock: token and attempt, each subtracted from its type's largest
/// value and written in fixed-width hex, so that in etcd's (ascending) key order a lock's
/// records come newest first and a limited range reads only the newest.
fn run_id(token: u64, attempt: u32) -> String {
    format!("{:016x}-{:08x}", u64::MAX - token, u32::MAX - attempt)
}

/// A lock name as one key segment: `%` and `/` escaped (`%25`, `%2F`), so that the keys of
/// lock `a` and of lock `a/b` have no common prefix ending in `/`.
fn escape(name: &str) -> std::borrow::Cow<'_, str> {
    if name.contains(['%', '/']) {
        std::borrow::Cow::Owned(name.replace('%', "%25").replace('/', "%2F"))
    } else {
        std::borrow::Cow::Borrowed(name)
    }
}

fn unescape(segment: &str) -> Option<String> {
    let mut name = String::with_capacity(segment.len());
    let mut rest = segment;
    while let Some(at) = rest.find('%') {
        name.push_str(&rest[..at]);
        match rest.get(at..at + 3)? {
            "%25" => name.push('%'),
            "%2F" => name.push('/'),
            _ => return None,
        }
        rest = &rest[at + 3..];
    }
    name.push_str(rest);
    Some(name)
}

/// An etcd lease TTL for `duration`: whole seconds, rounded up (etcd raises TTLs below its
/// minimum, about 2 s with default cluster settings, to that minimum).
pub(crate) fn ttl_seconds(duration: std::time::Duration) -> i64 {
    let whole = duration
        .as_secs()
        .saturating_add(u64::from(duration.subsec_nanos() > 0));
    i64::try_from(whole.clamp(1, MAX_TTL_SECONDS)).unwrap_or(i64::MAX)
}

/// etcd's largest lease TTL.
const MAX_TTL_SECONDS: u64 = 9_000_000_000;

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn keys_sit_under_the_prefix_by_section() {
        let keys = Keys::new("app/".into()).unwrap();
        assert_eq!(keys.lock("a/b"), b"app/locks/a/b".to_vec());
        assert_eq!(keys.held("x"), b"app/held/x".to_vec());
        assert_eq!(keys.name_in("held", b"app/held/x"), Some("x"));
        assert_eq!(keys.name_in("held", b"app/least/x"), None);
        assert_eq!(
            keys.run("n", 7, 1),
            b"app/run/n/fffffffffffffff8-fffffffe".to_vec()
        );
    }

    #[test]
    fn a_locks_runs_sort_newest_first_and_apart_from_other_locks() {
        let keys = Keys::new("app/".into()).unwrap();
        assert!(keys.run("n", 8, 1) < keys.run("n", 7, 2));
        assert!(keys.run("n", 7, 2) < keys.run("n", 7, 1));
        let own = keys.runs_of("a");
        for other in ["a/b", "a/", "a%2F", "ab"] {
            assert!(
                !keys.run(other, 1, 1).starts_with(&own),
                "{other:?} shares lock a's range"
            );
        }
        let at = |lock: &'static str, started_us, token| TimeKey {
            lock: lock.into(),
            started_us,
            token,
            attempt: 1,
        };
        assert!(keys.by_time(at("z", 20, 1)) < keys.by_time(at("a", 10, 9)));
        assert!(keys.by_time(at("z", 10, 9)) < keys.by_time(at("a", 10, 8)));
        let odd = at("a/%2F/b%", 1_700_000_000_123, 42);
        assert_eq!(keys.parse_by_time(&keys.by_time(odd.clone())), Some(odd));
        assert!(
            keys.by_time(at("x", 5, 5))
                .starts_with(&keys.by_time_from(5, 5, 1))
        );
        assert_eq!(keys.parse_by_time(b"app/run-time/zz"), None);
    }

    #[test]
    fn an_empty_prefix_is_refused_naming_the_field() {
        let error = Keys::new(String::new()).unwrap_err();
        assert!(error.to_string().contains("`prefix`"), "{error}");
    }

    #[test]
    fn ttls_round_up_to_whole_seconds() {
        assert_eq!(ttl_seconds(Duration::from_millis(1)), 1);
        assert_eq!(ttl_seconds(Duration::from_millis(2500)), 3);
        assert_eq!(ttl_seconds(Duration::from_secs(60)), 60);
        assert_eq!(ttl_seconds(Duration::MAX), 9_000_000_000);
    }
}
