//! A process pause inside one test process: one instance runs on a runtime of its own whose
//! only thread is blocked (as SIGSTOP would stop a process) for longer than the leases, while
//! another instance goes on. Real time, since the point is what a paused instance does when it
//! resumes; the assertions are what the scheduler guarantees (no tick twice, no leader work
//! after the leadership ended, missed ticks counted), never how fast the machine is.
//!
//! The multi-process version, with SIGSTOP on SQLite, PostgreSQL and MariaDB, is in
//! `shedlock-harness/tests/stall.rs`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use shedlock_core::{ElectionConfig, InMemoryLockProvider};
use shedlock_runtime::{
    Job, JobLock, JobRegistry, JobStatus, LockContext, Schedule, Scheduler, SchedulerConfig,
};
use tokio::sync::{mpsc, oneshot};

/// One execution: who ran it, and when (store time for locked jobs, wall time otherwise).
#[derive(Debug, Clone)]
struct Run {
    holder: String,
    at: SystemTime,
}

type Runs = Arc<Mutex<Vec<Run>>>;

fn record(runs: &Runs, holder: &str, at: SystemTime) {
    runs.lock().unwrap().push(Run {
        holder: holder.to_owned(),
        at,
    });
}

fn per_second_job(runs: &Runs, at_least: Duration) -> Job<String> {
    let runs = Arc::clone(runs);
    Job::new(
        "per_second",
        Schedule::cron("* * * * * *").unwrap(),
        move |holder: String| {
            let runs = Arc::clone(&runs);
            async move {
                let lock = LockContext::current().expect("locked job");
                record(&runs, &holder, lock.lease().locked_at());
            }
        },
    )
    .with_lock(
        JobLock::new("per_second")
            .unwrap()
            .lock_at_most_for(Duration::from_secs(10))
            .unwrap()
            .lock_at_least_for(at_least)
            .unwrap(),
    )
}

fn leader_job(runs: &Runs) -> Job<String> {
    let runs = Arc::clone(runs);
    Job::new(
        "leader_work",
        Schedule::fixed_rate(Duration::from_millis(100)).unwrap(),
        move |holder: String| {
            let runs = Arc::clone(&runs);
            async move { record(&runs, &holder, SystemTime::now()) }
        },
    )
    .leader_only("coordinator")
    .unwrap()
}

fn config() -> SchedulerConfig {
    SchedulerConfig {
        leader_election: ElectionConfig {
            lease_duration: Duration::from_millis(1500),
            renew_deadline: Duration::from_millis(1000),
            retry_period: Duration::from_millis(250),
        },
        ..SchedulerConfig::default()
    }
}

async fn start(holder: &str, job: &Job<String>, store: &InMemoryLockProvider) -> Scheduler {
    Scheduler::builder()
        .provider(store.with_holder(holder))
        .config(config())
        .registry(JobRegistry::new(holder.to_owned()).add(job.clone()))
        .start()
        .await
        .unwrap()
}

enum Command {
    /// Block the runtime's only thread: nothing of this instance runs meanwhile.
    Freeze(Duration, oneshot::Sender<()>),
    Stop(oneshot::Sender<JobStatus>),
}

/// An instance on a current-thread runtime of its own, in its own OS thread.
struct Freezable {
    commands: mpsc::UnboundedSender<Command>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Freezable {
    fn start(holder: &str, job: &Job<String>, store: &InMemoryLockProvider) -> Self {
        let (commands, mut receiver) = mpsc::unbounded_channel();
        let (holder, job, store) = (holder.to_owned(), job.clone(), store.clone());
        let (started, ready) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let scheduler = start(&holder, &job, &store).await;
                started.send(()).unwrap();
                while let Some(command) = receiver.recv().await {
                    match command {
                        Command::Freeze(duration, done) => {
                            std::thread::sleep(duration);
                            let _ = done.send(());
                        }
                        Command::Stop(done) => {
                            scheduler.shutdown().await;
                            let _ = done.send(scheduler.status().remove(0));
                            return;
                        }
                    }
                }
            });
        });
        ready.recv().expect("instance started");
        Freezable {
            commands,
            thread: Some(thread),
        }
    }

    /// Freezes the instance for `duration`; returns once it runs again.
    async fn freeze(&self, duration: Duration) {
        let (done, resumed) = oneshot::channel();
        self.commands.send(Command::Freeze(duration, done)).unwrap();
        resumed.await.unwrap();
    }

    async fn stop(mut self) -> JobStatus {
        let (done, status) = oneshot::channel();
        self.commands.send(Command::Stop(done)).unwrap();
        let status = status.await.unwrap();
        self.thread.take().unwrap().join().unwrap();
        status
    }
}

/// Sleeps until `fraction` of a second past the next whole second of the wall clock.
async fn sleep_until_phase(fraction: f64) {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let into = now.as_secs_f64().fract();
    let wait = (1.0 + fraction - into) % 1.0;
    tokio::time::sleep(Duration::from_secs_f64(wait)).await;
}

fn second_of(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).unwrap().as_secs()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_instance_never_reruns_a_tick_another_instance_ran() {
    // The failure this guards against: on resume the paused instance ran a tick it had missed
    // while paused, 0.6 s and more after another instance had run that second's tick, whose
    // lock_at_least_for (500 ms) had passed; and by holding the lock for 500 ms it made the
    // next second's tick skip everywhere.
    let store = InMemoryLockProvider::new();
    let runs: Runs = Arc::default();
    let job = per_second_job(&runs, Duration::from_millis(500));
    let steady = start("steady", &job, &store).await;
    let paused = Freezable::start("paused", &job, &store);
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Freeze at .2 of a second for 2.5 s: it resumes at .7, after lock_at_least_for.
    sleep_until_phase(0.2).await;
    paused.freeze(Duration::from_millis(2_500)).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let paused_status = paused.stop().await;
    steady.shutdown().await;

    let runs = runs.lock().unwrap().clone();
    let mut seconds: Vec<u64> = runs.iter().map(|run| second_of(run.at)).collect();
    seconds.sort_unstable();
    let mut unique = seconds.clone();
    unique.dedup();
    assert_eq!(seconds, unique, "a tick ran twice: {runs:#?}");
    assert!(
        paused_status.missed_ticks >= 1,
        "the ticks the pause passed over are reported as missed: {paused_status:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_leader_does_no_leader_work_once_its_deadline_passed() {
    let store = InMemoryLockProvider::new();
    let runs: Runs = Arc::default();
    let job = leader_job(&runs);
    let paused = Freezable::start("paused", &job, &store);
    // The paused instance leads first.
    while !runs
        .lock()
        .unwrap()
        .iter()
        .any(|run| run.holder == "paused")
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let other = start("other", &job, &store).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Frozen past its lease (1.5 s) and renew deadline (1 s): the other instance is elected.
    paused.freeze(Duration::from_millis(3_000)).await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let paused_status = paused.stop().await;
    other.shutdown().await;

    let runs = runs.lock().unwrap().clone();
    let took_over = runs
        .iter()
        .find(|run| run.holder == "other")
        .unwrap_or_else(|| panic!("the other instance never led: {runs:#?}"))
        .at;
    let late: Vec<&Run> = runs
        .iter()
        .filter(|run| run.holder == "paused" && run.at >= took_over)
        .collect();
    assert!(
        late.is_empty(),
        "the resumed leader worked after the new leader started: {late:#?}"
    );
    assert!(
        paused_status.executions >= 1,
        "it led before the pause: {paused_status:?}"
    );
}
