//! The machine and server versions, printed at the top of every run.

use crate::db::{Databases, Db, Pool, PoolKind};

/// The 1, 5 and 15 minute load averages.
pub(crate) fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines().find_map(|l| {
                l.strip_prefix("model name")
                    .map(|m| m.trim_start_matches([' ', '\t', ':']).to_owned())
            })
        })
        .unwrap_or_else(|| "unknown".into())
}

async fn version(dbs: &Databases, db: Db) -> anyhow::Result<String> {
    let query = match db {
        Db::Sqlite => "SELECT 'SQLite ' || sqlite_version()",
        _ => "SELECT version()",
    };
    let pool = dbs.pool(db, PoolKind::Tuned, 1).await?;
    let version = match &pool {
        Pool::Pg(p) => sqlx::query_scalar(query).fetch_one(p).await?,
        Pool::My(p) => sqlx::query_scalar(query).fetch_one(p).await?,
        Pool::Lite(p) => sqlx::query_scalar(query).fetch_one(p).await?,
    };
    pool.close().await;
    Ok(version)
}

/// Prints `# machine …` lines: cores, CPU, load, database versions.
pub(crate) async fn describe(dbs: &Databases, databases: &[Db]) {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "# machine nproc={cores} cpu=\"{}\" load_average={}",
        cpu_model(),
        load_average()
    );
    for &db in databases {
        match version(dbs, db).await {
            Ok(version) => println!("# machine db={} version=\"{version}\"", db.name()),
            Err(error) => println!("# machine db={} unreachable: {error}", db.name()),
        }
    }
}
