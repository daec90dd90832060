//! Pairs (acquire + release, or any other unit of work) per second: `workers` tasks loop one
//! future each, and only what completes inside a measured window counts. The benchmarks and
//! the stores' figures tests share it, so every throughput figure is taken the same way.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// What [`count_pairs`] measured over its window.
#[derive(Debug, Clone, Copy)]
pub struct Counted {
    /// Pairs completed inside the window.
    pub pairs: u64,
    /// The window's measured length.
    pub elapsed: Duration,
    /// What the `cpu` clock advanced by over the window.
    pub cpu: Duration,
}

impl Counted {
    /// Pairs per second.
    pub fn per_second(&self) -> f64 {
        self.pairs as f64 / self.elapsed.as_secs_f64()
    }

    /// CPU microseconds per pair (over at least one pair, so an empty window is finite).
    pub fn cpu_us_per_pair(&self) -> f64 {
        self.cpu.as_secs_f64() * 1e6 / self.pairs.max(1) as f64
    }
}

/// Runs `workers` tasks, task `w` looping `pair(w)` until the end; after `warmup`, counts the
/// pairs completed during `window` and reads `cpu` (the process's CPU time so far, or
/// `|| Duration::ZERO` when not measured) at both ends of it.
///
/// A pair that fails stops its own task; the first such error is returned once every task has
/// stopped. A pair that should not stop the run handles its own errors and returns `Ok(())`.
pub async fn count_pairs<F, Fut>(
    workers: usize,
    warmup: Duration,
    window: Duration,
    cpu: fn() -> Duration,
    pair: F,
) -> anyhow::Result<Counted>
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = anyhow::Result<()>> + Send,
{
    let pair = Arc::new(pair);
    let stop = Arc::new(AtomicBool::new(false));
    let pairs = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..workers)
        .map(|w| {
            let (pair, stop, pairs) = (Arc::clone(&pair), Arc::clone(&stop), Arc::clone(&pairs));
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    pair(w).await?;
                    pairs.fetch_add(1, Ordering::Relaxed);
                }
                anyhow::Ok(())
            })
        })
        .collect();
    tokio::time::sleep(warmup).await;
    let (pairs_0, cpu_0, started) = (pairs.load(Ordering::Relaxed), cpu(), Instant::now());
    tokio::time::sleep(window).await;
    let (pairs_1, cpu_1, elapsed) = (pairs.load(Ordering::Relaxed), cpu(), started.elapsed());
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await??;
    }
    Ok(Counted {
        pairs: pairs_1 - pairs_0,
        elapsed,
        cpu: cpu_1.saturating_sub(cpu_0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn counts_only_the_window_and_returns_a_pairs_error() {
        let counted = count_pairs(
            2,
            Duration::from_millis(20),
            Duration::from_millis(100),
            || Duration::ZERO,
            |_| async {
                tokio::time::sleep(Duration::from_millis(10)).await;
                Ok(())
            },
        )
        .await
        .unwrap();
        // Two tasks, a pair at most each 10 ms: at most two more than 2 per 10 ms of the window.
        let most = 2 * (counted.elapsed.as_millis() as u64 / 10 + 1);
        assert!((1..=most).contains(&counted.pairs), "{counted:?}");
        assert!(counted.per_second() > 0.0);
        assert_eq!(counted.cpu, Duration::ZERO);

        let failed = count_pairs(
            1,
            Duration::ZERO,
            Duration::from_millis(10),
            || Duration::ZERO,
            |_| async { anyhow::bail!("refused") },
        )
        .await;
        assert_eq!(failed.unwrap_err().to_string(), "refused");
    }
}
