//! The router: the pages (GET: the jobs, the locks, one lock's runs, one run, told apart by
//! the query string) and the two steps of a release or of a job's switch (POST: pause, resume,
//! run now), on one path so the router can be mounted anywhere. Every request is first checked
//! for its host, every POST for its origin and then against the attempts left.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{ConnectInfo, Form, Query, State};
use axum::http::{Extensions, HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use shedlock_core::{Error, Fleet, LockProvider, LockRecord};

use crate::DashboardOptions;
use crate::form::{JobAction, JobForm, Posted, PostedForm, ReleaseForm};
use crate::guard::{Attempts, Refused, check_host, check_origin};
use crate::jobs::jobs_page;
use crate::read::{PageQuery, Unreadable, history, one_run, snapshot};
use crate::view;

struct Dashboard {
    provider: Arc<dyn LockProvider>,
    /// The fleet on the provider's board; `None` for a store that keeps none.
    fleet: Option<Fleet>,
    options: DashboardOptions,
    attempts: Attempts,
}

/// The dashboard over `provider` (any lock store; an `Arc` of one too), as a router with one
/// path, `/`: mount it with `Router::nest`, or serve it alone.
pub fn router(provider: impl LockProvider, options: DashboardOptions) -> Router {
    let provider: Arc<dyn LockProvider> = Arc::new(provider);
    let dashboard = Arc::new(Dashboard {
        fleet: Fleet::of_provider(Arc::clone(&provider)),
        provider,
        options,
        attempts: Attempts::new(),
    });
    Router::new()
        .route("/", get(page).post(posted))
        .with_state(dashboard)
}

async fn page(
    State(dashboard): State<Arc<Dashboard>>,
    headers: HeaderMap,
    uri: Uri,
    Query(query): Query<PageQuery>,
) -> Response {
    let options = &dashboard.options;
    if let Err(refused) = check_host(&options.allowed_hosts, &headers, &uri) {
        return refusal(refused);
    }
    let provider = &*dashboard.provider;
    let lock = query.lock.as_deref().filter(|lock| !lock.is_empty());
    let read = match (&query.run, lock) {
        (Some(run), _) => one_run(provider, run)
            .await
            .map(|run| view::run_page(&run, options)),
        (None, Some(lock)) => history(provider, lock, query.before.as_deref())
            .await
            .map(|history| view::history_page(&history, options)),
        (None, None) if query.locks_view() => snapshot(provider, options, &query)
            .await
            .map(|snapshot| view::page(&snapshot, options, &query)),
        (None, None) => jobs_page(provider, dashboard.fleet.as_ref(), options, &query)
            .await
            .map(|page| view::jobs_page(&page, options, &query))
            .map_err(Unreadable::Store),
    };
    match read {
        Ok(page) => html(StatusCode::OK, page),
        Err(error @ Unreadable::BadCursor(_)) => html(
            StatusCode::BAD_REQUEST,
            view::message("No such page", &error.to_string()),
        ),
        Err(error) => html(
            StatusCode::SERVICE_UNAVAILABLE,
            view::message("The store could not be read", &error.to_string()),
        ),
    }
}

/// A form posted: a release, or a job's switch. Both go through the same guards: host, origin,
/// the release token's flag, the confirmation, the attempts left, the token.
async fn posted(
    State(dashboard): State<Arc<Dashboard>>,
    headers: HeaderMap,
    uri: Uri,
    extensions: Extensions,
    Form(form): Form<Posted>,
) -> Response {
    let options = &dashboard.options;
    // Checked before anything else: a page of another site gets no answer but the refusal.
    if let Err(refused) =
        check_host(&options.allowed_hosts, &headers, &uri).and_then(|()| check_origin(&headers))
    {
        return refusal(refused);
    }
    if !options.release_allowed() {
        return html(
            StatusCode::FORBIDDEN,
            view::message(
                "Switching is off",
                "This dashboard is read-only: it was started without a release token, so it \
                 neither releases locks nor pauses, resumes or runs jobs.",
            ),
        );
    }
    match form.into_form() {
        Some(PostedForm::Release(form)) => release(&dashboard, form).await,
        Some(PostedForm::Job(form)) => {
            // Who switched it, as the board keeps it: this dashboard, and the caller's address
            // when the server was started with it (`into_make_service_with_connect_info`).
            let by = match extensions.get::<ConnectInfo<SocketAddr>>() {
                Some(ConnectInfo(address)) => format!("dashboard ({address})"),
                None => "dashboard".to_owned(),
            };
            switch_job(&dashboard, form, &by).await
        }
        None => html(
            StatusCode::UNPROCESSABLE_ENTITY,
            view::message("Incomplete form", "The form lacks a field it needs."),
        ),
    }
}

async fn release(dashboard: &Dashboard, form: ReleaseForm) -> Response {
    let options = &dashboard.options;
    let Some(given) = &form.release_token else {
        return html(StatusCode::OK, view::confirm_release(&form));
    };
    // Counted before the token is compared: once the attempts are spent no answer tells a
    // right token from a wrong one.
    if let Err(refused) = dashboard.attempts.take() {
        return refusal(refused);
    }
    if !options.release_token_is(given) {
        return html(
            StatusCode::FORBIDDEN,
            view::message("Not released", "Wrong release token."),
        );
    }
    let Some(inspector) = dashboard.provider.inspector() else {
        return html(
            StatusCode::SERVICE_UNAVAILABLE,
            view::message("Not released", "This lock store offers no inspection."),
        );
    };
    // The lease the page showed, if the store still has it; anything else is left alone.
    let shown =
        |record: &LockRecord| record.holder == form.holder && record.fencing_token == form.token;
    let released = match inspector.lock_record(&form.name).await {
        Ok(Some(record)) if shown(&record) => inspector.release_lock(&record).await,
        Ok(_) => Ok(false),
        Err(error) => Err(error),
    };
    match released {
        Ok(true) => html(
            StatusCode::OK,
            view::message(
                "Released",
                &format!(
                    "The lease of `{}` (token {}) has ended.",
                    form.name, form.token
                ),
            ),
        ),
        Ok(false) => html(
            StatusCode::CONFLICT,
            view::message(
                "Not released",
                &format!(
                    "`{}` is no longer held by {} with token {}: left alone.",
                    form.name, form.holder, form.token
                ),
            ),
        ),
        Err(error) => html(
            StatusCode::SERVICE_UNAVAILABLE,
            view::message("Not released", &error.to_string()),
        ),
    }
}

/// Pauses, resumes or asks a run of a job across the fleet, once confirmed with the token.
async fn switch_job(dashboard: &Dashboard, form: JobForm, by: &str) -> Response {
    let options = &dashboard.options;
    let Some(given) = &form.release_token else {
        return html(StatusCode::OK, view::confirm_job(&form));
    };
    let not_done = match form.action {
        JobAction::Pause => "Not paused",
        JobAction::Resume => "Not resumed",
        JobAction::RunNow => "No run asked for",
    };
    // As for a release: counted before the token is compared.
    if let Err(refused) = dashboard.attempts.take() {
        return refusal(refused);
    }
    if !options.release_token_is(given) {
        return html(
            StatusCode::FORBIDDEN,
            view::message(not_done, "Wrong release token."),
        );
    }
    let Some(fleet) = &dashboard.fleet else {
        return html(
            StatusCode::SERVICE_UNAVAILABLE,
            view::message(
                not_done,
                "This lock store keeps no board of the fleet's jobs: its jobs cannot be paused, \
                 resumed or run from here.",
            ),
        );
    };
    let job = form.job.as_str();
    // Each is one step on the store: done whole, or (on an error) not at all.
    let done = match form.action {
        JobAction::Pause => fleet.pause(job, by).await.map(|paused| {
            (
                StatusCode::OK,
                "Paused",
                format!(
                    "`{job}` is paused across the fleet, by {} since {}: no instance starts a \
                     tick of it from its next poll on.",
                    paused.by,
                    view::time(paused.at)
                ),
            )
        }),
        JobAction::Resume => fleet.resume(job).await.map(|resumed| {
            if resumed {
                (
                    StatusCode::OK,
                    "Resumed",
                    format!("`{job}` is resumed: its instances start its ticks again."),
                )
            } else {
                (
                    StatusCode::CONFLICT,
                    not_done,
                    format!("`{job}` was not paused: left alone."),
                )
            }
        }),
        JobAction::RunNow => fleet.run_now(job, by).await.map(|request| {
            (
                StatusCode::OK,
                "Run asked for",
                format!(
                    "A run of `{job}` is asked for, by {} at {}: the first instance carrying \
                     it to poll runs it, once.",
                    request.by,
                    view::time(request.at)
                ),
            )
        }),
    };
    match done {
        Ok((status, title, text)) => html(status, view::message(title, &text)),
        Err(error @ Error::InvalidConfig { .. }) => html(
            StatusCode::BAD_REQUEST,
            view::message(not_done, &error.to_string()),
        ),
        Err(error) => html(
            StatusCode::SERVICE_UNAVAILABLE,
            view::message(not_done, &error.to_string()),
        ),
    }
}

fn html(status: StatusCode, body: maud::Markup) -> Response {
    (
        status,
        [
            // The page is the operator's own view: never framed by another site, never
            // cached, and it loads nothing from anywhere.
            (header::X_FRAME_OPTIONS, "DENY"),
            (header::CACHE_CONTROL, "no-store"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::CONTENT_SECURITY_POLICY, CSP),
        ],
        Html(body.into_string()),
    )
        .into_response()
}

/// Nothing but the page's own inline style and script, its forms to itself.
const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; \
                   connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// A request turned away: a short plain text, never the page.
fn refusal(refused: Refused) -> Response {
    let (status, text) = match refused {
        Refused::Host => (
            StatusCode::MISDIRECTED_REQUEST,
            "421: this dashboard does not answer for that host (see its allowed hosts: \
             DashboardOptions::allowed_hosts, shedlock dashboard --allow-host)\n",
        ),
        Refused::Origin => (
            StatusCode::FORBIDDEN,
            "403: a release or a job's switch must come from the dashboard's own page \
             (same Origin)\n",
        ),
        Refused::TooManyAttempts(_) => (
            StatusCode::TOO_MANY_REQUESTS,
            "429: too many release token attempts; try again in a few seconds\n",
        ),
    };
    let mut response = (status, text).into_response();
    if let Refused::TooManyAttempts(wait) = refused {
        let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        if let Ok(value) = HeaderValue::from_str(&seconds.max(1).to_string()) {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
    }
    response
}
