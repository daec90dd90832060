//! This crate restates none of the rules of `shedlock-rules`, which `shedlock-macros` checks
//! attribute arguments with: its rule items are that crate's, re-exported, and its sources build
//! no cron parser, define no limit and parse no duration or zone text of their own. (The table
//! that runs the same values through the macro and through this crate's API is in
//! `shedlock-macros/src/validate.rs`.)

use std::path::Path;
use std::time::Duration;

#[test]
fn the_public_rule_items_are_the_rules_crate_items() {
    // These bindings compile only because the types are one and the same.
    let parse: fn(&str) -> Result<Duration, shedlock_rules::DurationError> =
        shedlock_rules::parse_duration;
    let error: shedlock_rules::DurationError = parse("P1M").unwrap_err();
    assert_eq!(
        error.kind(),
        &shedlock_rules::DurationErrorKind::IsoVariableLength { unit: 'M' }
    );
    assert_eq!(shedlock_core::MAX_DURATION, shedlock_rules::MAX_DURATION);
    assert_eq!(
        shedlock_core::MAX_LOCK_NAME_LEN,
        shedlock_rules::MAX_LOCK_NAME_LEN
    );
}

#[test]
fn no_rule_is_restated_in_the_sources() {
    let restated = [
        "CronParser",                // the parser settings: shedlock_rules::cron_parser
        "const MAX_DURATION",        // shedlock_rules::MAX_DURATION
        "const MAX_LOCK_NAME_LEN",   // shedlock_rules::MAX_LOCK_NAME_LEN
        "3_155_760_000",             // 100 years, MAX_DURATION's value
        "humantime::parse_duration", // the grammar: shedlock_rules::parse_duration
        "humantime_serde",           // shedlock_rules::serde_duration
        "parse::<Tz>",               // zones: shedlock_rules::parse_zone
        "parse::<chrono_tz::Tz>",
    ];
    let mut files = Vec::new();
    sources(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    assert!(files.len() > 20, "found {} source files", files.len());
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for needle in restated {
            assert!(
                !text.contains(needle),
                "{}: `{needle}` restates a rule of shedlock-rules",
                file.display()
            );
        }
    }
}

fn sources(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, files);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
}
