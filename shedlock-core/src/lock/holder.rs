//! Who holds a lock: one identity per process.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

use crate::Error;

/// The default holder identity of this process: `host:pid:random`, e.g. `web-7f9c:4121:a83e`.
///
/// Unique per process even when several instances share a host (the hostname alone collides),
/// and readable by a person who wonders which instance holds a lock. Computed once per process.
pub fn default_holder() -> &'static str {
    static HOLDER: OnceLock<String> = OnceLock::new();
    HOLDER.get_or_init(|| {
        let host = gethostname::gethostname().to_string_lossy().into_owned();
        let host = if host.is_empty() {
            "unknown-host".to_owned()
        } else {
            host
        };
        // Room in a VARCHAR(255) column for pid and suffix, whatever the host name.
        let host: String = host.chars().take(200).collect();
        format!("{host}:{}:{}", std::process::id(), random_suffix())
    })
}

/// Longest holder identity, in characters: the `VARCHAR(255)` `locked_by` column of ShedLock's
/// table.
pub const MAX_HOLDER_LEN: usize = 255;

/// Checks a holder identity, as every provider does when it is built: 1 to
/// [`MAX_HOLDER_LEN`] characters, no control characters (it is written to the store as is,
/// and read by people).
///
/// # Errors
/// [`Error::InvalidConfig`] (`holder`) saying what is wrong.
pub fn validate_holder(holder: &str) -> Result<(), Error> {
    if holder.is_empty() {
        return Err(Error::invalid_config("holder", "must not be empty"));
    }
    if holder.chars().count() > MAX_HOLDER_LEN {
        return Err(Error::invalid_config(
            "holder",
            format!("is longer than {MAX_HOLDER_LEN} characters, the `locked_by` column"),
        ));
    }
    if holder.chars().any(char::is_control) {
        return Err(Error::invalid_config(
            "holder",
            format!("must not contain control characters: {holder:?}"),
        ));
    }
    Ok(())
}

/// Four hex digits of per-process randomness, so a recycled pid does not reuse an identity.
fn random_suffix() -> String {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    format!("{:04x}", hasher.finish() & 0xffff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holder_names_host_and_pid() {
        let holder = default_holder();
        let parts: Vec<&str> = holder.rsplitn(3, ':').collect();
        assert_eq!(parts.len(), 3, "{holder}");
        assert_eq!(parts[1], std::process::id().to_string());
        assert_eq!(parts[0].len(), 4);
        assert_eq!(default_holder(), holder, "stable within a process");
    }
}
