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
