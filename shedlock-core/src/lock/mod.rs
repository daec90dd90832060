//! Locks: what a lock is (configuration, lease), the narrow interface every store implements,
//! the in-memory store, clocks and holder names, the store's side of release hints, and the
//! one view of a stored lock (record and inspection) that tools share.

pub(crate) mod clock;
pub(crate) mod config;
pub(crate) mod hints;
pub(crate) mod holder;
pub(crate) mod memory;
pub(crate) mod provider;
pub(crate) mod record;
pub(crate) mod tick;
