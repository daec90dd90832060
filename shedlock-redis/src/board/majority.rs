//! The board of a [`RedLockProvider`]: on one of its masters, the board master.
//!
//! A majority does not make the board's compare-and-set sound. Each master would decide a
//! condition on its own copy: two writers with the version they both read can win one master
//! each, the third master sides with one, and the loser's write stays on the master it won,
//! where no later read can tell it from the truth without a master-by-master repair (what a
//! consensus protocol does, and RedLock is none). Versions from each master's counter also
//! differ between masters, so `BoardCondition::Version` would compare numbers no two masters
//! share. RedLock's masters keep leases, which expire and need no such agreement; the board
//! keeps operator switches and job listings, which must be decided once.
//!
//! So the whole board lives on one master, chosen the same way by every instance that names
//! the same masters: the one whose address (`redis://host:port/db`) sorts first. Its
//! conditions are decided there, atomically, as on one server. While that master is down,
//! board operations fail (`Error::Store`, naming it) and the locks go on on the others; a
//! restart of it without persistence loses the board (switches and run-now requests; the
//! instances publish their jobs again at their next beat).

use std::time::Duration;

use shedlock_core::{
    Board, BoardCondition, BoardEntry, Error, Operation, async_trait, validate_board_entry,
};

use crate::RedLockProvider;
use crate::error::store_error;
use crate::node::Node;

impl RedLockProvider {
    /// The master the board lives on: the one whose address sorts first.
    fn board_node(&self) -> &Node {
        self.nodes
            .iter()
            .min_by(|a, b| a.server().cmp(b.server()))
            .expect("a RedLock provider has masters")
    }

    /// The master the [board](Board) lives on, as `redis://host:port/db`: of the masters,
    /// the one whose address sorts first (every instance naming the same masters picks the
    /// same one, whatever their order).
    pub fn board_master(&self) -> &str {
        self.board_node().server()
    }
}

#[async_trait]
impl Board for RedLockProvider {
    async fn board_read(&self, prefix: &str) -> Result<Vec<BoardEntry>, Error> {
        self.board_node()
            .board_read(&self.settings.board, prefix)
            .await
            .map_err(|e| store_error(Operation::Jobs, prefix, e))
    }

    async fn board_write(
        &self,
        key: &str,
        value: &str,
        condition: BoardCondition,
        ttl: Option<Duration>,
    ) -> Result<Option<u64>, Error> {
        validate_board_entry(key, value)?;
        self.board_node()
            .board_write(&self.settings.board, key, value, condition, ttl)
            .await
            .map_err(|e| store_error(Operation::Jobs, key, e))
    }

    async fn board_remove(&self, key: &str, condition: BoardCondition) -> Result<bool, Error> {
        self.board_node()
            .board_remove(&self.settings.board, key, condition)
            .await
            .map_err(|e| store_error(Operation::Jobs, key, e))
    }
}
