//! `--connect-timeout` reads durations with the grammar of the attributes and `scheduler.toml`
//! (`shedlock_rules::parse_duration`): humantime or ISO-8601, at most 100 years. Needs no server.

mod common;

use std::process::Output;

use shedlock_conformance::unique_table;

fn shedlock(args: &[&str]) -> Output {
    common::shedlock_command().args(args).output().unwrap()
}

#[test]
fn connect_timeout_takes_both_forms_and_names_the_flag_when_wrong() {
    let file = std::env::temp_dir().join(format!("{}.db", unique_table("cli_durations")));
    let url = format!("sqlite:{}", file.display());
    for timeout in ["PT2.5S", "2s 500ms"] {
        let run = shedlock(&[
            "--url",
            &url,
            "--connect-timeout",
            timeout,
            "schema",
            "--apply",
        ]);
        assert_eq!(run.status.code(), Some(0), "{timeout}: {run:?}");
    }
    let _ = std::fs::remove_file(&file);

    for (timeout, problem) in [
        ("P1M", "ISO-8601 months are not a fixed length"),
        ("100y 1s", "must be at most 100 years"),
        ("ten seconds", "expected number"),
    ] {
        let run = shedlock(&["--url", &url, "--connect-timeout", timeout, "locks", "list"]);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{timeout}: {stderr}");
        assert!(
            stderr.contains("--connect-timeout") && stderr.contains(problem),
            "{timeout}: {stderr}"
        );
    }
}
