//! The line protocol between a worker process and the supervisor: one event per stdout line,
//! `kind key=value key=value …`, readable by a person and parsed back by the supervisor.
//!
//! Times are microseconds since the Unix epoch on the host's wall clock: every process of a run
//! shares one host, so they are comparable across processes (and with the database's clock,
//! which is the same host's). Lock names must not contain whitespace; `error=` is always last
//! and runs to the end of the line.

use std::fmt;
use std::str::FromStr;
use std::time::{SystemTime, UNIX_EPOCH};

/// Microseconds since the Unix epoch, now (wall clock).
pub fn now_us() -> i64 {
    unix_us(SystemTime::now())
}

/// Microseconds since the Unix epoch of `time` (negative before 1970).
pub fn unix_us(time: SystemTime) -> i64 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_micros()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_micros()).unwrap_or(i64::MAX),
    }
}

/// How a fenced journal write ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteOutcome {
    /// `verify_lease` accepted the token and the row was committed.
    Accepted,
    /// `verify_lease` refused the token (`Error::LockLost`): nothing was written.
    Rejected,
    /// The database failed (unreachable, busy, …): nothing was written.
    Failed(String),
}

/// One thing a worker reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The worker is connected and its scheduler (or election) runs.
    Ready {
        /// Its holder identity.
        holder: String,
        /// Its process id.
        pid: u32,
    },
    /// Connecting to the database failed; the worker retries or gives up.
    ConnectFailed {
        /// Attempt number, from 1.
        attempt: u32,
        /// What the driver said.
        error: String,
    },
    /// A job's tick fired on this worker: the scheduler is about to try the lock.
    Attempt {
        /// The lock.
        lock: String,
        /// The tick number (`fire time / tick length`).
        tick: i64,
        /// When.
        at: i64,
    },
    /// The lock was acquired (listener event).
    Acquired {
        /// The lock.
        lock: String,
        /// The lease's fencing token.
        token: u64,
        /// When the worker learnt it.
        at: i64,
        /// The lease's `locked_at`, database clock.
        since: i64,
        /// The lease's `lock_until`, database clock.
        until: i64,
    },
    /// The lock was held elsewhere.
    Skipped {
        /// The lock.
        lock: String,
        /// When.
        at: i64,
    },
    /// Acquisition failed with a store error.
    AcquireFailed {
        /// The lock.
        lock: String,
        /// When.
        at: i64,
        /// The error.
        error: String,
    },
    /// The job body started under the lock.
    Start {
        /// The lock.
        lock: String,
        /// The lease's fencing token.
        token: u64,
        /// When.
        at: i64,
    },
    /// The lease was declared lost (listener event: the lost-lock signal fired).
    Lost {
        /// The lock.
        lock: String,
        /// The lost lease's token.
        token: u64,
        /// When.
        at: i64,
    },
    /// The lock was released after the run (listener event): it stays taken until
    /// `locked_at + lock_at_least_for` if that is later.
    Released {
        /// The lock.
        lock: String,
        /// The released lease's token.
        token: u64,
        /// When.
        at: i64,
    },
    /// The job's run was stopped before its journal write: its future was dropped (the
    /// scheduler stops a run whose heartbeat it could not renew: the store was away, or the
    /// process was paused past it).
    Stopped {
        /// The lock.
        lock: String,
        /// The lease's fencing token.
        token: u64,
        /// When.
        at: i64,
    },
    /// The job's fenced journal write, and how it ended.
    Write {
        /// The lock.
        lock: String,
        /// The token the write carried.
        token: u64,
        /// The tick the execution belongs to.
        tick: i64,
        /// When the job body started.
        start: i64,
        /// When the job body ended and the write was attempted.
        end: i64,
        /// Whether the job's `LockContext::is_lost()` said the lease was lost at that point.
        lost: bool,
        /// The outcome.
        outcome: WriteOutcome,
    },
    /// This worker became leader of the election.
    Leader {
        /// The term (the lease's fencing token).
        term: u64,
        /// When.
        at: i64,
    },
    /// This worker stopped leading.
    Follower {
        /// When.
        at: i64,
    },
    /// Leader work started on this worker, which judged at that moment that it leads.
    LeaderWork {
        /// The term it judged to lead in.
        term: u64,
        /// When.
        at: i64,
    },
    /// The scheduler counted ticks of a job as missed (passed over during a pause, or later
    /// than the misfire threshold), as its `JobStatus::missed_ticks` shows.
    Missed {
        /// The lock (the job).
        lock: String,
        /// How many more than last reported.
        count: u64,
        /// When the worker noticed.
        at: i64,
    },
    /// The scheduler skipped ticks of a job because its previous run was still going.
    Overlapped {
        /// The lock (the job).
        lock: String,
        /// How many more than last reported.
        count: u64,
        /// When the worker noticed.
        at: i64,
    },
    /// The worker's own counters, printed at a clean exit.
    Summary(Counters),
    /// The worker gave up.
    Fatal {
        /// Why.
        error: String,
    },
}

/// A worker's own counts, reported in its [`Event::Summary`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Ticks fired.
    pub attempts: u64,
    /// Locks acquired.
    pub acquired: u64,
    /// Ticks skipped: lock held elsewhere.
    pub skipped: u64,
    /// Acquisitions that failed with a store error.
    pub errors: u64,
    /// Fenced writes committed.
    pub accepted: u64,
    /// Fenced writes refused by the guard.
    pub rejected: u64,
    /// Fenced writes that failed for another reason.
    pub failed: u64,
    /// Runs stopped before their write (their heartbeat was lost): [`Event::Stopped`].
    pub stopped: u64,
    /// Ticks the scheduler reported missed.
    pub missed: u64,
    /// Ticks the scheduler skipped because the previous run was still going.
    pub overlapped: u64,
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::Ready { holder, pid } => write!(f, "ready holder={holder} pid={pid}"),
            Event::ConnectFailed { attempt, error } => {
                write!(
                    f,
                    "connect_failed attempt={attempt} error={}",
                    one_line(error)
                )
            }
            Event::Attempt { lock, tick, at } => {
                write!(f, "attempt lock={lock} tick={tick} at={at}")
            }
            Event::Acquired {
                lock,
                token,
                at,
                since,
                until,
            } => {
                write!(
                    f,
                    "acquired lock={lock} token={token} at={at} since={since} until={until}"
                )
            }
            Event::Skipped { lock, at } => write!(f, "skipped lock={lock} at={at}"),
            Event::AcquireFailed { lock, at, error } => {
                write!(
                    f,
                    "acquire_failed lock={lock} at={at} error={}",
                    one_line(error)
                )
            }
            Event::Start { lock, token, at } => {
                write!(f, "start lock={lock} token={token} at={at}")
            }
            Event::Lost { lock, token, at } => write!(f, "lost lock={lock} token={token} at={at}"),
            Event::Released { lock, token, at } => {
                write!(f, "released lock={lock} token={token} at={at}")
            }
            Event::Stopped { lock, token, at } => {
                write!(f, "stopped lock={lock} token={token} at={at}")
            }
            Event::Write {
                lock,
                token,
                tick,
                start,
                end,
                lost,
                outcome,
            } => {
                write!(
                    f,
                    "write lock={lock} token={token} tick={tick} start={start} end={end} lost={lost} "
                )?;
                match outcome {
                    WriteOutcome::Accepted => f.write_str("result=accepted"),
                    WriteOutcome::Rejected => f.write_str("result=rejected"),
                    WriteOutcome::Failed(error) => {
                        write!(f, "result=failed error={}", one_line(error))
                    }
                }
            }
            Event::Leader { term, at } => write!(f, "leader term={term} at={at}"),
            Event::Follower { at } => write!(f, "follower at={at}"),
            Event::LeaderWork { term, at } => write!(f, "leader_work term={term} at={at}"),
            Event::Missed { lock, count, at } => {
                write!(f, "missed lock={lock} count={count} at={at}")
            }
            Event::Overlapped { lock, count, at } => {
                write!(f, "overlapped lock={lock} count={count} at={at}")
            }
            Event::Summary(c) => write!(
                f,
                "summary attempts={} acquired={} skipped={} errors={} accepted={} rejected={} \
                 failed={} stopped={} missed={} overlapped={}",
                c.attempts,
                c.acquired,
                c.skipped,
                c.errors,
                c.accepted,
                c.rejected,
                c.failed,
                c.stopped,
                c.missed,
                c.overlapped
            ),
            Event::Fatal { error } => write!(f, "fatal error={}", one_line(error)),
        }
    }
}

fn one_line(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}

/// The `key=value` fields of a line after its kind.
struct Fields<'a> {
    pairs: Vec<(&'a str, &'a str)>,
}

impl<'a> Fields<'a> {
    fn parse(rest: &'a str) -> Result<Self, String> {
        let mut pairs = Vec::new();
        let mut rest = rest.trim_start();
        while !rest.is_empty() {
            let (key, value_and_more) = rest
                .split_once('=')
                .ok_or_else(|| format!("expected key=value at {rest:?}"))?;
            if key == "error" {
                pairs.push((key, value_and_more));
                break;
            }
            let (value, more) = value_and_more
                .split_once(' ')
                .unwrap_or((value_and_more, ""));
            pairs.push((key, value));
            rest = more.trim_start();
        }
        Ok(Fields { pairs })
    }

    fn str(&self, key: &str) -> Result<String, String> {
        self.pairs
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| (*v).to_owned())
            .ok_or_else(|| format!("missing {key}"))
    }

    fn num<T: FromStr>(&self, key: &str) -> Result<T, String> {
        let text = self.str(key)?;
        text.parse()
            .map_err(|_| format!("{key}={text} is not a number"))
    }
}

impl FromStr for Event {
    type Err = String;

    fn from_str(line: &str) -> Result<Self, String> {
        let (kind, rest) = line.split_once(' ').unwrap_or((line, ""));
        let f = Fields::parse(rest)?;
        // `$path { field: f.read("field")?, … }`: each field from the key of its name, read
        // as `str` or as `num`.
        macro_rules! read {
            ($($path:ident)::+; $($field:ident: $read:ident),* $(,)?) => {
                $($path)::+ { $($field: f.$read(stringify!($field))?),* }
            };
        }
        Ok(match kind {
            "ready" => read!(Event::Ready; holder: str, pid: num),
            "connect_failed" => read!(Event::ConnectFailed; attempt: num, error: str),
            "attempt" => read!(Event::Attempt; lock: str, tick: num, at: num),
            "acquired" => {
                read!(Event::Acquired; lock: str, token: num, at: num, since: num, until: num)
            }
            "skipped" => read!(Event::Skipped; lock: str, at: num),
            "acquire_failed" => read!(Event::AcquireFailed; lock: str, at: num, error: str),
            "start" => read!(Event::Start; lock: str, token: num, at: num),
            "lost" => read!(Event::Lost; lock: str, token: num, at: num),
            "released" => read!(Event::Released; lock: str, token: num, at: num),
            "stopped" => read!(Event::Stopped; lock: str, token: num, at: num),
            "write" => Event::Write {
                lock: f.str("lock")?,
                token: f.num("token")?,
                tick: f.num("tick")?,
                start: f.num("start")?,
                end: f.num("end")?,
                lost: f.num("lost")?,
                outcome: match f.str("result")?.as_str() {
                    "accepted" => WriteOutcome::Accepted,
                    "rejected" => WriteOutcome::Rejected,
                    "failed" => WriteOutcome::Failed(f.str("error")?),
                    other => return Err(format!("unknown result {other}")),
                },
            },
            "leader" => read!(Event::Leader; term: num, at: num),
            "follower" => read!(Event::Follower; at: num),
            "leader_work" => read!(Event::LeaderWork; term: num, at: num),
            "missed" => read!(Event::Missed; lock: str, count: num, at: num),
            "overlapped" => read!(Event::Overlapped; lock: str, count: num, at: num),
            "summary" => Event::Summary(read!(Counters;
                attempts: num, acquired: num, skipped: num, errors: num, accepted: num,
                rejected: num, failed: num, stopped: num, missed: num, overlapped: num,
            )),
            "fatal" => read!(Event::Fatal; error: str),
            other => return Err(format!("unknown event kind {other:?}")),
        })
    }
}

#[cfg(test)]
mod tests;
