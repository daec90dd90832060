//! The worker: one OS process acting as one instance of a service. It runs a scheduler with one
//! locked cron job per lock name (or campaigns in a leader election), journals every execution
//! behind the fencing guard, and reports each event as a line on stdout. It stops gracefully
//! when its stdin closes or on SIGTERM.

mod options;
mod report;
mod state;

use std::io::Write as _;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::Context as _;
use shedlock::{
    ElectionConfig, Job, JobLock, JobRegistry, LeaderElection, LeaderState, LockEvent,
    OnInterrupted, RunContext, Schedule, Scheduler, SchedulerConfig,
};
use tokio::io::AsyncReadExt as _;

use crate::event::{Counters, Event, now_us, unix_us};
use crate::store::Store;
pub use options::{LeaderWork, WorkerArgs, WorkerOptions};
use report::StatusReporter;
use state::WorkerState;

/// Prints one event line; a closed stdout (the supervisor is gone) is ignored, never a panic.
pub fn emit(event: &Event) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{event}");
    let _ = out.flush();
}

/// Runs a worker until its stdin closes or SIGTERM, then shuts down gracefully.
///
/// # Errors
/// When the database cannot be reached (after the configured retries) or the scheduler does not
/// start; a `fatal` line says why.
pub async fn run_worker(options: WorkerOptions) -> anyhow::Result<()> {
    let result = async {
        let store = connect(&options).await?;
        match options.election {
            Some(config) => run_election(&options, &store, config).await,
            None => run_scheduler(&options, store).await,
        }
    }
    .await;
    if let Err(error) = &result {
        emit(&Event::Fatal {
            error: format!("{error:#}"),
        });
    }
    result
}

async fn connect(options: &WorkerOptions) -> anyhow::Result<Store> {
    let mut attempt = 1;
    loop {
        match Store::connect(&options.store).await {
            Ok(store) => return Ok(store),
            Err(error) => {
                emit(&Event::ConnectFailed {
                    attempt,
                    error: format!("{error:#}"),
                });
                if attempt > options.connect_retries {
                    return Err(error);
                }
                let backoff = Duration::from_millis(250 << attempt.min(4));
                tracing::warn!(attempt, ?backoff, error = %format!("{error:#}"), "cannot connect, retrying");
                tokio::time::sleep(backoff).await;
                attempt += 1;
            }
        }
    }
}

/// Waits until stdin reaches end of file (the supervisor closed it) or SIGTERM arrives.
pub(crate) async fn stop_requested() {
    let stdin_closed = async {
        let mut stdin = tokio::io::stdin();
        let mut buf = [0u8; 64];
        while let Ok(n) = stdin.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
    };
    let sigterm = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut sigterm) => {
                sigterm.recv().await;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM; stopping on end of stdin only");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        () = stdin_closed => {}
        () = sigterm => {}
    }
}

async fn run_scheduler(options: &WorkerOptions, store: Store) -> anyhow::Result<()> {
    let tick_secs = options.tick.as_secs();
    let cron = if tick_secs == 1 {
        "* * * * * *".to_owned()
    } else {
        format!("*/{tick_secs} * * * * *")
    };
    let state = Arc::new(WorkerState {
        store: store.clone(),
        journal: options.store.journal_table.clone(),
        holder: options.store.holder.clone(),
        tick_us: i64::try_from(options.tick.as_micros())?,
        job: options.job,
        counters: Default::default(),
        live: Default::default(),
        ticks: Default::default(),
    });
    let mut registry = JobRegistry::new(Arc::clone(&state));
    for lock in &options.locks {
        let name = lock.clone();
        let job = Job::new(
            lock.clone(),
            Schedule::cron(&cron)?,
            move |state: Arc<WorkerState>| {
                // A rerun belongs to the tick it runs again, not to the latest attempt's.
                let tick = RunContext::current()
                    .and_then(|run| run.tick())
                    .map_or_else(
                        || state.tick_of(&name),
                        |fire| unix_us(fire) / state.tick_us,
                    );
                let name = name.clone();
                async move { state.run_job(&name, tick).await }
            },
        )
        .with_lock(
            JobLock::new(lock.clone())?
                .lock_at_most_for(options.lease)?
                .lock_at_least_for(options.at_least)?
                .keep_alive(options.keep_alive)
                .on_interrupted(if options.rerun {
                    OnInterrupted::Rerun
                } else {
                    OnInterrupted::Skip
                }),
        );
        registry = registry.add(job);
    }
    let mut config = SchedulerConfig {
        holder: Some(options.store.holder.clone()),
        shutdown_grace_period: options.job + Duration::from_secs(5),
        shutdown_cancel_period: Duration::from_secs(2),
        run_lease: options.run_lease,
        ..SchedulerConfig::default()
    };
    // The leader-only job reports the term it runs in: read from the scheduler's election at
    // the moment the job starts, once the scheduler exists.
    let leader_election: Arc<OnceLock<Arc<Scheduler>>> = Arc::default();
    if let Some(work) = options.leader_work {
        let scheduler = Arc::clone(&leader_election);
        let job = Job::new(
            LEADER_JOB,
            Schedule::fixed_rate(work.every)?,
            move |_: Arc<WorkerState>| {
                let state = scheduler
                    .get()
                    .and_then(|s| s.election(LEADER_JOB))
                    .map(LeaderElection::state);
                async move {
                    if let Some(LeaderState::Leader { term }) = state {
                        emit(&Event::LeaderWork { term, at: now_us() });
                    }
                }
            },
        )
        .leader_only(LEADER_JOB)?;
        registry = registry.add(job);
        config.leader_election = work.timing;
    }
    let listener = {
        let state = Arc::clone(&state);
        move |event: &LockEvent<'_>| state.on_event(event)
    };
    let scheduler = Scheduler::builder()
        .shared_provider(store.provider())
        .config(config)
        .listener(listener)
        .registry(registry)
        .start()
        .await
        .context("start the scheduler")?;
    let scheduler = Arc::new(scheduler);
    let _ = leader_election.set(Arc::clone(&scheduler));
    emit(&Event::Ready {
        holder: options.store.holder.clone(),
        pid: std::process::id(),
    });
    // Election lines are printed as the state changes, also while shutting down (a leader
    // steps down when it resigns, before it releases its lease).
    let election_lines = scheduler.election(LEADER_JOB).map(|election| {
        let changes = election.subscribe();
        tokio::spawn(report::watch_election(changes))
    });
    let mut status = StatusReporter::default();
    status.run_until(&scheduler, &state, stop_requested()).await;
    let report = scheduler.shutdown().await;
    if let Some(lines) = election_lines {
        // The leader stepped down during shutdown, a release round trip ago: its line is out.
        // (The watch itself stays open: the leader job still holds the scheduler.)
        tokio::task::yield_now().await;
        lines.abort();
    }
    status.report(&scheduler, &state);
    tracing::info!(?report, "worker stopped");
    emit(&Event::Summary(state.counters()));
    Ok(())
}

/// The leader-only job's name, and its election's.
const LEADER_JOB: &str = "leader";

async fn run_election(
    options: &WorkerOptions,
    store: &Store,
    config: ElectionConfig,
) -> anyhow::Result<()> {
    let name = options
        .locks
        .first()
        .context("an election needs a name (--locks)")?;
    let election = LeaderElection::builder(name.clone(), store.provider())
        .config(config)
        .on_elected(|term| emit(&Event::Leader { term, at: now_us() }))
        .on_revoked(|| emit(&Event::Follower { at: now_us() }))
        .start()?;
    emit(&Event::Ready {
        holder: options.store.holder.clone(),
        pid: std::process::id(),
    });
    // Work as a user of `LeaderElection` would: ask at the moment of acting.
    let work = async {
        let Some(work) = options.leader_work else {
            return std::future::pending().await;
        };
        let mut every = tokio::time::interval(work.every);
        loop {
            every.tick().await;
            if let LeaderState::Leader { term } = election.state() {
                emit(&Event::LeaderWork { term, at: now_us() });
            }
        }
    };
    tokio::select! {
        () = stop_requested() => {}
        () = work => {}
    }
    election.resign().await;
    emit(&Event::Summary(Counters::default()));
    Ok(())
}
