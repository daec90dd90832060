use shedlock::{scheduled, scheduler_lock};

#[scheduled(fixed_rate = "1m")]
#[scheduler_lock(name = "report", lock_at_most_for = "0s")]
async fn report() {}

fn main() {}
