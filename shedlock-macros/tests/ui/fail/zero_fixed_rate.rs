use shedlock::scheduled;

#[scheduled(fixed_rate = "PT0S")]
async fn busy_loop() {}

fn main() {}
