use shedlock::scheduled;

#[scheduled(cron = "0 * * * * *", misfire_threshold = "0ms")]
async fn never_on_time() {}

fn main() {}
