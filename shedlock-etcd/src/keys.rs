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
/// - `<prefix>runs/<name>/<token>-<attempt>`: run records.
/// - `<prefix>elections/<name>/<lease>`: the candidates of an election.
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

    /// The key of run `token`/`attempt` of lock `name`: zero-padded so keys sort by token.
    pub(crate) fn run(&self, name: &str, token: u64, attempt: u32) -> Vec<u8> {
        self.key("runs", &format!("{name}/{token:020}-{attempt:010}"))
    }

    /// The start of the run keys of lock `name`, or of every lock.
    pub(crate) fn runs_of(&self, name: Option<&str>) -> Vec<u8> {
        match name {
            Some(name) => self.key("runs", &format!("{name}/")),
            None => self.section("runs"),
        }
    }

    /// The start of the candidate keys of election `name`.
    pub(crate) fn election(&self, name: &str) -> Vec<u8> {
        self.key("elections", &format!("{name}/"))
    }
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
            b"app/runs/n/00000000000000000007-0000000001".to_vec()
        );
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
