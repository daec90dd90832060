//! Grants acknowledged by replicas
//! ([`wait_for_replicas`](crate::RedisLockProviderBuilder::wait_for_replicas)): the acquire
//! script and `WAIT` in one pipeline, and a grant not acknowledged in time released again.

use shedlock_core::LockConfiguration;

use crate::RedisLockProvider;
use crate::builder::WaitForReplicas;
use crate::error::{ServerError, ServerErrorKind};
use crate::node::{Claim, Node, acquire_arguments};
use crate::scripts::{ACQUIRE, AcquireReply};
use crate::time::millis;

impl Node {
    /// Runs the acquire script for `claims`, then `WAIT` on the same connection in the same
    /// pipeline (so no reconnection comes between them, after which `WAIT` would count the
    /// replicas of a connection that wrote nothing): the answers, and how many replicas
    /// acknowledged the script's writes (0 when the call failed).
    pub(crate) async fn acquire_acknowledged(
        &self,
        holder: &str,
        claims: &[Claim],
        wait: WaitForReplicas,
    ) -> (Vec<Result<AcquireReply, ServerError>>, u32) {
        if self.is_down() {
            let down = |claim: &Claim| Err(self.error(Some(&claim.key), ServerErrorKind::Down));
            return (claims.iter().map(down).collect(), 0);
        }
        let (keys, args) = acquire_arguments(holder, 0, claims);
        let mut pipeline = redis::pipe();
        pipeline
            .cmd("EVALSHA")
            .arg(ACQUIRE.get_hash())
            .arg(keys.len())
            .arg(&keys)
            .arg(&args)
            .cmd("WAIT")
            .arg(wait.replicas)
            .arg(millis(wait.timeout));
        let key = claims.first().map_or("", |claim| claim.key.as_str());
        let mut connection = self.waiting_connection();
        let mut reply = connection.pipeline_for_key(key, &pipeline).await;
        if reply.as_ref().is_err_and(|error| {
            error.code() == Some("NOSCRIPT") || error.to_string().contains("NOSCRIPT")
        }) {
            reply = match ACQUIRE.prepare_invoke().load_async(&mut connection).await {
                Ok(_) => connection.pipeline_for_key(key, &pipeline).await,
                Err(error) => Err(error),
            };
        }
        let reply = reply.and_then(|replies| {
            redis::from_redis_value::<(Vec<Vec<redis::Value>>, u32)>(redis::Value::Array(replies))
                .map_err(redis::RedisError::from)
        });
        match reply {
            Ok((replies, acknowledged)) => {
                (self.acquire_answers(claims, Ok(replies)), acknowledged)
            }
            Err(error) => (
                self.acquire_answers(claims, Err(self.failed(Some(key), error))),
                0,
            ),
        }
    }
}

impl RedisLockProvider {
    /// The acquire script's answers to `claims` (of `configs`), its grants acknowledged by
    /// the replicas asked for: when fewer acknowledged them in time, each grant is released
    /// and answered with an error saying so.
    pub(crate) async fn acquire_acknowledged(
        &self,
        configs: &[&LockConfiguration],
        claims: &[Claim],
        wait: WaitForReplicas,
    ) -> Vec<Result<AcquireReply, ServerError>> {
        let holder = &self.settings.holder;
        let (replies, acknowledged) = self.node.acquire_acknowledged(holder, claims, wait).await;
        if acknowledged >= wait.replicas {
            return replies;
        }
        let mut answers = Vec::with_capacity(replies.len());
        for ((reply, claim), config) in replies.into_iter().zip(claims).zip(configs) {
            let Ok(AcquireReply::Granted { token, .. }) = reply else {
                answers.push(reply);
                continue;
            };
            let channel = &self.settings.channel;
            let name = config.name();
            if let Err(error) = self
                .node
                .release(&claim.key, holder, token, 0, channel, name)
                .await
            {
                tracing::warn!(lock = name, %error, "could not release a grant no replica acknowledged");
            }
            let kind = ServerErrorKind::NotAcknowledged {
                replicas: wait.replicas,
                acknowledged,
                timeout: wait.timeout,
            };
            answers.push(Err(self.node.error(Some(&claim.key), kind)));
        }
        answers
    }
}
