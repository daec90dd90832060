//! RedLock acquisition of one lock or a batch: rounds on every master until each lock is
//! granted by a majority, held elsewhere, or out of retries; each round is one script call per
//! master for all the locks it asks, and its failed grants are taken back in one more.

use std::time::Duration;

use shedlock_core::{Error, LockConfiguration, LockLease, Operation};
use tokio::time::Instant;

use super::RedLockProvider;
use super::round::{Grant, Round, agreed_lease};

/// One lock's attempt within an acquisition call.
struct Attempt<'a> {
    config: &'a LockConfiguration,
    drift: Duration,
    proposed: u64,
    splits: u32,
    /// A token proposal that is behind is retried at once; bounded in case other instances
    /// keep moving the counter ahead.
    rounds_left: u32,
    /// When its next round may start: at once after a proposal that was behind, later after
    /// a split vote.
    next_round: Instant,
    answer: Option<Result<Option<LockLease>, Error>>,
}

/// What a round decided for one lock, before its grants were taken back.
enum Outcome {
    Answered(Result<Option<LockLease>, Error>),
    RetryAfter(Duration),
}

impl RedLockProvider {
    /// Acquires each of `configs` (distinct names) as a lone acquisition would, with the
    /// rounds of all of them shared: answers in their order.
    pub(super) async fn acquire_locks(
        &self,
        configs: &[&LockConfiguration],
    ) -> Vec<Result<Option<LockLease>, Error>> {
        let call_started = Instant::now();
        let mut attempts: Vec<Attempt<'_>> = configs
            .iter()
            .map(|&config| Attempt {
                config,
                drift: self.drift(config.lock_at_most_for()),
                proposed: self.tokens.next(config.name()),
                splits: 0,
                rounds_left: 2 + self.algorithm.retries,
                next_round: call_started,
                answer: None,
            })
            .collect();
        while let Some(next_round) = attempts
            .iter()
            .filter(|attempt| attempt.answer.is_none())
            .map(|attempt| attempt.next_round)
            .min()
        {
            if next_round > Instant::now() {
                tokio::time::sleep_until(next_round).await;
            }
            let started = Instant::now();
            let due: Vec<usize> = (0..attempts.len())
                .filter(|&i| attempts[i].answer.is_none() && attempts[i].next_round <= started)
                .collect();
            let asked: Vec<(&LockConfiguration, u64)> = due
                .iter()
                .map(|&i| (attempts[i].config, attempts[i].proposed))
                .collect();
            let mut rounds = self
                .acquire_round(&asked, started.duration_since(call_started))
                .await;
            let elapsed = started.elapsed();
            let outcomes: Vec<Outcome> = due
                .iter()
                .zip(&mut rounds)
                .map(|(&i, round)| self.decide(&mut attempts[i], round, elapsed))
                .collect();
            // Only a grant by a majority in time became a lease: every other round's grants go
            // back, all in one call per master.
            let undo: Vec<(String, u64, &[Grant])> = due
                .iter()
                .zip(&rounds)
                .zip(&outcomes)
                .filter(|((_, round), outcome)| {
                    !round.granted.is_empty() && !matches!(outcome, Outcome::Answered(Ok(Some(_))))
                })
                .map(|((&i, round), _)| {
                    let attempt = &attempts[i];
                    let key = self.key(attempt.config.name());
                    (key, attempt.proposed, &round.granted[..])
                })
                .collect();
            if !undo.is_empty() {
                self.undo(&undo).await;
            }
            let after_undo = Instant::now();
            for (&i, outcome) in due.iter().zip(outcomes) {
                let attempt = &mut attempts[i];
                match outcome {
                    Outcome::Answered(answer) => attempt.answer = Some(answer),
                    Outcome::RetryAfter(pause) => {
                        // The grants were taken back: the same proposal stays good unless a
                        // master is already above it or the clocks passed it.
                        attempt.proposed = attempt
                            .proposed
                            .max(self.tokens.next(attempt.config.name()));
                        attempt.next_round = after_undo + pause;
                    }
                }
            }
        }
        attempts
            .into_iter()
            .map(|attempt| attempt.answer.unwrap_or(Ok(None)))
            .collect()
    }

    /// What `round` (which took `elapsed`) means for `attempt`: granted, refused, failed, or
    /// to be retried (at once after a proposal that was behind, after a pause after a split
    /// vote).
    fn decide(&self, attempt: &mut Attempt<'_>, round: &mut Round, elapsed: Duration) -> Outcome {
        attempt.rounds_left -= 1;
        let name = attempt.config.name();
        let quorum = self.algorithm.quorum;
        let floor = round
            .behind
            .max(round.held_token(quorum).map(|token| token + 1));
        self.tokens.learn(name, round.clock_us, floor.unwrap_or(0));
        let valid = attempt.config.lock_at_most_for() > elapsed + attempt.drift;
        if round.granted.len() >= quorum && valid {
            self.tokens.learn(name, None, attempt.proposed + 1);
            for failure in &round.failures {
                tracing::debug!(lock = name, error = %failure, "RedLock master failed; a majority granted the lock");
            }
            let lease = agreed_lease(
                attempt.config,
                &self.settings.holder,
                attempt.proposed,
                &round.granted,
                attempt.drift,
            );
            return Outcome::Answered(Ok(Some(lease)));
        }
        // Held elsewhere only when a majority holds one lease (the same holder and token).
        // Refusals by the grants of several attempts split the votes: every attempt gives
        // its grants back and retries after a random delay, so that one of them wins.
        let held = round.held_token(quorum).is_some();
        // Its tick spent (or too far ahead) on more masters than a majority can spare: no
        // retry can win it.
        let tick_spent = round.tick_refused > self.nodes.len() - quorum;
        if round.failures.len() > self.nodes.len() - quorum {
            // No majority could have granted it: a store failure, not a held lock.
            let failures = std::mem::take(&mut round.failures);
            if let Err(error) = self.check_quorum(Operation::Acquire, name, failures, 0) {
                return Outcome::Answered(Err(error));
            }
        }
        if held || tick_spent || attempt.rounds_left == 0 {
            return Outcome::Answered(Ok(None));
        }
        if round.behind.is_some() {
            return Outcome::RetryAfter(Duration::ZERO);
        }
        if attempt.splits == self.algorithm.retries {
            return Outcome::Answered(Ok(None));
        }
        attempt.splits += 1;
        Outcome::RetryAfter(self.split_pause(round, elapsed))
    }
}
