//! What a run record holds.

use std::fmt;
use std::time::{Duration, SystemTime};

/// Longest error text a record keeps (in bytes, cut at a character boundary): enough for a
/// message and a short chain of causes, small enough for any store.
pub const MAX_ERROR_LEN: usize = 2000;

/// How a run ended, or that it has not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RunOutcome {
    /// Started and not finished: running, or its instance died (see
    /// [`RunRecord::is_interrupted`]).
    Running,
    /// Returned normally.
    Succeeded,
    /// Returned an error (or panicked) and was not retried.
    Failed,
    /// Returned an error and was run again under the same lock (a later attempt follows).
    Retried,
    /// Its instance died or lost the lease before it finished; written by the instance that
    /// noticed.
    Interrupted,
}

impl RunOutcome {
    /// The outcome as stores keep it: `running`, `succeeded`, `failed`, `retried`,
    /// `interrupted`.
    pub fn as_str(self) -> &'static str {
        match self {
            RunOutcome::Running => "running",
            RunOutcome::Succeeded => "succeeded",
            RunOutcome::Failed => "failed",
            RunOutcome::Retried => "retried",
            RunOutcome::Interrupted => "interrupted",
        }
    }

    /// The outcome a store kept; `None` for text that is none of them.
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "running" => RunOutcome::Running,
            "succeeded" => RunOutcome::Succeeded,
            "failed" => RunOutcome::Failed,
            "retried" => RunOutcome::Retried,
            "interrupted" => RunOutcome::Interrupted,
            _ => return None,
        })
    }

    /// Whether the run has ended.
    pub fn is_final(self) -> bool {
        self != RunOutcome::Running
    }
}

impl fmt::Display for RunOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A run about to start under a lease: what [`RunLog::run_started`](super::RunLog::run_started)
/// records. The store adds the start time from its own clock.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunStart {
    /// The lock the run holds (runs are kept per lock: tokens are).
    pub lock: String,
    /// The job's name.
    pub job: String,
    /// The fire time the run belongs to; `None` for a run started by hand (`run_now`).
    pub tick: Option<SystemTime>,
    /// The instance running it (the lease's holder).
    pub holder: String,
    /// The lease's fencing token.
    pub fencing_token: u64,
    /// 1 for the first attempt; retries and the rerun of an interrupted run count up.
    pub attempt: u32,
    /// The run's heartbeat lease: when set, [`RunLog::run_started`](super::RunLog::run_started)
    /// records that the run goes on at least this long ([`RunRecord::alive_until`]), and the
    /// scheduler renews it ([`RunLog::run_alive`](super::RunLog::run_alive)) while the job runs.
    pub lease: Option<Duration>,
}

impl RunStart {
    /// A first attempt.
    pub fn new(
        lock: impl Into<String>,
        job: impl Into<String>,
        tick: Option<SystemTime>,
        holder: impl Into<String>,
        fencing_token: u64,
    ) -> Self {
        RunStart {
            lock: lock.into(),
            job: job.into(),
            tick,
            holder: holder.into(),
            fencing_token,
            attempt: 1,
            lease: None,
        }
    }

    /// The same run's attempt `attempt`.
    pub fn attempt(mut self, attempt: u32) -> Self {
        self.attempt = attempt;
        self
    }

    /// The same run with a heartbeat lease of `lease` ([`RunStart::lease`]).
    pub fn alive_for(mut self, lease: Duration) -> Self {
        self.lease = Some(lease);
        self
    }
}

/// How a run ended: what [`RunLog::run_finished`](super::RunLog::run_finished) records. The
/// store adds the end time from its own clock.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunEnd {
    /// The outcome (never [`RunOutcome::Running`]).
    pub outcome: RunOutcome,
    /// The error's text for a failed, retried or interrupted run, at most [`MAX_ERROR_LEN`]
    /// bytes.
    pub error: Option<String>,
}

impl RunEnd {
    /// A run that returned normally.
    pub fn succeeded() -> Self {
        RunEnd {
            outcome: RunOutcome::Succeeded,
            error: None,
        }
    }

    /// A run that ended with `outcome` and `error` (cut to [`MAX_ERROR_LEN`] bytes).
    pub fn with_error(outcome: RunOutcome, error: impl Into<String>) -> Self {
        RunEnd {
            outcome,
            error: Some(truncate(error.into())),
        }
    }
}

fn truncate(mut text: String) -> String {
    if text.len() > MAX_ERROR_LEN {
        let mut cut = MAX_ERROR_LEN;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    text
}

/// One run of a job, as the store records it. Times are the store's.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunRecord {
    /// The lock the run held.
    pub lock: String,
    /// The job's name.
    pub job: String,
    /// The fire time the run belongs to; `None` for a run started by hand.
    pub tick: Option<SystemTime>,
    /// The instance that ran it.
    pub holder: String,
    /// Its lease's fencing token.
    pub fencing_token: u64,
    /// 1 for the first attempt, more for retries and the rerun of an interrupted run.
    pub attempt: u32,
    /// When it started (store clock).
    pub started_at: SystemTime,
    /// When it ended (store clock); `None` while running, and for a run whose instance died.
    pub finished_at: Option<SystemTime>,
    /// How it ended.
    pub outcome: RunOutcome,
    /// The error's text, for a failed, retried or interrupted run.
    pub error: Option<String>,
    /// For a run still [`Running`](RunOutcome::Running) under a heartbeat lease: until when
    /// (store clock) its instance is known to run it. Its instance renews it while the job
    /// runs, whether or not it still holds the lock, and stops the job before it passes
    /// unrenewed; so a run is rerun only once both its lock and this time have passed. `None`
    /// for a run without a heartbeat, and once the run ended.
    pub alive_until: Option<SystemTime>,
}

/// Where a record stands in the order runs are listed, newest first: by start time, then
/// fencing token, then attempt, then lock name (so no two records share a place). A page of
/// [`RunLog::runs`](super::RunLog::runs) ends at its last record's cursor;
/// [`RunQuery::before`](super::RunQuery::before) asks for the page after it. Written as
/// `<unix nanoseconds>-<token>-<attempt>-<lock>` for URLs and the command line.
///
/// ```
/// use shedlock_core::RunCursor;
///
/// let cursor: RunCursor = "1700000000123000000-42-1-nightly-report".parse()?;
/// assert_eq!((cursor.fencing_token, cursor.attempt), (42, 1));
/// assert_eq!(cursor.lock, "nightly-report");
/// assert_eq!(cursor.to_string(), "1700000000123000000-42-1-nightly-report");
/// # Ok::<(), shedlock_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub struct RunCursor {
    /// The record's start (store clock).
    pub started_at: SystemTime,
    /// Its fencing token.
    pub fencing_token: u64,
    /// Its attempt.
    pub attempt: u32,
    /// Its lock.
    pub lock: String,
}

impl RunCursor {
    /// The cursor of a record of `lock` started at `started_at` with this token and attempt.
    pub fn new(
        started_at: SystemTime,
        fencing_token: u64,
        attempt: u32,
        lock: impl Into<String>,
    ) -> Self {
        RunCursor {
            started_at,
            fencing_token,
            attempt,
            lock: lock.into(),
        }
    }
}

impl RunCursor {
    /// The cursor's place, as [`RunRecord::place`] gives a record's.
    pub(crate) fn place(&self) -> (SystemTime, u64, u32, &str) {
        (
            self.started_at,
            self.fencing_token,
            self.attempt,
            self.lock.as_str(),
        )
    }
}

impl fmt::Display for RunCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nanos = self
            .started_at
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos());
        write!(
            f,
            "{nanos}-{}-{}-{}",
            self.fencing_token, self.attempt, self.lock
        )
    }
}

impl std::str::FromStr for RunCursor {
    type Err = crate::Error;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = || {
            crate::Error::invalid_config(
                "cursor",
                format!(
                    "{text:?} is not a run cursor (<unix nanoseconds>-<token>-<attempt>-<lock>)"
                ),
            )
        };
        let mut parts = text.splitn(4, '-');
        let (Some(nanos), Some(token), Some(attempt), Some(lock)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(invalid());
        };
        let digits = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
        if !digits(nanos) || !digits(token) || !digits(attempt) || lock.is_empty() {
            return Err(invalid());
        }
        let nanos: u128 = nanos.parse().map_err(|_| invalid())?;
        let secs = u64::try_from(nanos / 1_000_000_000).map_err(|_| invalid())?;
        let started_at = SystemTime::UNIX_EPOCH
            .checked_add(Duration::new(secs, (nanos % 1_000_000_000) as u32))
            .ok_or_else(invalid)?;
        Ok(RunCursor {
            started_at,
            fencing_token: token.parse().map_err(|_| invalid())?,
            attempt: attempt.parse().map_err(|_| invalid())?,
            lock: lock.to_owned(),
        })
    }
}

impl RunRecord {
    /// A record of `start` begun at `started_at`, still running. Called by stores.
    pub fn started(start: &RunStart, started_at: SystemTime) -> Self {
        RunRecord {
            lock: start.lock.clone(),
            job: start.job.clone(),
            tick: start.tick,
            holder: start.holder.clone(),
            fencing_token: start.fencing_token,
            attempt: start.attempt,
            started_at,
            finished_at: None,
            outcome: RunOutcome::Running,
            error: None,
            alive_until: start.lease.and_then(|lease| started_at.checked_add(lease)),
        }
    }

    /// This record's place in the order of [`RunCursor`], borrowed: for comparing records
    /// without building a cursor each time.
    pub(crate) fn place(&self) -> (SystemTime, u64, u32, &str) {
        (
            self.started_at,
            self.fencing_token,
            self.attempt,
            self.lock.as_str(),
        )
    }

    /// Where this record stands in the newest-first order ([`RunCursor`]).
    pub fn cursor(&self) -> RunCursor {
        RunCursor::new(
            self.started_at,
            self.fencing_token,
            self.attempt,
            self.lock.as_str(),
        )
    }

    /// Whether the record is still running under a heartbeat that has not passed at `now`
    /// (store clock): its instance runs it, even if it no longer holds the lock.
    pub fn is_alive(&self, now: SystemTime) -> bool {
        self.outcome == RunOutcome::Running && self.alive_until.is_some_and(|until| until > now)
    }

    /// This record ended with `end` at `finished_at`. Called by stores.
    pub fn finished(mut self, end: &RunEnd, finished_at: SystemTime) -> Self {
        self.outcome = end.outcome;
        self.error = end.error.clone();
        self.finished_at = Some(finished_at);
        self.alive_until = None;
        self
    }

    /// How long the run took, if it ended.
    pub fn duration(&self) -> Option<Duration> {
        self.finished_at?.duration_since(self.started_at).ok()
    }

    /// Whether a record still marked running belongs to a run that is gone: its instance died
    /// (or stalled past its leases) before it finished. `current_token` and `held` describe the
    /// lock now ([`LockRecord`](crate::LockRecord)), `now` is the store's time when it was read
    /// ([`LockRecord::read_at`](crate::LockRecord::read_at)): the run is interrupted when the
    /// lock is no longer held with its token and its heartbeat ([`alive_until`](Self::alive_until))
    /// has passed.
    pub fn is_interrupted(&self, current_token: u64, held: bool, now: SystemTime) -> bool {
        match self.outcome {
            RunOutcome::Interrupted => true,
            RunOutcome::Running => {
                let holds = held && current_token == self.fencing_token;
                !holds && !self.is_alive(now)
            }
            _ => false,
        }
    }
}

impl fmt::Display for RunRecord {
    /// One line: `nightly #1 (token 7) on web-1: succeeded in 1.2s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} #{} (token {}) on {}: {}",
            self.job, self.attempt, self.fencing_token, self.holder, self.outcome
        )?;
        if let Some(duration) = self.duration() {
            write!(f, " in {}", humantime::format_duration(round_ms(duration)))?;
        }
        if let Some(error) = &self.error {
            write!(f, ": {error}")?;
        }
        Ok(())
    }
}

fn round_ms(duration: Duration) -> Duration {
    Duration::from_millis(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_read_back() {
        for outcome in [
            RunOutcome::Running,
            RunOutcome::Succeeded,
            RunOutcome::Failed,
            RunOutcome::Retried,
            RunOutcome::Interrupted,
        ] {
            assert_eq!(RunOutcome::parse(outcome.as_str()), Some(outcome));
        }
        assert_eq!(RunOutcome::parse("done"), None);
    }

    #[test]
    fn errors_are_cut_at_a_character() {
        let end = RunEnd::with_error(RunOutcome::Failed, "é".repeat(MAX_ERROR_LEN));
        let error = end.error.unwrap();
        assert!(error.len() <= MAX_ERROR_LEN && error.chars().all(|c| c == 'é'));
    }

    #[test]
    fn a_running_record_without_its_lease_is_interrupted() {
        let start = RunStart::new("l", "j", None, "h", 7);
        let running = RunRecord::started(&start, SystemTime::UNIX_EPOCH);
        let now = SystemTime::UNIX_EPOCH;
        assert!(!running.is_interrupted(7, true, now));
        assert!(running.is_interrupted(7, false, now), "its lease ended");
        assert!(running.is_interrupted(9, true, now), "taken over");
        let done = running.finished(&RunEnd::succeeded(), SystemTime::UNIX_EPOCH);
        assert!(!done.is_interrupted(9, false, now));
        assert_eq!(done.to_string(), "j #1 (token 7) on h: succeeded in 0s");
    }

    #[test]
    fn a_run_past_its_lock_but_within_its_heartbeat_is_not_interrupted() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(100);
        let start = RunStart::new("l", "j", None, "h", 7).alive_for(Duration::from_secs(30));
        let running = RunRecord::started(&start, t0);
        assert_eq!(running.alive_until, Some(t0 + Duration::from_secs(30)));
        let later = t0 + Duration::from_secs(29);
        assert!(
            !running.is_interrupted(7, false, later),
            "lock gone, heartbeat on"
        );
        assert!(
            !running.is_interrupted(9, true, later),
            "next tick's lock, heartbeat on"
        );
        let past = t0 + Duration::from_secs(30);
        assert!(running.is_interrupted(7, false, past));
        let done = running.finished(&RunEnd::succeeded(), later);
        assert_eq!(done.alive_until, None);
    }

    #[test]
    fn cursors_read_back_and_refuse_other_text() {
        let at = SystemTime::UNIX_EPOCH + Duration::new(1_700_000_000, 123_000_000);
        let cursor = RunCursor::new(at, 42, 3, "a-lock-with-dashes");
        assert_eq!(cursor.to_string().parse::<RunCursor>().unwrap(), cursor);
        for bad in [
            "",
            "1-2",
            "1-2-3",
            "1-2-3-",
            "x-1-1-l",
            "1--1-l",
            "-1-1-1-l",
            "1-1-99999999999-l",
        ] {
            assert!(bad.parse::<RunCursor>().is_err(), "{bad:?}");
        }
        let older = RunCursor::new(at, 41, 9, "z");
        assert!(older < cursor);
        let same_place_other_lock = RunCursor::new(at, 42, 3, "b");
        assert!(same_place_other_lock > cursor, "the lock breaks ties");
    }
}
