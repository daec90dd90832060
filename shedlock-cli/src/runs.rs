//! `runs list` and `runs show`: the run records a store keeps beside its locks.

use serde::Serialize;
use shedlock_core::{RunLog, RunQuery, RunRecord};

use crate::cli::RunsCommand;
use crate::failure::{Exit, Failure};
use crate::locks::{Place, print_columns, print_json, print_views, store_failure, timestamp};
use crate::terminal::Escaped;

/// Runs a `runs` command on a store's run log; a store without one is a usage error.
pub(crate) async fn run(
    log: Option<&dyn RunLog>,
    place: &Place,
    command: &RunsCommand,
) -> Result<Exit, Failure> {
    let Some(log) = log else {
        return Err(Failure::new(
            Exit::Usage,
            format!("{} keeps no run records", place.name),
        ));
    };
    match command {
        RunsCommand::List { lock, limit, json } => {
            let mut query = RunQuery::all().limit(*limit);
            query.lock = lock.clone();
            let records = log.runs(&query).await.map_err(|e| store_failure(&e))?;
            let views: Vec<RunView<'_>> = records.iter().map(RunView::of).collect();
            let none = format_args!("no runs recorded in {}", place.name);
            print_views(&views, *json, print_table, none);
            Ok(Exit::Ok)
        }
        RunsCommand::Show {
            lock,
            token,
            attempt,
            json,
        } => {
            let records = log
                .runs(&RunQuery::lock(lock.clone()))
                .await
                .map_err(|e| store_failure(&e))?;
            let Some(record) = records.iter().find(|r| {
                token.is_none_or(|t| t == r.fencing_token) && attempt.is_none_or(|a| a == r.attempt)
            }) else {
                return Err(Failure::new(
                    Exit::NotFound,
                    format!("no such run of lock `{}` in {}", Escaped(lock), place.name),
                ));
            };
            let view = RunView::of(record);
            if *json {
                print_json(&view);
            } else {
                print_fields(&view);
            }
            Ok(Exit::Ok)
        }
    }
}

/// One run as printed; its field names are the JSON output's.
#[derive(Debug, Serialize)]
struct RunView<'a> {
    lock: &'a str,
    job: &'a str,
    tick: Option<String>,
    holder: &'a str,
    fencing_token: u64,
    attempt: u32,
    started_at: String,
    finished_at: Option<String>,
    duration_ms: Option<u64>,
    outcome: &'static str,
    error: Option<&'a str>,
}

impl<'a> RunView<'a> {
    fn of(record: &'a RunRecord) -> Self {
        RunView {
            lock: &record.lock,
            job: &record.job,
            tick: record.tick.map(timestamp),
            holder: &record.holder,
            fencing_token: record.fencing_token,
            attempt: record.attempt,
            started_at: timestamp(record.started_at),
            finished_at: record.finished_at.map(timestamp),
            duration_ms: record
                .duration()
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            outcome: record.outcome.as_str(),
            error: record.error.as_deref(),
        }
    }

    fn duration(&self) -> String {
        self.duration_ms.map_or_else(
            || "-".to_owned(),
            |ms| humantime::format_duration(std::time::Duration::from_millis(ms)).to_string(),
        )
    }
}

/// Longest error text in the table; `runs show` prints it whole.
const ERROR_COLUMN: usize = 60;

fn print_table(views: &[RunView<'_>]) {
    let header = [
        "LOCK", "JOB", "TICK", "ATTEMPT", "TOKEN", "HOLDER", "STARTED", "DURATION", "OUTCOME",
        "ERROR",
    ];
    let rows: Vec<[String; 10]> = views
        .iter()
        .map(|v| {
            let error = v.error.map(|e| {
                let escaped = Escaped(e).to_string();
                match escaped.char_indices().nth(ERROR_COLUMN) {
                    Some((cut, _)) => format!("{}…", &escaped[..cut]),
                    None => escaped,
                }
            });
            [
                Escaped(v.lock).to_string(),
                Escaped(v.job).to_string(),
                v.tick.clone().unwrap_or_else(|| "-".to_owned()),
                v.attempt.to_string(),
                v.fencing_token.to_string(),
                Escaped(v.holder).to_string(),
                v.started_at.clone(),
                v.duration(),
                v.outcome.to_owned(),
                error.unwrap_or_default(),
            ]
        })
        .collect();
    print_columns(&header, &rows);
}

fn print_fields(view: &RunView<'_>) {
    out!("lock:          {}", Escaped(view.lock));
    out!("job:           {}", Escaped(view.job));
    out!(
        "tick:          {}",
        view.tick.as_deref().unwrap_or("- (run by hand)")
    );
    out!("holder:        {}", Escaped(view.holder));
    out!("fencing token: {}", view.fencing_token);
    out!("attempt:       {}", view.attempt);
    out!("started at:    {}", view.started_at);
    out!(
        "finished at:   {}",
        view.finished_at.as_deref().unwrap_or("-")
    );
    out!("duration:      {}", view.duration());
    out!("outcome:       {}", view.outcome);
    if let Some(error) = view.error {
        out!("error:         {}", Escaped(error));
    }
}
