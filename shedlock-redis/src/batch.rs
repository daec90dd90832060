//! Batched claims ([`LockProvider::acquire_many`](shedlock_core::LockProvider::acquire_many)):
//! the locks of a batch in name order, cut into chunks of one script call each; on a cluster,
//! grouped by hash slot first (a script's keys must share one).

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

/// On a cluster: answers `configs` in their order, asking `acquire` for the locks of each hash
/// slot (their keys by `key`) in name order, in chunks as [`in_chunks`] cuts them; every call
/// at once, since each goes to its slot's master on its own.
pub(crate) async fn by_slot<'a, K, F, Fut>(
    configs: &'a [LockConfiguration],
    key: K,
    acquire: F,
) -> Vec<Answer>
where
    K: Fn(&str) -> String,
    F: Fn(Vec<&'a LockConfiguration>) -> Fut,
    Fut: Future<Output = Vec<Answer>>,
{
    let mut order: Vec<usize> = (0..configs.len()).collect();
    order.sort_by(|&a, &b| configs[a].name().cmp(configs[b].name()));
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut group_of = std::collections::HashMap::new();
    for index in order {
        let slot = crate::cluster::slot(&key(configs[index].name()));
        let group = *group_of.entry(slot).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[group].push(index);
    }
    let calls = groups
        .iter()
        .flat_map(|group| group.chunks(CHUNK))
        .map(|chunk| {
            let asked = chunk.iter().map(|&i| &configs[i]).collect();
            let answers = acquire(asked);
            async move { chunk.iter().copied().zip(answers.await).collect::<Vec<_>>() }
        });
    let mut answers: Vec<(usize, Answer)> = futures_util::future::join_all(calls)
        .await
        .into_iter()
        .flatten()
        .collect();
    answers.sort_by_key(|&(index, _)| index);
    answers.into_iter().map(|(_, answer)| answer).collect()
}
