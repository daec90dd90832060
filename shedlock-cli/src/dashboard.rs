//! `shedlock dashboard`: the dashboard of `shedlock-dashboard` over the command's store, served
//! on 127.0.0.1 until ctrl-c. An election run by the store's own elector is found where it
//! keeps its leader ([`WithElector`]).

use std::net::{IpAddr, SocketAddr};

use shedlock_dashboard::{DashboardOptions, MIN_RELEASE_TOKEN_CHARS, router};

use crate::cli::DashboardArgs;
use crate::elections::WithElector;
use crate::failure::{Exit, Failure};
use crate::store::OpenStore;

/// The release token's variable: read from the environment, never from the command line
/// (`ps` and the shell's history would show it).
const TOKEN_VARIABLE: &str = "SHEDLOCK_DASHBOARD_TOKEN";

/// Serves the dashboard over `store` until ctrl-c.
pub(crate) async fn run(store: &OpenStore, args: &DashboardArgs) -> Result<Exit, Failure> {
    let token = args
        .allow_release
        .then(|| std::env::var(TOKEN_VARIABLE).unwrap_or_default());
    // Every setting is checked before the port is taken.
    let options = options(args, token, args.listen)?;
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
    let options = options_for(options, args, address)?;
    let mode = if args.allow_release {
        "release enabled"
    } else {
        "read-only"
    };
    out!(
        "dashboard of {} at http://{address}/ ({mode}); ctrl-c to stop",
        store.shown
    );
    let provider = store.provider.clone();
    let router = match &store.elector {
        Some(elector) => router(WithElector::new(provider, elector.clone()), options),
        None => router(provider, options),
    };
    // With the caller's address: a switch made from the page is recorded as by it.
    let service = router.into_make_service_with_connect_info::<SocketAddr>();
    axum::serve(listener, service)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .map_err(|e| Failure::new(Exit::Error, format!("the dashboard stopped: {e}")))?;
    Ok(Exit::Ok)
}

/// The dashboard's options from the arguments, the release token (`None` without
/// `--allow-release`) and the address served.
fn options(
    args: &DashboardArgs,
    token: Option<String>,
    address: SocketAddr,
) -> Result<DashboardOptions, Failure> {
    let mut options = DashboardOptions::new().elections(args.elections.clone());
    if let Some(token) = token {
        if token.is_empty() {
            return Err(Failure::new(
                Exit::Usage,
                format!("--allow-release needs a release token in {TOKEN_VARIABLE}"),
            ));
        }
        let chars = token.chars().count();
        options = options.allow_release(token).map_err(|_| {
            Failure::new(
                Exit::Usage,
                format!(
                    "{TOKEN_VARIABLE} is too short for a release token: {chars} characters, \
                     at least {MIN_RELEASE_TOKEN_CHARS} are needed"
                ),
            )
        })?;
    }
    options_for(options, args, address)
}

/// `options` answering the loopback names, `address` (when it names one interface) and every
/// `--allow-host`.
fn options_for(
    options: DashboardOptions,
    args: &DashboardArgs,
    address: SocketAddr,
) -> Result<DashboardOptions, Failure> {
    let mut hosts = vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "[::1]".to_owned(),
    ];
    let ip = address.ip();
    if !ip.is_unspecified() && !ip.is_loopback() {
        hosts.push(match ip {
            IpAddr::V4(v4) => format!("{v4}:{}", address.port()),
            IpAddr::V6(v6) => format!("[{v6}]:{}", address.port()),
        });
    }
    hosts.extend(args.allow_hosts.iter().cloned());
    options
        .allowed_hosts(&hosts)
        .map_err(|e| Failure::new(Exit::Usage, format!("--allow-host: {e}")))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Command {
        #[command(flatten)]
        args: DashboardArgs,
    }

    fn args(line: &[&str]) -> DashboardArgs {
        Command::parse_from(std::iter::once("dashboard").chain(line.iter().copied())).args
    }

    const ADDRESS: &str = "127.0.0.1:8080";

    /// Issue 29, item 5: a one-character SHEDLOCK_DASHBOARD_TOKEN was accepted.
    #[test]
    fn a_short_token_is_refused_by_name() {
        let release = args(&["--allow-release"]);
        let address = ADDRESS.parse().unwrap();
        for short in ["x", "fifteen-chars-x"] {
            let failure = options(&release, Some(short.to_owned()), address).unwrap_err();
            assert_eq!(failure.exit, Exit::Usage);
            assert!(
                failure.message.contains(TOKEN_VARIABLE) && failure.message.contains("at least 16"),
                "{}",
                failure.message
            );
            assert!(
                !failure.message.contains(short),
                "the token is never printed"
            );
        }
        let empty = options(&release, Some(String::new()), address).unwrap_err();
        assert!(empty.message.contains(TOKEN_VARIABLE), "{}", empty.message);
        assert!(options(&release, Some("sixteen-chars-xx".to_owned()), address).is_ok());
        assert!(options(&args(&[]), None, address).is_ok());
    }

    #[test]
    fn allowed_hosts_are_checked() {
        let address = ADDRESS.parse().unwrap();
        let bad = args(&["--allow-host", "http://dash.example.com"]);
        let failure = options(&bad, None, address).unwrap_err();
        assert_eq!(failure.exit, Exit::Usage);
        assert!(
            failure.message.contains("--allow-host"),
            "{}",
            failure.message
        );
        let good = args(&[
            "--allow-host",
            "dash.example.com",
            "--allow-host",
            "[::1]:9",
        ]);
        let options = options(&good, None, "10.0.0.5:8080".parse().unwrap()).unwrap();
        let shown = format!("{options:?}");
        for host in ["localhost", "10.0.0.5:8080", "dash.example.com", "[::1]:9"] {
            assert!(shown.contains(host), "{host} missing from {shown}");
        }
    }
}
