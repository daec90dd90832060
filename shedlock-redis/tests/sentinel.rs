//! `RedisLockProvider` through Redis Sentinel (`redis+sentinel://`): the conformance suite on
//! the Sentinel set `.ci/redis.sh` starts (`SHEDLOCK_TEST_REDIS_SENTINEL_URLS`,
//! `SHEDLOCK_TEST_REDIS_SENTINEL_MASTER`), which it leaves as it found it; and a failover on a
//! set of the test's own (a master, two replicas, three sentinels on free ports), whose master
//! it kills. Skipped without them, failed without them when `CI=true`.

mod common;

conformance_suites!(sentinel);

mod failover {
    use std::path::PathBuf;

    use shedlock_conformance::{unique_key_prefix, unique_lock_name};
    use shedlock_test_support::redis_installed;

    use crate::common::failover::{
        Server, Topology, admin, answering, data_server, free_port, master_killed_under_two_fleets,
        redis_server, until,
    };

    /// The master's name the test's sentinels watch.
    const NAME: &str = "failover";

    /// A master, two replicas and three sentinels (quorum 2, master down after 1 s without
    /// an answer), all in memory, their files in a directory removed at the end.
    struct SentinelSet {
        master: Server,
        replicas: Vec<Server>,
        sentinels: Vec<Server>,
        dir: PathBuf,
    }

    impl Drop for SentinelSet {
        fn drop(&mut self) {
            self.master.kill();
            self.replicas.iter_mut().for_each(Server::kill);
            self.sentinels.iter_mut().for_each(Server::kill);
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    impl SentinelSet {
        /// Starts the set and waits until every sentinel knows both replicas and the other
        /// sentinels; `None` after a `skipped:` line when `redis-server` is not installed.
        async fn start() -> Option<SentinelSet> {
            if !redis_installed() {
                return None;
            }
            let dir =
                std::env::temp_dir().join(unique_key_prefix("sentinel").trim_end_matches(':'));
            std::fs::create_dir_all(&dir).expect("a temporary directory");
            let master = data_server(&dir, &[]);
            answering(master.port).await;
            let replica_of = [
                "--replicaof".to_owned(),
                "127.0.0.1".to_owned(),
                master.port.to_string(),
            ];
            let replicas: Vec<Server> = (0..2).map(|_| data_server(&dir, &replica_of)).collect();
            let mut sentinels = Vec::new();
            for _ in 0..3 {
                let port = free_port();
                let conf = dir.join(format!("sentinel-{port}.conf"));
                std::fs::write(
                    &conf,
                    format!(
                        "port {port}\nbind 127.0.0.1\ndir {}\n\
                         sentinel monitor {NAME} 127.0.0.1 {} 2\n\
                         sentinel down-after-milliseconds {NAME} 1000\n\
                         sentinel failover-timeout {NAME} 5000\n",
                        dir.display(),
                        master.port
                    ),
                )
                .unwrap();
                let child = redis_server(&[conf.display().to_string(), "--sentinel".into()]);
                sentinels.push(Server::new(port, child));
            }
            let set = SentinelSet {
                master,
                replicas,
                sentinels,
                dir,
            };
            for sentinel in &set.sentinels {
                answering(sentinel.port).await;
                until(
                    "a sentinel knows both replicas and the other sentinels",
                    || async {
                        let info = sentinel_master(sentinel.port).await;
                        field(&info, "num-slaves") >= 2 && field(&info, "num-other-sentinels") >= 2
                    },
                )
                .await;
            }
            Some(set)
        }

        /// The port of the master the first sentinel that answers names.
        async fn named_master(&self) -> Option<u16> {
            for sentinel in &self.sentinels {
                let mut connection = admin(sentinel.port).await;
                let reply: Result<(String, String), _> = redis::cmd("SENTINEL")
                    .arg("get-master-addr-by-name")
                    .arg(NAME)
                    .query_async(&mut connection)
                    .await;
                if let Ok((_, port)) = reply {
                    return port.parse().ok();
                }
            }
            None
        }
    }

    impl Topology for SentinelSet {
        fn url(&self) -> String {
            let hosts: Vec<String> = self
                .sentinels
                .iter()
                .map(|s| format!("127.0.0.1:{}", s.port))
                .collect();
            format!("redis+sentinel://{}/{NAME}", hosts.join(","))
        }

        fn master(&mut self) -> &mut Server {
            &mut self.master
        }

        fn replica_ports(&self) -> Vec<u16> {
            self.replicas.iter().map(|replica| replica.port).collect()
        }

        async fn promoted(&self) -> bool {
            let replicas = self.replica_ports();
            self.named_master()
                .await
                .is_some_and(|port| replicas.contains(&port))
        }
    }

    /// `SENTINEL MASTER <NAME>` as pairs, empty when it failed.
    async fn sentinel_master(port: u16) -> Vec<(String, String)> {
        let mut connection = admin(port).await;
        redis::cmd("SENTINEL")
            .arg("MASTER")
            .arg(NAME)
            .query_async(&mut connection)
            .await
            .unwrap_or_default()
    }

    fn field(info: &[(String, String)], name: &str) -> u64 {
        info.iter()
            .find(|(key, _)| key == name)
            .and_then(|(_, value)| value.parse().ok())
            .unwrap_or(0)
    }

    /// Issue 33 through Sentinel: the sentinels promote a replica of the master killed; see
    /// [`master_killed_under_two_fleets`] for what is counted and asserted.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn fleets_go_on_after_the_master_is_killed() {
        let Some(mut set) = SentinelSet::start().await else {
            return;
        };
        let locks = ["every-second", "every-second", "witness", "witness"].map(unique_lock_name);
        master_killed_under_two_fleets(&mut set, locks).await;
    }
}
