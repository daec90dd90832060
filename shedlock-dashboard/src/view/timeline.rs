//! The last hour (or the span configured) as an SVG picture, drawn here so the page needs no
//! script to show it: a row per lock of the page, a bar per run from its start to its end,
//! coloured by its outcome (a fixed legend of five, however many instances run them); the
//! instance, attempt and times are in each bar's tooltip. A lock that ran more often than the
//! bars drawn per lock shows, greyed, the part of the span its drawn runs do not reach.

use std::time::{Duration, SystemTime};

use maud::{Markup, html};
use shedlock_core::{RunOutcome, RunRecord};

use super::{duration, time};
use crate::read::Snapshot;

const WIDTH: f64 = 1000.0;
const LABEL: f64 = 170.0;
const ROW: f64 = 26.0;
const AXIS: f64 = 22.0;
/// The outcomes of the legend, in its order (their colours are in the page's CSS).
const OUTCOMES: [RunOutcome; 5] = [
    RunOutcome::Succeeded,
    RunOutcome::Running,
    RunOutcome::Retried,
    RunOutcome::Failed,
    RunOutcome::Interrupted,
];

pub(super) fn timeline(snapshot: &Snapshot) -> Markup {
    let Some(locks) = &snapshot.runs else {
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
    let in_span = |run: &&RunRecord| run.finished_at.unwrap_or(end) >= start;
    // The locks of the page that ran within the span, with the runs drawn.
    let rows: Vec<(&String, Vec<&RunRecord>, bool)> = locks
        .iter()
        .filter_map(|(name, lock)| {
            let taken = &lock.runs[..lock.runs.len().min(snapshot.timeline_runs)];
            let drawn: Vec<&RunRecord> = taken.iter().filter(in_span).collect();
            drawn.last()?;
            // Older runs than those taken may lie within the span too: not drawn.
            let older = lock.more || lock.runs.len() > taken.len();
            let cut = older && taken.last().is_some_and(|run| run.started_at > start);
            Some((name, drawn, cut))
        })
        .collect();
    let height = AXIS + ROW * rows.len().max(1) as f64;
    let ticks = (0..=6).map(|i| (i, start + snapshot.timeline / 6 * i));
    html! {
        section #timeline {
            h2 { "Last " (duration(snapshot.timeline)) }
            svg xmlns="http://www.w3.org/2000/svg" viewBox=(format!("0 0 {WIDTH} {height}")) role="img" aria-label="Runs per lock over the span, coloured by outcome" {
                @for (i, at) in ticks {
                    @let at_x = round(x(at));
                    line x1=(at_x) x2=(at_x) y1="0" y2=(height) stroke="#e3e6eb" {}
                    text x=(at_x) y="14" font-size="11" fill="#5b6475" text-anchor=(if i == 0 { "start" } else if i == 6 { "end" } else { "middle" }) {
                        (minutes_ago(end, at))
                    }
                }
                @if rows.is_empty() {
                    text x=(LABEL) y=(AXIS + ROW * 0.65) font-size="12" fill="#5b6475" { "No runs of these locks in this span." }
                }
                @for (row, (name, runs, cut)) in rows.iter().enumerate() {
                    @let y = AXIS + ROW * row as f64;
                    text x="4" y=(round(y + ROW * 0.65)) font-size="12" font-family="monospace" { (name) }
                    @if *cut {
                        @let oldest = runs.last().map_or(end, |run| run.started_at);
                        rect.undrawn x=(LABEL) y=(y + 5.0) width=(round((x(oldest) - LABEL).max(0.0))) height=(ROW - 10.0) {
                            title { "older runs not drawn: the latest " (snapshot.timeline_runs) " of each lock are" }
                        }
                    }
                    @for run in runs {
                        @let outcome = snapshot.outcome(run);
                        @let (from, to) = (x(run.started_at.max(start)), x(run.finished_at.unwrap_or(end)));
                        rect class=(format!("run {}", outcome.as_str())) x=(round(from)) y=(y + 5.0) width=(round((to - from).max(2.0))) height=(ROW - 10.0) {
                            title { (describe(run, outcome)) }
                        }
                    }
                }
            }
            p.legend {
                @for outcome in OUTCOMES {
                    span { span.(format!("swatch {}", outcome.as_str())) {} (outcome.as_str()) }
                }
                @if rows.iter().any(|(_, _, cut)| *cut) {
                    span { span.swatch.undrawn {} "older runs, not drawn" }
                }
                span.meta { "instance and times: hover a bar" }
            }
        }
    }
}

/// To a tenth of a unit: the drawing is 1000 wide.
fn round(value: f64) -> f64 {
    (value * 10.0).round() / 10.0
}

/// A bar's tooltip: the instance, outcome, start, duration and (past the first) attempt; the
/// lock is the row's, the error is on the run's page (linked from the runs table).
fn describe(run: &RunRecord, outcome: RunOutcome) -> String {
    let mut text = format!("{}: {outcome} at {}", run.holder, time(run.started_at));
    if let Some(length) = run.duration() {
        text.push_str(&format!(" ({})", duration(length)));
    }
    if run.attempt > 1 {
        text.push_str(&format!(", attempt {}", run.attempt));
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
