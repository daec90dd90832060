//! The command line, as clap parses it.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use clap::{ArgGroup, Args, Parser, Subcommand, ValueEnum};
use shedlock_core::RunCursor;

use crate::secrets::Masked;

/// Where the URL is read from when there is no `--url`. The tool's own variable comes first:
/// the lock store need not be the application's database, and will not always be SQL.
pub(crate) const URL_VARIABLE: &str = "SHEDLOCK_URL";
/// Read when `SHEDLOCK_URL` is not set, as sqlx's tools and earlier versions do.
pub(crate) const FALLBACK_URL_VARIABLE: &str = "DATABASE_URL";
/// Both, in the order they are read.
pub(crate) const URL_VARIABLES: [&str; 2] = [URL_VARIABLE, FALLBACK_URL_VARIABLE];

/// Printed under `--help`; the README lists the same codes.
const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  error: the store cannot be reached or refused a request
  2  usage: invalid arguments, URL or table name
  3  not found: the store has no record for that lock name
  4  refused: the lock is held by another holder or token, so it was not released
  5  doctor found a problem (it says what and how to fix it)";

/// See and clear the locks of shedlock on any store: a lock table (shedlock-rs, or Java
/// ShedLock plus a `fencing_token` column) on PostgreSQL, MySQL/MariaDB or SQLite; Redis (one
/// server, or RedLock masters); ZooKeeper; etcd.
///
/// Times are the store's (UTC), and so is "remaining": this machine's clock plays no part.
#[derive(Debug, Parser)]
#[command(name = "shedlock", version, after_help = EXIT_CODES)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) database: DatabaseArgs,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// Where the locks are.
#[derive(Debug, Args)]
pub(crate) struct DatabaseArgs {
    /// Store URL: postgres://…, mysql://… (MySQL, MariaDB), sqlite:FILE; redis://[:PASSWORD@]HOST:PORT[/DB]
    /// (one Redis server); the RedLock masters' Redis URLs separated by commas
    /// (redis://H1:P1,redis://H2:P2,redis://H3:P3); zookeeper://[USER:PASSWORD@]HOST:PORT,HOST:PORT[/CHROOT]
    /// (zk:// too; digest credentials); etcd://[USER:PASSWORD@]HOST:PORT,HOST:PORT. A password
    /// may hold `@`, `:` and `,` as they are; write `/`, `?`, `#` and `%` in it
    /// percent-encoded (%2F, %3F, %23, %25): a URL with an `@` after its hosts is refused.
    /// Prefer setting SHEDLOCK_URL (or DATABASE_URL, read when SHEDLOCK_URL is not set) to
    /// --url: other users of this machine see a command line in `ps`, and it stays in the
    /// shell's history. The password and other secrets of the URL are never printed.
    #[arg(
        long,
        value_name = "URL",
        env = URL_VARIABLE,
        global = true,
        hide_env_values = true
    )]
    url: Option<UrlArg>,
    /// The lock table, `table` or `schema.table` (SQL) [default: shedlock]
    #[arg(long, global = true)]
    pub(crate) table: Option<String>,
    /// The prefix of the lock keys (Redis, RedLock [default: shedlock:]; etcd [default: shedlock/])
    #[arg(long, global = true, value_name = "PREFIX")]
    pub(crate) key_prefix: Option<String>,
    /// The root node of the locks (ZooKeeper) [default: /shedlock]
    #[arg(long, global = true, value_name = "PATH")]
    pub(crate) root: Option<String>,
    /// The lock name column [default: name]
    #[arg(long, global = true, value_name = "COLUMN")]
    pub(crate) name_column: Option<String>,
    /// The lease end column [default: lock_until]
    #[arg(long, global = true, value_name = "COLUMN")]
    pub(crate) lock_until_column: Option<String>,
    /// The acquisition time column [default: locked_at]
    #[arg(long, global = true, value_name = "COLUMN")]
    pub(crate) locked_at_column: Option<String>,
    /// The holder column [default: locked_by]
    #[arg(long, global = true, value_name = "COLUMN")]
    pub(crate) locked_by_column: Option<String>,
    /// The fencing token column [default: fencing_token]
    #[arg(long, global = true, value_name = "COLUMN")]
    pub(crate) fencing_token_column: Option<String>,
    /// The last granted tick column [default: last_tick]
    #[arg(long, global = true, value_name = "COLUMN")]
    pub(crate) last_tick_column: Option<String>,
    /// How long to wait for the store to accept a connection (e.g. 500ms, 10s, PT10S): a
    /// duration as in `scheduler.toml` and the attributes.
    #[arg(long, global = true, default_value = "10s", value_parser = shedlock_rules::parse_duration)]
    pub(crate) connect_timeout: Duration,
}

impl DatabaseArgs {
    /// The URL: `--url`, else `SHEDLOCK_URL` (clap reads both), else `DATABASE_URL`. An empty
    /// one counts as none.
    pub(crate) fn url(&self) -> Option<String> {
        let given = |url: &String| !url.is_empty();
        self.url
            .as_ref()
            .map(|url| url.0.clone())
            .filter(given)
            .or_else(|| std::env::var(FALLBACK_URL_VARIABLE).ok().filter(given))
    }

    /// The options given that apply to one kind of store only, in the order they are checked
    /// against the store ([`crate::store::Store::options`]).
    pub(crate) fn store_options(&self) -> impl Iterator<Item = &'static str> {
        [
            ("--table", self.table.is_some()),
            ("--name-column", self.name_column.is_some()),
            ("--lock-until-column", self.lock_until_column.is_some()),
            ("--locked-at-column", self.locked_at_column.is_some()),
            ("--locked-by-column", self.locked_by_column.is_some()),
            (
                "--fencing-token-column",
                self.fencing_token_column.is_some(),
            ),
            ("--last-tick-column", self.last_tick_column.is_some()),
            ("--key-prefix", self.key_prefix.is_some()),
            ("--root", self.root.is_some()),
        ]
        .into_iter()
        .filter_map(|(option, given)| given.then_some(option))
    }
}

/// A URL argument. Its `Debug` shows only what may be shown of it.
#[derive(Clone)]
struct UrlArg(String);

impl From<String> for UrlArg {
    fn from(url: String) -> Self {
        UrlArg(url)
    }
}

impl fmt::Debug for UrlArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&Masked::any(&self.0).shown)
    }
}

/// What to do.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// List, show and release locks.
    #[command(subcommand)]
    Locks(LocksCommand),
    /// Print the lock table's DDL, or create the table with --apply (ZooKeeper: --apply
    /// creates the root's nodes; Redis needs no schema).
    #[command(after_help = EXIT_CODES)]
    Schema(SchemaArgs),
    /// List and show the run records the store keeps beside its locks: the latest runs of
    /// each locked scheduled job, as many as the store's runs_per_lock and run_retention keep
    /// (tick, instance, token, attempt, times, outcome, error).
    #[command(subcommand)]
    Runs(RunsCommand),
    /// Check the store: reachable, clock; SQL: table and column types, privileges; RedLock:
    /// each master; ZooKeeper: the root's nodes and access to them.
    #[command(after_help = EXIT_CODES)]
    Doctor,
    /// Serve a page of the locks (a page at a time), the leaders of the elections named with
    /// --election and each job's latest runs (read-only unless --allow-release).
    Dashboard(DashboardArgs),
    /// List and show the jobs the fleet's instances publish to the store (schedule, next fire
    /// time, instances carrying them, paused or not), pause and resume them across the fleet,
    /// and ask for a run now.
    #[command(subcommand)]
    Jobs(JobsCommand),
}

/// The `jobs` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum JobsCommand {
    /// Every job a live instance carries or an operator paused, by name: schedule, next fire
    /// time (cron), instances carrying it (and how many run it differently), paused or not,
    /// a run asked for.
    #[command(after_help = EXIT_CODES)]
    List {
        /// One JSON array of job objects (fields: name, schedule, zone, lock,
        /// lock_at_most_for_ms, lock_at_least_for_ms, policy, next_fire, paused {by, at},
        /// run_request {id, by, at, taken_by}, definitions_differ, carriers [{instance,
        /// seen_at, alive_until, differs, schedule, zone}]).
        #[arg(long)]
        json: bool,
    },
    /// One job, with each instance carrying it (exit 3 if none does and it is not paused).
    #[command(after_help = EXIT_CODES)]
    Show {
        /// The job's name.
        name: String,
        /// One JSON object with the fields of `jobs list --json`.
        #[arg(long)]
        json: bool,
    },
    /// Pause a job on every instance: none starts it from its next poll of the store on
    /// (1 s by default), whatever restarts, until `jobs resume`. A run in flight finishes.
    /// Exit 3 if no live instance carries it, unless --force.
    #[command(after_help = EXIT_CODES)]
    Pause {
        /// The job's name.
        name: String,
        /// Who pauses it, as shown to others [default: USER@host (shedlock)].
        #[arg(long)]
        by: Option<String>,
        /// Pause it even though no live instance carries it (all of them down).
        #[arg(long)]
        force: bool,
    },
    /// Resume a paused job: its next tick runs.
    #[command(after_help = EXIT_CODES)]
    Resume {
        /// The job's name.
        name: String,
    },
    /// Run a job now, once, on one instance carrying it (even while paused), under its lock
    /// and recorded in its runs as a run by hand. Asking while an earlier request waits for an
    /// instance joins it. Exit 3 if no live instance carries it.
    #[command(after_help = EXIT_CODES)]
    Run {
        /// The job's name.
        name: String,
        /// Who asks, as shown to others [default: USER@host (shedlock)].
        #[arg(long)]
        by: Option<String>,
        /// Wait up to this long for an instance to take it and say which (e.g. 10s).
        #[arg(long, value_name = "DURATION", value_parser = shedlock_rules::parse_duration)]
        wait: Option<Duration>,
    },
}

/// The largest page `locks list` and `runs list` read at once.
pub(crate) const MAX_PAGE: u64 = 10_000;

/// A page size: 1 to [`MAX_PAGE`].
fn page_size() -> clap::builder::RangedU64ValueParser<u64> {
    clap::value_parser!(u64).range(1..=MAX_PAGE)
}

/// The `locks` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum LocksCommand {
    /// The locks in name order, a page at a time: held or free, holder, fencing token, times
    /// and time left. When there are more, the last line names the --after that lists the
    /// next page.
    #[command(after_help = EXIT_CODES)]
    List {
        /// Only locks whose name starts with this.
        #[arg(long)]
        prefix: Option<String>,
        /// Only locks whose name comes after this one (byte order): the last name of the
        /// previous page.
        #[arg(long, value_name = "NAME")]
        after: Option<String>,
        /// At most this many locks (1 to 10000).
        #[arg(long, default_value_t = 1000, value_parser = page_size())]
        limit: u64,
        /// One JSON array of lock objects (fields: name, held, locked_by, fencing_token,
        /// locked_at, lock_until, remaining_ms, database_time); the next page starts
        /// --after the last name.
        #[arg(long)]
        json: bool,
    },
    /// One lock, by name (exit 3 if the store has no record of it).
    #[command(after_help = EXIT_CODES)]
    Show {
        /// The lock name.
        name: String,
        /// One JSON object with the fields of `locks list --json`.
        #[arg(long)]
        json: bool,
    },
    /// End a held lock's lease now: only when it is held by the given --holder and/or
    /// --token (exit 4 otherwise), or whoever holds it with --force.
    ///
    /// The record is kept (lock_until is set to the store's now), so fencing tokens keep
    /// growing. A job still running under the lease is not stopped.
    #[command(after_help = EXIT_CODES)]
    Release(ReleaseArgs),
}

/// The `runs` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum RunsCommand {
    /// The newest runs, of every lock or of one, a page at a time: when there are older
    /// runs, the last line names the --before that lists the next page.
    #[command(after_help = EXIT_CODES)]
    List {
        /// Only the runs of this lock.
        #[arg(long)]
        lock: Option<String>,
        /// At most this many runs, the newest (1 to 10000).
        #[arg(long, default_value_t = 50, value_parser = page_size())]
        limit: u64,
        /// Only runs older than this one: the `cursor` of the last run of the previous page
        /// (`<unix nanoseconds>-<token>-<attempt>-<lock>`).
        #[arg(long, value_name = "CURSOR")]
        before: Option<RunCursor>,
        /// One JSON array of run objects (fields: lock, job, tick, holder, fencing_token,
        /// attempt, started_at, finished_at, duration_ms, outcome, error, cursor); the next
        /// page starts --before the last cursor.
        #[arg(long)]
        json: bool,
    },
    /// One run of a lock, with its whole error text: the newest, or the one with --token
    /// and/or --attempt (exit 3 if there is none).
    #[command(after_help = EXIT_CODES)]
    Show {
        /// The lock name.
        lock: String,
        /// The run's fencing token.
        #[arg(long)]
        token: Option<u64>,
        /// The run's attempt (1 for the first; retries and reruns count up).
        #[arg(long)]
        attempt: Option<u32>,
        /// One JSON object with the fields of `runs list --json`.
        #[arg(long)]
        json: bool,
    },
}

/// `locks release`.
#[derive(Debug, Args)]
#[command(group(
    ArgGroup::new("whose").required(true).multiple(true).args(["holder", "token", "force"])
))]
pub(crate) struct ReleaseArgs {
    /// The lock name.
    pub(crate) name: String,
    /// Release only if this holder (the `locked_by` value) holds the lock.
    #[arg(long)]
    pub(crate) holder: Option<String>,
    /// Release only if the live lease has this fencing token.
    #[arg(long)]
    pub(crate) token: Option<u64>,
    /// Release whoever holds it.
    #[arg(long, conflicts_with_all = ["holder", "token"])]
    pub(crate) force: bool,
}

/// `schema`.
#[derive(Debug, Args)]
pub(crate) struct SchemaArgs {
    /// The database whose DDL to print when no URL is given.
    #[arg(long, value_enum)]
    pub(crate) db: Option<DbKind>,
    /// Create the table (and add `fencing_token` to a ShedLock table) instead of printing.
    #[arg(long)]
    pub(crate) apply: bool,
}

/// The databases the tool speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum DbKind {
    /// PostgreSQL.
    Postgres,
    /// MySQL or MariaDB.
    Mysql,
    /// SQLite.
    Sqlite,
}

/// `dashboard`.
#[derive(Debug, Args)]
pub(crate) struct DashboardArgs {
    /// Where to serve the page. Keep it on 127.0.0.1 (reach it through an SSH tunnel) unless
    /// something in front of it checks who connects.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub(crate) listen: SocketAddr,
    /// Let the page release held locks, for whoever types the token in SHEDLOCK_DASHBOARD_TOKEN
    /// (at least 16 characters) on its confirmation page. Read-only without it.
    #[arg(long)]
    pub(crate) allow_release: bool,
    /// An election to show with its leader (repeat for more).
    #[arg(long = "election", value_name = "NAME")]
    pub(crate) elections: Vec<String>,
    /// Another host name the page answers to, with an optional port (repeat for more), e.g.
    /// the name a proxy in front serves it as. Always answered: localhost, 127.0.0.1, [::1]
    /// and the --listen address; a request for any other host gets 421 (DNS rebinding).
    #[arg(long = "allow-host", value_name = "HOST[:PORT]")]
    pub(crate) allow_hosts: Vec<String>,
}
