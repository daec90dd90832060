//! The dashboard over HTTP without a browser (so a newcomer's `cargo test` checks it too):
//! escaping, the release rules, the hosts and origins it answers, paging, a month of history,
//! and mounting under a path.

mod common;

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use shedlock_core::{
    InMemoryLockProvider, LeaderState, LockConfiguration, LockInspector, RunEnd, RunLog,
    RunOutcome, RunStart,
};
use shedlock_dashboard::{DashboardOptions, router};
use shedlock_runtime::{LeaderElection, LockingTaskExecutor};
use tower::ServiceExt;

use common::{HOST, ORIGIN, call, get};

const TOKEN: &str = "tr0ub4dor&3-correct-horse";

async fn post(app: &Router, form: &[(&str, &str)]) -> (StatusCode, String) {
    post_with(app, form, &[(header::HOST, HOST), (header::ORIGIN, ORIGIN)]).await
}

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

fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' => char::from(b).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn lock(name: &str) -> LockConfiguration {
    LockConfiguration::new(name, Duration::from_secs(60), Duration::ZERO).unwrap()
}

#[tokio::test]
async fn names_holders_and_errors_are_text() {
    let provider = InMemoryLockProvider::new().with_holder(r#""><img src=x onerror=alert(1)>"#);
    let name = "<script>alert(1)</script>";
    let _held = LockingTaskExecutor::new(provider.clone())
        .try_lock(&lock(name))
        .await
        .unwrap()
        .unwrap();
    let start = RunStart::new(name, "<b>job</b>", None, "web-1", 1);
    provider.run_started(&start).await.unwrap();
    let failed = RunEnd::with_error(RunOutcome::Failed, "<iframe src=evil>");
    provider.run_finished(&start, &failed).await.unwrap();

    let (status, page) = get(&router(provider, DashboardOptions::new()), "/?view=locks").await;
    assert_eq!(status, StatusCode::OK);
    for raw in ["<script>alert", "<img src=x", "<b>job", "<iframe"] {
        assert!(!page.contains(raw), "`{raw}` written raw");
    }
    for escaped in [
        "&lt;script&gt;alert(1)&lt;/script&gt;",
        "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;",
        "&lt;b&gt;job&lt;/b&gt;",
        "&lt;iframe src=evil&gt;",
    ] {
        assert!(page.contains(escaped), "`{escaped}` not on the page");
    }
}

#[tokio::test]
async fn release_needs_the_flag_the_confirmation_and_the_token() {
    let provider = InMemoryLockProvider::new().with_holder("web-1");
    let held = LockingTaskExecutor::new(provider.clone())
        .try_lock(&lock("nightly"))
        .await
        .unwrap()
        .unwrap();
    let token = held.fencing_token().to_string();
    let form = |release_token: Option<&'static str>| {
        let mut form = vec![
            ("name", "nightly"),
            ("holder", "web-1"),
            ("token", token.as_str()),
        ];
        form.extend(release_token.map(|t| ("release_token", t)));
        form
    };
    let is_held = || async { provider.lock_record("nightly").await.unwrap().unwrap().held };

    // Read-only: no button, and a POST is refused even with the right token.
    let read_only = router(provider.clone(), DashboardOptions::new());
    assert!(!get(&read_only, "/?view=locks").await.1.contains("Release…"));
    let (status, _) = post(&read_only, &form(Some(TOKEN))).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(is_held().await);

    let releasing = router(
        provider.clone(),
        DashboardOptions::new().allow_release(TOKEN).unwrap(),
    );
    assert!(get(&releasing, "/?view=locks").await.1.contains("Release…"));
    // The first step only asks: what, and the token.
    let (status, page) = post(&releasing, &form(None)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("Release this lock?") && page.contains(r#"name="release_token""#));
    assert!(is_held().await);
    let (status, _) = post(&releasing, &form(Some("tr0ub4dor&4-correct-horse"))).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(is_held().await);
    let (status, page) = post(&releasing, &form(Some(TOKEN))).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(!is_held().await);
    assert!(!page.contains("tr0ub4dor"), "the token is never rendered");
    // That lease is over: a second release changes nothing.
    let (status, _) = post(&releasing, &form(Some(TOKEN))).await;
    assert_eq!(status, StatusCode::CONFLICT);
}

#[tokio::test]
async fn thousands_of_locks_are_paged_and_filtered() {
    let provider = InMemoryLockProvider::new();
    let executor = LockingTaskExecutor::new(provider.clone());
    let mut held = Vec::new();
    for i in 0..1200 {
        let family = if i % 2 == 0 { "billing" } else { "reports" };
        let name = format!("{family}-{i:04}");
        held.push(executor.try_lock(&lock(&name)).await.unwrap().unwrap());
    }
    let app = router(provider, DashboardOptions::new().page_size(100));
    let rows = |page: &str| page.matches(r#"<tr class="lock""#).count();

    let (_, first) = get(&app, "/?view=locks").await;
    assert_eq!(rows(&first), 100);
    assert!(first.contains(r#"href="?view=locks&amp;prefix=&amp;after=billing-0198""#));
    let (_, filtered) = get(&app, "/?view=locks&prefix=reports-").await;
    assert_eq!(rows(&filtered), 100);
    assert!(!filtered.contains(r#"data-name="billing-"#));
    let (_, last) = get(&app, "/?view=locks&prefix=reports-&after=reports-1099").await;
    assert_eq!(rows(&last), 50);
    assert!(
        !last.contains("next-page"),
        "the last page links no further"
    );
}

#[tokio::test]
async fn it_mounts_under_a_path() {
    let app = Router::new().nest(
        "/ops/shedlock",
        router(InMemoryLockProvider::new(), DashboardOptions::new()),
    );
    let (status, page) = get(&app, "/ops/shedlock").await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("<h2>Jobs</h2>"), "it opens on the jobs");
    let (status, page) = get(&app, "/ops/shedlock?view=locks").await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("<h2>Locks</h2>"));
    // The other pages are the same path with a query string: links stay under the mount.
    let (status, page) = get(&app, "/ops/shedlock?lock=nightly").await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("No runs recorded."), "{page}");
}

#[tokio::test]
async fn elections_runs_and_the_timeline() {
    let provider = InMemoryLockProvider::new().with_holder("web-1");
    let election = LeaderElection::builder("batch", provider.clone())
        .start()
        .unwrap();
    election
        .subscribe()
        .wait_for(|state| matches!(state, LeaderState::Leader { .. }))
        .await
        .unwrap();
    // A run that failed, and one whose instance died: still marked running, its lock free.
    // Their locks were held to run them (the dashboard lists runs under their locks).
    let executor = LockingTaskExecutor::new(provider.clone());
    for name in ["import", "report"] {
        let lease = executor.try_lock(&lock(name)).await.unwrap().unwrap();
        lease.release().await.unwrap();
    }
    let failed = RunStart::new("import", "import", None, "web-2", 3);
    provider.run_started(&failed).await.unwrap();
    let end = RunEnd::with_error(RunOutcome::Failed, "upstream said 503");
    provider.run_finished(&failed, &end).await.unwrap();
    let died = RunStart::new("report", "report", None, "web-3", 4);
    provider.run_started(&died).await.unwrap();

    let options = DashboardOptions::new().elections(["batch", "nobody-runs"]);
    let (_, page) = get(&router(provider, options), "/?view=locks").await;
    assert!(page.contains(
        r#"<tr class="election" data-name="batch"><td class="name">batch</td><td class="holder">web-1</td>"#
    ));
    assert!(page.contains(r#"data-name="nobody-runs"><td class="name">nobody-runs</td><td class="meta" colspan="3">no leader</td>"#));
    assert!(page.contains(r#"<tr class="run failed" data-lock="import">"#));
    assert!(page.contains(r#"<tr class="run interrupted" data-lock="report">"#));
    assert_eq!(
        page.matches(r#"<rect class="run "#).count(),
        2,
        "a bar per run"
    );
    assert!(
        page.contains(r#"<rect class="run failed""#)
            && page.contains(r#"<rect class="run interrupted""#)
    );
    election.resign().await;
}

/// Issue 29, item 5: `Host: evil.example` got the page (DNS rebinding: a name the attacker
/// points at 127.0.0.1 reads the dashboard from the attacker's page).
#[tokio::test]
async fn another_host_gets_no_page() {
    let provider = InMemoryLockProvider::new().with_holder("web-1");
    let _held = LockingTaskExecutor::new(provider.clone())
        .try_lock(&lock("nightly"))
        .await
        .unwrap()
        .unwrap();
    let app = router(provider.clone(), DashboardOptions::new());
    let request = |host: Option<&str>, uri: &str| {
        let mut request = Request::get(uri);
        if let Some(host) = host {
            request = request.header(header::HOST, host);
        }
        request.body(Body::empty()).unwrap()
    };
    for host in ["localhost:8080", "127.0.0.1", "[::1]:1234"] {
        let (status, page) = call(&app, request(Some(host), "/?view=locks")).await;
        assert_eq!(status, StatusCode::OK, "{host}");
        assert!(page.contains(r#"data-name="nightly""#));
    }
    for (host, uri) in [
        (Some("evil.example"), "/"),
        (Some("evil.example:8080"), "/?lock=nightly"),
        (Some("127.0.0.1.evil.example"), "/"),
        (None, "/"),
        (Some("localhost"), "http://evil.example/"),
    ] {
        let (status, page) = call(&app, request(host, uri)).await;
        assert_eq!(status, StatusCode::MISDIRECTED_REQUEST, "{host:?} {uri}");
        assert!(
            !page.contains("nightly") && !page.contains("<html"),
            "{page}"
        );
    }
    // A host of one's own, when configured, and then only it.
    let proxied = router(
        provider,
        DashboardOptions::new()
            .allowed_hosts(["dash.example.com"])
            .unwrap(),
    );
    let (status, _) = call(&proxied, request(Some("dash.example.com"), "/")).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = call(&proxied, request(Some("localhost"), "/")).await;
    assert_eq!(status, StatusCode::MISDIRECTED_REQUEST);
}

/// Issue 29, item 5: a cross-origin POST with the token released a lock.
#[tokio::test]
async fn a_release_from_another_origin_is_refused_before_anything() {
    let provider = InMemoryLockProvider::new().with_holder("web-1");
    let held = LockingTaskExecutor::new(provider.clone())
        .try_lock(&lock("nightly"))
        .await
        .unwrap()
        .unwrap();
    let token = held.fencing_token().to_string();
    let form = [
        ("name", "nightly"),
        ("holder", "web-1"),
        ("token", token.as_str()),
        ("release_token", TOKEN),
    ];
    let app = router(
        provider.clone(),
        DashboardOptions::new().allow_release(TOKEN).unwrap(),
    );
    let is_held = || async { provider.lock_record("nightly").await.unwrap().unwrap().held };
    for headers in [
        vec![
            (header::HOST, HOST),
            (header::ORIGIN, "http://evil.example"),
        ],
        vec![(header::HOST, HOST), (header::ORIGIN, "null")],
        // Another page on this machine (another port) is another origin.
        vec![
            (header::HOST, HOST),
            (header::ORIGIN, "http://127.0.0.1:3000"),
        ],
        vec![
            (header::HOST, HOST),
            (
                header::REFERER,
                "http://evil.example/?to=http://127.0.0.1:8080/",
            ),
        ],
        // Neither header: nothing tells where the form came from.
        vec![(header::HOST, HOST)],
        // A rebound name: refused for its host already.
        vec![
            (header::HOST, "evil.example:8080"),
            (header::ORIGIN, "http://evil.example:8080"),
        ],
    ] {
        let (status, page) = post_with(&app, &form, &headers).await;
        assert!(
            status == StatusCode::FORBIDDEN || status == StatusCode::MISDIRECTED_REQUEST,
            "{headers:?}: {status}"
        );
        assert!(!page.contains("<html"), "{page}");
        assert!(is_held().await, "released by {headers:?}");
    }
    // The same form from the dashboard's own page (its Referer when no Origin is sent).
    let own = [
        (header::HOST, HOST),
        (header::REFERER, "http://127.0.0.1:8080/?prefix="),
    ];
    let (status, page) = post_with(&app, &form, &own).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(!is_held().await);
}

/// Issue 29, item 5: wrong tokens could be tried without limit (3,000 in 0.75 s). The clock
/// is tokio's, paused: the bucket refills only when the test says so.
#[tokio::test(start_paused = true)]
async fn wrong_tokens_are_answered_429_after_a_burst() {
    let provider = InMemoryLockProvider::new().with_holder("web-1");
    let held = LockingTaskExecutor::new(provider.clone())
        .try_lock(&lock("nightly"))
        .await
        .unwrap()
        .unwrap();
    let token = held.fencing_token().to_string();
    let app = router(
        provider.clone(),
        DashboardOptions::new().allow_release(TOKEN).unwrap(),
    );
    let attempt = |release_token: String| {
        let (app, token) = (&app, &token);
        async move {
            let form = [
                ("name", "nightly"),
                ("holder", "web-1"),
                ("token", token.as_str()),
                ("release_token", release_token.as_str()),
            ];
            post(app, &form).await.0
        }
    };
    let (mut wrong, mut limited) = (0, 0);
    for guess in 0..3000 {
        match attempt(format!("guess-{guess:012}-xxxxx")).await {
            StatusCode::FORBIDDEN => wrong += 1,
            StatusCode::TOO_MANY_REQUESTS => limited += 1,
            other => panic!("guess {guess}: {other}"),
        }
    }
    assert_eq!((wrong, limited), (10, 2990));
    // Spent: the right token is not told apart either, and releases nothing.
    assert_eq!(
        attempt(TOKEN.to_owned()).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert!(provider.lock_record("nightly").await.unwrap().unwrap().held);
    // The answer says when to come back, and no more than that.
    let body = format!("name=nightly&holder=web-1&token={token}&release_token=x");
    let request = Request::post("/")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(header::HOST, HOST)
        .header(header::ORIGIN, ORIGIN)
        .body(Body::from(body))
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(response.headers()[header::RETRY_AFTER], "2");
    // The first step (confirmation, no token) is not an attempt.
    let confirm = [
        ("name", "nightly"),
        ("holder", "web-1"),
        ("token", token.as_str()),
    ];
    assert_eq!(post(&app, &confirm).await.0, StatusCode::OK);
    // One attempt comes back every 2 s.
    tokio::time::advance(Duration::from_secs(2)).await;
    assert_eq!(attempt(TOKEN.to_owned()).await, StatusCode::OK);
    assert!(!provider.lock_record("nightly").await.unwrap().unwrap().held);
}

/// A lock's runs a page at a time, with `before` cursors: each once, newest first; one run by
/// its cursor, whole; a cursor that is none is a 400, a run the store no longer keeps says so.
#[tokio::test]
async fn a_locks_runs_are_paged_with_cursors() {
    let provider = InMemoryLockProvider::new().with_holder("web-1");
    let executor = LockingTaskExecutor::new(provider.clone());
    for _ in 0..120 {
        let held = executor.try_lock(&lock("hourly")).await.unwrap().unwrap();
        let start = RunStart::new("hourly", "hourly", None, "web-1", held.fencing_token());
        provider.run_started(&start).await.unwrap();
        let end = RunEnd::with_error(RunOutcome::Failed, format!("run {}", held.fencing_token()));
        provider.run_finished(&start, &end).await.unwrap();
        held.release().await.unwrap();
    }
    let app = router(provider, DashboardOptions::new());
    let mut tokens = Vec::new();
    let mut query = "/?lock=hourly".to_owned();
    let mut pages = 0;
    loop {
        let (status, page) = get(&app, &query).await;
        assert_eq!(status, StatusCode::OK, "{query}");
        pages += 1;
        for cell in page.split(r#"<td class="error">run "#).skip(1) {
            tokens.push(cell.split('<').next().unwrap().parse::<u64>().unwrap());
        }
        match page.split(r#"<a id="older" href=""#).nth(1) {
            Some(rest) => {
                let next = rest.split('"').next().unwrap().replace("&amp;", "&");
                query = format!("/{next}");
            }
            None => break,
        }
    }
    assert_eq!(pages, 3);
    let newest_first: Vec<u64> = (1..=120).rev().collect();
    assert_eq!(tokens, newest_first, "every run once, newest first");

    // The overview lists 5 and links the rest.
    let (_, overview) = get(&app, "/?view=locks").await;
    assert_eq!(overview.matches(r#"<tr class="run failed""#).count(), 5);
    assert!(overview.contains(r#"<a class="all-runs" href="?lock=hourly">"#));

    let (status, page) = get(&app, "/?lock=").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        page.contains("<h2>Jobs</h2>"),
        "an empty lock is the page the dashboard opens on"
    );
    let (status, _) = get(&app, "/?run=not-a-cursor").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = get(&app, "/?lock=hourly&before=1-2").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, page) = get(&app, "/?run=1000-1-1-hourly").await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("The store keeps no such run"), "{page}");
}

/// Runs under a name the store keeps no lock record of (deleted by hand, or written by another
/// tool) still show, when they are among the store's newest, on the page their name falls in.
#[tokio::test]
async fn recent_runs_without_a_lock_record_are_shown() {
    let provider = InMemoryLockProvider::new().with_holder("web-1");
    let executor = LockingTaskExecutor::new(provider.clone());
    for name in ["a", "c", "e"] {
        let lease = executor.try_lock(&lock(name)).await.unwrap().unwrap();
        lease.release().await.unwrap();
    }
    for name in ["b", "z"] {
        let start = RunStart::new(name, name, None, "web-2", 1);
        provider.run_started(&start).await.unwrap();
        let end = RunEnd::with_error(RunOutcome::Failed, format!("{name} failed"));
        provider.run_finished(&start, &end).await.unwrap();
    }
    let app = router(provider, DashboardOptions::new().page_size(2));
    let (_, first) = get(&app, "/?view=locks").await;
    let (_, second) = get(&app, "/?view=locks&prefix=&after=c").await;
    let shown = |page: &str, name: &str| {
        page.contains(&format!(r#"<table class="runs" data-lock="{name}">"#))
    };
    // "b" sorts between the first page's locks, "z" after the last page's.
    assert!(shown(&first, "b") && !shown(&second, "b"));
    assert!(!shown(&first, "z") && shown(&second, "z"));
    assert!(!second.contains("next-page"), "the last page");
    assert!(first.contains("(no lock record)"));
}
