//! One page for a whole fleet. It opens on its **jobs**: every job the fleet's instances
//! publish to the store's board ([`Fleet`](shedlock_core::Fleet)), with its schedule (and
//! zone), next fire time, the live instances carrying it (and those running it otherwise: a
//! rolling deploy shows), whether it is paused (by whom, since when), a run asked for (waiting
//! or taken), its lock's last run (outcome, duration) and its failures over the last day, linked
//! to its lock's runs and to the lock. Its **locks** (`?view=locks`): every lock of the store
//! (held or free, holder, the lease counting down, fencing token, its last run), every election
//! named to it and its leader, and per lock the latest runs from the run records (outcome,
//! duration, instance, the error cut short), under a timeline of the last hour drawn
//! server-side as SVG, coloured by outcome. Each run links to its own page with the whole
//! error; each lock to its runs, a page at a time.
//!
//! [`router`] is an axum [`Router`](axum::Router) to mount in a service of yours, or to serve
//! alone (the `shedlock dashboard` command does). It works on every store, through
//! [`LockInspector`](shedlock_core::LockInspector), [`RunLog`](shedlock_core::RunLog) and
//! [`Board`](shedlock_core::Board); a store without a board says so on the jobs view and shows
//! its locks.
//!
//! - **Bounded**: a page reads a page of locks ([`DashboardOptions::page_size`]) and, per lock
//!   of it, its latest runs, asked of the store with the lock and a limit
//!   ([`RunQuery::lock`](shedlock_core::RunQuery::lock)`(name).limit(n)`); so every lock is on
//!   its page however old its only run, and what a page reads and holds depends on the
//!   options, never on the history (under 500 KB with the defaults). The jobs view reads the
//!   whole board once (what the fleet publishes: held while the page is built, never
//!   written) and renders a page of jobs by name, with two bounded run reads per job (its
//!   lock's latest run; its runs of the last day, at most 200: past that the failures are
//!   shown as "at least", `N+`): about 55 KB with the defaults for a fleet of 10,000 jobs.
//! - **Guarded**: it answers only the hosts allowed ([`DashboardOptions::allowed_hosts`];
//!   `localhost`, `127.0.0.1` and `[::1]` by default), so a DNS name rebound to this address
//!   reads nothing (421).
//! - **Read-only** unless [`DashboardOptions::allow_release`] gives a release token (at least
//!   [`MIN_RELEASE_TOKEN_CHARS`]): then a held lock can be released from the page, by POST
//!   from the page itself (its `Origin`, else its `Referer`), after a confirmation page that
//!   asks for the token; tokens can be tried 10 at once, then one every 2 s (429 beyond). Bind
//!   it to `127.0.0.1` (the command does) or put it behind your own access control. The same
//!   token, confirmation, origin check and attempts pause, resume or run a job now across the
//!   fleet (recorded as by `dashboard`, with the caller's address when the server was started
//!   with [`into_make_service_with_connect_info`](axum::Router::into_make_service_with_connect_info)).
//! - **Escaped**: every name, holder and error text is HTML-escaped (maud escapes every value it
//!   writes; nothing is written raw but the page's own CSS, script and SVG numbers). Nothing
//!   secret is rendered: the release token is never written back.
//! - **Paged**: jobs and locks are listed a page at a time and can be filtered by name
//!   prefix; a lock's runs are paged with cursors ([`RunQuery::before`](shedlock_core::RunQuery::before)).
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
mod jobs;
mod options;
mod read;
mod routes;
mod view;

pub use options::{DashboardOptions, MIN_RELEASE_TOKEN_CHARS};
pub use routes::router;
