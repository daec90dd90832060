//! A lock's state reset behind the providers' backs, while a holder still runs: an operator's
//! `DELETE`, a restored backup, another program taking the row without writing a token.

use std::time::{Duration, UNIX_EPOCH};

use shedlock_core::{Error, LockProvider};

use super::{LONG, Provider, ProviderExt, TestDb, config, drop_table, fresh, row};

/// The database clock in µs since 1970, at millisecond precision: a token issued after it was
/// read is at least this.
async fn clock_micros<D: TestDb>(db: &D) -> u64 {
    let now = db
        .now()
        .await
        .duration_since(UNIX_EPOCH)
        .expect("after 1970");
    u64::try_from(now.as_millis()).expect("fits") * 1000
}

/// Whether `provider`'s guard lets a write of lease `(name, token)` through.
async fn guard_passes<D: TestDb>(provider: &Provider<D>, name: &str, token: u64) -> bool {
    let mut tx = provider.pool().begin().await.expect("begin");
    let verdict = provider.verify_lease(&mut tx, name, token).await;
    tx.rollback().await.expect("rollback");
    match verdict {
        Ok(()) => true,
        Err(Error::LockLost { .. }) => false,
        Err(e) => panic!("verify_lease failed: {e}"),
    }
}

/// An operator deletes a held lock's row (ShedLock's usual reset) while its holder still runs,
/// then a backup with older tokens is restored: every later token is greater than the stale
/// holder's, and the stale holder can neither write through the guard, nor extend, nor
/// release. (The insert of a missing row used to start again at token 1.)
pub(crate) async fn reset_rows_never_repeat_tokens<D: TestDb>(db: &D) {
    let a = fresh(db, "a").await;
    let b = a.clone_as("b");
    let t = a.table_name().to_owned();
    let c = config("reset", LONG, Duration::ZERO);
    let before = clock_micros(db).await;
    let stale = a.acquire(&c).await.unwrap().expect("free");
    assert!(
        stale.fencing_token() >= before,
        "token {} is below the clock {before} µs it was issued after",
        stale.fencing_token()
    );
    assert!(guard_passes::<D>(&a, "reset", stale.fencing_token()).await);

    db.execute(&format!("DELETE FROM {t} WHERE name = 'reset'"))
        .await;
    let current = b.acquire(&c).await.unwrap().expect("the row is gone: free");
    assert!(
        current.fencing_token() > stale.fencing_token(),
        "token {} after the reset is not above the stale holder's {}",
        current.fencing_token(),
        stale.fencing_token()
    );
    assert!(!guard_passes::<D>(&a, "reset", stale.fencing_token()).await);
    assert!(guard_passes::<D>(&b, "reset", current.fencing_token()).await);
    assert!(
        a.extend(&stale, LONG, Duration::ZERO)
            .await
            .unwrap()
            .is_none()
    );
    assert!(!a.release(&stale).await.unwrap());
    assert_eq!(row::<D>(&a, "reset").await.holder, "b");
    assert!(b.release(&current).await.unwrap());

    // A backup restored over the table: the row as it was before, token and all.
    db.execute(&format!(
        "UPDATE {t} SET fencing_token = {}, locked_by = 'a' WHERE name = 'reset'",
        stale.fencing_token()
    ))
    .await;
    let after_restore = a.acquire(&c).await.unwrap().expect("released");
    assert!(after_restore.fencing_token() > current.fencing_token());
    drop_table(db, &t).await;
}

/// Another program (Java ShedLock on a shared table) takes an expired row without writing a
/// token, so the row keeps the stale holder's token: the guard tells them apart by holder.
pub(crate) async fn guard_checks_the_holder<D: TestDb>(db: &D) {
    let a = fresh(db, "a").await;
    let t = a.table_name().to_owned();
    let lease_len = Duration::from_millis(300);
    let stale = a
        .acquire(&config("shared", lease_len, Duration::ZERO))
        .await
        .unwrap()
        .expect("free");
    // What ShedLock's UPDATE writes once the lease has expired: times and holder, no token.
    db.execute(&format!(
        "UPDATE {t} SET lock_until = '2999-01-01 00:00:00', locked_at = '2020-01-01 00:00:00', \
         locked_by = 'java-host' WHERE name = 'shared'"
    ))
    .await;
    let taken = row::<D>(&a, "shared").await;
    assert_eq!(taken.fencing_token, stale.fencing_token());
    assert!(taken.held);
    assert!(
        !guard_passes::<D>(&a, "shared", stale.fencing_token()).await,
        "a stale holder wrote through the guard of a lease another program holds"
    );
    assert!(!a.release(&stale).await.unwrap());
    drop_table(db, &t).await;
}
