//! Arguments of `#[scheduled(...)]` and `#[scheduler_lock(...)]`.
//!
//! Each attribute lists its keys in one table: a key is one line there (and one field), and the
//! "expected one of" message is built from the same table, so it cannot go stale. Value errors
//! are collected rather than returned, so one compile reports every wrong argument.

use std::cell::RefCell;
use std::time::Duration;

use proc_macro2::{Span, TokenStream};
use syn::parse::Parser;
use syn::spanned::Spanned;
use syn::{Expr, ExprLit, Lit, LitBool, LitInt, LitStr, Path, Token};

use crate::validate;

/// `#[scheduled(...)]`: when the job fires.
pub(crate) struct ScheduledArgs {
    /// `crate = "..."`, kept even when other arguments are wrong so the fallback expansion
    /// names the right crate.
    pub(crate) krate: Option<Path>,
    pub(crate) schedule: syn::Result<Schedule>,
}

pub(crate) struct Schedule {
    pub(crate) kind: ScheduleKind,
    pub(crate) zone: Option<LitStr>,
    pub(crate) initial_delay: Option<Duration>,
    /// `misfire_threshold = "..."`: how late a tick may start before it counts as missed.
    pub(crate) misfire_threshold: Option<Duration>,
    /// `leader = "..."`: run only while this instance leads that election.
    pub(crate) leader: Option<LitStr>,
    /// `catch_up = "..."`: run the latest tick the fleet missed, if at most this old.
    pub(crate) catch_up: Option<Duration>,
}

pub(crate) enum ScheduleKind {
    Cron(LitStr),
    FixedRate(Duration),
    FixedDelay(Duration),
}

/// `#[scheduler_lock(...)]`: the lock the job runs under.
pub(crate) struct LockArgs {
    pub(crate) krate: Option<Path>,
    pub(crate) lock: syn::Result<Lock>,
}

pub(crate) struct Lock {
    pub(crate) name: LitStr,
    pub(crate) lock_at_most_for: Option<Duration>,
    pub(crate) lock_at_least_for: Option<Duration>,
    pub(crate) keep_alive: Option<bool>,
    /// `retries = n` and `retry_backoff = "..."`.
    pub(crate) retries: Option<(u32, Option<Duration>)>,
    /// `on_interrupted = "rerun"`.
    pub(crate) rerun: bool,
}

impl ScheduledArgs {
    /// Parses the arguments; `site` (the attribute's tokens, or none for the macro's own call
    /// site) is where errors about missing keys point.
    pub(crate) fn parse(args: TokenStream, site: &TokenStream) -> Self {
        let errors = Errors::default();
        let mut cron = Once::default();
        let mut fixed_rate = Once::default();
        let mut fixed_delay = Once::default();
        let mut initial_delay = Once::default();
        let mut misfire_threshold = Once::default();
        let mut zone = Once::default();
        let mut leader = Once::default();
        let mut catch_up = Once::default();
        let mut krate = Once::default();
        #[rustfmt::skip]
        let complete = parse_keys(args, &errors, &mut [
            ("cron", &mut |k, v| cron.set(k, string(k, v).and_then(|s| validate::cron(k.name, s)))),
            ("zone", &mut |k, v| zone.set(k, string(k, v).and_then(|s| validate::zone(k.name, s)))),
            ("fixed_rate", &mut |k, v| fixed_rate.set(k, string(k, v).and_then(|s| validate::period(k.name, &s)))),
            ("fixed_delay", &mut |k, v| fixed_delay.set(k, string(k, v).and_then(|s| validate::period(k.name, &s)))),
            ("initial_delay", &mut |k, v| initial_delay.set(k, string(k, v).and_then(|s| validate::duration(k.name, &s)))),
            ("misfire_threshold", &mut |k, v| misfire_threshold.set(k, string(k, v).and_then(|s| validate::period(k.name, &s)))),
            ("leader", &mut |k, v| leader.set(k, string(k, v).and_then(|s| validate::lock_name(k.name, s)))),
            ("catch_up", &mut |k, v| catch_up.set(k, string(k, v).and_then(|s| validate::period(k.name, &s)))),
            ("crate", &mut |k, v| krate.set(k, string(k, v).and_then(crate_path))),
        ]);

        if complete {
            let kinds = [
                ("cron", &cron.seen),
                ("fixed_rate", &fixed_rate.seen),
                ("fixed_delay", &fixed_delay.seen),
            ];
            let mut given = kinds
                .iter()
                .filter_map(|(key, seen)| seen.map(|span| (key, span)));
            if given.next().is_none() {
                errors.push(syn::Error::new_spanned(
                    site,
                    "missing schedule: add one of `cron = \"0 */5 * * * *\"`, \
                     `fixed_rate = \"30s\"` or `fixed_delay = \"30s\"`",
                ));
            }
            for (key, span) in given {
                errors.push(syn::Error::new(
                    span,
                    format!(
                        "`{key}` conflicts with another schedule: give only one of `cron`, \
                         `fixed_rate` and `fixed_delay`"
                    ),
                ));
            }
            if let (Some(span), None) = (catch_up.seen, cron.seen) {
                errors.push(syn::Error::new(
                    span,
                    "`catch_up` applies only to `cron` schedules: it runs the latest missed fire \
                     time",
                ));
            }
            if let (Some(span), None) = (zone.seen, cron.seen) {
                errors.push(syn::Error::new(
                    span,
                    "`zone` applies only to `cron` schedules: fixed-rate and fixed-delay jobs \
                     run at intervals, in no time zone",
                ));
            }
        }

        let schedule = errors.finish().and_then(|()| {
            let kind = match (cron.value, fixed_rate.value, fixed_delay.value) {
                (Some(cron), _, _) => ScheduleKind::Cron(cron),
                (_, Some(period), _) => ScheduleKind::FixedRate(period),
                (_, _, Some(delay)) => ScheduleKind::FixedDelay(delay),
                (None, None, None) => {
                    return Err(syn::Error::new_spanned(site, "missing schedule"));
                }
            };
            Ok(Schedule {
                kind,
                zone: zone.value,
                initial_delay: initial_delay.value,
                misfire_threshold: misfire_threshold.value,
                leader: leader.value,
                catch_up: catch_up.value,
            })
        });
        ScheduledArgs {
            krate: krate.value,
            schedule,
        }
    }
}

impl LockArgs {
    /// Parses the arguments; `site` is where errors about missing keys point.
    pub(crate) fn parse(args: TokenStream, site: &TokenStream) -> Self {
        let errors = Errors::default();
        let mut name = Once::default();
        let mut lock_at_most_for = Once::default();
        let mut lock_at_least_for = Once::default();
        let mut keep_alive = Once::default();
        let mut retries = Once::default();
        let mut retry_backoff = Once::default();
        let mut on_interrupted = Once::default();
        let mut krate = Once::default();
        #[rustfmt::skip]
        let complete = parse_keys(args, &errors, &mut [
            ("name", &mut |k, v| name.set(k, string(k, v).and_then(|s| validate::lock_name(k.name, s)))),
            ("lock_at_most_for", &mut |k, v| lock_at_most_for.set(k, string(k, v).and_then(|s| validate::period(k.name, &s)))),
            ("lock_at_least_for", &mut |k, v| lock_at_least_for.set(k, string(k, v).and_then(|s| Ok((validate::duration(k.name, &s)?, s.span()))))),
            ("keep_alive", &mut |k, v| keep_alive.set(k, boolean(k, v))),
            ("retries", &mut |k, v| retries.set(k, integer(k, v))),
            ("retry_backoff", &mut |k, v| retry_backoff.set(k, string(k, v).and_then(|s| validate::duration(k.name, &s)))),
            ("on_interrupted", &mut |k, v| on_interrupted.set(k, string(k, v).and_then(|s| interrupted(k, &s)))),
            ("crate", &mut |k, v| krate.set(k, string(k, v).and_then(crate_path))),
        ]);

        if complete && name.seen.is_none() {
            errors.push(syn::Error::new_spanned(
                site,
                "missing `name`: the lock's name, the same on every instance \
                 (e.g. `name = \"purge_sessions\"`)",
            ));
        }
        if let (Some(span), None) = (retry_backoff.seen, retries.seen) {
            errors.push(syn::Error::new(
                span,
                "`retry_backoff` needs `retries`: how many times to run a failed run again \
                 (e.g. `retries = 3`)",
            ));
        }
        if let (Some(at_most), Some((at_least, span))) =
            (lock_at_most_for.value, lock_at_least_for.value)
            && let Err(error) =
                shedlock_rules::check_at_least(at_least, at_most, "lock_at_most_for")
        {
            errors.push(syn::Error::new(
                span,
                format!("invalid `lock_at_least_for`: {error}"),
            ));
        }

        let lock = errors.finish().and_then(|()| {
            Ok(Lock {
                name: name
                    .value
                    .ok_or_else(|| syn::Error::new_spanned(site, "missing `name`"))?,
                lock_at_most_for: lock_at_most_for.value,
                lock_at_least_for: lock_at_least_for.value.map(|(duration, _)| duration),
                keep_alive: keep_alive.value,
                retries: retries.value.map(|n| (n, retry_backoff.value)),
                rerun: on_interrupted.value.unwrap_or(false),
            })
        });
        LockArgs {
            krate: krate.value,
            lock,
        }
    }
}

/// The key being parsed: its name in the table and where the user wrote it.
#[derive(Clone, Copy)]
struct Key {
    name: &'static str,
    span: Span,
}

/// Parses a key's value (absent for a bare `key`) and records it; errors are the value's.
type KeyParser<'a> = &'a mut dyn FnMut(Key, Option<Expr>) -> syn::Result<()>;

/// Runs `key = value, ...` through the table. Returns whether every key was read and known;
/// otherwise "missing key" checks would be noise (the missing key may be the misspelt one).
fn parse_keys(
    args: TokenStream,
    errors: &Errors,
    keys: &mut [(&'static str, KeyParser<'_>)],
) -> bool {
    let mut all_known = true;
    let parser = syn::meta::parser(|meta| {
        let value = if meta.input.peek(Token![=]) {
            Some(meta.value()?.parse::<Expr>()?)
        } else if meta.input.peek(syn::token::Paren) {
            // `key(...)`: consume it so the keys after it are still checked.
            let nested: proc_macro2::Group = meta.input.parse()?;
            Some(Expr::Verbatim(nested.stream()))
        } else {
            None
        };
        match keys.iter_mut().find(|(key, _)| meta.path.is_ident(key)) {
            Some((name, parse_value)) => {
                let key = Key {
                    name,
                    span: meta.path.span(),
                };
                if let Err(error) = parse_value(key, value) {
                    errors.push(error);
                }
            }
            None => {
                all_known = false;
                let expected: Vec<_> = keys.iter().map(|(key, _)| format!("`{key}`")).collect();
                errors.push(syn::Error::new_spanned(
                    &meta.path,
                    format!(
                        "unknown argument `{}`, expected one of: {}",
                        quote::ToTokens::to_token_stream(&meta.path)
                            .to_string()
                            .replace(' ', ""),
                        expected.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    });
    match parser.parse2(args) {
        Ok(()) => all_known,
        Err(error) => {
            errors.push(error);
            false
        }
    }
}

/// A string literal value: `key = "..."`.
fn string(key: Key, value: Option<Expr>) -> syn::Result<LitStr> {
    let name = key.name;
    match value {
        Some(Expr::Lit(ExprLit {
            lit: Lit::Str(lit), ..
        })) => Ok(lit),
        Some(other) => Err(syn::Error::new_spanned(
            other,
            format!("the value of `{name}` must be a string literal: `{name} = \"...\"`"),
        )),
        None => Err(missing_value(key, "\"...\"")),
    }
}

/// A boolean literal value: `key = true`.
fn boolean(key: Key, value: Option<Expr>) -> syn::Result<bool> {
    match value {
        Some(Expr::Lit(ExprLit {
            lit: Lit::Bool(LitBool { value, .. }),
            ..
        })) => Ok(value),
        Some(other) => Err(syn::Error::new_spanned(
            other,
            format!("the value of `{}` must be `true` or `false`", key.name),
        )),
        None => Err(missing_value(key, "true")),
    }
}

/// A count: an unsuffixed or `u32` integer literal.
fn integer(key: Key, value: Option<Expr>) -> syn::Result<u32> {
    match value {
        Some(Expr::Lit(ExprLit {
            lit: Lit::Int(int), ..
        })) => parse_u32(key, &int),
        Some(other) => Err(syn::Error::new_spanned(
            other,
            format!("the value of `{}` must be a whole number", key.name),
        )),
        None => Err(missing_value(key, "3")),
    }
}

fn parse_u32(key: Key, int: &LitInt) -> syn::Result<u32> {
    int.base10_parse::<u32>().map_err(|_| {
        syn::Error::new(
            int.span(),
            format!(
                "invalid `{}`: must be a whole number from 0 to {}",
                key.name,
                u32::MAX
            ),
        )
    })
}

/// `on_interrupted`: `"skip"` (false) or `"rerun"` (true), as `OnInterrupted`.
fn interrupted(key: Key, lit: &LitStr) -> syn::Result<bool> {
    match lit.value().as_str() {
        "skip" => Ok(false),
        "rerun" => Ok(true),
        other => Err(syn::Error::new(
            lit.span(),
            format!(
                "invalid `{}`: {other:?} is neither \"skip\" (the tick is lost) nor \"rerun\" \
                 (a surviving instance runs it again once)",
                key.name
            ),
        )),
    }
}

fn missing_value(key: Key, example: &str) -> syn::Error {
    let name = key.name;
    syn::Error::new(
        key.span,
        format!("`{name}` needs a value: `{name} = {example}`"),
    )
}

/// `crate = "path::to::shedlock"`.
fn crate_path(lit: LitStr) -> syn::Result<Path> {
    lit.parse_with(Path::parse_mod_style).map_err(|_| {
        syn::Error::new(
            lit.span(),
            "the value of `crate` must be a path to the `shedlock` crate, e.g. `crate = \"shedlock\"`",
        )
    })
}

/// An argument given at most once (serde_derive's `Attr`): the second occurrence is an error.
struct Once<T> {
    /// The key's span, set even when its value was invalid, so "missing" checks stay quiet.
    seen: Option<Span>,
    value: Option<T>,
}

impl<T> Default for Once<T> {
    fn default() -> Self {
        Once {
            seen: None,
            value: None,
        }
    }
}

impl<T> Once<T> {
    fn set(&mut self, key: Key, value: syn::Result<T>) -> syn::Result<()> {
        if self.seen.is_some() {
            return Err(syn::Error::new(
                key.span,
                format!("`{}` specified more than once", key.name),
            ));
        }
        self.seen = Some(key.span);
        self.value = Some(value?);
        Ok(())
    }
}

/// Errors gathered while parsing, reported together.
#[derive(Default)]
pub(crate) struct Errors(RefCell<Option<syn::Error>>);

impl Errors {
    pub(crate) fn push(&self, error: syn::Error) {
        let mut errors = self.0.borrow_mut();
        match errors.as_mut() {
            Some(errors) => errors.combine(error),
            None => *errors = Some(error),
        }
    }

    /// The value, or `None` after recording the error.
    pub(crate) fn ok<T>(&self, result: syn::Result<T>) -> Option<T> {
        result.map_err(|error| self.push(error)).ok()
    }

    /// `Err` with every error pushed, if any.
    pub(crate) fn finish(self) -> syn::Result<()> {
        self.0.into_inner().map_or(Ok(()), Err)
    }
}
