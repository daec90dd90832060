use shedlock::scheduled;

#[scheduled(cron = "0 61 * * * *")]
async fn minute_sixty_one() {}

fn main() {}
