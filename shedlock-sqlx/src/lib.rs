//! Lock providers for [shedlock](https://docs.rs/shedlock) on [sqlx](https://docs.rs/sqlx):
//! PostgreSQL (feature `postgres`), MySQL and MariaDB (`mysql`) and SQLite (`sqlite`).
//!
//! TODO docs
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
mod common;
#[cfg(feature = "mysql")]
mod mysql;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "sqlite")]
mod sqlite;

#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
pub use common::{ColumnNames, LockProviderBuilder, LockRow};
#[cfg(feature = "mysql")]
pub use mysql::MySqlLockProvider;
#[cfg(feature = "postgres")]
pub use postgres::PgLockProvider;
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteLockProvider;
