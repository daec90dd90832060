use shedlock::{scheduled, scheduler_lock};

#[scheduled(fixed_rate = "1m")]
#[scheduler_lock(name = "report", lock_at_most = "10m")]
async fn report() {}

#[scheduled(every = "1m")]
async fn heartbeat() {}

fn main() {}
