//! Per job, its recent runs.

use maud::{Markup, html};

use super::{duration, time};
use crate::read::Snapshot;

pub(super) fn runs(snapshot: &Snapshot, per_job: usize) -> Markup {
    let Some(jobs) = &snapshot.runs else {
        return html! { section #runs { h2 { "Runs" } p.meta { "This store keeps no run records." } } };
    };
    html! {
        section #runs {
            h2 { "Recent runs" }
            @if jobs.is_empty() { p.meta { "No runs recorded." } }
            @for (job, runs) in jobs {
                h3 { code { (job) } }
                table.runs data-job=(job) {
                    thead { tr {
                        th { "Started" } th { "Outcome" } th { "Duration" } th { "Instance" }
                        th { "Attempt" } th { "Token" } th { "Error" }
                    } }
                    tbody {
                        @for run in runs.iter().take(per_job) {
                            @let outcome = snapshot.outcome(run);
                            tr.run.(outcome.as_str()) data-lock=(run.lock) {
                                td { (time(run.started_at)) }
                                td.outcome { (outcome.as_str()) }
                                td { @if let Some(length) = run.duration() { (duration(length)) } @else { "–" } }
                                td.holder { (run.holder) }
                                td { (run.attempt) }
                                td { (run.fencing_token) }
                                td.error { @if let Some(error) = &run.error { (error) } }
                            }
                        }
                    }
                }
            }
        }
    }
}
