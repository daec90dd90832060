#![deny(warnings)]
use shedlock::scheduled;

#[scheduled(cron = "0 */5 * * * *")]
async fn cron() {}

#[scheduled(cron = "0 30 2 * * MON-FRI", zone = "Europe/Berlin")]
async fn cron_in_zone() {}

#[scheduled(cron = "0 0 0 1 1 * 2099", initial_delay = "PT1M")]
async fn cron_with_year_and_initial_delay() {}

#[scheduled(fixed_rate = "1h 30m")]
async fn fixed_rate() {}

#[scheduled(fixed_rate = "PT0.5S", initial_delay = "10s", misfire_threshold = "2s")]
async fn fixed_rate_with_initial_delay() {}

#[scheduled(fixed_delay = "500ms")]
async fn fixed_delay() {}

#[scheduled(fixed_delay = "P1DT2H", initial_delay = "0s")]
async fn fixed_delay_iso() {}

// The longest duration accepted, `MAX_DURATION`.
#[scheduled(fixed_rate = "P36525D", initial_delay = "100y")]
async fn once_a_century() {}

fn main() {
    let cases: [(shedlock::Job<()>, &str); 8] = [
        (shedlock::job!(cron), "cron \"0 */5 * * * *\""),
        (
            shedlock::job!(cron_in_zone),
            "cron \"0 30 2 * * MON-FRI\" in Europe/Berlin",
        ),
        (
            shedlock::job!(cron_with_year_and_initial_delay),
            "cron \"0 0 0 1 1 * 2099\", first after 1m",
        ),
        (shedlock::job!(fixed_rate), "every 1h 30m"),
        (
            shedlock::job!(fixed_rate_with_initial_delay),
            "every 500ms, first after 10s, missed when 2s late",
        ),
        (shedlock::job!(fixed_delay), "500ms after the previous run"),
        (
            shedlock::job!(fixed_delay_iso),
            "1day 2h after the previous run",
        ),
        (
            shedlock::job!(once_a_century),
            "every 100years, first after 100years",
        ),
    ];
    for (job, expected) in cases {
        assert_eq!(job.schedule().to_string(), expected, "{}", job.name());
    }
}
