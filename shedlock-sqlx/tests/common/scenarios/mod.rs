//! Cases every SQL provider must pass beyond the conformance suite, generic over the database
//! ([`TestDb`]). Each case works on a table of its own.

mod checks;
mod hostile;
mod java;
mod reset;
mod runs;
mod schema;

pub(crate) use checks::*;
pub(crate) use hostile::*;
pub(crate) use java::*;
pub(crate) use reset::*;
pub(crate) use runs::*;
pub(crate) use schema::*;

use std::time::{Duration, SystemTime};

use shedlock_core::{Error, LockConfiguration, LockLease, LockProvider, Operation};
#[allow(unused_imports)]
use shedlock_core::{LockInspector as _, LockQuery, LockRecord};
use shedlock_sqlx::dialect::Dialect;
use shedlock_sqlx::{ColumnNames, SqlLockProvider};

use super::unique_table;

/// The provider of a test database.
pub(crate) type Provider<D> = SqlLockProvider<<D as TestDb>::Dialect>;

/// One database and its dialect, as the cases need them.
#[shedlock_core::async_trait]
pub(crate) trait TestDb: Send + Sync + Sized + 'static {
    /// The dialect under test.
    type Dialect: Dialect;
    /// The column type of `lock_until`/`locked_at` in hand-made tables.
    const TIMESTAMP: &'static str;
    /// Whether `VARCHAR(n)` refuses longer values (SQLite does not).
    const ENFORCES_VARCHAR: bool;
    /// Java ShedLock's DDL and statements for this database, if it has them.
    const JAVA: Option<JavaSql>;
    /// Statements per operation: acquire on first use of a name, acquire of a free lock,
    /// acquire of a held lock, release, extend.
    const STATEMENTS: [usize; 5];
    /// Statements naming the lock table for a batch of 100 locks (`acquire_many`): all on
    /// first use, all held by another holder, all free. A transaction's `BEGIN` and `COMMIT`
    /// (MySQL, SQLite) name no table and are not counted.
    const BATCH_STATEMENTS: [usize; 3];
    /// Statements on the run table per run: start (no trim due), heartbeat, end.
    const RUN_STATEMENTS: [usize; 3];
    /// Statements naming the tables per batch of run-record starts, ends and releases made
    /// together (`runs_made_together_share_statements`); where the database does not batch
    /// them, that many for each call.
    const TOGETHER_STATEMENTS: [usize; 3];
    /// The run table `{r}` as `create_schema` made it before its two indexes (one on
    /// `started_at` instead), statements separated by `;`.
    const OLD_RUN_TABLE: &'static str;
    /// The names of table `{r}`'s indexes.
    const INDEX_NAMES: &'static str;

    fn build(
        &self,
        table: &str,
        columns: ColumnNames,
        holder: &str,
    ) -> Result<Provider<Self>, Error>;
    /// Runs SQL written by the test (literals only).
    async fn execute(&self, sql: &str);
    /// The database clock, read in a statement of its own (UTC).
    async fn now(&self) -> SystemTime;
    /// A schema the connection may qualify tables with.
    async fn schema(&self) -> String;
    /// The one integer `sql` returns.
    async fn scalar(&self, sql: &str) -> i64;
    /// The texts `sql` returns, one per row.
    async fn texts(&self, sql: &str) -> Vec<String>;
}

/// A provider on a new table of its own, created with `create_schema`.
pub(crate) async fn fresh<D: TestDb>(db: &D, holder: &str) -> Provider<D> {
    let provider = db
        .build(
            &unique_table("shedlock_case"),
            ColumnNames::default(),
            holder,
        )
        .expect("valid configuration");
    provider.create_schema().await.expect("create schema");
    provider
}

/// Drops a test's lock table and the run and board tables `create_schema` made beside it.
pub(crate) async fn drop_table<D: TestDb>(db: &D, table: &str) {
    db.execute(&format!("DROP TABLE IF EXISTS {table}")).await;
    db.execute(&format!("DROP TABLE IF EXISTS {table}_runs"))
        .await;
    db.execute(&format!("DROP TABLE IF EXISTS {table}_board"))
        .await;
}

pub(super) fn config(name: &str, at_most: Duration, at_least: Duration) -> LockConfiguration {
    LockConfiguration::new(name, at_most, at_least).expect("valid configuration")
}

pub(super) const LONG: Duration = Duration::from_secs(600);

/// `provider`'s attempt at lock `name` for [`LONG`]: the lease, if acquired.
pub(super) async fn attempt<D: Dialect>(
    provider: &SqlLockProvider<D>,
    name: &str,
) -> Option<LockLease> {
    provider
        .acquire(&config(name, LONG, Duration::ZERO))
        .await
        .unwrap()
}

/// Writes a lock row by hand, as ShedLock or an operator would: `values` are SQL literals of
/// name, `lock_until`, `locked_at` and `locked_by`; a fencing token only if one is given.
pub(super) async fn write_row<D: TestDb>(db: &D, table: &str, values: &str, token: Option<i64>) {
    let (token_column, token) = match token {
        Some(token) => (", fencing_token", format!(", {token}")),
        None => ("", String::new()),
    };
    db.execute(&format!(
        "INSERT INTO {table} (name, lock_until, locked_at, locked_by{token_column}) \
         VALUES ({values}{token})"
    ))
    .await;
}

pub(super) async fn row<D: TestDb>(provider: &Provider<D>, name: &str) -> LockRecord {
    provider
        .lock_record(name)
        .await
        .expect("read")
        .unwrap_or_else(|| panic!("no row for {name}"))
}

pub(super) fn is_store_error(
    result: &Result<impl std::fmt::Debug, Error>,
    operation: Operation,
) -> bool {
    matches!(result, Err(Error::Store { operation: op, .. }) if *op == operation)
}

/// What the cases need from a provider beyond the trait, the same for every dialect.
pub(crate) trait ProviderExt: Sized {
    fn table_name(&self) -> &str;
    fn clone_as(&self, holder: &str) -> Self;
}

impl<D: Dialect> ProviderExt for SqlLockProvider<D> {
    fn table_name(&self) -> &str {
        self.table()
    }
    fn clone_as(&self, holder: &str) -> Self {
        self.with_holder(holder).expect("valid holder")
    }
}

/// Declares a `TestDb` named `$db` over a pool of type `$pool` for provider `$provider`
/// (`SqlLockProvider<$dialect>`): the dialect's facts, and the queries of its clock (UTC)
/// and of its current schema.
#[macro_export]
macro_rules! test_db {
    (
        $db:ident($pool:ty) for $provider:ident {
            timestamp: $timestamp:literal,
            java: $java:expr,
            enforces_varchar: $enforces_varchar:literal,
            statements: $statements:expr,
            batch_statements: $batch_statements:expr,
            run_statements: $run_statements:expr,
            together_statements: $together_statements:expr,
            old_run_table: $old_run_table:literal,
            index_names: $index_names:literal,
            clock_query: $clock_query:literal,
            schema_query: $schema_query:literal $(,)?
        }
    ) => {
        struct $db {
            pool: $pool,
        }

        #[::shedlock_core::async_trait]
        impl $crate::common::scenarios::TestDb for $db {
            type Dialect = ::shedlock_sqlx::dialect::$db;
            const TIMESTAMP: &'static str = $timestamp;
            const ENFORCES_VARCHAR: bool = $enforces_varchar;
            const JAVA: Option<$crate::common::scenarios::JavaSql> = $java;
            const STATEMENTS: [usize; 5] = $statements;
            const BATCH_STATEMENTS: [usize; 3] = $batch_statements;
            const RUN_STATEMENTS: [usize; 3] = $run_statements;
            const TOGETHER_STATEMENTS: [usize; 3] = $together_statements;
            const OLD_RUN_TABLE: &'static str = $old_run_table;
            const INDEX_NAMES: &'static str = $index_names;

            fn build(
                &self,
                table: &str,
                columns: ::shedlock_sqlx::ColumnNames,
                holder: &str,
            ) -> Result<$provider, ::shedlock_core::Error> {
                $provider::builder(self.pool.clone())
                    .table(table)
                    .columns(columns)
                    .holder(holder)
                    .build()
            }
            async fn execute(&self, sql: &str) {
                ::sqlx::raw_sql(::sqlx::AssertSqlSafe(sql.to_owned()))
                    .execute(&self.pool)
                    .await
                    .unwrap_or_else(|e| panic!("{sql}: {e}"));
            }
            async fn now(&self) -> ::std::time::SystemTime {
                let now: ::chrono::NaiveDateTime = ::sqlx::query_scalar($clock_query)
                    .fetch_one(&self.pool)
                    .await
                    .expect("read the database clock");
                now.and_utc().into()
            }
            async fn schema(&self) -> String {
                ::sqlx::query_scalar($schema_query)
                    .fetch_one(&self.pool)
                    .await
                    .expect("read the current schema")
            }
            async fn scalar(&self, sql: &str) -> i64 {
                ::sqlx::query_scalar(::sqlx::AssertSqlSafe(sql.to_owned()))
                    .fetch_one(&self.pool)
                    .await
                    .unwrap_or_else(|e| panic!("{sql}: {e}"))
            }
            async fn texts(&self, sql: &str) -> Vec<String> {
                ::sqlx::query_scalar(::sqlx::AssertSqlSafe(sql.to_owned()))
                    .fetch_all(&self.pool)
                    .await
                    .unwrap_or_else(|e| panic!("{sql}: {e}"))
            }
        }
    };
}

/// Registers a database with the whole suite: the conformance suite (all cases on one table,
/// `shedlock_conformance`; lock names are unique per case) and every SQL provider case, for
/// a `TestDb` type declared with `test_db!` and an async expression giving `Option<pool>`
/// (`None` skips).
#[macro_export]
macro_rules! sql_provider_tests {
    ($db:ident, $pool:expr) => {
        mod conformance {
            use super::*;

            async fn harness() -> Option<::shedlock_conformance::ServerHarness> {
                let db = $db { pool: $pool.await? };
                let provider = <$db as $crate::common::scenarios::TestDb>::build(
                    &db,
                    "shedlock_conformance",
                    ::shedlock_sqlx::ColumnNames::default(),
                    "conformance",
                )
                .expect("valid configuration");
                provider.create_schema().await.expect("create schema");
                Some($crate::common::harness_over(provider))
            }

            ::shedlock_conformance::conformance_tests!(harness());

            mod inspection {
                use super::*;
                ::shedlock_conformance::inspection_tests!(harness());
            }

            mod runs {
                use super::*;
                ::shedlock_conformance::runs_tests!(harness());
            }

            /// The fleet's board, a table of its own per case.
            mod fleet {
                use super::*;

                async fn harness() -> Option<
                    $crate::common::board::BoardHarness<
                        <$db as $crate::common::scenarios::TestDb>::Dialect,
                    >,
                > {
                    let db = $db { pool: $pool.await? };
                    let provider = <$db as $crate::common::scenarios::TestDb>::build(
                        &db,
                        "shedlock_conformance",
                        ::shedlock_sqlx::ColumnNames::default(),
                        "fleet",
                    )
                    .expect("valid configuration");
                    provider.create_schema().await.expect("create schema");
                    Some($crate::common::board::BoardHarness::new(provider))
                }

                ::shedlock_conformance::fleet_tests!(harness());

                #[tokio::test]
                async fn board_keys_are_bytes() {
                    let Some(h) = harness().await else { return };
                    $crate::common::board::board_keys_are_bytes(&h).await;
                }

                #[tokio::test]
                async fn versions_grow_across_removal() {
                    let Some(h) = harness().await else { return };
                    $crate::common::board::versions_grow_across_removal(&h).await;
                }
            }
        }

        mod cases {
            use super::*;
            $crate::sql_provider_cases!(async { Some($db { pool: $pool.await? }) });
        }
    };
}

/// The run-table cases each database runs once (not per session setting): a table made
/// before the indexes, and a month of a fleet's history.
#[macro_export]
macro_rules! sql_run_cases {
    ($db:expr) => {
        mod run_cases {
            use super::*;
            $crate::sql_provider_cases!(@cases ($db)
                run_tables_made_before_keep_working,
                run_pages_order_ties_by_lock,
                aged_rows_go_in_batches,
                a_month_of_history_stays_within_the_bounds,
            );
        }
    };
}

/// Generates one `#[tokio::test]` per case for a `TestDb` expression (`Option`, `None` skips).
#[macro_export]
macro_rules! sql_provider_cases {
    ($db:expr) => {
        $crate::sql_provider_cases!(@cases ($db)
            lease_times_are_database_times,
            far_future_row_is_held,
            shedlock_rows_are_taken_over,
            exhausted_token_fails_cleanly,
            deleted_row_is_recreated,
            reset_rows_never_repeat_tokens,
            guard_checks_the_holder,
            java_shedlock_tables_work,
            missing_table_is_a_clear_error,
            hostile_identifiers_are_rejected,
            sql_looking_names_are_plain_names,
            names_longer_than_the_column_fail_clearly,
            create_schema_upgrades_shedlock_tables,
            create_schema_adds_the_last_tick_column,
            custom_columns_and_schema_work,
            inspection_reports_rows,
            operators_release_by_holder_and_token,
            statements_per_operation,
            statements_per_batch,
            inspection_reads_the_database_clock,
            check_schema_names_what_does_not_fit,
            check_access_leaves_no_trace,
            run_statements_per_run,
            runs_made_together_share_statements,
            runs_stay_bounded_when_runs_never_end,
        );
    };
    (@cases ($db:expr) $($case:ident,)*) => {
        $(
            #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                if let ::core::option::Option::Some(db) = $db.await {
                    $crate::common::scenarios::$case(&db).await;
                }
            }
        )*
    };
}
