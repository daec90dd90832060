//! The builder shared by all SQL providers, and the validated table description it produces.

use std::sync::Arc;

use shedlock_core::{Error, default_holder};

use super::identifier::{validate_column, validate_table};

/// Longest holder identity: the `VARCHAR(255)` `locked_by` column.
pub(crate) const MAX_HOLDER_LEN: usize = 255;

/// The column names of the lock table; [`Default`] is ShedLock's layout plus `fencing_token`.
///
/// ```
/// use shedlock_sqlx::ColumnNames;
///
/// let columns = ColumnNames::default().name("lock_name").locked_by("owner");
/// # let _ = columns;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnNames {
    pub(crate) name: String,
    pub(crate) lock_until: String,
    pub(crate) locked_at: String,
    pub(crate) locked_by: String,
    pub(crate) fencing_token: String,
}

impl Default for ColumnNames {
    fn default() -> Self {
        ColumnNames {
            name: "name".into(),
            lock_until: "lock_until".into(),
            locked_at: "locked_at".into(),
            locked_by: "locked_by".into(),
            fencing_token: "fencing_token".into(),
        }
    }
}

impl ColumnNames {
    /// The lock name column (primary key), default `name`.
    pub fn name(mut self, column: impl Into<String>) -> Self {
        self.name = column.into();
        self
    }

    /// The lease end column, default `lock_until`.
    pub fn lock_until(mut self, column: impl Into<String>) -> Self {
        self.lock_until = column.into();
        self
    }

    /// The acquisition time column, default `locked_at`.
    pub fn locked_at(mut self, column: impl Into<String>) -> Self {
        self.locked_at = column.into();
        self
    }

    /// The holder column, default `locked_by`.
    pub fn locked_by(mut self, column: impl Into<String>) -> Self {
        self.locked_by = column.into();
        self
    }

    /// The fencing token column, default `fencing_token`.
    pub fn fencing_token(mut self, column: impl Into<String>) -> Self {
        self.fencing_token = column.into();
        self
    }

    fn validate(&self) -> Result<(), Error> {
        validate_column("columns.name", &self.name)?;
        validate_column("columns.lock_until", &self.lock_until)?;
        validate_column("columns.locked_at", &self.locked_at)?;
        validate_column("columns.locked_by", &self.locked_by)?;
        validate_column("columns.fencing_token", &self.fencing_token)
    }
}

/// Configures a SQL lock provider: table, columns and holder identity.
///
/// Get one from `PgLockProvider::builder`, `MySqlLockProvider::builder` or
/// `SqliteLockProvider::builder`; `build()` validates every identifier and returns
/// [`Error::InvalidConfig`] naming the offending field (`table`, `columns.name`, `holder`, …).
/// Only plain identifiers (`[A-Za-z_][A-Za-z0-9_]*`, at most 63 characters each) are accepted,
/// the table optionally as `schema.table`: they are written into the SQL unquoted.
#[derive(Debug)]
pub struct LockProviderBuilder<P> {
    pool: P,
    table: String,
    columns: ColumnNames,
    holder: Option<String>,
    /// Connections the provider keeps for lock statements (PostgreSQL and MySQL).
    #[cfg(any(feature = "postgres", feature = "mysql"))]
    pub(crate) dedicated_connections: usize,
    #[cfg(feature = "postgres")]
    pub(crate) release_notify: crate::postgres::ReleaseNotify,
}

impl<P> LockProviderBuilder<P> {
    pub(crate) fn new(pool: P) -> Self {
        LockProviderBuilder {
            pool,
            table: "shedlock".into(),
            columns: ColumnNames::default(),
            holder: None,
            #[cfg(any(feature = "postgres", feature = "mysql"))]
            dedicated_connections: 0,
            #[cfg(feature = "postgres")]
            release_notify: Default::default(),
        }
    }

    /// The lock table, `table` or `schema.table`; default `shedlock`.
    pub fn table(mut self, table: impl Into<String>) -> Self {
        self.table = table.into();
        self
    }

    /// The column names; default [`ColumnNames::default`].
    pub fn columns(mut self, columns: ColumnNames) -> Self {
        self.columns = columns;
        self
    }

    /// The identity this provider acquires locks as; default
    /// [`default_holder()`](shedlock_core::default_holder) (`host:pid:random`).
    /// Must be unique per running instance.
    pub fn holder(mut self, holder: impl Into<String>) -> Self {
        self.holder = Some(holder.into());
        self
    }

    /// Checks everything and splits the builder into the pool and the validated settings.
    pub(crate) fn validate(self) -> Result<(P, Table, Arc<str>), Error> {
        validate_table("table", &self.table)?;
        self.columns.validate()?;
        let holder = match self.holder {
            Some(holder) => validate_holder(holder)?,
            None => default_holder().into(),
        };
        let table = Table {
            name: self.table,
            columns: self.columns,
        };
        Ok((self.pool, table, holder))
    }
}

/// Checks a holder identity: it is a bound parameter, but must fit the column and stay readable.
pub(crate) fn validate_holder(holder: String) -> Result<Arc<str>, Error> {
    if holder.is_empty() {
        return Err(Error::invalid_config("holder", "must not be empty"));
    }
    if holder.chars().count() > MAX_HOLDER_LEN {
        return Err(Error::invalid_config(
            "holder",
            format!("is longer than {MAX_HOLDER_LEN} characters, the `locked_by` column"),
        ));
    }
    if holder.chars().any(char::is_control) {
        return Err(Error::invalid_config(
            "holder",
            format!("must not contain control characters: {holder:?}"),
        ));
    }
    Ok(holder.into())
}

/// A validated lock table: every name in it is safe to splice into SQL.
#[derive(Debug, Clone)]
pub(crate) struct Table {
    pub(crate) name: String,
    pub(crate) columns: ColumnNames,
}

/// A dialect's column types for the lock table.
#[derive(Debug)]
pub(crate) struct ColumnTypes {
    pub(crate) name: &'static str,
    pub(crate) time: &'static str,
    pub(crate) token: &'static str,
}

impl Table {
    /// `CREATE TABLE IF NOT EXISTS` in the layout of the `sql/` files: ShedLock's columns plus
    /// the fencing token.
    pub(crate) fn create_table_sql(&self, types: &ColumnTypes) -> String {
        let c = &self.columns;
        format!(
            "CREATE TABLE IF NOT EXISTS {t} (\n    \
             {name} {name_type} NOT NULL,\n    \
             {until} {time} NOT NULL,\n    \
             {at} {time} NOT NULL,\n    \
             {by} VARCHAR(255) NOT NULL,\n    \
             {token} {token_type} NOT NULL DEFAULT 0,\n    \
             PRIMARY KEY ({name})\n);",
            t = self.name,
            name = c.name,
            until = c.lock_until,
            at = c.locked_at,
            by = c.locked_by,
            token = c.fencing_token,
            name_type = types.name,
            time = types.time,
            token_type = types.token,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(builder: LockProviderBuilder<()>) -> &'static str {
        match builder.validate() {
            Err(Error::InvalidConfig { field, .. }) => field,
            other => panic!("expected InvalidConfig, got {other:?}"),
        }
    }

    #[test]
    fn names_the_offending_field() {
        let b = || LockProviderBuilder::new(());
        assert_eq!(field(b().table("x; DROP TABLE y")), "table");
        assert_eq!(
            field(b().columns(ColumnNames::default().lock_until("a b"))),
            "columns.lock_until"
        );
        assert_eq!(
            field(b().columns(ColumnNames::default().fencing_token("t\"--"))),
            "columns.fencing_token"
        );
        assert_eq!(field(b().holder("")), "holder");
        assert_eq!(field(b().holder("h".repeat(256))), "holder");
        assert_eq!(field(b().holder("a\nb")), "holder");
    }

    #[test]
    fn defaults_are_valid() {
        let (_, table, holder) = LockProviderBuilder::new(()).validate().unwrap();
        assert_eq!(table.name, "shedlock");
        assert_eq!(&*holder, default_holder());
        assert!(
            LockProviderBuilder::new(())
                .holder("ü".repeat(255))
                .validate()
                .is_ok()
        );
    }
}
