//! The dashboard in a real browser (Chromium through chromedriver, `SHEDLOCK_TEST_WEBDRIVER_URL`)
//! against real stores: one test function per store, all running the same checks. Without a
//! WebDriver URL (or a store's URL) a test prints `skipped: …`; under `CI=true` it fails.

use std::sync::Arc;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use shedlock_conformance::{unique_key_prefix, unique_lock_name};
use shedlock_core::{
    Board, BoardCondition, BoardEntry, Error, Fleet, InMemoryLockProvider, JobDefinition,
    LockConfiguration, LockProvider, async_trait,
};
use shedlock_dashboard::{DashboardOptions, router};
use shedlock_etcd::EtcdLockProvider;
use shedlock_redis::{RedLockProvider, RedisLockProvider};
use shedlock_runtime::{
    Job, JobLock, JobRegistry, LockingTaskExecutor, Schedule, Scheduler, SchedulerConfig,
};
use shedlock_sqlx::dialect::Dialect;
use shedlock_sqlx::{MySqlLockProvider, PgLockProvider, SqlLockProvider, SqliteLockProvider};
use shedlock_test_support::{
    etcd_url, mysql_url, pg_url, redis_url, redlock_urls, unique_zk_root, webdriver_url, zk_url,
};
use shedlock_zookeeper::ZkLockProvider;

/// One browser session at a time: the machine is small, and each test is quick.
static BROWSER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const RELEASE_TOKEN: &str = "correct horse battery";

/// The names one store's checks use: plain on a private SQLite file, unique on a shared server.
struct Names {
    prefix: String,
}

impl Names {
    fn plain() -> Self {
        Names {
            prefix: String::new(),
        }
    }
    fn unique() -> Self {
        Names {
            prefix: format!("{}-", unique_lock_name("dash")),
        }
    }
    fn of(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite() {
    let Some(webdriver) = webdriver_url() else {
        return;
    };
    let file = std::env::temp_dir().join(format!("{}.db", unique_lock_name("dashboard")));
    let url = format!("sqlite://{}?mode=rwc", file.display());
    let provider = SqliteLockProvider::connect(&url).await.unwrap();
    // A private file: plain names, as in the screenshot.
    on_sql(&webdriver, &provider, Names::plain(), true).await;
    provider.pool().close().await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", file.display()));
    }
}

/// The page the dashboard opens on: the jobs, from the in-memory store's board (the store's
/// own board is what the dashboard reads; its browser path is the same for every store). A
/// job is paused and resumed from the page, through the confirmation and the token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs() {
    let Some(webdriver) = webdriver_url() else {
        return;
    };
    let provider = InMemoryLockProvider::new();
    let fleet = Fleet::new(Arc::new(provider.clone()));
    let report = JobDefinition::new("send_report", "0 0 6 * * *")
        .with_zone("Europe/Paris")
        .with_lock("send_report", Duration::from_secs(600), Duration::ZERO);
    let import = JobDefinition::new("import_orders", "every 10s").with_lock(
        "import_orders",
        Duration::from_secs(60),
        Duration::ZERO,
    );
    for instance in ["web-1", "web-2"] {
        let jobs = [report.clone(), import.clone()];
        fleet
            .publish(instance, &jobs, Duration::from_secs(600))
            .await
            .unwrap();
    }
    let options = DashboardOptions::new()
        .refresh(Duration::from_secs(3600))
        .allow_release(RELEASE_TOKEN)
        .unwrap();
    // Served with the callers' addresses: a switch records who asked, from where.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/", listener.local_addr().unwrap());
    let app = router(provider.clone(), options)
        .into_make_service_with_connect_info::<std::net::SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let _one_at_a_time = BROWSER.lock().await;
    let client = browser(&webdriver).await;
    client.goto(&base).await.unwrap();
    assert_eq!(
        text(&client, "#jobs h2").await,
        "Jobs",
        "it opens on the jobs"
    );
    let row = r#"tr.job[data-name="send_report"]"#;
    assert_eq!(text(&client, &format!("{row} .carriers .count")).await, "2");
    assert_eq!(
        text(&client, &format!("{row} .schedule")).await,
        "0 0 6 * * * Europe/Paris"
    );
    assert_eq!(text(&client, &format!("{row} .paused")).await, "–");

    // Pause, Resume: the button, the confirmation, the token.
    let switch = |button: &'static str, token: &'static str| {
        let (client, base) = (&client, &base);
        async move { switch_job(client, base, "send_report", button, token).await }
    };
    let paused = || async { fleet.job("send_report").await.unwrap().unwrap().paused };
    assert_eq!(switch("pause", "wrong").await, "Wrong release token.");
    assert!(paused().await.is_none());
    let message = switch("pause", RELEASE_TOKEN).await;
    assert!(message.contains("is paused across the fleet"), "{message}");
    let by = paused().await.expect("the fleet has it paused").by;
    assert!(by.starts_with("dashboard (127.0.0.1:"), "{by}");
    client.goto(&base).await.unwrap();
    assert_eq!(
        text(&client, &format!("{row} .paused .state")).await,
        "paused"
    );
    assert!(!client.source().await.unwrap().contains(RELEASE_TOKEN));
    let message = switch("resume", RELEASE_TOKEN).await;
    assert!(message.contains("is resumed"), "{message}");
    assert!(paused().await.is_none());
    client.goto(&base).await.unwrap();
    assert_eq!(text(&client, &format!("{row} .paused")).await, "–");

    // The locks are a click away.
    client
        .find(Locator::Css("#nav-locks"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert_eq!(text(&client, "#locks h2").await, "Locks");
    client.close().await.unwrap();
}

/// A store's board as [`Fleet`] takes one (the store's provider is shared as a
/// `dyn LockProvider` here).
#[derive(Debug)]
struct StoreBoard(Arc<dyn LockProvider>);

#[async_trait]
impl Board for StoreBoard {
    async fn board_read(&self, prefix: &str) -> Result<Vec<BoardEntry>, Error> {
        self.0.board().unwrap().board_read(prefix).await
    }
    async fn board_write(
        &self,
        key: &str,
        value: &str,
        condition: BoardCondition,
        ttl: Option<Duration>,
    ) -> Result<Option<u64>, Error> {
        let board = self.0.board().unwrap();
        board.board_write(key, value, condition, ttl).await
    }
    async fn board_remove(&self, key: &str, condition: BoardCondition) -> Result<bool, Error> {
        self.0.board().unwrap().board_remove(key, condition).await
    }
}

/// On `base` (filtered by `query`), clicks the `button` of job `job`, confirms with `token`:
/// the message the dashboard answers.
async fn switch_job(client: &Client, page: &str, job: &str, button: &str, token: &str) -> String {
    client.goto(page).await.unwrap();
    client
        .find(Locator::Css(&format!(
            r#"tr.job[data-name="{job}"] button.{button}"#
        )))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert!(text(client, "#confirm-message").await.contains(job));
    client
        .find(Locator::Css("#release-token"))
        .await
        .unwrap()
        .send_keys(token)
        .await
        .unwrap();
    client
        .find(Locator::Css("#confirm-job"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    text(client, "#message").await
}

/// One test per store on a server, skipped without the store's test URL (`url`): SQL stores
/// (`test: url => provider type`) with their default tables and unique lock names, the others
/// (`test: url => |url| provider connected to it`) under a prefix or root of the test's own.
macro_rules! server_tests {
    (
        sql { $($sql:ident: $sql_url:expr => $sql_provider:ident;)* }
        other { $($test:ident: $url:expr => |$u:ident| $provider:expr;)* }
    ) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $sql() {
                let Some(webdriver) = webdriver_url() else {
                    return;
                };
                let Some(url) = $sql_url else { return };
                let provider = $sql_provider::connect(&url).await.unwrap();
                on_sql(&webdriver, &provider, Names::unique(), false).await;
            }
        )*
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() {
                let Some(webdriver) = webdriver_url() else {
                    return;
                };
                let Some($u) = $url else { return };
                let provider = $provider;
                on_store(&webdriver, |holder| {
                    Arc::new(provider.with_holder(holder).unwrap())
                })
                .await;
            }
        )*
    };
}

server_tests! {
    sql {
        postgres: pg_url() => PgLockProvider;
        mariadb: mysql_url() => MySqlLockProvider;
    }
    other {
        redis: redis_url() => |url| RedisLockProvider::builder()
            .key_prefix(unique_key_prefix("dash"))
            .connect(&url)
            .await
            .unwrap();
        redlock: redlock_urls() => |urls| RedLockProvider::builder()
            .key_prefix(unique_key_prefix("dash"))
            .connect(&urls)
            .await
            .unwrap();
        zookeeper: zk_url() => |url| {
            let provider = ZkLockProvider::builder(&url)
                .root(unique_zk_root("dash"))
                .connect()
                .await
                .unwrap();
            provider.create_schema().await.unwrap();
            provider
        };
        etcd: etcd_url() => |url| {
            let prefix = format!("{}/", unique_key_prefix("dash").trim_end_matches(':'));
            EtcdLockProvider::builder(&url)
                .prefix(prefix)
                .connect()
                .await
                .unwrap()
        };
    }
}

/// The checks on a store of a server's own (under a prefix or root of this test), with two
/// holders of it.
async fn on_store(webdriver: &str, instance: impl Fn(&str) -> Arc<dyn LockProvider>) {
    check(
        webdriver,
        [instance("web-1"), instance("web-2")],
        Names::plain(),
        false,
    )
    .await;
}

/// The checks on an SQL store (its default tables), with two holders of it.
async fn on_sql<D: Dialect>(
    webdriver: &str,
    provider: &SqlLockProvider<D>,
    names: Names,
    screenshot: bool,
) {
    provider.create_schema().await.unwrap();
    let instance = |holder: &str| Arc::new(provider.with_holder(holder).unwrap()) as _;
    let instances = [instance("web-1"), instance("web-2")];
    check(webdriver, instances, names, screenshot).await;
}

/// Serves `router` on a free port of 127.0.0.1; its base URL.
async fn serve(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    format!("http://{address}/")
}

async fn browser(webdriver: &str) -> Client {
    let capabilities = serde_json::json!({
        "goog:chromeOptions": {
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,1100"]
        }
    });
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    ClientBuilder::new(connector)
        .capabilities(capabilities.as_object().unwrap().clone())
        .connect(webdriver)
        .await
        .unwrap_or_else(|e| panic!("no browser session at {webdriver}: {e}"))
}

fn lock(name: &str) -> LockConfiguration {
    LockConfiguration::new(name, Duration::from_secs(120), Duration::ZERO).unwrap()
}

/// The text of an element, once the page shows it (a click's navigation may still be loading).
async fn text(client: &Client, css: &str) -> String {
    client
        .wait()
        .at_most(Duration::from_secs(30))
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("no `{css}` on the page: {e}"))
        .text()
        .await
        .unwrap()
}

/// The lock row's CSS selector.
fn row(name: &str) -> String {
    format!(r#"tr.lock[data-name="{name}"]"#)
}

/// Every check, on one store: `instances` are two holders of it.
async fn check(
    webdriver: &str,
    instances: [Arc<dyn LockProvider>; 2],
    names: Names,
    screenshot: bool,
) {
    let [web1, web2] = instances;
    // Runs: a job that succeeds on each instance, and one that fails on the second.
    let (report, import) = (names.of("send_report"), names.of("import_orders"));
    for (instance, fails) in [(&web1, false), (&web2, false), (&web2, true)] {
        let name = if fails { &import } else { &report };
        // Run by hand: a tick would be claimed once across both instances (the store grants
        // each tick of a lock once), and each instance is to run the job here.
        let yearly = Schedule::cron("0 0 0 1 1 *").unwrap();
        let job = Job::new(name.clone(), yearly, move |()| async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            match fails {
                true => Err(std::io::Error::other("upstream said <b>503</b>")),
                false => Ok(()),
            }
        })
        .with_lock(JobLock::new(name.clone()).unwrap());
        let scheduler = Scheduler::builder()
            .shared_provider(Arc::clone(instance))
            .config(SchedulerConfig::default())
            .registry(JobRegistry::new(()).add(job))
            .start()
            .await
            .unwrap();
        // Returns once the run ended and its record was written.
        let ran = scheduler.run_now(name).await.unwrap();
        assert!(ran.was_executed(), "{name} on a free lock: {ran:?}");
        scheduler.shutdown().await;
    }
    // Locks held by this process, one with markup in its name.
    let web1_executor = LockingTaskExecutor::from_shared(Arc::clone(&web1));
    let (held, released, script) = (
        names.of("nightly_billing"),
        names.of("rebuild_index"),
        names.of("<script>window.pwned=1</script>"),
    );
    let held_lock = web1_executor.try_lock(&lock(&held)).await.unwrap().unwrap();
    let released_lock = web1_executor
        .try_lock(&lock(&released))
        .await
        .unwrap()
        .unwrap();
    let script_lock = LockingTaskExecutor::from_shared(Arc::clone(&web2))
        .try_lock(&lock(&script))
        .await
        .unwrap()
        .unwrap();

    let options = DashboardOptions::new()
        .refresh(Duration::from_secs(3600))
        .timeline(Duration::from_secs(60));
    let read_only = serve(router(Arc::clone(&web1), options.clone())).await;
    let releasing = serve(router(
        Arc::clone(&web1),
        options.allow_release(RELEASE_TOKEN).unwrap(),
    ))
    .await;
    let filter = format!("?view=locks&prefix={}", names.prefix);

    let _one_at_a_time = BROWSER.lock().await;
    let client = browser(webdriver).await;
    client.goto(&format!("{read_only}{filter}")).await.unwrap();

    // A held lock: held, by its holder, with its token.
    let held_row = row(&held);
    assert_eq!(text(&client, &format!("{held_row} .state")).await, "held");
    assert_eq!(text(&client, &format!("{held_row} .holder")).await, "web-1");
    assert_eq!(
        text(&client, &format!("{held_row} .token")).await,
        held_lock.fencing_token().to_string()
    );
    // Markup in a name is text.
    assert_eq!(
        text(&client, &format!("{} .name", row(&script))).await,
        script
    );
    let pwned = client
        .execute("return window.pwned === undefined;", vec![])
        .await
        .unwrap();
    assert_eq!(
        pwned,
        serde_json::Value::Bool(true),
        "the name's script ran"
    );
    // The failing job: red, with its error as text.
    let failed = format!(r#"table.runs[data-lock="{import}"] tr.run.failed"#);
    assert_eq!(text(&client, &format!("{failed} .outcome")).await, "failed");
    let red = client
        .find(Locator::Css(&format!("{failed} .outcome")))
        .await
        .unwrap()
        .css_value("background-color")
        .await
        .unwrap();
    assert_eq!(red, "rgba(198, 40, 40, 1)");
    assert_eq!(
        text(&client, &format!("{failed} .error")).await,
        "upstream said <b>503</b>"
    );
    assert_eq!(text(&client, &format!("{failed} .holder")).await, "web-2");
    // The succeeding job ran once on each instance.
    let succeeded = format!(r#"table.runs[data-lock="{report}"] tr.run.succeeded .holder"#);
    let mut holders = Vec::new();
    for cell in client.find_all(Locator::Css(&succeeded)).await.unwrap() {
        holders.push(cell.text().await.unwrap());
    }
    holders.sort();
    assert_eq!(holders, ["web-1", "web-2"]);

    // Colours say the outcome: a legend of five, however many instances ran the jobs.
    let legend = client
        .find_all(Locator::Css("#timeline .legend .swatch"))
        .await
        .unwrap();
    assert_eq!(legend.len(), 5);
    assert!(!text(&client, "#timeline .legend").await.contains("web-1"));
    // The locks table says how each lock's last run went.
    assert_eq!(
        text(&client, &format!("{} .last-run", row(&import))).await,
        "failed"
    );

    if screenshot {
        let png = client.screenshot().await.unwrap();
        let path = std::env::var("SHEDLOCK_DASHBOARD_SCREENSHOT")
            .unwrap_or_else(|_| format!("{}/dashboard.png", env!("CARGO_TARGET_TMPDIR")));
        std::fs::write(&path, png).unwrap();
        eprintln!("screenshot: {path}");
    }

    // The run's own page: its whole error, and the way back.
    client
        .find(Locator::Css(&format!("{failed} td.started a")))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert_eq!(text(&client, "#error").await, "upstream said <b>503</b>");
    assert_eq!(text(&client, "dl.run .holder").await, "web-2");
    client.goto(&format!("{read_only}{filter}")).await.unwrap();

    // Released by its holder: no longer held.
    released_lock.release().await.unwrap();
    client.refresh().await.unwrap();
    assert_eq!(
        text(&client, &format!("{} .state", row(&released))).await,
        "free"
    );

    // Read-only: no release button, and a release posted anyway is refused.
    assert!(
        client
            .find_all(Locator::Css("button.release"))
            .await
            .unwrap()
            .is_empty()
    );
    let status = client
        .execute(
            "const [name, holder, token] = arguments;
             const body = new URLSearchParams({name, holder, token, release_token: 'x'});
             return fetch('', {method: 'POST', body}).then(r => r.status);",
            vec![
                held.clone().into(),
                "web-1".into(),
                held_lock.fencing_token().to_string().into(),
            ],
        )
        .await
        .unwrap();
    assert_eq!(status, serde_json::json!(403));

    // With the flag: a release asks for confirmation and the token; a wrong one is refused.
    let release = |token: &'static str| {
        let (client, releasing, filter, held_row) = (&client, &releasing, &filter, &held_row);
        async move {
            client.goto(&format!("{releasing}{filter}")).await.unwrap();
            client
                .find(Locator::Css(&format!("{held_row} button.release")))
                .await
                .unwrap()
                .click()
                .await
                .unwrap();
            assert!(text(client, "#confirm-message").await.contains("Release"));
            client
                .find(Locator::Css("#release-token"))
                .await
                .unwrap()
                .send_keys(token)
                .await
                .unwrap();
            client
                .find(Locator::Css("#confirm-release"))
                .await
                .unwrap()
                .click()
                .await
                .unwrap();
            text(client, "#message").await
        }
    };
    assert_eq!(release("wrong").await, "Wrong release token.");
    let inspector = web1.inspector().unwrap();
    assert!(inspector.lock_record(&held).await.unwrap().unwrap().held);
    assert!(!client.source().await.unwrap().contains(RELEASE_TOKEN));
    let released_message = release(RELEASE_TOKEN).await;
    assert!(released_message.contains("has ended"), "{released_message}");
    assert!(!inspector.lock_record(&held).await.unwrap().unwrap().held);
    client.goto(&format!("{read_only}{filter}")).await.unwrap();
    assert_eq!(text(&client, &format!("{held_row} .state")).await, "free");

    // The jobs, on a store that keeps the fleet's board: a job published, paused and resumed
    // from the page, as the store's board has it.
    if web1.board().is_some() {
        let fleet = Fleet::new(Arc::new(StoreBoard(Arc::clone(&web1))));
        let (job, instance) = (names.of("fleet_job"), names.of("web-1"));
        let definition = JobDefinition::new(job.clone(), "0 0 6 * * *").with_lock(
            job.clone(),
            Duration::from_secs(60),
            Duration::ZERO,
        );
        fleet
            .publish(&instance, &[definition], Duration::from_secs(600))
            .await
            .unwrap();
        let jobs = format!("{releasing}?prefix={}", names.prefix);
        client.goto(&jobs).await.unwrap();
        let job_row = format!(r#"tr.job[data-name="{job}"]"#);
        assert_eq!(
            text(&client, &format!("{job_row} .carriers .count")).await,
            "1"
        );
        let message = switch_job(&client, &jobs, &job, "pause", RELEASE_TOKEN).await;
        assert!(message.contains("is paused"), "{message}");
        let paused = fleet.job(&job).await.unwrap().unwrap().paused;
        assert_eq!(paused.map(|paused| paused.by).as_deref(), Some("dashboard"));
        client.goto(&jobs).await.unwrap();
        assert_eq!(
            text(&client, &format!("{job_row} .paused .state")).await,
            "paused"
        );
        let message = switch_job(&client, &jobs, &job, "resume", RELEASE_TOKEN).await;
        assert!(message.contains("is resumed"), "{message}");
        assert!(fleet.job(&job).await.unwrap().unwrap().paused.is_none());
        fleet.withdraw(&instance).await.unwrap();
    }

    client.close().await.unwrap();
    drop(held_lock);
    script_lock.release().await.unwrap();
}
