use shedlock::scheduled;

#[scheduled(cron = "0 0 3 * * *", zone = "Europe/Atlantis")]
async fn nightly() {}

fn main() {}
