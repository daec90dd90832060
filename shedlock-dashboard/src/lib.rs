//! One page for a whole fleet: every lock of a shedlock store (held or free, holder, the lease
//! counting down, fencing token), every election named to it and its leader, and per job the
//! recent runs from the run records (outcome, duration, instance, error), under a timeline of
//! the last hour drawn server-side as SVG.
//!
//! [`router`] is an axum [`Router`](axum::Router) to mount in a service of yours, or to serve
//! alone (the `shedlock dashboard` command does). It works on every store, through
//! [`LockInspector`](shedlock_core::LockInspector) and [`RunLog`](shedlock_core::RunLog).
//!
//! - **Read-only** unless [`DashboardOptions::allow_release`] gives a release token: then a
//!   held lock can be released from the page, by POST, after a confirmation page that asks for
//!   the token. Bind it to `127.0.0.1` (the command does) or put it behind your own access
//!   control.
//! - **Escaped**: every name, holder and error text is HTML-escaped (maud escapes every value it
//!   writes; nothing is written raw but the page's own CSS, script and SVG numbers). Nothing
//!   secret is rendered: the release token is never written back.
//! - **Paged**: locks are listed a page at a time and can be filtered by name prefix, so a
//!   store with thousands of locks stays one quick page.
//! - **Self-refreshing**: a few lines of script count leases down every second and reload the
//!   page (not while a form field has focus); without script, a meta refresh.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use shedlock_core::InMemoryLockProvider;
//! use shedlock_dashboard::{DashboardOptions, router};
//!
//! let provider = InMemoryLockProvider::new();
//! let app = axum::Router::new().nest("/shedlock", router(provider, DashboardOptions::new()));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! axum::serve(listener, app).await?;
//! # Ok(())
//! # }
//! ```

mod form;
mod guard;
mod options;
mod read;
mod routes;
mod view;

pub use options::{DashboardOptions, MIN_RELEASE_TOKEN_CHARS};
pub use routes::router;
