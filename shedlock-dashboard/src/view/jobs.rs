//! The jobs table (filtered, paged): per job its schedule, next fire time, carriers, switches,
//! last run and failures of the day, and the buttons that switch it.

use maud::{Markup, html};
use shedlock_core::{FleetJob, JobDefinition};

use super::{duration, encode, history_link, run_link, time};
use crate::DashboardOptions;
use crate::form::JobAction;
use crate::jobs::{FAILURES_READ, JobRow, JobsPage};
use crate::read::PageQuery;

/// Carriers named in a row; the others are counted.
const NAMED_CARRIERS: usize = 3;
/// Carriers whose definition differs from the most common one, named with theirs.
const NAMED_DIFFERENT: usize = 3;

pub(super) fn jobs(page: &JobsPage, options: &DashboardOptions, query: &PageQuery) -> Markup {
    html! {
        section #jobs {
            h2 { "Jobs" }
            @match &page.jobs {
                None => {
                    p #no-board.meta {
                        "This lock store keeps no board of the fleet's jobs: its jobs cannot be \
                         listed, paused or run from here. Its locks and runs are in "
                        a href="?view=locks" { "Locks" } "."
                    }
                }
                Some(jobs) => {
                    form method="get" {
                        label { "Name starts with " input #job-prefix type="search" name="prefix" value=(query.prefix); }
                        " " button type="submit" { "Filter" }
                        @if !query.prefix.is_empty() || !query.after.is_empty() {
                            " " a href="?" { "All jobs" }
                        }
                    }
                    @if jobs.is_empty() {
                        p.meta {
                            @if page.matching == 0 {
                                "No jobs: no live instance publishes its jobs to this store, and \
                                 none is paused."
                            } @else { "No more jobs." }
                        }
                    } @else {
                        p.meta { (page.matching) " jobs" }
                        (table(jobs, page, options))
                    }
                    @if let Some(last) = &page.next_page {
                        nav { a #next-jobs href=(next_page(&query.prefix, last)) { "Next " (options.page_size) " →" } }
                    }
                }
            }
        }
    }
}

fn table(jobs: &[JobRow], page: &JobsPage, options: &DashboardOptions) -> Markup {
    html! {
        table.jobs {
            thead { tr {
                th { "Name" } th { "Schedule" } th { "Next fire" } th { "Carriers" }
                th { "Paused" } th { "Run now" }
                @if page.runs_kept { th { "Last run" } th { "Failures (24 h)" } }
                th { "Lock" }
                @if options.release_allowed() { th {} }
            } }
            tbody {
                @for row in jobs {
                    (job_row(row, page, options))
                }
            }
        }
    }
}

fn job_row(row: &JobRow, page: &JobsPage, options: &DashboardOptions) -> Markup {
    let job = &row.job;
    let definition = job.definition();
    let lock = definition.and_then(|definition| definition.lock.as_deref());
    html! {
        tr.job.paused[job.paused.is_some()] data-name=(job.name) {
            td.name { (job.name) }
            td.schedule {
                @match definition {
                    Some(definition) => { (schedule(definition)) }
                    None => { span.meta { "no carrier" } }
                }
            }
            td.next-fire { @match row.next_fire { Some(at) => { (time(at)) } None => { "–" } } }
            td.carriers { (carriers(job)) }
            td.paused {
                @match &job.paused {
                    Some(paused) => {
                        span.state.paused { "paused" } " by " span.by { (paused.by) }
                        " since " (time(paused.at))
                    }
                    None => { "–" }
                }
            }
            td.run-request {
                @match &job.run_request {
                    Some(request) => {
                        @match &request.taken_by {
                            Some(taken) => { "taken by " span.by { (taken) } }
                            None => { span.state.waiting { "waiting" } }
                        }
                        br;
                        span.meta { "asked by " (request.by) " at " (time(request.at)) }
                    }
                    None => { "–" }
                }
            }
            @if page.runs_kept {
                td.last-run {
                    @match &row.last_run {
                        Some(run) => {
                            a.(run.outcome.as_str()) href=(run_link(&run.cursor())) title=(time(run.started_at)) {
                                (run.outcome.as_str())
                            }
                            @if let Some(length) = run.duration() { " " span.duration { (duration(length)) } }
                        }
                        None => { "–" }
                    }
                }
                td.failures {
                    @match row.failures {
                        Some((count, cut)) => {
                            @if cut {
                                span title=(format!("among its latest {FAILURES_READ} runs of the day")) { (count) "+" }
                            } @else { (count) }
                        }
                        None => { "–" }
                    }
                }
            }
            td.lock {
                @match lock {
                    Some(lock) => {
                        code { (lock) } br;
                        a.runs href=(history_link(lock, None)) { "runs" } " · "
                        a.locks href=(format!("?view=locks&prefix={}", encode(lock))) { "lock" }
                    }
                    None => { span.meta { "unlocked" } }
                }
            }
            @if options.release_allowed() {
                td.actions {
                    @if job.paused.is_some() { (button(&job.name, JobAction::Resume)) }
                    @else { (button(&job.name, JobAction::Pause)) }
                    " " (button(&job.name, JobAction::RunNow))
                }
            }
        }
    }
}

fn schedule(definition: &JobDefinition) -> Markup {
    html! {
        code { (definition.schedule) }
        @if let Some(zone) = &definition.zone { " " span.meta.zone { (zone) } }
    }
}

/// How many carry it, a few of their names, and those that run it otherwise (a rolling
/// deploy), with how they run it.
fn carriers(job: &FleetJob) -> Markup {
    let count = job.carriers.len();
    let names: Vec<&str> = job
        .carriers
        .iter()
        .take(NAMED_CARRIERS)
        .map(|carrier| carrier.instance.as_str())
        .collect();
    let majority = job.definition();
    let different: Vec<_> = job
        .carriers
        .iter()
        .filter(|carrier| Some(&carrier.definition) != majority)
        .collect();
    html! {
        span.count { (count) } " "
        @if count > 0 {
            span.meta.instances { (names.join(", ")) @if count > names.len() { ", +" (count - names.len()) } }
        } @else {
            span.meta { "none alive" }
        }
        @if job.definitions_differ() {
            div.differ {
                span.warn { (different.len()) " run it otherwise:" }
                @for carrier in different.iter().take(NAMED_DIFFERENT) {
                    br; span.by { (carrier.instance) } " " (schedule(&carrier.definition))
                    @if carrier.definition.lock.as_deref() != majority.and_then(|d| d.lock.as_deref()) {
                        " lock " code { (carrier.definition.lock.as_deref().unwrap_or("none")) }
                    }
                }
                @if different.len() > NAMED_DIFFERENT { br; "+" (different.len() - NAMED_DIFFERENT) " more" }
            }
        }
    }
}

fn button(job: &str, action: JobAction) -> Markup {
    html! {
        form.inline method="post" {
            input type="hidden" name="action" value=(action.as_str());
            input type="hidden" name="job" value=(job);
            button.(action.as_str()) type="submit" { (action.label()) "…" }
        }
    }
}

/// The next page's query string, its values percent-encoded.
fn next_page(prefix: &str, after: &str) -> String {
    format!("?prefix={}&after={}", encode(prefix), encode(after))
}
