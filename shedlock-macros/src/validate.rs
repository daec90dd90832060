//! Checks of single argument values, with the same rules the runtime applies, so a mistake is a
//! compile error on the literal instead of a panic at startup.

use std::time::Duration;

use croner::parser::{CronParser, Seconds};
use syn::LitStr;

use crate::duration;

/// The lock name column of ShedLock's table is `VARCHAR(64)`; `shedlock_core::MAX_LOCK_NAME_LEN`.
const MAX_LOCK_NAME_LEN: usize = 64;

/// The longest duration the runtime accepts (100 years), as in `shedlock_core`.
const MAX_DURATION: Duration = Duration::from_secs(3_155_760_000); // 100 × 365.25 days

/// A cron expression, parsed with exactly the settings the scheduler uses
/// (`shedlock_core::schedule::parse_cron`).
pub(crate) fn cron(lit: LitStr) -> syn::Result<LitStr> {
    let expression = lit.value();
    let parsed = CronParser::builder()
        .seconds(Seconds::Required)
        .dom_and_dow(true)
        .build()
        .parse(&expression);
    match parsed {
        Ok(_) => Ok(lit),
        Err(error) => {
            let hint = if expression.split_whitespace().count() == 5 {
                "; cron needs 6 fields, seconds first: prepend `0 ` to fire at second 0 (e.g. \"0 */5 * * * *\")"
            } else {
                "; expected `sec min hour day-of-month month day-of-week [year]` (e.g. \"0 */5 * * * *\")"
            };
            Err(syn::Error::new(
                lit.span(),
                format!(
                    "invalid cron expression: {}{hint}",
                    error.to_string().trim_end_matches('.')
                ),
            ))
        }
    }
}

/// An IANA time zone name known to `chrono-tz`.
pub(crate) fn zone(lit: LitStr) -> syn::Result<LitStr> {
    match lit.value().parse::<chrono_tz::Tz>() {
        Ok(_) => Ok(lit),
        Err(_) => Err(syn::Error::new(
            lit.span(),
            format!(
                "unknown time zone {:?}: expected an IANA name such as \"Europe/Berlin\" or \"UTC\"",
                lit.value()
            ),
        )),
    }
}

/// A lock name: non-empty, at most 64 bytes, no control characters.
pub(crate) fn lock_name(lit: LitStr) -> syn::Result<LitStr> {
    let name = lit.value();
    let problem = if name.is_empty() {
        "lock name must not be empty".to_owned()
    } else if name.len() > MAX_LOCK_NAME_LEN {
        format!(
            "lock name is {} bytes long, the limit is {MAX_LOCK_NAME_LEN} (the `name` column)",
            name.len()
        )
    } else if name.chars().any(char::is_control) {
        "lock name must not contain control characters".to_owned()
    } else {
        return Ok(lit);
    };
    Err(syn::Error::new(lit.span(), problem))
}

/// A duration literal of the argument `key`.
pub(crate) fn duration(key: &str, lit: &LitStr) -> syn::Result<Duration> {
    let value = duration::parse(&lit.value()).map_err(|error| {
        syn::Error::new(
            lit.span(),
            format!(
                "invalid duration for `{key}` ({error}); write e.g. \"10m\", \"1h 30m\", \
                 \"500ms\" or ISO-8601 \"PT10M\""
            ),
        )
    })?;
    if value > MAX_DURATION {
        return Err(syn::Error::new(
            lit.span(),
            format!("`{key}` must be at most 100 years"),
        ));
    }
    Ok(value)
}

/// A duration that must not be zero (a lease, a period).
pub(crate) fn non_zero_duration(key: &str, lit: &LitStr) -> syn::Result<Duration> {
    let value = duration(key, lit)?;
    if value.is_zero() {
        return Err(syn::Error::new(
            lit.span(),
            format!("`{key}` must be greater than zero"),
        ));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(value: &str) -> LitStr {
        LitStr::new(value, proc_macro2::Span::call_site())
    }

    #[test]
    fn cron_needs_six_fields() {
        cron(lit("0 */5 * * * *")).unwrap();
        cron(lit("0 0 12 * * MON-FRI 2030")).unwrap();
        let error = cron(lit("*/5 * * * *")).unwrap_err().to_string();
        assert!(error.contains("prepend `0 `"), "{error}");
        assert!(cron(lit("0 61 * * * *")).is_err());
    }

    #[test]
    fn zones() {
        zone(lit("Europe/Berlin")).unwrap();
        zone(lit("UTC")).unwrap();
        assert!(zone(lit("Mars/Olympus_Mons")).is_err());
    }

    #[test]
    fn lock_names() {
        lock_name(lit("purge_sessions")).unwrap();
        lock_name(lit(&"x".repeat(64))).unwrap();
        assert!(lock_name(lit("")).is_err());
        assert!(lock_name(lit(&"x".repeat(65))).is_err());
        assert!(lock_name(lit("a\nb")).is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(
            duration("d", &lit("PT1M")).unwrap(),
            Duration::from_secs(60)
        );
        assert!(non_zero_duration("d", &lit("0s")).is_err());
        assert!(duration("d", &lit("100y")).is_ok());
        let err = duration("d", &lit("200y")).unwrap_err().to_string();
        assert_eq!(err, "`d` must be at most 100 years");
    }
}
