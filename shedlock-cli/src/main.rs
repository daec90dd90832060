//! `shedlock`: see and clear the locks of a shedlock lock table, print or create its schema,
//! and check a database with `doctor`. Built on `shedlock-sqlx`; see `shedlock --help` and the
//! README's "Command-line tool" section.

/// `println!` that ignores a closed stdout (`shedlock locks list | head`) instead of
/// panicking: the command's exit status still tells what happened.
macro_rules! out {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        let _ = writeln!(::std::io::stdout().lock(), $($arg)*);
    }};
}

mod cli;
mod commands;
mod doctor;
mod failure;
mod locks;
mod target;

use std::process::ExitCode;

use clap::Parser;

use cli::Cli;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return failure::Exit::Error.into();
        }
    };
    match runtime.block_on(commands::run(cli)) {
        Ok(exit) => exit.into(),
        Err(failure) => {
            eprintln!("error: {failure}");
            failure.exit.into()
        }
    }
}
