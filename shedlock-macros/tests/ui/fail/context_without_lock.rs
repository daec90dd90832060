use shedlock::{LockContext, scheduled};

#[scheduled(fixed_rate = "1m")]
async fn report(lock: LockContext) {
    let _ = lock.fencing_token();
}

fn main() {}
