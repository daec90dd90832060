//! `locks list`, `locks show` and `locks release`.

use std::time::Duration;

use serde::Serialize;
use shedlock_core::{LockInspector, LockQuery, LockRecord};

use crate::cli::{LocksCommand, ReleaseArgs};
use crate::failure::{Exit, Failure};
use crate::store::Place;
use crate::table::{print_columns, print_json, print_views, timestamp};
use crate::terminal::Escaped;

/// Runs a `locks` command on any store, through its inspector.
pub(crate) async fn run(
    provider: &dyn LockInspector,
    place: &Place,
    command: &LocksCommand,
) -> Result<Exit, Failure> {
    match command {
        LocksCommand::List {
            prefix,
            after,
            limit,
            json,
        } => {
            let limit = usize::try_from(*limit).unwrap_or(usize::MAX);
            // One more than asked for: whether there is a next page.
            let mut query = LockQuery::all().limit(limit.saturating_add(1));
            query.prefix = prefix.clone();
            query.after = after.clone();
            let mut rows = provider
                .list_locks(&query)
                .await
                .map_err(|e| store_failure(&e))?;
            let more = rows.len() > limit;
            rows.truncate(limit);
            let views: Vec<LockView<'_>> = rows.iter().map(LockView::of).collect();
            let none = format_args!("no locks in {}", place.name);
            print_views(&views, *json, print_table, none);
            if let (true, false, Some(last)) = (more, *json, rows.last()) {
                out!("next page: --after {}", Escaped(&last.name));
            }
            Ok(Exit::Ok)
        }
        LocksCommand::Show { name, json } => {
            let row = read_row(provider, place, name).await?;
            let view = LockView::of(&row);
            if *json {
                print_json(&view);
            } else {
                print_fields(&view);
            }
            Ok(Exit::Ok)
        }
        LocksCommand::Release(args) => release(provider, place, args).await,
    }
}

/// One lock as printed; its field names are the JSON output's, documented in `--help` and
/// the README, so they stay as they are.
#[derive(Debug, Serialize)]
struct LockView<'a> {
    name: &'a str,
    held: bool,
    locked_by: &'a str,
    fencing_token: u64,
    locked_at: String,
    lock_until: String,
    /// Milliseconds the lease still runs on the database clock; 0 when free.
    remaining_ms: u64,
    /// The database clock when the row was read.
    database_time: String,
}

impl<'a> LockView<'a> {
    fn of(row: &'a LockRecord) -> Self {
        LockView {
            name: &row.name,
            held: row.held,
            locked_by: &row.holder,
            fencing_token: row.fencing_token,
            locked_at: timestamp(row.locked_at),
            lock_until: timestamp(row.lock_until),
            remaining_ms: u64::try_from(row.remaining().as_millis()).unwrap_or(u64::MAX),
            database_time: timestamp(row.read_at),
        }
    }

    fn state(&self) -> &'static str {
        if self.held { "held" } else { "free" }
    }

    /// Whole seconds once there are any, `-` for a free lock.
    fn remaining(&self) -> String {
        if !self.held {
            return "-".to_owned();
        }
        let remaining = match self.remaining_ms {
            ms if ms >= 1000 => Duration::from_secs(ms / 1000),
            ms => Duration::from_millis(ms),
        };
        humantime::format_duration(remaining).to_string()
    }
}

fn print_table(views: &[LockView<'_>]) {
    let header = [
        "NAME",
        "STATE",
        "HOLDER",
        "TOKEN",
        "LOCKED AT",
        "LOCK UNTIL",
        "REMAINING",
    ];
    let rows: Vec<[String; 7]> = views
        .iter()
        .map(|v| {
            [
                Escaped(v.name).to_string(),
                v.state().to_owned(),
                Escaped(v.locked_by).to_string(),
                v.fencing_token.to_string(),
                v.locked_at.clone(),
                v.lock_until.clone(),
                v.remaining(),
            ]
        })
        .collect();
    print_columns(&header, &rows);
}

fn print_fields(view: &LockView<'_>) {
    out!("name:          {}", Escaped(view.name));
    out!("state:         {}", view.state());
    out!("holder:        {}", Escaped(view.locked_by));
    out!("fencing token: {}", view.fencing_token);
    out!("locked at:     {}", view.locked_at);
    out!("lock until:    {}", view.lock_until);
    out!("remaining:     {}", view.remaining());
    out!("database time: {}", view.database_time);
}

async fn read_row(
    provider: &dyn LockInspector,
    place: &Place,
    name: &str,
) -> Result<LockRecord, Failure> {
    provider
        .lock_record(name)
        .await
        .map_err(|e| store_failure(&e))?
        .ok_or_else(|| {
            Failure::new(
                Exit::NotFound,
                format!("no lock named `{}` in {}", Escaped(name), place.name),
            )
        })
}

/// Ends the live lease by its holder and token as read from the store: a lease taken in
/// between has another token and is left alone. `release_lock` sets `lock_until` to the
/// store's now and keeps the record, so the next acquisition's token is larger.
async fn release(
    provider: &dyn LockInspector,
    place: &Place,
    args: &ReleaseArgs,
) -> Result<Exit, Failure> {
    let row = read_row(provider, place, &args.name).await?;
    let (name, holder) = (Escaped(&args.name), Escaped(&row.holder));
    if !row.held {
        out!(
            "`{name}` is not held (free since {}); nothing to release",
            timestamp(row.lock_until)
        );
        return Ok(Exit::Ok);
    }
    let holder_matches = args.holder.as_deref().is_none_or(|h| h == row.holder);
    let token_matches = args.token.is_none_or(|t| t == row.fencing_token);
    let allowed = args.force || (holder_matches && token_matches);
    if !allowed {
        return Err(Failure::new(
            Exit::Refused,
            format!(
                "not released: `{name}` is held by {holder} with fencing token {} until {}{}",
                row.fencing_token,
                timestamp(row.lock_until),
                " (use --force to release it whoever holds it)"
            ),
        ));
    }
    let token = row.fencing_token;
    let released = provider
        .release_lock(&row)
        .await
        .map_err(|e| store_failure(&e))?;
    if !released {
        return Err(Failure::new(
            Exit::Refused,
            format!(
                "not released: the lease of `{name}` by {holder} (token {token}) ended or was \
                 taken over meanwhile; see `shedlock locks show {name}`"
            ),
        ));
    }
    out!(
        "released `{name}`: held by {holder} with fencing token {token}, free from now on (the \
         {} stays; the next holder gets a larger token)",
        place.record
    );
    Ok(Exit::Ok)
}

/// A statement the database refused, with where to look next.
pub(crate) fn store_failure(error: &shedlock_core::Error) -> Failure {
    Failure::new(
        Exit::Error,
        format!(
            "{error}\n`shedlock doctor` (with the same options) says what is wrong and how to fix it"
        ),
    )
}
