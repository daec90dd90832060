//! `shedlock dashboard`: the dashboard of `shedlock-dashboard` over the command's store, served
//! on 127.0.0.1 until ctrl-c.

use std::net::SocketAddr;

use clap::Args;
use shedlock_core::LockProvider;
use shedlock_dashboard::{DashboardOptions, router};

use crate::failure::{Exit, Failure};

/// The release token's variable: read from the environment, never from the command line
/// (`ps` and the shell's history would show it).
const TOKEN_VARIABLE: &str = "SHEDLOCK_DASHBOARD_TOKEN";

/// `dashboard`.
#[derive(Debug, Args)]
pub(crate) struct DashboardArgs {
    /// Where to serve the page. Keep it on 127.0.0.1 (reach it through an SSH tunnel) unless
    /// something in front of it checks who connects.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Let the page release held locks, for whoever types the token in SHEDLOCK_DASHBOARD_TOKEN
    /// on its confirmation page. Read-only without it.
    #[arg(long)]
    allow_release: bool,
    /// An election to show with its leader (repeat for more).
    #[arg(long = "election", value_name = "NAME")]
    elections: Vec<String>,
}

/// Serves the dashboard over `provider` until ctrl-c.
pub(crate) async fn run(
    provider: impl LockProvider,
    shown_url: &str,
    args: &DashboardArgs,
) -> Result<Exit, Failure> {
    let mut options = DashboardOptions::new().elections(args.elections.clone());
    if args.allow_release {
        let token = std::env::var(TOKEN_VARIABLE).unwrap_or_default();
        if token.is_empty() {
            return Err(Failure::new(
                Exit::Usage,
                format!("--allow-release needs a release token in {TOKEN_VARIABLE}"),
            ));
        }
        options = options.allow_release(token);
    }
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| {
            Failure::new(
                Exit::Error,
                format!("cannot listen on {}: {e}", args.listen),
            )
        })?;
    // The address bound, not the one asked for: port 0 picks a free one.
    let address = listener.local_addr().unwrap_or(args.listen);
    let mode = if args.allow_release {
        "release enabled"
    } else {
        "read-only"
    };
    out!("dashboard of {shown_url} at http://{address}/ ({mode}); ctrl-c to stop");
    axum::serve(listener, router(provider, options))
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .map_err(|e| Failure::new(Exit::Error, format!("the dashboard stopped: {e}")))?;
    Ok(Exit::Ok)
}
