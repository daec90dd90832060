//! The medians, ratios and lines of one throughput case.

use super::{Client, Run};
use crate::db::PoolKind;
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
    /// Ours to the bare loop, both on the tuned pool.
    pub(crate) to_raw: f64,
    /// Ours to the bare loop, both on dedicated connections.
    pub(crate) dedicated_to_raw: Option<f64>,
    /// Ours (tuned pool) to pgbench.
    pub(crate) to_pgbench: Option<f64>,
    /// Ours (dedicated connections) to pgbench.
    pub(crate) dedicated_to_pgbench: Option<f64>,
}

/// Prints a case: the `lock-bench` line, details, every run, and the pgbench line. Rates are
/// medians over rounds; ratios are medians of the per-round ratios.
pub(super) fn report(
    case: &str,
    clients: &[Client],
    series: &[Series],
    pgbench_runs: Option<&[f64]>,
) -> Ratios {
    let missing = Series::default();
    let of = |client: Client| {
        let i = clients.iter().position(|&c| c == client);
        i.map(|i| &series[i])
    };
    let get = |client| of(client).unwrap_or(&missing);
    let (ours, raw) = (
        get(Client::Provider(PoolKind::Tuned)),
        get(Client::Raw(PoolKind::Tuned)),
    );
    let defaults = get(Client::Provider(PoolKind::SqlxDefaults));
    let mut ratios = Ratios {
        to_raw: ours.ratio_to(&raw.rates()),
        ..Ratios::default()
    };
    println!(
        "lock-bench {case} pairs_per_sec={:.0} raw_sql_pairs_per_sec={:.0} ratio={:.2}",
        ours.rate(),
        raw.rate(),
        ratios.to_raw
    );
    println!(
        "  detail {case} cpu_us_per_pair ours={:.1} raw={:.1}; \
         ours_on_sqlx_default_pool pairs_per_sec={:.0} (x{:.2} of ours)",
        ours.cpu(),
        raw.cpu(),
        defaults.rate(),
        defaults.ratio_to(&ours.rates())
    );
    let ours_dedicated = of(Client::ProviderDedicated);
    if let Some(raw_dedicated) = of(Client::RawDedicated) {
        let mut line = format!(
            "  dedicated {case} raw_dedicated pairs_per_sec={:.0} cpu_us_per_pair={:.1}",
            raw_dedicated.rate(),
            raw_dedicated.cpu()
        );
        if let Some(dedicated) = ours_dedicated {
            let ratio = dedicated.ratio_to(&raw_dedicated.rates());
            ratios.dedicated_to_raw = Some(ratio);
            line += &format!(
                "; ours_dedicated pairs_per_sec={:.0} cpu_us_per_pair={:.1} ratio={ratio:.2} \
                 (x{:.2} of ours on the pool)",
                dedicated.rate(),
                dedicated.cpu(),
                dedicated.ratio_to(&ours.rates())
            );
        }
        println!("{line}");
    }
    let runs: Vec<String> = clients
        .iter()
        .zip(series)
        .map(|(c, s)| format!("{}={}", c.label(), s.runs()))
        .collect();
    println!("  runs {case} {}", runs.join(" "));
    if let Some(pgbench_runs) = pgbench_runs {
        let to_pgbench = ours.ratio_to(pgbench_runs);
        ratios.to_pgbench = Some(to_pgbench);
        let mut line = format!(
            "lock-bench-pgbench {case} pgbench_pairs_per_sec={:.0} pairs_per_sec={:.0} ratio={to_pgbench:.2}",
            median(pgbench_runs),
            ours.rate(),
        );
        if let Some(dedicated) = ours_dedicated {
            let ratio = dedicated.ratio_to(pgbench_runs);
            ratios.dedicated_to_pgbench = Some(ratio);
            line += &format!(
                " dedicated_pairs_per_sec={:.0} dedicated_ratio={ratio:.2}",
                dedicated.rate(),
            );
        }
        println!("{line}");
        let runs: Vec<String> = pgbench_runs.iter().map(|r| format!("{r:.0}")).collect();
        println!("  runs {case} pgbench=[{}]", runs.join(","));
    }
    ratios
}
