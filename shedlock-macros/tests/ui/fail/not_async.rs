use shedlock::scheduled;

#[scheduled(fixed_rate = "1m")]
fn report() {}

fn main() {}
