//! Where things live in the ZooKeeper tree, and the checks on what users configure.
//!
//! ```text
//! <root>/clock                      written to read the ensemble's time
//! <root>/locks/<lock name>          one persistent node per lock: the lease (see `record`)
//! <root>/elections/<election>/n-…   one ephemeral sequential node per candidate
//! <root>/board/<key>                the fleet's board: one persistent node per entry (`board`)
//! ```
//!
//! Lock and election names are percent-encoded into one path component, so any valid lock name
//! (`/`, `%`, spaces, non-ASCII) is a valid node name and reads back unchanged.

use std::fmt::Write as _;

use shedlock_core::Error;

/// The default root of everything shedlock keeps in ZooKeeper.
pub const DEFAULT_ROOT: &str = "/shedlock";

/// The paths under one root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Paths {
    pub(crate) root: String,
    pub(crate) clock: String,
    pub(crate) locks: String,
    pub(crate) elections: String,
    pub(crate) board: String,
}

impl Paths {
    /// Validates `root` (absolute, no trailing `/`, no empty, `.` or `..` component, no
    /// character ZooKeeper refuses).
    pub(crate) fn new(root: &str) -> Result<Self, Error> {
        let bad = |why: &str| Err(Error::invalid_config("root", format!("{why}: {root:?}")));
        if !root.starts_with('/') || root.len() < 2 {
            return bad("must be an absolute ZooKeeper path below `/`, like \"/shedlock\"");
        }
        for component in root[1..].split('/') {
            if component.is_empty() || component == "." || component == ".." {
                return bad("must not have empty, `.` or `..` components or end with `/`");
            }
            if component.chars().any(refused_by_zookeeper) {
                return bad("holds a character ZooKeeper refuses in paths");
            }
        }
        Ok(Paths {
            root: root.to_owned(),
            clock: format!("{root}/clock"),
            locks: format!("{root}/locks"),
            elections: format!("{root}/elections"),
            board: format!("{root}/board"),
        })
    }

    /// The node of lock `name`.
    pub(crate) fn lock(&self, name: &str) -> String {
        format!("{}/{}", self.locks, encode_name(name))
    }

    /// The node of board entry `key`.
    pub(crate) fn board_entry(&self, key: &str) -> String {
        format!("{}/{}", self.board, encode_name(key))
    }

    /// The directory of election `name`'s candidates.
    pub(crate) fn election(&self, name: &str) -> String {
        format!("{}/{}", self.elections, encode_name(name))
    }
}

/// Characters ZooKeeper's `PathUtils.validatePath` rejects.
fn refused_by_zookeeper(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{e000}'..='\u{f8ff}' | '\u{fff0}'..='\u{ffff}')
}

/// A lock or election name as one node name: ASCII letters, digits and `-_.:@+=,~` stay as they
/// are, every other byte becomes `%XX`; `.` and `..` (not valid node names) are encoded whole.
pub(crate) fn encode_name(name: &str) -> String {
    let mut encoded = String::with_capacity(name.len());
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || b"-_.:@+=,~".contains(&byte) {
            encoded.push(char::from(byte));
        } else {
            let _ = write!(encoded, "%{byte:02X}");
        }
    }
    if encoded == "." || encoded == ".." {
        encoded = encoded.replace('.', "%2E");
    }
    encoded
}

/// The name a node name encodes, or `None` for a node shedlock did not name.
pub(crate) fn decode_name(node: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(node.len());
    let mut rest = node.as_bytes();
    while let Some((&byte, tail)) = rest.split_first() {
        if byte == b'%' {
            let hex = std::str::from_utf8(tail.get(..2)?).ok()?;
            bytes.push(u8::from_str_radix(hex, 16).ok()?);
            rest = &tail[2..];
        } else {
            bytes.push(byte);
            rest = tail;
        }
    }
    String::from_utf8(bytes).ok()
}

/// Checks a holder identity ([`shedlock_core::validate_holder`]) and keeps it shared.
pub(crate) fn validate_holder(holder: String) -> Result<std::sync::Arc<str>, Error> {
    shedlock_core::validate_holder(&holder)?;
    Ok(holder.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_one_path_component() {
        for name in [
            "nightly_report",
            "a/b/c",
            "50% off",
            "ünïcode ✓",
            ".",
            "..",
            "x'; DROP",
        ] {
            let encoded = encode_name(name);
            assert!(!encoded.contains('/'), "{encoded}");
            assert!(encoded != "." && encoded != "..");
            assert!(!encoded.chars().any(refused_by_zookeeper));
            assert_eq!(decode_name(&encoded).as_deref(), Some(name));
        }
        assert_eq!(encode_name("job-1.v2"), "job-1.v2");
        assert_eq!(decode_name("bad%zz"), None);
        assert_eq!(decode_name("cut%4"), None);
    }

    #[test]
    fn roots_are_checked_naming_the_field() {
        assert_eq!(Paths::new("/shedlock").unwrap().clock, "/shedlock/clock");
        assert_eq!(Paths::new("/a/b").unwrap().locks, "/a/b/locks");
        for root in [
            "", "/", "shedlock", "/a/", "/a//b", "/a/./b", "/a/..", "/a\u{1}",
        ] {
            match Paths::new(root) {
                Err(Error::InvalidConfig { field: "root", .. }) => {}
                other => panic!("{root:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn holders_are_checked_naming_the_field() {
        assert!(validate_holder("web-1:4121:a83e".into()).is_ok());
        for holder in [String::new(), "a\nb".into(), "x".repeat(256)] {
            match validate_holder(holder) {
                Err(Error::InvalidConfig {
                    field: "holder", ..
                }) => {}
                other => panic!("{other:?}"),
            }
        }
    }
}
