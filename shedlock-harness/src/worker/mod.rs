//! The worker: one OS process acting as one instance of a service. It runs a scheduler with one
//! locked cron job per lock name (or campaigns in a leader election), journals every execution
//! behind the fencing guard, and reports each event as a line on stdout. It stops gracefully
//! when its stdin closes or on SIGTERM.

mod options;

use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use shedlock::{
    ElectionConfig, Job, JobLock, JobRegistry, LeaderElection, LockContext, LockEvent, Schedule,
    Scheduler, SchedulerConfig,
};
use tokio::io::AsyncReadExt as _;

use crate::event::{Counters, Event, WriteOutcome, now_us, unix_us};
use crate::store::{JournalRow, Store};
pub use options::WorkerOptions;

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

/// Shared by every job of a worker.
#[derive(Debug)]
struct WorkerState {
    store: Store,
    journal: String,
    holder: String,
    tick_us: i64,
    job: Duration,
    counters: [AtomicU64; 7],
}

/// Indices into `WorkerState::counters`.
#[derive(Debug, Clone, Copy)]
enum Count {
    Attempts,
    Acquired,
    Skipped,
    Errors,
    Accepted,
    Rejected,
    Failed,
}

impl WorkerState {
    fn count(&self, which: Count) {
        self.counters[which as usize].fetch_add(1, Ordering::Relaxed);
    }

    fn counters(&self) -> Counters {
        let c = |which: Count| self.counters[which as usize].load(Ordering::Relaxed);
        Counters {
            attempts: c(Count::Attempts),
            acquired: c(Count::Acquired),
            skipped: c(Count::Skipped),
            errors: c(Count::Errors),
            accepted: c(Count::Accepted),
            rejected: c(Count::Rejected),
            failed: c(Count::Failed),
        }
    }

    /// A tick fired: count it and return its number. The scheduler calls the job function at
    /// the tick, before trying the lock, so this sees every attempt.
    fn attempt(&self, lock: &str) -> i64 {
        let at = now_us();
        let tick = at / self.tick_us;
        self.count(Count::Attempts);
        emit(&Event::Attempt {
            lock: lock.to_owned(),
            tick,
            at,
        });
        tick
    }

    fn on_event(&self, event: &LockEvent<'_>) {
        let at = now_us();
        match event {
            LockEvent::Acquired(lease) => {
                self.count(Count::Acquired);
                emit(&Event::Acquired {
                    lock: lease.name().to_owned(),
                    token: lease.fencing_token(),
                    at,
                    since: unix_us(lease.locked_at()),
                    until: unix_us(lease.lock_until()),
                });
            }
            LockEvent::Skipped { lock_name } => {
                self.count(Count::Skipped);
                emit(&Event::Skipped {
                    lock: (*lock_name).to_owned(),
                    at,
                });
            }
            LockEvent::AcquireFailed { lock_name, error } => {
                self.count(Count::Errors);
                emit(&Event::AcquireFailed {
                    lock: (*lock_name).to_owned(),
                    at,
                    error: error.to_string(),
                });
            }
            LockEvent::Lost(lease) => emit(&Event::Lost {
                lock: lease.name().to_owned(),
                token: lease.fencing_token(),
                at,
            }),
            _ => {}
        }
    }

    /// The job body: work for `job` (or until the lost-lock signal), then journal the execution
    /// behind the fencing guard. The write is attempted even after the signal, on purpose: the
    /// guard, not the job's good manners, must keep a stale holder out.
    async fn run_job(&self, lock: &str, tick: i64) -> Result<(), String> {
        let context = LockContext::current().map_err(|e| e.to_string())?;
        let token = context.fencing_token();
        let start = now_us();
        emit(&Event::Start {
            lock: lock.to_owned(),
            token,
            at: start,
        });
        tokio::select! {
            biased;
            () = context.cancelled() => {}
            () = tokio::time::sleep(self.job) => {}
        }
        let lost = context.is_lost();
        let row = JournalRow {
            id: 0,
            lock: lock.to_owned(),
            token: i64::try_from(token).unwrap_or(i64::MAX),
            holder: self.holder.clone(),
            tick,
            start,
            end: now_us(),
        };
        let outcome = self.store.fenced_write(&self.journal, &row).await;
        self.count(match outcome {
            WriteOutcome::Accepted => Count::Accepted,
            WriteOutcome::Rejected => Count::Rejected,
            WriteOutcome::Failed(_) => Count::Failed,
        });
        emit(&Event::Write {
            lock: row.lock,
            token,
            tick,
            start,
            end: row.end,
            lost,
            outcome,
        });
        Ok(())
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
    });
    let mut registry = JobRegistry::new(Arc::clone(&state));
    for lock in &options.locks {
        let name = lock.clone();
        let job = Job::new(
            lock.clone(),
            Schedule::cron(&cron)?,
            move |state: Arc<WorkerState>| {
                let tick = state.attempt(&name);
                let name = name.clone();
                async move { state.run_job(&name, tick).await }
            },
        )
        .with_lock(
            JobLock::new(lock.clone())?
                .lock_at_most_for(options.lease)?
                .lock_at_least_for(options.at_least)?
                .keep_alive(options.keep_alive),
        );
        registry = registry.add(job);
    }
    let listener = {
        let state = Arc::clone(&state);
        move |event: &LockEvent<'_>| state.on_event(event)
    };
    let config = SchedulerConfig {
        holder: Some(options.store.holder.clone()),
        shutdown_grace_period: options.job + Duration::from_secs(5),
        shutdown_cancel_period: Duration::from_secs(2),
        ..SchedulerConfig::default()
    };
    let scheduler = Scheduler::builder()
        .shared_provider(store.provider())
        .config(config)
        .listener(listener)
        .registry(registry)
        .start()
        .await
        .context("start the scheduler")?;
    emit(&Event::Ready {
        holder: options.store.holder.clone(),
        pid: std::process::id(),
    });
    stop_requested().await;
    let report = scheduler.shutdown().await;
    tracing::info!(?report, "worker stopped");
    emit(&Event::Summary(state.counters()));
    Ok(())
}

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
    stop_requested().await;
    election.resign().await;
    emit(&Event::Summary(Counters::default()));
    Ok(())
}
