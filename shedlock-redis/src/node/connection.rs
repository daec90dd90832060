//! The connection a node sends its commands on: one server's reconnecting multiplexed
//! connection, or redis-rs's cluster connection, which routes each command to the master of
//! its key's slot and follows the cluster's changes (`MOVED`, failovers) by itself.

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, SingleNodeRoutingInfo, SlotAddr};
use redis::{Cmd, Pipeline, RedisFuture, RedisResult, Value};

/// One server's connection, or a cluster's.
#[derive(Clone)]
pub(crate) enum Connection {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl Connection {
    /// Sends `pipeline` on one connection to the server of `key` (on a cluster: its slot's
    /// master), so that nothing comes between its commands there; its replies, or the first
    /// error a command was answered with.
    pub(crate) async fn pipeline_for_key(
        &mut self,
        key: &str,
        pipeline: &Pipeline,
    ) -> RedisResult<Vec<Value>> {
        match self {
            Connection::Single(connection) => pipeline.query_async(connection).await,
            Connection::Cluster(connection) => {
                let route = Route::with_key(key, SlotAddr::Master);
                let replies = connection
                    .route_pipeline(
                        pipeline.clone(),
                        0,
                        pipeline.len(),
                        SingleNodeRoutingInfo::SpecificNode(route),
                    )
                    .await?;
                match Value::Array(replies).extract_error()? {
                    Value::Array(replies) => Ok(replies),
                    _ => unreachable!("an array stays an array"),
                }
            }
        }
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Connection::Single(connection) => connection.req_packed_command(cmd),
            Connection::Cluster(connection) => connection.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Connection::Single(connection) => {
                connection.req_packed_commands(pipeline, offset, count)
            }
            Connection::Cluster(connection) => {
                connection.req_packed_commands(pipeline, offset, count)
            }
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Single(connection) => connection.get_db(),
            Connection::Cluster(connection) => connection.get_db(),
        }
    }
}
