//! `shedlock`: see and clear the locks of shedlock on any store (SQL, Redis, RedLock,
//! ZooKeeper, etcd), read their run records, serve a dashboard, print or create a lock table's
//! schema, and check a store with `doctor`. Built on the providers' `LockInspector`; see
//! `shedlock --help` and the README's "Command-line tool" section.

/// A line on stdout, scrubbed of secrets and escaped for the terminal ([`output::line`]).
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::line(format_args!($($arg)*))
    };
}

mod cli;
mod commands;
mod dashboard;
mod doctor;
mod elections;
mod failure;
mod jobs;
mod locks;
mod output;
mod runs;
mod secrets;
mod store;
mod table;
mod terminal;

use std::process::ExitCode;

use clap::Parser;

use cli::Cli;

fn main() -> ExitCode {
    let environment: Vec<_> = cli::URL_VARIABLES
        .iter()
        .filter_map(std::env::var_os)
        .collect();
    let arguments: Vec<_> = std::env::args_os().skip(1).collect();
    output::protect(&arguments, &environment);
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => return output::clap_error(&error),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            output::error(&format!("cannot start the async runtime: {e}"));
            return failure::Exit::Error.into();
        }
    };
    match runtime.block_on(commands::run(cli)) {
        Ok(exit) => exit.into(),
        Err(failure) => {
            output::error(&failure.message);
            failure.exit.into()
        }
    }
}
