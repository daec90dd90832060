//! What of a URL may be shown, and what must never be printed, for any scheme the tool takes:
//! the userinfo password, the value of every query parameter that may carry a secret, and the
//! fragment (where the tail of a password with an unencoded `#` lands).
//!
//! # How a URL is split (the parser and the masking read it alike)
//!
//! A comma-separated list (RedLock's masters) is first cut into its URLs, at each comma that a
//! scheme and `://` follow ([`url_list`]); each URL is then split on its own, as the URL
//! standard splits one (and as the url crate, sqlx and redis-rs read `postgres://`, `mysql://`
//! and `redis://`): after `scheme://`, the authority ends at the first `/`, `?` or `#`; its
//! userinfo ends at the authority's *last* `@`; the password follows the userinfo's first
//! `:`. So a password may hold `@`, `:` and `,` as written, and any character percent-encoded
//! (`%2F` for `/`, `%3F` for `?`, `%23` for `#`, `%25` for `%`).
//!
//! A URL with an `@` after its authority (in its path, query or fragment) is ambiguous: it is
//! what a password with a raw `/`, `?` or `#` gives (`etcd://root:s3cr/et@h1:2379`), and
//! reading its authority by the rule above would take part of the password for a host. The
//! tool refuses it ([`UrlParts::ambiguous`]), without quoting it, before connecting; and what
//! it shows of it hides everything between `://` and the URL's last `@`.
//!
//! # Where the secrets are hidden
//!
//! The shown URL is the URL as written with each secret replaced by [`MASK`] where it stands.
//! In any other text ([`Secrets::scrub`]) each URL as given (and as the url crate writes it)
//! is replaced by its shown form; a secret (in every encoding a message could quote it) is
//! replaced wherever it appears only when it is at least [`UNAMBIGUOUS`] characters long; a
//! shorter one could be a piece of any word ("x" in "expected"), so it is hidden only where it
//! stands as a secret: between `:` and `@` (a URL's userinfo), after its user name and `:` (as
//! a digest quotes credentials), after a secret parameter's `name=`, after `#`, or quoted.

use std::borrow::Cow;
use std::fmt;

use percent_encoding::{NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use url::Url;

/// What a hidden part is replaced with.
pub(crate) const MASK: &str = "***";

/// A secret (in one of its forms) this long or longer is hidden wherever it appears in a
/// text; a shorter one only where it stands as a secret (see the module's documentation).
pub(crate) const UNAMBIGUOUS: usize = 8;

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

/// One URL split as the module's documentation says, every part as written (not decoded).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct UrlParts<'a> {
    /// Before `://`; `None` for a URL without an authority (`sqlite:FILE`).
    pub(crate) scheme: Option<&'a str>,
    /// The userinfo's user (before its first `:`), when there is userinfo.
    pub(crate) user: Option<&'a str>,
    /// The userinfo's password (after its first `:`), when it has one.
    pub(crate) password: Option<&'a str>,
    /// The hosts: from the userinfo's `@` (or `://`) to the authority's end.
    pub(crate) hosts: &'a str,
    /// From the authority's end to the query: `/db`, `/chroot`, or empty.
    pub(crate) path: &'a str,
    /// After the first `?` (before the fragment).
    pub(crate) query: Option<&'a str>,
    /// After the first `#`.
    pub(crate) fragment: Option<&'a str>,
    /// An `@` after the authority: refused, see the module's documentation.
    pub(crate) ambiguous: bool,
}

impl<'a> UrlParts<'a> {
    /// Splits one URL (not a list), trimmed.
    pub(crate) fn of(url: &'a str) -> Self {
        let url = url.trim();
        let Some((scheme, after)) = url.split_once("://") else {
            let (rest, fragment) = split(url, '#');
            let (path, query) = split(rest, '?');
            return UrlParts {
                path,
                query,
                fragment,
                // `postgres:user:password@host`: credentials without `//` in front.
                ambiguous: url.contains('@') && !url.starts_with("sqlite:"),
                ..UrlParts::default()
            };
        };
        let end = after.find(['/', '?', '#']).unwrap_or(after.len());
        let (authority, tail) = after.split_at(end);
        let (rest, fragment) = split(tail, '#');
        let (path, query) = split(rest, '?');
        let (user, password, hosts) = match authority.rsplit_once('@') {
            Some((userinfo, hosts)) => match userinfo.split_once(':') {
                Some((user, password)) => (Some(user), Some(password), hosts),
                None => (Some(userinfo), None, hosts),
            },
            None => (None, None, authority),
        };
        UrlParts {
            scheme: Some(scheme),
            user,
            password,
            hosts,
            path,
            query,
            fragment,
            // SQLite's URL names a file: no userinfo to mistake.
            ambiguous: tail.contains('@') && scheme != "sqlite",
        }
    }
}

/// The userinfo of an ambiguous URL as the most generous reading takes it: everything between
/// `://` and the URL's last `@`; what it shows hides all of it.
fn generous_userinfo(url: &str) -> Option<(&str, &str)> {
    let (_, after) = url.trim().split_once("://")?;
    after.rsplit_once('@')
}

/// A URL as it may be shown, and what must be scrubbed from any text.
#[derive(Debug)]
pub(crate) struct Masked {
    /// The URL with every secret part replaced by [`MASK`].
    pub(crate) shown: String,
    pub(crate) secrets: Secrets,
}

impl Masked {
    /// Masks what the tool may be given as one URL: a URL, or a list of URLs separated by
    /// commas (RedLock's masters: `redis://…,redis://…`); a ZooKeeper or etcd URL with several
    /// hosts (`zookeeper://h1:2181,h2:2181/chroot`) is one URL. The shown URLs are joined by
    /// commas again; the secrets of all are kept.
    pub(crate) fn any(input: &str) -> Masked {
        let mut shown = Vec::new();
        let mut secrets = Secrets::default();
        for url in url_list(input) {
            let masked = Masked::one(url);
            shown.push(masked.shown);
            secrets.extend(masked.secrets);
        }
        let shown = shown.join(",");
        secrets.add_whole(input, &shown);
        secrets.add_whole(input.trim(), &shown);
        secrets.sort();
        Masked { shown, secrets }
    }

    /// Masks one URL where its secrets stand.
    fn one(input: &str) -> Masked {
        let url = input.trim();
        let parts = UrlParts::of(url);
        let mut secrets = Secrets::default();
        let user = parts.user.filter(|user| !user.is_empty());
        let shown = match parts.scheme {
            Some(scheme) if parts.ambiguous => {
                // Every reading's secrets: the standard one's and the generous one's.
                let (userinfo, rest) = generous_userinfo(url).unwrap_or_default();
                if let Some((user, password)) = userinfo.split_once(':') {
                    secrets.add_value(password, Some(user).filter(|u| !u.is_empty()));
                }
                secrets.add_value(userinfo, None);
                // What follows the last `@`: hosts, path, query, fragment.
                let rest = UrlParts::of(rest);
                format!("{scheme}://{MASK}@{}", shown_tail(&rest, &mut secrets))
            }
            Some(scheme) => {
                let userinfo = match (parts.user, parts.password) {
                    (Some(user), Some(password)) if !password.is_empty() => {
                        format!("{user}:{MASK}@")
                    }
                    (Some(user), Some(_)) => format!("{user}:@"),
                    (Some(user), None) => format!("{user}@"),
                    (None, _) => String::new(),
                };
                format!(
                    "{scheme}://{userinfo}{}{}",
                    parts.hosts,
                    shown_tail(&parts, &mut secrets)
                )
            }
            None if parts.ambiguous => {
                // Everything between the scheme's `:` and the last `@` may be credentials.
                let (head, rest) = url.rsplit_once('@').unwrap_or_default();
                let (scheme, userinfo) = head.split_once(':').unwrap_or((head, ""));
                if let Some((user, password)) = userinfo.split_once(':') {
                    secrets.add_value(password, Some(user).filter(|u| !u.is_empty()));
                }
                secrets.add_value(userinfo, None);
                format!(
                    "{scheme}:{MASK}@{}",
                    shown_tail(&UrlParts::of(rest), &mut secrets)
                )
            }
            None => shown_tail(&parts, &mut secrets),
        };
        if let Some(password) = parts.password {
            secrets.add_value(password, user);
        }
        if let Some(query) = parts.query {
            for value in mask_query(query).1 {
                secrets.add_value(value, None);
            }
        }
        if let Some(fragment) = parts.fragment {
            secrets.add_value(fragment, None);
        }
        secrets.add_whole(input, &shown);
        secrets.add_whole(url, &shown);
        // The url crate re-encodes some characters (a space, quotes, non-ASCII) and drops tabs
        // and line breaks: a message quoting the URL it parsed quotes that form.
        if let Ok(parsed) = Url::parse(url) {
            secrets.add_whole(parsed.as_str(), &shown);
        }
        secrets.sort();
        Masked { shown, secrets }
    }
}

/// What may be shown of a URL's path, query and fragment (for a URL without an authority, the
/// whole URL); the secret values of its query and its fragment go to `secrets`.
fn shown_tail(parts: &UrlParts<'_>, secrets: &mut Secrets) -> String {
    let mut shown = parts.path.to_owned();
    if let Some(query) = parts.query {
        let (query, values) = mask_query(query);
        for value in values {
            secrets.add_value(value, None);
        }
        shown = format!("{shown}?{query}");
    }
    if let Some(fragment) = parts.fragment {
        if fragment.is_empty() {
            shown.push('#');
        } else {
            secrets.add_value(fragment, None);
            shown = format!("{shown}#{MASK}");
        }
    }
    shown
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

/// One form of one secret, and the forms of the user name it belongs to (for the
/// `user:secret` position).
#[derive(Clone, PartialEq, Eq)]
struct Secret {
    form: String,
    users: Vec<String>,
}

/// Texts to replace in anything printed: each URL as given (by what may be shown of it), and
/// each form of each secret (by [`MASK`]). Its `Debug` shows how many, never which.
#[derive(Clone, Default)]
pub(crate) struct Secrets {
    /// (URL, shown URL), longest first, so no URL leaves a piece of a longer one.
    whole: Vec<(String, String)>,
    /// Each form of each secret, longest first.
    values: Vec<Secret>,
}

impl Secrets {
    /// A URL as given, replaced by `shown` wherever it appears.
    fn add_whole(&mut self, text: &str, shown: &str) {
        // An empty text matches everywhere; a replacement of itself changes nothing.
        if !text.is_empty() && text != shown {
            self.whole.push((text.to_owned(), shown.to_owned()));
        }
    }

    /// A secret written as `value` in a URL, of `user` if it is a password.
    fn add_value(&mut self, value: &str, user: Option<&str>) {
        if value.is_empty() {
            return;
        }
        let users: Vec<String> = user.map(forms).unwrap_or_default();
        for form in forms(value) {
            if !form.is_empty() {
                self.values.push(Secret {
                    form,
                    users: users.clone(),
                });
            }
        }
    }

    fn sort(&mut self) {
        self.whole
            .sort_by(|(a, _), (b, _)| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        self.whole.dedup_by(|(a, _), (b, _)| a == b);
        for secret in &mut self.values {
            secret.users.sort();
            secret.users.dedup();
        }
        self.values.sort_by(|a, b| {
            (b.form.len().cmp(&a.form.len()))
                .then_with(|| a.form.cmp(&b.form))
                .then_with(|| a.users.cmp(&b.users))
        });
        self.values.dedup();
    }

    /// Adds the secrets of another URL.
    pub(crate) fn extend(&mut self, other: Secrets) {
        self.whole.extend(other.whole);
        self.values.extend(other.values);
        self.sort();
    }

    /// `text` with every URL given replaced by its shown form and every secret hidden: a long
    /// one wherever it appears, a short one where it stands as a secret.
    pub(crate) fn scrub<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let mut text = Cow::Borrowed(text);
        for (url, shown) in &self.whole {
            if text.contains(url.as_str()) {
                text = Cow::Owned(text.replace(url.as_str(), shown));
            }
        }
        for secret in &self.values {
            if !text.contains(secret.form.as_str()) {
                continue;
            }
            text = Cow::Owned(if secret.form.chars().count() >= UNAMBIGUOUS {
                text.replace(secret.form.as_str(), MASK)
            } else {
                secret.replace_where_it_stands(&text)
            });
        }
        text
    }
}

impl Secret {
    /// `text` with each occurrence of this short form replaced where it stands as a secret.
    fn replace_where_it_stands(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut copied = 0;
        for (at, _) in text.match_indices(self.form.as_str()) {
            if at < copied {
                continue; // overlaps a replaced occurrence
            }
            let end = at + self.form.len();
            if self.stands_as_secret(&text[..at], &text[end..]) {
                out.push_str(&text[copied..at]);
                out.push_str(MASK);
                copied = end;
            }
        }
        out.push_str(&text[copied..]);
        out
    }

    /// Whether an occurrence between `before` and `after` is this secret where it stands: in
    /// a URL's userinfo (`:…@`), after its user (`user:…`), as a secret parameter's value
    /// (`password=…`), as a fragment (`#…`), or quoted (`'…'`, `"…"`, `` `…` ``).
    fn stands_as_secret(&self, before: &str, after: &str) -> bool {
        let previous = before.chars().next_back();
        let next = after.chars().next();
        let ends_word = next.is_none_or(|c| !c.is_alphanumeric());
        if previous == Some(':') && next == Some('@') {
            return true;
        }
        if let (Some(quote @ ('\'' | '"' | '`')), Some(closing)) = (previous, next) {
            return quote == closing;
        }
        if !ends_word {
            return false;
        }
        match previous {
            Some('#') => true,
            Some('=') => {
                let name = before[..before.len() - 1]
                    .rsplit(|c: char| !(c.is_alphanumeric() || matches!(c, '-' | '_' | '.')))
                    .next()
                    .unwrap_or_default();
                is_secret_parameter(&form_decode(name))
            }
            Some(':') => {
                let head = &before[..before.len() - 1];
                self.users.iter().any(|user| {
                    head.strip_suffix(user.as_str()).is_some_and(|start| {
                        start
                            .chars()
                            .next_back()
                            .is_none_or(|c| !c.is_alphanumeric())
                    })
                })
            }
            _ => false,
        }
    }
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Secrets({} URLs, {} forms hidden)",
            self.whole.len(),
            self.values.len()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every form of the URLs the tool takes, with `{pw}` where the password goes (for a
    /// RedLock list, in its second master), and the URL as it is shown.
    const STORE_FORMS: [(&str, &str); 10] = [
        (
            "postgres://app:{pw}@db.example:5432/prod?sslmode=require",
            "postgres://app:***@db.example:5432/prod?sslmode=require",
        ),
        ("mysql://root:{pw}@h/db", "mysql://root:***@h/db"),
        (
            "mariadb://root:{pw}@h:3306/db",
            "mariadb://root:***@h:3306/db",
        ),
        ("redis://:{pw}@h:6379/2", "redis://:***@h:6379/2"),
        ("rediss://u:{pw}@h:6380", "rediss://u:***@h:6380"),
        (
            "redis://h1:1,redis://u:{pw}@h2:2/0,rediss://h3:3",
            "redis://h1:1,redis://u:***@h2:2/0,rediss://h3:3",
        ),
        (
            "zookeeper://app:{pw}@h1:2181,h2:2181/chroot",
            "zookeeper://app:***@h1:2181,h2:2181/chroot",
        ),
        ("zk://app:{pw}@h1:2181", "zk://app:***@h1:2181"),
        (
            "etcd://root:{pw}@h1:2379,h2:22379",
            "etcd://root:***@h1:2379,h2:22379",
        ),
        (
            "sqlite:locks.db?password={pw}",
            "sqlite:locks.db?password=***",
        ),
    ];

    /// Passwords as written in a URL, with their decoded value: `@`, `:` and `,` may be
    /// written raw, anything percent-encoded.
    const PASSWORDS: [(&str, &str); 5] = [
        ("s3cr%2Fet", "s3cr/et"),
        ("p@ss:w,rd", "p@ss:w,rd"),
        ("Zq%40%3A%2C%25%2F%3F%23x", "Zq@:,%/?#x"),
        ("x", "x"),
        ("e", "e"),
    ];

    /// The user whose password `template` holds at `{pw}` ("" for none).
    fn user_of(template: &str) -> &str {
        let before = template.split("{pw}").next().unwrap_or_default();
        match before.rsplit_once("://") {
            Some((_, user)) => user.trim_end_matches(':'),
            None => "",
        }
    }

    /// Asserts that no form of `password` survives scrubbing a message that quotes the URL
    /// and the password where a driver would quote it: in another URL's userinfo, after its
    /// user, as `password=`, quoted.
    fn assert_scrubbed(masked: &Masked, url: &str, user: &str, password: &str) {
        let decoded = percent_decode_str(password)
            .decode_utf8_lossy()
            .into_owned();
        for form in [password, decoded.as_str()] {
            let mut quotes = vec![
                format!("redis://:{form}@h:1"),
                format!("x://{user}:{form}@h"),
                format!("`{form}`"),
                format!("'{form}'"),
                format!("\"{form}\""),
                format!("password={form}"),
            ];
            if !user.is_empty() {
                quotes.push(format!("digest {user}:{form}"));
            }
            for quote in quotes {
                let message = format!("failed ({quote}) at {url}");
                let scrubbed = masked.secrets.scrub(&message);
                assert!(!scrubbed.contains(&quote), "{form} of {url} in {scrubbed}");
                assert!(!scrubbed.contains(url), "{url} in {scrubbed}");
                if form.chars().count() >= UNAMBIGUOUS {
                    assert!(!scrubbed.contains(form), "{form} of {url} in {scrubbed}");
                }
            }
        }
    }

    #[test]
    fn every_store_form_shows_the_url_with_the_password_masked_where_it_stands() {
        for (template, shown) in STORE_FORMS {
            for (password, _) in PASSWORDS {
                let url = template.replace("{pw}", password);
                let masked = Masked::any(&url);
                assert_eq!(masked.shown, shown, "{url}");
                assert_scrubbed(&masked, &url, user_of(template), password);
            }
        }
    }

    #[test]
    fn the_parser_reads_the_password_the_masking_hides() {
        for (template, _) in STORE_FORMS {
            for (password, decoded) in PASSWORDS {
                let url = template.replace("{pw}", password);
                let parts = url_list(&url).into_iter().map(UrlParts::of);
                let passwords: Vec<&str> = parts.filter_map(|p| p.password.or(p.query)).collect();
                let written = passwords.iter().find(|p| p.ends_with(password));
                assert!(written.is_some(), "{url}: {passwords:?}");
                if template.starts_with("postgres") || template.starts_with("redis://:") {
                    // As the url crate (sqlx, redis-rs) reads it.
                    let parsed = Url::parse(&url).unwrap();
                    let by_url = percent_decode_str(parsed.password().unwrap());
                    assert_eq!(by_url.decode_utf8_lossy(), decoded, "{url}");
                }
            }
        }
    }

    /// A raw `/`, `?` or `#` in a password ends the authority early: the URL is ambiguous, and
    /// what is shown of it hides everything up to its last `@`.
    #[test]
    fn an_ambiguous_url_hides_everything_up_to_its_last_at() {
        for raw in ["s3cr/et", "a?b", "p#w", "ab/c@d?e#f"] {
            for (template, _) in STORE_FORMS {
                if template.starts_with("sqlite") {
                    continue;
                }
                let url = template.replace("{pw}", raw);
                let parts: Vec<UrlParts<'_>> =
                    url_list(&url).into_iter().map(UrlParts::of).collect();
                assert!(parts.iter().any(|p| p.ambiguous), "{url}");
                let masked = Masked::any(&url);
                let user_end = masked.shown.find("***@").expect("masked");
                assert!(!masked.shown[user_end..].contains(raw), "{}", masked.shown);
                for piece in raw.split(['/', '?', '#', '@']) {
                    let shown = masked.shown.replace(MASK, " ");
                    assert!(
                        !shown.contains(&format!(":{piece}")),
                        "{piece} in {}",
                        masked.shown
                    );
                }
                assert_scrubbed(&masked, &url, user_of(template), raw);
            }
        }
        let etcd = Masked::any("etcd://root:s3cr/et@h1:2379,h2:22379");
        assert_eq!(etcd.shown, "etcd://***@h1:2379,h2:22379");
        // Credentials without `//` in front are hidden too.
        let bare = Masked::any("postgres:app:s3cr/et@h/db");
        assert!(UrlParts::of("postgres:app:s3cr/et@h/db").ambiguous);
        assert_eq!(bare.shown, "postgres:***@h/db");
        assert_scrubbed(&bare, "postgres:app:s3cr/et@h/db", "app", "s3cr/et");
    }

    /// A password too short to be told from a piece of a word is hidden where it stands, never
    /// out of other words ("e***pected").
    #[test]
    fn a_short_password_is_not_scrubbed_out_of_words() {
        let masked = Masked::any("oracle://u:e@h/db");
        let message = "the URL has the scheme `oracle:`; expected postgres://…";
        assert_eq!(masked.secrets.scrub(message), message);
        let masked = Masked::any("postgres://app:x@h/db?password=y");
        assert_eq!(
            masked
                .secrets
                .scrub("expected x, yes: app:x, postgres://app:x@h/db, password=y"),
            "expected x, yes: app:***, postgres://app:***@h/db, password=***"
        );
        // A long one is hidden wherever it appears.
        let masked = Masked::any("postgres://app:Secret-Long-1@h/db");
        assert_eq!(
            masked
                .secrets
                .scrub("rejected Secret-Long-1 (Secret-Long-1x)"),
            "rejected *** (***x)"
        );
    }

    #[test]
    fn a_userinfo_password_is_masked_in_every_form() {
        let url = "postgres://app:p%40ss%2Fw%23rd@db.example:5432/prod";
        let masked = Masked::any(url);
        assert_eq!(masked.shown, "postgres://app:***@db.example:5432/prod");
        for form in ["p%40ss%2Fw%23rd", "p@ss/w#rd", "p%40ss%2fw%23rd"] {
            let message = format!("failed at {url} with {form}");
            let scrubbed = masked.secrets.scrub(&message);
            assert!(!scrubbed.contains(form), "{scrubbed}");
        }
        // The url crate encodes what was written raw; both forms are secret.
        let raw = Masked::any("mysql://root:a b\"cdefgh@h/db");
        assert_eq!(raw.shown, "mysql://root:***@h/db");
        for form in ["a b\"cdefgh", "a%20b%22cdefgh", "a b\\\"cdefgh"] {
            let message = format!("failed with {form}");
            let scrubbed = raw.secrets.scrub(&message);
            assert!(!scrubbed.contains(form), "{scrubbed}");
        }
    }

    #[test]
    fn every_secret_parameter_and_the_fragment_are_masked() {
        let url = "postgres://app@db/prod?sslmode=require&password=p%40ss%2Bw+rd&\
                   application_name=x";
        let masked = Masked::any(url);
        assert_eq!(
            masked.shown,
            "postgres://app@db/prod?sslmode=require&password=***&application_name=x"
        );
        for form in [
            "p%40ss%2Bw+rd",
            "p@ss+w rd",
            "p%40ss%2Bw%20rd",
            "p%40ss%2Bw%2Brd",
        ] {
            let message = format!("failed with {form}");
            let scrubbed = masked.secrets.scrub(&message);
            assert!(!scrubbed.contains(form), "{scrubbed}");
        }
        let url = "redis+unix:///run/redis.sock?db=1&pass=s3cr3t&SSL-Password=k3y&auth_token=t0k\
                   #tail";
        assert_eq!(
            Masked::any(url).shown,
            "redis+unix:///run/redis.sock?db=1&pass=***&SSL-Password=***&auth_token=***#***"
        );
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
        let masked = Masked::any(url);
        let message = format!("cannot connect to {url}: refused");
        assert_eq!(
            masked.secrets.scrub(&message),
            format!("cannot connect to {}: refused", masked.shown)
        );
        let debug = format!("{:?}", masked);
        assert!(!debug.contains("pw") && !debug.contains("x%2By"), "{debug}");
    }

    #[test]
    fn lists_are_cut_at_a_comma_before_a_scheme_only() {
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
        let message = "auth failed for 'p@ss1' and u:pass2 at redis://:p%40ss1@h:1";
        let scrubbed = list.secrets.scrub(message);
        assert!(
            !scrubbed.contains("ss1") && !scrubbed.contains("pass2"),
            "{scrubbed}"
        );
    }

    #[test]
    fn a_url_without_secrets_is_shown_as_written() {
        for url in [
            "sqlite:locks.db",
            "sqlite:///tmp/a@b.db",
            "postgres://root@127.0.0.1:5432/test?sslmode=disable",
            "zookeeper://h1:2181,h2:2181/chroot",
        ] {
            let masked = Masked::any(url);
            assert_eq!(masked.shown, url);
            assert_eq!(
                masked.secrets.scrub(&format!("at {url}")),
                format!("at {url}")
            );
        }
    }
}
