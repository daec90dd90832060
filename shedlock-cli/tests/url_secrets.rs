//! Issue 29, item 6: no password of any URL form the tool takes is printed, whatever
//! characters it holds (`/`, `@`, `:`, `,`, `%`-escapes, `?`, `#`), by `doctor` or any other
//! command, in its output or its errors; and a short password is not scrubbed out of other
//! words. Runs against closed ports (nothing listens on port 1 or 2): no server needed.

mod common;

use common::{Run, shedlock_command};
use percent_encoding::percent_decode_str;

/// Every URL form the tool takes, with `{pw}` where the password goes (in a RedLock list, in
/// its second master), pointing at closed ports.
const STORE_FORMS: [&str; 10] = [
    "postgres://app:{pw}@127.0.0.1:1/prod",
    "mysql://root:{pw}@127.0.0.1:1/db",
    "mariadb://root:{pw}@127.0.0.1:1/db",
    "redis://:{pw}@127.0.0.1:1/2",
    "rediss://u:{pw}@127.0.0.1:1",
    "redis://127.0.0.1:1,redis://u:{pw}@127.0.0.1:2/0,redis://127.0.0.1:1",
    "zookeeper://app:{pw}@127.0.0.1:1,127.0.0.1:2/chroot",
    "zk://app:{pw}@127.0.0.1:1",
    "etcd://root:{pw}@127.0.0.1:1,127.0.0.1:2",
    "etcd://root:{pw}@127.0.0.1:1",
];

/// Runs `shedlock --url URL --connect-timeout 2s ARGS`.
fn shedlock(url: &str, args: &[&str]) -> Run {
    Run::of(
        shedlock_command()
            .args(["--url", url, "--connect-timeout", "2s"])
            .args(args),
    )
}

/// The password's forms a leak could take: as written, decoded, and each piece between the
/// characters that split a URL (a parser that cut it would print a piece).
fn forms(written: &str) -> Vec<String> {
    let decoded = percent_decode_str(written).decode_utf8_lossy().into_owned();
    let mut forms = vec![written.to_owned(), decoded.clone()];
    for piece in decoded.split(['/', '@', ':', ',', '?', '#', '%']) {
        if piece.len() >= 4 {
            forms.push(piece.to_owned());
        }
    }
    forms
}

fn assert_not_printed(run: &Run, written: &str, url: &str) {
    let printed = format!("{}{}", run.stdout(), run.stderr());
    for form in forms(written) {
        assert!(
            !printed.contains(&form),
            "`{form}` of {url} printed:\n{printed}"
        );
    }
}

/// Passwords written percent-encoded, or with `@`, `:` and `,` raw: the URL is used (the
/// server cannot be reached), shown with `***` for the password, never the password.
#[test]
fn a_password_with_any_character_is_never_printed_by_any_store_form() {
    let passwords = [
        "Wolf5s3cr%2Fet9",
        "Wolf6p@ss:w,rd",
        "Wolf7%40%3A%2C%25%2F%3F%23x",
    ];
    for template in STORE_FORMS {
        for password in passwords {
            let url = template.replace("{pw}", password);
            for args in [&["doctor"][..], &["locks", "list"], &["runs", "list"]] {
                let run = shedlock(&url, args);
                assert_not_printed(&run, password, &url);
                // Not vacuous: the URL was read and named, masked.
                let printed = format!("{}{}", run.stdout(), run.stderr());
                assert_ne!(run.code(), 0, "{url}: {printed}");
                assert!(printed.contains(":***@"), "{url}: {printed}");
            }
        }
    }
}

/// A raw `/`, `?` or `#` ends a URL's hosts early (`etcd://root:s3cr/et@h1:2379,h2:22379`):
/// the tool refuses the URL (exit 2) before connecting and prints no piece of the password.
#[test]
fn a_url_split_by_a_raw_slash_in_its_password_is_refused_unprinted() {
    for template in STORE_FORMS {
        for password in [
            "Wolf1s3cr/et9",
            "Wolf2ab?cd9",
            "Wolf3pq#rs9",
            "Wolf4a/b@c:d,e",
        ] {
            let url = template.replace("{pw}", password);
            for args in [&["doctor"][..], &["locks", "show", "x"]] {
                let run = shedlock(&url, args).expect(2);
                assert_not_printed(&run, password, &url);
                assert!(
                    run.stderr()
                        .contains("percent-encoded (%2F, %3F, %23, %40)"),
                    "{url}: {}",
                    run.stderr()
                );
            }
            // Given without --url, clap quotes it back: scrubbed too.
            let misplaced = Run::of(shedlock_command().args([url.as_str(), "doctor"])).expect(2);
            assert_not_printed(&misplaced, password, &url);
        }
    }
    let reported = "etcd://root:s3cr/et@h1:2379,h2:22379";
    let run = shedlock(reported, &["doctor"]).expect(2);
    let printed = format!("{}{}", run.stdout(), run.stderr());
    assert!(
        !printed.contains("s3cr") && !printed.contains("/et"),
        "{printed}"
    );
}

/// A one-letter password is hidden in the URL, not out of every word holding its letter.
#[test]
fn a_short_password_is_not_scrubbed_out_of_words() {
    let run = shedlock("oracle://u:e@h/db", &["doctor"]).expect(2);
    assert!(
        run.stderr().contains("; expected postgres://"),
        "{}",
        run.stderr()
    );
    let run = shedlock("postgres://app:e@127.0.0.1:1/db", &["doctor"]).expect(1);
    assert!(
        run.stderr()
            .contains("cannot reach the database at postgres://app:***@127.0.0.1:1/db"),
        "{}",
        run.stderr()
    );
}
