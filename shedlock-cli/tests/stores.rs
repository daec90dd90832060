//! The `shedlock` binary on the stores other than SQL, against the real servers: one Redis
//! server (`SHEDLOCK_TEST_REDIS_URL`), the RedLock masters (`SHEDLOCK_TEST_REDLOCK_URLS`, given
//! to the tool as one comma-separated `--url`) and the ZooKeeper ensemble
//! (`SHEDLOCK_TEST_ZK_URL`, as `zookeeper://<connect string>`) and the etcd cluster
//! (`SHEDLOCK_TEST_ETCD_URL`, as `etcd://host:port,…`). Skipped without their URL;
//! failed without it when `CI=true`.
//!
//! Every case is written once and runs on each store; locks are taken and checked with the
//! providers' own API, each test under a key prefix or root of its own.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{
    Dashboard, Run, assert_held_and_free_listed, assert_jobs_steered, assert_locks_paged,
    assert_release_refused, assert_runs_listed, assert_runs_paged, election_row, find, next_page,
    publish_two_instances, record_two_runs, shedlock_command,
};
use shedlock_conformance::unique_key_prefix;
use shedlock_core::{
    Elector, Fleet, LeaderState, LockConfiguration, LockInspector, LockProvider, LockRecord,
    MAX_ERROR_LEN,
};
use shedlock_etcd::EtcdLockProvider;
use shedlock_redis::{RedLockProvider, RedisLockProvider};
use shedlock_runtime::LeaderElection;
use shedlock_test_support::{etcd_url, redis_url, redlock_urls, unique_zk_root, zk_url};
use shedlock_zookeeper::ZkLockProvider;

/// One store, under a key prefix or root of this test's own.
struct Store {
    /// `--url` for the tool.
    url: String,
    /// `--key-prefix …` or `--root …`.
    place: [String; 2],
    /// A provider acting as holder `web-1`; `with_holder` gives the others.
    provider: Provider,
}

#[derive(Clone)]
enum Provider {
    // Boxed: a single server's provider is much larger than the others.
    Redis(Box<RedisLockProvider>),
    RedLock(RedLockProvider),
    ZooKeeper(ZkLockProvider),
    Etcd(EtcdLockProvider),
}

impl Provider {
    fn as_holder(&self, holder: &str) -> Arc<dyn LockProvider> {
        match self {
            Provider::Redis(p) => Arc::new(p.with_holder(holder).unwrap()),
            Provider::RedLock(p) => Arc::new(p.with_holder(holder).unwrap()),
            Provider::ZooKeeper(p) => Arc::new(p.with_holder(holder).unwrap()),
            Provider::Etcd(p) => Arc::new(p.with_holder(holder).unwrap()),
        }
    }

    /// The store's own elector (etcd's, ZooKeeper's) campaigning as `holder`, if it has one.
    fn elector(&self, holder: &str) -> Option<Arc<dyn Elector>> {
        match self {
            Provider::Etcd(p) => Some(Arc::new(p.with_holder(holder).unwrap().elector())),
            Provider::ZooKeeper(p) => Some(Arc::new(p.with_holder(holder).unwrap().elector())),
            Provider::Redis(_) | Provider::RedLock(_) => None,
        }
    }

    fn inspector(&self) -> &dyn LockInspector {
        match self {
            Provider::Redis(p) => p.as_ref(),
            Provider::RedLock(p) => p,
            Provider::ZooKeeper(p) => p,
            Provider::Etcd(p) => p,
        }
    }
}

impl Store {
    async fn redis(base: &str) -> Option<Store> {
        Some(Store::on_redis(base, vec![redis_url()?], false).await)
    }

    async fn redlock(base: &str) -> Option<Store> {
        Some(Store::on_redis(base, redlock_urls()?, true).await)
    }

    /// One Redis server, or RedLock's masters, at `urls`, under a fresh key prefix.
    async fn on_redis(base: &str, urls: Vec<String>, redlock: bool) -> Store {
        let prefix = unique_key_prefix(base);
        let builder = RedisLockProvider::builder().key_prefix(&prefix);
        let provider = if redlock {
            let masters = builder.redlock().connect(&urls).await;
            Provider::RedLock(masters.expect("connect to SHEDLOCK_TEST_REDLOCK_URLS"))
        } else {
            let server = builder.connect(&urls[0]).await;
            Provider::Redis(Box::new(
                server.expect("connect to SHEDLOCK_TEST_REDIS_URL"),
            ))
        };
        Store {
            url: urls.join(","),
            place: ["--key-prefix".into(), prefix],
            provider,
        }
    }

    async fn zookeeper(base: &str) -> Option<Store> {
        let connect_string = zk_url()?;
        let root = unique_zk_root(base);
        let provider = ZkLockProvider::builder(&connect_string)
            .root(&root)
            .connect()
            .await
            .expect("connect to SHEDLOCK_TEST_ZK_URL");
        provider.create_schema().await.expect("create the schema");
        Some(Store {
            url: format!("zookeeper://{connect_string}"),
            place: ["--root".into(), root],
            provider: Provider::ZooKeeper(provider),
        })
    }

    async fn etcd(base: &str) -> Option<Store> {
        let endpoints = etcd_url()?;
        // Key prefixes of etcd end in `/`, not `:`.
        let prefix = format!("{}/", unique_key_prefix(base).trim_end_matches(':'));
        let provider = EtcdLockProvider::builder(&endpoints)
            .prefix(&prefix)
            .connect()
            .await
            .expect("connect to SHEDLOCK_TEST_ETCD_URL");
        let hosts: Vec<&str> = endpoints
            .split(',')
            .map(|endpoint| endpoint.trim_start_matches("http://"))
            .collect();
        Some(Store {
            url: format!("etcd://{}", hosts.join(",")),
            place: ["--key-prefix".into(), prefix],
            provider: Provider::Etcd(provider),
        })
    }

    /// Runs `shedlock --url … --key-prefix|--root … ARGS`.
    fn shedlock(&self, args: &[&str]) -> Run {
        self.shedlock_on(&self.url, "20s", args)
    }

    /// Runs `shedlock --url URL --connect-timeout TIMEOUT --key-prefix|--root … ARGS`.
    fn shedlock_on(&self, url: &str, timeout: &str, args: &[&str]) -> Run {
        Run::of(
            shedlock_command()
                .args(["--url", url, "--connect-timeout", timeout])
                .args(&self.place)
                .args(args),
        )
    }

    /// Takes `name` for ten minutes as `holder` (`lock_at_least_for` as long: only an
    /// operator's release ends it early); its token.
    async fn acquire(&self, name: &str, holder: &str) -> u64 {
        let lease = Duration::from_secs(600);
        let config = LockConfiguration::new(name, lease, lease).unwrap();
        let provider = self.provider.as_holder(holder);
        let lease = provider.acquire(&config).await.unwrap().expect("free");
        lease.fencing_token()
    }

    async fn record(&self, name: &str) -> Option<LockRecord> {
        self.provider.inspector().lock_record(name).await.unwrap()
    }
}

mod cases {
    use super::*;

    /// `locks list` and `locks show`, text and JSON, the same fields as on SQL; exit 3 for a
    /// name the store has no record of.
    pub(super) async fn list_and_show(store: Store) {
        let empty = store.shedlock(&["locks", "list"]).expect(0).stdout();
        assert!(empty.contains("no locks in"), "{empty}");
        let token = store.acquire("held-lock", "web-1").await;
        let free = store.acquire("free-lock", "web-2").await;
        store
            .shedlock(&["locks", "release", "free-lock", "--holder", "web-2"])
            .expect(0);

        assert_held_and_free_listed(|args| store.shedlock(args), token);
        let list = store
            .shedlock(&["locks", "list", "--json"])
            .expect(0)
            .json();
        assert_eq!(find(&list, "free-lock")["fencing_token"], free);
    }

    /// `locks release` ends only the lease it is told of (exit 4 otherwise), keeps the record,
    /// and the holder cannot take the lock back; the next holder gets a larger token.
    pub(super) async fn release_checks_holder_and_token(store: Store) {
        let token = store.acquire("job", "web-1").await;
        let right = token.to_string();
        let held = async || store.record("job").await.expect("a record").held;
        assert_release_refused(|args| store.shedlock(args), token, held).await;
        let args = [
            "locks", "release", "job", "--holder", "web-1", "--token", &right,
        ];
        let run = store.shedlock(&args).expect(0);
        assert!(run.stdout().contains("released `job`"), "{}", run.stdout());
        let record = store.record("job").await.expect("the record stays");
        assert!(!record.held, "{record:?}");
        assert_eq!(record.fencing_token, token);
        // Releasing a free lock changes nothing and is not an error.
        store
            .shedlock(&["locks", "release", "job", "--force"])
            .expect(0);
        store
            .shedlock(&["locks", "release", "no-such-lock", "--force"])
            .expect(3);
        let next = store.acquire("job", "web-2").await;
        assert!(next > token, "token {next} after {token}");
        store
            .shedlock(&["locks", "release", "job", "--force"])
            .expect(0);
        assert!(!store.record("job").await.unwrap().held);
    }

    /// `doctor` finds nothing wrong with a working store, and names what it checked.
    pub(super) async fn doctor_is_content(store: Store) {
        store.acquire("job", "web-1").await;
        let run = store.shedlock(&["doctor"]).expect(0);
        let out = run.stdout();
        assert!(
            out.contains("is reachable") && out.contains("clock"),
            "{out}"
        );
        assert!(out.contains("ok       1 locks, 1 held"), "{out}");
        assert!(!out.contains("problem"), "{out}");
    }

    /// A store nothing answers at: exit 1, saying so.
    pub(super) async fn unreachable_store_is_an_error(store: Store) {
        let url = if store.url.starts_with("zookeeper://") {
            "zookeeper://127.0.0.1:1".to_owned()
        } else {
            // Port 1, 2, 3…: distinct masters, none listening.
            (1..=store.url.split(',').count())
                .map(|port| format!("redis://127.0.0.1:{port}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        let run = store.shedlock_on(&url, "2s", &["locks", "list"]).expect(1);
        assert!(run.stderr().contains("cannot reach"), "{}", run.stderr());
    }

    /// The URL from `SHEDLOCK_URL` or `DATABASE_URL` works as `--url` does.
    pub(super) async fn url_from_the_environment(store: Store) {
        store.acquire("job", "web-1").await;
        for variable in ["SHEDLOCK_URL", "DATABASE_URL"] {
            let show = Run::of(
                shedlock_command()
                    .args(&store.place)
                    .args(["locks", "show", "job", "--json"])
                    .env(variable, &store.url),
            )
            .expect(0)
            .json();
            assert_eq!(show["locked_by"], "web-1", "{variable}");
        }
    }

    /// `runs list` and `runs show` read the records the store keeps beside its locks.
    pub(super) async fn runs_list_and_show(store: Store) {
        let provider = store.provider.as_holder("web-1");
        let log = provider.run_log().expect("the store keeps run records");
        record_two_runs(log, "nightly").await;
        assert_runs_listed(|args| store.shedlock(args), "nightly");
    }

    /// Issue 29 item 3: `runs list` pages with `--limit` and `--before`.
    pub(super) async fn runs_are_paged(store: Store) {
        let provider = store.provider.as_holder("web-1");
        let log = provider.run_log().expect("the store keeps run records");
        assert_runs_paged(|args| store.shedlock(args), log).await;
    }

    /// Issue 32: `jobs list|show|pause|resume|run` on what instances publish to the store's
    /// board, and switches seen there.
    pub(super) async fn jobs_are_steered(store: Store) {
        let provider = store.provider.as_holder("web-1");
        let fleet = Fleet::of_provider(provider).expect("the store keeps a board");
        publish_two_instances(&fleet).await;
        assert_jobs_steered(|args| store.shedlock(args), &fleet).await;
        // The dashboard opens on them, also where it wraps the provider with the store's own
        // elector (etcd, ZooKeeper).
        let page = Dashboard::start(
            shedlock_command()
                .args(["--url", &store.url])
                .args(&store.place)
                .args(["dashboard", "--listen", "127.0.0.1:0"]),
        )
        .get("/");
        assert!(
            page.contains("cleanup") && !page.contains("keeps no board"),
            "{page}"
        );
    }

    /// `locks list` pages with `--limit` and `--after`, and filters with `--prefix`.
    pub(super) async fn locks_are_paged(store: Store) {
        for name in ["page-a", "page-b", "page-c", "other"] {
            store.acquire(name, "web-1").await;
        }
        assert_locks_paged(|args| store.shedlock(args));
    }

    /// Issue 29 item 7: `dashboard --election NAME` shows the leader of an election run on
    /// the store's locks, and (etcd, ZooKeeper) of one run by the store's own elector, which
    /// keeps its candidates where no lock read finds them: the candidate that leads, not a
    /// later one, and its successor once it resigns; "no leader" for an election nobody runs.
    pub(super) async fn elections_show_their_leaders(store: Store) {
        let on_locks = LeaderElection::builder("on-locks", store.provider.as_holder("web-1"))
            .start()
            .expect("start the election");
        let lock_term = elected(&on_locks).await;
        let candidate = |holder: &str| {
            store.provider.elector(holder).map(|elector| {
                LeaderElection::builder_shared("by-elector", elector)
                    .start()
                    .expect("start the election")
            })
        };
        let first = candidate("web-2");
        let first_term = match &first {
            Some(election) => Some(elected(election).await),
            None => None,
        };
        // A later candidate, following.
        let second = candidate("web-3");
        let dashboard = || {
            Dashboard::start(
                shedlock_command()
                    .args(["--url", &store.url])
                    .args(&store.place)
                    .args(["dashboard", "--listen", "127.0.0.1:0"])
                    .args(["--election", "on-locks", "--election", "by-elector"])
                    .args(["--election", "nobody"]),
            )
            .page()
        };
        let page = dashboard();
        let row = election_row(&page, "on-locks");
        assert!(row.contains(r#"<td class="holder">web-1</td>"#), "{row}");
        assert!(row.contains(&format!("<td>{lock_term}</td>")), "{row}");
        assert!(
            election_row(&page, "nobody").contains("no leader"),
            "{page}"
        );
        let row = election_row(&page, "by-elector");
        let (Some(first), Some(first_term), Some(second)) = (first, first_term, second) else {
            assert!(row.contains("no leader"), "{row}");
            on_locks.resign().await;
            return;
        };
        assert_leader_row(row, &store.provider, "web-2", first_term);

        // The leader resigns: its successor is shown, with its own term.
        first.resign().await;
        let second_term = elected(&second).await;
        assert!(second_term > first_term, "{second_term} after {first_term}");
        let page = dashboard();
        let row = election_row(&page, "by-elector");
        assert_leader_row(row, &store.provider, "web-3", second_term);
        second.resign().await;
        on_locks.resign().await;
    }

    /// Options of another kind of store are refused (exit 2), naming the option.
    pub(super) async fn sql_options_are_refused(store: Store) {
        let run = store
            .shedlock(&["--table", "locks", "locks", "list"])
            .expect(2);
        assert!(
            run.stderr().contains("--table does not apply"),
            "{}",
            run.stderr()
        );
    }
}

// The cases, on each store: one `#[tokio::test]` each, under a prefix or root of its own.
case_tests!(|test| {
    redis: Store::redis(test).await,
    redlock: Store::redlock(test).await,
    zookeeper: Store::zookeeper(test).await,
    etcd: Store::etcd(test).await,
} {
    list_and_show_held_and_free_locks: list_and_show,
    release_is_refused_unless_holder_and_token_match: release_checks_holder_and_token,
    doctor_finds_nothing_wrong: doctor_is_content,
    an_unreachable_store_exits_1: unreachable_store_is_an_error,
    the_url_comes_from_the_environment_too: url_from_the_environment,
    sql_options_are_refused: sql_options_are_refused,
    runs_are_listed_and_shown: runs_list_and_show,
    runs_are_listed_a_page_at_a_time: runs_are_paged,
    locks_are_listed_a_page_at_a_time: locks_are_paged,
    the_dashboard_shows_the_leader_of_every_kind_of_election: elections_show_their_leaders,
    jobs_are_listed_paused_resumed_and_run: jobs_are_steered,
});

/// An election row naming `holder` as leader: with its `term` on etcd (its key's create
/// revision); ZooKeeper keeps no record of a term (0).
fn assert_leader_row(row: &str, provider: &Provider, holder: &str, term: u64) {
    assert!(
        row.contains(&format!(r#"<td class="holder">{holder}</td>"#)),
        "{holder} in {row}"
    );
    if let Provider::Etcd(_) = provider {
        assert!(row.contains(&format!("<td>{term}</td>")), "{term} in {row}");
    }
}

/// The term of `election` once this candidate leads.
async fn elected(election: &LeaderElection) -> u64 {
    let mut state = election.subscribe();
    let leading = state.wait_for(|s| matches!(s, LeaderState::Leader { .. }));
    // A guard, not a synchronization: the only candidate leads within a round trip or two.
    let state = tokio::time::timeout(Duration::from_secs(60), leading)
        .await
        .expect("elected within a minute")
        .expect("the election runs");
    match *state {
        LeaderState::Leader { term } => term,
        LeaderState::Follower => unreachable!("waited for leadership"),
    }
}

/// Issue 29 item 1, as the command met it: on etcd, two locks with 1000 failed runs each (the
/// default `runs_per_lock`, errors of the longest kept: over 4 MiB together) made `shedlock
/// runs list` exit 1 ("decoded message length too large"). The command reads a page, and
/// `runs show` finds the oldest run a page at a time, whatever the history.
#[tokio::test]
async fn runs_are_read_a_page_at_a_time_from_a_long_etcd_history() {
    const RUNS: u64 = 1000;
    let Some(store) = Store::etcd("cli_long_history").await else {
        return;
    };
    let Provider::Etcd(provider) = &store.provider else {
        unreachable!("an etcd store");
    };
    shedlock_conformance::history::write_failed_runs(
        std::sync::Arc::new(provider.clone()),
        &["failing-a", "failing-b"],
        RUNS,
    )
    .await;

    let every = store.shedlock(&["runs", "list", "--json"]).expect(0).json();
    assert_eq!(every.as_array().map(Vec::len), Some(50));
    let one = store
        .shedlock(&["runs", "list", "--lock", "failing-a"])
        .expect(0)
        .stdout();
    assert!(next_page(&one, "--before").is_some(), "{one}");
    let oldest = store
        .shedlock(&["runs", "show", "failing-b", "--token", "1", "--json"])
        .expect(0)
        .json();
    assert_eq!(oldest["fencing_token"], 1);
    assert_eq!(oldest["error"].as_str().map(str::len), Some(MAX_ERROR_LEN));
}
