//! The stores the tool speaks, and the one way from a URL to a store: [`read`] finds the kind
//! of store the URL names among [`KINDS`], whose [`Store`] opens it ([`OpenStore`]), checks it
//! (`doctor`) and prints or applies its schema. Each kind is one module here, holding all that
//! is its own: its URL, its options, how it opens, where it keeps locks, its doctor and schema.
//! A new store is its module and one line in [`KINDS`].

mod etcd;
mod kind;
mod redis;
mod redlock;
pub(crate) mod sql;
mod target;
#[cfg(test)]
mod tests;
mod zookeeper;

use url::Url;

use crate::failure::{Exit, Failure};
use crate::secrets::{UrlParts, url_list};
use kind::Kind;
pub(crate) use kind::{OpenStore, Place, Store};
pub(crate) use target::Target;

/// Every store the tool speaks; a URL goes to the first that reads it.
const KINDS: [Kind; 5] = [
    sql::KIND,
    redis::KIND,
    redlock::KIND,
    zookeeper::KIND,
    etcd::KIND,
];

/// The store `url` names, not yet opened. Messages never quote the URL: the url crate's errors
/// do not, and the scheme is all that is named of it.
pub(crate) fn read(url: &str) -> Result<Box<dyn Store>, Failure> {
    let ambiguous = url_list(url)
        .into_iter()
        .any(|url| UrlParts::of(url).ambiguous);
    if ambiguous {
        return Err(Failure::new(
            Exit::Usage,
            "the URL has an `@` after its hosts (in its path, query or fragment), so where \
             its user and password end is unclear: write a `/`, `?`, `#` or `@` in the user \
             or password percent-encoded (%2F, %3F, %23, %40)",
        ));
    }
    let target = Target::new(url);
    let expected = expected();
    if let Some(store) = KINDS
        .iter()
        .find_map(|kind| (kind.read)(&target, &expected))
    {
        return store;
    }
    let scheme = match Url::parse(url) {
        Ok(parsed) => format!("has the scheme `{}:`", parsed.scheme()),
        Err(e) => format!("is not a valid URL ({e})"),
    };
    Err(Failure::new(
        Exit::Usage,
        format!("the URL {scheme}; {expected}"),
    ))
}

/// What the URLs may look like, for messages: `expected postgres://…, mysql://…, … or etcd://…`.
fn expected() -> String {
    let mut forms: Vec<&str> = KINDS.iter().map(|kind| kind.form).collect();
    let last = forms.pop().unwrap_or_default();
    format!("expected {} or {last}", forms.join(", "))
}
