//! The facade exports each name once: at the root what a service uses, in `provider` what only
//! a store's author needs, each store's types in its own module (`sql`, `redis`, `zookeeper`,
//! `etcd`). Issue 30 found 47 names at the root and 23 in `provider`, 9 of them in both, and
//! every provider at the root and again in its module.

use std::collections::BTreeMap;

/// Every name `src/lib.rs` re-exports from the workspace's crates, with the module it lands in
/// (`""` for the root).
fn exported_names() -> Vec<(String, String)> {
    let source = include_str!("../src/lib.rs");
    let mut names = Vec::new();
    let mut module = String::new();
    let mut depth = 0usize;
    let mut module_depth = None;
    let mut statement: Option<String> = None;
    for line in source.lines() {
        let line = line.trim();
        if let Some(mut text) = statement.take() {
            text.push(' ');
            text.push_str(line);
            if line.ends_with(';') {
                names.extend(parse_use(&text).into_iter().map(|n| (module.clone(), n)));
            } else {
                statement = Some(text);
            }
            continue;
        }
        if let Some(name) = line
            .strip_prefix("pub mod ")
            .and_then(|rest| rest.strip_suffix(" {"))
        {
            module = name.to_owned();
            module_depth = Some(depth);
        }
        if line.starts_with("pub use shedlock") {
            if line.ends_with(';') {
                names.extend(parse_use(line).into_iter().map(|n| (module.clone(), n)));
            } else {
                statement = Some(line.to_owned());
            }
        }
        depth += line.matches('{').count();
        depth -= line.matches('}').count();
        if module_depth == Some(depth) && line == "}" {
            module.clear();
            module_depth = None;
        }
    }
    names
}

/// The names a `pub use krate::{a, b as c, m::d};` or `pub use krate as name;` brings in.
fn parse_use(statement: &str) -> Vec<String> {
    let body = statement
        .trim_start_matches("pub use ")
        .trim_end_matches(';');
    let items = match (body.find('{'), body.rfind('}')) {
        (Some(open), Some(close)) => body[open + 1..close].to_owned(),
        _ => body.to_owned(),
    };
    items
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(|item| match item.split_once(" as ") {
            Some((_, alias)) => alias.trim().to_owned(),
            None => item.rsplit("::").next().unwrap_or(item).to_owned(),
        })
        .collect()
}

#[test]
fn each_name_is_exported_once() {
    let names = exported_names();
    assert!(
        names.len() > 40,
        "found only {} names: is the parser still reading src/lib.rs right?",
        names.len()
    );
    let mut places: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (module, name) in &names {
        places.entry(name).or_default().push(module);
    }
    let twice: Vec<_> = places.iter().filter(|(_, at)| at.len() > 1).collect();
    assert!(twice.is_empty(), "exported more than once: {twice:?}");
}

#[test]
fn stores_are_in_their_modules_only() {
    // These compile only while each store's types are reachable through its module.
    let _ = std::any::type_name::<shedlock::sql::PgLockProvider>();
    let _ = std::any::type_name::<shedlock::redis::RedisLockProvider>();
    let _ = std::any::type_name::<shedlock::zookeeper::ZkLockProvider>();
    let _ = std::any::type_name::<shedlock::etcd::EtcdLockProvider>();
    let names = exported_names();
    for store in [
        "PgLockProvider",
        "RedisLockProvider",
        "ZkLockProvider",
        "EtcdLockProvider",
    ] {
        assert!(
            !names.iter().any(|(_, name)| name == store),
            "{store} exported by name besides its module"
        );
    }
}

#[test]
fn the_parser_reads_groups_aliases_and_modules() {
    assert_eq!(
        parse_use("pub use shedlock_core::{A, b::C, D as E};"),
        ["A", "C", "E"]
    );
    assert_eq!(parse_use("pub use shedlock_redis as redis;"), ["redis"]);
}
