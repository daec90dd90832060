use shedlock::scheduled;

struct AppState;

#[scheduled(fixed_rate = "1m")]
async fn report(state: &AppState) {
    let _ = state;
}

fn main() {}
