use shedlock::scheduled;

#[derive(Debug)]
struct ReportError;

#[scheduled(fixed_rate = "1m")]
async fn report() -> Result<(), ReportError> {
    Err(ReportError)
}

fn main() {
    let _job: shedlock::Job<()> = shedlock::job!(report);
}
