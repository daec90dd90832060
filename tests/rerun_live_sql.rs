//! A rerun never overlaps a live run (issue 29 item 3), on the real databases, in real time:
//! the two scenarios of `shedlock_conformance::reruns` (a run past `lock_at_most_for`; an
//! instance cut from its database, through a proxy that holds its traffic, for longer than its
//! run heartbeat) on SQLite, PostgreSQL and MariaDB (SQLite has no network to cut).

mod common;

use std::sync::Arc;

use common::{Db, Provider};
use shedlock_conformance::reruns;
use shedlock_conformance::{CutProxy, unique_lock_name, upstream_of};
use shedlock_test_support::{mysql_url, pg_url};

async fn a_run_past_lock_at_most_for_is_not_rerun_beside_itself_on(db: Db) {
    let Some(a) = common::provider(db, "instance-a").await else {
        return;
    };
    let b = common::another_instance(&a, "instance-b").await;
    let lock = unique_lock_name("live");
    reruns::a_run_past_lock_at_most_for_is_not_rerun_beside_itself(
        &format!("{db:?}"),
        &lock,
        a.shared(),
        b.shared(),
    )
    .await;
    a.remove_store().await;
}

async fn a_run_cut_from_its_store_stops_before_it_is_rerun_on(db: Db) {
    let url = match db {
        Db::Sqlite => {
            println!("skipped: SQLite has no network to cut (the rule is the same on every store)");
            return;
        }
        Db::Postgres => pg_url(),
        Db::MySql => mysql_url(),
    };
    let (Some(url), Some(other)) = (url, common::provider(db, "instance-b").await) else {
        return;
    };
    let proxy = Arc::new(CutProxy::start(&upstream_of(&url).unwrap()).await.unwrap());
    let cut_off: Provider =
        common::instance_at(&other, &proxy.url_through(&url).unwrap(), "instance-a").await;
    let lock = unique_lock_name("live-cut");
    reruns::a_run_cut_from_its_store_stops_before_it_is_rerun(
        &format!("{db:?}"),
        &lock,
        cut_off.shared(),
        vec![proxy],
        other.shared(),
    )
    .await;
    other.remove_store().await;
}

sql_tests!(
    a_run_past_lock_at_most_for_is_not_rerun_beside_itself_on,
    a_run_cut_from_its_store_stops_before_it_is_rerun_on,
);
