//! One page for a whole fleet: every lock of a shedlock store (held or free, holder, the lease
//! counting down, fencing token, its last run), every election named to it and its leader, and
//! per lock the latest runs from the run records (outcome, duration, instance, the error cut
//! short), under a timeline of the last hour drawn server-side as SVG, coloured by outcome.
//! Each run links to its own page with the whole error; each lock to its runs, a page at a
//! time.
//!
//! [`router`] is an axum [`Router`](axum::Router) to mount in a service of yours, or to serve
//! alone (the `shedlock dashboard` command does). It works on every store, through
//! [`LockInspector`](shedlock_core::LockInspector) and [`RunLog`](shedlock_core::RunLog).
//!
//! - **Bounded**: a page reads a page of locks ([`DashboardOptions::page_size`]) and, per lock
//!   of it, its latest runs, asked of the store with the lock and a limit
//!   ([`RunQuery::lock`](shedlock_core::RunQuery::lock)`(name).limit(n)`); so every lock is on
//!   its page however old its only run, and what a page reads and holds depends on the
//!   options, never on the history (under 500 KB with the defaults).
//! - **Guarded**: it answers only the hosts allowed ([`DashboardOptions::allowed_hosts`];
//!   `localhost`, `127.0.0.1` and `[::1]` by default), so a DNS name rebound to this address
//!   reads nothing (421).
//! - **Read-only** unless [`DashboardOptions::allow_release`] gives a release token (at least
//!   [`MIN_RELEASE_TOKEN_CHARS`]): then a held lock can be released from the page, by POST
//!   from the page itself (its `Origin`, else its `Referer`), after a confirmation page that
//!   asks for the token; tokens can be tried 10 at once, then one every 2 s (429 beyond). Bind
//!   it to `127.0.0.1` (the command does) or put it behind your own access control.
//! - **Escaped**: every name, holder and error text is HTML-escaped (maud escapes every value it
//!   writes; nothing is written raw but the page's own CSS, script and SVG numbers). Nothing
//!   secret is rendered: the release token is never written back.
//! - **Paged**: locks are listed a page at a time and can be filtered by name prefix; a lock's
//!   runs are paged with cursors ([`RunQuery::before`](shedlock_core::RunQuery::before)).
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
