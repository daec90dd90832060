//! The router: the page (GET) and the two steps of a release (POST), on one path so the router
//! can be mounted anywhere.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Form, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use shedlock_core::{LockProvider, LockRecord};

use crate::DashboardOptions;
use crate::form::ReleaseForm;
use crate::read::{PageQuery, snapshot};
use crate::view;

struct Dashboard {
    provider: Arc<dyn LockProvider>,
    options: DashboardOptions,
}

/// The dashboard over `provider` (any lock store; an `Arc` of one too), as a router with one
/// path, `/`: mount it with `Router::nest`, or serve it alone.
pub fn router(provider: impl LockProvider, options: DashboardOptions) -> Router {
    let dashboard = Arc::new(Dashboard {
        provider: Arc::new(provider),
        options,
    });
    Router::new()
        .route("/", get(page).post(release))
        .with_state(dashboard)
}

async fn page(State(dashboard): State<Arc<Dashboard>>, Query(query): Query<PageQuery>) -> Response {
    match snapshot(&*dashboard.provider, &dashboard.options, &query).await {
        Ok(snapshot) => html(
            StatusCode::OK,
            view::page(&snapshot, &dashboard.options, &query),
        ),
        Err(error) => html(
            StatusCode::SERVICE_UNAVAILABLE,
            view::message("The store could not be read", &error.to_string()),
        ),
    }
}

async fn release(
    State(dashboard): State<Arc<Dashboard>>,
    Form(form): Form<ReleaseForm>,
) -> Response {
    let options = &dashboard.options;
    if !options.release_allowed() {
        return html(
            StatusCode::FORBIDDEN,
            view::message(
                "Releasing is off",
                "This dashboard is read-only: it was started without a release token.",
            ),
        );
    }
    let Some(given) = &form.release_token else {
        return html(StatusCode::OK, view::confirm_release(&form));
    };
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

fn html(status: StatusCode, body: maud::Markup) -> Response {
    (
        status,
        // The page is the operator's own view: never framed by another site.
        [(header::X_FRAME_OPTIONS, "DENY")],
        Html(body.into_string()),
    )
        .into_response()
}
