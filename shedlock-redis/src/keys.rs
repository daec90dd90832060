//! Validated names: the key prefix, the holder, and durations as Redis milliseconds.

use std::sync::Arc;
use std::time::Duration;

use shedlock_core::Error;

/// The key prefix unless configured: lock `nightly` lives in the hash `shedlock:nightly`.
pub const DEFAULT_KEY_PREFIX: &str = "shedlock:";

/// Longest key prefix, in bytes.
pub(crate) const MAX_PREFIX_LEN: usize = 128;

/// Checks a key prefix: non-empty (locks must not mix with other keys), at most 128 bytes, no
/// control characters or spaces, and none of the glob characters `* ? [ ] \`, so that
/// `list_locks` can find the locks with a `SCAN MATCH <prefix>*` that matches nothing else.
pub(crate) fn validate_prefix(prefix: String) -> Result<Arc<str>, Error> {
    let fail = |message: String| Err(Error::invalid_config("key_prefix", message));
    if prefix.is_empty() {
        return fail("must not be empty: lock keys would mix with every other key".to_owned());
    }
    if prefix.len() > MAX_PREFIX_LEN {
        return fail(format!(
            "is {} bytes long, the limit is {MAX_PREFIX_LEN}: {prefix:?}",
            prefix.len()
        ));
    }
    if let Some(bad) = prefix
        .chars()
        .find(|c| c.is_control() || c.is_whitespace() || matches!(c, '*' | '?' | '[' | ']' | '\\'))
    {
        return fail(format!(
            "must not contain control characters, spaces or glob characters (* ? [ ] \\): \
             {bad:?} in {prefix:?}"
        ));
    }
    Ok(prefix.into())
}

/// Checks a holder identity ([`shedlock_core::validate_holder`]) and keeps it shared.
pub(crate) fn validate_holder(holder: String) -> Result<Arc<str>, Error> {
    shedlock_core::validate_holder(&holder)?;
    Ok(holder.into())
}

/// A duration in whole milliseconds, rounded up (a lease is never shorter than asked).
/// Durations reaching the scripts are at most 100 years (the core validates them), far below
/// the 2^53 ms Lua numbers hold exactly.
pub(crate) fn millis(duration: Duration) -> u64 {
    let millis =
        duration.as_millis() + u128::from(!duration.subsec_nanos().is_multiple_of(1_000_000));
    u64::try_from(millis).unwrap_or(u64::MAX)
}

/// A Redis timestamp in milliseconds since the epoch, as a `SystemTime`.
pub(crate) fn system_time(millis: u64) -> std::time::SystemTime {
    std::time::UNIX_EPOCH + Duration::from_millis(millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes() {
        assert!(validate_prefix("shedlock:".into()).is_ok());
        assert!(validate_prefix("app{locks}:".into()).is_ok());
        for bad in ["", "a b", "a*", "a?", "a[", "a]", "a\\", "a\n"] {
            assert!(validate_prefix(bad.into()).is_err(), "{bad:?} accepted");
        }
        assert!(validate_prefix("a".repeat(129)).is_err());
    }

    #[test]
    fn millis_round_up() {
        assert_eq!(millis(Duration::from_micros(1)), 1);
        assert_eq!(millis(Duration::from_millis(1500)), 1500);
        assert_eq!(millis(Duration::from_nanos(1_000_001)), 2);
    }
}
