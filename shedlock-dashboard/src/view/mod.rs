//! The HTML, written with maud: checked when the crate compiles, and every value escaped unless
//! marked otherwise (only the page's own CSS and script are).
//!
//! What a page holds is bounded by the options, never by the history: a page of locks, a few
//! runs of each, every error cut to [`SHORT_ERROR`] characters with its whole text on the
//! run's own page (written once there, never in the overview).

mod jobs;
mod locks;
mod runs;
mod timeline;

use std::time::{Duration, SystemTime};

use maud::{DOCTYPE, Markup, PreEscaped, html};
use shedlock_core::RunCursor;

use crate::DashboardOptions;
use crate::form::{JobAction, JobForm, ReleaseForm};
use crate::jobs::JobsPage;
use crate::read::{History, OneRun, PageQuery, Snapshot};

const CSS: &str = include_str!("page.css");
/// Counts every lease down each second and reloads the page every `data-refresh-ms`, unless a
/// form field has focus (someone is typing a filter).
const SCRIPT: &str = include_str!("page.js");
/// Characters of an error shown in a list; the run's page has the whole text.
pub(crate) const SHORT_ERROR: usize = 120;

fn layout(title: &str, body: Markup, refresh: Option<Duration>) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
                style { (PreEscaped(CSS)) }
                @if let Some(refresh) = refresh {
                    noscript { meta http-equiv="refresh" content=(refresh.as_secs()); }
                }
            }
            body data-refresh-ms=[refresh.map(|r| r.as_millis())] {
                (body)
                @if refresh.is_some() {
                    script { (PreEscaped(SCRIPT)) }
                }
            }
        }
    }
}

/// The listing a page belongs to, marked in the navigation.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Current {
    Jobs,
    Locks,
}

fn header(store_time: SystemTime, options: &DashboardOptions, current: Current) -> Markup {
    html! {
        header {
            h1 { a href="?" { "shedlock" } }
            nav.views {
                a #nav-jobs href="?" aria-current=[(current == Current::Jobs).then_some("page")] { "Jobs" }
                " "
                a #nav-locks href="?view=locks" aria-current=[(current == Current::Locks).then_some("page")] { "Locks" }
            }
            span.meta { "store time " (time(store_time)) }
            @if options.release_allowed() {
                span.meta.warn { "release enabled" }
            } @else {
                span.meta { "read-only" }
            }
        }
    }
}

/// The jobs view, the page the dashboard opens on.
pub(crate) fn jobs_page(page: &JobsPage, options: &DashboardOptions, query: &PageQuery) -> Markup {
    let body = html! {
        (header(page.store_time, options, Current::Jobs))
        (jobs::jobs(page, options, query))
    };
    layout("shedlock dashboard: jobs", body, Some(options.refresh))
}

/// The locks view.
pub(crate) fn page(snapshot: &Snapshot, options: &DashboardOptions, query: &PageQuery) -> Markup {
    let body = html! {
        (header(snapshot.store_time, options, Current::Locks))
        (timeline::timeline(snapshot))
        (locks::locks(snapshot, options, query))
        (locks::elections(snapshot))
        (runs::latest(snapshot, options))
    };
    layout("shedlock dashboard: locks", body, Some(options.refresh))
}

/// One lock's runs, a page of them.
pub(crate) fn history_page(history: &History, options: &DashboardOptions) -> Markup {
    let body = html! {
        (header(history.store_time, options, Current::Locks))
        (runs::history(history))
    };
    layout(&format!("runs of {}", history.name), body, None)
}

/// One run, whole.
pub(crate) fn run_page(run: &OneRun, options: &DashboardOptions) -> Markup {
    let body = html! {
        (header(run.store_time, options, Current::Locks))
        (runs::one_run(run))
    };
    layout(&format!("a run of {}", run.name), body, None)
}

/// A page with one message and a way back.
pub(crate) fn message(title: &str, text: &str) -> Markup {
    let body = html! {
        h1 { (title) }
        p #message { (text) }
        p { a href="?" { "Back to the dashboard" } }
    };
    layout(title, body, None)
}

/// The release's confirmation: what will be released, and the token.
pub(crate) fn confirm_release(form: &ReleaseForm) -> Markup {
    let body = html! {
        h1 { "Release this lock?" }
        p #confirm-message {
            "Release " code { (form.name) } " held by " code { (form.holder) }
            " (token " (form.token) ")? Its lease ends now; a job still running under it is not \
             stopped, and another instance may start it."
        }
        form method="post" {
            input type="hidden" name="name" value=(form.name);
            input type="hidden" name="holder" value=(form.holder);
            input type="hidden" name="token" value=(form.token);
            label { "Release token " input #release-token type="password" name="release_token" autocomplete="off" required; }
            " "
            button #confirm-release type="submit" { "Release" }
            " "
            a href="?view=locks" { "Cancel" }
        }
    };
    layout("Release this lock?", body, None)
}

/// A job switch's confirmation: what will be done to which job, and the token.
pub(crate) fn confirm_job(form: &JobForm) -> Markup {
    let (title, what) = match form.action {
        JobAction::Pause => (
            "Pause this job?",
            "across the fleet? No instance starts a tick of it from its next poll on, whatever \
             restarts, until it is resumed; a run under way is not stopped.",
        ),
        JobAction::Resume => (
            "Resume this job?",
            "across the fleet? Its instances start its ticks again from their next poll.",
        ),
        JobAction::RunNow => (
            "Run this job now?",
            "now, once, on one of the instances carrying it (the first to poll takes it)? It \
             runs under its lock as a tick would.",
        ),
    };
    let body = html! {
        h1 { (title) }
        p #confirm-message { (form.action.label()) " " code { (form.job) } " " (what) }
        form method="post" {
            input type="hidden" name="action" value=(form.action.as_str());
            input type="hidden" name="job" value=(form.job);
            label { "Release token " input #release-token type="password" name="release_token" autocomplete="off" required; }
            " "
            button #confirm-job type="submit" { (form.action.label()) }
            " "
            a href="?" { "Cancel" }
        }
    };
    layout(title, body, None)
}

/// A store time for people: RFC 3339 to the second, UTC.
pub(crate) fn time(at: SystemTime) -> String {
    humantime::format_rfc3339_seconds(at).to_string()
}

/// A duration for people, to the millisecond.
pub(crate) fn duration(length: Duration) -> String {
    let millis = u64::try_from(length.as_millis()).unwrap_or(u64::MAX);
    humantime::format_duration(Duration::from_millis(millis)).to_string()
}

/// An error as a list shows it: on one line, at most [`SHORT_ERROR`] characters; whether it
/// was cut.
pub(crate) fn short_error(error: &str) -> (String, bool) {
    let mut short = String::new();
    let mut cut = false;
    for (count, word) in error.split_whitespace().enumerate() {
        if count > 0 {
            short.push(' ');
        }
        short.push_str(word);
        if short.chars().count() > SHORT_ERROR {
            cut = true;
            break;
        }
    }
    if cut {
        short = short.chars().take(SHORT_ERROR - 1).collect();
        short.push('…');
    }
    (short, cut)
}

/// The link to one lock's runs, older than `before` when given.
pub(crate) fn history_link(lock: &str, before: Option<&RunCursor>) -> String {
    match before {
        Some(before) => format!(
            "?lock={}&before={}",
            encode(lock),
            encode(&before.to_string())
        ),
        None => format!("?lock={}", encode(lock)),
    }
}

/// The link to one run's page (its cursor names its lock).
pub(crate) fn run_link(run: &RunCursor) -> String {
    format!("?run={}", encode(&run.to_string()))
}

/// A query string value, percent-encoded.
pub(crate) fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_cut_to_one_short_line() {
        assert_eq!(
            short_error("upstream\n  said 503"),
            ("upstream said 503".to_owned(), false)
        );
        let long = "é".repeat(2000);
        let (short, cut) = short_error(&long);
        assert!(cut);
        assert_eq!(short.chars().count(), SHORT_ERROR);
        assert!(short.ends_with('…'));
        let words = "word ".repeat(400);
        let (short, cut) = short_error(&words);
        assert!(cut && short.chars().count() == SHORT_ERROR);
    }

    #[test]
    fn links_encode_their_values() {
        let at: RunCursor = "1700000000000000000-7-1-a b&c".parse().unwrap();
        assert_eq!(run_link(&at), "?run=1700000000000000000-7-1-a%20b%26c");
        assert_eq!(
            history_link("a b&c", Some(&at)),
            "?lock=a%20b%26c&before=1700000000000000000-7-1-a%20b%26c"
        );
    }
}
