//! Dispatch: the store the URL names ([`store::read`]), checked against the command line,
//! then the command, run on that store whichever it is.

use crate::cli::{Cli, Command, DatabaseArgs, DbKind, SchemaArgs};
use crate::failure::{Exit, Failure};
use crate::store::{self, OpenStore, Store};
use crate::{dashboard, jobs, locks, runs};

/// Runs the command line's command: the exit status, or the failure to print.
pub(crate) async fn run(cli: Cli) -> Result<Exit, Failure> {
    let args = &cli.database;
    let store = args.url().as_deref().map(store::read).transpose()?;
    if let Some(store) = &store {
        check(&**store, &cli)?;
    }
    match &cli.command {
        Command::Schema(SchemaArgs { db, apply: false }) => print_schema(*db, store, args),
        Command::Schema(SchemaArgs { apply: true, .. }) => needed(store)?.apply_schema(args).await,
        Command::Doctor => needed(store)?.doctor(args).await,
        Command::Locks(command) => {
            on_open(store, args, async |open| {
                locks::run(&*open.provider, &open.locks, command).await
            })
            .await
        }
        Command::Runs(command) => {
            on_open(store, args, async |open| {
                runs::run(open.provider.run_log(), &open.runs, command).await
            })
            .await
        }
        Command::Jobs(command) => {
            on_open(store, args, async |open| {
                jobs::run(&open.fleet(), command).await
            })
            .await
        }
        Command::Dashboard(dashboard) => {
            on_open(store, args, async |open| {
                dashboard::run(open, dashboard).await
            })
            .await
        }
    }
}

/// Refuses what does not fit the URL's store: `schema --db` naming another database, or an
/// option of another kind of store (one that would do nothing).
fn check(store: &dyn Store, cli: &Cli) -> Result<(), Failure> {
    if let Command::Schema(SchemaArgs { db: Some(db), .. }) = &cli.command
        && store.database() != Some(*db)
    {
        return Err(Failure::new(
            Exit::Usage,
            format!(
                "--db does not match the database of the URL {}",
                store.target().shown
            ),
        ));
    }
    let mut given = cli.database.store_options();
    match given.find(|option| !store.options().contains(option)) {
        Some(option) => Err(Failure::new(
            Exit::Usage,
            format!("{option} does not apply to {}", store.name()),
        )),
        None => Ok(()),
    }
}

/// The store a command other than printing the schema needs.
fn needed(store: Option<Box<dyn Store>>) -> Result<Box<dyn Store>, Failure> {
    store.ok_or_else(|| {
        Failure::new(
            Exit::Usage,
            "no database: set SHEDLOCK_URL (or DATABASE_URL), or give --url",
        )
    })
}

/// Opens the store, runs `command` on it, and closes it whatever the command's result.
async fn on_open(
    store: Option<Box<dyn Store>>,
    args: &DatabaseArgs,
    command: impl AsyncFnOnce(&OpenStore) -> Result<Exit, Failure>,
) -> Result<Exit, Failure> {
    let open = needed(store)?.open(args).await?;
    let exit = command(&open).await;
    open.close().await;
    exit
}

/// `schema` without `--apply`: the DDL of the URL's database, or of `--db` without a URL.
/// Printing needs no connection, only which database.
fn print_schema(
    db: Option<DbKind>,
    store: Option<Box<dyn Store>>,
    args: &DatabaseArgs,
) -> Result<Exit, Failure> {
    let ddl = match (store, db) {
        // `--db`, if given, is the URL's database (checked above).
        (Some(store), _) => store.ddl(args)?,
        (None, Some(db)) => store::sql::ddl(db, args)?,
        (None, None) => {
            return Err(Failure::new(
                Exit::Usage,
                "give --db postgres|mysql|sqlite, or set SHEDLOCK_URL (or DATABASE_URL)",
            ));
        }
    };
    out!("{ddl}");
    Ok(Exit::Ok)
}
