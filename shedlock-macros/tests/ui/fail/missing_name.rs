use shedlock::{scheduled, scheduler_lock};

#[scheduled(fixed_rate = "1m")]
#[scheduler_lock(lock_at_most_for = "10m")]
async fn report() {}

fn main() {}
