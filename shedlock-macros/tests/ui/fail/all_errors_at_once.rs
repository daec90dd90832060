// Independent mistakes are reported together, and the job still resolves where it is used
// (no error from `shedlock::job!`).
use shedlock::{LockContext, scheduled, scheduler_lock};

#[derive(Clone)]
struct AppState;

#[scheduler_lock(name = "", lock_at_most_for = "5 parsecs")]
#[scheduled(cron = "* * * * *", zone = "Nowhere/Special")]
fn report(state: &AppState, lock: LockContext) {
    let _ = (state, lock);
}

fn main() {
    let _job: shedlock::Job<AppState> = shedlock::job!(report);
}
