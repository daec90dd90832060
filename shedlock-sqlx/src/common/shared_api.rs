//! The inherent methods every SQL provider has in the same form, written once.

/// Implements construction, accessors and the read-only inspection methods for a provider
/// struct with fields `pool`, `holder`, `table: Arc<Table>` and `sql: Arc<Statements>` (whose
/// `lock_state` and `list_locks` statements return [`RowParts`](super::row::RowParts)).
macro_rules! shared_api {
    ($provider:ident, $pool:ty) => {
        impl $provider {
            /// A provider on table `shedlock` with ShedLock's column names, holding as
            /// [`default_holder()`](shedlock_core::default_holder).
            pub fn new(pool: $pool) -> Self {
                Self::builder(pool)
                    .build()
                    .expect("the default table, columns and holder are valid")
            }

            /// Configures table, columns and holder; see [`LockProviderBuilder`].
            pub fn builder(pool: $pool) -> $crate::LockProviderBuilder<$pool> {
                $crate::LockProviderBuilder::new(pool)
            }

            /// The same store acting as another holder (another instance), sharing the pool
            /// and the prepared SQL.
            ///
            /// # Errors
            /// [`Error::InvalidConfig`](shedlock_core::Error::InvalidConfig) (`holder`) when
            /// empty, longer than 255 characters or holding control characters.
            pub fn with_holder(
                &self,
                holder: impl Into<String>,
            ) -> Result<Self, shedlock_core::Error> {
                Ok($provider {
                    holder: $crate::common::validate_holder(holder.into())?,
                    ..self.clone()
                })
            }

            /// The pool this provider runs on.
            pub fn pool(&self) -> &$pool {
                &self.pool
            }

            /// The lock table, as configured (`table` or `schema.table`).
            pub fn table(&self) -> &str {
                &self.table.name
            }

            /// The row of one lock, if it exists, with `held` decided by the database clock.
            ///
            /// # Errors
            /// [`Error::Store`](shedlock_core::Error::Store) (`Operation::Read`) when the
            /// query fails.
            pub async fn lock_state(
                &self,
                lock_name: &str,
            ) -> Result<Option<$crate::LockRow>, shedlock_core::Error> {
                let row = sqlx::query_as(self.sql.lock_state.clone())
                    .bind(lock_name)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(|e| {
                        $crate::common::store_error(
                            shedlock_core::Operation::Read,
                            lock_name,
                            &self.table,
                            e,
                        )
                    })?;
                Ok(row.map($crate::LockRow::from_parts))
            }

            /// Every row of the lock table, by name, with `held` decided by the database clock.
            ///
            /// # Errors
            /// [`Error::Store`](shedlock_core::Error::Store) (`Operation::Read`) when the
            /// query fails.
            pub async fn list_locks(&self) -> Result<Vec<$crate::LockRow>, shedlock_core::Error> {
                let rows = sqlx::query_as(self.sql.list_locks.clone())
                    .fetch_all(&self.pool)
                    .await
                    .map_err(|e| {
                        $crate::common::store_error(
                            shedlock_core::Operation::Read,
                            "*",
                            &self.table,
                            e,
                        )
                    })?;
                Ok(rows.into_iter().map($crate::LockRow::from_parts).collect())
            }
        }
    };
}

pub(crate) use shared_api;
