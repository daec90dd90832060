use shedlock::scheduler_lock;

#[scheduler_lock(name = "report")]
async fn report() {}

fn main() {}
