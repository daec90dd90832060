//! What the dashboard shows and allows.

use std::fmt;
use std::time::Duration;

/// What the dashboard shows and allows. [`DashboardOptions::new`] is read-only.
#[derive(Clone)]
pub struct DashboardOptions {
    pub(crate) release_token: Option<String>,
    pub(crate) elections: Vec<String>,
    pub(crate) page_size: usize,
    pub(crate) refresh: Duration,
    pub(crate) runs_per_job: usize,
    pub(crate) timeline: Duration,
}

impl DashboardOptions {
    /// Read-only; 50 locks a page, reloaded every 5 s, 10 runs a job, a timeline of the last
    /// hour.
    pub fn new() -> Self {
        DashboardOptions {
            release_token: None,
            elections: Vec::new(),
            page_size: 50,
            refresh: Duration::from_secs(5),
            runs_per_job: 10,
            timeline: Duration::from_secs(3600),
        }
    }

    /// Lets the page release held locks, for whoever gives `token` on the confirmation page.
    /// The token is compared in constant time and never rendered. An empty token allows
    /// nothing.
    pub fn allow_release(mut self, token: impl Into<String>) -> Self {
        self.release_token = Some(token.into()).filter(|token| !token.is_empty());
        self
    }

    /// The elections to show with their leaders: an election on a lock store is a lock of the
    /// election's name (its holder leads, its token is the term).
    pub fn elections<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.elections = names.into_iter().map(Into::into).collect();
        self
    }

    /// Locks per page (at least 1).
    pub fn page_size(mut self, locks: usize) -> Self {
        self.page_size = locks.max(1);
        self
    }

    /// How often the page reloads itself (at least one second).
    pub fn refresh(mut self, every: Duration) -> Self {
        self.refresh = every.max(Duration::from_secs(1));
        self
    }

    /// Recent runs listed per job (the timeline shows the whole last hour).
    pub fn runs_per_job(mut self, runs: usize) -> Self {
        self.runs_per_job = runs;
        self
    }

    /// How far back the timeline reaches (at least a minute).
    pub fn timeline(mut self, span: Duration) -> Self {
        self.timeline = span.max(Duration::from_secs(60));
        self
    }

    pub(crate) fn release_allowed(&self) -> bool {
        self.release_token.is_some()
    }

    /// Whether `given` is the release token, in time independent of where they differ.
    pub(crate) fn release_token_is(&self, given: &str) -> bool {
        let Some(token) = &self.release_token else {
            return false;
        };
        let (a, b) = (token.as_bytes(), given.as_bytes());
        let differ = a
            .iter()
            .zip(b)
            .fold(a.len() ^ b.len(), |acc, (x, y)| acc | usize::from(x ^ y));
        differ == 0
    }
}

impl Default for DashboardOptions {
    fn default() -> Self {
        DashboardOptions::new()
    }
}

impl fmt::Debug for DashboardOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DashboardOptions")
            .field("release_allowed", &self.release_allowed())
            .field("elections", &self.elections)
            .field("page_size", &self.page_size)
            .field("refresh", &self.refresh)
            .field("runs_per_job", &self.runs_per_job)
            .field("timeline", &self.timeline)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_token_releases_and_debug_hides_it() {
        let options = DashboardOptions::new().allow_release("s3cret");
        assert!(options.release_token_is("s3cret"));
        for wrong in ["", "s3cre", "s3cret!", "S3cret"] {
            assert!(!options.release_token_is(wrong), "{wrong}");
        }
        assert!(!format!("{options:?}").contains("s3cret"));
        assert!(!DashboardOptions::new().release_token_is(""));
        assert!(!DashboardOptions::new().allow_release("").release_allowed());
    }
}
