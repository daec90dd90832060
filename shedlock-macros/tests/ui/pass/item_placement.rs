#![deny(warnings)]
// Jobs in modules and blocks, public or not, documented, deprecated, cfg'd, with raw names.
use shedlock::scheduled;

pub mod jobs {
    use shedlock::{scheduled, scheduler_lock};

    /// Sends the newsletter.
    #[scheduled(cron = "0 0 8 * * MON")]
    #[scheduler_lock(name = "newsletter")]
    pub async fn newsletter() {}

    #[scheduled(fixed_rate = "1m")]
    pub(crate) async fn crate_visible() {}

    #[deprecated = "use newsletter"]
    #[scheduled(fixed_rate = "1m")]
    pub async fn old_newsletter() {}
}

#[cfg(any())]
#[scheduled(fixed_rate = "1m")]
async fn compiled_out(state: DoesNotExist) {}

#[scheduled(fixed_rate = "1m")]
async fn r#match() {}

fn main() {
    #[scheduled(fixed_rate = "1m")]
    async fn local() {}

    let local: shedlock::Job<()> = shedlock::job!(local);
    assert_eq!(local.name(), "local");
    let raw: shedlock::Job<()> = shedlock::job!(r#match);
    assert_eq!(raw.name(), "match");
    let _: shedlock::Job<()> = shedlock::job!(jobs::newsletter);
    let _: shedlock::Job<()> = shedlock::job!(jobs::crate_visible);
    #[allow(deprecated)]
    let _: shedlock::Job<()> = shedlock::job!(jobs::old_newsletter);
}
