//! Dispatch: which store, which provider, which command; and the `schema` command on SQL
//! (the other stores are run by `stores`).

use shedlock_core::LockProvider;
use shedlock_sqlx::dialect::{MySql, Pg, Sqlite};
use shedlock_sqlx::{ColumnNames, SqlLockProvider};
use sqlx::Pool;

use crate::cli::{Cli, Command, DatabaseArgs, DbKind, SchemaArgs};
use crate::failure::{Exit, Failure};
use crate::locks::Place;
use crate::target::{OpenPool, StoreKind, Target};
use crate::{connect, dashboard, doctor, locks, runs, stores};

/// Runs the command line's command: the exit status, or the failure to print.
pub(crate) async fn run(cli: Cli) -> Result<Exit, Failure> {
    let target = cli
        .database
        .url()
        .as_deref()
        .map(Target::parse)
        .transpose()?;
    if let (Command::Schema(SchemaArgs { db: Some(kind), .. }), Some(target)) =
        (&cli.command, &target)
        && StoreKind::Sql(*kind) != target.kind
    {
        return Err(Failure::new(
            Exit::Usage,
            format!(
                "--db does not match the database of the URL {}",
                target.shown
            ),
        ));
    }
    if let Some(target) = &target {
        check_options(&cli.database, target.kind)?;
    }
    if let Command::Schema(SchemaArgs { db, apply: false }) = &cli.command {
        // Printing needs no connection, only which database.
        let kind = match (db, &target) {
            (Some(kind), _) => *kind,
            (None, Some(target)) => match target.kind {
                StoreKind::Sql(kind) => kind,
                _ => return Err(stores::no_ddl(target.kind)),
            },
            (None, None) => {
                return Err(Failure::new(
                    Exit::Usage,
                    "give --db postgres|mysql|sqlite, or set SHEDLOCK_URL (or DATABASE_URL)",
                ));
            }
        };
        match kind {
            DbKind::Postgres => print_schema::<Pg>(&cli.database)?,
            DbKind::Mysql => print_schema::<MySql>(&cli.database)?,
            DbKind::Sqlite => print_schema::<Sqlite>(&cli.database)?,
        }
        return Ok(Exit::Ok);
    }
    let Some(target) = target else {
        return Err(Failure::new(
            Exit::Usage,
            "no database: set SHEDLOCK_URL (or DATABASE_URL), or give --url",
        ));
    };
    match target.kind {
        StoreKind::Sql(DbKind::Postgres) => run_on::<Pg>(&cli, &target).await,
        StoreKind::Sql(DbKind::Mysql) => run_on::<MySql>(&cli, &target).await,
        StoreKind::Sql(DbKind::Sqlite) => run_on::<Sqlite>(&cli, &target).await,
        StoreKind::Redis | StoreKind::RedLock | StoreKind::ZooKeeper | StoreKind::Etcd => {
            stores::run(&cli, &target).await
        }
    }
}

/// Refuses the options of another kind of store: an option that would do nothing.
fn check_options(args: &DatabaseArgs, kind: StoreKind) -> Result<(), Failure> {
    let sql = [
        ("--table", args.table.is_some()),
        ("--name-column", args.name_column.is_some()),
        ("--lock-until-column", args.lock_until_column.is_some()),
        ("--locked-at-column", args.locked_at_column.is_some()),
        ("--locked-by-column", args.locked_by_column.is_some()),
        (
            "--fencing-token-column",
            args.fencing_token_column.is_some(),
        ),
    ];
    let given = |options: &[(&'static str, bool)]| {
        options
            .iter()
            .find(|(_, given)| *given)
            .map(|(name, _)| *name)
    };
    let foreign = match kind {
        StoreKind::Sql(_) => given(&[
            ("--key-prefix", args.key_prefix.is_some()),
            ("--root", args.root.is_some()),
        ]),
        StoreKind::Redis | StoreKind::RedLock => {
            given(&sql).or(given(&[("--root", args.root.is_some())]))
        }
        StoreKind::ZooKeeper => {
            given(&sql).or(given(&[("--key-prefix", args.key_prefix.is_some())]))
        }
        StoreKind::Etcd => given(&sql).or(given(&[("--root", args.root.is_some())])),
    };
    match foreign {
        Some(option) => Err(Failure::new(
            Exit::Usage,
            format!("{option} does not apply to {}", connect::describe(kind)),
        )),
        None => Ok(()),
    }
}

async fn run_on<D: OpenPool>(cli: &Cli, target: &Target) -> Result<Exit, Failure> {
    let create = matches!(cli.command, Command::Schema(SchemaArgs { apply: true, .. }));
    let pool = target
        .pool::<D>(cli.database.connect_timeout, create)
        .await?;
    let provider = provider::<D>(pool, &cli.database)?;
    let place = Place::new(format!("table `{}`", provider.table()), "row");
    let exit = match &cli.command {
        Command::Locks(command) => locks::run(&provider, &place, command).await,
        Command::Runs(command) => {
            let runs = Place::new(format!("table `{}`", provider.runs_table()), "row");
            runs::run(provider.run_log(), &runs, command).await
        }
        Command::Schema(_) => {
            provider.create_schema().await.map_err(Failure::error)?;
            // Ready only when the provider can use the table, whatever create_schema did.
            let issues = provider.check_schema().await.map_err(Failure::error)?;
            if issues.is_empty() {
                out!(
                    "lock table `{}` is ready on {} (created if missing, fencing_token added \
                     and ShedLock's MySQL TIMESTAMP columns converted if needed)",
                    provider.table(),
                    target.shown
                );
                Ok(Exit::Ok)
            } else {
                for issue in &issues {
                    out!("problem  {issue}");
                }
                out!(
                    "lock table `{}` is not usable yet: `shedlock doctor` says how to fix it",
                    provider.table()
                );
                Ok(Exit::Problems)
            }
        }
        Command::Dashboard(args) => dashboard::run(provider.clone(), &target.shown, args).await,
        Command::Doctor => {
            let token_column = cli.database.fencing_token_column.as_deref();
            doctor::run(&provider, target, token_column.unwrap_or("fencing_token")).await
        }
    };
    provider.pool().close().await;
    exit
}

/// The provider on the configured table and columns. It runs every statement on the pool:
/// a command makes a few, one after the other.
fn provider<D: OpenPool>(
    pool: Pool<D::Database>,
    args: &DatabaseArgs,
) -> Result<SqlLockProvider<D>, Failure> {
    let mut columns = ColumnNames::default();
    if let Some(column) = &args.name_column {
        columns = columns.name(column);
    }
    if let Some(column) = &args.lock_until_column {
        columns = columns.lock_until(column);
    }
    if let Some(column) = &args.locked_at_column {
        columns = columns.locked_at(column);
    }
    if let Some(column) = &args.locked_by_column {
        columns = columns.locked_by(column);
    }
    if let Some(column) = &args.fencing_token_column {
        columns = columns.fencing_token(column);
    }
    let mut builder = D::for_tool(SqlLockProvider::<D>::builder(pool))
        .columns(columns)
        .dedicated_connections(0);
    if let Some(table) = &args.table {
        builder = builder.table(table);
    }
    builder
        .build()
        .map_err(|e| Failure::new(Exit::Usage, e.to_string()))
}

/// The DDL of the configured table for a database, without connecting to one.
fn print_schema<D: OpenPool>(args: &DatabaseArgs) -> Result<(), Failure> {
    out!("{}", provider::<D>(D::offline_pool(), args)?.schema_sql());
    Ok(())
}
