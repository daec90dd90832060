//! Lock and election names.

use std::fmt;

/// Longest lock name, in bytes: the `VARCHAR(64)` name column of ShedLock's table.
pub const MAX_LOCK_NAME_LEN: usize = 64;

/// Checks a lock name (elections are named by the same rule): 1 to [`MAX_LOCK_NAME_LEN`] bytes,
/// no control characters.
///
/// ```
/// use shedlock_rules::{NameError, check_lock_name};
///
/// assert!(check_lock_name("purge_sessions").is_ok());
/// assert_eq!(check_lock_name(""), Err(NameError::Empty));
/// assert_eq!(check_lock_name(&"x".repeat(65)), Err(NameError::TooLong { len: 65 }));
/// ```
///
/// # Errors
/// [`NameError`] saying which rule the name breaks.
pub fn check_lock_name(name: &str) -> Result<(), NameError> {
    if name.is_empty() {
        Err(NameError::Empty)
    } else if name.len() > MAX_LOCK_NAME_LEN {
        Err(NameError::TooLong { len: name.len() })
    } else if name.chars().any(char::is_control) {
        Err(NameError::ControlCharacter {
            name: name.to_owned(),
        })
    } else {
        Ok(())
    }
}

/// Why a lock name was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NameError {
    /// The name is empty.
    Empty,
    /// The name is longer than [`MAX_LOCK_NAME_LEN`] bytes.
    TooLong {
        /// Its length, in bytes.
        len: usize,
    },
    /// The name holds a control character (a newline, a tab, an escape, …).
    ControlCharacter {
        /// The name (printed with the character escaped).
        name: String,
    },
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameError::Empty => f.write_str("a lock name must not be empty"),
            NameError::TooLong { len } => write!(
                f,
                "the lock name is {len} bytes long, the limit is {MAX_LOCK_NAME_LEN} \
                 (the `name` column)"
            ),
            NameError::ControlCharacter { name } => write!(
                f,
                "a lock name must not contain control characters: {name:?}"
            ),
        }
    }
}

impl std::error::Error for NameError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_bytes_and_inclusive() {
        assert_eq!(check_lock_name(&"x".repeat(64)), Ok(()));
        assert_eq!(check_lock_name("ünïcode ✓"), Ok(()));
        // 33 two-byte characters: 66 bytes.
        assert_eq!(
            check_lock_name(&"ü".repeat(33)),
            Err(NameError::TooLong { len: 66 })
        );
        assert_eq!(
            check_lock_name("a\nb").unwrap_err().to_string(),
            "a lock name must not contain control characters: \"a\\nb\""
        );
    }
}
