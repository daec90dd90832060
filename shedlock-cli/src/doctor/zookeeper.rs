//! `doctor` on ZooKeeper: the ensemble reachable, the root's nodes there and usable with this
//! URL's credentials, the ensemble's clock, the locks.

use shedlock_zookeeper::ZkLockProvider;

use super::{clock, count_locks};
use crate::failure::{Exit, Failure};
use crate::target::Target;

/// Reaching the ensemble was checked when the provider connected. The clock is read by a
/// write to `<root>/clock`, so it checks the root's nodes and the session's rights on them.
pub(crate) async fn zookeeper(provider: &ZkLockProvider, target: &Target) -> Result<Exit, Failure> {
    out!("ok       ZooKeeper ensemble {} is reachable", target.shown);
    if let Err(failure) = clock(provider, "ZooKeeper").await {
        let message = failure.message;
        out!("problem  {message}");
        let fix = if message.contains("does not exist") {
            format!(
                "create them: `shedlock schema --apply --root {}` with the same URL",
                provider.root()
            )
        } else if message.contains("not authorized") {
            "give the URL the digest credentials of the user that created the nodes: \
             zookeeper://USER:PASSWORD@host:port,…"
                .to_owned()
        } else {
            "check that the ensemble has a quorum and the root is right (--root)".to_owned()
        };
        out!("fix      {fix}");
        return Ok(Exit::Problems);
    }
    out!(
        "ok       root `{}`: its clock node is writable with this URL's credentials",
        provider.root()
    );
    count_locks(provider).await?;
    Ok(Exit::Ok)
}
