//! The scheduler's side of the fleet's board: it publishes the jobs this instance carries,
//! beats while it runs, heeds pauses and takes the runs operators ask for.

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use tokio::time::{Instant, MissedTickBehavior};

use super::roster::AnyRoster;
use super::runtime::Runtime;
use super::schedule::ScheduleKind;
use crate::{Error, TaskResult};
use shedlock_core::{Fleet, JobDefinition};

/// How often an instance beats and polls the switches unless the builder says otherwise.
pub(crate) const DEFAULT_POLL: Duration = Duration::from_secs(1);

/// An instance that missed this many polls counts as gone.
const ALIVE_POLLS: u32 = 10;

/// Publish the whole list again this often even when nothing seems changed (a definition
/// removed by hand, a sweep that raced a restart).
const REPUBLISH: Duration = Duration::from_secs(60);

/// Remove what dead instances published this often (each instance, at a random offset).
const SWEEP: Duration = Duration::from_secs(600);

/// How long a run asked for waits for its job's lock (a tick of it running elsewhere) before
/// it is given up.
const RUN_NOW_PATIENCE: Duration = Duration::from_secs(300);

/// What a scheduler publishing to a fleet's board needs.
pub(crate) struct FleetLink {
    pub(crate) fleet: Fleet,
    pub(crate) poll: Duration,
    /// This instance's name: its provider's holder.
    pub(crate) instance: String,
}

/// The jobs paused across the fleet, as this instance last polled them.
#[derive(Debug, Default)]
pub(crate) struct PausedJobs {
    names: RwLock<BTreeSet<String>>,
}

impl PausedJobs {
    pub(crate) fn contains(&self, job: &str) -> bool {
        let names = self.names.read().unwrap_or_else(PoisonError::into_inner);
        !names.is_empty() && names.contains(job)
    }

    pub(crate) fn set(&self, paused: BTreeSet<String>) {
        *self.names.write().unwrap_or_else(PoisonError::into_inner) = paused;
    }
}

/// Validates the poll interval a builder was given.
pub(crate) fn validate_poll(poll: Duration) -> Result<(), Error> {
    if poll < Duration::from_millis(50) || poll > Duration::from_secs(3600) {
        return Err(Error::invalid_config(
            "fleet_poll_interval",
            format!(
                "must be between 50ms and 1h, got {}",
                humantime::format_duration(poll)
            ),
        ));
    }
    Ok(())
}

/// Publishes, beats, polls and takes runs until shutdown; then withdraws this instance.
pub(crate) async fn run(link: FleetLink, roster: Arc<dyn AnyRoster>, runtime: Arc<Runtime>) {
    let FleetLink {
        fleet,
        poll,
        instance,
    } = link;
    let alive_for = poll * ALIVE_POLLS;
    let mut interval = tokio::time::interval(poll);
    interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut published: Option<(u64, Instant)> = None;
    let mut taken = HashSet::new();
    // Instances sweep at offsets of their own (from their names), not all at once.
    let offset = {
        use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
        BuildHasherDefault::<DefaultHasher>::default().hash_one(&instance) % 1000
    };
    let mut sweep_at = Instant::now() + SWEEP.mul_f64(offset as f64 / 1000.0);
    loop {
        tokio::select! {
            () = runtime.shutdown.cancelled() => break,
            _ = interval.tick() => {}
        }
        let changes = roster.changes();
        let due = published.is_none_or(|(last, at)| last != changes || at.elapsed() >= REPUBLISH);
        let beat = if due {
            let jobs = roster.definitions();
            let result = fleet.publish(&instance, &jobs, alive_for).await;
            if result.is_ok() {
                published = Some((changes, Instant::now()));
            }
            result
        } else {
            fleet.heartbeat(&instance, alive_for).await
        };
        if let Err(error) = beat {
            published = None;
            tracing::warn!(%error, "could not publish this instance's jobs to the fleet's board");
        }
        match fleet.switches().await {
            Ok(switches) => {
                runtime.paused.set(switches.paused.into_keys().collect());
                for (job, request) in switches.runs {
                    if request.taken_by.is_some() || !taken.insert(request.id) {
                        continue;
                    }
                    if !roster.carries(&job) {
                        taken.remove(&request.id);
                        continue;
                    }
                    match fleet.take_run(&request, &instance).await {
                        Ok(true) => {
                            tracing::info!(job, by = request.by, "running a job asked for now");
                            let roster = Arc::clone(&roster);
                            runtime
                                .tasks
                                .spawn(run_asked(roster, job, Arc::clone(&runtime)));
                        }
                        Ok(false) => {}
                        Err(error) => {
                            // Maybe taken, maybe not: the next poll tells.
                            taken.remove(&request.id);
                            tracing::warn!(job, %error, "could not take a run asked for");
                        }
                    }
                }
            }
            // The pauses last seen stay in force while the board cannot be read.
            Err(error) => tracing::warn!(%error, "could not read the fleet's switches"),
        }
        if Instant::now() >= sweep_at {
            sweep_at = Instant::now() + SWEEP;
            if let Err(error) = fleet.sweep().await {
                tracing::debug!(%error, "could not sweep the fleet's board");
            }
        }
    }
    match tokio::time::timeout(Duration::from_secs(5), fleet.withdraw(&instance)).await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => tracing::warn!(%error, "could not withdraw from the fleet's board"),
        Err(_) => tracing::warn!("withdrawing from the fleet's board took over 5s; left to expire"),
    }
}

/// Runs `job` once, as asked: under its lock, waiting while another instance holds it (a tick
/// of it running), so that a run taken is a run made.
async fn run_asked(roster: Arc<dyn AnyRoster>, job: String, runtime: Arc<Runtime>) {
    let give_up = Instant::now() + RUN_NOW_PATIENCE;
    let mut wait = Duration::from_millis(100);
    loop {
        let Some(run) = roster.run_now(&job) else {
            tracing::warn!(job, "a run asked for was not made: the job was removed");
            return;
        };
        match run.await {
            Ok(TaskResult::Executed(Ok(()))) => {
                tracing::info!(job, "the run asked for succeeded");
                return;
            }
            Ok(TaskResult::Executed(Err(error))) => {
                tracing::warn!(job, error, "the run asked for failed");
                return;
            }
            Ok(TaskResult::Skipped) if Instant::now() < give_up => {}
            Ok(TaskResult::Skipped) => {
                tracing::warn!(job, "a run asked for was not made: its lock stayed held");
                return;
            }
            Err(error) => {
                tracing::warn!(job, %error, "a run asked for was not made");
                return;
            }
        }
        tokio::select! {
            () = runtime.shutdown.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
        wait = (wait * 2).min(Duration::from_secs(2));
    }
}

/// What this instance publishes of a job: a cron schedule as its expression and the zone it is
/// read in (its own, else the scheduler's `default_zone`), other schedules as they print.
pub(crate) fn definition(
    name: &str,
    schedule: &super::schedule::Schedule,
    default_zone: chrono_tz::Tz,
    lock: Option<&crate::LockConfiguration>,
    leader: Option<&str>,
) -> JobDefinition {
    let mut definition = match &schedule.kind {
        ScheduleKind::Cron {
            expression, zone, ..
        } => JobDefinition::new(name, expression.to_string())
            .with_zone(zone.unwrap_or(default_zone).name()),
        _ => JobDefinition::new(name, schedule.to_string()),
    };
    if let Some(lock) = lock {
        definition = definition.with_lock(
            lock.name(),
            lock.lock_at_most_for(),
            lock.lock_at_least_for(),
        );
    }
    if let Some(leader) = leader {
        definition = definition.with_policy(format!("leader only ({leader})"));
    }
    definition
}
