//! `RedisLockProvider` on a Redis Cluster (`redis+cluster://`): the conformance suite on the
//! cluster `.ci/redis.sh` starts (`SHEDLOCK_TEST_REDIS_CLUSTER_URL`) with the run-log suite,
//! the key layout and batches across slots; a master's failover on a cluster of the test's
//! own. Skipped without it, failed without it when `CI=true`.

mod common;

conformance_suites!(cluster);

/// The run-log suite on the cluster: a lock's records in its slot, every lock's runs read from
/// each lock's and merged.
mod runs {
    use std::sync::Arc;

    use shedlock_conformance::ServerHarness;

    use crate::common;

    async fn harness() -> Option<ServerHarness> {
        let provider = common::cluster("a").await?;
        let (holders, keeping) = (provider.clone(), provider.clone());
        Some(
            ServerHarness::new(move |holder| Arc::new(holders.with_holder(holder).unwrap()))
                .with_run_log(provider)
                .with_run_log_keeping(move |retention, runs_per_lock| {
                    Arc::new(
                        keeping
                            .with_run_retention(retention, runs_per_lock)
                            .unwrap(),
                    )
                }),
        )
    }

    shedlock_conformance::runs_tests!(harness());
}

mod specifics {
    use std::time::Duration;

    use shedlock_core::{LockConfiguration, LockInspector, LockProvider, LockQuery};

    use crate::common;

    /// A lock's hash carries its name as hash tag; a batch of locks on many slots (so on
    /// every master) is granted lock by lock and listed back.
    #[tokio::test]
    async fn batches_span_the_slots() {
        let Some(provider) = common::cluster("batch").await else {
            return;
        };
        assert_eq!(
            provider.key("nightly"),
            format!("{}{{nightly}}", provider.key_prefix())
        );
        let configs: Vec<LockConfiguration> = (0..60)
            .map(|i| {
                LockConfiguration::new(format!("job-{i}"), Duration::from_secs(30), Duration::ZERO)
                    .unwrap()
            })
            .collect();
        let answers = provider.acquire_many(&configs).await;
        let leases: Vec<_> = answers
            .into_iter()
            .map(|answer| answer.unwrap().expect("granted"))
            .collect();
        for (lease, config) in leases.iter().zip(&configs) {
            assert_eq!(lease.name(), config.name());
        }
        let other = provider.with_holder("other").unwrap();
        assert!(
            other
                .acquire_many(&configs)
                .await
                .into_iter()
                .all(|answer| answer.unwrap().is_none()),
            "a held lock granted again"
        );
        let listed = provider.list_locks(&LockQuery::all()).await.unwrap();
        assert_eq!(listed.len(), 60, "{listed:?}");
        assert!(listed.iter().all(|record| record.held));
        for lease in &leases {
            assert!(provider.release(lease).await.unwrap());
        }
    }
}

mod hints {
    use std::time::Duration;

    use shedlock_core::{LockConfiguration, LockProvider};

    use crate::common;

    /// A release on any master reaches a subscriber on one node (cluster pub/sub is
    /// broadcast): each of several locks, on several slots, wakes the subscriber.
    #[tokio::test]
    async fn release_hints_cross_the_cluster() {
        let Some(provider) = common::cluster("hints").await else {
            return;
        };
        let mut hints = provider.release_hints().expect("hints are on by default");
        for name in ["alpha", "bravo", "charlie", "delta"] {
            let lock =
                LockConfiguration::new(name, Duration::from_secs(30), Duration::ZERO).unwrap();
            // The subscription is set up in the background: release until a hint arrives.
            let hint = tokio::time::timeout(Duration::from_secs(10), async {
                loop {
                    let lease = provider.acquire(&lock).await.unwrap().unwrap();
                    assert!(provider.release(&lease).await.unwrap());
                    if let Ok(Ok(hint)) =
                        tokio::time::timeout(Duration::from_millis(100), hints.recv()).await
                    {
                        return hint;
                    }
                }
            })
            .await
            .expect("a release hint arrives");
            assert_eq!(&*hint, name);
            while hints.try_recv().is_ok() {}
        }
    }
}

mod failover {
    use std::path::PathBuf;
    use std::process::{Command, Stdio};

    use shedlock_conformance::{unique_key_prefix, unique_lock_name};
    use shedlock_test_support::redis_installed;

    use crate::common::failover::{
        Server, Topology, admin, answering, data_server, master_killed_under_two_fleets, until,
    };

    /// Three masters with a replica each, and a second replica of the first master (so that
    /// the master promoted in its place has a replica to wait for): nodes time out after 1 s.
    struct ClusterSet {
        nodes: Vec<Server>,
        /// The index in `nodes` of the master the test kills, and its slot ranges.
        master: usize,
        ranges: Vec<(u16, u16)>,
        replicas: Vec<u16>,
        dir: PathBuf,
    }

    impl Drop for ClusterSet {
        fn drop(&mut self) {
            self.nodes.iter_mut().for_each(Server::kill);
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    /// `CLUSTER SLOTS` as `(first slot, last slot, master port, replica ports)`.
    async fn slots(port: u16) -> Vec<(u16, u16, u16, Vec<u16>)> {
        let mut connection = admin(port).await;
        let reply: Vec<redis::Value> = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query_async(&mut connection)
            .await
            .unwrap_or_default();
        reply
            .into_iter()
            .filter_map(|range| {
                let redis::Value::Array(items) = range else {
                    return None;
                };
                let number = |value: &redis::Value| redis::from_redis_value_ref::<u16>(value).ok();
                let port_of = |value: &redis::Value| match value {
                    redis::Value::Array(node) => node.get(1).and_then(number),
                    _ => None,
                };
                Some((
                    number(items.first()?)?,
                    number(items.get(1)?)?,
                    port_of(items.get(2)?)?,
                    items[3..].iter().filter_map(port_of).collect(),
                ))
            })
            .collect()
    }

    async fn cluster_ok(port: u16) -> bool {
        let mut connection = admin(port).await;
        let info: String = redis::cmd("CLUSTER")
            .arg("INFO")
            .query_async(&mut connection)
            .await
            .unwrap_or_default();
        info.lines().any(|line| line.trim() == "cluster_state:ok")
    }

    impl ClusterSet {
        async fn start() -> Option<ClusterSet> {
            if !redis_installed() {
                return None;
            }
            let dir = std::env::temp_dir().join(unique_key_prefix("cluster").trim_end_matches(':'));
            std::fs::create_dir_all(&dir).expect("a temporary directory");
            let mut nodes = Vec::new();
            for _ in 0..7 {
                let config = format!("nodes-{}.conf", nodes.len());
                let args = [
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    &config,
                    "--cluster-node-timeout",
                    "1000",
                ]
                .map(str::to_owned);
                let node = data_server(&dir, &args);
                answering(node.port).await;
                nodes.push(node);
            }
            let addresses: Vec<String> = nodes[..6]
                .iter()
                .map(|node| format!("127.0.0.1:{}", node.port))
                .collect();
            let created = Command::new("redis-cli")
                .args(["--cluster", "create"])
                .args(&addresses)
                .args(["--cluster-replicas", "1", "--cluster-yes"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .expect("redis-cli");
            assert!(created.success(), "redis-cli --cluster create failed");
            let first = nodes[0].port;
            until("the cluster serves every slot", || cluster_ok(first)).await;
            // The master of slot 0 is the one killed; the seventh node becomes its second replica.
            let layout = slots(first).await;
            let killed_port = layout
                .iter()
                .find(|(start, ..)| *start == 0)
                .map(|&(_, _, master, _)| master)
                .expect("slot 0 served");
            let mut killed = admin(killed_port).await;
            let id: String = redis::cmd("CLUSTER")
                .arg("MYID")
                .query_async(&mut killed)
                .await
                .unwrap();
            let mut seventh = admin(nodes[6].port).await;
            let () = redis::cmd("CLUSTER")
                .arg("MEET")
                .arg("127.0.0.1")
                .arg(killed_port)
                .query_async(&mut seventh)
                .await
                .unwrap();
            until("the seventh node replicates the master", || async {
                let mut seventh = admin(nodes[6].port).await;
                let replicated: Result<(), _> = redis::cmd("CLUSTER")
                    .arg("REPLICATE")
                    .arg(&id)
                    .query_async(&mut seventh)
                    .await;
                replicated.is_ok()
            })
            .await;
            until("the master has two replicas", || async {
                slots(first)
                    .await
                    .iter()
                    .any(|(start, _, master, replicas)| {
                        *start == 0 && *master == killed_port && replicas.len() == 2
                    })
            })
            .await;
            let layout = slots(first).await;
            let ranges = layout
                .iter()
                .filter(|(_, _, master, _)| *master == killed_port)
                .map(|&(start, end, ..)| (start, end))
                .collect();
            let replicas = layout
                .iter()
                .find(|(start, ..)| *start == 0)
                .map(|(.., replicas)| replicas.clone())
                .unwrap();
            let master = nodes
                .iter()
                .position(|node| node.port == killed_port)
                .unwrap();
            Some(ClusterSet {
                nodes,
                master,
                ranges,
                replicas,
                dir,
            })
        }

        /// A fresh lock name whose key lies in a slot of the master to kill.
        async fn lock_on_master(&self, base: &str) -> String {
            let survivor = self.survivor();
            let mut connection = admin(survivor).await;
            loop {
                let name = unique_lock_name(base);
                let slot: u16 = redis::cmd("CLUSTER")
                    .arg("KEYSLOT")
                    .arg(&name)
                    .query_async(&mut connection)
                    .await
                    .unwrap();
                if self
                    .ranges
                    .iter()
                    .any(|&(start, end)| (start..=end).contains(&slot))
                {
                    return name;
                }
            }
        }

        /// A node that is not the master killed.
        fn survivor(&self) -> u16 {
            self.nodes
                .iter()
                .enumerate()
                .find(|&(index, _)| index != self.master)
                .map(|(_, node)| node.port)
                .unwrap()
        }
    }

    impl Topology for ClusterSet {
        fn url(&self) -> String {
            let hosts: Vec<String> = self.nodes[..3]
                .iter()
                .map(|node| format!("127.0.0.1:{}", node.port))
                .collect();
            format!("redis+cluster://{}", hosts.join(","))
        }

        fn master(&mut self) -> &mut Server {
            &mut self.nodes[self.master]
        }

        fn replica_ports(&self) -> Vec<u16> {
            self.replicas.clone()
        }

        async fn promoted(&self) -> bool {
            let survivor = self.survivor();
            cluster_ok(survivor).await
                && slots(survivor)
                    .await
                    .iter()
                    .any(|(start, _, master, _)| *start == 0 && self.replicas.contains(master))
        }
    }

    /// Issue 33 on a Redis Cluster: a master is killed and the cluster promotes its replica;
    /// see [`master_killed_under_two_fleets`] for what is counted and asserted. Every lock of
    /// the scenario lies in a slot of that master.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn fleets_go_on_after_a_master_is_killed() {
        let Some(mut set) = ClusterSet::start().await else {
            return;
        };
        let locks = [
            set.lock_on_master("every-second").await,
            set.lock_on_master("every-second").await,
            set.lock_on_master("witness").await,
            set.lock_on_master("witness").await,
        ];
        master_killed_under_two_fleets(&mut set, locks).await;
    }
}
