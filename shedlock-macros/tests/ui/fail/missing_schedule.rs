use shedlock::scheduled;

#[scheduled(initial_delay = "10s")]
async fn report() {}

fn main() {}
