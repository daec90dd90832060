use shedlock::scheduled;

#[scheduled(fixed_rate = "1m")]
async fn report() -> u32 {
    42
}

fn main() {
    let _job: shedlock::Job<()> = shedlock::job!(report);
}
