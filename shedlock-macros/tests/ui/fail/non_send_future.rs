use std::rc::Rc;

use shedlock::scheduled;

#[scheduled(fixed_rate = "1m")]
async fn report() {
    let shared = Rc::new(1);
    tokio::task::yield_now().await;
    drop(shared);
}

fn main() {
    let _job: shedlock::Job<()> = shedlock::job!(report);
    let _job: shedlock::Job<()> = shedlock::job!(report_later);
}

// With the lock attribute first, the error points at that attribute.
#[shedlock::scheduler_lock(name = "report_later")]
#[scheduled(fixed_rate = "1m")]
async fn report_later() {
    let shared = Rc::new(1);
    tokio::task::yield_now().await;
    drop(shared);
}
