//! Building a scheduler: validating the configuration and jobs, starting elections and the
//! one timer of all its jobs.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::Scheduler;
use super::roster::{Roster, no_records, prepare};
use super::runner::Timer;
use super::runtime::{PreparedJob, Runtime, ShutdownCounters};
use crate::{
    Clock, Elector, Error, Job, JobRegistry, LeaderElection, LockEvent, LockListener, LockProvider,
    LockingTaskExecutor, SchedulerConfig, SystemClock,
};
use shedlock_core::Fleet;

/// Builds a [`Scheduler`]; see [`Scheduler::builder`].
pub struct SchedulerBuilder<S> {
    provider: Option<Arc<dyn LockProvider>>,
    elector: Option<Arc<dyn Elector>>,
    config: SchedulerConfig,
    /// The jobs and their state (none, over `()`, until [`registry`](Self::registry)).
    registry: JobRegistry<S>,
    listeners: Vec<Arc<dyn LockListener>>,
    clock: Arc<dyn Clock>,
    /// Publish the jobs to the provider's board, polling it this often.
    publish_jobs: Option<Duration>,
}

impl SchedulerBuilder<()> {
    pub(super) fn new() -> Self {
        SchedulerBuilder {
            provider: None,
            elector: None,
            config: SchedulerConfig::default(),
            registry: JobRegistry::new(()),
            listeners: Vec::new(),
            clock: Arc::new(SystemClock),
            publish_jobs: None,
        }
    }
}

impl<S> SchedulerBuilder<S> {
    /// The lock store for locked jobs. Without one, only unlocked jobs may be registered.
    pub fn provider(mut self, provider: impl LockProvider) -> Self {
        self.provider = Some(Arc::new(provider));
        self
    }

    /// A shared lock store.
    pub fn shared_provider(mut self, provider: Arc<dyn LockProvider>) -> Self {
        self.provider = Some(provider);
        self
    }

    /// Where leader-only jobs' elections run (the lock provider by default), e.g. ZooKeeper's
    /// elector while locks stay on a SQL database.
    pub fn elector(mut self, elector: impl Elector) -> Self {
        self.elector = Some(Arc::new(elector));
        self
    }

    /// The configuration (defaults otherwise).
    pub fn config(mut self, config: SchedulerConfig) -> Self {
        self.config = config;
        self
    }

    /// A listener for lock events of every job (acquired, skipped, released, …).
    pub fn listener(mut self, listener: impl LockListener) -> Self {
        self.listeners.push(Arc::new(listener));
        self
    }

    /// The wall clock cron schedules are read on (the system clock by default; tests use
    /// [`TokioClock`](shedlock_core::TokioClock) with paused time).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The jobs to run and their state. More jobs over the same state can be added once the
    /// scheduler runs ([`Scheduler::job_control`]); without a registry, the state is `()`.
    pub fn registry<T>(self, registry: JobRegistry<T>) -> SchedulerBuilder<T> {
        SchedulerBuilder {
            provider: self.provider,
            elector: self.elector,
            config: self.config,
            registry,
            listeners: self.listeners,
            clock: self.clock,
            publish_jobs: self.publish_jobs,
        }
    }

    /// Publishes this scheduler's jobs to the fleet's board in the provider's store
    /// ([`LockProvider::board`]; every store of this workspace keeps one, SQL in a table
    /// `create_schema` makes), beats every second while it runs and withdraws at shutdown; and
    /// heeds the fleet's switches: a job paused there (`shedlock jobs pause`, the dashboard,
    /// [`Fleet::pause`](shedlock_core::Fleet::pause)) starts no tick here from the next poll on
    /// (and from the first tick on after a restart), and a run asked for
    /// ([`Fleet::run_now`](shedlock_core::Fleet::run_now)) is run once by one instance.
    /// Checked at [`start`](Self::start): a provider without a board is an error.
    pub fn publish_jobs(mut self) -> Self {
        self.publish_jobs = Some(super::fleet::DEFAULT_POLL);
        self
    }

    /// [`publish_jobs`](Self::publish_jobs), polling the board every `interval` instead of
    /// every second (50 ms to 1 h): how soon a pause or a run asked for is seen; an instance
    /// counts as gone after ten intervals without a beat.
    pub fn publish_jobs_every(mut self, interval: Duration) -> Self {
        self.publish_jobs = Some(interval);
        self
    }
}

impl<S: Clone + Send + Sync + 'static> SchedulerBuilder<S> {
    /// Validates the configuration and every job, then starts the scheduler's timer on the
    /// current tokio runtime: one task for all jobs, and one per tick in flight.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the field (and job) that is wrong; [`Error::Scheduler`]
    /// for duplicate job names or a locked job without a provider.
    pub async fn start(self) -> Result<Scheduler, Error> {
        let config = self.config;
        config.validate()?;
        if let Some(poll) = self.publish_jobs {
            super::fleet::validate_poll(poll)?;
        }
        let locks_released = Arc::new(AtomicUsize::new(0));
        let shutdown = CancellationToken::new();
        let executor = self.provider.map(|provider| {
            if let Some(holder) = &config.holder
                && holder != provider.holder()
            {
                tracing::warn!(
                    configured = %holder, provider = provider.holder(),
                    "config.holder differs from the provider's holder; the provider's is used"
                );
            }
            let counting = ReleaseCounter {
                shutdown: shutdown.clone(),
                released: Arc::clone(&locks_released),
            };
            self.listeners
                .into_iter()
                .fold(
                    LockingTaskExecutor::from_shared(provider),
                    LockingTaskExecutor::with_shared_listener,
                )
                .with_listener(counting)
        });
        let (state, registered) = (self.registry.state, self.registry.jobs);
        let elector = self.elector.or_else(|| {
            let provider = Arc::clone(executor.as_ref()?.provider());
            Some(Arc::new(provider) as Arc<dyn Elector>)
        });
        let elections = start_elections(&registered, &config, elector.as_ref())?;
        let prepared = prepare_jobs(registered, &config, executor.is_some(), &elections)?;
        let records = executor.as_ref().is_some_and(|executor| {
            let provider = executor.provider();
            provider.run_log().is_some() && provider.inspector().is_some()
        });
        if let Some(job) = prepared.iter().find(|job| job.reruns() && !records) {
            return Err(no_records(&job.name));
        }
        let runtime = Arc::new(Runtime {
            executor,
            zone: config.zone()?,
            misfire_threshold: config.misfire_threshold,
            clock: self.clock,
            shutdown,
            stop: CancellationToken::new(),
            abort: CancellationToken::new(),
            counters: ShutdownCounters {
                locks_released,
                ..ShutdownCounters::default()
            },
            tasks: tokio_util::task::TaskTracker::new(),
            paused: super::fleet::PausedJobs::default(),
        });
        let fleet = match self.publish_jobs {
            Some(poll) => Some(fleet_link(&runtime, poll).await?),
            None => None,
        };

        let count = prepared.len();
        let (commands, changes) = match config.enabled {
            true => {
                let (sender, receiver) = mpsc::unbounded_channel();
                (Some(sender), Some(receiver))
            }
            false => (None, None),
        };
        let (roster, placed) = Roster::new(
            state,
            Arc::clone(&runtime),
            config.clone(),
            elections.clone(),
            records,
            prepared,
            commands,
        );
        let roster = Arc::new(roster);
        let mut loops = JoinSet::new();
        if let Some(link) = fleet {
            let roster = Arc::clone(&roster) as Arc<dyn super::roster::AnyRoster>;
            loops.spawn(super::fleet::run(link, roster, Arc::clone(&runtime)));
        }
        if let Some(changes) = changes {
            let (timer, ended) = Timer::new(Arc::clone(&roster));
            loops.spawn(timer.run(ended, placed, changes));
        }
        tracing::info!(jobs = count, enabled = config.enabled, "scheduler started");
        Ok(Scheduler {
            runtime,
            elections: elections.into_values().collect(),
            config,
            roster,
            loops: Mutex::new(Some(loops)),
        })
    }
}

/// The fleet's board of the runtime's provider, with the switches as they are now: a job
/// paused across the fleet does not start here, not even its first tick.
async fn fleet_link(runtime: &Runtime, poll: Duration) -> Result<super::fleet::FleetLink, Error> {
    let provider = runtime
        .executor
        .as_ref()
        .map(|executor| Arc::clone(executor.provider()));
    let Some(provider) = provider else {
        return Err(Error::Scheduler(
            "publish_jobs needs a lock provider: the fleet's board is kept in its store".into(),
        ));
    };
    let instance = provider.holder().to_owned();
    let Some(fleet) = Fleet::of_provider(provider) else {
        return Err(Error::Scheduler(
            "publish_jobs: the provider keeps no board of the fleet's jobs".into(),
        ));
    };
    match fleet.switches().await {
        Ok(switches) => runtime.paused.set(switches.paused.into_keys().collect()),
        // Started while the store is away: the pauses are heeded from the first poll that
        // reads them.
        Err(error) => tracing::warn!(%error, "could not read the fleet's switches at start"),
    }
    Ok(super::fleet::FleetLink {
        fleet,
        poll,
        instance,
    })
}

/// One election per distinct leader name of the leader-only jobs, on the scheduler's elector.
fn start_elections<S>(
    jobs: &[Job<S>],
    config: &SchedulerConfig,
    elector: Option<&Arc<dyn Elector>>,
) -> Result<HashMap<String, Arc<LeaderElection>>, Error> {
    let mut elections = HashMap::new();
    for job in jobs {
        let Some(name) = &job.leader else { continue };
        if elections.contains_key(name.as_ref()) || !config.enabled {
            continue;
        }
        let Some(elector) = elector else {
            return Err(Error::Scheduler(format!(
                "job `{}` follows election `{name}` but the scheduler has neither a lock provider \
                 nor an elector",
                job.name
            )));
        };
        let election = LeaderElection::builder_shared(name.to_string(), Arc::clone(elector))
            .config(config.leader_election)
            .start()?;
        elections.insert(name.to_string(), Arc::new(election));
    }
    Ok(elections)
}

/// The jobs, moved (100,000 jobs are not copied), each with its lock and thresholds resolved.
fn prepare_jobs<S>(
    jobs: Vec<Job<S>>,
    config: &SchedulerConfig,
    has_provider: bool,
    elections: &HashMap<String, Arc<LeaderElection>>,
) -> Result<Vec<PreparedJob<S>>, Error> {
    let mut names = HashSet::new();
    jobs.into_iter()
        .map(|job| {
            if !names.insert(job.name.clone()) {
                return Err(Error::Scheduler(format!(
                    "two jobs are named `{}`; job names must be unique",
                    job.name
                )));
            }
            prepare(job, config, has_provider, elections)
        })
        .collect()
}

/// Counts locks released once shutdown has begun, for the report.
struct ReleaseCounter {
    shutdown: CancellationToken,
    released: Arc<AtomicUsize>,
}

impl LockListener for ReleaseCounter {
    fn on_event(&self, event: &LockEvent<'_>) {
        if matches!(event, LockEvent::Released(_)) && self.shutdown.is_cancelled() {
            self.released.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl<S> fmt::Debug for SchedulerBuilder<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SchedulerBuilder")
            .field("provider", &self.provider)
            .field("elector", &self.elector)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}
