use shedlock::scheduled;

#[scheduled(cron = "*/5 * * * *")]
async fn every_five_minutes() {}

fn main() {}
