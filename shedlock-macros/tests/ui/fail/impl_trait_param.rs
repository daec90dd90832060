use shedlock::scheduled;

#[scheduled(fixed_rate = "1m")]
async fn report(state: impl Clone + Send + 'static) {
    drop(state);
}

fn main() {}
