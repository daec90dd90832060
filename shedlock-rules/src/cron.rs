//! Cron expressions and the time zones they are read in.

use std::fmt;

use chrono::{Datelike, NaiveDate};
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds};
use croner::{Cron, YEAR_LOWER_LIMIT, YEAR_UPPER_LIMIT};

/// The one cron parser configuration of shedlock, the dialect of tokio-cron-scheduler's
/// `Job::new_async`: 6 fields with seconds first (an optional 7th is the year), day-of-month and
/// day-of-week both required to match.
pub fn cron_parser() -> CronParser {
    CronParser::builder()
        .seconds(Seconds::Required)
        .dom_and_dow(true)
        .build()
}

/// Parses a cron expression with [`cron_parser`] and refuses one that matches no date at all
/// (`"0 0 0 31 2 *"`, the 31st of February), whose job would silently never fire.
///
/// ```
/// assert!(shedlock_rules::parse_cron("0 */5 * * * *").is_ok());
/// assert!(shedlock_rules::parse_cron("0 0 12 * * MON-FRI 2030").is_ok());
/// assert!(shedlock_rules::parse_cron("0 0 0 29 2 *").is_ok(), "leap years");
/// let error = shedlock_rules::parse_cron("*/5 * * * *").unwrap_err();
/// assert!(error.to_string().contains("prepend `0 `"), "{error}");
/// let error = shedlock_rules::parse_cron("0 0 0 31 2 *").unwrap_err();
/// assert_eq!(
///     error.to_string(),
///     "\"0 0 0 31 2 *\": matches no date: day 31 of February never occurs, so it would never fire"
/// );
/// ```
///
/// "No date" is judged on the calendar alone, in every year croner can name (1 to 5000): a
/// pattern that matches in UTC is accepted whatever zone it is later read in. A pattern whose
/// only dates are in the past (`"0 0 0 1 1 * 2020"`) matches a date, so it is accepted.
///
/// # Errors
/// [`CronError`] with the expression and the parser's reason, or the reason it matches no date.
pub fn parse_cron(expression: &str) -> Result<Cron, CronError> {
    let cron = cron_parser().parse(expression).map_err(|error| CronError {
        expression: expression.to_owned(),
        reason: error.to_string().trim_end_matches('.').to_owned(),
        never_fires: false,
    })?;
    match never_fires(expression, &cron) {
        None => Ok(cron),
        Some(reason) => Err(CronError {
            expression: expression.to_owned(),
            reason,
            never_fires: true,
        }),
    }
}

/// Why `cron` matches no instant, or `None` if it matches one.
///
/// Whether a day matches depends on its year only through the year's calendar: which weekday
/// January 1st falls on and whether the year is a leap year (the last day of a month, the n-th
/// weekday, the nearest weekday all follow from them). So the days of one year of each of the
/// 14 calendars that the year field allows are all the days there are to try: at most 14 × 366.
fn never_fires(expression: &str, cron: &Cron) -> Option<String> {
    let pattern = &cron.pattern;
    let is = |matched: Result<bool, croner::errors::CronError>| matched.unwrap_or(false);
    let any_time = (0..24).any(|hour| is(pattern.hour_match(hour)))
        && (0..60).any(|minute| is(pattern.minute_match(minute)))
        && (0..60).any(|second| is(pattern.second_match(second)));
    if !any_time {
        return Some("no time of day fits its second, minute and hour fields".to_owned());
    }
    let mut calendars_tried = [false; 14];
    for year in YEAR_LOWER_LIMIT..=YEAR_UPPER_LIMIT {
        let Some(first) = NaiveDate::from_ymd_opt(year, 1, 1) else {
            continue;
        };
        let calendar =
            first.weekday().num_days_from_monday() as usize * 2 + usize::from(first.leap_year());
        if calendars_tried[calendar] || !is(pattern.year_match(year)) {
            continue;
        }
        calendars_tried[calendar] = true;
        let matches = first
            .iter_days()
            .take_while(|day| day.year() == year)
            .any(|day| {
                is(pattern.month_match(day.month()))
                    && is(pattern.day_match(year, day.month(), day.day()))
            });
        if matches {
            return None;
        }
    }
    Some(days_that_never_occur(expression, cron).unwrap_or_else(|| {
        "no day fits its day-of-month, month, day-of-week and year fields together".to_owned()
    }))
}

/// "day 31 of February never occurs", when that alone is why: the day-of-month field is plain
/// numbers (`31`, `30,31`, `30-31`) and each is past the end of every month the pattern names,
/// in any year.
fn days_that_never_occur(expression: &str, cron: &Cron) -> Option<String> {
    const MONTHS: [(&str, u32); 12] = [
        ("January", 31),
        ("February", 29),
        ("March", 31),
        ("April", 30),
        ("May", 31),
        ("June", 30),
        ("July", 31),
        ("August", 31),
        ("September", 30),
        ("October", 31),
        ("November", 30),
        ("December", 31),
    ];
    let field = expression.split_whitespace().nth(3)?;
    let mut days = Vec::new();
    for part in field.split(',') {
        let (first, last) = part.split_once('-').unwrap_or((part, part));
        days.extend(first.parse::<u32>().ok()?..=last.parse::<u32>().ok()?);
    }
    days.sort_unstable();
    days.dedup();
    let months: Vec<(&str, u32)> = (1..=12)
        .zip(MONTHS)
        .filter(|(month, _)| cron.pattern.month_match(*month).unwrap_or(false))
        .map(|(_, month)| month)
        .collect();
    let longest = months.iter().map(|(_, length)| *length).max()?;
    if days.is_empty() || days.iter().any(|day| *day <= longest) {
        return None;
    }
    let list = |items: Vec<String>| match items.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    };
    let (noun, verb) = if days.len() == 1 {
        ("day", "occurs")
    } else {
        ("days", "occur")
    };
    Some(format!(
        "{noun} {} of {} never {verb}",
        list(days.iter().map(u32::to_string).collect()),
        list(months.iter().map(|(name, _)| (*name).to_owned()).collect()),
    ))
}

/// A cron expression refused by [`parse_cron`]: it does not parse, or it matches no date.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronError {
    expression: String,
    reason: String,
    never_fires: bool,
}

impl CronError {
    /// The expression refused.
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// Whether the expression parses but matches no date, so a job on it would never fire.
    pub fn never_fires(&self) -> bool {
        self.never_fires
    }
}

impl fmt::Display for CronError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let CronError {
            expression,
            reason,
            never_fires,
        } = self;
        if *never_fires {
            return write!(
                f,
                "{expression:?}: matches no date: {reason}, so it would never fire"
            );
        }
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

    /// The reason a pattern is refused, or `None` if it is accepted.
    fn refusal(expression: &str) -> Option<String> {
        parse_cron(expression).err().map(|error| {
            assert!(error.never_fires(), "{error}");
            error.to_string()
        })
    }

    #[test]
    fn a_day_past_the_end_of_its_months_never_fires() {
        for (expression, reason) in [
            ("0 0 0 31 2 *", "day 31 of February never occurs"),
            ("0 0 0 30 2 *", "day 30 of February never occurs"),
            ("0 0 0 30,31 FEB *", "days 30 or 31 of February never occur"),
            ("0 0 0 31 4 *", "day 31 of April never occurs"),
            (
                "0 0 0 31 4,6,9,11 *",
                "day 31 of April, June, September or November never occurs",
            ),
            ("0 0 0 30-31 2 MON", "days 30 or 31 of February never occur"),
            ("0 0 0 31 2 * 2030", "day 31 of February never occurs"),
        ] {
            assert_eq!(
                refusal(expression).as_deref(),
                Some(&*format!(
                    "{expression:?}: matches no date: {reason}, so it would never fire"
                )),
            );
        }
    }

    #[test]
    fn a_day_that_exists_in_some_year_fires() {
        for expression in [
            "0 0 0 29 2 *",      // leap years only
            "0 0 0 29 2 MON",    // a leap day on a Monday: 2016, 2044, …
            "0 0 0 29 2 * 2024", // a leap year
            "0 0 0 31 1-2 *",
            "0 0 0 30 4 *",
            "0 0 0 13 * FRI",
            "0 0 0 1 1 * 2020", // in the past, but a date
            "0 0 0 L 2 *",      // the last day of February
            "0 0 0 L 2 * 2100", // the 28th
            "0 0 0 15W * *",    // the weekday nearest the 15th
            "0 0 0 31W * *",
            "0 0 0 * 2 MON#5", // February has five Mondays in a leap year starting on a Thursday or Monday
            "0 0 0 * * FRI#L", // the last Friday
            "0 0 0 ? * 5L",
            "0 0 0 * * *",
            "@yearly",
            "@monthly",
        ] {
            assert_eq!(refusal(expression), None, "{expression}");
            // croner, which the scheduler asks for fire times, finds one too.
            let start = chrono::DateTime::UNIX_EPOCH.with_year(1).unwrap();
            let cron = parse_cron(expression).unwrap();
            let next = cron.find_next_occurrence(&start, true);
            assert!(next.is_ok(), "{expression}: {next:?}");
        }
    }

    #[test]
    fn a_combination_that_no_calendar_has_never_fires() {
        for expression in [
            "0 0 0 1 * MON#5",      // the 1st is never a fifth Monday
            "0 0 0 * 2 MON#5 2025", // a year without a leap day: Feb has four of each weekday
            "0 0 0 29 2 * 2023",    // not a leap year
            "0 0 0 29 2 * 2100",    // nor is 2100
            "0 0 0 8-14 * MON#1",   // the first Monday is within the 1st to the 7th
        ] {
            assert_eq!(
                refusal(expression).as_deref(),
                Some(&*format!(
                    "{expression:?}: matches no date: no day fits its day-of-month, month, \
                     day-of-week and year fields together, so it would never fire"
                )),
            );
        }
    }

    #[test]
    fn the_check_is_the_calendar_not_a_zone() {
        // 02:30 does not exist in Berlin on the last Sunday of March; the pattern still has dates.
        assert_eq!(refusal("0 30 2 * 3 SUN#L"), None);
        assert_eq!(refusal("0 30 2 25-31 3 SUN"), None);
    }

    #[test]
    fn zones() {
        assert_eq!(parse_zone("Europe/Berlin"), Ok(Tz::Europe__Berlin));
        assert_eq!(parse_zone("UTC"), Ok(Tz::UTC));
        assert!(parse_zone("Mars/Olympus_Mons").is_err());
    }
}
