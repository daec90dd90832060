use shedlock::scheduled;

// February 31st: the pattern parses but matches no date, so the job would silently never run.
#[scheduled(cron = "0 0 0 31 2 *")]
async fn february_thirty_first() {}

// A day-of-week that no day of the month can be: the 1st is never a fifth Monday.
#[scheduled(cron = "0 0 0 1 * MON#5", zone = "Europe/Berlin")]
async fn fifth_monday_on_the_first() {}

fn main() {}
