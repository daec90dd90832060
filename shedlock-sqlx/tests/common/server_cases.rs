//! Tests the server databases (PostgreSQL, MySQL/MariaDB) share in form but not in types:
//! generated per test file by macros, since sessions, pools and transactions are typed per
//! driver.

/// `session_time_zones_do_not_matter`, for a `TestDb` type (`test_db!`), a pool constructor
/// taking an optional session time zone, and two zones a day apart.
#[macro_export]
macro_rules! session_time_zones_case {
    ($db:ident, $pool_in_time_zone:path, $east:literal, $west:literal) => {
        /// Instances differ in session time zone (and, in the field, in clock): the provider reads
        /// neither. Two providers whose sessions run 25 hours apart exclude each other and see the same
        /// `lock_until`, which is the database's UTC clock plus the lease.
        #[tokio::test]
        async fn session_time_zones_do_not_matter() {
            use ::shedlock_core::LockProvider as _;
            use $crate::common::scenarios::TestDb as _;
            let (Some(east), Some(west)) = (
                $pool_in_time_zone(Some($east)).await,
                $pool_in_time_zone(Some($west)).await,
            ) else {
                return;
            };
            let (east, west) = ($db { pool: east }, $db { pool: west });
            let table = $crate::common::unique_table("shedlock_tz");
            let columns = ::shedlock_sqlx::ColumnNames::default();
            let a = east.build(&table, columns.clone(), "east").unwrap();
            let b = west.build(&table, columns, "west").unwrap();
            a.create_schema().await.unwrap();
            let c = $crate::common::lease_config("tz", ::std::time::Duration::from_secs(60));
            let lease = a.acquire(&c).await.unwrap().expect("acquired");
            assert!(
                b.acquire(&c).await.unwrap().is_none(),
                "west acquired east's lock"
            );
            let (seen_by_a, seen_by_b) = (
                ::shedlock_core::LockInspector::lock_record(&a, "tz")
                    .await
                    .unwrap()
                    .unwrap(),
                ::shedlock_core::LockInspector::lock_record(&b, "tz")
                    .await
                    .unwrap()
                    .unwrap(),
            );
            // The same row in both zones; only the moment of reading differs.
            let mut seen_by_b = seen_by_b;
            seen_by_b.read_at = seen_by_a.read_at;
            assert_eq!(seen_by_a, seen_by_b);
            assert_eq!(seen_by_a.lock_until, lease.lock_until());
            let now = west.now().await;
            assert!($crate::common::millis_between(lease.locked_at(), now).abs() < 1_000);
            // What an instance 3 hours ahead would have written had it used its own clock.
            let skewed_local =
                ::std::time::SystemTime::now() + ::std::time::Duration::from_secs(3 * 3600);
            assert!(
                $crate::common::millis_between(lease.locked_at(), skewed_local) > 2 * 3600 * 1000
            );
            $crate::common::scenarios::drop_table(&east, &table).await;
        }
    };
}

/// `fencing_guard_orders_writes`, for a `TestDb` type (`test_db!`), a pool constructor, and
/// the dialect's bind placeholder.
#[macro_export]
macro_rules! fencing_guard_case {
    ($db:ident, $pool:path, $placeholder:literal) => {
        /// The fencing guard: a live lease may write; a paused holder whose lease was taken over is
        /// refused; and while a guarded transaction runs, nobody can take the lock over.
        #[tokio::test]
        async fn fencing_guard_orders_writes() {
            use ::shedlock_core::LockProvider as _;
            use ::sqlx::Executor as _;
            let Some(pool) = $pool().await else { return };
            let db = $db { pool: pool.clone() };
            let a = $crate::common::scenarios::fresh(&db, "a").await;
            let b = a.with_holder("b").unwrap();
            let data = $crate::common::unique_table("fenced_data");
            pool.execute(::sqlx::AssertSqlSafe(format!(
                "CREATE TABLE {data} (token BIGINT)"
            )))
            .await
            .unwrap();
            let insert = format!("INSERT INTO {data} VALUES ({})", $placeholder);

            let lease_len = ::std::time::Duration::from_millis(400);
            let c = $crate::common::lease_config("fenced", lease_len);
            let paused = a.acquire(&c).await.unwrap().unwrap();
            let mut tx = pool.begin().await.unwrap();
            a.verify_lease(&mut tx, "fenced", paused.fencing_token())
                .await
                .expect("live lease");
            sqlx::query(::sqlx::AssertSqlSafe(insert.as_str()))
                .bind(paused.fencing_token() as i64)
                .execute(&mut *tx)
                .await
                .unwrap();
            tx.commit().await.unwrap();

            tokio::time::sleep(lease_len + ::std::time::Duration::from_millis(100)).await;
            let current = b.acquire(&c).await.unwrap().expect("taken over");
            let mut tx = pool.begin().await.unwrap();
            let stale = a
                .verify_lease(&mut tx, "fenced", paused.fencing_token())
                .await;
            assert!(
                matches!(stale, Err(::shedlock_core::Error::LockLost { .. })),
                "{stale:?}"
            );
            tx.rollback().await.unwrap();

            // b verifies, then its lease runs out while its transaction is still open: a takeover
            // waits for the transaction, so b's write still lands before the next holder's.
            let mut tx = pool.begin().await.unwrap();
            b.verify_lease(&mut tx, "fenced", current.fencing_token())
                .await
                .expect("live lease");
            tokio::time::sleep(lease_len + ::std::time::Duration::from_millis(100)).await;
            let written = current.fencing_token() as i64;
            let commit = async {
                sqlx::query(::sqlx::AssertSqlSafe(insert.as_str()))
                    .bind(written)
                    .execute(&mut *tx)
                    .await
                    .unwrap();
                tx.commit().await.unwrap();
            };
            let patience = ::std::time::Duration::from_millis(300);
            $crate::common::takeover_waits_for_commit(&a, &c, &current, patience, commit).await;

            let written: Vec<i64> =
                sqlx::query_scalar(::sqlx::AssertSqlSafe(format!("SELECT token FROM {data}")))
                    .fetch_all(&pool)
                    .await
                    .unwrap();
            assert_eq!(
                written,
                [
                    paused.fencing_token() as i64,
                    current.fencing_token() as i64
                ]
            );
            $crate::common::scenarios::drop_table(&db, a.table()).await;
            pool.execute(::sqlx::AssertSqlSafe(format!("DROP TABLE {data}")))
                .await
                .unwrap();
        }
    };
}

/// `lost_answer_grant_is_adopted`, for a `TestDb` type (`test_db!`), its pool options type
/// and the test URL's function.
#[macro_export]
macro_rules! lost_answer_case {
    ($db:ident, $pool_options:ty, $url:path) => {
        /// The connection breaks after an acquire statement was sent, and its answer never
        /// comes: the database granted the lease. The provider recognises the lease as its own
        /// (held by its holder, granted during the call, no other acquisition of the name in
        /// flight) and hands it out, instead of an error with the lock then taken for
        /// `lock_at_most_for` by a lease nobody knew of.
        #[tokio::test]
        async fn lost_answer_grant_is_adopted() {
            use ::shedlock_core::LockProvider as _;
            let Some(url) = $url() else { return };
            let upstream = ::shedlock_conformance::upstream_of(&url).unwrap();
            let proxy = ::shedlock_conformance::CutProxy::start(&upstream)
                .await
                .unwrap();
            // No checkout ping: the only bytes sent after arming are the acquire's.
            let pool = <$pool_options>::new()
                .max_connections(2)
                .test_before_acquire(false)
                .connect(&proxy.url_through(&url).unwrap())
                .await
                .unwrap();
            let table = $crate::common::unique_table("shedlock_lost");
            let a = $crate::common::scenarios::Provider::<$db>::builder(pool.clone())
                .table(&table)
                .holder("a")
                .dedicated_connections(1)
                .build()
                .unwrap();
            a.create_schema().await.unwrap();
            let b = a.with_holder("b").unwrap();
            let c = $crate::common::lease_config("lost", ::std::time::Duration::from_secs(600));
            // Prepares the statements on the one dedicated connection.
            let warm = a.acquire(&c).await.unwrap().expect("free");
            assert!(a.release(&warm).await.unwrap());

            proxy.lose_next_answer();
            let lease = match a.acquire(&c).await {
                Ok(Some(lease)) => lease,
                other => panic!("the granted lease was not recognised: {other:?}"),
            };
            assert!(lease.fencing_token() > warm.fencing_token());
            assert!(b.acquire(&c).await.unwrap().is_none(), "held by a");
            assert!(a.release(&lease).await.unwrap(), "a's own lease");
            assert!(b.acquire(&c).await.unwrap().is_some(), "free once released");
            $crate::common::scenarios::drop_table(&$db { pool }, &table).await;
        }
    };
}
