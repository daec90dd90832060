//! The page after a month of a fleet's history (issue 29, item 4): it stays small, shows every
//! lock (a nightly job's failure is not pushed out by busy jobs), writes each error once and
//! short, with the whole text on the run's own page. The history is written through the
//! store's own path (acquire, run started, run finished, release) on an in-memory store whose
//! clock the test moves.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use axum::Router;
use axum::http::StatusCode;
use shedlock_core::{
    InMemoryLockProvider, LockConfiguration, LockProvider, MAX_ERROR_LEN, ManualClock, RunEnd,
    RunLog, RunOutcome, RunStart,
};
use shedlock_dashboard::{DashboardOptions, router};

use common::get;

/// The page limit the issue sets.
const MAX_PAGE: usize = 500 * 1024;
const DAY: Duration = Duration::from_secs(24 * 3600);

/// An error as long as the store keeps, different per run and recognisable by its start.
fn long_error(lock: &str, day: u64) -> String {
    let head = format!("{lock} failed on day {day}: upstream said 503 ");
    let mut text = head.clone();
    while text.len() < MAX_ERROR_LEN {
        text.push_str("and then the retry budget ran out; ");
    }
    text.truncate(MAX_ERROR_LEN);
    text
}

/// Instances as a fleet names them (host:pid:random), a new one at every restart.
fn instance(restart: u64) -> String {
    format!(
        "host-{:02}.fleet.example:{}:{:08x}",
        restart % 12,
        4000 + restart,
        restart.wrapping_mul(0x9e37_79b9) & 0xffff_ffff
    )
}

/// One run of `name` at the clock's time, through the store's own path.
async fn run(
    store: &InMemoryLockProvider,
    clock: &ManualClock,
    name: &str,
    holder: &str,
    length: Duration,
    error: Option<String>,
) {
    let provider = store.with_holder(holder);
    let config = LockConfiguration::new(name, Duration::from_secs(600), Duration::ZERO).unwrap();
    let lease = provider.acquire(&config).await.unwrap().expect("free");
    let start = RunStart::new(name, name, None, holder, lease.fencing_token());
    provider.run_started(&start).await.unwrap();
    clock.advance(length);
    let end = match error {
        Some(error) => RunEnd::with_error(RunOutcome::Failed, error),
        None => RunEnd::succeeded(),
    };
    provider.run_finished(&start, &end).await.unwrap();
    assert!(provider.release(&lease).await.unwrap());
}

/// A fleet's history.
struct Fleet {
    /// Days of it, ending at the clock's time.
    days: u64,
    /// Locks run once a day (every third night failing with a long error).
    nightlies: usize,
    /// Locks run every 10 s in the last `ticks` ticks (one in five failing with a long error).
    busy: usize,
    ticks: usize,
    /// Whether the busy locks also ran every three hours of every day (one in seven failing).
    busy_days: bool,
}

/// `fleet`'s history, ending at the clock's time when it returns, and one lock (`old-only`)
/// whose only run failed `days` ago; an instance restart a day.
async fn month(fleet: Fleet) -> (InMemoryLockProvider, Arc<ManualClock>) {
    let Fleet {
        days,
        nightlies,
        busy,
        ticks: busy_runs,
        busy_days,
    } = fleet;
    let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_790_000_000);
    let clock = Arc::new(ManualClock::new(start));
    // A month kept (the default retention is two weeks).
    let store = InMemoryLockProvider::new()
        .with_clock(clock.clone())
        .keeping_runs(DAY * 40, 1000)
        .unwrap();
    run(
        &store,
        &clock,
        "old-only",
        &instance(0),
        Duration::from_secs(40),
        Some(long_error("old-only", 0)),
    )
    .await;
    for day in 0..days {
        clock.set(start + DAY * day as u32 + Duration::from_secs(60));
        for n in 0..nightlies {
            let name = format!("nightly-{n:03}");
            let error = (day % 3 == 2).then(|| long_error(&name, day));
            run(
                &store,
                &clock,
                &name,
                &instance(day),
                Duration::from_secs(1),
                error,
            )
            .await;
        }
        for hour in (3..24).step_by(3).filter(|_| busy_days) {
            clock.set(start + DAY * day as u32 + Duration::from_secs(3600 * hour));
            for n in 0..busy {
                let name = format!("busy-{n:02}");
                let error = (hour == 12).then(|| long_error(&name, day));
                let holder = instance(day);
                run(
                    &store,
                    &clock,
                    &name,
                    &holder,
                    Duration::from_secs(2),
                    error,
                )
                .await;
            }
        }
    }
    // The busy locks' last ticks, up to the end of the last day.
    let end = start + DAY * days as u32;
    clock.set(end - Duration::from_secs(10 * busy_runs as u64));
    for tick in 0..busy_runs {
        for n in 0..busy {
            let name = format!("busy-{n:02}");
            let error = (tick % 5 == 4).then(|| long_error(&name, tick as u64));
            run(
                &store,
                &clock,
                &name,
                &instance(days + (tick % 3) as u64),
                Duration::from_millis(200),
                error,
            )
            .await;
        }
        clock.advance(Duration::from_secs(10) - Duration::from_millis(200) * busy as u32);
    }
    clock.set(end);
    (store, clock)
}

/// Every page of the overview, following its "next" links: (query, page).
async fn every_page(app: &Router) -> Vec<(String, String)> {
    let mut pages = Vec::new();
    let mut query = "/?view=locks".to_owned();
    loop {
        let (status, page) = get(app, &query).await;
        assert_eq!(status, StatusCode::OK, "{query}: {page}");
        let next = page
            .split(r#"<a id="next-page" href=""#)
            .nth(1)
            .map(|rest| rest.split('"').next().unwrap().replace("&amp;", "&"));
        pages.push((query, page));
        match next {
            Some(next) => query = format!("/{next}"),
            None => return pages,
        }
    }
}

fn names_in(page: &str, marker: &str) -> BTreeSet<String> {
    page.split(marker)
        .skip(1)
        .map(|rest| rest.split('"').next().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_month_of_history_is_a_small_page_showing_every_lock() {
    // 150 nightly locks x 30 nights, 50 busy locks x 45 ticks (more than a page draws), and
    // the old one: 6,751 runs, a third of the nights and a fifth of the ticks failing with
    // 2,000-byte errors.
    let fleet = Fleet {
        days: 30,
        nightlies: 150,
        busy: 50,
        ticks: 45,
        busy_days: false,
    };
    let (store, _clock) = month(fleet).await;
    let app = router(store.clone(), DashboardOptions::new());
    let pages = every_page(&app).await;
    let mut locks = BTreeSet::new();
    let mut with_runs = BTreeSet::new();
    for (query, page) in &pages {
        assert!(page.len() < MAX_PAGE, "{query}: {} bytes", page.len());
        // Every error once, cut short; the whole text is only on the run's own page.
        assert!(
            !page.contains(&"and then the retry budget ran out; ".repeat(4)),
            "{query}"
        );
        locks.extend(names_in(page, r#"<tr class="lock" data-name=""#));
        with_runs.extend(names_in(page, r#"<table class="runs" data-lock=""#));
    }
    // The busy locks come first by name: their page is the fullest.
    assert!(pages[0].1.contains(r#"data-lock="busy-00""#));
    if let Ok(path) = std::env::var("SHEDLOCK_DASHBOARD_MONTH_PAGE") {
        std::fs::write(path, &pages[0].1).unwrap();
    }
    eprintln!(
        "{} pages; the first (50 busy locks) {} bytes",
        pages.len(),
        pages[0].1.len()
    );
    assert_eq!(locks.len(), 201, "every lock is on a page");
    assert_eq!(with_runs, locks, "with its latest runs");

    // The lock whose only run is a month old: its failure is listed, short, linked in full.
    let (_, last) = pages.last().unwrap();
    let row = last
        .split(r#"<tr class="run failed" data-lock="old-only">"#)
        .nth(1)
        .expect("old-only's failure is on its page");
    let row = row.split("</tr>").next().unwrap();
    assert!(
        row.contains("old-only failed on day 0: upstream said 503"),
        "{row}"
    );
    assert_eq!(
        row.matches("old-only failed on day 0").count(),
        1,
        "written once: {row}"
    );
    let link = row
        .split(r#"<a class="whole" href=""#)
        .nth(1)
        .expect("a link to the whole text")
        .split('"')
        .next()
        .unwrap()
        .replace("&amp;", "&");
    let (status, whole) = get(&app, &format!("/{link}")).await;
    assert_eq!(status, StatusCode::OK, "{link}");
    let escaped = long_error("old-only", 0).replace('\'', "&#39;");
    assert!(
        whole.contains(&escaped),
        "the whole error on the run's page"
    );
    assert_eq!(whole.matches("old-only failed on day 0").count(), 1);

    // A lock's older runs, a page at a time with `before` cursors, down to the first night.
    let mut query = "/?lock=nightly-007".to_owned();
    let mut runs = 0;
    loop {
        let (status, page) = get(&app, &query).await;
        assert_eq!(status, StatusCode::OK, "{query}");
        assert!(page.len() < MAX_PAGE);
        runs += page.matches(r#"<tr class="run "#).count();
        match page.split(r#"<a id="older" href=""#).nth(1) {
            Some(rest) => {
                query = format!("/{}", rest.split('"').next().unwrap().replace("&amp;", "&"))
            }
            None => break,
        }
    }
    assert_eq!(runs, 30, "every night once");
}

/// Page bytes and time to render at one day and at thirty days of history (the same fleet):
/// `cargo test -p shedlock-dashboard --release --test month -- --ignored --nocapture`.
#[tokio::test]
#[ignore = "a measurement: prints figures"]
async fn page_figures_at_one_day_and_thirty() {
    for days in [1, 30] {
        let fleet = Fleet {
            days,
            nightlies: 150,
            busy: 50,
            ticks: 60,
            busy_days: true,
        };
        let (store, _clock) = month(fleet).await;
        let records = store
            .runs(&shedlock_core::RunQuery::all())
            .await
            .unwrap()
            .len();
        let app = router(store, DashboardOptions::new());
        let rounds = 20;
        let started = Instant::now();
        let mut bytes = 0;
        for _ in 0..rounds {
            bytes = get(&app, "/?view=locks").await.1.len();
        }
        let each = started.elapsed() / rounds;
        let (_, last) = get(&app, "/?view=locks&prefix=nightly-1").await;
        eprintln!(
            "{days:>2} days: {records} records kept; first page (50 busy locks) {bytes} bytes in {each:?}; a nightly page {} bytes",
            last.len()
        );
    }
}
