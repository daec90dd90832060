//! Medians, percentiles and the process's CPU time.

use std::time::Duration;

/// The median of `values` (the mean of the middle two for an even count); 0 when empty.
pub(crate) fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// The `p`-th percentile (0–100) by nearest rank; 0 when empty.
pub(crate) fn percentile(values: &[f64], p: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// CPU time of this process's threads so far, in nanoseconds from `/proc/self/task/*/schedstat`:
/// the 10 ms ticks of `/proc/self/stat` are too coarse for runs of a second. Threads that end
/// between two readings take their time with them, so compare readings only across a window
/// in which the threads doing the work stay alive (a timed run). Zero where neither file exists.
pub(crate) fn process_cpu() -> Duration {
    match schedstat_cpu("/proc/self/task") {
        Some(cpu) => cpu,
        None => process_cpu_ticks(),
    }
}

/// CPU time of a process's threads (`/proc/<pid>/task`) so far; `None` once it is gone.
pub(crate) fn cpu_of(task_dir: &str) -> Option<Duration> {
    schedstat_cpu(task_dir)
}

fn schedstat_cpu(task_dir: &str) -> Option<Duration> {
    let mut nanos = 0;
    let mut found = false;
    for task in std::fs::read_dir(task_dir).into_iter().flatten().flatten() {
        let schedstat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        if let Some(on_cpu) = schedstat
            .split_whitespace()
            .next()
            .and_then(|n| n.parse::<u64>().ok())
        {
            nanos += on_cpu;
            found = true;
        }
    }
    found.then(|| Duration::from_nanos(nanos))
}

/// User + system CPU time of this process from `/proc/self/stat`, in 10 ms ticks.
fn process_cpu_ticks() -> Duration {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return Duration::ZERO;
    };
    // The command name (field 2) may contain spaces: count fields after its closing paren.
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // Fields 14 (utime) and 15 (stime), counted from 1, are 11 and 12 after the name.
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // USER_HZ is 100 on every Linux architecture that reports through /proc.
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_percentiles() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        let hundred: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&hundred, 50.0), 50.0);
        assert_eq!(percentile(&hundred, 99.0), 99.0);
        assert_eq!(percentile(&[7.0], 99.0), 7.0);
    }

    #[test]
    fn cpu_time_advances() {
        let before = process_cpu();
        let mut x = 0u64;
        let start = std::time::Instant::now();
        while start.elapsed() < Duration::from_millis(60) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        assert!(process_cpu() > before || !std::path::Path::new("/proc/self/stat").exists());
    }
}
