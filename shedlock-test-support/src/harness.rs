//! The conformance suite's harness for a store on a real server.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use shedlock_core::LockProvider;
use shedlock_core::conformance::Harness;

type ProviderFor = dyn Fn(&str) -> Arc<dyn LockProvider> + Send + Sync;

/// The conformance harness for a store on a real server: the provider for each holder comes
/// from a closure (all on one store), and time passes by really waiting, since a server's clock
/// cannot be stepped.
pub struct ServerHarness {
    provider_for: Box<ProviderFor>,
}

impl ServerHarness {
    /// A harness whose provider for `holder` is `provider_for(holder)`.
    pub fn new(
        provider_for: impl Fn(&str) -> Arc<dyn LockProvider> + Send + Sync + 'static,
    ) -> Self {
        ServerHarness {
            provider_for: Box::new(provider_for),
        }
    }
}

impl fmt::Debug for ServerHarness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerHarness").finish_non_exhaustive()
    }
}

#[shedlock_core::async_trait]
impl Harness for ServerHarness {
    async fn provider(&self, holder: &str) -> Arc<dyn LockProvider> {
        (self.provider_for)(holder)
    }

    async fn pass_time(&self, duration: Duration) {
        tokio::time::sleep(duration).await;
    }
}
