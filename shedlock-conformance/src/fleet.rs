//! The fleet's board ([`Board`]) every store of this workspace keeps beside its locks, and the
//! [`Fleet`] on it: what a store's tests add to [`Harness`] ([`FleetHarness`]) and call with
//! [`fleet_tests!`](crate::fleet_tests).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::future::join_all;

use super::Harness;
use shedlock_core::{
    Board, BoardCondition, Error, Fleet, JobDefinition, MAX_BOARD_KEY_LEN, MAX_BOARD_VALUE_LEN,
};

/// A [`Harness`] whose store also keeps a board.
#[async_trait]
pub trait FleetHarness: Harness {
    /// A board of its own on the harness's store: a namespace (table, key prefix, path) no
    /// other call and no other test uses, on the store's clock as [`Harness::pass_time`] moves
    /// it.
    async fn board(&self) -> Arc<dyn Board>;
}

async fn keys(board: &Arc<dyn Board>, prefix: &str) -> Vec<String> {
    board
        .board_read(prefix)
        .await
        .expect("read")
        .into_iter()
        .map(|entry| entry.key)
        .collect()
}

/// A write happens only under its condition, decided by the store: absent, the version read,
/// or always; each write makes a larger version; a failed condition writes nothing.
pub async fn board_writes_only_under_their_condition<H: FleetHarness>(h: &H) {
    let board = h.board().await;
    let write = |value: &'static str, condition| {
        let board = Arc::clone(&board);
        async move {
            board
                .board_write("k/a", value, condition, None)
                .await
                .expect("write")
        }
    };
    let first = write("one", BoardCondition::Absent).await.expect("absent");
    assert_eq!(write("two", BoardCondition::Absent).await, None, "present");
    assert_eq!(
        write("two", BoardCondition::Version(first + 1)).await,
        None,
        "not that version"
    );
    let second = write("two", BoardCondition::Version(first))
        .await
        .expect("the version read");
    assert!(second > first, "versions grow: {first} then {second}");
    assert_eq!(write("late", BoardCondition::Version(first)).await, None);
    let third = write("three", BoardCondition::Always)
        .await
        .expect("always");
    assert!(third > second);
    let read = board.board_read("k/").await.expect("read");
    assert_eq!(read.len(), 1);
    assert_eq!((read[0].value.as_str(), read[0].version), ("three", third));
    assert_eq!(read[0].expires_at, None, "kept until removed");

    // Many writers with the version they all read: exactly one wins.
    let wins = join_all((0..8).map(|_| write("race", BoardCondition::Version(third)))).await;
    assert_eq!(wins.iter().flatten().count(), 1, "{wins:?}");
}

/// A read returns the live entries under a prefix in key order, values exactly as written
/// (any text up to the limit), and nothing of a key that merely starts alike.
pub async fn board_reads_a_prefix_in_key_order<H: FleetHarness>(h: &H) {
    let board = h.board().await;
    let long = "é\"\\\n{}".repeat(MAX_BOARD_VALUE_LEN / 7);
    let values = [
        ("p/b", "plain"),
        ("p/a%2Fb", "{\"json\": [1, 2]}"),
        ("p/c d", long.as_str()),
        ("p/", "the prefix itself"),
        ("px/a", "another prefix"),
        ("p", "shorter"),
    ];
    for (key, value) in values {
        board
            .board_write(key, value, BoardCondition::Always, None)
            .await
            .expect("write");
    }
    let read = board.board_read("p/").await.expect("read");
    let read: Vec<_> = read
        .iter()
        .map(|entry| (entry.key.as_str(), entry.value.as_str()))
        .collect();
    assert_eq!(
        read,
        [
            ("p/", "the prefix itself"),
            ("p/a%2Fb", "{\"json\": [1, 2]}"),
            ("p/b", "plain"),
            ("p/c d", long.as_str()),
        ]
    );
    assert_eq!(keys(&board, "q").await, Vec::<String>::new());

    let too_long = "k".repeat(MAX_BOARD_KEY_LEN + 1);
    let refused = board
        .board_write(&too_long, "v", BoardCondition::Always, None)
        .await;
    assert!(
        matches!(refused, Err(Error::InvalidConfig { field: "key", .. })),
        "{refused:?}"
    );
    let too_big = "v".repeat(MAX_BOARD_VALUE_LEN + 1);
    let refused = board
        .board_write("p/big", &too_big, BoardCondition::Always, None)
        .await;
    assert!(
        matches!(refused, Err(Error::InvalidConfig { field: "value", .. })),
        "{refused:?}"
    );
}

/// An entry written with a time to live is live until then on the store's clock, and after it
/// is neither read nor in the way of a write that wants the key absent.
pub async fn board_entries_expire_on_the_store_clock<H: FleetHarness>(h: &H) {
    let board = h.board().await;
    let ttl = h.short_lease();
    let version = board
        .board_write("e/beat", "{}", BoardCondition::Absent, Some(ttl))
        .await
        .expect("write")
        .expect("absent");
    board
        .board_write("e/kept", "{}", BoardCondition::Always, None)
        .await
        .expect("write");
    let read = board.board_read("e/").await.expect("read");
    let beat = read
        .iter()
        .find(|entry| entry.key == "e/beat")
        .expect("live");
    let expires_at = beat.expires_at.expect("expires");
    let lived = expires_at
        .duration_since(beat.written_at)
        .expect("expires after it was written");
    assert!(
        lived + Duration::from_millis(2) >= ttl && lived <= ttl + Duration::from_secs(1),
        "lives {lived:?} for a ttl of {ttl:?}"
    );

    h.pass_time(ttl + Duration::from_millis(300)).await;
    assert_eq!(keys(&board, "e/").await, ["e/kept"]);
    assert!(
        !board
            .board_remove("e/beat", BoardCondition::Always)
            .await
            .expect("remove"),
        "nothing live to remove"
    );
    let again = board
        .board_write("e/beat", "{}", BoardCondition::Absent, Some(ttl))
        .await
        .expect("write")
        .expect("expired counts as absent");
    assert!(again > version, "{again} after {version}");
}

/// A removal happens only under its condition.
pub async fn board_removes_only_under_their_condition<H: FleetHarness>(h: &H) {
    let board = h.board().await;
    let version = board
        .board_write("r/a", "x", BoardCondition::Always, None)
        .await
        .expect("write")
        .expect("written");
    let remove = |condition| {
        let board = Arc::clone(&board);
        async move { board.board_remove("r/a", condition).await.expect("remove") }
    };
    assert!(!remove(BoardCondition::Absent).await);
    assert!(!remove(BoardCondition::Version(version + 1)).await);
    assert_eq!(keys(&board, "r/").await, ["r/a"]);
    assert!(remove(BoardCondition::Version(version)).await);
    assert_eq!(keys(&board, "r/").await, Vec::<String>::new());
    assert!(!remove(BoardCondition::Always).await, "already gone");
}

fn report(schedule: &str) -> JobDefinition {
    JobDefinition::new("report/daily", schedule)
        .with_zone("Europe/Paris")
        .with_lock("report", Duration::from_secs(600), Duration::from_secs(1))
        .with_policy("skip if running")
}

/// Instances publish the jobs they carry; the fleet lists each job with its live carriers and
/// their definitions (differences shown), forgets an instance that withdrew or stopped
/// beating, and a sweep removes what the dead published.
pub async fn the_fleet_lists_what_its_instances_publish<H: FleetHarness>(h: &H) {
    let fleet = Fleet::new(h.board().await);
    let alive = Duration::from_secs(60);
    let cleanup = JobDefinition::new("cleanup", "every 10s");
    fleet
        .publish("web/1", &[report("0 0 6 * * *"), cleanup.clone()], alive)
        .await
        .expect("publish");
    fleet
        .publish("web/2", &[report("0 0 7 * * *")], alive)
        .await
        .expect("publish");
    let jobs = fleet.jobs().await.expect("jobs");
    let names: Vec<_> = jobs.iter().map(|job| job.name.as_str()).collect();
    assert_eq!(names, ["cleanup", "report/daily"]);
    let daily = &jobs[1];
    let carriers: Vec<_> = daily.carriers.iter().map(|c| c.instance.as_str()).collect();
    assert_eq!(carriers, ["web/1", "web/2"]);
    assert_eq!(daily.carriers[0].definition, report("0 0 6 * * *"));
    assert!(daily.definitions_differ(), "a rolling deploy shows");
    assert!(daily.carriers[0].alive_until > daily.carriers[0].seen_at);

    // Publishing again replaces: the job web/1 no longer carries goes.
    fleet
        .publish("web/1", &[report("0 0 7 * * *")], alive)
        .await
        .expect("publish");
    let jobs = fleet.jobs().await.expect("jobs");
    assert_eq!(jobs.len(), 1);
    assert!(!jobs[0].definitions_differ(), "deploy done");

    fleet.withdraw("web/2").await.expect("withdraw");
    let jobs = fleet.jobs().await.expect("jobs");
    let carriers: Vec<_> = jobs[0]
        .carriers
        .iter()
        .map(|c| c.instance.as_str())
        .collect();
    assert_eq!(carriers, ["web/1"]);

    // An instance that stops beating is forgotten once its heartbeat runs out.
    fleet
        .publish("worker", &[cleanup], h.short_lease())
        .await
        .expect("publish");
    assert_eq!(fleet.jobs().await.expect("jobs").len(), 2);
    h.pass_time(h.short_lease() + Duration::from_millis(300))
        .await;
    let jobs = fleet.jobs().await.expect("jobs");
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert_eq!(fleet.sweep().await.expect("sweep"), 1);
    assert_eq!(fleet.sweep().await.expect("sweep"), 0);
    assert_eq!(
        fleet
            .job("report/daily")
            .await
            .expect("job")
            .map(|j| j.carriers.len()),
        Some(1)
    );
}

/// Hundreds of restarts and a thousand jobs: instances that died without withdrawing leave
/// nothing behind once swept, an unchanged publication writes nothing, and the listing holds
/// every job with every live carrier.
pub async fn the_fleet_stays_whole_at_volume<H: FleetHarness>(h: &H) {
    let board = h.board().await;
    let fleet = Fleet::new(Arc::clone(&board));
    let jobs: Vec<_> = (0..1_000)
        .map(|i| JobDefinition::new(format!("tenant-{i:04}"), format!("0 {} * * * *", i % 60)))
        .collect();
    let alive = Duration::from_secs(60);
    for instance in ["a", "b", "c"] {
        fleet
            .publish(instance, &jobs, alive)
            .await
            .expect("publish");
    }
    let before = board.board_read("carried/").await.expect("read");
    fleet.publish("a", &jobs, alive).await.expect("again");
    let after = board.board_read("carried/").await.expect("read");
    assert_eq!(
        before, after,
        "an unchanged publication writes no definition"
    );

    // 200 restarts: instances that carried a few jobs and died.
    for restart in 0..200 {
        fleet
            .publish(&format!("dead-{restart}"), &jobs[..5], h.short_lease())
            .await
            .expect("publish");
    }
    h.pass_time(h.short_lease() + Duration::from_millis(300))
        .await;
    let listed = fleet.jobs().await.expect("jobs");
    assert_eq!(listed.len(), 1_000);
    assert!(listed.iter().all(|job| job.carriers.len() == 3));
    assert_eq!(fleet.sweep().await.expect("sweep"), 1_000);
    assert_eq!(
        board.board_read("carried/").await.expect("read").len(),
        3_000
    );
}

/// A pause is kept, with who set it and when (store clock), until resumed; pausing again keeps
/// the first; pausing works for a job no live instance carries (all of them restarting).
pub async fn a_pause_is_kept_until_resumed<H: FleetHarness>(h: &H) {
    let fleet = Fleet::new(h.board().await);
    fleet
        .publish("web-1", &[report("0 0 6 * * *")], Duration::from_secs(60))
        .await
        .expect("publish");
    let paused = fleet.pause("report/daily", "alice").await.expect("pause");
    assert_eq!(paused.by, "alice");
    let again = fleet.pause("report/daily", "bob").await.expect("pause");
    assert_eq!(again, paused, "the first pause stays");
    fleet.pause("nightly", "alice").await.expect("not carried");
    let switches = fleet.switches().await.expect("switches");
    let names: Vec<_> = switches.paused.keys().map(String::as_str).collect();
    assert_eq!(names, ["nightly", "report/daily"]);
    let jobs = fleet.jobs().await.expect("jobs");
    assert!(jobs.iter().all(|job| job.paused.is_some()), "{jobs:?}");
    assert!(fleet.resume("report/daily").await.expect("resume"));
    assert!(!fleet.resume("report/daily").await.expect("resume"), "once");
    let switches = fleet.switches().await.expect("switches");
    assert_eq!(switches.paused.keys().collect::<Vec<_>>(), ["nightly"]);
    let empty = fleet.pause("", "alice").await;
    assert!(
        matches!(empty, Err(Error::InvalidConfig { field: "job", .. })),
        "{empty:?}"
    );
}

/// "Run now" from operators asking at once is one request, taken by exactly one of the
/// instances trying at once; asked again after it was taken, it is a new request.
pub async fn a_run_asked_for_is_taken_once<H: FleetHarness>(h: &H) {
    let fleet = Fleet::new(h.board().await);
    let asked = join_all((0..8).map(|i| {
        let fleet = fleet.clone();
        async move { fleet.run_now("report", &format!("operator-{i}")).await }
    }))
    .await;
    let asked: Vec<_> = asked.into_iter().map(|r| r.expect("run_now")).collect();
    let first = asked[0].clone();
    assert!(
        asked.iter().all(|request| request.id == first.id),
        "{asked:?}"
    );
    assert_eq!(first.taken_by, None);
    let polled = fleet.switches().await.expect("switches");
    assert_eq!(polled.runs.get("report"), Some(&first));

    let taken = join_all((0..8).map(|i| {
        let (fleet, request) = (fleet.clone(), first.clone());
        async move { fleet.take_run(&request, &format!("web-{i}")).await }
    }))
    .await;
    let winners: Vec<_> = taken
        .iter()
        .enumerate()
        .filter(|(_, taken)| *taken.as_ref().expect("take"))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(winners.len(), 1, "{taken:?}");
    let polled = fleet.switches().await.expect("switches");
    let seen = polled.runs.get("report").expect("kept");
    assert_eq!(seen.id, first.id);
    assert_eq!(seen.taken_by, Some(format!("web-{}", winners[0])));
    assert_eq!(seen.at, first.at, "asked at, kept");
    assert!(!fleet.take_run(seen, "web-9").await.expect("take"));

    let next = fleet.run_now("report", "carol").await.expect("run_now");
    assert_ne!(next.id, first.id, "a new request");
    assert!(
        !fleet.take_run(&first, "web-9").await.expect("take"),
        "stale"
    );
    assert!(fleet.take_run(&next, "web-9").await.expect("take"));
}

/// Generates one `#[tokio::test]` per board and fleet case for a [`FleetHarness`]; a harness
/// expression evaluating to `None` skips, as for [`conformance_tests!`](crate::conformance_tests).
#[macro_export]
macro_rules! fleet_tests {
    ($harness:expr) => {
        $crate::__conformance_cases!(($harness) $crate::fleet:
            board_writes_only_under_their_condition,
            board_reads_a_prefix_in_key_order,
            board_entries_expire_on_the_store_clock,
            board_removes_only_under_their_condition,
            the_fleet_lists_what_its_instances_publish,
            the_fleet_stays_whole_at_volume,
            a_pause_is_kept_until_resumed,
            a_run_asked_for_is_taken_once,
        );
    };
}
