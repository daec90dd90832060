use shedlock::{scheduled, scheduler_lock};

#[scheduled(fixed_rate = "1m")]
#[scheduler_lock(name = "report", lock_at_most_for = "P1M")]
async fn report() {}

fn main() {}
