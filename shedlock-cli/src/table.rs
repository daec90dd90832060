//! How `locks` and `runs` print what they read: times, JSON, and tables with their columns
//! padded.

use std::time::SystemTime;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;

use crate::output;

/// RFC 3339 in UTC with milliseconds: `2026-11-23T07:40:01.123Z`.
pub(crate) fn timestamp(time: SystemTime) -> String {
    DateTime::<Utc>::from(time).to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// One value as pretty JSON on stdout.
pub(crate) fn print_json(value: &impl Serialize) {
    match serde_json::to_string_pretty(value) {
        Ok(json) => output::json(&json),
        Err(e) => unreachable!("views always serialize: {e}"),
    }
}

/// `views` as JSON with `--json`; else as a table (`table` prints one), or `none` when there
/// are none.
pub(crate) fn print_views<V: Serialize>(
    views: &[V],
    json: bool,
    table: fn(&[V]),
    none: std::fmt::Arguments<'_>,
) {
    if json {
        print_json(&views);
    } else if views.is_empty() {
        out!("{none}");
    } else {
        table(views);
    }
}

/// A table: the header, then one line per row, columns padded to their widest cell.
pub(crate) fn print_columns<const N: usize>(header: &[&str; N], rows: &[[String; N]]) {
    let mut widths = header.map(str::len);
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: &[&str]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        out!("{}", padded.join("  ").trim_end());
    };
    line(header);
    for row in rows {
        line(&row.each_ref().map(String::as_str));
    }
}
