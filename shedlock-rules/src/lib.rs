//! The rules [shedlock](https://docs.rs/shedlock) checks values against, in one place: the
//! attribute macros (`shedlock-macros`, at compile time) and the runtime (`shedlock-core`,
//! `scheduler.toml`, the `shedlock` command) call these functions, so a value the compiler
//! accepts is a value the runtime accepts, and both say the same thing about a wrong one.
//!
//! - lock (and election) names: [`check_lock_name`], [`MAX_LOCK_NAME_LEN`];
//! - durations: one grammar, humantime or ISO-8601 ([`parse_duration`] documents it), at most
//!   [`MAX_DURATION`], with [`check_duration`], [`check_period`] and [`check_at_least`] for
//!   values built in code; [`serde_duration`] (feature `serde`) for configuration files;
//! - cron expressions: [`cron_parser`], the one parser configuration, and [`parse_cron`];
//!   IANA time zones: [`parse_zone`].
//!
//! Each check returns a typed error saying what is wrong with the value; the caller adds which
//! field held it (`shedlock_core::Error::InvalidConfig`, the macro argument, the serde key).
//!
//! ```
//! use std::time::Duration;
//! use shedlock_rules::parse_duration;
//!
//! assert_eq!(parse_duration("1h 30m")?, Duration::from_secs(5400));
//! assert_eq!(parse_duration("PT1H30M")?, Duration::from_secs(5400));
//! assert_eq!(parse_duration("PT0.25S")?, Duration::from_millis(250));
//! let error = parse_duration("P1M").unwrap_err();
//! assert_eq!(error.to_string(), "\"P1M\": ISO-8601 months are not a fixed length; use days (\"P30D\") or hours (\"PT720H\")");
//! # Ok::<(), shedlock_rules::DurationError>(())
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]

mod cron;
mod duration;
mod iso8601;
mod name;
#[cfg(feature = "serde")]
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
pub mod serde_duration;

pub use cron::{CronError, ZoneError, cron_parser, parse_cron, parse_zone};
pub use duration::{
    DurationError, DurationErrorKind, MAX_DURATION, check_at_least, check_duration, check_period,
    parse_duration,
};
pub use name::{MAX_LOCK_NAME_LEN, NameError, check_lock_name};
