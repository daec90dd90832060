//! Counts the SQL statements sqlx executes, per table, from sqlx's own query log
//! (`tracing` target `sqlx::query`), so tests can pin how many statements each operation costs.

use std::sync::{Mutex, OnceLock};

use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::{Layer, filter};

static EXECUTED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Starts recording (once per test binary; recording is process-wide).
pub(crate) fn record() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let subscriber =
            tracing_subscriber::registry().with(Recorder.with_filter(
                filter::Targets::new().with_target("sqlx::query", tracing::Level::TRACE),
            ));
        tracing::subscriber::set_global_default(subscriber).expect("no other global subscriber");
    });
}

/// How many statements naming `table` were executed so far.
pub(crate) fn executed_on(table: &str) -> usize {
    let executed = EXECUTED.lock().unwrap_or_else(|e| e.into_inner());
    executed.iter().filter(|sql| sql.contains(table)).count()
}

struct Recorder;

impl<S: tracing::Subscriber> Layer<S> for Recorder {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let mut sql = Statement(String::new());
        event.record(&mut sql);
        EXECUTED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(sql.0);
    }
}

/// The query summary and the full statement (sqlx logs the latter only when it is longer).
struct Statement(String);

impl Visit for Statement {
    fn record_str(&mut self, field: &Field, value: &str) {
        if matches!(field.name(), "summary" | "db.statement") {
            self.0.push_str(value);
            self.0.push(' ');
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if matches!(field.name(), "summary" | "db.statement") {
            self.0.push_str(&format!("{value:?} "));
        }
    }
}
