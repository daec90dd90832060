//! Overhead of one locked execution of an empty job through the executor and the in-memory
//! provider, against the same empty future run without a lock.
//!
//! Run with: `cargo bench -p shedlock-core --bench executor`; add `--features metrics` for the
//! same with every event recorded into a Prometheus recorder (the cost of metrics).

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use shedlock_core::{InMemoryLockProvider, LockConfiguration};
use shedlock_runtime::LockingTaskExecutor;

fn bench(c: &mut Criterion) {
    #[cfg(feature = "metrics")]
    metrics::set_global_recorder(
        metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder(),
    )
    .unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let executor = LockingTaskExecutor::new(InMemoryLockProvider::new());
    let config = LockConfiguration::new("bench", Duration::from_secs(60), Duration::ZERO).unwrap();

    let mut group = c.benchmark_group("executor");
    group.bench_function("baseline: empty future, no lock", |b| {
        b.to_async(&runtime)
            .iter(|| async { black_box(async { 1u64 }.await) })
    });
    group.bench_function("locked: uncontended", |b| {
        b.to_async(&runtime)
            .iter(|| async { black_box(executor.execute(&config, async { 1u64 }).await.unwrap()) })
    });

    // 8 tasks on 8 lock names at once (the store is shared), and 8 tasks on one name
    // (contended: most are skipped). Time per batch of 8 executions.
    const TASKS: usize = 8;
    let names: Arc<Vec<LockConfiguration>> = Arc::new(
        (0..TASKS)
            .map(|i| {
                LockConfiguration::new(
                    format!("bench-{i}"),
                    Duration::from_secs(60),
                    Duration::ZERO,
                )
                .unwrap()
            })
            .collect(),
    );
    group.bench_function("baseline: 8 spawned empty futures", |b| {
        b.to_async(&runtime).iter(|| async {
            let handles: Vec<_> = (0..TASKS)
                .map(|_| tokio::spawn(async { black_box(1u64) }))
                .collect();
            for handle in handles {
                handle.await.unwrap();
            }
        })
    });
    group.bench_function("locked: 8 tasks, 8 names", |b| {
        b.to_async(&runtime).iter(|| {
            let (executor, names) = (executor.clone(), Arc::clone(&names));
            async move {
                let handles: Vec<_> = (0..TASKS)
                    .map(|i| {
                        let (executor, names) = (executor.clone(), Arc::clone(&names));
                        tokio::spawn(async move {
                            executor.execute(&names[i], async { 1u64 }).await.unwrap()
                        })
                    })
                    .collect();
                for handle in handles {
                    let _ = black_box(handle.await.unwrap());
                }
            }
        })
    });
    group.bench_function("locked: 8 tasks, 1 name (contended)", |b| {
        b.to_async(&runtime).iter(|| {
            let (executor, config) = (executor.clone(), config.clone());
            async move {
                let handles: Vec<_> = (0..TASKS)
                    .map(|_| {
                        let (executor, config) = (executor.clone(), config.clone());
                        tokio::spawn(async move {
                            executor.execute(&config, async { 1u64 }).await.unwrap()
                        })
                    })
                    .collect();
                for handle in handles {
                    let _ = black_box(handle.await.unwrap());
                }
            }
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
