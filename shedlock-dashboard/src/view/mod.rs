//! The HTML, written with maud: checked when the crate compiles, and every value escaped unless
//! marked otherwise (only the page's own CSS and script are).

mod locks;
mod runs;
mod timeline;

use std::time::{Duration, SystemTime};

use maud::{DOCTYPE, Markup, PreEscaped, html};

use crate::DashboardOptions;
use crate::form::ReleaseForm;
use crate::read::{PageQuery, Snapshot};

const CSS: &str = include_str!("page.css");
/// Counts every lease down each second and reloads the page every `data-refresh-ms`, unless a
/// form field has focus (someone is typing a filter).
const SCRIPT: &str = include_str!("page.js");

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

/// The page.
pub(crate) fn page(snapshot: &Snapshot, options: &DashboardOptions, query: &PageQuery) -> Markup {
    let body = html! {
        header {
            h1 { "shedlock" }
            span.meta { "store time " (time(snapshot.store_time)) }
            @if options.release_allowed() {
                span.meta.warn { "release enabled" }
            } @else {
                span.meta { "read-only" }
            }
        }
        (timeline::timeline(snapshot))
        (locks::locks(snapshot, options, query))
        (locks::elections(snapshot))
        (runs::runs(snapshot, options.runs_per_job))
    };
    layout("shedlock dashboard", body, Some(options.refresh))
}

/// A page with one message and a way back.
pub(crate) fn message(title: &str, text: &str) -> Markup {
    let body = html! {
        h1 { (title) }
        p #message { (text) }
        p { a href="" { "Back to the dashboard" } }
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
            a href="" { "Cancel" }
        }
    };
    layout("Release this lock?", body, None)
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
