//! What the providers send: the SQL of each operation, read from sqlx's own statement log
//! (`tracing` target `sqlx::query`, as the statement-counting test in shedlock-sqlx does), so
//! the bare-sqlx loops run exactly the providers' statements and the counts are measured,
//! not asserted.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use shedlock::{LockConfiguration, LockProvider};
use tracing::field::{Field, Visit};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::{Context, SubscriberExt};

use crate::db::{Databases, Db, PoolKind};

/// Recording only while set, so the throughput runs do not pay for logging.
static RECORDING: AtomicBool = AtomicBool::new(false);
static EXECUTED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Installs the recorder (closed until [`record`]) and a warning printer on stderr.
pub(crate) fn install() -> anyhow::Result<()> {
    // Asked per event (the flag changes), not cached per call site.
    let gate = tracing_subscriber::filter::dynamic_filter_fn(|meta, _| {
        RECORDING.load(Ordering::Relaxed) && meta.target() == "sqlx::query"
    })
    .with_callsite_filter(|meta| match meta.target() {
        "sqlx::query" => tracing::subscriber::Interest::sometimes(),
        _ => tracing::subscriber::Interest::never(),
    });
    let recorder = Recorder.with_filter(gate);
    let warnings = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_filter(tracing_subscriber::filter::LevelFilter::WARN);
    let subscriber = tracing_subscriber::registry().with(recorder).with(warnings);
    tracing::subscriber::set_global_default(subscriber)?;
    Ok(())
}

/// The statements `operation` executed, in order. Run nothing else meanwhile.
pub(crate) async fn record<T>(operation: impl Future<Output = T>) -> (T, Vec<String>) {
    EXECUTED.lock().unwrap_or_else(|e| e.into_inner()).clear();
    RECORDING.store(true, Ordering::Relaxed);
    let output = operation.await;
    RECORDING.store(false, Ordering::Relaxed);
    let executed = std::mem::take(&mut *EXECUTED.lock().unwrap_or_else(|e| e.into_inner()));
    (output, executed)
}

struct Recorder;

impl<S: tracing::Subscriber> Layer<S> for Recorder {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        // sqlx logs the full text in `db.statement` only when the summary shortened it.
        let sql = if fields.statement.trim().is_empty() {
            fields.summary
        } else {
            fields.statement
        };
        EXECUTED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(sql.trim().to_owned());
    }
}

#[derive(Default)]
struct Fields {
    summary: String,
    statement: String,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "summary" => self.summary = value.to_owned(),
            "db.statement" => self.statement = value.to_owned(),
            _ => {}
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "summary" => self.summary = format!("{value:?}"),
            "db.statement" => self.statement = format!("{value:?}"),
            _ => {}
        }
    }
}

/// Statements per provider operation on one database.
#[derive(Debug)]
pub(crate) struct Counts {
    pub(crate) acquire_first_use: usize,
    pub(crate) acquire_free: usize,
    pub(crate) acquire_held: usize,
    pub(crate) release: usize,
    pub(crate) extend: usize,
}

/// Counts the statements of each operation on a fresh lock name of `table`.
pub(crate) async fn count(dbs: &Databases, db: Db, table: &str) -> anyhow::Result<Counts> {
    let pool = dbs.pool(db, PoolKind::Tuned, 1).await?;
    pool.create_schema(table).await?;
    let ours = pool.provider(table, "bench-count", None)?;
    let other = pool.provider(table, "bench-count-other", None)?;
    let name = format!("count-{}", std::process::id());
    let config = LockConfiguration::new(name, Duration::from_secs(60), Duration::ZERO)?;
    let lease = |lease: Option<_>| lease.ok_or_else(|| anyhow::anyhow!("lock not acquired"));

    let (first, acquire_first_use) = record(ours.acquire(&config)).await;
    let (extended, extend) =
        record(ours.extend(&lease(first?)?, Duration::from_secs(60), Duration::ZERO)).await;
    let extended = lease(extended?)?;
    let (held, acquire_held) = record(other.acquire(&config)).await;
    anyhow::ensure!(held?.is_none(), "a held lock was acquired");
    let (released, release) = record(ours.release(&extended)).await;
    anyhow::ensure!(released?, "release failed");
    let (again, acquire_free) = record(ours.acquire(&config)).await;
    ours.release(&lease(again?)?).await?;
    pool.close().await;
    Ok(Counts {
        acquire_first_use: acquire_first_use.len(),
        acquire_free: acquire_free.len(),
        acquire_held: acquire_held.len(),
        release: release.len(),
        extend: extend.len(),
    })
}

/// Prints the statement counts of every database.
pub(crate) async fn run(dbs: &Databases, databases: &[Db]) -> anyhow::Result<()> {
    for &db in databases {
        let c = count(dbs, db, "shedlock_bench").await?;
        println!(
            "statements db={} acquire_first_use={} acquire_free={} acquire_held={} release={} extend={}",
            db.name(),
            c.acquire_first_use,
            c.acquire_free,
            c.acquire_held,
            c.release,
            c.extend
        );
    }
    Ok(())
}
