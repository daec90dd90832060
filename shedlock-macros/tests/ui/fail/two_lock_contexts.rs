use shedlock::{LockContext, scheduled, scheduler_lock};

#[scheduled(fixed_rate = "1m")]
#[scheduler_lock(name = "report")]
async fn report(first: LockContext, second: shedlock::LockContext) {
    let _ = (first, second);
}

fn main() {}
