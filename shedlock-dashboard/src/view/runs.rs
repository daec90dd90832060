//! Runs: the latest of each lock of the page, one lock's runs a page at a time, and one run
//! with its whole error.

use std::time::SystemTime;

use maud::{Markup, html};
use shedlock_core::{LockRecord, RunOutcome, RunRecord};

use super::{duration, history_link, run_link, short_error, time};
use crate::DashboardOptions;
use crate::read::{History, OneRun, Snapshot, shown_outcome};

/// Per lock of the page, its latest runs, and a link to the rest.
pub(super) fn latest(snapshot: &Snapshot, options: &DashboardOptions) -> Markup {
    let Some(locks) = &snapshot.runs else {
        return html! { section #runs { h2 { "Runs" } p.meta { "This store keeps no run records." } } };
    };
    let shown = options.runs_per_job;
    html! {
        section #runs {
            h2 { "Latest runs" }
            @if locks.values().all(|lock| lock.runs.is_empty()) {
                p.meta { "No runs recorded for the locks of this page." }
            }
            @for (name, lock) in locks.iter().filter(|(_, lock)| !lock.runs.is_empty()) {
                h3 {
                    code { (name) }
                    @for job in other_jobs(name, &lock.runs) { " job " code { (job) } }
                    @if !snapshot.locks.iter().any(|listed| listed.name == *name) {
                        " " span.meta.unlisted { "(no lock record)" }
                    }
                    @if lock.more || lock.runs.len() > shown {
                        " " a.all-runs href=(history_link(name, None)) { "all runs →" }
                    }
                }
                (table(&lock.runs[..lock.runs.len().min(shown)], name, |run| snapshot.outcome(run)))
            }
        }
    }
}

/// The jobs recorded under `lock` that are not named as it is (once each).
fn other_jobs<'a>(lock: &str, runs: &'a [RunRecord]) -> Vec<&'a str> {
    let mut jobs: Vec<&str> = runs
        .iter()
        .map(|run| run.job.as_str())
        .filter(|job| *job != lock)
        .collect();
    jobs.sort_unstable();
    jobs.dedup();
    jobs
}

fn table(runs: &[RunRecord], lock: &str, outcome: impl Fn(&RunRecord) -> RunOutcome) -> Markup {
    html! {
        table.runs data-lock=(lock) {
            thead { tr {
                th { "Started" } th { "Outcome" } th { "Duration" } th { "Instance" }
                th { "Attempt" } th { "Token" } th { "Error" }
            } }
            tbody {
                @for run in runs {
                    @let outcome = outcome(run);
                    @let link = run_link(&run.cursor());
                    tr.run.(outcome.as_str()) data-lock=(run.lock) {
                        td.started { a href=(link) { (time(run.started_at)) } }
                        td.outcome { (outcome.as_str()) }
                        td { @if let Some(length) = run.duration() { (duration(length)) } @else { "–" } }
                        td.holder { (run.holder) }
                        td { (run.attempt) }
                        td { (run.fencing_token) }
                        td.error {
                            @if let Some(error) = &run.error {
                                @let (short, cut) = short_error(error);
                                (short)
                                @if cut { " " a.whole href=(link) { "whole text" } }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// One lock's runs, a page at a time.
pub(crate) fn history(history: &History) -> Markup {
    let (lock, now) = (history.lock.as_ref(), history.store_time);
    html! {
        section #history {
            h2 { "Runs of " code { (history.name) } }
            (lock_line(lock))
            @if history.runs.is_empty() {
                p.meta { @if history.paged { "No older runs." } @else { "No runs recorded." } }
            } @else {
                (table(&history.runs, &history.name, |run| shown_outcome(run, lock, now)))
            }
            nav {
                @if history.paged { a #newest href=(history_link(&history.name, None)) { "← newest" } " " }
                @if let Some(older) = &history.older {
                    a #older href=(history_link(&history.name, Some(older))) { "older →" }
                }
                " " a href="?view=locks" { "all locks" }
            }
        }
    }
}

fn lock_line(lock: Option<&LockRecord>) -> Markup {
    html! {
        p.meta {
            @match lock {
                Some(lock) if lock.held => {
                    "held by " code { (lock.holder) } " with token " (lock.fencing_token)
                    " until " (time(lock.lock_until))
                }
                Some(lock) => { "free; last held by " code { (lock.holder) } " (token " (lock.fencing_token) ")" }
                None => { "no such lock in the store" }
            }
        }
    }
}

/// One run, with its whole error.
pub(crate) fn one_run(one: &OneRun) -> Markup {
    let lock = one.lock.as_ref();
    html! {
        section #run {
            h2 { "A run of " code { (one.name) } }
            (lock_line(lock))
            @match &one.run {
                None => { p #message { "The store keeps no such run (it may have been trimmed)." } }
                Some(run) => {
                    @let outcome = shown_outcome(run, lock, one.store_time);
                    dl.run.(outcome.as_str()) {
                        dt { "Job" } dd { code { (run.job) } }
                        dt { "Outcome" } dd.outcome { (outcome.as_str()) }
                        dt { "Instance" } dd.holder { (run.holder) }
                        dt { "Attempt" } dd { (run.attempt) }
                        dt { "Token" } dd { (run.fencing_token) }
                        dt { "Tick" } dd { (optional(run.tick)) }
                        dt { "Started" } dd { (time(run.started_at)) }
                        dt { "Finished" } dd { (optional(run.finished_at)) }
                        dt { "Duration" } dd { @if let Some(length) = run.duration() { (duration(length)) } @else { "–" } }
                        @if let Some(until) = run.alive_until {
                            dt { "Alive until" } dd { (time(until)) }
                        }
                    }
                    @if let Some(error) = &run.error {
                        h3 { "Error" }
                        pre #error { (error) }
                    }
                }
            }
            nav {
                a href=(history_link(&one.name, None)) { "← runs of " (one.name) }
                " " a href="?view=locks" { "all locks" }
            }
        }
    }
}

fn optional(at: Option<SystemTime>) -> String {
    at.map_or_else(|| "–".to_owned(), time)
}
