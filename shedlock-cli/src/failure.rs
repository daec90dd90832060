//! Exit codes, and the failure a command ends with.

use std::fmt;
use std::process::ExitCode;

use crate::output;

/// The process's exit status; `--help` and the README list the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    /// Success.
    Ok = 0,
    /// The database cannot be reached or refused a statement.
    Error = 1,
    /// Invalid arguments (clap exits with 2 too).
    Usage = 2,
    /// No row for that lock name.
    NotFound = 3,
    /// The lock is held by someone else: not released.
    Refused = 4,
    /// `doctor` found a problem.
    Problems = 5,
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> Self {
        ExitCode::from(exit as u8)
    }
}

/// Why a command stopped: printed as `error: {message}` by [`output::error`], which scrubs
/// every secret of the URL (the message may quote a driver's error) and escapes terminal
/// controls; exits with `exit`.
pub(crate) struct Failure {
    pub(crate) exit: Exit,
    pub(crate) message: String,
}

impl Failure {
    pub(crate) fn new(exit: Exit, message: impl Into<String>) -> Self {
        Failure {
            exit,
            message: message.into(),
        }
    }

    /// A statement or connection the database refused (exit 1), in its own words.
    pub(crate) fn error(error: impl fmt::Display) -> Self {
        Failure::new(Exit::Error, error.to_string())
    }
}

/// Scrubbed like the printed message: it may quote a driver's error.
impl fmt::Debug for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Failure")
            .field("exit", &self.exit)
            .field("message", &output::scrubbed(&self.message))
            .finish()
    }
}
