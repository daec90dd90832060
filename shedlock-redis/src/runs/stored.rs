//! A run record as the scripts store it (JSON, every number a decimal string), read back.

use std::fmt;
use std::time::{Duration, UNIX_EPOCH};

use serde::Deserialize;
use shedlock_core::{Error, Operation, RunOutcome, RunRecord, RunStart};

/// One field of a lock's records hash, as a script replied it.
#[derive(Debug, Clone)]
pub(crate) struct RunEntry {
    /// The records hash.
    pub(crate) key: String,
    /// The run id (the hash field).
    pub(crate) id: String,
    /// The run's lock.
    pub(crate) lock: String,
    /// The record; `None` when the index names a run the hash does not hold.
    pub(crate) json: Option<String>,
}

#[derive(Deserialize)]
struct Stored {
    job: String,
    tick: Option<String>,
    holder: String,
    token: String,
    attempt: String,
    started_at: String,
    finished_at: Option<String>,
    outcome: String,
    error: Option<String>,
    alive_until: Option<String>,
}

/// A record that is not what the scripts write: edited by hand, or another program's data.
#[derive(Debug)]
pub(crate) struct CorruptRun {
    server: String,
    key: String,
    id: String,
    problem: String,
}

impl fmt::Display for CorruptRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Redis {}: corrupt run record `{}` field `{}`: {} (delete the field to drop the \
             record)",
            self.server, self.key, self.id, self.problem
        )
    }
}

impl std::error::Error for CorruptRun {}

impl RunEntry {
    /// The record, read from `server`.
    ///
    /// # Errors
    /// [`Error::Store`] (`Operation::Runs`) naming the key and field when the record is not
    /// what the scripts write.
    pub(crate) fn record(&self, server: &str) -> Result<Option<RunRecord>, Error> {
        let lock = self.lock.as_str();
        let Some(json) = &self.json else {
            return Ok(None);
        };
        let corrupt = |problem: String| {
            Error::store(
                Operation::Runs,
                lock,
                CorruptRun {
                    server: server.to_owned(),
                    key: self.key.clone(),
                    id: self.id.clone(),
                    problem,
                },
            )
        };
        let stored: Stored = serde_json::from_str(json)
            .map_err(|error| corrupt(format!("not the JSON shedlock writes ({error})")))?;
        let number = |name: &str, text: &str| {
            text.parse::<u64>()
                .map_err(|_| corrupt(format!("`{name}` is not a whole number: {text:?}")))
        };
        let time = |name: &str, text: &str| {
            number(name, text).map(|ms| UNIX_EPOCH + Duration::from_millis(ms))
        };
        let attempt = u32::try_from(number("attempt", &stored.attempt)?)
            .map_err(|_| corrupt(format!("`attempt` is out of range: {}", stored.attempt)))?;
        let outcome = RunOutcome::parse(&stored.outcome)
            .ok_or_else(|| corrupt(format!("unknown outcome {:?}", stored.outcome)))?;
        let tick = stored.tick.map(|tick| time("tick", &tick)).transpose()?;
        let start = RunStart::new(
            lock,
            stored.job,
            tick,
            stored.holder,
            number("token", &stored.token)?,
        )
        .attempt(attempt);
        let mut record = RunRecord::started(&start, time("started_at", &stored.started_at)?);
        record.finished_at = stored
            .finished_at
            .map(|at| time("finished_at", &at))
            .transpose()?;
        record.outcome = outcome;
        record.error = stored.error;
        record.alive_until = stored
            .alive_until
            .map(|at| time("alive_until", &at))
            .transpose()?;
        Ok(Some(record))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(json: &str) -> RunEntry {
        RunEntry {
            key: "runs:x:records:l".into(),
            id: "00000000000000000007:0000000001".into(),
            lock: "l".into(),
            json: Some(json.into()),
        }
    }

    #[test]
    fn records_read_back() {
        let json = r#"{"job":"j","holder":"h","token":"7","attempt":"1","started_at":"5",
            "outcome":"failed","finished_at":"9","error":"a\/b\n","tick":"3"}"#;
        let record = entry(json).record("redis://s").unwrap().unwrap();
        assert_eq!(record.outcome, RunOutcome::Failed);
        assert_eq!(record.error.as_deref(), Some("a/b\n"));
        assert_eq!(record.tick, Some(UNIX_EPOCH + Duration::from_millis(3)));
        assert_eq!(record.duration(), Some(Duration::from_millis(4)));
        assert_eq!(record.alive_until, None);
        let running = r#"{"job":"j","holder":"h","token":"7","attempt":"1","started_at":"5",
            "outcome":"running","alive_until":"30005"}"#;
        let record = entry(running).record("redis://s").unwrap().unwrap();
        assert_eq!(
            record.alive_until,
            Some(UNIX_EPOCH + Duration::from_millis(30_005))
        );
    }

    #[test]
    fn corrupt_records_name_key_and_field() {
        for json in [
            "{",
            r#"{"job":"j","holder":"h","token":"-7","attempt":"1","started_at":"5","outcome":"running"}"#,
            r#"{"job":"j","holder":"h","token":"7","attempt":"1","started_at":"5","outcome":"done"}"#,
        ] {
            let error = entry(json).record("redis://s").unwrap_err();
            let text = format!("{error} {:?}", std::error::Error::source(&error));
            assert!(
                matches!(
                    error,
                    Error::Store {
                        operation: Operation::Runs,
                        ..
                    }
                ),
                "{text}"
            );
            assert!(
                text.contains("runs:x:records:l") && text.contains("0000000001"),
                "{text}"
            );
        }
    }
}
