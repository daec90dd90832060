//! Everything the tool prints goes through here: text is scrubbed of every secret of every
//! URL the tool was given (arguments and environment) and escaped for the terminal; JSON is
//! escaped for the terminal. So a new message, a quoted driver error or a panic cannot print
//! a password or a terminal control, whichever path it takes.

use std::backtrace::{Backtrace, BacktraceStatus};
use std::borrow::Cow;
use std::ffi::OsString;
use std::fmt;
use std::io::Write as _;
use std::panic::PanicHookInfo;
use std::process::ExitCode;
use std::sync::OnceLock;

use crate::secrets::{Masked, Secrets};
use crate::terminal;

/// The secrets of the URLs the tool was given; set once at start.
static SECRETS: OnceLock<Secrets> = OnceLock::new();

/// Collects, before anything is printed, the secrets of the URL variables, of the value of
/// `--url` (`--url URL`, `--url=URL`) and of every other argument with `://` in it (a URL
/// given without `--url`, which clap quotes back); and scrubs panic messages with them. Other
/// arguments are left alone: a lock name like `report:daily#2` parses as a URL too, but its
/// "fragment" `2` is no secret to hide from every timestamp.
pub(crate) fn protect(arguments: &[OsString], environment: &[OsString]) {
    let mut urls: Vec<&str> = environment.iter().filter_map(|v| v.to_str()).collect();
    for (at, argument) in arguments.iter().enumerate() {
        let Some(text) = argument.to_str() else {
            continue;
        };
        if text == "--url" {
            urls.extend(arguments.get(at + 1).and_then(|url| url.to_str()));
        } else if let Some(url) = text.strip_prefix("--url=") {
            urls.push(url);
        } else if text.contains("://") {
            urls.push(text);
        }
    }
    let mut secrets = Secrets::default();
    for url in urls {
        secrets.extend(Masked::any(url).secrets);
    }
    let _ = SECRETS.set(secrets);
    std::panic::set_hook(Box::new(panicked));
}

/// `text` scrubbed of every secret of the URLs the tool was given.
pub(crate) fn scrubbed(text: &str) -> Cow<'_, str> {
    match SECRETS.get() {
        Some(secrets) => secrets.scrub(text),
        None => Cow::Borrowed(text),
    }
}

/// `text` scrubbed of every secret and escaped for the terminal, line breaks kept.
fn clean(text: &str) -> String {
    terminal::escape_lines(&scrubbed(text)).into_owned()
}

/// One line (or more) on stdout, for `out!`. A closed stdout (`shedlock locks list | head`)
/// is ignored instead of panicking: the exit status still tells what happened.
pub(crate) fn line(args: fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stdout().lock(), "{}", clean(&args.to_string()));
}

/// Serialized JSON on stdout. It holds only values from the lock table, never a URL, and is
/// not scrubbed: replacing a piece of a JSON text could break its escapes.
pub(crate) fn json(json: &str) {
    let _ = writeln!(std::io::stdout().lock(), "{}", terminal::escape_json(json));
}

/// The `error: …` line a failed command ends with.
pub(crate) fn error(message: &str) {
    let _ = writeln!(std::io::stderr().lock(), "error: {}", clean(message));
}

/// Prints clap's error or help and exits as clap would. Clap quotes unexpected arguments (a
/// URL given without `--url`): only then is the message printed scrubbed, without colours.
pub(crate) fn clap_error(error: &clap::Error) -> ExitCode {
    let plain = error.render().to_string();
    let scrubbed = scrubbed(&plain);
    if scrubbed == plain {
        let _ = error.print();
    } else if error.use_stderr() {
        let _ = write!(std::io::stderr().lock(), "{scrubbed}");
    } else {
        let _ = write!(std::io::stdout().lock(), "{scrubbed}");
    }
    ExitCode::from(u8::try_from(error.exit_code()).unwrap_or(2))
}

/// The panic hook: the standard message (a driver's panic could quote its connection
/// string), scrubbed.
fn panicked(info: &PanicHookInfo<'_>) {
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "shedlock {}", clean(&info.to_string()));
    let backtrace = Backtrace::capture();
    if backtrace.status() == BacktraceStatus::Captured {
        let _ = writeln!(stderr, "{}", clean(&backtrace.to_string()));
    } else {
        let _ = writeln!(
            stderr,
            "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace"
        );
    }
}
