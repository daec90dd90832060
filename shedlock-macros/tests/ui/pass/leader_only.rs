#![deny(warnings)]
use shedlock::{LockContext, scheduled, scheduler_lock};

#[scheduled(fixed_rate = "10s", leader = "batch")]
async fn leader_only() {}

#[scheduled(cron = "0 * * * * *", leader = "batch")]
#[scheduler_lock(name = "leader_and_lock")]
async fn leader_and_lock(_lock: LockContext) {}

fn main() {
    let job: shedlock::Job<()> = shedlock::job!(leader_only);
    assert_eq!(job.leader(), Some("batch"));
    assert!(job.lock().is_none());
    let job: shedlock::Job<()> = shedlock::job!(leader_and_lock);
    assert_eq!(job.leader(), Some("batch"));
    assert_eq!(job.lock().map(|l| l.name()), Some("leader_and_lock"));
}
