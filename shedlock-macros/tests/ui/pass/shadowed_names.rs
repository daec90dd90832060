#![deny(warnings)]
#![allow(dead_code, non_camel_case_types)]
// Generated code must not depend on names the user can shadow.

type Result = ();
struct Duration;
mod core {}
type Option = ();
type Box = ();
struct Some;
struct None;
struct Clone;
struct Send;
struct Sync;
struct Job;
struct Schedule;
struct __private;

#[derive(::core::clone::Clone)]
struct AppState;

#[::shedlock::scheduled(cron = "0 * * * * *", zone = "UTC", initial_delay = "1s")]
#[::shedlock::scheduler_lock(name = "shadowed", lock_at_most_for = "1m", keep_alive = true)]
async fn shadowed(state: AppState, lock: ::shedlock::LockContext) {
    let _ = (state, lock);
}

#[::shedlock::scheduled(fixed_rate = "1m")]
async fn shadowed_without_state() {}

fn main() {
    let job: ::shedlock::Job<AppState> = ::shedlock::job!(shadowed);
    assert_eq!(job.name(), "shadowed");
    let job: ::shedlock::Job<AppState> = ::shedlock::job!(shadowed_without_state);
    assert_eq!(job.name(), "shadowed_without_state");
}
