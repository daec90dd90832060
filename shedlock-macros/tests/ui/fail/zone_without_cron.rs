use shedlock::scheduled;

#[scheduled(fixed_rate = "1m", zone = "Europe/Berlin")]
async fn every_minute() {}

fn main() {}
