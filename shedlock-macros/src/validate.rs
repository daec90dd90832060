//! Argument values checked with `shedlock-rules`, the functions the runtime calls on the same
//! values, so a mistake is a compile error on the literal instead of an error at startup, and
//! it reads as the runtime's would: "invalid `key`: what is wrong".

use std::fmt::Display;
use std::time::Duration;

use syn::LitStr;

/// The error of the argument `key`, on its literal.
fn invalid(key: &str, lit: &LitStr, error: impl Display) -> syn::Error {
    syn::Error::new(lit.span(), format!("invalid `{key}`: {error}"))
}

/// A cron expression ([`shedlock_rules::parse_cron`], as `Schedule::cron`).
pub(crate) fn cron(key: &str, lit: LitStr) -> syn::Result<LitStr> {
    match shedlock_rules::parse_cron(&lit.value()) {
        Ok(_) => Ok(lit),
        Err(error) => Err(invalid(key, &lit, error)),
    }
}

/// An IANA time zone name ([`shedlock_rules::parse_zone`], as `Schedule::in_zone`).
pub(crate) fn zone(key: &str, lit: LitStr) -> syn::Result<LitStr> {
    match shedlock_rules::parse_zone(&lit.value()) {
        Ok(_) => Ok(lit),
        Err(error) => Err(invalid(key, &lit, error)),
    }
}

/// A lock or election name ([`shedlock_rules::check_lock_name`], as `JobLock::new` and
/// `Job::leader_only`).
pub(crate) fn lock_name(key: &str, lit: LitStr) -> syn::Result<LitStr> {
    match shedlock_rules::check_lock_name(&lit.value()) {
        Ok(()) => Ok(lit),
        Err(error) => Err(invalid(key, &lit, error)),
    }
}

/// A duration ([`shedlock_rules::parse_duration`]: humantime or ISO-8601, at most 100 years).
pub(crate) fn duration(key: &str, lit: &LitStr) -> syn::Result<Duration> {
    shedlock_rules::parse_duration(&lit.value()).map_err(|error| invalid(key, lit, error))
}

/// A duration that must be greater than zero: a lease, a period, a threshold
/// ([`shedlock_rules::check_period`], as `Schedule::fixed_rate` and `JobLock::lock_at_most_for`).
pub(crate) fn period(key: &str, lit: &LitStr) -> syn::Result<Duration> {
    shedlock_rules::check_period(duration(key, lit)?).map_err(|error| invalid(key, lit, error))
}

/// One table of values, each checked through the attribute parser and through the runtime's
/// public API (the facade, the serde helper of `scheduler.toml`): both must accept it, or both
/// refuse it with the same message. The table names its expectation, so "both accept
/// everything" cannot pass.
#[cfg(test)]
mod one_set_of_rules {
    use std::time::Duration;

    use proc_macro2::TokenStream;
    use quote::quote;
    use serde::de::IntoDeserializer;
    use shedlock::{Error, Job, JobLock, Schedule};

    use crate::attr::{LockArgs, ScheduledArgs};

    const OK: bool = true;
    const ERR: bool = false;

    /// `(key, value, accepted)`.
    #[rustfmt::skip]
    fn cases() -> Vec<(&'static str, String, bool)> {
        let mut cases = Vec::new();
        let durations: &[(&str, [bool; 5])] = &[
            // value:                    fixed_rate, initial_delay, misfire_threshold, lock_at_most_for, lock_at_least_for
            ("10m",                       [OK, OK, OK, OK, OK]),
            ("1h 30m",                    [OK, OK, OK, OK, OK]),
            ("500ms",                     [OK, OK, OK, OK, OK]),
            (" 2days ",                   [OK, OK, OK, OK, OK]),
            ("PT5M",                      [OK, OK, OK, OK, OK]),
            ("P1DT2H",                    [OK, OK, OK, OK, OK]),
            ("PT0.5S",                    [OK, OK, OK, OK, OK]),
            ("pt0,25s",                   [OK, OK, OK, OK, OK]),
            ("PT1.000000001S",            [OK, OK, OK, OK, OK]),
            ("P2W",                       [OK, OK, OK, OK, OK]),
            ("100y",                      [OK, OK, OK, OK, OK]), // MAX_DURATION
            ("P36525D",                   [OK, OK, OK, OK, OK]), // MAX_DURATION
            ("0s",                        [ERR, OK, ERR, ERR, OK]),
            ("PT0S",                      [ERR, OK, ERR, ERR, OK]),
            ("100y 1ns",                  [ERR, ERR, ERR, ERR, ERR]), // MAX_DURATION + 1 ns
            ("PT3155760000.000000001S",   [ERR, ERR, ERR, ERR, ERR]),
            ("P36526D",                   [ERR, ERR, ERR, ERR, ERR]),
            ("99999999999999999999999s",  [ERR, ERR, ERR, ERR, ERR]), // overflows u64
            ("P99999999999999999999D",    [ERR, ERR, ERR, ERR, ERR]),
            ("P999999999999999D",         [ERR, ERR, ERR, ERR, ERR]), // overflows seconds
            ("P1M",                       [ERR, ERR, ERR, ERR, ERR]),
            ("P1Y",                       [ERR, ERR, ERR, ERR, ERR]),
            ("P",                         [ERR, ERR, ERR, ERR, ERR]),
            ("PT",                        [ERR, ERR, ERR, ERR, ERR]),
            ("PT10",                      [ERR, ERR, ERR, ERR, ERR]),
            ("PT1M1H",                    [ERR, ERR, ERR, ERR, ERR]),
            ("PT1.5M",                    [ERR, ERR, ERR, ERR, ERR]),
            ("PT0.1234567891S",           [ERR, ERR, ERR, ERR, ERR]),
            ("ten minutes",               [ERR, ERR, ERR, ERR, ERR]),
            ("10",                        [ERR, ERR, ERR, ERR, ERR]),
            ("-5s",                       [ERR, ERR, ERR, ERR, ERR]),
            ("",                          [ERR, ERR, ERR, ERR, ERR]),
        ];
        let keys = ["fixed_rate", "initial_delay", "misfire_threshold", "lock_at_most_for", "lock_at_least_for"];
        for (value, accepted) in durations {
            for (key, accepted) in keys.iter().zip(accepted) {
                cases.push((*key, (*value).to_owned(), *accepted));
            }
            // fixed_delay follows fixed_rate's rule.
            cases.push(("fixed_delay", (*value).to_owned(), accepted[0]));
        }
        let names = [
            ("purge_sessions".to_owned(), OK),
            ("x".repeat(64), OK),
            ("ünïcode ✓".to_owned(), OK),
            (String::new(), ERR),
            ("x".repeat(65), ERR),
            ("ü".repeat(33), ERR), // 66 bytes
            ("a\nb".to_owned(), ERR),
            ("tab\there".to_owned(), ERR),
        ];
        for (name, accepted) in names {
            cases.push(("name", name.clone(), accepted));
            cases.push(("leader", name, accepted));
        }
        let crons = [
            ("0 */5 * * * *", OK),
            ("*/10 * * * * *", OK),
            ("0 0 12 * * MON-FRI 2030", OK), // the optional year
            ("0 30 2 L * *", OK),
            ("0 0 0 29 2 *", OK),            // leap years
            ("0 0 0 31 2 *", ERR),           // matches no date
            ("0 0 0 30 2 * 2030", ERR),
            ("0 0 0 31 4,6 *", ERR),
            ("0 0 0 1 * MON#5", ERR),
            ("*/5 * * * *", ERR), // 5 fields: seconds are required
            ("0 61 * * * *", ERR),
            ("0 0 0 0 * * * *", ERR), // 8 fields
            ("0 0 12 * * FUNDAY", ERR),
            ("", ERR),
        ];
        cases.extend(crons.map(|(cron, accepted)| ("cron", cron.to_owned(), accepted)));
        let zones = [("Europe/Berlin", OK), ("UTC", OK), ("Mars/Olympus_Mons", ERR), ("", ERR)];
        cases.extend(zones.map(|(zone, accepted)| ("zone", zone.to_owned(), accepted)));
        cases
    }

    /// The value through `#[scheduled(...)]` / `#[scheduler_lock(...)]`.
    fn through_the_macro(key: &str, value: &str) -> Result<(), String> {
        let none = TokenStream::new();
        let scheduled = |args: TokenStream| ScheduledArgs::parse(args, &none).schedule.map(drop);
        let lock = |args: TokenStream| LockArgs::parse(args, &none).lock.map(drop);
        let result = match key {
            "cron" => scheduled(quote!(cron = #value)),
            "zone" => scheduled(quote!(cron = "0 * * * * *", zone = #value)),
            "fixed_rate" => scheduled(quote!(fixed_rate = #value)),
            "fixed_delay" => scheduled(quote!(fixed_delay = #value)),
            "initial_delay" => scheduled(quote!(fixed_rate = "1s", initial_delay = #value)),
            "misfire_threshold" => scheduled(quote!(fixed_rate = "1s", misfire_threshold = #value)),
            "leader" => scheduled(quote!(fixed_rate = "1s", leader = #value)),
            "name" => lock(quote!(name = #value)),
            "lock_at_most_for" => lock(quote!(name = "a", lock_at_most_for = #value)),
            "lock_at_least_for" => {
                lock(quote!(name = "a", lock_at_most_for = "100y", lock_at_least_for = #value))
            }
            _ => unreachable!("{key}"),
        };
        result.map_err(|error| error.to_string())
    }

    /// The value through the runtime's public API, as a program or `scheduler.toml` gives it.
    fn through_the_runtime(key: &'static str, value: &str) -> Result<(), String> {
        let duration = || -> Result<Duration, Error> {
            let parsed = shedlock::parse_duration(value);
            // `scheduler.toml` reads durations with the serde helper: the same answer.
            let from_config = shedlock::serde_duration::deserialize(value.into_deserializer()
                as serde::de::value::StrDeserializer<'_, serde::de::value::Error>);
            assert_eq!(
                parsed.as_ref().map_err(ToString::to_string),
                from_config.as_ref().map_err(ToString::to_string),
                "{value:?}: parse_duration and serde_duration disagree"
            );
            parsed.map_err(|error| Error::invalid_config(key, error.to_string()))
        };
        let every_second = || Schedule::fixed_rate(Duration::from_secs(1));
        let result = match key {
            "cron" => Schedule::cron(value).map(drop),
            "zone" => Schedule::cron("0 * * * * *")
                .and_then(|cron| cron.in_zone(value))
                .map(drop),
            "fixed_rate" => duration().and_then(Schedule::fixed_rate).map(drop),
            "fixed_delay" => duration().and_then(Schedule::fixed_delay).map(drop),
            "initial_delay" => duration()
                .and_then(|delay| every_second().map(|s| drop(s.with_initial_delay(delay)))),
            "misfire_threshold" => duration()
                .and_then(|threshold| every_second()?.with_misfire_threshold(threshold).map(drop)),
            "leader" => every_second()
                .and_then(|schedule| {
                    Job::<()>::new("job", schedule, |()| async {}).leader_only(value.to_owned())
                })
                .map(drop),
            "name" => JobLock::new(value.to_owned()).map(drop),
            "lock_at_most_for" => duration()
                .and_then(|at_most| JobLock::new("a")?.lock_at_most_for(at_most))
                .map(drop),
            "lock_at_least_for" => duration()
                .and_then(|at_least| {
                    JobLock::new("a")?
                        .lock_at_most_for(shedlock::MAX_DURATION)?
                        .lock_at_least_for(at_least)
                })
                .map(drop),
            _ => unreachable!("{key}"),
        };
        result.map_err(|error| error.to_string())
    }

    #[test]
    fn the_macro_and_the_runtime_give_the_same_answer() {
        let cases = cases();
        for (key, value, accepted) in &cases {
            let by_macro = through_the_macro(key, value);
            let by_runtime = through_the_runtime(key, value);
            assert_eq!(
                by_macro, by_runtime,
                "`{key} = {value:?}`: the macro and the runtime disagree"
            );
            assert_eq!(
                by_macro.is_ok(),
                *accepted,
                "`{key} = {value:?}`: {by_macro:?}"
            );
        }
        assert!(cases.len() > 200, "{}", cases.len());
    }

    /// The structure that makes the table hold: this crate depends on no parser of its own
    /// (croner, humantime, chrono-tz), so every cron expression, duration and zone it checks goes
    /// through `shedlock-rules`, and it defines no limit of its own.
    #[test]
    fn the_macros_restate_no_rule() {
        let manifest = include_str!("../Cargo.toml");
        let dependencies = manifest
            .split("[dependencies]")
            .nth(1)
            .and_then(|rest| rest.split("\n[").next())
            .expect("a [dependencies] table");
        let names: Vec<&str> = dependencies
            .lines()
            .filter_map(|line| line.split(['.', ' ', '=']).next())
            .filter(|name| !name.is_empty() && !name.starts_with('#'))
            .collect();
        assert_eq!(names, ["shedlock-rules", "proc-macro2", "quote", "syn"]);
        for source in [
            include_str!("attr.rs"),
            include_str!("expand.rs"),
            include_str!("lib.rs"),
            include_str!("signature.rs"),
        ] {
            for rule in [
                "const MAX_",
                "CronParser",
                "humantime::",
                "chrono_tz::",
                "croner::",
                "3_155_760_000",
                "= 64",
            ] {
                assert!(!source.contains(rule), "`{rule}` in the macro crate");
            }
        }
    }
}
