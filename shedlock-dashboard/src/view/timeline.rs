//! The last hour (or the span configured) as an SVG picture, drawn here so the page needs no script to show it: a row
//! per job, a bar per run from its start to its end, coloured by the instance that ran it;
//! failed runs marked red, interrupted ones orange.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use maud::{Markup, html};
use shedlock_core::{RunOutcome, RunRecord};

use super::{duration, time};
use crate::read::Snapshot;

const WIDTH: f64 = 1000.0;
const LABEL: f64 = 170.0;
const ROW: f64 = 26.0;
const AXIS: f64 = 22.0;
/// Instance colours, in the order instances first appear (then again from the start).
const PALETTE: [&str; 8] = [
    "#3b82f6", "#10b981", "#8b5cf6", "#f59e0b", "#06b6d4", "#ec4899", "#84cc16", "#64748b",
];
const FAILED: &str = "#c62828";
const INTERRUPTED: &str = "#e07b00";

pub(super) fn timeline(snapshot: &Snapshot) -> Markup {
    let Some(jobs) = &snapshot.runs else {
        return html! {};
    };
    let end = snapshot.store_time;
    let start = end.checked_sub(snapshot.timeline).unwrap_or(end);
    let span = snapshot.timeline.as_secs_f64();
    let x = |at: SystemTime| {
        let offset = at
            .duration_since(start)
            .unwrap_or(Duration::ZERO)
            .as_secs_f64();
        LABEL + (WIDTH - LABEL) * (offset / span).min(1.0)
    };
    let mut instances: BTreeMap<&str, &str> = BTreeMap::new();
    for run in jobs.values().flatten() {
        let next = PALETTE[instances.len() % PALETTE.len()];
        instances.entry(run.holder.as_str()).or_insert(next);
    }
    let height = AXIS + ROW * jobs.len().max(1) as f64;
    let ticks = (0..=6).map(|i| (i, start + snapshot.timeline / 6 * i));
    html! {
        section #timeline {
            h2 { "Last " (duration(snapshot.timeline)) }
            svg xmlns="http://www.w3.org/2000/svg" viewBox=(format!("0 0 {WIDTH} {height}")) role="img" aria-label="Runs of the last hour per job" {
                @for (i, at) in ticks {
                    line x1=(x(at)) x2=(x(at)) y1="0" y2=(height) stroke="#e3e6eb" {}
                    text x=(x(at)) y="14" font-size="11" fill="#5b6475" text-anchor=(if i == 0 { "start" } else if i == 6 { "end" } else { "middle" }) {
                        (minutes_ago(end, at))
                    }
                }
                @for (row, (job, runs)) in jobs.iter().enumerate() {
                    @let y = AXIS + ROW * row as f64;
                    text x="4" y=(y + ROW * 0.65) font-size="12" font-family="monospace" { (job) }
                    @for run in runs.iter().filter(|run| run.finished_at.unwrap_or(end) >= start) {
                        @let outcome = snapshot.outcome(run);
                        @let (from, to) = (x(run.started_at.max(start)), x(run.finished_at.unwrap_or(end)));
                        rect.run data-outcome=(outcome.as_str()) x=(from) y=(y + 5.0) width=((to - from).max(2.0)) height=(ROW - 10.0)
                            fill=(instances.get(run.holder.as_str()).copied().unwrap_or(PALETTE[0]))
                            stroke=[marker(outcome)] stroke-width="2" {
                            title { (describe(run, outcome)) }
                        }
                        @if let Some(colour) = marker(outcome) {
                            circle cx=(to) cy=(y + 4.0) r="4" fill=(colour) {
                                title { (describe(run, outcome)) }
                            }
                        }
                    }
                }
            }
            p.legend {
                @for (instance, colour) in &instances {
                    span { span.swatch style=(format!("background:{colour}")) {} code { (instance) } }
                }
                span { span.swatch style=(format!("background:{FAILED}")) {} "failed" }
                span { span.swatch style=(format!("background:{INTERRUPTED}")) {} "interrupted" }
            }
        }
    }
}

fn marker(outcome: RunOutcome) -> Option<&'static str> {
    match outcome {
        RunOutcome::Failed => Some(FAILED),
        RunOutcome::Interrupted => Some(INTERRUPTED),
        _ => None,
    }
}

fn describe(run: &RunRecord, outcome: RunOutcome) -> String {
    let mut text = format!(
        "{} #{} on {}: {} at {}",
        run.job,
        run.attempt,
        run.holder,
        outcome,
        time(run.started_at)
    );
    if let Some(length) = run.duration() {
        text.push_str(&format!(" ({})", duration(length)));
    }
    if let Some(error) = &run.error {
        text.push_str(": ");
        text.push_str(error);
    }
    text
}

fn minutes_ago(end: SystemTime, at: SystemTime) -> String {
    match end.duration_since(at).unwrap_or(Duration::ZERO).as_secs() / 60 {
        0 => match end.duration_since(at).unwrap_or(Duration::ZERO).as_secs() {
            0 => "now".to_owned(),
            seconds => format!("−{seconds} s"),
        },
        minutes => format!("−{minutes} min"),
    }
}
