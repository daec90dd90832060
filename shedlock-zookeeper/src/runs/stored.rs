//! A run node: its name (token and attempt) and its data (the rest of the record, JSON); its
//! times are the node's `ctime` (start) and, once ended, `mtime` (end). While it runs under a
//! heartbeat, the start wrote `alive_for` (the lease: until `ctime` + `alive_for`) and each
//! renewal `alive_until` (ensemble time, ms).

use std::borrow::Cow;
use std::time::{Duration, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use shedlock_core::{RunEnd, RunOutcome, RunRecord, RunStart};
use zookeeper_client::Stat;

use crate::record::system_time;

/// What a run node's data holds.
#[derive(Serialize, Deserialize)]
struct Stored<'a> {
    job: Cow<'a, str>,
    /// Milliseconds since the epoch, as a decimal string.
    #[serde(skip_serializing_if = "Option::is_none")]
    tick: Option<String>,
    holder: Cow<'a, str>,
    outcome: Cow<'a, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<Cow<'a, str>>,
    /// Written by a start under a heartbeat: milliseconds after the node's `ctime` that the
    /// run is known to go on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    alive_for: Option<u64>,
    /// Written by a renewal: until when (ms since the epoch, ensemble time) the run is known to
    /// go on; it replaces `alive_for`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    alive_until: Option<i64>,
}

/// The node name of a run: token and attempt, zero-padded so that names sort as numbers.
pub(crate) fn node_name(start: &RunStart) -> String {
    format!("{:020}-{:010}", start.fencing_token, start.attempt)
}

/// Token and attempt of a node name, or `None` for a node shedlock did not name.
pub(crate) fn parse_node_name(name: &str) -> Option<(u64, u32)> {
    let (token, attempt) = name.split_once('-')?;
    let digits =
        |text: &str, len: usize| text.len() == len && text.bytes().all(|b| b.is_ascii_digit());
    if !digits(token, 20) || !digits(attempt, 10) {
        return None;
    }
    Some((token.parse().ok()?, attempt.parse().ok()?))
}

/// The data of `start`'s node, running (under its heartbeat lease, if any) or ended with `end`.
pub(crate) fn encode(start: &RunStart, end: Option<&RunEnd>) -> Vec<u8> {
    encode_alive(start, end, start.lease.filter(|_| end.is_none()))
}

/// The data of `start`'s node running under a heartbeat until `alive_until_ms` (ensemble
/// time).
pub(crate) fn encode_renewal(start: &RunStart, alive_until_ms: i64) -> Vec<u8> {
    encode_stored(start, None, None, Some(alive_until_ms))
}

fn encode_alive(start: &RunStart, end: Option<&RunEnd>, lease: Option<Duration>) -> Vec<u8> {
    encode_stored(start, end, lease, None)
}

fn encode_stored(
    start: &RunStart,
    end: Option<&RunEnd>,
    lease: Option<Duration>,
    alive_until: Option<i64>,
) -> Vec<u8> {
    let stored = Stored {
        job: Cow::Borrowed(&start.job),
        tick: start
            .tick
            .and_then(|tick| tick.duration_since(UNIX_EPOCH).ok())
            .map(|tick| tick.as_millis().to_string()),
        holder: Cow::Borrowed(&start.holder),
        outcome: Cow::Borrowed(end.map_or(RunOutcome::Running, |end| end.outcome).as_str()),
        error: end.and_then(|end| end.error.as_deref()).map(Cow::Borrowed),
        alive_for: lease.map(|lease| u64::try_from(lease.as_millis()).unwrap_or(u64::MAX)),
        alive_until,
    };
    serde_json::to_vec(&stored).expect("a record serializes")
}

/// The record of run node `name` of `lock`; `Err` says what is wrong with the data.
pub(crate) fn decode(
    lock: &str,
    name: &str,
    data: &[u8],
    stat: &Stat,
) -> Result<RunRecord, String> {
    let (token, attempt) = parse_node_name(name).ok_or_else(|| "not a run node name".to_owned())?;
    let stored: Stored<'_> = serde_json::from_slice(data)
        .map_err(|error| format!("not the JSON shedlock writes ({error})"))?;
    let outcome = RunOutcome::parse(&stored.outcome)
        .ok_or_else(|| format!("unknown outcome {:?}", stored.outcome))?;
    let tick = match stored.tick {
        Some(tick) => Some(
            tick.parse::<u64>()
                .map(|ms| UNIX_EPOCH + Duration::from_millis(ms))
                .map_err(|_| format!("`tick` is not a whole number: {tick:?}"))?,
        ),
        None => None,
    };
    let start = RunStart::new(lock, stored.job, tick, stored.holder, token).attempt(attempt);
    let mut record = RunRecord::started(&start, system_time(stat.ctime));
    record.outcome = outcome;
    record.error = stored.error.map(Cow::into_owned);
    record.finished_at = outcome.is_final().then(|| system_time(stat.mtime));
    record.alive_until = match (stored.alive_until, stored.alive_for) {
        _ if outcome.is_final() => None,
        (Some(until), _) => Some(system_time(until)),
        (None, Some(alive_for)) => {
            let alive_for = i64::try_from(alive_for).unwrap_or(i64::MAX);
            Some(system_time(stat.ctime.saturating_add(alive_for)))
        }
        (None, None) => None,
    };
    Ok(record)
}

/// The start a record was written from (for rewriting its node: a renewal keeps what the
/// start wrote).
pub(crate) fn start_of(record: &RunRecord) -> RunStart {
    RunStart::new(
        &record.lock,
        &record.job,
        record.tick,
        &record.holder,
        record.fencing_token,
    )
    .attempt(record.attempt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_names_sort_as_numbers_and_read_back() {
        let name =
            |token, attempt| node_name(&RunStart::new("l", "j", None, "h", token).attempt(attempt));
        assert_eq!(name(7, 2), "00000000000000000007-0000000002");
        assert!(name(10, 1) > name(9, 2) && name(9, 2) > name(9, 1));
        assert_eq!(
            parse_node_name(&name(u64::MAX, u32::MAX)),
            Some((u64::MAX, u32::MAX))
        );
        for bad in [
            "7-1",
            "x",
            "00000000000000000007-000000000a",
            "99999999999999999999-0000000001",
        ] {
            assert_eq!(parse_node_name(bad), None, "{bad}");
        }
    }

    fn stat(ctime: i64, mtime: i64) -> Stat {
        Stat {
            czxid: 1,
            mzxid: 2,
            pzxid: 1,
            ctime,
            mtime,
            version: 1,
            cversion: 0,
            aversion: 0,
            ephemeral_owner: 0,
            data_length: 0,
            num_children: 0,
        }
    }

    #[test]
    fn a_heartbeat_runs_from_the_last_write() {
        let lease = Duration::from_millis(30_000);
        let start = RunStart::new("l", "j", None, "h", 7).alive_for(lease);
        let at = |ms: i64| UNIX_EPOCH + Duration::from_millis(ms as u64);
        let started = decode(
            "l",
            &node_name(&start),
            &encode(&start, None),
            &stat(1000, 1000),
        );
        assert_eq!(started.unwrap().alive_until, Some(at(31_000)));
        let renewal = encode_renewal(&start_of(&RunRecord::started(&start, at(1000))), 35_000);
        let renewed = decode("l", &node_name(&start), &renewal, &stat(1000, 5000)).unwrap();
        assert_eq!(renewed.alive_until, Some(at(35_000)));
        assert_eq!((renewed.job.as_str(), renewed.holder.as_str()), ("j", "h"));
        let ended = encode(&start, Some(&RunEnd::succeeded()));
        let ended = decode("l", &node_name(&start), &ended, &stat(1000, 6000)).unwrap();
        assert_eq!(
            (ended.alive_until, ended.finished_at),
            (None, Some(at(6000)))
        );
        let plain = RunStart::new("l", "j", None, "h", 8);
        let plain = decode("l", &node_name(&plain), &encode(&plain, None), &stat(1, 1));
        assert_eq!(plain.unwrap().alive_until, None, "no lease, no heartbeat");
    }
}
