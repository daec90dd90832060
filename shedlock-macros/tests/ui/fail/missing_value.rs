use shedlock::{scheduled, scheduler_lock};

#[scheduled(cron)]
#[scheduler_lock(name = "report", keep_alive)]
async fn report() {}

fn main() {}
