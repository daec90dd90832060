//! `doctor` on PostgreSQL reports the replication topology it finds: on the primary, each
//! streaming standby and whether it replicates synchronously (a warning when not: a failover
//! can lose a grant); on a standby, a problem (no lock can be written there). On the pair of
//! `.ci/postgres-standby.sh`, made afresh first (a failover test may have promoted it). Needs
//! `SHEDLOCK_TEST_PG_PRIMARY_URL` and `SHEDLOCK_TEST_PG_STANDBY_URL`; skipped without them,
//! failed without them when `CI=true`.

mod common;

use std::process::Command;

use common::{Run, shedlock_command};
use shedlock_conformance::env::env_url;

fn pair_script(command: &str) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../.ci/postgres-standby.sh");
    let status = Command::new("bash")
        .args([script, command])
        .status()
        .unwrap();
    assert!(status.success(), "postgres-standby.sh {command}: {status}");
}

fn doctor(url: &str) -> Run {
    Run::of(shedlock_command().env("SHEDLOCK_URL", url).arg("doctor"))
}

fn psql(url: &str, statement: &str) {
    let status = Command::new("psql")
        .args([url, "-q", "-v", "ON_ERROR_STOP=1", "-c", statement])
        .status()
        .unwrap();
    assert!(status.success(), "psql {statement}");
}

#[test]
fn doctor_reports_primary_standby_and_asynchronous_replication() {
    let example = "eval \"$(bash .ci/postgres-standby.sh start)\"";
    let Some(primary) = env_url(
        "SHEDLOCK_TEST_PG_PRIMARY_URL",
        "PostgreSQL primary",
        example,
    ) else {
        return;
    };
    let Some(standby) = env_url(
        "SHEDLOCK_TEST_PG_STANDBY_URL",
        "PostgreSQL standby",
        example,
    ) else {
        return;
    };
    pair_script("reset");
    Run::of(
        shedlock_command()
            .env("SHEDLOCK_URL", &primary)
            .args(["schema", "--apply"]),
    )
    .expect(0);

    let out = doctor(&primary).expect(0).stdout();
    assert!(
        out.contains("this server is a primary with 1 streaming standby"),
        "{out}"
    );
    assert!(
        out.lines().any(|l| l.starts_with("warning")
            && l.contains("`standby`")
            && l.contains("asynchronously")),
        "{out}"
    );

    psql(
        &primary,
        "ALTER SYSTEM SET synchronous_standby_names = 'standby'",
    );
    psql(&primary, "SELECT pg_reload_conf()");
    // The primary reports the standby as synchronous once it has confirmed a flush under the
    // new setting: wait for it (a few ms) rather than sleep.
    let synchronous = (0..200).find_map(|_| {
        let out = doctor(&primary).expect(0).stdout();
        if out.contains("replicates synchronously") {
            return Some(out);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        None
    });
    let out = synchronous.expect("the standby reported synchronous");
    assert!(!out.contains("warning"), "{out}");

    let out = doctor(&standby).expect(5).stdout();
    assert!(
        out.contains("problem  this server is a standby (in recovery)"),
        "{out}"
    );
    assert!(out.contains("target_session_attrs=read-write"), "{out}");

    // Both servers in one URL, the standby first: the tool opens the primary, as the
    // services' providers do (`PgLockProvider::connect_to_primary`).
    let both = multi_host(&standby, &primary);
    let out = doctor(&both).expect(0).stdout();
    assert!(
        out.contains("this server is a primary with 1 streaming standby"),
        "{both}: {out}"
    );
}

/// `first`'s URL with `second`'s host and port after its own: `postgres://u@h1:p1,h2:p2/db`.
fn multi_host(first: &str, second: &str) -> String {
    let host = |url: &str| {
        let rest = url.split_once("://").unwrap().1;
        let authority = &rest[..rest.find(['/', '?']).unwrap_or(rest.len())];
        authority
            .rsplit_once('@')
            .map_or(authority, |(_, host)| host)
            .to_owned()
    };
    let first_host = host(first);
    first.replacen(&first_host, &format!("{first_host},{}", host(second)), 1)
}
