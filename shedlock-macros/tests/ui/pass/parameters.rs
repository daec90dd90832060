#![deny(warnings)]
// Every combination of parameters, in any order, with any pattern.
use shedlock::{LockContext, scheduled, scheduler_lock};

#[derive(Clone)]
struct AppState {
    greeting: &'static str,
}

#[scheduled(fixed_rate = "1m")]
async fn none() {}

#[scheduled(fixed_rate = "1m")]
async fn state(state: AppState) {
    let _ = state.greeting;
}

#[scheduled(fixed_rate = "1m")]
#[scheduler_lock(name = "context")]
async fn context(lock: LockContext) {
    let _ = lock.fencing_token();
}

#[scheduled(fixed_rate = "1m")]
#[scheduler_lock(name = "state_then_context")]
async fn state_then_context(mut state: AppState, lock: shedlock::LockContext) {
    state.greeting = lock.name().len().to_string().leak();
    let _ = state.greeting;
}

#[scheduled(fixed_rate = "1m")]
#[scheduler_lock(name = "context_then_state")]
async fn context_then_state(_: LockContext, AppState { greeting }: AppState) {
    let _ = greeting;
}

#[scheduled(fixed_rate = "1m")]
async fn tuple_state((a, b): (u32, String)) {
    let _ = (a, b);
}

#[scheduled(fixed_rate = "1m")]
async fn static_reference(config: &'static str) {
    let _ = config;
}

fn main() {
    let _: shedlock::Job<AppState> = shedlock::job!(none);
    let _: shedlock::Job<AppState> = shedlock::job!(state);
    let _: shedlock::Job<AppState> = shedlock::job!(context);
    let _: shedlock::Job<AppState> = shedlock::job!(state_then_context);
    let _: shedlock::Job<AppState> = shedlock::job!(context_then_state);
    let _: shedlock::Job<(u32, String)> = shedlock::job!(tuple_state);
    let _: shedlock::Job<&'static str> = shedlock::job!(static_reference);
}
