//! ISO-8601 durations: `PnWnDTnHnMn.nS`, the subset with a fixed length (Java's
//! `Duration.parse`, plus weeks): weeks, days, hours, minutes and seconds, a fraction on the
//! seconds only. Years and months are refused: their length depends on the date.

use std::time::Duration;

use crate::DurationErrorKind as K;

/// Parses `text`, which starts with `P` or `p`.
pub(crate) fn parse(text: &str) -> Result<Duration, K> {
    let upper = text.to_ascii_uppercase();
    let rest = &upper[1..];
    let (date, time) = match rest.split_once('T') {
        Some((_, "")) => return Err(K::IsoNoTime),
        Some((date, time)) => (date, Some(time)),
        None => (rest, None),
    };
    if date.is_empty() && time.is_none() {
        return Err(K::IsoEmpty);
    }

    let mut total = Duration::ZERO;
    for (number, unit) in components(date)? {
        let seconds_per_unit = match unit {
            'D' => 86_400,
            'W' => 7 * 86_400,
            'Y' | 'M' => return Err(K::IsoVariableLength { unit }),
            _ => return Err(K::IsoUnexpectedUnit { unit }),
        };
        total = add(total, &number, seconds_per_unit)?;
    }
    let mut last_unit = None;
    for (number, unit) in components(time.unwrap_or_default())? {
        let seconds_per_unit = match unit {
            'H' => 3_600,
            'M' => 60,
            'S' => 1,
            _ => return Err(K::IsoUnexpectedUnit { unit }),
        };
        if last_unit.is_some_and(|last| last <= seconds_per_unit) {
            return Err(K::IsoOrder);
        }
        last_unit = Some(seconds_per_unit);
        total = add(total, &number, seconds_per_unit)?;
    }
    Ok(total)
}

/// A number as written: whole part and, for seconds, a fraction of up to nine digits.
struct Number<'a> {
    whole: &'a str,
    fraction: Option<&'a str>,
}

/// Splits `"1D"` / `"1H30M0.5S"` into numbers and their unit letters.
fn components(part: &str) -> Result<Vec<(Number<'_>, char)>, K> {
    let mut components = Vec::new();
    let mut rest = part;
    while !rest.is_empty() {
        let Some(end) = rest.find(|c: char| c.is_ascii_alphabetic()) else {
            return Err(K::IsoMissingUnit { rest: rest.into() });
        };
        let (number, unit) = (&rest[..end], rest[end..].chars().next().unwrap_or_default());
        let (whole, fraction) = match number.split_once(['.', ',']) {
            Some((whole, fraction)) => (whole, Some(fraction)),
            None => (number, None),
        };
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(whole) || fraction.is_some_and(|f| !digits(f) || f.len() > 9) {
            return Err(K::IsoNotANumber {
                unit,
                found: number.into(),
            });
        }
        if fraction.is_some() && unit != 'S' {
            return Err(K::IsoFraction);
        }
        components.push((Number { whole, fraction }, unit));
        rest = &rest[end + unit.len_utf8()..];
    }
    Ok(components)
}

fn add(total: Duration, number: &Number<'_>, seconds_per_unit: u64) -> Result<Duration, K> {
    // Digits only, so parsing fails on overflow alone.
    let whole: u64 = number.whole.parse().map_err(|_| K::TooLong)?;
    let nanos = number.fraction.map_or(0, |f| {
        let digits: u32 = f.parse().unwrap_or_default();
        digits * 10u32.pow(9 - f.len() as u32)
    });
    let part = whole
        .checked_mul(seconds_per_unit)
        .map(|secs| Duration::new(secs, nanos))
        .ok_or(K::TooLong)?;
    total.checked_add(part).ok_or(K::TooLong)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> Duration {
        parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn err(text: &str) -> K {
        parse(text).expect_err(text)
    }

    #[test]
    fn forms() {
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
    fn errors() {
        assert_eq!(err("P1Y"), K::IsoVariableLength { unit: 'Y' });
        assert_eq!(err("P1M"), K::IsoVariableLength { unit: 'M' });
        assert_eq!(err("P"), K::IsoEmpty);
        assert_eq!(err("PT"), K::IsoNoTime);
        assert_eq!(err("PT10"), K::IsoMissingUnit { rest: "10".into() });
        assert_eq!(err("PT1M1H"), K::IsoOrder);
        assert_eq!(err("PT1M1M"), K::IsoOrder);
        assert_eq!(err("PT1.5M"), K::IsoFraction);
        assert!(matches!(err("PT.5S"), K::IsoNotANumber { unit: 'S', .. }));
        assert!(matches!(err("PT0.1234567891S"), K::IsoNotANumber { .. }));
        assert_eq!(err("PT1X"), K::IsoUnexpectedUnit { unit: 'X' });
        assert!(matches!(err("PT-1S"), K::IsoNotANumber { .. }));
        assert!(matches!(err("PT1ÄS"), K::IsoNotANumber { unit: 'S', .. }));
        assert_eq!(err("P99999999999999999999D"), K::TooLong);
        assert_eq!(err("P999999999999999D"), K::TooLong);
    }
}
