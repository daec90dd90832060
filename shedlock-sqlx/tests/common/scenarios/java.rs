//! A table made with Java ShedLock's own DDL (from its README), with rows Java wrote in it,
//! shared with Java instances afterwards: it works after `create_schema`, and only then does
//! `check_schema` call it fit.

use shedlock_core::LockProvider;
use shedlock_sqlx::ColumnNames;

use super::{ProviderExt, TestDb, attempt, drop_table, row};
use crate::common::{millis_between, unique_table};

/// Java ShedLock's SQL for one database, `{t}` standing for the table: its README's DDL, rows
/// as its `usingDbTime()` statements write them (`held` for an hour, `expired` a minute ago),
/// and its acquisition of a free row (`UPDATE … WHERE lock_until <= now`) of lock `{name}`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct JavaSql {
    pub(crate) ddl: &'static str,
    pub(crate) rows: &'static str,
    pub(crate) acquire: &'static str,
}

fn on(sql: &str, table: &str, name: &str) -> String {
    sql.replace("{t}", table).replace("{name}", name)
}

pub(crate) async fn java_shedlock_tables_work<D: TestDb>(db: &D) {
    let Some(java) = D::JAVA else {
        return; // Java ShedLock has no DDL for this database
    };
    let table = unique_table("shedlock_java_ddl");
    db.execute(&on(java.ddl, &table, "")).await;
    db.execute(&on(java.rows, &table, "")).await;
    let provider = db.build(&table, ColumnNames::default(), "rust").unwrap();
    assert!(
        !provider.check_schema().await.unwrap().is_empty(),
        "a table without fencing_token was called fit"
    );

    provider.create_schema().await.expect("create_schema");
    provider.create_schema().await.expect("create_schema again");
    assert_eq!(provider.check_schema().await.unwrap(), []);

    // Java's rows kept their times: the held one is held for about an hour more.
    let now = db.now().await;
    let held = row::<D>(&provider, "held").await;
    assert!(held.held && held.holder == "java-host", "{held:?}");
    let left = millis_between(now, held.lock_until);
    assert!(
        (59 * 60_000..=61 * 60_000).contains(&left),
        "the held row ends in {left} ms, not in an hour"
    );
    assert!(attempt(&provider, "held").await.is_none());
    let lease = attempt(&provider, "expired")
        .await
        .expect("the expired Java row is free");
    assert!(provider.release(&lease).await.unwrap());

    // Java instances keep working on the table: their acquisition of the released row holds
    // it against ours, and leaves the token alone.
    db.execute(&on(java.acquire, &table, "expired")).await;
    let taken = row::<D>(&provider, "expired").await;
    assert_eq!(taken.holder, "java-host");
    assert!(taken.held);
    assert_eq!(taken.fencing_token, lease.fencing_token());
    assert!(attempt(&provider, "expired").await.is_none());
    assert!(
        provider
            .clone_as("stale")
            .release(&lease)
            .await
            .is_ok_and(|released| !released),
        "a release of the earlier lease touched Java's"
    );
    drop_table(db, &table).await;
}
