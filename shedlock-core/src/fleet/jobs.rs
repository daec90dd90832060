//! What a fleet publishes of its jobs and what operators switch, kept on a [`Board`].

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::board::{Board, BoardCondition, BoardEntry};
use crate::{Error, LockProvider, MAX_HOLDER_LEN, MAX_LOCK_NAME_LEN};

/// The board's keys: `carrier/<instance>` (its heartbeat), `carried/<instance>/<job>` (a
/// definition), `paused/<job>`, `run/<job>`; names escaped so that none holds a `/`.
const CARRIER: &str = "carrier/";
const CARRIED: &str = "carried/";
const PAUSED: &str = "paused/";
const RUN: &str = "run/";

/// A job as one instance carries it: what it publishes to the fleet's [`Board`].
///
/// ```
/// use std::time::Duration;
/// use shedlock_core::JobDefinition;
///
/// let report = JobDefinition::new("report", "0 0 6 * * *")
///     .with_zone("Europe/Paris")
///     .with_lock("report", Duration::from_secs(600), Duration::ZERO);
/// let moved = report.clone().with_zone("UTC");
/// assert_ne!(report.fingerprint(), moved.fingerprint(), "a rolling deploy shows");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobDefinition {
    /// The job's name, unique in its scheduler.
    pub name: String,
    /// Its schedule as written (a cron expression, `every 10s`, …).
    pub schedule: String,
    /// The zone its cron schedule is read in; `None`: UTC or not a cron schedule.
    pub zone: Option<String>,
    /// The lock it runs under; `None`: it runs unlocked.
    pub lock: Option<String>,
    /// Its lock's `lock_at_most_for`.
    pub lock_at_most_for: Option<Duration>,
    /// Its lock's `lock_at_least_for`.
    pub lock_at_least_for: Option<Duration>,
    /// How it runs beyond its schedule (overlap, retries, leader only, …), as text.
    pub policy: String,
}

impl JobDefinition {
    /// A job `name` on `schedule`, unlocked, with no policy.
    pub fn new(name: impl Into<String>, schedule: impl Into<String>) -> Self {
        JobDefinition {
            name: name.into(),
            schedule: schedule.into(),
            zone: None,
            lock: None,
            lock_at_most_for: None,
            lock_at_least_for: None,
            policy: String::new(),
        }
    }

    /// Read in `zone`.
    #[must_use]
    pub fn with_zone(mut self, zone: impl Into<String>) -> Self {
        self.zone = Some(zone.into());
        self
    }

    /// Run under the lock `name` with these durations.
    #[must_use]
    pub fn with_lock(
        mut self,
        name: impl Into<String>,
        lock_at_most_for: Duration,
        lock_at_least_for: Duration,
    ) -> Self {
        self.lock = Some(name.into());
        self.lock_at_most_for = Some(lock_at_most_for);
        self.lock_at_least_for = Some(lock_at_least_for);
        self
    }

    /// With `policy` (free text shown to operators).
    #[must_use]
    pub fn with_policy(mut self, policy: impl Into<String>) -> Self {
        self.policy = policy.into();
        self
    }

    /// The first fire time after `after` of a cron schedule (its expression read in its zone,
    /// UTC without one), the same for every instance; `None` for other schedules (a fixed
    /// rate's grid is each instance's own) and for an expression or zone that does not parse.
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use shedlock_core::JobDefinition;
    ///
    /// let hourly = JobDefinition::new("report", "0 0 * * * *");
    /// let half_past = SystemTime::UNIX_EPOCH + Duration::from_secs(1800);
    /// assert_eq!(hourly.next_fire(half_past), Some(SystemTime::UNIX_EPOCH + Duration::from_secs(3600)));
    /// assert_eq!(JobDefinition::new("poll", "every 10s").next_fire(half_past), None);
    /// ```
    pub fn next_fire(&self, after: SystemTime) -> Option<SystemTime> {
        use chrono::{DateTime, SubsecRound, Utc};
        let cron = shedlock_rules::parse_cron(&self.schedule).ok()?;
        let zone = shedlock_rules::parse_zone(self.zone.as_deref().unwrap_or("UTC")).ok()?;
        // Cron has whole seconds: croner would carry the fraction into its answer.
        let after = DateTime::<Utc>::from(after).trunc_subsecs(0);
        let next = cron
            .find_next_occurrence(&after.with_timezone(&zone), false)
            .ok()?;
        Some(next.with_timezone(&Utc).into())
    }

    /// A hash of everything in the definition, the same in every process and version of this
    /// crate: instances whose fingerprints differ run the job differently (a rolling deploy).
    pub fn fingerprint(&self) -> u64 {
        // FNV-1a over the published text: stable, unlike `std`'s hasher.
        let text = serde_json::to_string(&DefinitionWire::from(self)).unwrap_or_default();
        text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    }
}

#[derive(Serialize, Deserialize)]
struct DefinitionWire {
    name: String,
    schedule: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    zone: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lock: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lock_at_most_for_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lock_at_least_for_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    policy: String,
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

impl From<&JobDefinition> for DefinitionWire {
    fn from(job: &JobDefinition) -> Self {
        DefinitionWire {
            name: job.name.clone(),
            schedule: job.schedule.clone(),
            zone: job.zone.clone(),
            lock: job.lock.clone(),
            lock_at_most_for_ms: job.lock_at_most_for.map(millis),
            lock_at_least_for_ms: job.lock_at_least_for.map(millis),
            policy: job.policy.clone(),
        }
    }
}

impl From<DefinitionWire> for JobDefinition {
    fn from(wire: DefinitionWire) -> Self {
        JobDefinition {
            name: wire.name,
            schedule: wire.schedule,
            zone: wire.zone,
            lock: wire.lock,
            lock_at_most_for: wire.lock_at_most_for_ms.map(Duration::from_millis),
            lock_at_least_for: wire.lock_at_least_for_ms.map(Duration::from_millis),
            policy: wire.policy,
        }
    }
}

/// One live instance carrying a job, with the definition it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobCarrier {
    /// The instance (its holder name).
    pub instance: String,
    /// Its last heartbeat (store clock).
    pub seen_at: SystemTime,
    /// When it stops counting as alive unless it beats again (store clock).
    pub alive_until: SystemTime,
    /// The job as this instance runs it.
    pub definition: JobDefinition,
}

/// A job paused across the fleet: no instance starts it from its next tick on until resumed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Paused {
    /// Who paused it (free text: an operator, a tool).
    pub by: String,
    /// When (store clock).
    pub at: SystemTime,
}

/// A request to run a job now, once, on one of its instances.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunRequest {
    /// The job.
    pub job: String,
    /// Names this request: a later request of the same job has another.
    pub id: u64,
    /// Who asked.
    pub by: String,
    /// When (store clock, whole milliseconds).
    pub at: SystemTime,
    /// The instance that took it to run it; `None` while waiting for one.
    pub taken_by: Option<String>,
    version: u64,
}

#[derive(Serialize, Deserialize)]
struct RunWire {
    id: u64,
    by: String,
    at_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    taken_by: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct PausedWire {
    by: String,
}

/// A job as the fleet has it: the live instances carrying it, whether it is paused and a run
/// asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FleetJob {
    /// The job's name.
    pub name: String,
    /// The live instances carrying it, by name; none when every carrier is gone (a paused job
    /// stays listed).
    pub carriers: Vec<JobCarrier>,
    /// Set while paused.
    pub paused: Option<Paused>,
    /// The last run asked for, taken or not.
    pub run_request: Option<RunRequest>,
}

impl FleetJob {
    /// The definition most carriers run (the first by instance name among equals); `None`
    /// without carriers.
    pub fn definition(&self) -> Option<&JobDefinition> {
        let mut counts: BTreeMap<u64, (usize, &JobDefinition)> = BTreeMap::new();
        for carrier in &self.carriers {
            let entry = counts
                .entry(carrier.definition.fingerprint())
                .or_insert((0, &carrier.definition));
            entry.0 += 1;
        }
        let mut best: Option<(usize, &JobDefinition)> = None;
        for carrier in &self.carriers {
            let (count, definition) = counts[&carrier.definition.fingerprint()];
            if best.is_none_or(|(top, _)| count > top) {
                best = Some((count, definition));
            }
        }
        best.map(|(_, definition)| definition)
    }

    /// Whether its carriers run it differently (a rolling deploy, a misconfigured instance).
    pub fn definitions_differ(&self) -> bool {
        self.carriers
            .windows(2)
            .any(|pair| pair[0].definition != pair[1].definition)
    }
}

/// What operators switched, as the instances poll it: the paused jobs and the runs asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Switches {
    /// Paused jobs by name.
    pub paused: BTreeMap<String, Paused>,
    /// The last run asked for per job, taken or not.
    pub runs: BTreeMap<String, RunRequest>,
}

/// The fleet's jobs on a store's [`Board`]: instances publish the jobs they carry and beat
/// while alive; operators list them, pause and resume them and ask for a run now; instances
/// poll the switches and take a run asked for, exactly one of them.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use shedlock_core::{Fleet, InMemoryLockProvider, JobDefinition};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), shedlock_core::Error> {
/// let fleet = Fleet::new(Arc::new(InMemoryLockProvider::new()));
/// let report = JobDefinition::new("report", "0 0 6 * * *");
/// fleet.publish("web-1", &[report.clone()], Duration::from_secs(30)).await?;
/// fleet.publish("web-2", &[report], Duration::from_secs(30)).await?;
/// fleet.pause("report", "alice").await?;
///
/// let jobs = fleet.jobs().await?;
/// assert_eq!(jobs[0].carriers.len(), 2);
/// assert_eq!(jobs[0].paused.as_ref().map(|p| p.by.as_str()), Some("alice"));
///
/// let asked = fleet.run_now("report", "bob").await?;
/// assert!(fleet.take_run(&asked, "web-2").await?, "web-2 runs it");
/// assert!(!fleet.take_run(&asked, "web-1").await?, "and nobody else");
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Fleet {
    board: Arc<dyn Board>,
}

impl fmt::Debug for Fleet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fleet").field("board", &self.board).finish()
    }
}

impl Fleet {
    /// The fleet kept on `board` (a store's provider: every store of this workspace is one).
    pub fn new(board: Arc<dyn Board>) -> Self {
        Fleet { board }
    }

    /// The fleet kept on the board of `provider` ([`LockProvider::board`]); `None` when it
    /// keeps none.
    pub fn of_provider(provider: Arc<dyn LockProvider>) -> Option<Self> {
        provider.board()?;
        Some(Fleet::new(Arc::new(ProviderBoard(provider))))
    }

    /// Publishes the jobs `instance` carries, replacing what it published before, and beats:
    /// it counts as alive for `alive_for` (store clock). Writes only what changed.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for an empty or overlong instance or job name, or two jobs of
    /// one name; [`Error::Store`] when the store fails (what was written stays: publishing
    /// again completes it).
    pub async fn publish(
        &self,
        instance: &str,
        jobs: &[JobDefinition],
        alive_for: Duration,
    ) -> Result<(), Error> {
        validate_name("instance", instance, MAX_HOLDER_LEN)?;
        let mut wanted = BTreeMap::new();
        for job in jobs {
            validate_name("job", &job.name, MAX_LOCK_NAME_LEN)?;
            let value = serde_json::to_string(&DefinitionWire::from(job)).map_err(|error| {
                Error::invalid_config("job", format!("`{}`: {error}", job.name))
            })?;
            if wanted
                .insert(
                    format!("{CARRIED}{}/{}", escape(instance), escape(&job.name)),
                    value,
                )
                .is_some()
            {
                return Err(Error::invalid_config(
                    "job",
                    format!("`{}` is published twice by `{instance}`", job.name),
                ));
            }
        }
        self.heartbeat(instance, alive_for).await?;
        let prefix = format!("{CARRIED}{}/", escape(instance));
        let published = self.board.board_read(&prefix).await?;
        for entry in &published {
            match wanted.remove(&entry.key) {
                Some(value) if value == entry.value => {}
                Some(value) => {
                    self.board
                        .board_write(&entry.key, &value, BoardCondition::Always, None)
                        .await?;
                }
                None => {
                    self.board
                        .board_remove(&entry.key, BoardCondition::Version(entry.version))
                        .await?;
                }
            }
        }
        for (key, value) in wanted {
            self.board
                .board_write(&key, &value, BoardCondition::Always, None)
                .await?;
        }
        Ok(())
    }

    /// `instance` is alive for `alive_for` more (store clock).
    ///
    /// # Errors
    /// [`Error::Store`] when the store fails.
    pub async fn heartbeat(&self, instance: &str, alive_for: Duration) -> Result<(), Error> {
        validate_name("instance", instance, MAX_HOLDER_LEN)?;
        self.board
            .board_write(
                &format!("{CARRIER}{}", escape(instance)),
                "{}",
                BoardCondition::Always,
                Some(alive_for),
            )
            .await?;
        Ok(())
    }

    /// `instance` leaves: its heartbeat and the jobs it published are removed.
    ///
    /// # Errors
    /// [`Error::Store`] when the store fails.
    pub async fn withdraw(&self, instance: &str) -> Result<(), Error> {
        self.board
            .board_remove(
                &format!("{CARRIER}{}", escape(instance)),
                BoardCondition::Always,
            )
            .await?;
        let prefix = format!("{CARRIED}{}/", escape(instance));
        for entry in self.board.board_read(&prefix).await? {
            self.board
                .board_remove(&entry.key, BoardCondition::Version(entry.version))
                .await?;
        }
        Ok(())
    }

    /// Removes what instances no longer alive published (their heartbeat ran out: killed,
    /// stopped without [`withdraw`](Self::withdraw)); returns how many definitions went. A
    /// definition written again meanwhile stays.
    ///
    /// # Errors
    /// [`Error::Store`] when the store fails.
    pub async fn sweep(&self) -> Result<usize, Error> {
        let alive = self.alive().await?;
        let mut removed = 0;
        for entry in self.board.board_read(CARRIED).await? {
            let Some((instance, _)) = carried_names(&entry.key) else {
                continue;
            };
            if !alive.contains_key(&instance)
                && self
                    .board
                    .board_remove(&entry.key, BoardCondition::Version(entry.version))
                    .await?
            {
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// Every job a live instance carries or an operator switched, by name.
    ///
    /// # Errors
    /// [`Error::Store`] when the store fails or holds an entry it cannot read.
    pub async fn jobs(&self) -> Result<Vec<FleetJob>, Error> {
        let alive = self.alive().await?;
        let switches = self.switches().await?;
        let mut jobs: BTreeMap<String, FleetJob> = BTreeMap::new();
        for entry in self.board.board_read(CARRIED).await? {
            let Some((instance, name)) = carried_names(&entry.key) else {
                continue;
            };
            let Some(beat) = alive.get(&instance) else {
                continue;
            };
            let wire: DefinitionWire = read_value(&entry)?;
            let carrier = JobCarrier {
                instance,
                seen_at: beat.written_at,
                alive_until: beat.expires_at.unwrap_or(beat.written_at),
                definition: wire.into(),
            };
            fleet_job(&mut jobs, &name).carriers.push(carrier);
        }
        for (name, paused) in switches.paused {
            fleet_job(&mut jobs, &name).paused = Some(paused);
        }
        for (name, request) in switches.runs {
            fleet_job(&mut jobs, &name).run_request = Some(request);
        }
        Ok(jobs.into_values().collect())
    }

    /// The job `name` as [`jobs`](Self::jobs) lists it; `None` when no live instance carries it
    /// and nothing is switched for it.
    ///
    /// # Errors
    /// As [`jobs`](Self::jobs).
    pub async fn job(&self, name: &str) -> Result<Option<FleetJob>, Error> {
        Ok(self.jobs().await?.into_iter().find(|job| job.name == name))
    }

    /// Pauses `job` across the fleet (kept until [`resume`](Self::resume), whatever restarts):
    /// instances start no tick of it once they polled. Pausing a paused job keeps the first
    /// pause.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for an empty or overlong name; [`Error::Store`] when the
    /// store fails (then nothing was paused).
    pub async fn pause(&self, job: &str, by: &str) -> Result<Paused, Error> {
        validate_name("job", job, MAX_LOCK_NAME_LEN)?;
        validate_name("by", by, MAX_HOLDER_LEN)?;
        let key = format!("{PAUSED}{}", escape(job));
        let value = serde_json::to_string(&PausedWire { by: by.to_owned() })
            .map_err(|error| Error::invalid_config("by", error.to_string()))?;
        self.board
            .board_write(&key, &value, BoardCondition::Absent, None)
            .await?;
        match self.board.board_read(&key).await?.into_iter().next() {
            Some(entry) if entry.key == key => paused_of(&entry),
            // Resumed between the two steps: what the operator asked for is done and undone.
            _ => Ok(Paused {
                by: by.to_owned(),
                at: SystemTime::now(),
            }),
        }
    }

    /// Resumes `job`; true when it was paused.
    ///
    /// # Errors
    /// [`Error::Store`] when the store fails (then it stays paused).
    pub async fn resume(&self, job: &str) -> Result<bool, Error> {
        validate_name("job", job, MAX_LOCK_NAME_LEN)?;
        self.board
            .board_remove(&format!("{PAUSED}{}", escape(job)), BoardCondition::Always)
            .await
    }

    /// Asks for `job` to run now, once, on one instance carrying it (the first to
    /// [`take`](Self::take_run) the request). While a request waits, asking again (another
    /// operator at the same moment) answers that request: the job runs once for both.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for an empty or overlong name; [`Error::Store`] when the
    /// store fails (then no run was asked for).
    pub async fn run_now(&self, job: &str, by: &str) -> Result<RunRequest, Error> {
        validate_name("job", job, MAX_LOCK_NAME_LEN)?;
        validate_name("by", by, MAX_HOLDER_LEN)?;
        let key = format!("{RUN}{}", escape(job));
        loop {
            let current = self.board.board_read(&key).await?;
            let current = current.into_iter().find(|entry| entry.key == key);
            let condition = match &current {
                Some(entry) => {
                    let request = request_of(job, entry)?;
                    if request.taken_by.is_none() {
                        return Ok(request);
                    }
                    BoardCondition::Version(entry.version)
                }
                None => BoardCondition::Absent,
            };
            let previous = current.as_ref().map_or(0, |entry| entry.version);
            let wire = RunWire {
                id: fresh_id(previous),
                by: by.to_owned(),
                at_ms: 0,
                taken_by: None,
            };
            let value = serde_json::to_string(&wire)
                .map_err(|error| Error::invalid_config("by", error.to_string()))?;
            if self
                .board
                .board_write(&key, &value, condition, None)
                .await?
                .is_some()
            {
                let written = self.board.board_read(&key).await?;
                if let Some(entry) = written.iter().find(|entry| entry.key == key) {
                    return request_of(job, entry);
                }
            }
        }
    }

    /// The jobs paused and the runs asked for: what instances poll.
    ///
    /// # Errors
    /// [`Error::Store`] when the store fails or holds an entry it cannot read.
    pub async fn switches(&self) -> Result<Switches, Error> {
        let mut switches = Switches::default();
        for entry in self.board.board_read(PAUSED).await? {
            if let Some(job) = entry.key.strip_prefix(PAUSED).map(unescape) {
                switches.paused.insert(job, paused_of(&entry)?);
            }
        }
        for entry in self.board.board_read(RUN).await? {
            if let Some(job) = entry.key.strip_prefix(RUN).map(unescape) {
                let request = request_of(&job, &entry)?;
                switches.runs.insert(job, request);
            }
        }
        Ok(switches)
    }

    /// Takes `request` for `instance` to run: true for exactly one instance of all that try,
    /// false when another took it or a later request replaced it.
    ///
    /// # Errors
    /// [`Error::Store`] when the store fails (then the request may or may not be taken: the
    /// next poll tells).
    pub async fn take_run(&self, request: &RunRequest, instance: &str) -> Result<bool, Error> {
        validate_name("instance", instance, MAX_HOLDER_LEN)?;
        if request.taken_by.is_some() {
            return Ok(false);
        }
        let key = format!("{RUN}{}", escape(&request.job));
        let wire = RunWire {
            id: request.id,
            by: request.by.clone(),
            at_ms: epoch_millis(request.at),
            taken_by: Some(instance.to_owned()),
        };
        let value = serde_json::to_string(&wire)
            .map_err(|error| Error::invalid_config("instance", error.to_string()))?;
        Ok(self
            .board
            .board_write(&key, &value, BoardCondition::Version(request.version), None)
            .await?
            .is_some())
    }

    /// The live heartbeats by instance name.
    async fn alive(&self) -> Result<BTreeMap<String, BoardEntry>, Error> {
        Ok(self
            .board
            .board_read(CARRIER)
            .await?
            .into_iter()
            .filter_map(|entry| {
                let instance = unescape(entry.key.strip_prefix(CARRIER)?);
                Some((instance, entry))
            })
            .collect())
    }
}

/// The board of a provider that keeps one, as an `Arc` of its own.
#[derive(Debug)]
struct ProviderBoard(Arc<dyn LockProvider>);

impl ProviderBoard {
    fn board(&self) -> Result<&dyn Board, Error> {
        self.0.board().ok_or_else(|| {
            Error::store(
                crate::Operation::Jobs,
                "",
                "the provider keeps no board of the fleet's jobs",
            )
        })
    }
}

#[async_trait::async_trait]
impl Board for ProviderBoard {
    async fn board_read(&self, prefix: &str) -> Result<Vec<BoardEntry>, Error> {
        self.board()?.board_read(prefix).await
    }
    async fn board_write(
        &self,
        key: &str,
        value: &str,
        condition: BoardCondition,
        ttl: Option<Duration>,
    ) -> Result<Option<u64>, Error> {
        self.board()?.board_write(key, value, condition, ttl).await
    }
    async fn board_remove(&self, key: &str, condition: BoardCondition) -> Result<bool, Error> {
        self.board()?.board_remove(key, condition).await
    }
}

fn fleet_job<'a>(jobs: &'a mut BTreeMap<String, FleetJob>, name: &str) -> &'a mut FleetJob {
    jobs.entry(name.to_owned()).or_insert_with(|| FleetJob {
        name: name.to_owned(),
        carriers: Vec::new(),
        paused: None,
        run_request: None,
    })
}

/// A request id unlike the one before it: the time in microseconds, above the last.
fn fresh_id(previous: u64) -> u64 {
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_micros()).unwrap_or(u64::MAX)
        });
    now.max(previous.saturating_add(1))
}

fn epoch_millis(at: SystemTime) -> u64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

fn paused_of(entry: &BoardEntry) -> Result<Paused, Error> {
    let wire: PausedWire = read_value(entry)?;
    Ok(Paused {
        by: wire.by,
        at: entry.written_at,
    })
}

fn request_of(job: &str, entry: &BoardEntry) -> Result<RunRequest, Error> {
    let wire: RunWire = read_value(entry)?;
    Ok(RunRequest {
        job: job.to_owned(),
        id: wire.id,
        by: wire.by,
        // The first write's store time, carried along when the request is taken.
        at: SystemTime::UNIX_EPOCH
            + Duration::from_millis(if wire.at_ms == 0 {
                epoch_millis(entry.written_at)
            } else {
                wire.at_ms
            }),
        taken_by: wire.taken_by,
        version: entry.version,
    })
}

fn read_value<T: for<'de> Deserialize<'de>>(entry: &BoardEntry) -> Result<T, Error> {
    serde_json::from_str(&entry.value).map_err(|error| {
        Error::store(
            crate::Operation::Jobs,
            entry.key.clone(),
            format!("unreadable board entry: {error}"),
        )
    })
}

/// `(instance, job)` of a `carried/<instance>/<job>` key.
fn carried_names(key: &str) -> Option<(String, String)> {
    let (instance, job) = key.strip_prefix(CARRIED)?.split_once('/')?;
    Some((unescape(instance), unescape(job)))
}

fn validate_name(field: &'static str, name: &str, max: usize) -> Result<(), Error> {
    if name.is_empty() || name.len() > max {
        return Err(Error::invalid_config(
            field,
            format!("has 1 to {max} bytes, `{name}` {}", name.len()),
        ));
    }
    Ok(())
}

/// `name` with `%` and `/` escaped, so that a key's parts split at `/`.
fn escape(name: &str) -> String {
    name.replace('%', "%25").replace('/', "%2F")
}

fn unescape(part: &str) -> String {
    part.replace("%2F", "/").replace("%25", "%")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_with_slashes_round_trip_through_keys() {
        for name in ["a/b", "100%", "%2F", "x/%/y"] {
            assert_eq!(unescape(&escape(name)), name);
            assert!(!escape(name).contains('/'));
        }
        let key = format!("{CARRIED}{}/{}", escape("web/1"), escape("a/b"));
        assert_eq!(
            carried_names(&key),
            Some(("web/1".to_owned(), "a/b".to_owned()))
        );
    }

    #[test]
    fn fingerprints_are_stable_and_cover_every_field() {
        let base = JobDefinition::new("report", "0 0 6 * * *");
        assert_eq!(base.fingerprint(), base.clone().fingerprint());
        let variants = [
            base.clone().with_zone("UTC"),
            base.clone()
                .with_lock("report", Duration::from_secs(60), Duration::ZERO),
            base.clone().with_policy("leader only"),
            JobDefinition::new("report", "0 0 7 * * *"),
        ];
        for variant in variants {
            assert_ne!(variant.fingerprint(), base.fingerprint(), "{variant:?}");
        }
    }

    #[test]
    fn the_most_common_definition_is_the_jobs() {
        let one = JobDefinition::new("a", "every 1s");
        let two = JobDefinition::new("a", "every 2s");
        let carrier = |instance: &str, definition: &JobDefinition| JobCarrier {
            instance: instance.to_owned(),
            seen_at: SystemTime::UNIX_EPOCH,
            alive_until: SystemTime::UNIX_EPOCH,
            definition: definition.clone(),
        };
        let job = FleetJob {
            name: "a".to_owned(),
            carriers: vec![carrier("x", &two), carrier("y", &one), carrier("z", &one)],
            paused: None,
            run_request: None,
        };
        assert_eq!(job.definition(), Some(&one));
        assert!(job.definitions_differ());
    }

    #[tokio::test]
    async fn a_providers_board_is_its_fleets() {
        let store = crate::InMemoryLockProvider::new();
        let fleet = Fleet::of_provider(Arc::new(store.clone())).expect("keeps a board");
        fleet
            .publish(
                "web-1",
                &[JobDefinition::new("a", "every 1s")],
                Duration::from_secs(9),
            )
            .await
            .expect("publish");
        let direct = Fleet::new(Arc::new(store));
        assert_eq!(
            direct.jobs().await.expect("jobs").len(),
            1,
            "the same board"
        );
    }
}
