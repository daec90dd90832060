use shedlock::{scheduled, scheduler_lock};

#[scheduled(fixed_rate = 60)]
#[scheduler_lock(name = report, keep_alive = "yes")]
async fn report() {}

fn main() {}
