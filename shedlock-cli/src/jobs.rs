//! `jobs list`, `jobs show`, `jobs pause`, `jobs resume` and `jobs run`: the jobs the fleet's
//! instances publish to the store, and the switches operators set for them.

use std::time::{Duration, SystemTime};

use serde::Serialize;
use shedlock_core::{Fleet, FleetJob, RunRequest};

use crate::cli::JobsCommand;
use crate::failure::{Exit, Failure};
use crate::locks::store_failure;
use crate::table::{print_columns, print_json, print_views, timestamp};
use crate::terminal::Escaped;

/// Runs a `jobs` command on any store, through its board.
pub(crate) async fn run(fleet: &Fleet, command: &JobsCommand) -> Result<Exit, Failure> {
    match command {
        JobsCommand::List { json } => {
            let jobs = fleet.jobs().await.map_err(|e| store_failure(&e))?;
            let views: Vec<JobView> = jobs.iter().map(JobView::of).collect();
            let none = format_args!(
                "no jobs: no instance publishes its jobs to this store (start the scheduler with \
                 `.fleet(…)`), and none is paused"
            );
            print_views(&views, *json, print_table, none);
            Ok(Exit::Ok)
        }
        JobsCommand::Show { name, json } => {
            let job = known(fleet, name).await?;
            let view = JobView::of(&job);
            if *json {
                print_json(&view);
            } else {
                print_fields(&view);
            }
            Ok(Exit::Ok)
        }
        JobsCommand::Pause { name, by, force } => {
            if !force {
                carried(fleet, name).await?;
            }
            let paused = fleet
                .pause(name, &who(by))
                .await
                .map_err(|e| store_failure(&e))?;
            out!(
                "paused `{}` across the fleet (by {}, since {}): no instance starts it from its \
                 next poll on until `shedlock jobs resume {}`",
                Escaped(name),
                Escaped(&paused.by),
                timestamp(paused.at),
                Escaped(name)
            );
            Ok(Exit::Ok)
        }
        JobsCommand::Resume { name } => {
            if fleet.resume(name).await.map_err(|e| store_failure(&e))? {
                out!("resumed `{}`: its next tick runs", Escaped(name));
            } else {
                out!("`{}` was not paused; nothing to resume", Escaped(name));
            }
            Ok(Exit::Ok)
        }
        JobsCommand::Run { name, by, wait } => {
            carried(fleet, name).await?;
            let request = fleet
                .run_now(name, &who(by))
                .await
                .map_err(|e| store_failure(&e))?;
            out!(
                "asked for a run of `{}` now (request {}, by {}): one instance carrying it takes \
                 it within its poll interval and runs it once",
                Escaped(name),
                request.id,
                Escaped(&request.by)
            );
            if let Some(wait) = wait {
                return wait_for_taker(fleet, &request, *wait).await;
            }
            Ok(Exit::Ok)
        }
    }
}

/// Polls until an instance took `request`, for at most `wait`.
async fn wait_for_taker(
    fleet: &Fleet,
    request: &RunRequest,
    wait: Duration,
) -> Result<Exit, Failure> {
    let give_up = tokio::time::Instant::now() + wait;
    loop {
        let switches = fleet.switches().await.map_err(|e| store_failure(&e))?;
        match switches.runs.get(&request.job) {
            Some(seen) if seen.id == request.id && seen.taken_by.is_some() => {
                let taker = seen.taken_by.as_deref().unwrap_or_default();
                out!("taken by {}", Escaped(taker));
                return Ok(Exit::Ok);
            }
            Some(seen) if seen.id != request.id => {
                out!("replaced by a later request ({})", seen.id);
                return Ok(Exit::Ok);
            }
            _ => {}
        }
        if tokio::time::Instant::now() >= give_up {
            return Err(Failure::new(
                Exit::Error,
                format!(
                    "no instance took the run within {}; it stays asked for until one does",
                    humantime::format_duration(wait)
                ),
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The job as the fleet lists it, or exit 3.
async fn known(fleet: &Fleet, name: &str) -> Result<FleetJob, Failure> {
    fleet
        .job(name)
        .await
        .map_err(|e| store_failure(&e))?
        .ok_or_else(|| not_carried(name))
}

/// The job, carried by a live instance, or exit 3: a switch for a job nobody runs (a typo)
/// would do nothing.
async fn carried(fleet: &Fleet, name: &str) -> Result<FleetJob, Failure> {
    let job = known(fleet, name).await?;
    if job.carriers.is_empty() {
        return Err(not_carried(name));
    }
    Ok(job)
}

fn not_carried(name: &str) -> Failure {
    Failure::new(
        Exit::NotFound,
        format!(
            "no live instance carries a job named `{}` (see `shedlock jobs list`; pause a job \
             whose instances are all down with --force)",
            Escaped(name)
        ),
    )
}

/// Who asks: `--by`, else the user and host this runs as.
fn who(by: &Option<String>) -> String {
    by.clone().unwrap_or_else(|| {
        let user = std::env::var("USER").unwrap_or_else(|_| "someone".to_owned());
        let host = gethostname();
        format!("{user}@{host} (shedlock)")
    })
}

fn gethostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .unwrap_or_else(|_| "localhost".to_owned())
}

/// One job as printed; its field names are the JSON output's.
#[derive(Debug, Serialize)]
struct JobView {
    name: String,
    schedule: String,
    zone: Option<String>,
    lock: Option<String>,
    lock_at_most_for_ms: Option<u64>,
    lock_at_least_for_ms: Option<u64>,
    policy: String,
    /// A cron job's next fire time after the store's time as its instances last beat.
    next_fire: Option<String>,
    paused: Option<PausedView>,
    run_request: Option<RunView>,
    definitions_differ: bool,
    carriers: Vec<CarrierView>,
}

#[derive(Debug, Serialize)]
struct PausedView {
    by: String,
    at: String,
}

#[derive(Debug, Serialize)]
struct RunView {
    id: u64,
    by: String,
    at: String,
    taken_by: Option<String>,
}

#[derive(Debug, Serialize)]
struct CarrierView {
    instance: String,
    seen_at: String,
    alive_until: String,
    /// Whether this instance runs the job otherwise than most (a rolling deploy).
    differs: bool,
    schedule: String,
    zone: Option<String>,
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

impl JobView {
    fn of(job: &FleetJob) -> Self {
        let main = job.definition();
        // The store's time as the instances last beat: "next" is judged on it, not this
        // machine's clock.
        let now = job
            .carriers
            .iter()
            .map(|carrier| carrier.seen_at)
            .max()
            .unwrap_or_else(SystemTime::now);
        JobView {
            name: job.name.clone(),
            schedule: main.map(|d| d.schedule.clone()).unwrap_or_default(),
            zone: main.and_then(|d| d.zone.clone()),
            lock: main.and_then(|d| d.lock.clone()),
            lock_at_most_for_ms: main.and_then(|d| d.lock_at_most_for).map(millis),
            lock_at_least_for_ms: main.and_then(|d| d.lock_at_least_for).map(millis),
            policy: main.map(|d| d.policy.clone()).unwrap_or_default(),
            next_fire: main.and_then(|d| d.next_fire(now)).map(timestamp),
            paused: job.paused.as_ref().map(|paused| PausedView {
                by: paused.by.clone(),
                at: timestamp(paused.at),
            }),
            run_request: job.run_request.as_ref().map(|request| RunView {
                id: request.id,
                by: request.by.clone(),
                at: timestamp(request.at),
                taken_by: request.taken_by.clone(),
            }),
            definitions_differ: job.definitions_differ(),
            carriers: job
                .carriers
                .iter()
                .map(|carrier| CarrierView {
                    instance: carrier.instance.clone(),
                    seen_at: timestamp(carrier.seen_at),
                    alive_until: timestamp(carrier.alive_until),
                    differs: main.is_some_and(|d| *d != carrier.definition),
                    schedule: carrier.definition.schedule.clone(),
                    zone: carrier.definition.zone.clone(),
                })
                .collect(),
        }
    }

    fn state(&self) -> String {
        match &self.paused {
            Some(paused) => format!("paused by {}", Escaped(&paused.by)),
            None => "active".to_owned(),
        }
    }

    fn schedule(&self) -> String {
        match &self.zone {
            Some(zone) => format!("{} ({})", Escaped(&self.schedule), Escaped(zone)),
            None => Escaped(&self.schedule).to_string(),
        }
    }

    fn carriers(&self) -> String {
        let differing = self.carriers.iter().filter(|c| c.differs).count();
        match differing {
            0 => self.carriers.len().to_string(),
            n => format!("{} ({n} differ)", self.carriers.len()),
        }
    }

    fn run_asked(&self) -> String {
        match &self.run_request {
            Some(run) if run.taken_by.is_none() => format!("asked by {}", Escaped(&run.by)),
            Some(run) => format!(
                "taken by {}",
                Escaped(run.taken_by.as_deref().unwrap_or_default())
            ),
            None => "-".to_owned(),
        }
    }
}

fn print_table(views: &[JobView]) {
    let header = [
        "NAME",
        "SCHEDULE",
        "NEXT FIRE",
        "CARRIERS",
        "STATE",
        "RUN NOW",
    ];
    let rows: Vec<[String; 6]> = views
        .iter()
        .map(|v| {
            [
                Escaped(&v.name).to_string(),
                v.schedule(),
                v.next_fire.clone().unwrap_or_else(|| "-".to_owned()),
                v.carriers(),
                v.state(),
                v.run_asked(),
            ]
        })
        .collect();
    print_columns(&header, &rows);
}

fn print_fields(view: &JobView) {
    out!("name:          {}", Escaped(&view.name));
    out!("schedule:      {}", view.schedule());
    out!(
        "next fire:     {}",
        view.next_fire
            .as_deref()
            .unwrap_or("- (not a cron schedule)")
    );
    if let Some(lock) = &view.lock {
        let at_most = Duration::from_millis(view.lock_at_most_for_ms.unwrap_or_default());
        let at_least = Duration::from_millis(view.lock_at_least_for_ms.unwrap_or_default());
        out!(
            "lock:          {} (at most {}, at least {})",
            Escaped(lock),
            humantime::format_duration(at_most),
            humantime::format_duration(at_least)
        );
    }
    if !view.policy.is_empty() {
        out!("policy:        {}", Escaped(&view.policy));
    }
    out!("state:         {}", view.state());
    out!("run now:       {}", view.run_asked());
    out!("carriers:      {}", view.carriers());
    for carrier in &view.carriers {
        let differs = if carrier.differs {
            format!(" DIFFERS: {}", Escaped(&carrier.schedule))
        } else {
            String::new()
        };
        out!(
            "  {}  seen {}, alive until {}{differs}",
            Escaped(&carrier.instance),
            carrier.seen_at,
            carrier.alive_until
        );
    }
}
