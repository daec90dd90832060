//! The fleet's board on a SQL provider: the harness `fleet_tests!` runs on, a board table of
//! its own for every `board()`.

use std::sync::Arc;
use std::time::Duration;

use shedlock_conformance::Harness;
use shedlock_conformance::fleet::FleetHarness;
use shedlock_core::{Board, LockProvider};
use shedlock_sqlx::SqlLockProvider;
use shedlock_sqlx::dialect::Dialect;

use super::scenarios::ProviderExt as _;
use super::unique_table;

/// `provider`'s database, its providers, and boards on new tables beside its lock table.
pub(crate) struct BoardHarness<D: Dialect> {
    provider: SqlLockProvider<D>,
}

impl<D: Dialect> BoardHarness<D> {
    pub(crate) fn new(provider: SqlLockProvider<D>) -> Self {
        BoardHarness { provider }
    }
}

#[shedlock_core::async_trait]
impl<D: Dialect> Harness for BoardHarness<D> {
    async fn provider(&self, holder: &str) -> Arc<dyn LockProvider> {
        Arc::new(self.provider.clone_as(holder))
    }

    async fn pass_time(&self, duration: Duration) {
        tokio::time::sleep(duration).await;
    }
}

#[shedlock_core::async_trait]
impl<D: Dialect> FleetHarness for BoardHarness<D> {
    async fn board(&self) -> Arc<dyn Board> {
        let provider = SqlLockProvider::<D>::builder(self.provider.pool().clone())
            .table(self.provider.table())
            .runs_table(self.provider.runs_table())
            .board_table(unique_table("shedlock_board"))
            .holder("fleet")
            .build()
            .expect("valid configuration");
        provider.create_schema().await.expect("create schema");
        Arc::new(provider)
    }
}

/// Keys are bytes: the longest key in 3-byte characters fits, case and trailing spaces tell
/// keys apart, and `%` and `_` in a prefix match only themselves.
pub(crate) async fn board_keys_are_bytes<D: Dialect>(h: &BoardHarness<D>) {
    use shedlock_core::{BoardCondition, MAX_BOARD_KEY_LEN};
    let board = h.board().await;
    let longest = format!(
        "w/{}",
        "€".repeat((MAX_BOARD_KEY_LEN - 2) / 3) + &"x".repeat((MAX_BOARD_KEY_LEN - 2) % 3)
    );
    assert_eq!(longest.len(), MAX_BOARD_KEY_LEN);
    let keys = [
        longest.as_str(),
        "w/K",
        "w/k",
        "w/k ",
        "w/a_",
        "w/ab",
        "w/a%",
        "w/ax",
        "w/é",
    ];
    for key in keys {
        board
            .board_write(key, key, BoardCondition::Absent, None)
            .await
            .expect("write")
            .unwrap_or_else(|| panic!("{key:?} is a key of its own"));
    }
    let read = |prefix: &'static str| {
        let board = Arc::clone(&board);
        async move {
            let entries = board.board_read(prefix).await.expect("read");
            for entry in &entries {
                assert_eq!(entry.key, entry.value);
            }
            entries.into_iter().map(|e| e.key).collect::<Vec<_>>()
        }
    };
    let mut sorted: Vec<&str> = keys.to_vec();
    sorted.sort_unstable();
    assert_eq!(read("w/").await, sorted, "byte order");
    assert_eq!(read("w/a_").await, ["w/a_"]);
    assert_eq!(read("w/a%").await, ["w/a%"]);
    assert_eq!(read("w/k").await, ["w/k", "w/k "]);
    assert_eq!(read("w/€").await, [longest.as_str()]);
}

/// A key removed and written again gets a larger version than any it had, also when it held
/// the largest version of the table and the table is left empty in between.
pub(crate) async fn versions_grow_across_removal<D: Dialect>(h: &BoardHarness<D>) {
    use shedlock_core::BoardCondition;
    let board = h.board().await;
    let mut last = 0;
    for round in 0..3 {
        let version = board
            .board_write("only", "v", BoardCondition::Absent, None)
            .await
            .expect("write")
            .expect("absent");
        assert!(version > last, "round {round}: {version} after {last}");
        let again = board
            .board_write("only", "w", BoardCondition::Always, None)
            .await
            .expect("write")
            .expect("always");
        assert!(again > version, "round {round}: {again} after {version}");
        assert!(
            board
                .board_remove("only", BoardCondition::Version(again))
                .await
                .expect("remove")
        );
        assert!(board.board_read("").await.expect("read").is_empty());
        last = again;
    }
}
