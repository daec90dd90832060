//! `/proc/self/status`, shared by the benchmarks and the memory binary.

/// A field of `/proc/self/status` in KiB (`VmRSS`, `VmHWM`); 0 where it cannot be read.
pub(crate) fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|line| {
            line.strip_prefix(field)?
                .strip_prefix(':')?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}
