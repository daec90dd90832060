//! Validated names: the key prefix every key of a store starts with, and the holder.

use std::sync::Arc;

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
}
