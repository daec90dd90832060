#![deny(warnings)]
// Either attribute may come first; paths may be qualified.
use shedlock::{scheduled, scheduler_lock};

#[scheduled(fixed_rate = "1m")]
#[scheduler_lock(name = "scheduled_first")]
async fn scheduled_first() {}

#[scheduler_lock(name = "lock_first")]
#[scheduled(fixed_rate = "1m")]
async fn lock_first() {}

#[shedlock::scheduler_lock(name = "qualified")]
#[shedlock::scheduled(fixed_rate = "1m")]
async fn qualified() {}

/// Documented, with other attributes around ours.
#[inline]
#[scheduled(fixed_rate = "1m")]
#[allow(clippy::unused_async)]
#[scheduler_lock(name = "mixed")]
#[must_use = "never mind"]
async fn mixed() {}

fn main() {
    for (job, lock) in [
        (shedlock::job!(scheduled_first), "scheduled_first"),
        (shedlock::job!(lock_first), "lock_first"),
        (shedlock::job!(qualified), "qualified"),
        (shedlock::job!(mixed), "mixed"),
    ] {
        let job: shedlock::Job<()> = job;
        assert_eq!(job.name(), lock);
        assert_eq!(job.lock().map(|lock| lock.name()), Some(lock));
    }
}
