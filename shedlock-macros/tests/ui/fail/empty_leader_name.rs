use shedlock::scheduled;

#[scheduled(fixed_rate = "10s", leader = "")]
async fn empty_leader() {}

fn main() {}
