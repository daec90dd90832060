//! The board on the one server (or Sentinel master, or cluster) of a [`RedisLockProvider`].

use std::time::Duration;

use shedlock_core::{
    Board, BoardCondition, BoardEntry, Error, Operation, async_trait, validate_board_entry,
};

use crate::RedisLockProvider;
use crate::error::store_error;

#[async_trait]
impl Board for RedisLockProvider {
    async fn board_read(&self, prefix: &str) -> Result<Vec<BoardEntry>, Error> {
        self.node
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
        self.node
            .board_write(&self.settings.board, key, value, condition, ttl)
            .await
            .map_err(|e| store_error(Operation::Jobs, key, e))
    }

    async fn board_remove(&self, key: &str, condition: BoardCondition) -> Result<bool, Error> {
        self.node
            .board_remove(&self.settings.board, key, condition)
            .await
            .map_err(|e| store_error(Operation::Jobs, key, e))
    }
}
