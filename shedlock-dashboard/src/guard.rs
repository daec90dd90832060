//! Who may talk to the dashboard: the hosts it answers to (against DNS rebinding), the origin a
//! release must come from (against cross-site forms), and how fast release tokens may be tried.

use std::fmt;
use std::net::Ipv6Addr;
use std::sync::Mutex;
use std::time::Duration;

use axum::http::{HeaderMap, Uri, header};
use shedlock_core::Error;
use tokio::time::Instant;

/// One host the dashboard answers to: a name (lower case; an IPv6 address in brackets) and
/// its port, or any port.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct AllowedHost {
    name: String,
    port: Option<u16>,
}

impl AllowedHost {
    /// The default: the loopback names, any port.
    pub(crate) fn loopback() -> Vec<AllowedHost> {
        ["localhost", "127.0.0.1", "[::1]"]
            .into_iter()
            .map(|name| AllowedHost {
                name: name.to_owned(),
                port: None,
            })
            .collect()
    }

    /// An entry of [`DashboardOptions::allowed_hosts`](crate::DashboardOptions::allowed_hosts).
    pub(crate) fn parse(entry: &str) -> Result<AllowedHost, Error> {
        // A bare IPv6 address (`::1`), as people write it: bracketed as the Host header has it.
        let bracketed;
        let entry_text = match entry.parse::<Ipv6Addr>() {
            Ok(address) => {
                bracketed = format!("[{address}]");
                &bracketed
            }
            Err(_) => entry,
        };
        let (name, port) = split_authority(entry_text).ok_or_else(|| {
            Error::invalid_config(
                "allowed_hosts",
                format!(
                    "{entry:?} is not a host: give a name or address and an optional port \
                     (`dash.example.com`, `10.0.0.5:8080`, `[::1]:8080`)"
                ),
            )
        })?;
        Ok(AllowedHost { name, port })
    }

    fn admits(&self, name: &str, port: Option<u16>) -> bool {
        self.name == name && self.port.is_none_or(|allowed| port == Some(allowed))
    }
}

impl fmt::Debug for AllowedHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.port {
            Some(port) => write!(f, "{}:{port}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// `name[:port]` as a Host header or an origin's authority has it: the name in lower case
/// (an IPv6 address with its brackets) and the port; `None` for anything else (user info,
/// paths, spaces, an empty or non-numeric port).
fn split_authority(text: &str) -> Option<(String, Option<u16>)> {
    let (name, port) = match text.strip_prefix('[') {
        Some(rest) => {
            let (address, after) = rest.split_once(']')?;
            address.parse::<Ipv6Addr>().ok()?;
            (&text[..address.len() + 2], after)
        }
        None => match text.find(':') {
            Some(colon) => text.split_at(colon),
            None => (text, ""),
        },
    };
    let port = match port {
        "" => None,
        port => Some(port.strip_prefix(':')?.parse::<u16>().ok()?),
    };
    if port.is_some_and(|port| port == 0) {
        return None;
    }
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_');
    if !name.starts_with('[') && (name.is_empty() || !name.chars().all(plain)) {
        return None;
    }
    Some((name.to_ascii_lowercase(), port))
}

/// Why a request was turned away before it reached the store.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Addressed to a host not allowed (or to none): 421.
    Host,
    /// A release from a page of another origin, or of none that can be told: 403.
    Origin,
    /// Too many release tokens tried: 429, try again after this long.
    TooManyAttempts(Duration),
}

/// Whether the request is addressed to an allowed host: its `Host` header (and the authority
/// of an absolute request URI, when it has one).
pub(crate) fn check_host(
    allowed: &[AllowedHost],
    headers: &HeaderMap,
    uri: &Uri,
) -> Result<(), Refused> {
    let host = request_host(headers).ok_or(Refused::Host)?;
    let admitted = |(name, port): &(String, Option<u16>)| {
        allowed.iter().any(|entry| entry.admits(name, *port))
    };
    if !admitted(&host) {
        return Err(Refused::Host);
    }
    if let Some(authority) = uri.authority() {
        let named = split_authority(authority.as_str()).ok_or(Refused::Host)?;
        if !admitted(&named) {
            return Err(Refused::Host);
        }
    }
    Ok(())
}

fn request_host(headers: &HeaderMap) -> Option<(String, Option<u16>)> {
    let mut hosts = headers.get_all(header::HOST).iter();
    let host = hosts.next()?;
    if hosts.next().is_some() {
        return None;
    }
    split_authority(host.to_str().ok()?)
}

/// Whether a POST comes from a page of the host it is addressed to: its `Origin` header, or
/// when a browser sent none its `Referer`. Neither (or `Origin: null`) is refused.
pub(crate) fn check_origin(headers: &HeaderMap) -> Result<(), Refused> {
    let host = request_host(headers).ok_or(Refused::Host)?;
    let source = match headers.get(header::ORIGIN) {
        Some(origin) => origin,
        None => headers.get(header::REFERER).ok_or(Refused::Origin)?,
    };
    let source = source.to_str().map_err(|_| Refused::Origin)?;
    let (scheme, rest) = source.split_once("://").ok_or(Refused::Origin)?;
    let default_port = match scheme.to_ascii_lowercase().as_str() {
        "http" => 80,
        "https" => 443,
        _ => return Err(Refused::Origin),
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let (name, port) = split_authority(authority).ok_or(Refused::Origin)?;
    let effective = |port: Option<u16>| port.unwrap_or(default_port);
    if name == host.0 && effective(port) == effective(host.1) {
        Ok(())
    } else {
        Err(Refused::Origin)
    }
}

/// Release attempts with a token, for the whole dashboard: a bucket of [`BURST`] that refills
/// one every [`REFILL`]. One bucket, not one per client: its memory stays constant whoever
/// calls, and no address rotation buys more guesses.
#[derive(Debug)]
pub(crate) struct Attempts {
    /// Tokens left, and when that was computed.
    bucket: Mutex<(f64, Instant)>,
}

/// Release tokens that may be tried at once.
pub(crate) const BURST: u32 = 10;
/// One more attempt after each of these.
pub(crate) const REFILL: Duration = Duration::from_secs(2);

impl Attempts {
    pub(crate) fn new() -> Self {
        Attempts {
            bucket: Mutex::new((f64::from(BURST), Instant::now())),
        }
    }

    /// Takes one attempt, or says how long until one is left.
    pub(crate) fn take(&self) -> Result<(), Refused> {
        let mut bucket = self.bucket.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let (left, at) = *bucket;
        let refilled = now.saturating_duration_since(at).as_secs_f64() / REFILL.as_secs_f64();
        let left = (left + refilled).min(f64::from(BURST));
        if left >= 1.0 {
            *bucket = (left - 1.0, now);
            Ok(())
        } else {
            *bucket = (left, now);
            let wait = REFILL.mul_f64(1.0 - left);
            Err(Refused::TooManyAttempts(wait))
        }
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn hosts_are_names_and_ports() {
        assert_eq!(
            split_authority("Dash.Example.COM:8080"),
            Some(("dash.example.com".to_owned(), Some(8080)))
        );
        assert_eq!(
            split_authority("[::1]:9"),
            Some(("[::1]".to_owned(), Some(9)))
        );
        assert_eq!(split_authority("[::1]"), Some(("[::1]".to_owned(), None)));
        for bad in [
            "", "a b", "x:", "x:0", "x:y", "[zz]", "[::1]x", "u@h", "h/p", "::1",
        ] {
            assert_eq!(split_authority(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn only_allowed_hosts_are_answered() {
        let loopback = AllowedHost::loopback();
        let uri = Uri::from_static("/");
        for ok in ["localhost", "127.0.0.1:8080", "LOCALHOST:1", "[::1]:8080"] {
            let request = headers(&[(header::HOST, ok)]);
            assert_eq!(check_host(&loopback, &request, &uri), Ok(()), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:8080",
            "127.0.0.2",
            "localhost.evil",
            "",
        ] {
            let request = headers(&[(header::HOST, bad)]);
            assert_eq!(
                check_host(&loopback, &request, &uri),
                Err(Refused::Host),
                "{bad}"
            );
        }
        assert_eq!(
            check_host(&loopback, &HeaderMap::new(), &uri),
            Err(Refused::Host)
        );
        let two = headers(&[(header::HOST, "localhost"), (header::HOST, "evil.example")]);
        assert_eq!(check_host(&loopback, &two, &uri), Err(Refused::Host));
        let absolute = Uri::from_static("http://evil.example/");
        let request = headers(&[(header::HOST, "localhost")]);
        assert_eq!(
            check_host(&loopback, &request, &absolute),
            Err(Refused::Host)
        );

        let exact = vec![AllowedHost::parse("dash.example.com:8443").unwrap()];
        let request = headers(&[(header::HOST, "dash.example.com:8443")]);
        assert_eq!(check_host(&exact, &request, &uri), Ok(()));
        let request = headers(&[(header::HOST, "dash.example.com")]);
        assert_eq!(check_host(&exact, &request, &uri), Err(Refused::Host));
    }

    #[test]
    fn a_release_comes_from_a_page_of_the_same_host() {
        let host = (header::HOST, "127.0.0.1:8080");
        for ok in ["http://127.0.0.1:8080", "HTTP://127.0.0.1:8080"] {
            let request = headers(&[host.clone(), (header::ORIGIN, ok)]);
            assert_eq!(check_origin(&request), Ok(()), "{ok}");
        }
        let referer = headers(&[
            host.clone(),
            (header::REFERER, "http://127.0.0.1:8080/?a=1"),
        ]);
        assert_eq!(check_origin(&referer), Ok(()));
        for bad in [
            "http://evil.example",
            "http://127.0.0.1:8081",
            "http://localhost:8080",
            "null",
            "file://",
            "ftp://127.0.0.1:8080",
        ] {
            let request = headers(&[host.clone(), (header::ORIGIN, bad)]);
            assert_eq!(check_origin(&request), Err(Refused::Origin), "{bad}");
        }
        // The Origin decides when both are sent.
        let both = headers(&[
            host.clone(),
            (header::ORIGIN, "http://evil.example"),
            (header::REFERER, "http://127.0.0.1:8080/"),
        ]);
        assert_eq!(check_origin(&both), Err(Refused::Origin));
        assert_eq!(check_origin(&headers(&[host])), Err(Refused::Origin));
        // Default ports: a browser leaves them out of the Origin.
        let https = headers(&[
            (header::HOST, "dash.example.com"),
            (header::ORIGIN, "https://dash.example.com"),
        ]);
        assert_eq!(check_origin(&https), Ok(()));
        let http = headers(&[
            (header::HOST, "dash.example.com:80"),
            (header::ORIGIN, "http://dash.example.com"),
        ]);
        assert_eq!(check_origin(&http), Ok(()));
    }

    #[tokio::test(start_paused = true)]
    async fn attempts_come_in_a_burst_then_one_per_refill() {
        let attempts = Attempts::new();
        for _ in 0..BURST {
            assert_eq!(attempts.take(), Ok(()));
        }
        assert!(matches!(attempts.take(), Err(Refused::TooManyAttempts(_))));
        tokio::time::advance(REFILL).await;
        assert_eq!(attempts.take(), Ok(()));
        assert!(matches!(attempts.take(), Err(Refused::TooManyAttempts(_))));
    }
}
