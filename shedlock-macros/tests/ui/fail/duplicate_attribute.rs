use shedlock::scheduled;

#[scheduled(fixed_rate = "1m")]
#[scheduled(fixed_rate = "2m")]
async fn report() {}

fn main() {}
