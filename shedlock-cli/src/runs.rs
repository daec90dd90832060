//! `runs list` and `runs show`: the run records a store keeps beside its locks, read a page
//! at a time: no command reads more records than it shows (plus one, to tell whether there
//! are more), however long the store's history.

use serde::Serialize;
use shedlock_core::{Operation, RunCursor, RunLog, RunQuery, RunRecord};

use crate::cli::RunsCommand;
use crate::failure::{Exit, Failure};
use crate::store::Place;
use crate::table::{print_columns, print_json, print_views, timestamp};
use crate::terminal::Escaped;

/// How many records `runs show` reads at a time while it looks for a token or attempt.
const SEARCH_PAGE: usize = 200;

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
        RunsCommand::List {
            lock,
            limit,
            before,
            json,
        } => {
            let limit = usize::try_from(*limit).unwrap_or(usize::MAX);
            // One more than asked for: whether there is a next page.
            let mut query = RunQuery::all().limit(limit.saturating_add(1));
            query.lock = lock.clone();
            if let Some(before) = before {
                query = query.before(before.clone());
            }
            let mut records = read(log, &query, place).await?;
            let more = records.len() > limit;
            records.truncate(limit);
            let views: Vec<RunView<'_>> = records.iter().map(RunView::of).collect();
            let none = format_args!("no runs recorded in {}", place.name);
            print_views(&views, *json, print_table, none);
            if let (true, false, Some(last)) = (more, *json, records.last()) {
                out!("next page: --before {}", last.cursor());
            }
            Ok(Exit::Ok)
        }
        RunsCommand::Show {
            lock,
            token,
            attempt,
            json,
        } => {
            let wanted = |r: &RunRecord| {
                token.is_none_or(|t| t == r.fencing_token) && attempt.is_none_or(|a| a == r.attempt)
            };
            // Any run will do without a token or attempt: the newest one alone is read.
            let page = if token.is_none() && attempt.is_none() {
                1
            } else {
                SEARCH_PAGE
            };
            let Some(record) = find(log, place, lock, page, wanted).await? else {
                return Err(Failure::new(
                    Exit::NotFound,
                    format!("no such run of lock `{}` in {}", Escaped(lock), place.name),
                ));
            };
            let view = RunView::of(&record);
            if *json {
                print_json(&view);
            } else {
                print_fields(&view);
            }
            Ok(Exit::Ok)
        }
    }
}

/// The newest run of `lock` that is `wanted`, read `page` records at a time: never the
/// lock's whole history at once.
async fn find(
    log: &dyn RunLog,
    place: &Place,
    lock: &str,
    page: usize,
    wanted: impl Fn(&RunRecord) -> bool,
) -> Result<Option<RunRecord>, Failure> {
    let size = page;
    let mut before: Option<RunCursor> = None;
    loop {
        let mut query = RunQuery::lock(lock).limit(size);
        if let Some(cursor) = before.take() {
            query = query.before(cursor);
        }
        let page = read(log, &query, place).await?;
        if let Some(found) = page.iter().find(|r| wanted(r)) {
            return Ok(Some(found.clone()));
        }
        match page.last() {
            Some(last) if page.len() == size => before = Some(last.cursor()),
            _ => return Ok(None),
        }
    }
}

/// One page of `query`; a store that cannot be read is named as such (exit 1).
async fn read(
    log: &dyn RunLog,
    query: &RunQuery,
    place: &Place,
) -> Result<Vec<RunRecord>, Failure> {
    log.runs(query)
        .await
        .map_err(|error| read_failure(&error, query.lock.as_deref(), place))
}

/// A run-record read that failed, said as a read: the store's error names its operation
/// `Runs` as recording ("failed to record the runs of lock …"), which a read is not.
fn read_failure(error: &shedlock_core::Error, lock: Option<&str>, place: &Place) -> Failure {
    let whose = match lock {
        Some(lock) => format!("lock `{}`", Escaped(lock)),
        None => "every lock".to_owned(),
    };
    let cause = match error {
        shedlock_core::Error::Store {
            operation: Operation::Runs,
            source,
            ..
        } => source.to_string(),
        other => other.to_string(),
    };
    Failure::new(
        Exit::Error,
        format!(
            "cannot read the run records of {whose} in {}: {cause}\n`shedlock doctor` (with the \
             same options) says what is wrong and how to fix it",
            place.name
        ),
    )
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
    /// Where the run stands newest first: `runs list --before` this lists the older runs.
    cursor: String,
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
            cursor: record.cursor().to_string(),
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
