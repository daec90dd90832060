//! SQL: a lock table on PostgreSQL, MySQL/MariaDB or SQLite (`postgres://…`, `mysql://…`,
//! `mariadb://…`, `sqlite:FILE`), on the table and columns the command line names.

mod doctor;
mod pool;

use std::marker::PhantomData;

use percent_encoding::percent_decode_str;
use shedlock_core::async_trait;
use shedlock_sqlx::dialect::{MySql, Pg, Sqlite};
use shedlock_sqlx::{ColumnNames, SqlLockProvider};
use sqlx::Pool;
use url::Url;

use self::pool::OpenPool;
use super::kind::{Kind, OpenStore, Place, Provider, Reading, Store};
use super::target::Target;
use crate::cli::{DatabaseArgs, DbKind};
use crate::failure::{Exit, Failure};

pub(super) const KIND: Kind = Kind {
    form: "postgres://…, mysql://…, sqlite:FILE",
    read,
    name: "a SQL database",
    options: OPTIONS,
    no_schema: "",
};

/// The options of a lock table.
const OPTIONS: &[&str] = &[
    "--table",
    "--name-column",
    "--lock-until-column",
    "--locked-at-column",
    "--locked-by-column",
    "--fencing-token-column",
    "--last-tick-column",
];

/// A URL whose scheme names a SQL database.
fn read(target: &Target, _expected: &str) -> Reading {
    let parsed = Url::parse(&target.url)
        .ok()
        .or_else(|| Url::parse(&first_host_only(&target.url)?).ok())?;
    let user = user(&parsed);
    let store: Box<dyn Store> = match parsed.scheme() {
        "postgres" | "postgresql" => Box::new(Sql::<Pg>::new(target, user)),
        "mysql" | "mariadb" => Box::new(Sql::<MySql>::new(target, user)),
        "sqlite" => Box::new(Sql::<Sqlite>::new(target, user)),
        _ => return None,
    };
    Some(Ok(store))
}

/// A PostgreSQL multi-host URL (`postgres://u@h1:5432,h2:5432/db`, which the url crate does not
/// read) with its first host only: for its scheme and user. The pool opens the whole URL
/// (`OpenPool::open_special`).
fn first_host_only(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    if !matches!(scheme, "postgres" | "postgresql") {
        return None;
    }
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => (format!("{userinfo}@"), hosts),
        None => (String::new(), authority),
    };
    let (first, _) = hosts.split_once(',')?;
    Some(format!("{scheme}://{userinfo}{first}{tail}"))
}

/// The user a URL names, percent-decoded.
fn user(url: &Url) -> Option<String> {
    let user = percent_decode_str(url.username()).decode_utf8_lossy();
    Some(user.into_owned()).filter(|user| !user.is_empty())
}

/// The DDL of the command line's table for `db`, without connecting to one (`schema --db`).
pub(crate) fn ddl(db: DbKind, args: &DatabaseArgs) -> Result<String, Failure> {
    match db {
        DbKind::Postgres => ddl_of::<Pg>(args),
        DbKind::Mysql => ddl_of::<MySql>(args),
        DbKind::Sqlite => ddl_of::<Sqlite>(args),
    }
}

fn ddl_of<D: OpenPool>(args: &DatabaseArgs) -> Result<String, Failure> {
    Ok(provider::<D>(D::offline_pool(), args)?.schema_sql())
}

/// A database of dialect `D`.
struct Sql<D> {
    target: Target,
    /// The user in the URL, if any.
    user: Option<String>,
    dialect: PhantomData<D>,
}

impl<D: OpenPool> Sql<D> {
    fn new(target: &Target, user: Option<String>) -> Self {
        Sql {
            target: target.clone(),
            user,
            dialect: PhantomData,
        }
    }

    /// The provider on a pool of its own. `create`: an SQLite file that does not exist is
    /// created.
    async fn connect(
        &self,
        args: &DatabaseArgs,
        create: bool,
    ) -> Result<SqlLockProvider<D>, Failure> {
        let pool = pool::open::<D>(&self.target, args.connect_timeout, create).await?;
        provider(pool, args)
    }
}

#[async_trait(?Send)]
impl<D: OpenPool> Store for Sql<D> {
    fn kind(&self) -> &'static Kind {
        &KIND
    }

    fn target(&self) -> &Target {
        &self.target
    }

    fn database(&self) -> Option<DbKind> {
        Some(D::KIND)
    }

    fn ddl(&self, args: &DatabaseArgs) -> Result<String, Failure> {
        ddl_of::<D>(args)
    }

    async fn apply_schema(&self, args: &DatabaseArgs) -> Result<Exit, Failure> {
        let provider = self.connect(args, true).await?;
        let exit = apply(&provider, &self.target).await;
        provider.close().await;
        exit
    }

    async fn doctor(&self, args: &DatabaseArgs) -> Result<Exit, Failure> {
        let provider = self.connect(args, false).await?;
        let added = doctor::AddedColumns {
            fencing_token: args
                .fencing_token_column
                .as_deref()
                .unwrap_or("fencing_token"),
            last_tick: args.last_tick_column.as_deref().unwrap_or("last_tick"),
        };
        let user = self.user.as_deref();
        let exit = doctor::run(&provider, &self.target, user, added).await;
        provider.close().await;
        exit
    }

    async fn open(&self, args: &DatabaseArgs) -> Result<OpenStore, Failure> {
        let provider = self.connect(args, false).await?;
        let table = |table: &str| Place::new(format!("table `{table}`"), "row");
        let (locks, runs) = (table(provider.table()), table(provider.runs_table()));
        let mut store = OpenStore::new(&self.target, provider, locks);
        store.runs = runs;
        Ok(store)
    }
}

/// Its pool ends with the command.
#[async_trait]
impl<D: OpenPool> Provider for SqlLockProvider<D> {
    async fn close(&self) {
        self.pool().close().await;
    }
}

/// Creates the table (or completes it), and says whether the provider can use it.
async fn apply<D: OpenPool>(
    provider: &SqlLockProvider<D>,
    target: &Target,
) -> Result<Exit, Failure> {
    provider.create_schema().await.map_err(Failure::error)?;
    // Ready only when the provider can use the table, whatever create_schema did.
    let issues = provider.check_schema().await.map_err(Failure::error)?;
    if issues.is_empty() {
        out!(
            "lock table `{}` is ready on {} (created if missing, fencing_token and last_tick \
             added and ShedLock's MySQL TIMESTAMP columns converted if needed)",
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
    if let Some(column) = &args.last_tick_column {
        columns = columns.last_tick(column);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_is_decoded() {
        let url = Url::parse("mysql://app%2Dro:pw@h/db").unwrap();
        assert_eq!(user(&url).as_deref(), Some("app-ro"));
        assert_eq!(user(&Url::parse("sqlite:locks.db").unwrap()), None);
    }
}
