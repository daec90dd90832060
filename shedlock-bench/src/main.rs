//! Placeholder: the lock throughput, scaling and handover benchmarks (issue 9) are being written.

fn main() {}
