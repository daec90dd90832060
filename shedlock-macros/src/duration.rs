//! Duration literals: humantime (`"10m"`, `"1h 30m"`, `"500ms"`) or ISO-8601 (`"PT10M"`), as
//! ShedLock accepts both.

use std::time::Duration;

/// Parses a duration written in humantime or, when it starts with `P`, in ISO-8601.
pub(crate) fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.starts_with(['P', 'p']) {
        parse_iso8601(text)
    } else {
        humantime::parse_duration(text).map_err(|e| e.to_string())
    }
}

/// `PnWnDTnHnMn.nS`, the subset of ISO-8601 durations with a fixed length (Java's
/// `Duration.parse`, plus weeks): days, hours, minutes and seconds, a fraction on the seconds
/// only.
/// Years and months are refused: their length depends on the date.
fn parse_iso8601(text: &str) -> Result<Duration, String> {
    let upper = text.to_ascii_uppercase();
    let rest = &upper[1..];
    let (date, time) = match rest.split_once('T') {
        Some((_, "")) => {
            return Err(format!(
                "ISO-8601 duration {text:?} has no time after `T` (e.g. \"PT10M\")"
            ));
        }
        Some((date, time)) => (date, Some(time)),
        None => (rest, None),
    };
    if date.is_empty() && time.is_none() {
        return Err(format!(
            "ISO-8601 duration {text:?} is empty (e.g. \"PT10M\", \"P1D\")"
        ));
    }

    let mut total = Duration::ZERO;
    for (number, unit) in components(date, text)? {
        let seconds_per_unit = match unit {
            'D' => 86_400,
            'W' => 7 * 86_400,
            'Y' | 'M' => {
                return Err(format!(
                    "ISO-8601 duration {text:?} uses {}: they are not a fixed length; \
                     use days (\"P30D\") or hours (\"PT720H\")",
                    if unit == 'Y' { "years" } else { "months" }
                ));
            }
            _ => return Err(unexpected_unit(text, unit)),
        };
        total = add(total, number, seconds_per_unit, text)?;
    }
    let mut last_unit = None;
    for (number, unit) in components(time.unwrap_or_default(), text)? {
        let seconds_per_unit = match unit {
            'H' => 3_600,
            'M' => 60,
            'S' => 1,
            _ => return Err(unexpected_unit(text, unit)),
        };
        if last_unit.is_some_and(|last| last <= seconds_per_unit) {
            return Err(format!(
                "ISO-8601 duration {text:?}: hours, minutes and seconds must each appear once, \
                 in that order"
            ));
        }
        last_unit = Some(seconds_per_unit);
        total = add(total, number, seconds_per_unit, text)?;
    }
    Ok(total)
}

/// A number as written: whole part and, for seconds, a fraction of up to nine digits.
struct Number<'a> {
    whole: &'a str,
    fraction: Option<&'a str>,
}

/// Splits `"1D"` / `"1H30M0.5S"` into numbers and their unit letters.
fn components<'a>(part: &'a str, text: &str) -> Result<Vec<(Number<'a>, char)>, String> {
    let mut components = Vec::new();
    let mut rest = part;
    while !rest.is_empty() {
        let Some(end) = rest.find(|c: char| c.is_ascii_alphabetic()) else {
            return Err(format!(
                "ISO-8601 duration {text:?}: `{rest}` has no unit letter after it"
            ));
        };
        let (number, unit) = (&rest[..end], rest[end..].chars().next().unwrap_or_default());
        let (whole, fraction) = match number.split_once(['.', ',']) {
            Some((whole, fraction)) => (whole, Some(fraction)),
            None => (number, None),
        };
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(whole) || fraction.is_some_and(|f| !digits(f) || f.len() > 9) {
            return Err(format!(
                "ISO-8601 duration {text:?}: expected a number before `{unit}`, found `{number}`"
            ));
        }
        if fraction.is_some() && unit != 'S' {
            return Err(format!(
                "ISO-8601 duration {text:?}: only seconds may have a fraction (e.g. \"PT0.5S\")"
            ));
        }
        components.push((Number { whole, fraction }, unit));
        rest = &rest[end + 1..];
    }
    Ok(components)
}

fn add(
    total: Duration,
    number: Number<'_>,
    seconds_per_unit: u64,
    text: &str,
) -> Result<Duration, String> {
    let too_large = || format!("ISO-8601 duration {text:?} is too large");
    let whole: u64 = number.whole.parse().map_err(|_| too_large())?;
    let nanos = number.fraction.map_or(0, |f| {
        let digits: u32 = f.parse().unwrap_or_default();
        digits * 10u32.pow(9 - f.len() as u32)
    });
    let part = whole
        .checked_mul(seconds_per_unit)
        .map(|secs| Duration::new(secs, nanos))
        .ok_or_else(too_large)?;
    total.checked_add(part).ok_or_else(too_large)
}

fn unexpected_unit(text: &str, unit: char) -> String {
    format!(
        "ISO-8601 duration {text:?}: unexpected `{unit}`; expected `PnDTnHnMnS` \
         (e.g. \"PT10M\", \"PT1H30M\", \"PT0.5S\", \"P1D\")"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> Duration {
        parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn err(text: &str) -> String {
        parse(text).expect_err(text)
    }

    #[test]
    fn humantime() {
        assert_eq!(ok("10m"), Duration::from_secs(600));
        assert_eq!(ok("1h 30m"), Duration::from_secs(5400));
        assert_eq!(ok("500ms"), Duration::from_millis(500));
        assert_eq!(ok("0s"), Duration::ZERO);
        assert!(err("ten minutes").contains("expected number"));
        assert!(err("10").contains("time unit needed"));
    }

    #[test]
    fn iso8601() {
        assert_eq!(ok("PT10M"), Duration::from_secs(600));
        assert_eq!(ok("PT1H30M"), Duration::from_secs(5400));
        assert_eq!(ok("PT0.5S"), Duration::from_millis(500));
        assert_eq!(ok("pt0,25s"), Duration::from_millis(250));
        assert_eq!(ok("P1D"), Duration::from_secs(86_400));
        assert_eq!(ok("P1DT2H"), Duration::from_secs(93_600));
        assert_eq!(ok("P2W"), Duration::from_secs(14 * 86_400));
        assert_eq!(ok("PT1.000000001S"), Duration::new(1, 1));
        assert_eq!(ok("PT0S"), Duration::ZERO);
    }

    #[test]
    fn iso8601_errors() {
        assert!(err("P1Y").contains("years: they are not a fixed length"));
        assert!(err("P1M").contains("months: they are not a fixed length"));
        assert!(err("P").contains("is empty"));
        assert!(err("PT").contains("no time after `T`"));
        assert!(err("PT10").contains("no unit letter"));
        assert!(err("PT1M1H").contains("in that order"));
        assert!(err("PT1M1M").contains("in that order"));
        assert!(err("PT1.5M").contains("only seconds may have a fraction"));
        assert!(err("PT.5S").contains("expected a number"));
        assert!(err("PT0.1234567891S").contains("expected a number"));
        assert!(err("PT1X").contains("unexpected `X`"));
        assert!(err("PT-1S").contains("expected a number"));
        assert!(err("P99999999999999999999D").contains("too large"));
        assert!(err("P999999999999999D").contains("too large"));
    }
}
