// Crash-recovery arguments: an unknown policy, a backoff without retries, a negative count,
// and catch-up on a schedule that is not cron are reported on their literals, together.
use shedlock::{scheduled, scheduler_lock};

#[scheduler_lock(name = "a", on_interrupted = "retry", retry_backoff = "5s")]
#[scheduled(fixed_rate = "1m", catch_up = "6h")]
async fn first() {}

#[scheduler_lock(name = "b", retries = -1)]
#[scheduled(cron = "0 0 2 * * *", catch_up = "0s")]
async fn second() {}

fn main() {}
