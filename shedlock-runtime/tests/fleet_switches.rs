//! Schedulers that publish their jobs to the store's board (`SchedulerBuilder::publish_jobs`),
//! on the in-memory store with tokio's paused clock: three instances are listed as the job's
//! carriers and gone when they stop; a pause stops the job on every instance within a poll and
//! survives a restart; a resume restarts it; "run now" runs it once, on one instance, recorded
//! as a run by hand.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use shedlock_core::{Fleet, InMemoryLockProvider, RunLog, RunQuery, TokioClock};
use shedlock_runtime::{Job, JobLock, JobOutcome, JobRegistry, RunContext, Schedule, Scheduler};

const START: u64 = 1_700_000_040;

/// A wall clock on a minute boundary, plus half a second: cron second `s` of the minute fires
/// `s` seconds and a half into the test (paused time).
fn clock() -> Arc<TokioClock> {
    let minute = UNIX_EPOCH + Duration::from_secs(START);
    Arc::new(TokioClock::starting_at(minute - Duration::from_millis(500)))
}

/// The second of the test's minute a tick belongs to.
fn second_of(tick: SystemTime) -> u64 {
    tick.duration_since(UNIX_EPOCH).unwrap().as_secs() - START
}

fn sleep(millis: u64) -> tokio::time::Sleep {
    tokio::time::sleep(Duration::from_millis(millis))
}

/// Who ran which tick (by second; `None` for a run by hand).
type Runs = Arc<Mutex<Vec<(String, Option<u64>)>>>;

fn job(name: &str, schedule: Schedule, instance: &str, runs: &Runs) -> Job<()> {
    let (runs, instance) = (Arc::clone(runs), instance.to_owned());
    Job::new(name.to_owned(), schedule, move |()| {
        let (runs, instance) = (Arc::clone(&runs), instance.clone());
        async move {
            let tick = RunContext::current().and_then(|run| run.tick());
            runs.lock().unwrap().push((instance, tick.map(second_of)));
        }
    })
    .with_lock(
        JobLock::new(name.to_owned())
            .unwrap()
            .lock_at_most_for(Duration::from_secs(30))
            .unwrap(),
    )
}

async fn instance(store: &InMemoryLockProvider, name: &str, jobs: Vec<Job<()>>) -> Scheduler {
    let registry = jobs
        .into_iter()
        .fold(JobRegistry::new(()), JobRegistry::add);
    Scheduler::builder()
        .provider(store.with_holder(name))
        .clock(clock())
        .registry(registry)
        .publish_jobs()
        .start()
        .await
        .unwrap()
}

async fn fleet_of(
    store: &InMemoryLockProvider,
    schedule: &Schedule,
    runs: &Runs,
) -> Vec<Scheduler> {
    let mut fleet = Vec::new();
    for name in ["a", "b", "c"] {
        let jobs = vec![job("report", schedule.clone(), name, runs)];
        fleet.push(instance(store, name, jobs).await);
    }
    fleet
}

/// How many times each second's tick ran.
fn per_second(runs: &Runs) -> BTreeMap<u64, usize> {
    let mut seconds = BTreeMap::new();
    for (_, second) in runs.lock().unwrap().iter() {
        if let Some(second) = second {
            *seconds.entry(*second).or_default() += 1;
        }
    }
    seconds
}

#[tokio::test(start_paused = true)]
async fn instances_are_listed_as_carriers_and_leave_when_they_stop() {
    let store = InMemoryLockProvider::new().with_clock(clock());
    let runs = Runs::default();
    let every_second = Schedule::cron("* * * * * *").unwrap();
    let fleet = fleet_of(&store, &every_second, &runs).await;
    let board = Fleet::of_provider(Arc::new(store.clone())).unwrap();
    sleep(100).await; // published in the background as the scheduler starts
    let jobs = board.jobs().await.unwrap();
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    let carriers: Vec<_> = jobs[0]
        .carriers
        .iter()
        .map(|c| c.instance.as_str())
        .collect();
    assert_eq!(carriers, ["a", "b", "c"]);
    let definition = jobs[0].definition().unwrap();
    assert_eq!(definition.schedule, "* * * * * *");
    assert_eq!(definition.zone.as_deref(), Some("UTC"));
    assert_eq!(definition.lock.as_deref(), Some("report"));
    assert_eq!(definition.lock_at_most_for, Some(Duration::from_secs(30)));
    assert!(!jobs[0].definitions_differ());

    fleet[1].shutdown().await;
    let jobs = board.jobs().await.unwrap();
    let carriers: Vec<_> = jobs[0]
        .carriers
        .iter()
        .map(|c| c.instance.as_str())
        .collect();
    assert_eq!(carriers, ["a", "c"], "b withdrew");
    for scheduler in &fleet {
        scheduler.shutdown().await;
    }
    assert!(board.jobs().await.unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_pause_stops_every_instance_within_a_poll_and_a_resume_restarts_it() {
    let store = InMemoryLockProvider::new().with_clock(clock());
    let runs = Runs::default();
    let every_second = Schedule::cron("* * * * * *").unwrap();
    let fleet = fleet_of(&store, &every_second, &runs).await;
    let board = Fleet::of_provider(Arc::new(store.clone())).unwrap();

    sleep(2_200).await; // seconds 0 and 1 ran
    board.pause("report", "alice").await.unwrap();
    sleep(6_000).await; // to 8.2 s: polled within a second, then no tick
    let paused_at = fleet[0]
        .status()
        .into_iter()
        .map(|status| status.last_outcome)
        .collect::<Vec<_>>();
    assert_eq!(paused_at, [Some(JobOutcome::Paused)], "reported as paused");
    board.resume("report").await.unwrap();
    sleep(4_000).await; // to 12.2 s
    for scheduler in &fleet {
        scheduler.shutdown().await;
    }

    let seconds = per_second(&runs);
    assert!(
        seconds.values().all(|&count| count == 1),
        "a tick twice: {seconds:?}"
    );
    for second in 0..=1 {
        assert!(
            seconds.contains_key(&second),
            "{second} ran before the pause: {seconds:?}"
        );
    }
    // Paused at 2.2 s; each instance polls every second: the tick of second 3 may still run.
    for second in 4..=8 {
        assert!(
            !seconds.contains_key(&second),
            "{second} ran while paused: {seconds:?}"
        );
    }
    for second in 10..=11 {
        assert!(
            seconds.contains_key(&second),
            "{second} ran after the resume: {seconds:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_pause_survives_every_instance_restarting() {
    let store = InMemoryLockProvider::new().with_clock(clock());
    let runs = Runs::default();
    let every_second = Schedule::cron("* * * * * *").unwrap();
    let board = Fleet::of_provider(Arc::new(store.clone())).unwrap();
    board.pause("report", "alice").await.unwrap();

    // Started paused: not even the first tick runs.
    let fleet = fleet_of(&store, &every_second, &runs).await;
    sleep(3_200).await;
    for scheduler in &fleet {
        scheduler.shutdown().await;
    }
    assert_eq!(per_second(&runs), BTreeMap::new());
    let jobs = board.jobs().await.unwrap();
    assert_eq!(
        jobs[0].paused.as_ref().map(|p| p.by.as_str()),
        Some("alice")
    );
}

#[tokio::test(start_paused = true)]
async fn run_now_runs_once_on_one_instance() {
    let store = InMemoryLockProvider::new().with_clock(clock());
    let runs = Runs::default();
    let yearly = Schedule::cron("0 0 0 1 1 *").unwrap();
    let fleet = fleet_of(&store, &yearly, &runs).await;
    let board = Fleet::of_provider(Arc::new(store.clone())).unwrap();

    // Two operators at once: one request.
    let (first, second) = tokio::join!(
        board.run_now("report", "alice"),
        board.run_now("report", "bob")
    );
    assert_eq!(first.unwrap().id, second.unwrap().id);
    sleep(3_000).await;
    let made = runs.lock().unwrap().clone();
    assert_eq!(made.len(), 1, "{made:?}");
    assert_eq!(made[0].1, None, "a run by hand, not a tick");
    let taken = board.switches().await.unwrap().runs["report"].clone();
    assert_eq!(taken.taken_by.as_deref(), Some(made[0].0.as_str()));
    let records = store.runs(&RunQuery::lock("report")).await.unwrap();
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0].tick, None);
    assert_eq!(records[0].holder, made[0].0);

    // Paused, a run asked for still runs (an operator's explicit ask), once.
    board.pause("report", "alice").await.unwrap();
    board.run_now("report", "carol").await.unwrap();
    sleep(3_000).await;
    for scheduler in &fleet {
        scheduler.shutdown().await;
    }
    assert_eq!(runs.lock().unwrap().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_job_added_or_removed_at_runtime_is_published_at_the_next_poll() {
    let store = InMemoryLockProvider::new().with_clock(clock());
    let runs = Runs::default();
    let yearly = Schedule::cron("0 0 0 1 1 *").unwrap();
    let scheduler = instance(&store, "a", vec![job("report", yearly.clone(), "a", &runs)]).await;
    let board = Fleet::of_provider(Arc::new(store.clone())).unwrap();
    let names = async || -> Vec<String> {
        let jobs = board.jobs().await.unwrap();
        jobs.into_iter().map(|job| job.name).collect()
    };
    sleep(100).await;
    assert_eq!(names().await, ["report"]);
    let control = scheduler.job_control::<()>().unwrap();
    control
        .add(job("export", yearly, "a", &runs))
        .await
        .unwrap();
    sleep(1_100).await;
    assert_eq!(names().await, ["export", "report"]);
    control
        .remove("report", shedlock_runtime::RemoveMode::Finish)
        .await
        .unwrap();
    sleep(1_100).await;
    assert_eq!(names().await, ["export"]);
    scheduler.shutdown().await;
}
