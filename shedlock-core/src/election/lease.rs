//! Elections on any lock provider: one candidate holds the election's lock as a long lease and
//! renews it; the others retry, and take over when it expires or is released.

use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Candidacy, ElectionConfig, Elector};
use crate::{Error, LockConfiguration, LockLease, LockProvider};

/// Every lock provider runs elections on its locks, with client-go's rules: the leader renews
/// every `retry_period` and steps down once `renew_deadline` has passed since the last renewal
/// request that succeeded, which is before its lease (`lease_duration`) can expire in the store.
#[async_trait]
impl<P: LockProvider + ?Sized> Elector for P {
    fn check(&self, election: &str, config: &ElectionConfig) -> Result<(), Error> {
        config.validate()?;
        LockConfiguration::new(election, config.lease_duration, Duration::ZERO).map(drop)
    }

    async fn campaign(&self, candidacy: &Candidacy, stop: &CancellationToken) {
        let (election, config) = (candidacy.election(), candidacy.config());
        let Ok(lock) = LockConfiguration::new(election, config.lease_duration, Duration::ZERO)
        else {
            tracing::error!(election, "invalid election name; not campaigning");
            return;
        };
        let campaign = Campaign {
            provider: self,
            lock,
            config,
            candidacy,
            stop,
        };
        campaign.run().await;
    }
}

struct Campaign<'a, P: ?Sized> {
    provider: &'a P,
    lock: LockConfiguration,
    config: &'a ElectionConfig,
    candidacy: &'a Candidacy,
    stop: &'a CancellationToken,
}

impl<P: LockProvider + ?Sized> Campaign<'_, P> {
    async fn run(&self) {
        let mut hints = self.provider.release_hints();
        while !self.stop.is_cancelled() {
            let requested_at = Instant::now();
            match self.provider.acquire(&self.lock).await {
                Ok(Some(lease)) => {
                    self.lead(lease, requested_at).await;
                    continue;
                }
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!(election = self.lock.name(), %error, "campaign attempt failed")
                }
            }
            let wait = self.config.retry_period.mul_f64(1.0 + 0.2 * jitter());
            tokio::select! {
                () = self.stop.cancelled() => {}
                () = tokio::time::sleep(wait) => {}
                () = release_hint(&mut hints, self.lock.name()) => {}
            }
        }
    }

    /// Leads until the lease is lost, cannot be renewed in time, or the candidate resigns.
    async fn lead(&self, mut lease: LockLease, requested_at: Instant) {
        let renew_deadline = self.config.renew_deadline;
        // Granted after resigning began (the answer was on its way), or too late to trust: never
        // lead on it, and give the lease back so that nobody waits for it.
        if self.stop.is_cancelled()
            || !self
                .candidacy
                .elected(lease.fencing_token(), requested_at + renew_deadline)
        {
            self.release(&lease).await;
            return;
        }
        let lost = loop {
            let Some(valid_until) = self.candidacy.valid_until() else {
                break false;
            };
            let next_try = (Instant::now() + self.config.retry_period).min(valid_until);
            tokio::select! {
                () = self.stop.cancelled() => {
                    self.candidacy.step_down("resigned");
                    break false;
                }
                () = self.candidacy.term_ended() => break false,
                () = tokio::time::sleep_until(next_try) => {}
            }
            if !self.candidacy.is_leader() {
                break false;
            }
            let started = Instant::now();
            let renewal = tokio::time::timeout_at(
                valid_until,
                self.provider
                    .extend(&lease, self.config.lease_duration, Duration::ZERO),
            )
            .await;
            match renewal {
                Ok(Ok(Some(renewed))) => {
                    lease = renewed;
                    if !self.candidacy.renewed(started + renew_deadline) {
                        break false;
                    }
                }
                Ok(Ok(None)) => {
                    self.candidacy.step_down("lease lost");
                    break true;
                }
                Ok(Err(error)) => {
                    tracing::warn!(election = self.lock.name(), %error, "lease renewal failed, retrying")
                }
                Err(_elapsed) => {
                    self.candidacy.step_down("renew deadline passed");
                    break false;
                }
            }
        };
        // Stepped down locally first (above); now tell the store, unless the lease is gone.
        if !lost {
            self.release(&lease).await;
        }
    }

    async fn release(&self, lease: &LockLease) {
        let release = self.provider.release(lease);
        match tokio::time::timeout(self.config.retry_period, release).await {
            Ok(Ok(true)) => {}
            Ok(Ok(false)) => tracing::warn!(
                election = self.lock.name(),
                term = lease.fencing_token(),
                "the store refused the release: the lease was no longer this candidate's (expired \
                 or taken over)"
            ),
            Ok(Err(error)) => {
                tracing::warn!(election = self.lock.name(), %error, "could not release the lease; it expires by itself")
            }
            Err(_) => tracing::warn!(
                election = self.lock.name(),
                "release timed out; the lease expires by itself"
            ),
        }
    }
}

/// Completes when the store hints that `name` was released; never, without hints.
async fn release_hint(hints: &mut Option<tokio::sync::broadcast::Receiver<Arc<str>>>, name: &str) {
    let Some(receiver) = hints else {
        return std::future::pending().await;
    };
    loop {
        match receiver.recv().await {
            Ok(released) if &*released == name => return,
            Ok(_) => {}
            // Missed hints may include ours: retry now.
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => return,
            Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                *hints = None;
                return std::future::pending().await;
            }
        }
    }
}

/// A number in `[0, 1)` that differs between calls and processes, for retry jitter.
fn jitter() -> f64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(Instant::now().elapsed().as_nanos());
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_is_in_range() {
        assert!((0..100).map(|_| jitter()).all(|j| (0.0..1.0).contains(&j)));
    }
}
