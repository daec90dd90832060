#![deny(warnings)]
use std::time::Duration;

use shedlock::{JobLock, scheduled, scheduler_lock};

#[scheduled(fixed_rate = "1m")]
#[scheduler_lock(name = "defaults")]
async fn defaults() {}

#[scheduled(fixed_rate = "1m")]
#[scheduler_lock(
    name = "everything",
    lock_at_most_for = "PT1H30M",
    lock_at_least_for = "1m 30s 250ms",
    keep_alive = true
)]
async fn everything() {}

#[scheduled(fixed_rate = "1m")]
#[scheduler_lock(name = "no_keep_alive", keep_alive = false, lock_at_least_for = "1m")]
async fn no_keep_alive() {}

fn main() -> Result<(), shedlock::Error> {
    let job: shedlock::Job<()> = shedlock::job!(defaults);
    assert_eq!(job.lock(), Some(&JobLock::new("defaults")?));

    let job: shedlock::Job<()> = shedlock::job!(everything);
    let expected = JobLock::new("everything")?
        .lock_at_most_for(Duration::from_secs(5400))?
        .lock_at_least_for(Duration::from_millis(90_250))?
        .keep_alive(true);
    assert_eq!(job.lock(), Some(&expected));

    let job: shedlock::Job<()> = shedlock::job!(no_keep_alive);
    let expected = JobLock::new("no_keep_alive")?
        .lock_at_least_for(Duration::from_secs(60))?
        .keep_alive(false);
    assert_eq!(job.lock(), Some(&expected));
    Ok(())
}
