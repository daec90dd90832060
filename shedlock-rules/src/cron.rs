//! Cron expressions and the time zones they are read in.

use std::fmt;

use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds};

/// The one cron parser configuration of shedlock, the dialect of tokio-cron-scheduler's
/// `Job::new_async`: 6 fields with seconds first (an optional 7th is the year), day-of-month and
/// day-of-week both required to match.
pub fn cron_parser() -> CronParser {
    CronParser::builder()
        .seconds(Seconds::Required)
        .dom_and_dow(true)
        .build()
}

/// Parses a cron expression with [`cron_parser`].
///
/// ```
/// assert!(shedlock_rules::parse_cron("0 */5 * * * *").is_ok());
/// assert!(shedlock_rules::parse_cron("0 0 12 * * MON-FRI 2030").is_ok());
/// let error = shedlock_rules::parse_cron("*/5 * * * *").unwrap_err();
/// assert!(error.to_string().contains("prepend `0 `"), "{error}");
/// ```
///
/// # Errors
/// [`CronError`] with the expression and the parser's reason.
pub fn parse_cron(expression: &str) -> Result<Cron, CronError> {
    cron_parser().parse(expression).map_err(|error| CronError {
        expression: expression.to_owned(),
        reason: error.to_string().trim_end_matches('.').to_owned(),
    })
}

/// A cron expression refused by [`parse_cron`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronError {
    expression: String,
    reason: String,
}

impl CronError {
    /// The expression refused.
    pub fn expression(&self) -> &str {
        &self.expression
    }
}

impl fmt::Display for CronError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let CronError { expression, reason } = self;
        write!(f, "{expression:?}: {reason}; ")?;
        f.write_str(if expression.split_whitespace().count() == 5 {
            "cron needs 6 fields, seconds first: prepend `0 ` to fire at second 0 \
             (e.g. \"0 */5 * * * *\")"
        } else {
            "expected `sec min hour day-of-month month day-of-week [year]` (e.g. \"0 */5 * * * *\")"
        })
    }
}

impl std::error::Error for CronError {}

/// Parses an IANA time zone name (`"Europe/Berlin"`, `"UTC"`).
///
/// # Errors
/// [`ZoneError`] for a name the time zone database does not know.
pub fn parse_zone(name: &str) -> Result<Tz, ZoneError> {
    name.parse().map_err(|_| ZoneError {
        name: name.to_owned(),
    })
}

/// A time zone name refused by [`parse_zone`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneError {
    name: String,
}

impl fmt::Display for ZoneError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown time zone {:?}: expected an IANA name such as \"Europe/Berlin\" or \"UTC\"",
            self.name
        )
    }
}

impl std::error::Error for ZoneError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn six_or_seven_fields() {
        parse_cron("0 */5 * * * *").unwrap();
        parse_cron("0 0 12 * * MON-FRI 2030").unwrap();
        assert!(parse_cron("0 61 * * * *").is_err());
        assert!(parse_cron("0 0 0 0 * * * *").is_err());
        assert!(parse_cron("").is_err());
    }

    #[test]
    fn zones() {
        assert_eq!(parse_zone("Europe/Berlin"), Ok(Tz::Europe__Berlin));
        assert_eq!(parse_zone("UTC"), Ok(Tz::UTC));
        assert!(parse_zone("Mars/Olympus_Mons").is_err());
    }
}
