use shedlock::scheduled;

#[scheduled(fixed_delay = "PT1M30")]
async fn report() {}

fn main() {}
