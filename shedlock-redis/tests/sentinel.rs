//! `RedisLockProvider` through Redis Sentinel (`redis+sentinel://`): the conformance suite on
//! the Sentinel set `.ci/redis.sh` starts (`SHEDLOCK_TEST_REDIS_SENTINEL_URLS`,
//! `SHEDLOCK_TEST_REDIS_SENTINEL_MASTER`), which it leaves as it found it; and a failover on a
//! set of the test's own (a master, two replicas, three sentinels on free ports), whose master
//! it kills. Skipped without them, failed without them when `CI=true`.

mod common;

conformance_suites!(sentinel);

mod failover {
    use std::net::TcpListener;
    use std::path::{Path, PathBuf};
    use std::process::{Child, Command, Stdio};
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

    use shedlock_conformance::env::skip;
    use shedlock_conformance::{unique_key_prefix, unique_lock_name};
    use shedlock_core::{Error, LockConfiguration, LockProvider, Tick};
    use shedlock_redis::RedisLockProvider;

    use crate::common;

    /// The master's name the test's sentinels watch.
    const NAME: &str = "failover";

    fn free_port() -> u16 {
        TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port()
    }

    /// A process of the test's set, killed (SIGKILL) when dropped.
    struct Server {
        port: u16,
        child: Option<Child>,
    }

    impl Server {
        fn kill(&mut self) {
            if let Some(mut child) = self.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }

    impl Drop for Server {
        fn drop(&mut self) {
            self.kill();
        }
    }

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

    fn redis_server(args: &[String]) -> Child {
        Command::new("redis-server")
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server")
    }

    /// A server in memory; a replica keeps the copy of its master's data it loads in `dir`.
    fn data_server(dir: &Path, replica_of: Option<u16>) -> Server {
        let port = free_port();
        let mut args: Vec<String> = [
            "--dir",
            &dir.display().to_string(),
            "--dbfilename",
            &format!("dump-{port}.rdb"),
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ]
        .map(str::to_owned)
        .into();
        if let Some(master) = replica_of {
            args.extend(["--replicaof".into(), "127.0.0.1".into(), master.to_string()]);
        }
        Server {
            port,
            child: Some(redis_server(&args)),
        }
    }

    impl SentinelSet {
        /// Starts the set and waits until every sentinel knows both replicas and the other
        /// sentinels; `None` after a `skipped:` line when `redis-server` is not installed.
        async fn start() -> Option<SentinelSet> {
            let installed = Command::new("redis-server")
                .arg("--version")
                .stdout(Stdio::null())
                .status()
                .is_ok();
            if !installed {
                skip("redis-server not installed (apt-get install redis-server)");
                return None;
            }
            let dir =
                std::env::temp_dir().join(unique_key_prefix("sentinel").trim_end_matches(':'));
            std::fs::create_dir_all(&dir).expect("a temporary directory");
            let master = data_server(&dir, None);
            answering(master.port).await;
            let replicas: Vec<Server> = (0..2)
                .map(|_| data_server(&dir, Some(master.port)))
                .collect();
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
                sentinels.push(Server {
                    port,
                    child: Some(child),
                });
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

        fn url(&self) -> String {
            let hosts: Vec<String> = self
                .sentinels
                .iter()
                .map(|s| format!("127.0.0.1:{}", s.port))
                .collect();
            format!("redis+sentinel://{}/{NAME}", hosts.join(","))
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

    /// Waits until the server on `port` answers `PING`.
    async fn answering(port: u16) {
        until("redis-server answers", || async {
            let Ok(client) = redis::Client::open(format!("redis://127.0.0.1:{port}")) else {
                return false;
            };
            match client.get_multiplexed_async_connection().await {
                Ok(mut connection) => redis::cmd("PING")
                    .query_async::<String>(&mut connection)
                    .await
                    .is_ok(),
                Err(_) => false,
            }
        })
        .await;
    }

    async fn admin(port: u16) -> redis::aio::MultiplexedConnection {
        common::connection(&format!("redis://127.0.0.1:{port}")).await
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

    /// Checks `condition` every 50 ms until it holds; fails after 30 s naming `what`.
    async fn until<F, Fut>(what: &str, mut condition: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = bool>,
    {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !condition().await {
            assert!(Instant::now() < deadline, "not within 30 s: {what}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// One run of the fleet's per-second job.
    #[derive(Debug, Clone)]
    struct Run {
        holder: String,
        tick: i64,
        token: u64,
        started: Instant,
        ended: Instant,
    }

    /// How long each run of the job takes.
    const JOB: Duration = Duration::from_millis(300);

    /// Three instances, each with a provider of its own, claiming lock `lock` for every whole
    /// second (as the scheduler claims a cron tick) and running the job when granted.
    struct Fleet {
        name: &'static str,
        runs: Arc<Mutex<Vec<Run>>>,
        errors: Arc<AtomicU32>,
        stop: Arc<AtomicBool>,
        tasks: Vec<tokio::task::JoinHandle<()>>,
    }

    impl Fleet {
        async fn start(name: &'static str, url: &str, wait: bool) -> Fleet {
            let prefix = unique_key_prefix(name);
            let lock = unique_lock_name("every-second");
            let runs = Arc::new(Mutex::new(Vec::new()));
            let errors = Arc::new(AtomicU32::new(0));
            let stop = Arc::new(AtomicBool::new(false));
            let mut tasks = Vec::new();
            for instance in 0..3 {
                let provider = builder(&prefix, &format!("{name}-{instance}"), wait)
                    .connect(url)
                    .await
                    .expect("connect through the sentinels");
                let (lock, runs, errors, stop) = (
                    lock.clone(),
                    Arc::clone(&runs),
                    Arc::clone(&errors),
                    Arc::clone(&stop),
                );
                tasks.push(tokio::spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
                        let next = Duration::from_secs(now.as_secs() + 1);
                        tokio::time::sleep(next - now).await;
                        let tick = Tick::new(UNIX_EPOCH + next);
                        let config =
                            LockConfiguration::new(&lock, Duration::from_secs(5), Duration::ZERO)
                                .unwrap()
                                .for_tick(tick);
                        match provider.acquire(&config).await {
                            Ok(Some(lease)) => {
                                let started = Instant::now();
                                tokio::time::sleep(JOB).await;
                                let ended = Instant::now();
                                let _ = provider.release(&lease).await;
                                runs.lock().unwrap().push(Run {
                                    holder: provider.holder().to_owned(),
                                    tick: tick.millis(),
                                    token: lease.fencing_token(),
                                    started,
                                    ended,
                                });
                            }
                            Ok(None) => {}
                            Err(_) => {
                                errors.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                }));
            }
            Fleet {
                name,
                runs,
                errors,
                stop,
                tasks,
            }
        }

        fn runs(&self) -> Vec<Run> {
            let mut runs = self.runs.lock().unwrap().clone();
            runs.sort_by_key(|run| run.started);
            runs
        }

        fn runs_since(&self, since: Instant) -> usize {
            self.runs().iter().filter(|run| run.started > since).count()
        }

        async fn stop(self) -> (Vec<Run>, u32) {
            self.stop.store(true, Ordering::Relaxed);
            for task in self.tasks {
                task.await.unwrap();
            }
            let mut runs = self.runs.lock().unwrap().clone();
            runs.sort_by_key(|run| run.started);
            (runs, self.errors.load(Ordering::Relaxed))
        }
    }

    fn builder(prefix: &str, holder: &str, wait: bool) -> shedlock_redis::RedisLockProviderBuilder {
        let builder = RedisLockProvider::builder()
            .key_prefix(prefix)
            .holder(holder);
        if wait {
            builder.wait_for_replicas(1, Duration::from_millis(200))
        } else {
            builder
        }
    }

    /// Ticks run twice, and runs of two holders at the same time.
    fn doubles(runs: &[Run]) -> (usize, usize) {
        let mut ticks: Vec<i64> = runs.iter().map(|run| run.tick).collect();
        ticks.sort_unstable();
        let distinct = {
            let mut unique = ticks.clone();
            unique.dedup();
            unique.len()
        };
        let overlaps = runs
            .windows(2)
            .filter(|pair| pair[1].started < pair[0].ended && pair[1].holder != pair[0].holder)
            .count();
        (ticks.len() - distinct, overlaps)
    }

    /// Sets the password each replica offers its master (`masterauth`).
    async fn set_master_password(set: &SentinelSet, password: &str) {
        for replica in &set.replicas {
            let mut connection = admin(replica.port).await;
            let () = redis::cmd("CONFIG")
                .arg("SET")
                .arg("masterauth")
                .arg(password)
                .query_async(&mut connection)
                .await
                .unwrap();
        }
    }

    /// A grant taken just before the master dies, its replicas cut off (`CLIENT KILL TYPE
    /// replica`, so the grant reaches none of them), and the same tick asked for by another
    /// holder after the failover: whether both were granted.
    struct Witness {
        lock: String,
        tick: Tick,
        prefix: String,
        first: Result<bool, Error>,
    }

    impl Witness {
        async fn take(url: &str, name: &str, wait: bool) -> Witness {
            let prefix = unique_key_prefix(name);
            let lock = unique_lock_name("witness");
            let tick = Tick::new(SystemTime::now());
            let provider = builder(&prefix, "before", wait).connect(url).await.unwrap();
            Witness {
                first: Self::claim(&provider, &lock, tick).await,
                lock,
                tick,
                prefix,
            }
        }

        async fn claim(
            provider: &RedisLockProvider,
            lock: &str,
            tick: Tick,
        ) -> Result<bool, Error> {
            let config = LockConfiguration::new(lock, Duration::from_secs(60), Duration::ZERO)
                .unwrap()
                .for_tick(tick);
            Ok(provider.acquire(&config).await?.is_some())
        }

        /// Whether the tick was granted twice (before and after the failover).
        async fn granted_twice(&self, url: &str, wait: bool) -> bool {
            let provider = builder(&self.prefix, "after", wait)
                .connect(url)
                .await
                .unwrap();
            let second = Self::claim(&provider, &self.lock, self.tick).await.unwrap();
            matches!(self.first, Ok(true)) && second
        }
    }

    /// Issue 33: the master is killed (SIGKILL) while two fleets of three instances run a
    /// per-second job through Sentinel, one plain and one with `wait_for_replicas(1, 200 ms)`;
    /// the sentinels promote a replica and both fleets go on. Counted and printed: ticks run
    /// twice, runs at the same time, failed acquisitions, the time from the promotion to the
    /// first run; and a grant made with the replicas cut off just before the kill, asked for
    /// again after it. An asynchronous replica can lose a grant (counted, not asserted); with
    /// `wait_for_replicas` no tick runs twice and the grant is never granted twice; tokens
    /// never go back on either.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn fleets_go_on_after_the_master_is_killed() {
        let Some(mut set) = SentinelSet::start().await else {
            return;
        };
        let url = set.url();
        let plain = Fleet::start("plain", &url, false).await;
        let waiting = Fleet::start("waiting", &url, true).await;
        let begun = Instant::now();
        until("both fleets ran twice", || async {
            plain.runs_since(begun) >= 2 && waiting.runs_since(begun) >= 2
        })
        .await;

        // Cut the replicas off (they cannot come back: they offer the master a password it does
        // not have), take a grant on each kind of provider, kill the master.
        set_master_password(&set, "not-the-password").await;
        let mut master = admin(set.master.port).await;
        let _: i64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("replica")
            .query_async(&mut master)
            .await
            .unwrap();
        let (plain_witness, waiting_witness) = tokio::join!(
            Witness::take(&url, "plain-witness", false),
            Witness::take(&url, "waiting-witness", true)
        );
        set.master.kill();
        let killed = Instant::now();
        set_master_password(&set, "").await;
        let replica_ports: Vec<u16> = set.replicas.iter().map(|r| r.port).collect();
        until("the sentinels promote a replica", || async {
            set.named_master()
                .await
                .is_some_and(|port| replica_ports.contains(&port))
        })
        .await;
        let promoted = Instant::now();
        until("both fleets ran twice after the failover", || async {
            plain.runs_since(promoted) >= 2 && waiting.runs_since(promoted) >= 2
        })
        .await;
        let plain_twice = plain_witness.granted_twice(&url, false).await;
        let waiting_twice = waiting_witness.granted_twice(&url, true).await;

        println!(
            "master killed; a replica promoted {:?} later",
            promoted - killed
        );
        for (fleet, twice, first) in [
            (plain, plain_twice, &plain_witness.first),
            (waiting, waiting_twice, &waiting_witness.first),
        ] {
            let name = fleet.name;
            let (runs, errors) = fleet.stop().await;
            let (doubled, overlaps) = doubles(&runs);
            let first_after = runs
                .iter()
                .find(|run| run.started > promoted)
                .map(|run| run.started - promoted);
            println!(
                "{name}: {} runs, {doubled} ticks run twice, {overlaps} runs at once, {errors} \
                 failed acquisitions; first run {first_after:?} after the promotion; the \
                 witness grant before the kill: {first:?}, granted again after it: {twice}",
                runs.len()
            );
            assert!(first_after.is_some(), "{name}: no run after the failover");
            let tokens: Vec<u64> = runs.iter().map(|run| run.token).collect();
            assert!(
                tokens.windows(2).all(|pair| pair[0] < pair[1]),
                "{name}: a token went back: {runs:?}"
            );
            if name == "waiting" {
                assert_eq!((doubled, overlaps), (0, 0), "{name}: {runs:?}");
                assert!(!twice, "{name}: the witness grant was granted twice");
                let Err(refused) = first else {
                    panic!("{name}: a grant no replica could acknowledge: {first:?}");
                };
                assert!(refused.to_string().contains("acknowledged"), "{refused}");
            } else {
                // The documented limit: the replicas never saw the grant.
                assert!(
                    twice,
                    "{name}: a grant no replica saw survived the failover"
                );
            }
        }
    }
}
