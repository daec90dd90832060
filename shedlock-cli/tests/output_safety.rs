//! What the `shedlock` binary prints is safe to print: no form of a password of its URL, in
//! stdout or stderr, whether the command succeeds or fails (server unreachable, no such
//! database, authentication refused, arguments clap rejects); and no terminal control from
//! the lock table in text output, while `--json` keeps the exact values.
//!
//! PostgreSQL (`SHEDLOCK_TEST_PG_URL`; the test server trusts any password, so a URL with one
//! still connects), MySQL/MariaDB (`SHEDLOCK_TEST_MYSQL_URL`; its root has no password, so
//! one in the URL is refused), Redis and RedLock (`SHEDLOCK_TEST_REDIS_URL`,
//! `SHEDLOCK_TEST_REDLOCK_URLS`: no password, so one is refused) and ZooKeeper
//! (`SHEDLOCK_TEST_ZK_URL`: digest credentials) are skipped without their URL, and fail
//! without it when `CI=true`. The other cases need no server.

mod common;

use std::ffi::OsStr;
use std::process::Output;

use percent_encoding::{NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use serde_json::Value;
use shedlock_conformance::unique_table;
use shedlock_test_support::{
    etcd_url, mysql_url, pg_url, redis_url, redlock_urls, unique_zk_root, zk_url,
};
use url::Url;

/// Runs the binary with `args` and only the given URL variables set.
fn shedlock<A: AsRef<OsStr>>(args: &[A], variables: &[(&str, &str)]) -> Output {
    let mut command = common::shedlock_command();
    command.args(args);
    for (name, value) in variables {
        command.env(name, value);
    }
    command.output().expect("run the shedlock binary")
}

fn printed(output: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// A password as written into a URL: an alphanumeric core that no encoding changes (so any
/// copy of it, whatever the encoding, is found) and characters that must be encoded.
struct Password {
    written: String,
}

impl Password {
    fn new(core: &str, tail: &str) -> Self {
        Password {
            written: format!("{core}{tail}"),
        }
    }

    /// Every form a leak could take: the core, as written, percent-decoded (userinfo),
    /// form-decoded (query: `+` is a space) and re-encoded.
    fn forms(&self) -> Vec<String> {
        let core: String = self
            .written
            .chars()
            .take_while(char::is_ascii_alphanumeric)
            .collect();
        let decoded = percent_decode_str(&self.written)
            .decode_utf8_lossy()
            .into_owned();
        let form_decoded = percent_decode_str(&self.written.replace('+', " "))
            .decode_utf8_lossy()
            .into_owned();
        let encoded = utf8_percent_encode(&decoded, NON_ALPHANUMERIC).to_string();
        vec![core, self.written.clone(), decoded, form_decoded, encoded]
    }

    fn assert_never_printed(&self, output: &Output, what: &str) {
        let printed = printed(output);
        for form in self.forms() {
            assert!(
                !printed.contains(&form),
                "{what}: `{form}` printed:\n{printed}"
            );
        }
    }
}

/// `base` with a password in each place and encoding a URL can hold one, and the password.
fn urls_with_passwords(base: &str, core: &str) -> Vec<(String, Password)> {
    let with_query = |parameter: &str, password: &Password| {
        let mut url = Url::parse(base).expect("a server URL");
        let query = match url.query() {
            Some(query) => format!("{query}&{parameter}={}", password.written),
            None => format!("{parameter}={}", password.written),
        };
        url.set_query(Some(&query));
        url.to_string()
    };
    let userinfo = Password::new(&format!("{core}1"), "%40p%2Fs%23w%26r%3Dd%2B");
    let mut in_userinfo = Url::parse(base).expect("a server URL");
    in_userinfo
        .set_password(Some(&userinfo.written))
        .expect("a URL with a host");
    let encoded = Password::new(&format!("{core}2"), "%40p%2Fs%23w%26r%3Dd");
    let plus = Password::new(&format!("{core}3"), "+p+s%2Bw");
    let ssl = Password::new(&format!("{core}4"), "%2Bk+y");
    vec![
        (in_userinfo.to_string(), userinfo),
        (with_query("password", &encoded), encoded),
        (with_query("password", &plus), plus),
        (with_query("sslpassword", &ssl), ssl),
    ]
}

/// `url` on another port (nothing listens on 1) or database.
fn elsewhere(url: &str, port: Option<u16>, database: Option<&str>) -> String {
    let mut url = Url::parse(url).expect("a server URL");
    if let Some(port) = port {
        url.set_port(Some(port)).expect("a URL with a host");
    }
    if let Some(database) = database {
        url.set_path(&format!("/{database}"));
    }
    url.to_string()
}

/// `doctor`, `locks list` and `locks show` on `url` (with the `options` of its store) print no
/// form of `password`, and `doctor` shows the URL with `masked` in its place.
fn assert_commands_mask(password: &Password, url: &str, options: &[&str], masked: &str) {
    for command in [&["doctor"][..], &["locks", "list"], &["locks", "show", "x"]] {
        let mut args = vec!["--url", url];
        args.extend(options);
        args.extend(command);
        let output = shedlock(&args, &[]);
        password.assert_never_printed(&output, &format!("{command:?} on {url}"));
        if command == ["doctor"] {
            assert!(printed(&output).contains(masked), "{}", printed(&output));
        }
    }
}

/// Runs commands that print the URL (doctor reaches the database and names it; the others
/// fail and name it) on the database, on a closed port and on a database that does not
/// exist, with the password in each form and place: none of it is ever printed.
fn assert_no_password_printed(base: &str, core: &str) {
    for (url, password) in urls_with_passwords(base, core) {
        let targets = [
            url.clone(),
            elsewhere(&url, Some(1), None),
            elsewhere(&url, None, Some("shedlock_no_such_database")),
        ];
        for target in &targets {
            // Not vacuous: doctor names the URL, reached or not, masked.
            assert_commands_mask(&password, target, &["--connect-timeout", "20s"], "***");
        }
        // From the environment, through either variable.
        for variable in ["SHEDLOCK_URL", "DATABASE_URL"] {
            let output = shedlock(&["doctor"], &[(variable, &targets[1])]);
            password.assert_never_printed(&output, variable);
        }
    }
}

#[test]
fn no_form_of_a_password_is_printed_by_postgres_commands() {
    let Some(base) = pg_url() else {
        return;
    };
    assert_no_password_printed(&base, "PgZebra");
}

/// MariaDB refuses a password for its password-less root: the error must not quote it.
#[test]
fn no_form_of_a_password_is_printed_by_mysql_commands() {
    let Some(base) = mysql_url() else {
        return;
    };
    let mut refused = Url::parse(&base).expect("a server URL");
    refused.set_password(Some("MyZebra0Wrong%40pw")).unwrap();
    let output = shedlock(&["--url", refused.as_str(), "locks", "list"], &[]);
    assert_eq!(output.status.code(), Some(1), "{}", printed(&output));
    assert!(
        printed(&output).contains("Access denied"),
        "{}",
        printed(&output)
    );
    Password::new("MyZebra0Wrong", "%40pw").assert_never_printed(&output, "refused");
    assert_no_password_printed(&base, "MyZebra");
}

/// Redis refuses a password when it has none: the error must not quote it.
#[test]
fn no_form_of_a_password_is_printed_by_redis_commands() {
    let Some(base) = redis_url() else {
        return;
    };
    assert_no_password_printed(&base, "RdZebra");
}

/// RedLock: a password in one master's URL of the list (that master refuses it, the others
/// answer), in every form and place, is never printed.
#[test]
fn no_form_of_a_password_is_printed_by_redlock_commands() {
    let Some(masters) = redlock_urls() else {
        return;
    };
    for (url, password) in urls_with_passwords(&masters[0], "RlZebra") {
        let list = format!("{url},{}", masters[1..].join(","));
        assert_commands_mask(
            &password,
            &list,
            &["--key-prefix", "shedlock-safety:"],
            "***",
        );
        let output = shedlock(&["doctor"], &[("DATABASE_URL", &list)]);
        password.assert_never_printed(&output, "DATABASE_URL");
    }
}

/// ZooKeeper: digest credentials in the URL are used, never printed.
#[test]
fn no_form_of_a_password_is_printed_by_zookeeper_commands() {
    let Some(hosts) = zk_url() else {
        return;
    };
    let password = Password::new("ZkZebra1", "%40p%2Fs%23w%2Bd");
    let url = format!("zookeeper://app:{}@{hosts}", password.written);
    let root = unique_zk_root("safety");
    assert_commands_mask(&password, &url, &["--root", &root], "app:***@");
}

/// etcd: credentials in the URL are used (the test cluster has auth off and ignores them),
/// never printed.
#[test]
fn no_form_of_a_password_is_printed_by_etcd_commands() {
    let Some(endpoints) = etcd_url() else {
        return;
    };
    let hosts: Vec<&str> = endpoints
        .split(',')
        .map(|endpoint| endpoint.trim_start_matches("http://"))
        .collect();
    let password = Password::new("EtZebra2", "%40p%2Fs%23w%2Bd");
    let url = format!("etcd://app:{}@{}", password.written, hosts.join(","));
    let options = ["--key-prefix", "shedlock-safety/"];
    assert_commands_mask(&password, &url, &options, "app:***@");
}

/// Without a server: an unreachable PostgreSQL, a URL clap rejects as an argument, a scheme
/// the tool does not speak.
#[test]
fn no_form_of_a_password_is_printed_without_a_server() {
    assert_no_password_printed("postgres://root@127.0.0.1:1/test", "NoZebra");
    let password = Password::new("ArgZebra5", "%40p%2Fs+x");
    let url = format!(
        "postgres://root:{0}@127.0.0.1:1/test?password={0}",
        password.written
    );
    let misplaced = shedlock(&[url.as_str(), "locks", "list"], &[]);
    assert_eq!(misplaced.status.code(), Some(2), "{}", printed(&misplaced));
    password.assert_never_printed(&misplaced, "a URL without --url");
    let equals = format!("--url={url}");
    let typo = shedlock(&[equals.as_str(), "locks", "lisst"], &[]);
    assert_eq!(typo.status.code(), Some(2), "{}", printed(&typo));
    password.assert_never_printed(&typo, "--url= and a wrong subcommand");
    let oracle = url.replacen("postgres", "oracle", 1);
    let scheme = shedlock(&["--url", oracle.as_str(), "doctor"], &[]);
    assert_eq!(scheme.status.code(), Some(2), "{}", printed(&scheme));
    password.assert_never_printed(&scheme, "an unknown scheme");
}

/// A lock name and holder that another program wrote with terminal controls in them.
const HOSTILE_NAME: &str = "job\u{1b}[2J\u{1b}]0;owned\u{7}\r\u{9b}31m\u{202e}end";
const HOSTILE_HOLDER: &str = "web\u{1b}[31m-1\r\nfake line\u{7}\u{85}\u{2066}x";

/// Whether a terminal would act on `c` rather than show it (line breaks between lines are
/// the output's own).
fn acts_on_terminal(c: char) -> bool {
    (c.is_control() && c != '\n')
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}')
}

fn assert_terminal_safe(output: &Output, what: &str) {
    for stream in [&output.stdout, &output.stderr] {
        let text = String::from_utf8_lossy(stream);
        let bad: Vec<char> = text.chars().filter(|c| acts_on_terminal(*c)).collect();
        assert!(
            bad.is_empty(),
            "{what} printed {bad:?}:\n{}",
            text.escape_debug()
        );
    }
}

#[tokio::test]
async fn values_from_the_table_reach_the_terminal_escaped_and_json_intact() {
    use sqlx::{Connection, SqliteConnection};
    let table = unique_table("cli_escape");
    let file = std::env::temp_dir().join(format!("{table}.db"));
    let url = format!("sqlite:{}", file.display());
    let run = |args: &[&str]| {
        let mut with_url = vec!["--url", url.as_str()];
        with_url.extend(args);
        shedlock(&with_url, &[])
    };
    assert!(run(&["schema", "--apply"]).status.success());
    let mut connection = SqliteConnection::connect(&url).await.expect("connect");
    sqlx::query(
        "INSERT INTO shedlock (name, lock_until, locked_at, locked_by, fencing_token) \
         VALUES (?, strftime('%Y-%m-%d %H:%M:%f', 'now', '+10 minutes'), \
         strftime('%Y-%m-%d %H:%M:%f', 'now'), ?, 7)",
    )
    .bind(HOSTILE_NAME)
    .bind(HOSTILE_HOLDER)
    .execute(&mut connection)
    .await
    .expect("insert as another program would");
    connection.close().await.expect("close");

    // A lock name that parses as a URL is not taken for one: nothing of it is hidden.
    let missing = run(&["locks", "show", "report:daily#2"]);
    assert_eq!(missing.status.code(), Some(3), "{}", printed(&missing));
    assert!(
        printed(&missing).contains("no lock named `report:daily#2`"),
        "{}",
        printed(&missing)
    );

    let list = run(&["locks", "list"]);
    assert_terminal_safe(&list, "locks list");
    let text = String::from_utf8_lossy(&list.stdout).into_owned();
    assert_eq!(text.lines().count(), 2, "a header and one row:\n{text}");
    assert!(
        text.contains(r"job\u{1b}[2J\u{1b}]0;owned\u{7}\r\u{9b}31m\u{202e}end"),
        "{text}"
    );
    assert!(
        text.contains(r"web\u{1b}[31m-1\r\nfake line\u{7}\u{85}\u{2066}x"),
        "{text}"
    );

    let show = run(&["locks", "show", HOSTILE_NAME]);
    assert_terminal_safe(&show, "locks show");
    let text = String::from_utf8_lossy(&show.stdout).into_owned();
    assert!(
        text.contains(r"holder:        web\u{1b}[31m-1\r\nfake line"),
        "{text}"
    );

    for args in [
        &["locks", "list", "--json"][..],
        &["locks", "show", HOSTILE_NAME, "--json"],
    ] {
        let output = run(args);
        assert_terminal_safe(&output, &format!("{args:?}"));
        let json: Value = serde_json::from_slice(&output.stdout).expect("valid JSON");
        let lock = json.as_array().map_or(&json, |locks| &locks[0]);
        assert_eq!(lock["name"], HOSTILE_NAME, "{args:?}");
        assert_eq!(lock["locked_by"], HOSTILE_HOLDER, "{args:?}");
    }

    let refused = run(&["locks", "release", HOSTILE_NAME, "--holder", "web-2"]);
    assert_eq!(refused.status.code(), Some(4), "{}", printed(&refused));
    assert_terminal_safe(&refused, "a refused release");
    assert!(
        printed(&refused).contains(r"held by web\u{1b}[31m-1\r\n"),
        "{}",
        printed(&refused)
    );
    // Released, or refused by the provider, which takes no holder with control characters
    // (shedlock-sqlx's `release_lease`): either way, what it says is escaped.
    let forced = run(&["locks", "release", HOSTILE_NAME, "--force"]);
    assert_terminal_safe(&forced, "a forced release");
    assert!(
        printed(&forced).contains(r"web\u{1b}[31m-1\r\n"),
        "{}",
        printed(&forced)
    );
    let _ = std::fs::remove_file(&file);
}

/// SHEDLOCK_URL is read first, DATABASE_URL when it is not set (or empty); `--help` says to
/// prefer them to `--url`, which `ps` shows to other users.
#[test]
fn the_url_comes_from_shedlock_url_then_database_url() {
    let help = shedlock(&["--help"], &[]);
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    assert!(
        help.contains("SHEDLOCK_URL") && help.contains("`ps`"),
        "{help}"
    );

    let file = std::env::temp_dir().join(format!("{}.db", unique_table("cli_url")));
    let url = format!("sqlite:{}", file.display());
    let nowhere = "sqlite:/nonexistent-shedlock-dir/locks.db";
    let first = shedlock(
        &["schema", "--apply"],
        &[("SHEDLOCK_URL", &url), ("DATABASE_URL", nowhere)],
    );
    assert!(first.status.success(), "{}", printed(&first));
    let fallback = shedlock(
        &["locks", "list", "--json"],
        &[("SHEDLOCK_URL", ""), ("DATABASE_URL", &url)],
    );
    assert!(fallback.status.success(), "{}", printed(&fallback));
    let given = shedlock(
        &["--url", &url, "locks", "list", "--json"],
        &[("SHEDLOCK_URL", nowhere)],
    );
    assert!(given.status.success(), "{}", printed(&given));
    let _ = std::fs::remove_file(&file);
}
