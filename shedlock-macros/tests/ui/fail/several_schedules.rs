use shedlock::scheduled;

#[scheduled(cron = "0 * * * * *", fixed_rate = "1m")]
async fn report() {}

fn main() {}
