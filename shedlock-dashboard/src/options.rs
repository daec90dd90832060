//! What the dashboard shows and allows.

use std::fmt;
use std::time::Duration;

use shedlock_core::Error;

use crate::guard::AllowedHost;

/// The shortest release token [`DashboardOptions::allow_release`] accepts, in characters.
pub const MIN_RELEASE_TOKEN_CHARS: usize = 16;

/// What the dashboard shows and allows. [`DashboardOptions::new`] is read-only and answers only
/// requests addressed to `localhost`, `127.0.0.1` or `[::1]`.
#[derive(Clone)]
pub struct DashboardOptions {
    pub(crate) release_token: Option<String>,
    pub(crate) allowed_hosts: Vec<AllowedHost>,
    pub(crate) elections: Vec<String>,
    pub(crate) page_size: usize,
    pub(crate) refresh: Duration,
    pub(crate) runs_per_job: usize,
    pub(crate) timeline: Duration,
    pub(crate) timeline_runs: usize,
}

impl DashboardOptions {
    /// Read-only, for `localhost`, `127.0.0.1` and `[::1]` on any port; 50 locks a page,
    /// reloaded every 5 s, the last 5 runs of each lock listed and its last 24 drawn on a
    /// timeline of the last hour. A page stays under 500 KB however long the history (about
    /// 300 KB when every lock of the page ran 24 times within the hour, failing with long
    /// errors).
    pub fn new() -> Self {
        DashboardOptions {
            release_token: None,
            allowed_hosts: AllowedHost::loopback(),
            elections: Vec::new(),
            page_size: 50,
            refresh: Duration::from_secs(5),
            runs_per_job: 5,
            timeline: Duration::from_secs(3600),
            timeline_runs: 24,
        }
    }

    /// Lets the page release held locks, for whoever gives `token` on the confirmation page.
    /// The token is compared in constant time and never rendered; attempts are rate-limited
    /// (a burst of 10, then one every 2 s for the whole dashboard, answered 429 beyond).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming `release_token` when `token` is shorter than
    /// [`MIN_RELEASE_TOKEN_CHARS`] characters (the message gives its length, never the token).
    pub fn allow_release(mut self, token: impl Into<String>) -> Result<Self, Error> {
        let token = token.into();
        let chars = token.chars().count();
        if chars < MIN_RELEASE_TOKEN_CHARS {
            return Err(Error::invalid_config(
                "release_token",
                format!(
                    "the release token has {chars} characters; at least \
                     {MIN_RELEASE_TOKEN_CHARS} are needed"
                ),
            ));
        }
        self.release_token = Some(token);
        Ok(self)
    }

    /// The host names the dashboard answers to, replacing the default (`localhost`,
    /// `127.0.0.1`, `[::1]`): each `name` (any port) or `name:port`, as a browser sends it in
    /// the `Host` header (`dash.example.com`, `10.0.0.5:8080`, `[::1]:8080`). A request for
    /// another host is answered 421 without the page, so a DNS name an attacker rebinds to
    /// this address reads nothing; a release must come from a page of the same host (its
    /// `Origin`, or else its `Referer`). Behind a proxy, let it pass the browser's `Host` on.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming `allowed_hosts` for an entry that is not a host name or
    /// address with an optional port, or for an empty list.
    pub fn allowed_hosts<I, S>(mut self, hosts: I) -> Result<Self, Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let hosts = hosts
            .into_iter()
            .map(|host| AllowedHost::parse(host.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        if hosts.is_empty() {
            return Err(Error::invalid_config(
                "allowed_hosts",
                "no host is allowed: the dashboard would answer nobody",
            ));
        }
        self.allowed_hosts = hosts;
        Ok(self)
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

    /// Locks per page (1 to 500): each lock's runs are read for the page it is on, so a page
    /// reads at most `page_size` locks and `page_size` × (the larger of `runs_per_job` and
    /// `timeline_runs`, plus one) run records, and holds about 1 KB per lock and 150 bytes per
    /// run shown, however long the history.
    ///
    /// Jobs per page of the jobs view too: each job's lock's latest run and at most 200 runs
    /// of its last day are read for the page it is on (about 1 KB of page per job: 54 KB for
    /// 50 jobs, 490 KB for 500, of a fleet of 10,000).
    pub fn page_size(mut self, locks: usize) -> Self {
        self.page_size = locks.clamp(1, 500);
        self
    }

    /// How often the page reloads itself (at least one second).
    pub fn refresh(mut self, every: Duration) -> Self {
        self.refresh = every.max(Duration::from_secs(1));
        self
    }

    /// Latest runs listed per lock (at most 100); older ones are a click away, a page at a
    /// time.
    pub fn runs_per_job(mut self, runs: usize) -> Self {
        self.runs_per_job = runs.min(100);
        self
    }

    /// How far back the timeline reaches (at least a minute).
    pub fn timeline(mut self, span: Duration) -> Self {
        self.timeline = span.max(Duration::from_secs(60));
        self
    }

    /// Latest runs of each lock drawn on the timeline (at most 100); a lock that ran more
    /// often within the span shows, greyed, the part its drawn runs do not reach.
    pub fn timeline_runs(mut self, runs: usize) -> Self {
        self.timeline_runs = runs.min(100);
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

    /// How many runs of one lock a page reads: the listed ones and the drawn ones.
    pub(crate) fn runs_read_per_lock(&self) -> usize {
        self.runs_per_job.max(self.timeline_runs)
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
            .field("allowed_hosts", &self.allowed_hosts)
            .field("elections", &self.elections)
            .field("page_size", &self.page_size)
            .field("refresh", &self.refresh)
            .field("runs_per_job", &self.runs_per_job)
            .field("timeline", &self.timeline)
            .field("timeline_runs", &self.timeline_runs)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "s3cret-s3cret-s3cret";

    #[test]
    fn only_the_token_releases_and_debug_hides_it() {
        let options = DashboardOptions::new().allow_release(TOKEN).unwrap();
        assert!(options.release_token_is(TOKEN));
        for wrong in [
            "",
            "s3cret-s3cret-s3cre",
            "s3cret-s3cret-s3cret!",
            "S3cret-s3cret-s3cret",
        ] {
            assert!(!options.release_token_is(wrong), "{wrong}");
        }
        assert!(!format!("{options:?}").contains("s3cret"));
        assert!(!DashboardOptions::new().release_token_is(""));
    }

    /// Issue 29, item 5: a one-character token was accepted.
    #[test]
    fn a_short_release_token_is_refused_naming_the_setting() {
        for short in ["", "x", "fifteen-chars-x", "ééééééééééééééé"] {
            let error = DashboardOptions::new().allow_release(short).unwrap_err();
            let Error::InvalidConfig { field, message } = &error else {
                panic!("{error:?}");
            };
            assert_eq!(*field, "release_token");
            assert!(message.contains("at least 16"), "{message}");
            if !short.is_empty() {
                assert!(
                    !message.contains(short),
                    "the token is never written: {message}"
                );
            }
        }
        assert!(
            DashboardOptions::new()
                .allow_release("sixteen-chars-xx")
                .is_ok()
        );
    }

    #[test]
    fn allowed_hosts_are_checked_when_set() {
        for bad in [
            "", " ", "a b", "http://x", "x/y", "x:", "x:port", "x:99999", "u@x",
        ] {
            let error = DashboardOptions::new().allowed_hosts([bad]).unwrap_err();
            assert!(
                matches!(
                    error,
                    Error::InvalidConfig {
                        field: "allowed_hosts",
                        ..
                    }
                ),
                "{bad:?}: {error:?}"
            );
        }
        assert!(
            DashboardOptions::new()
                .allowed_hosts(Vec::<String>::new())
                .is_err()
        );
        let options = DashboardOptions::new()
            .allowed_hosts(["Dash.Example.com", "10.0.0.5:8080", "::1", "[::1]:9"])
            .unwrap();
        assert_eq!(options.allowed_hosts.len(), 4);
    }
}
