//! The medians, ratios and lines of one throughput case.

use super::{Client, Run};
use crate::pgbench::PgbenchRun;
use crate::stats::median;

/// Medians of a client's runs.
#[derive(Debug, Default)]
pub(super) struct Series(pub(super) Vec<Run>);

impl Series {
    fn rate(&self) -> f64 {
        median(&self.0.iter().map(|r| r.pairs_per_sec).collect::<Vec<_>>())
    }
    /// The median over rounds of this client's rate to `baseline`'s in the same round: runs
    /// close in time share the machine's slow drifts, which cancel in their ratio.
    fn ratio_to(&self, baseline: &[f64]) -> f64 {
        let ratios: Vec<f64> = self
            .0
            .iter()
            .zip(baseline)
            .map(|(run, base)| run.pairs_per_sec / base)
            .collect();
        median(&ratios)
    }
    fn rates(&self) -> Vec<f64> {
        self.0.iter().map(|r| r.pairs_per_sec).collect()
    }
    fn cpu(&self) -> f64 {
        median(&self.0.iter().map(|r| r.cpu_us_per_pair).collect::<Vec<_>>())
    }
    fn acquired(&self) -> f64 {
        median(&self.0.iter().map(|r| r.acquired_share).collect::<Vec<_>>())
    }
    fn runs(&self) -> String {
        let rates: Vec<String> = self
            .0
            .iter()
            .map(|r| format!("{:.0}", r.pairs_per_sec))
            .collect();
        let total: u64 = self.0.iter().map(|r| r.total_pairs).sum();
        let acquired = self.acquired() * 100.0;
        format!("[{}](n={total},acquired={acquired:.0}%)", rates.join(","))
    }
}

/// The ratios of one case, for the summary.
#[derive(Debug, Default)]
pub(crate) struct Ratios {
    /// Ours (default path) to the bare loop on connections of its own.
    pub(crate) to_raw: f64,
    /// Ours on a pool only to the bare loop on the same pool.
    pub(crate) pool_to_raw: f64,
    /// Ours (default path) to pgbench.
    pub(crate) to_pgbench: Option<f64>,
    /// Ours on a pool only to pgbench.
    pub(crate) pool_to_pgbench: Option<f64>,
}

/// Prints a case: the `lock-bench` line, details, every run, and the pgbench line. Rates are
/// medians over rounds; ratios are medians of the per-round ratios.
pub(super) fn report(
    case: &str,
    clients: &[Client],
    series: &[Series],
    pgbench_runs: Option<&[PgbenchRun]>,
) -> Ratios {
    let missing = Series::default();
    let get = |client: Client| {
        let i = clients.iter().position(|&c| c == client);
        i.map_or(&missing, |i| &series[i])
    };
    let (ours, raw) = (get(Client::Provider), get(Client::Raw));
    let (ours_pool, raw_pool) = (get(Client::ProviderPooled), get(Client::RawPooled));
    let mut ratios = Ratios {
        to_raw: ours.ratio_to(&raw.rates()),
        pool_to_raw: ours_pool.ratio_to(&raw_pool.rates()),
        ..Ratios::default()
    };
    println!(
        "lock-bench {case} pairs_per_sec={:.0} raw_sql_pairs_per_sec={:.0} ratio={:.2}",
        ours.rate(),
        raw.rate(),
        ratios.to_raw
    );
    println!(
        "  detail {case} cpu_us_per_pair ours={:.1} raw={:.1}; on a pool: ours_pool \
         pairs_per_sec={:.0} raw_pool pairs_per_sec={:.0} ratio={:.2} cpu_us_per_pair \
         ours_pool={:.1} raw_pool={:.1}; ours_pool is x{:.2} of ours",
        ours.cpu(),
        raw.cpu(),
        ours_pool.rate(),
        raw_pool.rate(),
        ratios.pool_to_raw,
        ours_pool.cpu(),
        raw_pool.cpu(),
        ours_pool.ratio_to(&ours.rates())
    );
    let per_worker = clients.iter().position(|&c| c == Client::ProviderPerWorker);
    if let Some(per_worker) = per_worker.map(|i| &series[i]) {
        println!(
            "  per-worker {case} ours_per_worker pairs_per_sec={:.0} cpu_us_per_pair={:.1} \
             ratio_to_raw={:.2} (x{:.2} of ours)",
            per_worker.rate(),
            per_worker.cpu(),
            per_worker.ratio_to(&raw.rates()),
            per_worker.ratio_to(&ours.rates())
        );
    }
    let runs: Vec<String> = clients
        .iter()
        .zip(series)
        .map(|(c, s)| format!("{}={}", c.label(), s.runs()))
        .collect();
    println!("  runs {case} {}", runs.join(" "));
    if let Some(pgbench_runs) = pgbench_runs {
        let rates: Vec<f64> = pgbench_runs.iter().map(|r| r.pairs_per_sec).collect();
        let cpu: Vec<f64> = pgbench_runs.iter().map(|r| r.cpu_us_per_pair).collect();
        let to_pgbench = ours.ratio_to(&rates);
        let pool_to_pgbench = ours_pool.ratio_to(&rates);
        ratios.to_pgbench = Some(to_pgbench);
        ratios.pool_to_pgbench = Some(pool_to_pgbench);
        println!(
            "lock-bench-pgbench {case} pgbench_pairs_per_sec={:.0} pairs_per_sec={:.0} \
             ratio={to_pgbench:.2} pool_ratio={pool_to_pgbench:.2} cpu_us_per_pair \
             pgbench={:.1} ours={:.1} raw={:.1}",
            median(&rates),
            ours.rate(),
            median(&cpu),
            ours.cpu(),
            raw.cpu(),
        );
        if let Some(per_worker) = per_worker.map(|i| &series[i]) {
            println!(
                "  per-worker-pgbench {case} ratio={:.2}",
                per_worker.ratio_to(&rates)
            );
        }
        let runs: Vec<String> = rates.iter().map(|r| format!("{r:.0}")).collect();
        println!("  runs {case} pgbench=[{}]", runs.join(","));
    }
    ratios
}
