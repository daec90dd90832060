//! The fleet's board ([`Board`]) as keys beside the locks: `<prefix>board/<key>`, the key as it
//! is (etcd keys are bytes, kept in bytewise order). The value is a header line,
//! `{"at_ms":…,"ttl_ms":…}` (`ttl_ms` only with a time to live), then the value as written.
//!
//! - **Versions** are the key's `mod_revision`: etcd's revision counts every write to the
//!   cluster and never goes back, so it grows across a removal and a new write of the key.
//! - **Compare-and-set** is one etcd transaction: `Absent` compares the key's
//!   `create_revision` with 0, `Version(v)` its `mod_revision` with `v` and its lease with none
//!   (an entry without a time to live cannot have expired); when the compare fails, the same
//!   transaction reads the key, and an entry that is expired (for `Absent`) or whose version
//!   matches but that has a time to live and is still live (for `Version`) is written in a
//!   second transaction comparing the `mod_revision` read.
//! - **Time to live**: the entry is put on an etcd lease of the time to live rounded up to
//!   whole seconds (at least etcd's minimum TTL, about 2 s by default), so etcd deletes it on
//!   its own clock; a lease is granted per write with a time to live (one more round trip).
//!   etcd has no clock to read, and its leases are whole seconds and expire up to half a
//!   second late, so the times an entry reports are those of the instance that wrote it, as
//!   for the locks' records (see the crate docs, "etcd's time"): `written_at` is the writer's
//!   clock just before the lease grant (milliseconds), `expires_at` that + the time to live
//!   (milliseconds, rounded up). A reader takes an entry past `expires_at` on its own clock as
//!   gone (never read, absent for a write wanting the key absent), and the lease, which runs at
//!   least that long, deletes it soon after. Keep the fleet's clocks in sync (NTP).
//! - **Reads of a prefix**: one range request per [`PAGE`] entries, every page at the
//!   revision of the first (one consistent view).

use std::time::Duration;

use shedlock_core::{
    Board, BoardCondition, BoardEntry, Error, Operation, async_trait, validate_board_entry,
};

use crate::EtcdLockProvider;
use crate::provider::unreadable;
use crate::record::{from_ms, now_ms};
use crate::wire::{self, KeyValue, TxnRequest};

/// The most entries one range request reads: with values of up to 16 KiB, a reply stays
/// below the 4 MiB a gRPC client takes by default.
const PAGE: usize = 200;

/// How often a conditional write tries again when the key changed between its transactions.
const TRIES: usize = 16;

/// A board key as read.
struct Stored {
    at_ms: u64,
    ttl_ms: Option<u64>,
    value: String,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Header {
    at_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ttl_ms: Option<u64>,
}

impl Stored {
    fn expires_ms(&self) -> Option<u64> {
        self.ttl_ms.map(|ttl| self.at_ms.saturating_add(ttl))
    }

    /// Live on this instance's clock.
    fn live(&self) -> bool {
        self.expires_ms().is_none_or(|expires| expires > now_ms())
    }
}

/// Whole milliseconds, rounded up: an entry never reads as expiring before its time to live.
fn ms_up(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX)
}

fn encode(value: &str, at_ms: u64, ttl: Option<Duration>) -> Vec<u8> {
    let header = Header {
        at_ms,
        ttl_ms: ttl.map(ms_up),
    };
    let mut data = serde_json::to_vec(&header).unwrap_or_default();
    data.push(b'\n');
    data.extend_from_slice(value.as_bytes());
    data
}

fn decode(data: &[u8]) -> Result<Stored, String> {
    let text = std::str::from_utf8(data).map_err(|e| format!("not UTF-8: {e}"))?;
    let (header, value) = text.split_once('\n').ok_or("no header line")?;
    let header: Header = serde_json::from_str(header).map_err(|e| format!("header: {e}"))?;
    Ok(Stored {
        at_ms: header.at_ms,
        ttl_ms: header.ttl_ms,
        value: value.to_owned(),
    })
}

fn version(revision: i64) -> u64 {
    u64::try_from(revision).unwrap_or_default()
}

/// A transaction writing `put` if `compare` holds, reading `key` if not.
fn put_if(compare: Vec<wire::Compare>, put: &wire::RequestOp, key: &[u8]) -> TxnRequest {
    TxnRequest {
        compare,
        success: vec![put.clone()],
        failure: vec![wire::get(key)],
    }
}

impl EtcdLockProvider {
    fn stored(&self, key: &str, kv: &KeyValue) -> Result<Stored, Error> {
        decode(&kv.value).map_err(|reason| unreadable(Operation::Jobs, key, kv, reason))
    }

    async fn board_txn(&self, key: &str, request: TxnRequest) -> Result<wire::TxnResponse, Error> {
        self.client
            .txn(request)
            .await
            .map_err(self.fail(Operation::Jobs, key))
    }
}

/// The fleet's board as keys under `<prefix>board/` (see the crate docs, "Fleet board").
#[async_trait]
impl Board for EtcdLockProvider {
    async fn board_read(&self, prefix: &str) -> Result<Vec<BoardEntry>, Error> {
        let start = self.keys.board(prefix);
        let end = wire::prefix_end(&start);
        let section = self.keys.board("").len();
        let mut entries = Vec::new();
        let (mut from, mut revision) = (start, 0);
        loop {
            let mut request = wire::RangeRequest::between(from, end.clone(), PAGE);
            request.revision = revision;
            let response = self
                .client
                .range(request)
                .await
                .map_err(self.fail(Operation::Jobs, prefix))?;
            for kv in &response.kvs {
                let key = String::from_utf8_lossy(kv.key.get(section..).unwrap_or_default());
                let stored = self.stored(&key, kv)?;
                if stored.live() {
                    let expires_at = stored.expires_ms().map(from_ms);
                    entries.push(BoardEntry::new(
                        key,
                        stored.value,
                        version(kv.mod_revision),
                        from_ms(stored.at_ms),
                        expires_at,
                    ));
                }
            }
            match response.kvs.last() {
                Some(last) if response.more => {
                    from = last.key.clone();
                    from.push(0);
                    revision = response.header.as_ref().map_or(0, |h| h.revision);
                }
                _ => return Ok(entries),
            }
        }
    }

    async fn board_write(
        &self,
        key: &str,
        value: &str,
        condition: BoardCondition,
        ttl: Option<Duration>,
    ) -> Result<Option<u64>, Error> {
        validate_board_entry(key, value)?;
        let path = self.keys.board(key);
        // Taken before the lease is granted: the lease runs at least until `at` + `ttl`.
        let at_ms = now_ms();
        let lease = match ttl {
            Some(ttl) => self.grant(Operation::Jobs, key, ttl).await?,
            None => 0,
        };
        let put = wire::put(&path, encode(value, at_ms, ttl), lease);
        let absent = || put_if(vec![wire::created_at(&path, 0)], &put, &path);
        let mut request = match condition {
            BoardCondition::Always => TxnRequest {
                success: vec![put.clone()],
                ..TxnRequest::default()
            },
            BoardCondition::Absent => absent(),
            BoardCondition::Version(version) => {
                let revision = i64::try_from(version).unwrap_or(-1);
                let compare = vec![
                    wire::modified_at(&path, revision),
                    wire::leased_to(&path, 0),
                ];
                put_if(compare, &put, &path)
            }
        };
        for _ in 0..TRIES {
            let response = match self.board_txn(key, request).await {
                Ok(response) => response,
                Err(error) => {
                    self.client.revoke_later(lease);
                    return Err(error);
                }
            };
            if response.succeeded {
                return Ok(Some(version(response.revision())));
            }
            let again = match response.range(0).first() {
                // Removed in between: absent now.
                None if condition == BoardCondition::Absent => Some(absent()),
                None => None,
                Some(kv) => {
                    let live = self.stored(key, kv)?.live();
                    let holds = match condition {
                        BoardCondition::Always | BoardCondition::Absent => !live,
                        BoardCondition::Version(version) => {
                            live && self::version(kv.mod_revision) == version
                        }
                    };
                    holds.then(|| {
                        put_if(vec![wire::modified_at(&path, kv.mod_revision)], &put, &path)
                    })
                }
            };
            match again {
                Some(next) => request = next,
                None => {
                    self.client.revoke_later(lease);
                    return Ok(None);
                }
            }
        }
        self.client.revoke_later(lease);
        Err(Error::store(
            Operation::Jobs,
            key,
            "the key kept changing between the transactions of a conditional write",
        ))
    }

    async fn board_remove(&self, key: &str, condition: BoardCondition) -> Result<bool, Error> {
        let path = self.keys.board(key);
        let compare = match condition {
            // Nothing live is removed; an expired entry goes with its lease.
            BoardCondition::Absent => return Ok(false),
            BoardCondition::Always => Vec::new(),
            BoardCondition::Version(version) => {
                vec![wire::modified_at(
                    &path,
                    i64::try_from(version).unwrap_or(-1),
                )]
            }
        };
        // The entry as it was, read in the same transaction that deletes it: an expired one
        // goes too, but was not live.
        let request = TxnRequest {
            compare,
            success: vec![wire::get(&path), wire::delete(&path)],
            failure: Vec::new(),
        };
        let response = self.board_txn(key, request).await?;
        if !response.succeeded {
            return Ok(false);
        }
        match response.range(0).first() {
            Some(kv) => Ok(self.stored(key, kv)?.live()),
            None => Ok(false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_with_and_without_a_time_to_live() {
        let value = "{\"a\": 1}\nsecond line é";
        let stored = decode(&encode(value, 1_000, Some(Duration::from_micros(1500)))).unwrap();
        assert_eq!(
            (stored.at_ms, stored.ttl_ms, stored.value.as_str()),
            (1_000, Some(2), value)
        );
        assert_eq!(stored.expires_ms(), Some(1_002));
        assert!(!stored.live(), "expired long ago");
        let kept = decode(&encode("", 5, None)).unwrap();
        assert_eq!((kept.ttl_ms, kept.value.as_str()), (None, ""));
        assert!(kept.live());
        assert!(decode(b"no header").is_err());
        assert!(decode(b"{}\nno time").is_err());
    }
}
