//! Durations: one grammar (humantime or ISO-8601) and the limits every duration setting obeys.

use std::fmt;
use std::time::Duration;

use crate::iso8601;

/// Longest duration accepted anywhere (100 years of 365.25 days, humantime's `"100y"`): longer is
/// a unit mistake, and would overflow clock arithmetic.
pub const MAX_DURATION: Duration = Duration::from_secs(3_155_760_000);

/// Parses a duration: the one grammar of shedlock's attributes (`#[scheduled]`,
/// `#[scheduler_lock]`), its configuration (`SchedulerConfig`, `scheduler.toml`) and its
/// `shedlock` command.
///
/// A duration is written in one of two forms, told apart by the first letter:
///
/// - **humantime**: numbers with units, spaces between them optional: `"500ms"`, `"30s"`,
///   `"10m"`, `"1h 30m"`, `"2days"`. Units: `ns`, `us`, `ms`, `s`/`sec`/`second(s)`,
///   `m`/`min`/`minute(s)`, `h`/`hr`/`hour(s)`, `d`/`day(s)`, `w`/`week(s)`, `M`/`month(s)`
///   (30.44 days), `y`/`year(s)` (365.25 days).
/// - **ISO-8601** (starts with `P`, any case): `PnWnDTnHnMnS`, the fixed-length subset Java's
///   `Duration.parse` reads, plus weeks: `"PT10M"`, `"PT1H30M"`, `"PT0.5S"` (a fraction of up
///   to nine digits, after `.` or `,`, on seconds only), `"P1D"`, `"P1DT2H"`, `"P2W"`. Years and
///   months are refused, as their length depends on the date; hours, minutes and seconds appear
///   at most once each, in that order.
///
/// Both forms accept zero (`"0s"`, `"PT0S"`) and at most [`MAX_DURATION`] (100 years: `"100y"`,
/// `"P36525D"`); settings that need a positive value say so ([`check_period`]). Surrounding
/// whitespace is ignored.
///
/// # Errors
/// [`DurationError`] naming the text and what is wrong with it.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let trimmed = text.trim();
    let parsed = if trimmed.starts_with(['P', 'p']) {
        iso8601::parse(trimmed)
    } else {
        humantime::parse_duration(trimmed).map_err(|error| match error {
            humantime::DurationError::NumberOverflow => DurationErrorKind::TooLong,
            error => DurationErrorKind::Humantime(error),
        })
    };
    parsed
        .and_then(|value| check_duration(value).map_err(|error| error.kind))
        .map_err(|kind| DurationError {
            input: Some(text.to_owned()),
            kind,
        })
}

/// Checks that a duration is at most [`MAX_DURATION`].
///
/// # Errors
/// [`DurationErrorKind::TooLong`].
pub fn check_duration(value: Duration) -> Result<Duration, DurationError> {
    if value > MAX_DURATION {
        return Err(DurationErrorKind::TooLong.into());
    }
    Ok(value)
}

/// Checks a lease, a period or a threshold: greater than zero and at most [`MAX_DURATION`].
///
/// # Errors
/// [`DurationErrorKind::Zero`] or [`DurationErrorKind::TooLong`].
pub fn check_period(value: Duration) -> Result<Duration, DurationError> {
    if value.is_zero() {
        return Err(DurationErrorKind::Zero.into());
    }
    check_duration(value)
}

/// Checks that `value` is not longer than `limit`, the duration of the setting `limit_name`
/// (`lock_at_least_for` against `lock_at_most_for`).
///
/// # Errors
/// [`DurationErrorKind::LongerThan`].
pub fn check_at_least(
    value: Duration,
    limit: Duration,
    limit_name: &'static str,
) -> Result<Duration, DurationError> {
    if value > limit {
        return Err(DurationErrorKind::LongerThan {
            value,
            limit,
            limit_name,
        }
        .into());
    }
    Ok(value)
}

/// A duration refused: the text, when it was parsed from one, and what is wrong.
///
/// Its message starts with the text (`"P1M": …`); the setting that held it is the caller's to
/// name.
#[derive(Debug, Clone, PartialEq)]
pub struct DurationError {
    input: Option<String>,
    kind: DurationErrorKind,
}

impl DurationError {
    /// What is wrong.
    pub fn kind(&self) -> &DurationErrorKind {
        &self.kind
    }

    /// The text that was parsed, if the duration came from one.
    pub fn input(&self) -> Option<&str> {
        self.input.as_deref()
    }
}

impl From<DurationErrorKind> for DurationError {
    fn from(kind: DurationErrorKind) -> Self {
        DurationError { input: None, kind }
    }
}

/// What is wrong with a duration.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum DurationErrorKind {
    /// Not ISO-8601 (no leading `P`), and not humantime either.
    Humantime(humantime::DurationError),
    /// ISO-8601 with nothing after `P`.
    IsoEmpty,
    /// ISO-8601 with nothing after `T`.
    IsoNoTime,
    /// ISO-8601 years or months (`unit` is `Y` or `M`), whose length depends on the date.
    IsoVariableLength {
        /// `Y` or `M`.
        unit: char,
    },
    /// ISO-8601 digits without a unit letter after them.
    IsoMissingUnit {
        /// The text left without a unit.
        rest: String,
    },
    /// ISO-8601: what stands before a unit letter is not a number (or has more than nine
    /// fraction digits).
    IsoNotANumber {
        /// The unit letter.
        unit: char,
        /// What stands before it.
        found: String,
    },
    /// ISO-8601: a fraction on a unit other than seconds.
    IsoFraction,
    /// ISO-8601: hours, minutes and seconds out of order, or one of them twice.
    IsoOrder,
    /// ISO-8601: a letter that is no unit there.
    IsoUnexpectedUnit {
        /// The letter.
        unit: char,
    },
    /// Zero, for a setting that needs a positive duration.
    Zero,
    /// Longer than [`MAX_DURATION`] (or too large to represent at all).
    TooLong,
    /// Longer than the setting it may not exceed.
    LongerThan {
        /// The duration refused.
        value: Duration,
        /// The duration of the other setting.
        limit: Duration,
        /// The other setting's name.
        limit_name: &'static str,
    },
}

const EXAMPLES: &str = "write e.g. \"10m\", \"1h 30m\", \"500ms\" or ISO-8601 \"PT10M\"";
const ISO_FORM: &str = "expected `PnDTnHnMnS` (e.g. \"PT10M\", \"PT1H30M\", \"PT0.5S\", \"P1D\")";

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(input) = &self.input {
            write!(f, "{input:?}: ")?;
        }
        fmt::Display::fmt(&self.kind, f)
    }
}

impl fmt::Display for DurationErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use DurationErrorKind as K;
        match self {
            K::Humantime(error) => write!(f, "{error}; {EXAMPLES}"),
            K::IsoEmpty => write!(
                f,
                "an ISO-8601 duration needs a value after `P`; {ISO_FORM}"
            ),
            K::IsoNoTime => write!(
                f,
                "an ISO-8601 duration needs a value after `T`; {ISO_FORM}"
            ),
            K::IsoVariableLength { unit } => write!(
                f,
                "ISO-8601 {} are not a fixed length; use days (\"P30D\") or hours (\"PT720H\")",
                if *unit == 'Y' { "years" } else { "months" }
            ),
            K::IsoMissingUnit { rest } => {
                write!(f, "`{rest}` has no unit letter after it; {ISO_FORM}")
            }
            K::IsoNotANumber { unit, found } => write!(
                f,
                "expected a number (at most nine fraction digits) before `{unit}`, found `{found}`"
            ),
            K::IsoFraction => f.write_str("only seconds may have a fraction (e.g. \"PT0.5S\")"),
            K::IsoOrder => f.write_str(
                "hours, minutes and seconds must each appear at most once, in that order",
            ),
            K::IsoUnexpectedUnit { unit } => write!(f, "unexpected `{unit}`; {ISO_FORM}"),
            K::Zero => f.write_str("must be greater than zero"),
            K::TooLong => f.write_str("must be at most 100 years"),
            K::LongerThan {
                value,
                limit,
                limit_name,
            } => write!(
                f,
                "{} is longer than {limit_name} ({})",
                humantime::format_duration(*value),
                humantime::format_duration(*limit)
            ),
        }
    }
}

impl std::error::Error for DurationError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> Duration {
        parse_duration(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn err(text: &str) -> DurationErrorKind {
        parse_duration(text).expect_err(text).kind
    }

    #[test]
    fn humantime() {
        assert_eq!(ok("10m"), Duration::from_secs(600));
        assert_eq!(ok(" 1h 30m "), Duration::from_secs(5400));
        assert_eq!(ok("500ms"), Duration::from_millis(500));
        assert_eq!(ok("0s"), Duration::ZERO);
        assert!(matches!(
            err("ten minutes"),
            DurationErrorKind::Humantime(_)
        ));
        assert!(matches!(err("10"), DurationErrorKind::Humantime(_)));
        assert!(matches!(err(""), DurationErrorKind::Humantime(_)));
        assert_eq!(
            parse_duration("10").unwrap_err().to_string(),
            "\"10\": time unit needed, for example 10sec or 10ms; write e.g. \"10m\", \
             \"1h 30m\", \"500ms\" or ISO-8601 \"PT10M\""
        );
    }

    #[test]
    fn the_limit_is_inclusive_in_both_forms() {
        assert_eq!(ok("100y"), MAX_DURATION);
        assert_eq!(ok("P36525D"), MAX_DURATION);
        assert_eq!(ok("PT3155760000S"), MAX_DURATION);
        assert_eq!(err("100y 1ns"), DurationErrorKind::TooLong);
        assert_eq!(err("PT3155760000.000000001S"), DurationErrorKind::TooLong);
        assert_eq!(err("P36526D"), DurationErrorKind::TooLong);
        assert_eq!(err("99999999999999999999999s"), DurationErrorKind::TooLong);
        assert_eq!(
            parse_duration("200y").unwrap_err().to_string(),
            "\"200y\": must be at most 100 years"
        );
    }

    #[test]
    fn value_checks() {
        assert_eq!(check_duration(MAX_DURATION), Ok(MAX_DURATION));
        assert_eq!(
            check_duration(Duration::MAX).unwrap_err().kind(),
            &DurationErrorKind::TooLong
        );
        assert_eq!(
            check_period(Duration::ZERO).unwrap_err().to_string(),
            "must be greater than zero"
        );
        let s = Duration::from_secs;
        assert_eq!(check_at_least(s(60), s(60), "lock_at_most_for"), Ok(s(60)));
        assert_eq!(
            check_at_least(s(61), s(60), "lock_at_most_for")
                .unwrap_err()
                .to_string(),
            "1m 1s is longer than lock_at_most_for (1m)"
        );
    }
}
