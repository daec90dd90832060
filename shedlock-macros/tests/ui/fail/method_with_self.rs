use shedlock::scheduled;

struct Reporter;

impl Reporter {
    #[scheduled(fixed_rate = "1m")]
    async fn report(&self) {}
}

fn main() {}
