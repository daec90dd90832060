//! Batched claims ([`LockProvider::acquire_many`](shedlock_core::LockProvider::acquire_many)):
//! the locks of a batch in name order, cut into chunks of one script call each.

use shedlock_core::LockConfiguration;

/// The most locks one acquire script takes. Redis serves nothing else while a script runs:
/// a chunk of 500 runs in a few milliseconds on the server (see the crate docs), a pause
/// other clients can bear; a larger batch takes one round trip per chunk.
pub(crate) const CHUNK: usize = 500;

/// The indexes of `configs` in name order, in chunks of at most [`CHUNK`]. Two instances
/// asking for the same locks get the same chunks, whatever order they asked in.
pub(crate) fn chunks(configs: &[LockConfiguration]) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..configs.len()).collect();
    order.sort_by(|&a, &b| configs[a].name().cmp(configs[b].name()));
    order.chunks(CHUNK).map(<[usize]>::to_vec).collect()
}

/// The answers put back in the order asked: `answers` holds `(index asked, answer)`.
pub(crate) fn in_order<T>(mut answers: Vec<(usize, T)>) -> Vec<T> {
    answers.sort_by_key(|&(index, _)| index);
    answers.into_iter().map(|(_, answer)| answer).collect()
}
