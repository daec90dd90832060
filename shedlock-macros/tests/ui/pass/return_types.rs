#![deny(warnings)]
use std::fmt;

use shedlock::scheduled;

#[derive(Debug)]
struct ReportError;

impl fmt::Display for ReportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("report failed")
    }
}

#[scheduled(fixed_rate = "1m")]
async fn unit() {}

#[scheduled(fixed_rate = "1m")]
async fn explicit_unit() -> () {}

#[scheduled(fixed_rate = "1m")]
async fn custom_error() -> Result<u32, ReportError> {
    Err(ReportError)
}

#[scheduled(fixed_rate = "1m")]
async fn anyhow_error() -> anyhow::Result<()> {
    Ok(())
}

#[scheduled(fixed_rate = "1m")]
async fn boxed_error() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    Ok(())
}

fn main() {
    let _: shedlock::Job<()> = shedlock::job!(unit);
    let _: shedlock::Job<()> = shedlock::job!(explicit_unit);
    let _: shedlock::Job<()> = shedlock::job!(custom_error);
    let _: shedlock::Job<()> = shedlock::job!(anyhow_error);
    let _: shedlock::Job<()> = shedlock::job!(boxed_error);
}
