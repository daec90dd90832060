//! Batched claims ([`LockProvider::acquire_many`](shedlock_core::LockProvider::acquire_many)):
//! the locks of a batch in name order, cut into chunks of one script call each.

use shedlock_core::{Error, LockConfiguration, LockLease};

/// The most locks one acquire script takes. Redis serves nothing else while a script runs:
/// a chunk of 500 free locks runs about 2 ms on the server (see the crate docs), a pause other
/// clients can bear; a larger batch takes one round trip per chunk.
pub(crate) const CHUNK: usize = 500;

/// One lock's answer.
type Answer = Result<Option<LockLease>, Error>;

/// Answers `configs` in their order, asking `acquire` for each chunk of them in name order,
/// one chunk after the other. Two instances asking for the same locks get the same chunks,
/// whatever order they asked in.
pub(crate) async fn in_chunks<'a, F, Fut>(
    configs: &'a [LockConfiguration],
    mut acquire: F,
) -> Vec<Answer>
where
    F: FnMut(Vec<&'a LockConfiguration>) -> Fut,
    Fut: Future<Output = Vec<Answer>>,
{
    let mut order: Vec<usize> = (0..configs.len()).collect();
    order.sort_by(|&a, &b| configs[a].name().cmp(configs[b].name()));
    let mut answers = Vec::with_capacity(configs.len());
    for chunk in order.chunks(CHUNK) {
        let asked = chunk.iter().map(|&i| &configs[i]).collect();
        answers.extend(chunk.iter().copied().zip(acquire(asked).await));
    }
    answers.sort_by_key(|&(index, _)| index);
    answers.into_iter().map(|(_, answer)| answer).collect()
}
