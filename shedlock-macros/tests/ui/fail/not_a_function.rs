use shedlock::scheduled;

#[scheduled(fixed_rate = "1m")]
struct Report;

fn main() {}
