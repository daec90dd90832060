use shedlock::scheduled;

#[scheduled(fixed_rate = "1m")]
async fn report<S: Clone>(state: S) {
    drop(state);
}

fn main() {}
