use shedlock::{scheduled, scheduler_lock};

#[scheduled(fixed_rate = "1m")]
#[scheduler_lock(name = "report", lock_at_most_for = "1m", lock_at_least_for = "PT5M")]
async fn report() {}

fn main() {}
