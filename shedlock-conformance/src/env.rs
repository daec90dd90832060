//! A test server's URL from the environment, and the skip rule: a test that finds none is
//! skipped, quietly and countably (one `skipped: …` line per test process and reason, every
//! skip tallied in a file of the run under the target directory); under `CI=true` a missing
//! server is a failure, never a skip. What a store's tests need on a newcomer's laptop and on
//! CI alike.
//!
//! The tally of a run is `<target>/shedlock-skipped/<run>`, one line per skip: the reason, the
//! test binary and the test (its thread's name), separated by tabs. `<target>` is the cargo
//! target directory the test binary runs from (the nearest ancestor of
//! [`current_exe`](std::env::current_exe) holding cargo's `CACHEDIR.TAG`); `<run>` names the
//! process that started the test binaries (`cargo test`, or nextest): every binary of one
//! `cargo test` writes to the same file, the next `cargo test` to a new one. A doc test (built
//! outside the target directory) prints its line but tallies nothing.

use std::collections::BTreeSet;
use std::fmt::Display;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

/// The directory under the target directory that holds the tally of each run.
pub const TALLY_DIR: &str = "shedlock-skipped";

/// Whether this run is CI's (`CI=true`), where nothing may be skipped.
pub fn on_ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// Skips the calling test for `reason`: tallies it (see the [module docs](self)) and, the
/// first time this test process skips for that reason, says so on stderr
/// (`skipped: <reason> …`); the process's next skips for the same reason are only tallied.
///
/// # Panics
/// Under `CI=true`: on CI whatever a test needs must be there.
pub fn skip(reason: impl Display) {
    assert!(
        !on_ci(),
        "CI=true, so this is a failure, not a skip: {reason}"
    );
    // One line: the tally is a line per skip, its fields separated by tabs.
    let reason = reason
        .to_string()
        .replace(['\n', '\r', '\t'], " ")
        .trim()
        .to_owned();
    let tally = tally(&reason);
    let first = SAID
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(reason.clone());
    if !first {
        return;
    }
    let line = match tally {
        Some(file) => format!(
            "skipped: {reason} [this binary's other skips for it are only counted, in {}]\n",
            file.display()
        ),
        None => format!("skipped: {reason}\n"),
    };
    // Written to stderr directly: cargo test captures `eprintln!` of a passing test.
    let _ = std::io::stderr().write_all(line.as_bytes());
}

/// The value of `var`, or `None` after [`skip`] said which variable to set for `what` (e.g.
/// `PostgreSQL`), with `example` as a value. The value itself is never printed: it may hold a
/// password.
///
/// # Panics
/// When the variable is missing or empty and `CI=true`.
pub fn env_url(var: &str, what: &str, example: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            skip(format_args!(
                "{var} not set (set it to run {what} tests, e.g. {example})"
            ));
            None
        }
    }
}

/// The reasons this process has printed.
static SAID: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Appends the skip to this run's tally; the tally's path, or `None` where there is no target
/// directory to write it in (a doc test) or the write failed.
fn tally(reason: &str) -> Option<&'static Path> {
    let (file, binary) = tally_file()?;
    let test = test_name();
    // One short write per line to a file opened for appending: the binaries of a run (nextest
    // runs them side by side) add their lines without mixing them.
    let line = format!("{reason}\t{binary}\t{test}\n");
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)
        .and_then(|mut f| f.write_all(line.as_bytes()))
        .ok()?;
    Some(file.as_path())
}

/// This process's tally file and its test binary's name, found once (a binary of server tests
/// skips hundreds of times): the binary's path, the target directory above it, the run.
fn tally_file() -> Option<&'static (PathBuf, String)> {
    static FILE: OnceLock<Option<(PathBuf, String)>> = OnceLock::new();
    FILE.get_or_init(|| {
        let exe = std::env::current_exe().ok()?;
        let dir = target_dir(&exe)?.join(TALLY_DIR);
        std::fs::create_dir_all(&dir).ok()?;
        let binary = exe
            .file_name()
            .map_or_else(|| "?".into(), |name| name.to_string_lossy().into_owned());
        Some((dir.join(run_id()), binary))
    })
    .as_ref()
}

/// The running test's name: its thread's (libtest names each test's thread after it), or, on a
/// thread without one (a test run on the main thread, a runtime's worker), a number unique in
/// this process, so that skips from different tests are not taken for one test's.
fn test_name() -> String {
    static UNNAMED: AtomicUsize = AtomicUsize::new(0);
    match std::thread::current().name() {
        Some(name) if name != "main" && !name.starts_with("tokio-runtime-worker") => {
            name.replace(['\n', '\t'], " ")
        }
        _ => format!("#{}", UNNAMED.fetch_add(1, Ordering::Relaxed)),
    }
}

/// The cargo target directory `exe` was built in: its nearest ancestor holding the
/// `CACHEDIR.TAG` cargo writes there.
fn target_dir(exe: &Path) -> Option<PathBuf> {
    exe.ancestors()
        .skip(1)
        .find(|dir| dir.join("CACHEDIR.TAG").is_file())
        .map(Path::to_path_buf)
}

/// The run this process belongs to: the process that started it (`cargo test` starts every
/// test binary of a run), by pid and, where `/proc` says, its start time (a pid is reused).
fn run_id() -> String {
    #[cfg(unix)]
    {
        let parent = std::os::unix::process::parent_id();
        // Field 22 of /proc/<pid>/stat, the start time; the fields after the command name (which
        // may hold spaces) are counted from its closing parenthesis.
        let started = std::fs::read_to_string(format!("/proc/{parent}/stat"))
            .ok()
            .and_then(|stat| {
                let (_, fields) = stat.rsplit_once(')')?;
                fields.split_whitespace().nth(19).map(str::to_owned)
            });
        match started {
            Some(started) => format!("{parent}-{started}"),
            None => parent.to_string(),
        }
    }
    #[cfg(not(unix))]
    {
        "run".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_directory_is_the_ancestor_with_cargos_tag() {
        let exe = std::env::current_exe().expect("the test binary's path");
        let target = target_dir(&exe).expect("a test binary runs from a target directory");
        assert!(target.join("CACHEDIR.TAG").is_file());
        assert!(exe.starts_with(&target));
        assert_eq!(target_dir(Path::new("/no/such/dir/binary")), None);
    }

    #[test]
    fn a_run_is_named_after_the_process_that_started_the_test_binary() {
        let id = run_id();
        assert_eq!(id, run_id(), "one name for the whole process");
        #[cfg(unix)]
        assert!(id.starts_with(&std::os::unix::process::parent_id().to_string()));
    }
}
