//! Redis Cluster: a `redis+cluster://` URL read into redis-rs's cluster client, the key layout
//! that keeps a lock's keys in one hash slot, batches grouped by slot, and the keys under a
//! prefix read from every master.
//!
//! ```text
//! redis+cluster://[[user]:password@]host:port[,host:port…]   any nodes of the cluster
//! rediss+cluster://…                                          TLS to every node
//! ```
//!
//! On a cluster a lock's hash is `<key prefix>{<name>}`: the hash tag `{<name>}` puts every key
//! of one lock in one slot, whatever the prefix. One server and RedLock keep `<key
//! prefix><name>`.

use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo, Slot};
use redis::{FromRedisValue as _, IntoConnectionInfo};
use shedlock_core::Error;

use crate::error::ServerErrorKind;
use crate::node::Connect;

/// Whether `url` names a Redis Cluster (`redis+cluster://`, `rediss+cluster://`).
pub(crate) fn is_cluster_url(url: &str) -> bool {
    scheme(url).is_some()
}

/// Whether the URL asks for TLS, and what follows `://`; `None` when it is no cluster URL.
fn scheme(url: &str) -> Option<(bool, &str)> {
    let (scheme, rest) = url.trim().split_once("://")?;
    match scheme.to_ascii_lowercase().as_str() {
        "redis+cluster" => Some((false, rest)),
        "rediss+cluster" => Some((true, rest)),
        _ => None,
    }
}

fn invalid(message: impl Into<String>) -> Error {
    Error::invalid_config("url", message.into())
}

/// The cluster client of `url`, the URL as shown (without credentials), and the URL of each
/// node it names: `redis://` (`rediss://`), sharing the userinfo.
pub(crate) fn client(
    url: &str,
    settings: &Connect<'_>,
) -> Result<(ClusterClient, String, Vec<String>), Error> {
    let (tls, rest) = scheme(url).ok_or_else(|| invalid("not a redis+cluster:// URL"))?;
    if !tls && settings.tls_root_certificates.is_some() {
        return Err(Error::invalid_config(
            "tls_root_certificates",
            "given for a redis+cluster:// URL: use rediss+cluster:// for TLS",
        ));
    }
    if tls && !cfg!(feature = "tls") {
        return Err(invalid(
            "rediss+cluster:// needs the `tls` feature of shedlock-redis (on by default)",
        ));
    }
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => (format!("{userinfo}@"), hosts),
        None => (String::new(), authority),
    };
    let hosts: Vec<&str> = hosts.split(',').filter(|h| !h.is_empty()).collect();
    if hosts.is_empty() {
        return Err(invalid(
            "a cluster URL names some of its nodes: redis+cluster://host:port,host:port",
        ));
    }
    let node_scheme = if tls { "rediss" } else { "redis" };
    let mut nodes = Vec::with_capacity(hosts.len());
    let mut urls = Vec::with_capacity(hosts.len());
    for host in &hosts {
        let url = format!("{node_scheme}://{userinfo}{host}");
        let info = url
            .as_str()
            .into_connection_info()
            .map_err(|e| invalid(format!("cluster node `{host}` is not host:port ({e})")))?;
        nodes.push(info);
        urls.push(url);
    }
    let shown = format!("{node_scheme}+cluster://{}", hosts.join(","));
    let builder = ClusterClientBuilder::new(nodes)
        .connection_timeout(settings.timeout)
        .response_timeout(settings.timeout)
        .retries(3)
        .min_retry_wait(20)
        .max_retry_wait(200);
    #[cfg(feature = "tls")]
    let builder = match settings.tls_root_certificates {
        _ if !tls => builder,
        roots => {
            // rustls needs a crypto provider; ring unless the program installed another.
            let _ = rustls::crypto::ring::default_provider().install_default();
            match roots {
                Some(roots) => builder.certs(redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(roots.to_vec()),
                }),
                None => builder,
            }
        }
    };
    let client = builder
        .build()
        .map_err(|e| invalid(format!("cannot use {shown}: {e}")))?;
    Ok((client, shown, urls))
}

/// The key of lock `name` on a cluster: its hash tag is the name, so the lock's run records
/// (`…{<name>}`) share its slot.
pub(crate) fn lock_key(prefix: &str, name: &str) -> String {
    format!("{prefix}{{{name}}}")
}

/// The lock name of a cluster lock key under `prefix`.
pub(crate) fn lock_name<'a>(key: &'a str, prefix: &str) -> Option<&'a str> {
    key.strip_prefix(prefix)?
        .strip_prefix('{')?
        .strip_suffix('}')
}

/// The hash slot of `key`.
pub(crate) fn slot(key: &str) -> Slot {
    Slot::for_key(key)
}

/// The masters of the cluster, `(host, port)`, from `CLUSTER NODES` (those not failing).
pub(crate) async fn masters(
    connection: &mut redis::cluster_async::ClusterConnection,
) -> Result<Vec<(String, u16)>, ServerErrorKind> {
    let mut nodes = redis::cmd("CLUSTER");
    nodes.arg("NODES");
    let reply = connection
        .route_command(
            nodes,
            RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
        )
        .await
        .map_err(ServerErrorKind::Redis)?;
    let text = String::from_redis_value(reply).map_err(|e| ServerErrorKind::Redis(e.into()))?;
    Ok(text
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let address = fields.nth(1)?;
            let flags = fields.next()?;
            let is_master = flags.split(',').any(|flag| flag == "master");
            let failing = flags.split(',').any(|flag| flag.starts_with("fail"));
            let (host, port) = address.split('@').next()?.rsplit_once(':')?;
            let port = port.parse().ok()?;
            (is_master && !failing).then(|| (host.to_owned(), port))
        })
        .collect())
}

/// The cluster's shards from `CLUSTER SLOTS`: each master (`host:port`), its replicas and how
/// many slots it serves, in the order of their first slot.
pub(crate) async fn shards(
    connection: &mut redis::cluster_async::ClusterConnection,
) -> Result<Vec<(String, Vec<String>, u32)>, ServerErrorKind> {
    let mut slots = redis::cmd("CLUSTER");
    slots.arg("SLOTS");
    let reply = connection
        .route_command(
            slots,
            RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
        )
        .await
        .map_err(ServerErrorKind::Redis)?;
    let ranges: Vec<Vec<redis::Value>> =
        redis::from_redis_value(reply).map_err(|e| ServerErrorKind::Redis(e.into()))?;
    let address = |node: &redis::Value| -> Option<String> {
        let node: Vec<redis::Value> = redis::from_redis_value_ref(node).ok()?;
        let host: String = redis::from_redis_value_ref(node.first()?).ok()?;
        let port: u16 = redis::from_redis_value_ref(node.get(1)?).ok()?;
        Some(format!("{host}:{port}"))
    };
    let mut shards: Vec<(u16, String, Vec<String>, u32)> = Vec::new();
    for range in &ranges {
        let number = |i: usize| redis::from_redis_value_ref::<u16>(range.get(i)?).ok();
        let (Some(start), Some(end), Some(master)) =
            (number(0), number(1), range.get(2).and_then(address))
        else {
            continue;
        };
        let replicas: Vec<String> = range.iter().skip(3).filter_map(address).collect();
        let count = u32::from(end - start) + 1;
        match shards.iter_mut().find(|shard| shard.1 == master) {
            Some(shard) => {
                shard.0 = shard.0.min(start);
                shard.3 += count;
            }
            None => shards.push((start, master, replicas, count)),
        }
    }
    shards.sort_by_key(|shard| shard.0);
    Ok(shards
        .into_iter()
        .map(|(_, master, replicas, slots)| (master, replicas, slots))
        .collect())
}

/// Every key matching `pattern` on every master (`SCAN` on each).
pub(crate) async fn keys(
    connection: &mut redis::cluster_async::ClusterConnection,
    pattern: &str,
) -> Result<Vec<String>, ServerErrorKind> {
    let mut keys = Vec::new();
    for (host, port) in masters(connection).await? {
        let mut cursor = 0u64;
        loop {
            let scan = crate::node::scan_command(cursor, pattern);
            let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                host: host.clone(),
                port,
            });
            let reply = connection
                .route_command(scan, route)
                .await
                .map_err(ServerErrorKind::Redis)?;
            let (next, mut batch): (u64, Vec<String>) =
                redis::from_redis_value(reply).map_err(|e| ServerErrorKind::Redis(e.into()))?;
            keys.append(&mut batch);
            if next == 0 {
                break;
            }
            cursor = next;
        }
    }
    keys.sort();
    keys.dedup();
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_a_lock_share_its_slot() {
        let key = lock_key("shedlock:", "nightly");
        assert_eq!(key, "shedlock:{nightly}");
        assert_eq!(lock_name(&key, "shedlock:"), Some("nightly"));
        assert_eq!(slot(&key), slot("runs:shedlock:records:{nightly}"));
        assert_eq!(slot("{a}"), slot("a"));
        assert!(is_cluster_url("redis+cluster://h:7000,h:7001"));
        assert!(!is_cluster_url("redis://h:7000"));
    }
}
