//! `#[serde(with = "shedlock_rules::serde_duration")]` for `Duration` fields and
//! `#[serde(with = "shedlock_rules::serde_duration::option")]` for `Option<Duration>` fields:
//! read with [`parse_duration`](crate::parse_duration) (humantime or ISO-8601, at most
//! [`MAX_DURATION`](crate::MAX_DURATION)), written in humantime.
//!
//! ```
//! use std::time::Duration;
//! use serde::Deserialize;
//!
//! #[derive(Debug, Deserialize)]
//! struct Settings {
//!     #[serde(with = "shedlock_rules::serde_duration")]
//!     timeout: Duration,
//!     #[serde(default, with = "shedlock_rules::serde_duration::option")]
//!     retry_after: Option<Duration>,
//! }
//!
//! let settings: Settings = toml::from_str(r#"timeout = "PT1M30S""#).unwrap();
//! assert_eq!(settings.timeout, Duration::from_secs(90));
//! assert_eq!(settings.retry_after, None);
//! let error = toml::from_str::<Settings>(r#"timeout = "P1M""#).unwrap_err().to_string();
//! assert!(error.contains("timeout"), "the key is named: {error}");
//! assert!(error.contains("\"P1M\": ISO-8601 months are not a fixed length"), "{error}");
//! ```

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::ser::Serializer;

/// Reads a duration string.
///
/// # Errors
/// The deserializer's custom error carrying the [`DurationError`](crate::DurationError) text.
pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    deserializer.deserialize_str(DurationVisitor)
}

/// Writes the duration in humantime (`"1h 30m"`), which [`deserialize`] reads back.
///
/// # Errors
/// The serializer's own.
pub fn serialize<S: Serializer>(value: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&humantime::format_duration(*value))
}

struct DurationVisitor;

impl Visitor<'_> for DurationVisitor {
    type Value = Duration;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a duration such as \"10m\", \"1h 30m\", \"500ms\" or \"PT10M\"")
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Duration, E> {
        crate::parse_duration(text).map_err(E::custom)
    }
}

/// The same for `Option<Duration>`: a missing or `null` value is `None`.
pub mod option {
    use std::fmt;
    use std::time::Duration;

    use serde::de::{Deserializer, Visitor};
    use serde::ser::Serializer;

    /// Reads an optional duration string.
    ///
    /// # Errors
    /// As [`super::deserialize`].
    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Duration>, D::Error> {
        deserializer.deserialize_option(OptionVisitor)
    }

    /// Writes `Some` in humantime, `None` as none.
    ///
    /// # Errors
    /// The serializer's own.
    pub fn serialize<S: Serializer>(
        value: &Option<Duration>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(value) => {
                serializer.serialize_some(&humantime::format_duration(*value).to_string())
            }
            None => serializer.serialize_none(),
        }
    }

    struct OptionVisitor;

    impl<'de> Visitor<'de> for OptionVisitor {
        type Value = Option<Duration>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a duration such as \"10m\" or \"PT10M\", or none")
        }

        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_some<D: Deserializer<'de>>(
            self,
            deserializer: D,
        ) -> Result<Self::Value, D::Error> {
            super::deserialize(deserializer).map(Some)
        }
    }
}
