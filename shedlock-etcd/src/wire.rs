//! The part of etcd's v3 gRPC API this crate speaks (`etcdserverpb`, `mvccpb`), declared by
//! hand: field numbers and types as etcd's `rpc.proto` and `kv.proto` define them, fields this
//! crate never sets or reads left out (protobuf skips unknown fields). Declaring them here
//! instead of generating them from the `.proto` files keeps the build free of `protoc`.

#![allow(missing_docs)]

use prost::Message;

/// Every response's header: the cluster revision after the request is the fencing token.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct ResponseHeader {
    #[prost(uint64, tag = "1")]
    pub(crate) cluster_id: u64,
    #[prost(uint64, tag = "2")]
    pub(crate) member_id: u64,
    #[prost(int64, tag = "3")]
    pub(crate) revision: i64,
    #[prost(uint64, tag = "4")]
    pub(crate) raft_term: u64,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct KeyValue {
    #[prost(bytes = "vec", tag = "1")]
    pub(crate) key: Vec<u8>,
    #[prost(int64, tag = "2")]
    pub(crate) create_revision: i64,
    #[prost(int64, tag = "3")]
    pub(crate) mod_revision: i64,
    #[prost(int64, tag = "4")]
    pub(crate) version: i64,
    #[prost(bytes = "vec", tag = "5")]
    pub(crate) value: Vec<u8>,
    #[prost(int64, tag = "6")]
    pub(crate) lease: i64,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct RangeRequest {
    #[prost(bytes = "vec", tag = "1")]
    pub(crate) key: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub(crate) range_end: Vec<u8>,
    #[prost(int64, tag = "3")]
    pub(crate) limit: i64,
    /// The revision to read at (0: the latest).
    #[prost(int64, tag = "4")]
    pub(crate) revision: i64,
    /// 0 (none: ascending, as etcd stores keys, stopping at the limit) or [`SORT_DESCEND`],
    /// by key (`sort_target` 0).
    #[prost(int32, tag = "5")]
    pub(crate) sort_order: i32,
    #[prost(int32, tag = "6")]
    pub(crate) sort_target: i32,
    #[prost(bool, tag = "8")]
    pub(crate) keys_only: bool,
    /// Only the number of keys in the range ([`RangeResponse::count`]), no keys.
    #[prost(bool, tag = "9")]
    pub(crate) count_only: bool,
}

/// `RangeRequest.sort_order`: descending. etcd reads the whole range before it sorts and cuts
/// to the limit: only for ranges whose size the caller bounds.
pub(crate) const SORT_DESCEND: i32 = 2;

#[derive(Clone, PartialEq, Message)]
pub(crate) struct RangeResponse {
    #[prost(message, optional, tag = "1")]
    pub(crate) header: Option<ResponseHeader>,
    #[prost(message, repeated, tag = "2")]
    pub(crate) kvs: Vec<KeyValue>,
    #[prost(bool, tag = "3")]
    pub(crate) more: bool,
    /// Keys in the range, whatever the limit.
    #[prost(int64, tag = "4")]
    pub(crate) count: i64,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct PutRequest {
    #[prost(bytes = "vec", tag = "1")]
    pub(crate) key: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub(crate) value: Vec<u8>,
    #[prost(int64, tag = "3")]
    pub(crate) lease: i64,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct PutResponse {
    #[prost(message, optional, tag = "1")]
    pub(crate) header: Option<ResponseHeader>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct DeleteRangeRequest {
    #[prost(bytes = "vec", tag = "1")]
    pub(crate) key: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub(crate) range_end: Vec<u8>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct DeleteRangeResponse {
    #[prost(message, optional, tag = "1")]
    pub(crate) header: Option<ResponseHeader>,
    #[prost(int64, tag = "2")]
    pub(crate) deleted: i64,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct RequestOp {
    #[prost(oneof = "Request", tags = "1, 2, 3, 4")]
    pub(crate) request: Option<Request>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub(crate) enum Request {
    #[prost(message, tag = "1")]
    Range(RangeRequest),
    #[prost(message, tag = "2")]
    Put(PutRequest),
    #[prost(message, tag = "3")]
    DeleteRange(DeleteRangeRequest),
    /// A transaction nested in another (etcd 3.3 and later): its compares decide its own
    /// branch only.
    #[prost(message, tag = "4")]
    Txn(TxnRequest),
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct ResponseOp {
    #[prost(oneof = "Response", tags = "1, 2, 3, 4")]
    pub(crate) response: Option<Response>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub(crate) enum Response {
    #[prost(message, tag = "1")]
    Range(RangeResponse),
    #[prost(message, tag = "2")]
    Put(PutResponse),
    #[prost(message, tag = "3")]
    DeleteRange(DeleteRangeResponse),
    #[prost(message, tag = "4")]
    Txn(TxnResponse),
}

/// `Compare.result`.
pub(crate) const EQUAL: i32 = 0;
/// `Compare.target`: the key's create revision (0 when the key does not exist).
pub(crate) const TARGET_CREATE: i32 = 1;
/// `Compare.target`: the key's last modification revision.
pub(crate) const TARGET_MOD: i32 = 2;
/// `Compare.target`: the key's value.
pub(crate) const TARGET_VALUE: i32 = 3;
/// `Compare.target`: the lease the key is attached to (0: none).
pub(crate) const TARGET_LEASE: i32 = 4;

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Compare {
    #[prost(int32, tag = "1")]
    pub(crate) result: i32,
    #[prost(int32, tag = "2")]
    pub(crate) target: i32,
    #[prost(bytes = "vec", tag = "3")]
    pub(crate) key: Vec<u8>,
    #[prost(oneof = "TargetUnion", tags = "5, 6, 7, 8")]
    pub(crate) target_union: Option<TargetUnion>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub(crate) enum TargetUnion {
    #[prost(int64, tag = "5")]
    CreateRevision(i64),
    #[prost(int64, tag = "6")]
    ModRevision(i64),
    #[prost(bytes, tag = "7")]
    Value(Vec<u8>),
    #[prost(int64, tag = "8")]
    Lease(i64),
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct TxnRequest {
    #[prost(message, repeated, tag = "1")]
    pub(crate) compare: Vec<Compare>,
    #[prost(message, repeated, tag = "2")]
    pub(crate) success: Vec<RequestOp>,
    #[prost(message, repeated, tag = "3")]
    pub(crate) failure: Vec<RequestOp>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct TxnResponse {
    #[prost(message, optional, tag = "1")]
    pub(crate) header: Option<ResponseHeader>,
    #[prost(bool, tag = "2")]
    pub(crate) succeeded: bool,
    #[prost(message, repeated, tag = "3")]
    pub(crate) responses: Vec<ResponseOp>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct LeaseGrantRequest {
    #[prost(int64, tag = "1")]
    pub(crate) ttl: i64,
    #[prost(int64, tag = "2")]
    pub(crate) id: i64,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct LeaseGrantResponse {
    #[prost(message, optional, tag = "1")]
    pub(crate) header: Option<ResponseHeader>,
    #[prost(int64, tag = "2")]
    pub(crate) id: i64,
    #[prost(int64, tag = "3")]
    pub(crate) ttl: i64,
    #[prost(string, tag = "4")]
    pub(crate) error: String,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct LeaseRevokeRequest {
    #[prost(int64, tag = "1")]
    pub(crate) id: i64,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct LeaseRevokeResponse {
    #[prost(message, optional, tag = "1")]
    pub(crate) header: Option<ResponseHeader>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct LeaseKeepAliveRequest {
    #[prost(int64, tag = "1")]
    pub(crate) id: i64,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct LeaseKeepAliveResponse {
    #[prost(message, optional, tag = "1")]
    pub(crate) header: Option<ResponseHeader>,
    #[prost(int64, tag = "2")]
    pub(crate) id: i64,
    /// The lease's TTL after the renewal; 0 when the lease no longer exists.
    #[prost(int64, tag = "3")]
    pub(crate) ttl: i64,
}

/// `LeaseLeases`: every live lease of the cluster (etcd 3.3 and later); for the tests.
#[cfg(test)]
#[derive(Clone, PartialEq, Message)]
pub(crate) struct LeaseLeasesRequest {}

#[cfg(test)]
#[derive(Clone, PartialEq, Message)]
pub(crate) struct LeaseStatus {
    #[prost(int64, tag = "1")]
    pub(crate) id: i64,
}

#[cfg(test)]
#[derive(Clone, PartialEq, Message)]
pub(crate) struct LeaseLeasesResponse {
    #[prost(message, optional, tag = "1")]
    pub(crate) header: Option<ResponseHeader>,
    #[prost(message, repeated, tag = "2")]
    pub(crate) leases: Vec<LeaseStatus>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct WatchRequest {
    #[prost(oneof = "WatchRequestUnion", tags = "1")]
    pub(crate) request_union: Option<WatchRequestUnion>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub(crate) enum WatchRequestUnion {
    #[prost(message, tag = "1")]
    Create(WatchCreateRequest),
}

/// `WatchCreateRequest.filters`: leave out put events.
pub(crate) const FILTER_NOPUT: i32 = 0;

#[derive(Clone, PartialEq, Message)]
pub(crate) struct WatchCreateRequest {
    #[prost(bytes = "vec", tag = "1")]
    pub(crate) key: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub(crate) range_end: Vec<u8>,
    #[prost(int64, tag = "3")]
    pub(crate) start_revision: i64,
    #[prost(int32, repeated, tag = "5")]
    pub(crate) filters: Vec<i32>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct WatchResponse {
    #[prost(message, optional, tag = "1")]
    pub(crate) header: Option<ResponseHeader>,
    #[prost(int64, tag = "2")]
    pub(crate) watch_id: i64,
    #[prost(bool, tag = "3")]
    pub(crate) created: bool,
    #[prost(bool, tag = "4")]
    pub(crate) canceled: bool,
    #[prost(string, tag = "6")]
    pub(crate) cancel_reason: String,
    #[prost(message, repeated, tag = "11")]
    pub(crate) events: Vec<Event>,
}

/// `Event.type`: the key was deleted (by hand, by a release, or with its expired lease).
pub(crate) const EVENT_DELETE: i32 = 1;

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Event {
    #[prost(int32, tag = "1")]
    pub(crate) kind: i32,
    #[prost(message, optional, tag = "2")]
    pub(crate) kv: Option<KeyValue>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct AuthenticateRequest {
    #[prost(string, tag = "1")]
    pub(crate) name: String,
    #[prost(string, tag = "2")]
    pub(crate) password: String,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct AuthenticateResponse {
    #[prost(message, optional, tag = "1")]
    pub(crate) header: Option<ResponseHeader>,
    #[prost(string, tag = "2")]
    pub(crate) token: String,
}

/// The end of the range of every key starting with `prefix` (etcd's "prefix end": the prefix
/// with its last byte below 0xff incremented; `\0` for everything).
pub(crate) fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// `key`'s create revision is `revision` (0: the key does not exist).
pub(crate) fn created_at(key: &[u8], revision: i64) -> Compare {
    Compare {
        result: EQUAL,
        target: TARGET_CREATE,
        key: key.to_vec(),
        target_union: Some(TargetUnion::CreateRevision(revision)),
    }
}

/// `key` was last written at `revision` (0: the key does not exist).
pub(crate) fn modified_at(key: &[u8], revision: i64) -> Compare {
    Compare {
        result: EQUAL,
        target: TARGET_MOD,
        key: key.to_vec(),
        target_union: Some(TargetUnion::ModRevision(revision)),
    }
}

/// `key`'s value is `value`.
pub(crate) fn value_is(key: &[u8], value: &[u8]) -> Compare {
    Compare {
        result: EQUAL,
        target: TARGET_VALUE,
        key: key.to_vec(),
        target_union: Some(TargetUnion::Value(value.to_vec())),
    }
}

/// `key` is attached to `lease` (0: to none; also true of a key that does not exist).
pub(crate) fn leased_to(key: &[u8], lease: i64) -> Compare {
    Compare {
        result: EQUAL,
        target: TARGET_LEASE,
        key: key.to_vec(),
        target_union: Some(TargetUnion::Lease(lease)),
    }
}

pub(crate) fn put(key: &[u8], value: Vec<u8>, lease: i64) -> RequestOp {
    RequestOp {
        request: Some(Request::Put(PutRequest {
            key: key.to_vec(),
            value,
            lease,
        })),
    }
}

pub(crate) fn get(key: &[u8]) -> RequestOp {
    range(RangeRequest::key(key))
}

/// A range as an operation of a transaction.
pub(crate) fn range(request: RangeRequest) -> RequestOp {
    RequestOp {
        request: Some(Request::Range(request)),
    }
}

pub(crate) fn delete(key: &[u8]) -> RequestOp {
    RequestOp {
        request: Some(Request::DeleteRange(DeleteRangeRequest {
            key: key.to_vec(),
            range_end: Vec::new(),
        })),
    }
}

impl RangeRequest {
    /// Every key starting with `prefix`, with values or without.
    pub(crate) fn prefix(prefix: &[u8], keys_only: bool) -> Self {
        RangeRequest {
            key: prefix.to_vec(),
            range_end: prefix_end(prefix),
            keys_only,
            ..RangeRequest::default()
        }
    }

    /// The keys in `[key, range_end)`, ascending, at most `limit` (0: all).
    pub(crate) fn between(key: Vec<u8>, range_end: Vec<u8>, limit: usize) -> Self {
        RangeRequest {
            key,
            range_end,
            limit: i64::try_from(limit).unwrap_or(i64::MAX),
            ..RangeRequest::default()
        }
    }

    /// The one key `key`.
    pub(crate) fn key(key: &[u8]) -> Self {
        RangeRequest {
            key: key.to_vec(),
            ..RangeRequest::default()
        }
    }
}

impl TxnResponse {
    pub(crate) fn revision(&self) -> i64 {
        self.header.as_ref().map_or(0, |h| h.revision)
    }

    /// The key-values of the `index`-th operation, if it was a range.
    pub(crate) fn range(&self, index: usize) -> &[KeyValue] {
        self.range_response(index).map_or(&[], |range| &range.kvs)
    }

    /// The keys in the range of the `index`-th operation (whatever its limit), if it was one.
    pub(crate) fn count(&self, index: usize) -> u64 {
        self.range_response(index)
            .map_or(0, |range| u64::try_from(range.count).unwrap_or_default())
    }

    fn range_response(&self, index: usize) -> Option<&RangeResponse> {
        match self
            .responses
            .get(index)
            .and_then(|op| op.response.as_ref())
        {
            Some(Response::Range(range)) => Some(range),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_increments_the_last_byte_below_0xff() {
        assert_eq!(prefix_end(b"shedlock/"), b"shedlock0".to_vec());
        assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
        assert_eq!(prefix_end(b"\xff"), vec![0]);
    }
}
