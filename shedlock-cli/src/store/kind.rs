//! What every kind of store offers the tool: a [`Store`] named by its URL, opened into an
//! [`OpenStore`] whose [`Provider`] the commands run on, and where it keeps things ([`Place`]).
//! Below the store modules and their list, so that neither imports the other.

use std::sync::Arc;

use shedlock_core::{Board, Fleet, LockInspector, LockProvider, async_trait};

use super::target::Target;
use crate::cli::{DatabaseArgs, DbKind};
use crate::elections::Leaders;
use crate::failure::{Exit, Failure};

/// A kind of store, as the tool's list of stores (`KINDS`) has it.
pub(crate) struct Kind {
    /// How its URLs look, for the message listing every store's: `redis://… (one server)`.
    pub(super) form: &'static str,
    /// Reads a URL; `expected` says what every store's URLs look like, for its messages.
    pub(super) read: fn(&Target, expected: &str) -> Reading,
    /// The store in messages: `Redis`, `a SQL database`.
    pub(super) name: &'static str,
    /// The options of the command line that apply to it: `--table`, `--key-prefix`, ….
    pub(super) options: &'static [&'static str],
    /// Why it has no schema to print or apply (unused by a store that has one).
    pub(super) no_schema: &'static str,
}

/// What a kind of store makes of a URL: `None` when it does not name that kind of store; else
/// the store, or why the URL is wrong.
pub(super) type Reading = Option<Result<Box<dyn Store>, Failure>>;

/// A store as its URL names it, not yet connected to.
#[async_trait(?Send)]
pub(crate) trait Store {
    /// Its kind, as the tool's list of stores has it.
    fn kind(&self) -> &'static Kind;

    /// Its URL.
    fn target(&self) -> &Target;

    /// The store in messages: `Redis`, `a SQL database`.
    fn name(&self) -> &'static str {
        self.kind().name
    }

    /// The options of the command line that apply to it: `--table`, `--key-prefix`, ….
    fn options(&self) -> &'static [&'static str] {
        self.kind().options
    }

    /// The SQL database it is, which `schema --db` must match.
    fn database(&self) -> Option<DbKind> {
        None
    }

    /// Why it has no schema to print or apply, for a store that needs none.
    fn no_schema(&self) -> &'static str {
        self.kind().no_schema
    }

    /// `schema`: the DDL of its lock table; by default why it has none (a usage error).
    fn ddl(&self, _args: &DatabaseArgs) -> Result<String, Failure> {
        Err(Failure::new(Exit::Usage, self.no_schema()))
    }

    /// `schema --apply`: creates what it needs; by default says why there is nothing to
    /// create.
    async fn apply_schema(&self, _args: &DatabaseArgs) -> Result<Exit, Failure> {
        Err(Failure::new(Exit::Usage, self.no_schema()))
    }

    /// `doctor`: one line per check; exit 5 on any problem.
    async fn doctor(&self, args: &DatabaseArgs) -> Result<Exit, Failure>;

    /// Connects to it, with the command line's settings.
    async fn open(&self, args: &DatabaseArgs) -> Result<OpenStore, Failure>;
}

/// A store's provider, as the tool uses it: its locks, their inspector, its run log and its
/// board of the fleet's jobs.
#[async_trait]
pub(crate) trait Provider: LockProvider + LockInspector + Board {
    /// Ends its connections; by default they end when it is dropped.
    async fn close(&self) {}
}

/// A store connected to: what every command but `doctor` and `schema` runs on.
pub(crate) struct OpenStore {
    /// The provider on the store, with the command line's settings.
    pub(crate) provider: Arc<dyn Provider>,
    /// Where it keeps its locks.
    pub(crate) locks: Place,
    /// Where it keeps its run records.
    pub(crate) runs: Place,
    /// Its own elector, whose elections' leaders the dashboard shows too.
    pub(crate) elector: Option<Arc<dyn Leaders>>,
    /// Its URL as it may be shown.
    pub(crate) shown: String,
}

impl OpenStore {
    /// `provider`, on `target`, keeping its locks and runs at `place`, without an elector.
    pub(super) fn new(target: &Target, provider: impl Provider, place: Place) -> Self {
        OpenStore {
            provider: Arc::new(provider),
            runs: place.clone(),
            locks: place,
            elector: None,
            shown: target.shown.clone(),
        }
    }

    /// The fleet's jobs on its board.
    pub(crate) fn fleet(&self) -> Fleet {
        Fleet::new(Arc::clone(&self.provider) as Arc<dyn Board>)
    }

    /// Closes its connections.
    pub(crate) async fn close(self) {
        self.provider.close().await;
    }
}

/// Where a store keeps its locks or runs, for messages.
#[derive(Debug, Clone)]
pub(crate) struct Place {
    /// `table `shedlock``, `key prefix `shedlock:``, `node `/shedlock/locks``.
    pub(crate) name: String,
    /// What one lock is in the store: `row`, `hash`, `node`.
    pub(crate) record: &'static str,
}

impl Place {
    /// `name`, where one lock is a `record`.
    pub(crate) fn new(name: String, record: &'static str) -> Self {
        Place { name, record }
    }
}

/// A connection that failed: an invalid setting (a key prefix, a root) is a usage error;
/// anything else means `store` cannot be reached (exit 1).
pub(super) fn connect_failure(store: &dyn Store, error: &shedlock_core::Error) -> Failure {
    let shown = &store.target().shown;
    match error {
        shedlock_core::Error::InvalidConfig { .. } => {
            Failure::new(Exit::Usage, format!("{shown}: {error}"))
        }
        _ => Failure::new(
            Exit::Error,
            format!("cannot reach {} at {shown}: {error}", store.name()),
        ),
    }
}
