//! What of a URL may be shown, and what must never be printed, for any scheme: the userinfo
//! password, the value of every query parameter that may carry a secret, and the fragment
//! (where the tail of a password with an unencoded `#` lands). The shown URL is rebuilt from
//! the parsed URL with those parts replaced, never by searching the text for the secret; the
//! secrets, in every form a message could quote them, are then scrubbed from all output.

use std::borrow::Cow;
use std::fmt;

use percent_encoding::{NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use url::Url;

/// What a hidden part is replaced with.
pub(crate) const MASK: &str = "***";

/// A query parameter is secret when its name, lower-cased and without `-`, `_` and `.`,
/// contains one of these: `password`, `sslpassword`, `pass` (redis+unix), `passphrase`,
/// `pwd`, `token`, `auth`, `secret`, `sslkey`, `api_key`, `credentials`… Broad on purpose: a
/// hidden harmless value costs a look at the configuration, a shown secret costs a rotation.
const SECRET_NAME_PARTS: [&str; 7] = ["pass", "pwd", "secret", "token", "auth", "key", "cred"];

/// Whether a query parameter (its decoded name) may carry a secret.
pub(crate) fn is_secret_parameter(name: &str) -> bool {
    let name: String = name
        .chars()
        .filter(|c| !matches!(c, '-' | '_' | '.'))
        .flat_map(char::to_lowercase)
        .collect();
    SECRET_NAME_PARTS.iter().any(|part| name.contains(part))
}

/// A URL as it may be shown, and what must be scrubbed from any text.
#[derive(Debug)]
pub(crate) struct Masked {
    /// The URL with every secret part replaced by [`MASK`].
    pub(crate) shown: String,
    pub(crate) secrets: Secrets,
}

impl Masked {
    /// Masks `parsed`, which the url crate parsed from `input`. The secrets are taken both
    /// from the parsed URL and from `input` as written, since the url crate re-encodes some
    /// characters (a space, quotes, non-ASCII) and drops tabs and line breaks.
    pub(crate) fn of(input: &str, parsed: &Url) -> Masked {
        let mut hidden = Vec::new();
        let mut shown = parsed.clone();
        let mut masked = true;
        if let Some(password) = parsed.password().filter(|p| !p.is_empty()) {
            hidden.push(password);
            masked &= shown.set_password(Some(MASK)).is_ok();
        }
        if let Some(query) = parsed.query() {
            let (query, values) = mask_query(query);
            hidden.extend(values);
            shown.set_query(Some(&query));
        }
        if let Some(fragment) = parsed.fragment().filter(|f| !f.is_empty()) {
            hidden.push(fragment);
            shown.set_fragment(Some(MASK));
        }
        let written = Written::of(input);
        hidden.extend(written.password);
        hidden.extend(written.query.map(|q| mask_query(q).1).unwrap_or_default());
        hidden.extend(written.fragment);

        let shown = if masked {
            shown.to_string()
        } else {
            // Not seen with the url crate (a password implies a host), but never show a URL
            // whose password could not be replaced.
            format!("{}:{MASK}", parsed.scheme())
        };
        let mut secrets = Secrets::default();
        for url in [input, input.trim(), parsed.as_str()] {
            secrets.add(url, &shown);
        }
        for value in hidden {
            for form in forms(value) {
                secrets.add(&form, MASK);
            }
        }
        secrets.sort();
        Masked { shown, secrets }
    }
}

impl Masked {
    /// Masks what the tool may be given as one URL: a URL, a list of URLs separated by commas
    /// (RedLock's masters: `redis://…,redis://…`), or a URL with several hosts that the url
    /// crate cannot parse (a ZooKeeper connect string `zookeeper://h1:2181,h2:2181/chroot`).
    /// The shown URLs are joined by commas again; the secrets of all are kept.
    pub(crate) fn any(input: &str) -> Masked {
        let mut shown = Vec::new();
        let mut secrets = Secrets::default();
        for url in url_list(input) {
            let masked = match Url::parse(url) {
                Ok(parsed) => Masked::of(url, &parsed),
                Err(_) => Masked::of_text(url),
            };
            shown.push(masked.shown);
            secrets.extend(masked.secrets);
        }
        let shown = shown.join(",");
        secrets.add(input, &shown);
        secrets.sort();
        Masked { shown, secrets }
    }

    /// Masks a URL the url crate cannot parse, found as the URL standard splits one (see
    /// [`Written`]): the userinfo's password, every secret query value and the fragment.
    fn of_text(input: &str) -> Masked {
        let written = Written::of(input);
        let (rest, fragment) = split(input.trim(), '#');
        let (rest, query) = split(rest, '?');
        let mut shown = match (rest.split_once("://"), written.password) {
            (Some((scheme, after)), Some(password)) => {
                let (user, hosts) = after.split_once(':').unwrap_or((after, ""));
                let hosts = hosts.strip_prefix(password).unwrap_or(hosts);
                format!("{scheme}://{user}:{MASK}{hosts}")
            }
            _ => rest.to_owned(),
        };
        if let Some(query) = query {
            shown = format!("{shown}?{}", mask_query(query).0);
        }
        if fragment.is_some_and(|f| !f.is_empty()) {
            shown = format!("{shown}#{MASK}");
        }
        let mut secrets = Secrets::default();
        secrets.add(input, &shown);
        secrets.add(input.trim(), &shown);
        let hidden = written.password.into_iter().chain(written.fragment);
        let queried = written.query.map(|q| mask_query(q).1).unwrap_or_default();
        for value in hidden.chain(queried) {
            for form in forms(value) {
                secrets.add(&form, MASK);
            }
        }
        secrets.sort();
        Masked { shown, secrets }
    }
}

/// The URLs of a comma-separated list: split at each comma that a scheme and `://` follow
/// (a comma inside one URL, as in a password or between a ZooKeeper URL's hosts, stays).
pub(crate) fn url_list(input: &str) -> Vec<&str> {
    let mut urls = Vec::new();
    let mut start = 0;
    for (at, _) in input.match_indices(',') {
        let next = &input[at + 1..];
        let scheme_len = next
            .find("://")
            .filter(|&len| len > 0 && next[..len].chars().all(is_scheme_char));
        let starts_url =
            scheme_len.is_some() && next.starts_with(|c: char| c.is_ascii_alphabetic());
        if starts_url {
            urls.push(&input[start..at]);
            start = at + 1;
        }
    }
    urls.push(&input[start..]);
    urls
}

fn is_scheme_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')
}

/// The query with the value of every secret parameter replaced, every other pair kept as
/// written; and the replaced values.
fn mask_query(query: &str) -> (String, Vec<&str>) {
    let mut values = Vec::new();
    let pairs: Vec<Cow<'_, str>> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, value)) if !value.is_empty() && is_secret_parameter(&form_decode(name)) => {
                values.push(value);
                Cow::Owned(format!("{name}={MASK}"))
            }
            _ => Cow::Borrowed(pair),
        })
        .collect();
    (pairs.join("&"), values)
}

/// The secret-bearing parts of a URL as the user wrote them, found the way the URL standard
/// splits a URL: the fragment starts at the first `#`, the query at the first `?` before it,
/// the authority after `//` ends at the next `/`, its userinfo at its last `@`, and the
/// password follows the userinfo's first `:`.
struct Written<'a> {
    password: Option<&'a str>,
    query: Option<&'a str>,
    fragment: Option<&'a str>,
}

impl<'a> Written<'a> {
    fn of(input: &'a str) -> Self {
        let (rest, fragment) = split(input.trim(), '#');
        let (rest, query) = split(rest, '?');
        let password = rest.split_once("://").and_then(|(_, after)| {
            let authority = after.split('/').next().unwrap_or_default();
            let (userinfo, _) = authority.rsplit_once('@')?;
            userinfo.split_once(':').map(|(_, password)| password)
        });
        let non_empty = |part: Option<&'a str>| part.filter(|p| !p.is_empty());
        Written {
            password: non_empty(password),
            query: non_empty(query),
            fragment: non_empty(fragment),
        }
    }
}

fn split(text: &str, at: char) -> (&str, Option<&str>) {
    match text.split_once(at) {
        Some((before, after)) => (before, Some(after)),
        None => (text, None),
    }
}

/// `application/x-www-form-urlencoded` decoding, as query parameters are read: `+` is a space.
fn form_decode(text: &str) -> String {
    percent_decode_str(&text.replace('+', " "))
        .decode_utf8_lossy()
        .into_owned()
}

/// Every form in which a message could quote a secret written as `value` in a URL: as
/// written, percent-decoded (userinfo), form-decoded (query), and each decoded value
/// re-encoded as sqlx and the url crate encode a password and as a form encodes a value (both
/// hex cases), and as `{:?}` quotes it.
fn forms(value: &str) -> Vec<String> {
    let percent_decoded = percent_decode_str(value).decode_utf8_lossy().into_owned();
    let mut forms = vec![value.to_owned(), lower_hex(value)];
    for decoded in [percent_decoded, form_decode(value)] {
        let encoded = [
            utf8_percent_encode(&decoded, NON_ALPHANUMERIC).to_string(),
            url_userinfo_encode(&decoded),
            url::form_urlencoded::byte_serialize(decoded.as_bytes()).collect(),
        ];
        for form in encoded {
            forms.push(lower_hex(&form));
            forms.push(form);
        }
        forms.push(decoded.escape_debug().to_string());
        forms.push(decoded);
    }
    forms
}

/// `decoded` as the url crate writes it into a URL's password.
fn url_userinfo_encode(decoded: &str) -> String {
    let mut url = Url::parse("x://host").expect("a constant URL");
    match url.set_password(Some(decoded)) {
        Ok(()) => url.password().unwrap_or_default().to_owned(),
        Err(()) => decoded.to_owned(),
    }
}

/// `text` with the hex digits of every `%XX` escape in lower case.
fn lower_hex(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('%') {
        let (before, escape) = rest.split_at(at);
        out.push_str(before);
        let end = escape
            .char_indices()
            .nth(3)
            .map_or(escape.len(), |(end, _)| end);
        out.push_str(&escape[..end].to_ascii_lowercase());
        rest = &escape[end..];
    }
    out.push_str(rest);
    out
}

/// Texts to replace in anything printed: each URL as given (by what may be shown of it), and
/// each form of each secret (by [`MASK`]). Its `Debug` shows how many, never which.
#[derive(Clone, Default)]
pub(crate) struct Secrets {
    /// (text, replacement), longest text first, so no form leaves a piece of a longer one.
    replacements: Vec<(String, String)>,
}

impl Secrets {
    fn add(&mut self, text: &str, replacement: &str) {
        // An empty text matches everywhere; a replacement of itself changes nothing.
        if !text.is_empty() && text != replacement {
            self.replacements
                .push((text.to_owned(), replacement.to_owned()));
        }
    }

    fn sort(&mut self) {
        self.replacements
            .sort_by(|(a, _), (b, _)| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        self.replacements.dedup_by(|(a, _), (b, _)| a == b);
    }

    /// Adds the secrets of another URL.
    pub(crate) fn extend(&mut self, other: Secrets) {
        self.replacements.extend(other.replacements);
        self.sort();
    }

    /// `text` with every secret replaced.
    pub(crate) fn scrub<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let mut text = Cow::Borrowed(text);
        for (secret, replacement) in &self.replacements {
            if text.contains(secret.as_str()) {
                text = Cow::Owned(text.replace(secret.as_str(), replacement));
            }
        }
        text
    }
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secrets({} hidden)", self.replacements.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn masked(url: &str) -> Masked {
        Masked::of(url, &Url::parse(url).expect("a URL"))
    }

    /// Asserts that none of `forms` survives scrubbing a message quoting each of them and
    /// the URL, and that the shown URL holds none of them.
    fn assert_hidden(url: &str, forms: &[&str]) {
        let masked = masked(url);
        for form in forms {
            assert!(!masked.shown.contains(form), "{form} in {}", masked.shown);
            let message = format!("failed at {url} with {form}; {form:?}");
            let scrubbed = masked.secrets.scrub(&message);
            assert!(!scrubbed.contains(form), "{form} in {scrubbed}");
        }
    }

    #[test]
    fn a_userinfo_password_is_masked_in_every_form() {
        let url = "postgres://app:p%40ss%2Fw%23rd@db.example:5432/prod";
        assert_eq!(masked(url).shown, "postgres://app:***@db.example:5432/prod");
        assert_hidden(url, &["p%40ss%2Fw%23rd", "p@ss/w#rd", "p%40ss%2fw%23rd"]);
        // The url crate encodes what was written raw; both forms are secret.
        assert_hidden(
            "mysql://root:a b\"c@h/db",
            &["a b\"c", "a%20b%22c", "a b\\\"c"],
        );
    }

    #[test]
    fn a_query_password_is_masked_in_every_form() {
        let url =
            "postgres://app@db/prod?sslmode=require&password=p%40ss%2Bw+rd&application_name=x";
        assert_eq!(
            masked(url).shown,
            "postgres://app@db/prod?sslmode=require&password=***&application_name=x"
        );
        assert_hidden(
            url,
            &[
                "p%40ss%2Bw+rd",
                "p@ss+w rd",
                "p@ss+w+rd",
                "p%40ss%2Bw%20rd",
                "p%40ss%2Bw%2Brd",
            ],
        );
        let plus = "postgres://app@db/prod?password=hunter+2";
        assert_eq!(masked(plus).shown, "postgres://app@db/prod?password=***");
        assert_hidden(plus, &["hunter+2", "hunter 2", "hunter%202", "hunter%2B2"]);
    }

    #[test]
    fn every_secret_parameter_and_the_fragment_are_masked() {
        let url = "redis+unix:///run/redis.sock?db=1&pass=s3cr3t&SSL-Password=k3y&auth_token=t0k\
                   #tail";
        assert_eq!(
            masked(url).shown,
            "redis+unix:///run/redis.sock?db=1&pass=***&SSL-Password=***&auth_token=***#***"
        );
        assert_hidden(url, &["s3cr3t", "k3y", "t0k", "tail"]);
        for name in [
            "password",
            "sslpassword",
            "sslkey",
            "ssl-key",
            "api_key",
            "Token",
        ] {
            assert!(is_secret_parameter(name), "{name}");
        }
        for name in [
            "sslmode",
            "user",
            "dbname",
            "host",
            "application_name",
            "mode",
        ] {
            assert!(!is_secret_parameter(name), "{name}");
        }
    }

    #[test]
    fn a_url_quoted_whole_is_replaced_by_the_shown_one() {
        let url = "postgres://app:pw%2F1@db/prod?password=x%2By";
        let masked = masked(url);
        let message = format!("cannot connect to {url}: refused");
        assert_eq!(
            masked.secrets.scrub(&message),
            format!("cannot connect to {}: refused", masked.shown)
        );
        let debug = format!("{:?}", masked);
        assert!(!debug.contains("pw") && !debug.contains("x%2By"), "{debug}");
    }

    #[test]
    fn lists_and_urls_with_several_hosts_are_masked_too() {
        assert_eq!(
            url_list("redis://:a,b@h:1,rediss://h2:2,redis://h3:3"),
            ["redis://:a,b@h:1", "rediss://h2:2", "redis://h3:3"]
        );
        assert_eq!(
            url_list("zookeeper://h1:1,h2:2/x"),
            ["zookeeper://h1:1,h2:2/x"]
        );
        let list = Masked::any("redis://:p%40ss1@h:1,redis://u:pass2@h2:2/0");
        assert_eq!(list.shown, "redis://:***@h:1,redis://u:***@h2:2/0");
        let message = "auth failed for p@ss1 and pass2 at redis://:p%40ss1@h:1";
        let scrubbed = list.secrets.scrub(message);
        assert!(
            !scrubbed.contains("ss1") && !scrubbed.contains("pass2"),
            "{scrubbed}"
        );
        let zk = Masked::any("zookeeper://app:s%2Fcret@h1:2181,h2:2181/chroot");
        assert_eq!(zk.shown, "zookeeper://app:***@h1:2181,h2:2181/chroot");
        assert_eq!(zk.secrets.scrub("digest app:s/cret"), "digest app:***");
    }

    #[test]
    fn a_url_without_secrets_is_shown_as_written() {
        for url in [
            "sqlite:locks.db",
            "postgres://root@127.0.0.1:5432/test?sslmode=disable",
        ] {
            let masked = masked(url);
            assert_eq!(masked.shown, url);
            assert_eq!(
                masked.secrets.scrub(&format!("at {url}")),
                format!("at {url}")
            );
        }
    }
}
