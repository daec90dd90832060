//! The jobs view over HTTP (the page the dashboard opens on): what it shows per job from the
//! fleet's board and the run records, its bounds, and pause / resume / run now behind the same
//! rules as a release.

mod common;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use shedlock_core::{
    Error, Fleet, InMemoryLockProvider, JobDefinition, LockConfiguration, LockInspector, LockLease,
    LockProvider, RunEnd, RunLog, RunOutcome, RunStart, async_trait,
};
use shedlock_dashboard::{DashboardOptions, router};

use common::{HOST, ORIGIN, call, get};

const TOKEN: &str = "tr0ub4dor&3-correct-horse";
const ALIVE: Duration = Duration::from_secs(60);

async fn post_with(
    app: &Router,
    form: &[(&str, &str)],
    headers: &[(header::HeaderName, &str)],
) -> (StatusCode, String) {
    let body = form
        .iter()
        .map(|(k, v)| format!("{k}={}", encode(v)))
        .collect::<Vec<_>>()
        .join("&");
    let mut request =
        Request::post("/").header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
    for (name, value) in headers {
        request = request.header(name, *value);
    }
    call(app, request.body(Body::from(body)).unwrap()).await
}

async fn post(app: &Router, form: &[(&str, &str)]) -> (StatusCode, String) {
    post_with(app, form, &[(header::HOST, HOST), (header::ORIGIN, ORIGIN)]).await
}

fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' => char::from(b).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn report() -> JobDefinition {
    JobDefinition::new("report", "0 0 6 * * *")
        .with_zone("Europe/Paris")
        .with_lock("report", Duration::from_secs(600), Duration::ZERO)
}

/// The row of job `name` on `page`, up to the next row.
fn row<'a>(page: &'a str, name: &str) -> &'a str {
    let start = page
        .find(&format!(r#"data-name="{name}""#))
        .unwrap_or_else(|| panic!("no row of {name}"));
    let rest = &page[start..];
    &rest[..rest.find("</tr>").unwrap()]
}

async fn record(provider: &InMemoryLockProvider, lock: &str, token: u64, end: RunEnd) {
    let start = RunStart::new(lock, lock, None, "web-1", token);
    provider.run_started(&start).await.unwrap();
    provider.run_finished(&start, &end).await.unwrap();
}

#[tokio::test]
async fn the_dashboard_opens_on_the_jobs() {
    let provider = InMemoryLockProvider::new();
    let fleet = Fleet::new(Arc::new(provider.clone()));
    // A rolling deploy: web-3 runs the report at 7 already.
    fleet.publish("web-1", &[report()], ALIVE).await.unwrap();
    fleet.publish("web-2", &[report()], ALIVE).await.unwrap();
    let moved = JobDefinition::new("report", "0 0 7 * * *")
        .with_zone("Europe/Paris")
        .with_lock("report", Duration::from_secs(600), Duration::ZERO);
    fleet.publish("web-3", &[moved], ALIVE).await.unwrap();
    let import = JobDefinition::new("import", "every 10s").with_lock(
        "import",
        Duration::from_secs(60),
        Duration::ZERO,
    );
    let markup = JobDefinition::new("<script>alert(1)</script>", "every 1m");
    fleet
        .publish("web-1", &[report(), import, markup], ALIVE)
        .await
        .unwrap();
    fleet.pause("import", "alice").await.unwrap();
    fleet.run_now("report", "bob").await.unwrap();
    record(&provider, "report", 1, RunEnd::succeeded()).await;
    for token in 1..=3 {
        record(
            &provider,
            "import",
            token,
            RunEnd::with_error(RunOutcome::Failed, "503"),
        )
        .await;
    }
    record(&provider, "import", 4, RunEnd::succeeded()).await;

    let app = router(provider.clone(), DashboardOptions::new());
    let (status, page) = get(&app, "/").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.contains("<h2>Jobs</h2>") && !page.contains("<h2>Locks</h2>"));
    assert!(page.contains(r#"<a id="nav-locks" href="?view=locks">Locks</a>"#));
    assert_eq!(page.matches(r#"<tr class="job"#).count(), 3);

    let listed = fleet.job("report").await.unwrap().unwrap();
    let newest = listed.carriers.iter().map(|c| c.seen_at).max().unwrap();
    let next = report().next_fire(newest).unwrap();
    let report_row = row(&page, "report");
    for shown in [
        "<code>0 0 6 * * *</code> <span class=\"meta zone\">Europe/Paris</span>",
        &format!(
            "<td class=\"next-fire\">{}</td>",
            humantime::format_rfc3339_seconds(next)
        ),
        "<span class=\"count\">3</span>",
        "web-1, web-2, web-3",
        "1 run it otherwise:",
        "<span class=\"by\">web-3</span> <code>0 0 7 * * *</code>",
        "<span class=\"state waiting\">waiting</span>",
        "asked by bob",
        ">succeeded</a>",
        "<td class=\"failures\">0</td>",
        r#"<a class="runs" href="?lock=report">runs</a>"#,
        r#"<a class="locks" href="?view=locks&amp;prefix=report">lock</a>"#,
    ] {
        assert!(report_row.contains(shown), "`{shown}` not in {report_row}");
    }
    let import_row = row(&page, "import");
    assert!(page.contains(r#"<tr class="job paused" data-name="import">"#));
    for shown in [
        "<td class=\"next-fire\">–</td>",
        "<span class=\"state paused\">paused</span> by <span class=\"by\">alice</span>",
        "<td class=\"failures\">3</td>",
        ">succeeded</a>",
    ] {
        assert!(import_row.contains(shown), "`{shown}` not in {import_row}");
    }
    assert!(!import_row.contains("otherwise"));
    let markup_row = row(&page, "&lt;script&gt;alert(1)&lt;/script&gt;");
    assert!(markup_row.contains("unlocked"));
    assert!(!page.contains("<script>alert"));
    // Read-only: no buttons.
    assert!(!page.contains("Pause…") && !page.contains("Run now…"));

    // The locks are a click away, and the other pages keep their query strings.
    let (_, locks) = get(&app, "/?view=locks").await;
    assert!(locks.contains("<h2>Locks</h2>"));
    let (_, runs) = get(&app, "/?lock=import").await;
    assert!(runs.contains("Runs of <code>import</code>"), "{runs}");
    // A filter by name.
    let (_, filtered) = get(&app, "/?prefix=imp").await;
    assert_eq!(filtered.matches(r#"<tr class="job"#).count(), 1);
}

/// The failures of the day are counted from a bounded read: past it, the count says so.
#[tokio::test]
async fn failures_past_the_read_are_a_lower_bound() {
    let provider = InMemoryLockProvider::new();
    let fleet = Fleet::new(Arc::new(provider.clone()));
    fleet.publish("web-1", &[report()], ALIVE).await.unwrap();
    for token in 1..=250 {
        let end = RunEnd::with_error(RunOutcome::Failed, "503");
        record(&provider, "report", token, end).await;
    }
    let (_, page) = get(&router(provider, DashboardOptions::new()), "/").await;
    assert!(
        row(&page, "report").contains(r#">200+</span></td>"#),
        "{}",
        row(&page, "report")
    );
}

/// A store as the in-memory one, but keeping no board (as a store that has none yet).
#[derive(Debug, Clone)]
struct WithoutBoard(InMemoryLockProvider);

#[async_trait]
impl LockProvider for WithoutBoard {
    async fn acquire(&self, config: &LockConfiguration) -> Result<Option<LockLease>, Error> {
        self.0.acquire(config).await
    }
    async fn release(&self, lease: &LockLease) -> Result<bool, Error> {
        self.0.release(lease).await
    }
    async fn extend(
        &self,
        lease: &LockLease,
        lock_at_most_for: Duration,
        lock_at_least_for: Duration,
    ) -> Result<Option<LockLease>, Error> {
        self.0
            .extend(lease, lock_at_most_for, lock_at_least_for)
            .await
    }
    fn holder(&self) -> &str {
        self.0.holder()
    }
    fn run_log(&self) -> Option<&dyn RunLog> {
        Some(&self.0)
    }
    fn inspector(&self) -> Option<&dyn LockInspector> {
        Some(&self.0)
    }
}

#[tokio::test]
async fn a_store_without_a_board_says_so() {
    let provider = WithoutBoard(InMemoryLockProvider::new());
    let app = router(
        provider,
        DashboardOptions::new().allow_release(TOKEN).unwrap(),
    );
    let (status, page) = get(&app, "/").await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains(r#"<p class="meta" id="no-board">"#), "{page}");
    assert!(page.contains("keeps no board of the fleet's jobs"));
    assert!(page.contains(r#"href="?view=locks""#));
    let form = [
        ("action", "pause"),
        ("job", "report"),
        ("release_token", TOKEN),
    ];
    let (status, page) = post(&app, &form).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(page.contains("keeps no board"), "{page}");
}

#[tokio::test]
async fn pause_resume_and_run_now_need_the_flag_the_confirmation_and_the_token() {
    let provider = InMemoryLockProvider::new();
    let fleet = Fleet::new(Arc::new(provider.clone()));
    fleet.publish("web-1", &[report()], ALIVE).await.unwrap();
    let paused = || async { fleet.job("report").await.unwrap().unwrap().paused };
    let form = |action: &'static str, token: Option<&'static str>| {
        let mut form = vec![("action", action), ("job", "report")];
        form.extend(token.map(|t| ("release_token", t)));
        form
    };

    // Read-only: no button, and a POST is refused even with the right token.
    let read_only = router(provider.clone(), DashboardOptions::new());
    let (status, _) = post(&read_only, &form("pause", Some(TOKEN))).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(paused().await.is_none());

    let app = router(
        provider.clone(),
        DashboardOptions::new().allow_release(TOKEN).unwrap(),
    );
    let (_, page) = get(&app, "/").await;
    let report_row = row(&page, "report");
    assert!(report_row.contains(r#"<button class="pause" type="submit">Pause…</button>"#));
    assert!(report_row.contains("Run now…") && !report_row.contains("Resume…"));

    // The first step only asks.
    let (status, page) = post(&app, &form("pause", None)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("Pause this job?") && page.contains(r#"name="release_token""#));
    assert!(page.contains(r#"<input type="hidden" name="action" value="pause">"#));
    assert!(paused().await.is_none());
    // A wrong token, another origin: nothing.
    let (status, page) = post(&app, &form("pause", Some("tr0ub4dor&4-correct-horse"))).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(page.contains("Wrong release token."));
    for origin in ["http://evil.example", "null", "http://127.0.0.1:3000"] {
        let headers = [(header::HOST, HOST), (header::ORIGIN, origin)];
        let (status, page) = post_with(&app, &form("pause", Some(TOKEN)), &headers).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{origin}");
        assert!(!page.contains("<html"), "{page}");
    }
    let (status, _) = post_with(&app, &form("pause", Some(TOKEN)), &[(header::HOST, HOST)]).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "no origin at all");
    assert!(paused().await.is_none());

    // The token: paused across the fleet, by the dashboard.
    let (status, page) = post(&app, &form("pause", Some(TOKEN))).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(!page.contains("tr0ub4dor"), "the token is never rendered");
    assert_eq!(paused().await.unwrap().by, "dashboard");
    assert!(
        fleet
            .switches()
            .await
            .unwrap()
            .paused
            .contains_key("report")
    );
    let (_, page) = get(&app, "/").await;
    let report_row = row(&page, "report");
    assert!(report_row.contains("<span class=\"state paused\">paused</span>"));
    assert!(report_row.contains("Resume…") && !report_row.contains("Pause…"));

    // Resumed, likewise; resuming again leaves it alone.
    let (status, page) = post(&app, &form("resume", None)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("Resume this job?"));
    assert!(paused().await.is_some());
    let (status, _) = post(&app, &form("resume", Some("wrong-wrong-wrong-wrong"))).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(paused().await.is_some());
    let (status, _) = post(&app, &form("resume", Some(TOKEN))).await;
    assert_eq!(status, StatusCode::OK);
    assert!(paused().await.is_none());
    let (status, page) = post(&app, &form("resume", Some(TOKEN))).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(page.contains("was not paused"), "{page}");

    // Run now: one request, waiting for an instance to take it.
    let (status, page) = post(&app, &form("run_now", None)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("Run this job now?"));
    assert!(fleet.switches().await.unwrap().runs.is_empty());
    let (status, _) = post(&app, &form("run_now", Some("wrong-wrong-wrong-wrong"))).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(fleet.switches().await.unwrap().runs.is_empty());
    let (status, page) = post(&app, &form("run_now", Some(TOKEN))).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let asked = fleet.switches().await.unwrap().runs["report"].clone();
    assert_eq!(
        (asked.by.as_str(), asked.taken_by.as_deref()),
        ("dashboard", None)
    );
    assert!(fleet.take_run(&asked, "web-1").await.unwrap());
    let (_, page) = get(&app, "/").await;
    assert!(row(&page, "report").contains("taken by <span class=\"by\">web-1</span>"));

    // A name the board refuses is a clear 400, nothing written.
    let long = "x".repeat(10_000);
    let long_form = [
        ("action", "pause"),
        ("job", long.as_str()),
        ("release_token", TOKEN),
    ];
    let (status, page) = post(&app, &long_form).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{page}");
    assert!(fleet.switches().await.unwrap().paused.is_empty());
}

/// Job switches share the release's attempts: wrong tokens are answered 429 after a burst.
#[tokio::test(start_paused = true)]
async fn job_switches_share_the_attempts_limit() {
    let provider = InMemoryLockProvider::new();
    let app = router(
        provider.clone(),
        DashboardOptions::new().allow_release(TOKEN).unwrap(),
    );
    let mut statuses = Vec::new();
    for guess in 0..12 {
        let wrong = format!("guess-{guess:012}-xxxxx");
        let form = [
            ("action", "pause"),
            ("job", "report"),
            ("release_token", &wrong),
        ];
        statuses.push(post(&app, &form).await.0);
    }
    assert_eq!(statuses[..10], [StatusCode::FORBIDDEN; 10]);
    assert_eq!(statuses[10..], [StatusCode::TOO_MANY_REQUESTS; 2]);
    let form = [
        ("action", "pause"),
        ("job", "report"),
        ("release_token", TOKEN),
    ];
    assert_eq!(post(&app, &form).await.0, StatusCode::TOO_MANY_REQUESTS);
    let fleet = Fleet::new(Arc::new(provider));
    assert!(fleet.switches().await.unwrap().paused.is_empty());
    tokio::time::advance(Duration::from_secs(2)).await;
    assert_eq!(post(&app, &form).await.0, StatusCode::OK);
    assert!(
        fleet
            .switches()
            .await
            .unwrap()
            .paused
            .contains_key("report")
    );
}

/// 10,000 jobs: the page holds one page of them, whatever the fleet's size.
#[tokio::test]
async fn ten_thousand_jobs_make_one_bounded_page() {
    let provider = InMemoryLockProvider::new();
    let fleet = Fleet::new(Arc::new(provider.clone()));
    let jobs: Vec<JobDefinition> = (0..10_000)
        .map(|i| {
            let name = format!("job-{i:05}");
            JobDefinition::new(name.clone(), "0 */5 * * * *").with_lock(
                name,
                Duration::from_secs(60),
                Duration::ZERO,
            )
        })
        .collect();
    fleet.publish("web-1", &jobs, ALIVE).await.unwrap();
    fleet.publish("web-2", &jobs, ALIVE).await.unwrap();
    let rows = |page: &str| page.matches(r#"<tr class="job"#).count();
    for (page_size, bound) in [(50, 100 * 1024), (500, 1024 * 1024)] {
        let options = DashboardOptions::new()
            .page_size(page_size)
            .allow_release(TOKEN)
            .unwrap();
        let app = router(provider.clone(), options);
        let started = SystemTime::now();
        let (status, page) = get(&app, "/").await;
        assert_eq!(status, StatusCode::OK);
        // A figure, not a bound on time: the machine may be slow.
        eprintln!(
            "10,000 jobs x 2 carriers, page_size {page_size}: {} bytes in {:?}",
            page.len(),
            started.elapsed().unwrap_or_default()
        );
        assert_eq!(rows(&page), page_size);
        assert!(page.len() < bound, "{} bytes", page.len());
        assert!(page.contains("10000 jobs"));
        let last = format!("job-{:05}", page_size - 1);
        assert!(page.contains(&format!(r#"href="?prefix=&amp;after={last}""#)));
        // The last page links no further.
        let (_, end) = get(&app, "/?after=job-09989").await;
        assert_eq!(rows(&end), 10);
        assert!(!end.contains("next-jobs"));
    }
}
