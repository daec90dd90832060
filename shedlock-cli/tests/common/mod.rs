//! What the binary's test files share: the binary, a finished run and its output, finding a
//! lock in `locks list --json`, and the cases every store passes alike.

#![allow(dead_code)] // each test binary uses a different part

use std::process::{Command, Output};

use serde_json::Value;

/// The binary, without the caller's URL variables (`SHEDLOCK_URL`, `DATABASE_URL`).
pub(crate) fn shedlock_command() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_shedlock"));
    command
        .env_remove("SHEDLOCK_URL")
        .env_remove("DATABASE_URL");
    command
}

/// A finished run of the binary.
pub(crate) struct Run(pub(crate) Output);

impl Run {
    /// Runs `command` to its end.
    pub(crate) fn of(command: &mut Command) -> Self {
        Run(command.output().expect("run the shedlock binary"))
    }

    pub(crate) fn code(&self) -> i32 {
        self.0.status.code().expect("exited, not killed")
    }

    pub(crate) fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.0.stdout).into_owned()
    }

    pub(crate) fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.0.stderr).into_owned()
    }

    /// Asserts the exit code, showing both streams when it differs.
    pub(crate) fn expect(self, code: i32) -> Self {
        assert_eq!(
            self.code(),
            code,
            "stdout:\n{}\nstderr:\n{}",
            self.stdout(),
            self.stderr()
        );
        self
    }

    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.stdout()).expect("JSON on stdout")
    }
}

/// The lock named `name` in a `locks list --json` array.
pub(crate) fn find<'a>(locks: &'a Value, name: &str) -> &'a Value {
    let locks = locks.as_array().expect("a JSON array");
    locks
        .iter()
        .find(|lock| lock["name"] == name)
        .unwrap_or_else(|| panic!("{name} in {locks:?}"))
}

pub(crate) const JSON_FIELDS: [&str; 8] = [
    "name",
    "held",
    "locked_by",
    "fencing_token",
    "locked_at",
    "lock_until",
    "remaining_ms",
    "database_time",
];

/// With `held-lock` held by `web-1` (token `token`) and `free-lock` released by `web-2`:
/// `locks list` and `locks show`, text and JSON, show both as they are, and a name the store
/// has no record of exits 3. `shedlock` runs the binary on the store with these arguments.
pub(crate) fn assert_held_and_free_listed(shedlock: impl Fn(&[&str]) -> Run, token: u64) {
    let list = shedlock(&["locks", "list", "--json"]).expect(0).json();
    let held = find(&list, "held-lock");
    let fields: Vec<&str> = held
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(fields.len(), JSON_FIELDS.len(), "{held}");
    assert!(JSON_FIELDS.iter().all(|f| fields.contains(f)), "{held}");
    assert_eq!(held["held"], true);
    assert_eq!(held["locked_by"], "web-1");
    assert_eq!(held["fencing_token"], token);
    let remaining = held["remaining_ms"].as_u64().unwrap();
    assert!(remaining > 0 && remaining <= 600_000, "{held}");
    let free = find(&list, "free-lock");
    assert_eq!(free["held"], false);
    assert_eq!(free["remaining_ms"], 0);
    assert_eq!(free["locked_by"], "web-2");

    let table = shedlock(&["locks", "list"]).expect(0).stdout();
    let line = |name: &str| {
        table
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} in\n{table}"))
            .to_owned()
    };
    assert!(line("held-lock ").contains(" held "), "{table}");
    assert!(line("held-lock ").contains("web-1"), "{table}");
    assert!(line("free-lock ").contains(" free "), "{table}");

    let show = shedlock(&["locks", "show", "held-lock", "--json"])
        .expect(0)
        .json();
    assert_eq!(show["name"], "held-lock");
    assert_eq!(show["held"], true);
    assert_eq!(show["fencing_token"], token);
    let shown = shedlock(&["locks", "show", "free-lock"]).expect(0).stdout();
    assert!(shown.contains("state:         free"), "{shown}");

    let missing = shedlock(&["locks", "show", "no-such-lock"]).expect(3);
    assert!(
        missing.stderr().contains("no lock named `no-such-lock`"),
        "{}",
        missing.stderr()
    );
}

/// With `job` held by `web-1` (token `token`): `locks release job` with another holder, a
/// wrong token or both exits 4 naming the holder, and the lock stays held (`held` reads it).
pub(crate) async fn assert_release_refused(
    shedlock: impl Fn(&[&str]) -> Run,
    token: u64,
    held: impl AsyncFn() -> bool,
) {
    let wrong = (token + 1).to_string();
    for refused in [
        vec!["--holder", "web-2"],
        vec!["--token", &wrong],
        vec!["--holder", "web-1", "--token", &wrong],
    ] {
        let mut args = vec!["locks", "release", "job"];
        args.extend(refused.iter().copied());
        let run = shedlock(&args).expect(4);
        assert!(run.stderr().contains("held by web-1"), "{}", run.stderr());
        assert!(held().await, "released by {refused:?}");
    }
}

/// One `#[tokio::test]` per target and case, in a module per target: `module: open` names the
/// module and what gives its target (`$test` names the test in `open`); `test: case` runs
/// `cases::case` on that target, and is skipped when `open` gives nothing.
#[macro_export]
macro_rules! case_tests {
    (|$test_name:ident| { $($module:ident: $open:expr,)+ } $cases:tt) => {
        $($crate::case_tests!(@module $module, |$test_name| $open, $cases);)+
    };
    (@module $module:ident, |$test_name:ident| $open:expr, { $($test:ident: $case:ident,)* }) => {
        mod $module {
            use super::*;
            $(
                #[tokio::test]
                async fn $test() {
                    let $test_name = stringify!($test);
                    if let Some(target) = $open {
                        cases::$case(target).await;
                    }
                }
            )*
        }
    };
}

/// Writes two runs of `lock` into `log` as holder `web-1`: token 1 failed ("disk full"), then
/// token 2 still running.
pub(crate) async fn record_two_runs(log: &dyn shedlock_core::RunLog, lock: &str) {
    use shedlock_core::{RunEnd, RunOutcome, RunStart};
    let failed = RunStart::new(lock, "nightly", None, "web-1", 1);
    log.run_started(&failed).await.expect("record a start");
    log.run_finished(
        &failed,
        &RunEnd::with_error(RunOutcome::Failed, "disk full"),
    )
    .await
    .expect("record an end");
    let running = RunStart::new(lock, "nightly", None, "web-1", 2);
    log.run_started(&running).await.expect("record a start");
}

/// What `record_two_runs` wrote, as `runs list` and `runs show` print it; exit 3 for a lock
/// without runs.
pub(crate) fn assert_runs_listed(shedlock: impl Fn(&[&str]) -> Run, lock: &str) {
    let list = shedlock(&["runs", "list", "--lock", lock, "--json"])
        .expect(0)
        .json();
    let tokens: Vec<u64> = list
        .as_array()
        .expect("a JSON array")
        .iter()
        .map(|run| run["fencing_token"].as_u64().unwrap())
        .collect();
    assert_eq!(tokens, [2, 1], "newest first: {list}");
    assert_eq!(list[0]["outcome"], "running");
    assert_eq!(list[1]["outcome"], "failed");
    assert_eq!(list[1]["error"], "disk full");
    let text = shedlock(&["runs", "list"]).expect(0).stdout();
    assert!(
        text.contains("OUTCOME") && text.contains("disk full"),
        "{text}"
    );

    let newest = shedlock(&["runs", "show", lock, "--json"]).expect(0).json();
    assert_eq!(
        (newest["fencing_token"].as_u64(), newest["outcome"].as_str()),
        (Some(2), Some("running"))
    );
    let failed = shedlock(&["runs", "show", lock, "--token", "1"])
        .expect(0)
        .stdout();
    assert!(
        failed.contains("outcome:       failed") && failed.contains("error:         disk full"),
        "{failed}"
    );
    shedlock(&["runs", "show", "no-such-lock"]).expect(3);
}

/// The `next page: --before …` or `--after …` value a page ends with, if any.
pub(crate) fn next_page(text: &str, option: &str) -> Option<String> {
    let marker = format!("next page: {option} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&marker))
        .map(str::to_owned)
}

/// Writes `count` finished runs of `lock` into `log` as holder `web-1`, tokens 1 to `count`.
pub(crate) async fn record_runs(log: &dyn shedlock_core::RunLog, lock: &str, count: u64) {
    use shedlock_core::{RunEnd, RunStart};
    for token in 1..=count {
        let start = RunStart::new(lock, "paged-job", None, "web-1", token);
        log.run_started(&start).await.expect("record a start");
        log.run_finished(&start, &RunEnd::succeeded())
            .await
            .expect("record an end");
    }
}

/// Issue 29 item 3: `runs list` reads a page at a time with `--limit` and `--before`, and says
/// where the next page starts; the pages together are every run once, newest first, for one
/// lock and for all. Writes 7 runs of `paged` and 3 of `paged-other` into `log` first.
pub(crate) async fn assert_runs_paged(
    shedlock: impl Fn(&[&str]) -> Run,
    log: &dyn shedlock_core::RunLog,
) {
    record_runs(log, "paged", 7).await;
    record_runs(log, "paged-other", 3).await;
    let tokens = |json: &Value| -> Vec<u64> {
        let runs = json.as_array().expect("a JSON array");
        runs.iter()
            .map(|run| run["fencing_token"].as_u64().unwrap())
            .collect()
    };
    // One lock: 3, 3, then 1, each page starting where the last ended.
    let mut before: Option<String> = None;
    let mut pages = Vec::new();
    loop {
        let mut args = vec!["runs", "list", "--lock", "paged", "--limit", "3"];
        if let Some(cursor) = &before {
            args.extend(["--before", cursor.as_str()]);
        }
        let text = shedlock(&args).expect(0).stdout();
        args.push("--json");
        let json = shedlock(&args).expect(0).json();
        pages.push(tokens(&json));
        match next_page(&text, "--before") {
            Some(cursor) => {
                let last = json.as_array().unwrap().last().unwrap();
                assert_eq!(last["cursor"], cursor.as_str(), "{text}");
                before = Some(cursor);
            }
            None => break,
        }
        assert!(pages.len() < 10, "no last page: {pages:?}");
    }
    assert_eq!(pages, [vec![7, 6, 5], vec![4, 3, 2], vec![1]]);

    // Every lock: pages of 4 until the last, every run once, newest first.
    let mut before: Option<String> = None;
    let mut seen: Vec<(String, u64)> = Vec::new();
    let mut cursors = Vec::new();
    loop {
        let mut args = vec!["runs", "list", "--limit", "4"];
        if let Some(cursor) = &before {
            args.extend(["--before", cursor.as_str()]);
        }
        let text = shedlock(&args).expect(0).stdout();
        args.push("--json");
        for run in shedlock(&args).expect(0).json().as_array().unwrap() {
            let lock = run["lock"].as_str().unwrap().to_owned();
            seen.push((lock, run["fencing_token"].as_u64().unwrap()));
            cursors.push(run["cursor"].as_str().unwrap().to_owned());
        }
        match next_page(&text, "--before") {
            Some(cursor) => before = Some(cursor),
            None => break,
        }
        assert!(cursors.len() < 100, "no last page: {seen:?}");
    }
    let mut paged: Vec<&(String, u64)> = seen.iter().filter(|(l, _)| l == "paged").collect();
    paged.dedup();
    assert_eq!(paged.len(), 7, "{seen:?}");
    let others = seen.iter().filter(|(l, _)| l == "paged-other").count();
    assert_eq!(others, 3, "{seen:?}");
    let mut unique = seen.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), seen.len(), "a run listed twice: {seen:?}");
    let parsed: Vec<shedlock_core::RunCursor> = cursors
        .iter()
        .map(|c| c.parse().expect("a cursor"))
        .collect();
    assert!(
        parsed.windows(2).all(|pair| pair[0] > pair[1]),
        "not newest first: {cursors:?}"
    );

    // A run far down the history is found by its token; bad pages are usage errors.
    let oldest = shedlock(&["runs", "show", "paged", "--token", "1", "--json"])
        .expect(0)
        .json();
    assert_eq!(oldest["fencing_token"], 1);
    shedlock(&["runs", "list", "--limit", "0"]).expect(2);
    shedlock(&["runs", "list", "--before", "yesterday"]).expect(2);
}

/// `locks list` pages with `--limit` and `--after` (the next page's `--after` on the last
/// line) and filters with `--prefix`, given the held locks `page-a`, `page-b`, `page-c` and
/// `other`.
pub(crate) fn assert_locks_paged(shedlock: impl Fn(&[&str]) -> Run) {
    let names = |args: &[&str]| -> Vec<String> {
        let mut args = args.to_vec();
        args.push("--json");
        let json = shedlock(&args).expect(0).json();
        let locks = json.as_array().expect("a JSON array").clone();
        locks
            .iter()
            .map(|lock| lock["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let first = ["locks", "list", "--prefix", "page-", "--limit", "2"];
    assert_eq!(names(&first), ["page-a", "page-b"]);
    let text = shedlock(&first).expect(0).stdout();
    let after = next_page(&text, "--after").unwrap_or_else(|| panic!("a next page: {text}"));
    assert_eq!(after, "page-b");
    let second = [
        "locks", "list", "--prefix", "page-", "--limit", "2", "--after", "page-b",
    ];
    assert_eq!(names(&second), ["page-c"]);
    let last = shedlock(&second).expect(0).stdout();
    assert_eq!(next_page(&last, "--after"), None, "{last}");
    assert_eq!(names(&["locks", "list"]).len(), 4);
    shedlock(&["locks", "list", "--limit", "0"]).expect(2);
}

/// A `shedlock dashboard` running until the test ends (also when it fails).
pub(crate) struct Dashboard {
    child: std::process::Child,
    /// `127.0.0.1:PORT`.
    pub(crate) address: String,
}

impl Dashboard {
    /// Starts `command` (a `shedlock … dashboard --listen 127.0.0.1:0 …`) and waits for its
    /// first line, which says where it listens once it does.
    pub(crate) fn start(command: &mut Command) -> Dashboard {
        use std::io::BufRead;
        let mut child = command
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start the dashboard");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().expect("its stdout"))
            .read_line(&mut line)
            .expect("its first line");
        let address = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .map(str::to_owned);
        let Some(address) = address else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("no address in {line:?}");
        };
        Dashboard { child, address }
    }

    /// The response to `GET /?view=locks` (HTTP/1.0, `Host: localhost`), headers and body.
    pub(crate) fn page(&self) -> String {
        self.get("/?view=locks")
    }

    /// The response to `GET path` (HTTP/1.0, `Host: localhost`), headers and body.
    pub(crate) fn get(&self, path: &str) -> String {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(&self.address).expect("connect");
        stream
            .write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
            .expect("send the request");
        let mut response = String::new();
        stream.read_to_string(&mut response).expect("the response");
        response
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The row of election `name` in a dashboard page.
pub(crate) fn election_row<'a>(page: &'a str, name: &str) -> &'a str {
    let start = format!(r#"<tr class="election" data-name="{name}">"#);
    let at = page
        .find(&start)
        .unwrap_or_else(|| panic!("no row of election {name} in {page}"));
    let row = &page[at..];
    &row[..row.find("</tr>").unwrap_or(row.len())]
}

/// Two instances publishing `report` (a cron job, one of them on another schedule: a rolling
/// deploy) and `cleanup`, as schedulers with `publish_jobs()` do.
pub(crate) async fn publish_two_instances(fleet: &shedlock_core::Fleet) {
    use shedlock_core::JobDefinition;
    let alive = std::time::Duration::from_secs(60);
    let report = |schedule: &str| {
        JobDefinition::new("report", schedule)
            .with_zone("Europe/Paris")
            .with_lock(
                "report",
                std::time::Duration::from_secs(600),
                std::time::Duration::ZERO,
            )
    };
    let cleanup = JobDefinition::new("cleanup", "every 10s");
    fleet
        .publish("web-1", &[report("0 0 6 * * *"), cleanup.clone()], alive)
        .await
        .expect("publish web-1");
    fleet
        .publish("web-2", &[report("0 0 7 * * *"), cleanup], alive)
        .await
        .expect("publish web-2");
}

/// What `publish_two_instances` wrote, as `jobs list` and `jobs show` print it; a pause, a
/// resume and a run asked for through the binary, seen on the store's board; exit 3 for a job
/// nobody carries.
pub(crate) async fn assert_jobs_steered(
    shedlock: impl Fn(&[&str]) -> Run,
    fleet: &shedlock_core::Fleet,
) {
    let list = shedlock(&["jobs", "list", "--json"]).expect(0).json();
    let names: Vec<&str> = list
        .as_array()
        .expect("a JSON array")
        .iter()
        .map(|job| job["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["cleanup", "report"], "{list}");
    let report = &list[1];
    assert_eq!(report["carriers"].as_array().unwrap().len(), 2, "{report}");
    assert_eq!(report["definitions_differ"], true);
    assert_eq!(report["zone"], "Europe/Paris");
    assert_eq!(report["lock"], "report");
    let next = report["next_fire"]
        .as_str()
        .expect("a cron job's next fire time");
    assert!(
        next.ends_with(":00:00.000Z") && (next.contains("T04:") || next.contains("T05:")),
        "06:00 in Paris is 04:00 or 05:00 UTC: {next}"
    );
    assert_eq!(list[0]["next_fire"], Value::Null, "a fixed rate has none");
    let text = shedlock(&["jobs", "list"]).expect(0).stdout();
    assert!(
        text.contains("NEXT FIRE") && text.contains("2 (1 differ)") && text.contains("active"),
        "{text}"
    );
    let shown = shedlock(&["jobs", "show", "report"]).expect(0).stdout();
    assert!(
        shown.contains("web-1") && shown.contains("DIFFERS"),
        "{shown}"
    );

    let paused = shedlock(&["jobs", "pause", "report", "--by", "alice"])
        .expect(0)
        .stdout();
    assert!(paused.contains("paused `report`"), "{paused}");
    let switches = fleet.switches().await.expect("switches");
    assert_eq!(switches.paused["report"].by, "alice");
    let listed = shedlock(&["jobs", "list"]).expect(0).stdout();
    assert!(listed.contains("paused by alice"), "{listed}");
    shedlock(&["jobs", "resume", "report"]).expect(0);
    assert!(fleet.switches().await.expect("switches").paused.is_empty());

    let asked = shedlock(&["jobs", "run", "report", "--by", "bob"])
        .expect(0)
        .stdout();
    assert!(asked.contains("asked for a run of `report`"), "{asked}");
    let request = fleet.switches().await.expect("switches").runs["report"].clone();
    assert_eq!((request.by.as_str(), request.taken_by), ("bob", None));

    let unknown = shedlock(&["jobs", "pause", "no-such-job"])
        .expect(3)
        .stderr();
    assert!(unknown.contains("no live instance carries"), "{unknown}");
    shedlock(&["jobs", "run", "no-such-job"]).expect(3);
    shedlock(&["jobs", "show", "no-such-job"]).expect(3);
    shedlock(&["jobs", "pause", "no-such-job", "--force"]).expect(0);
}
