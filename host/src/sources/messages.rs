//! `messages.db`: failed tool calls, from the activity rows of a WAL database
//! the application is writing while we read.
//!
//! Opened read-only by [`super::sqlite`] (which reads the rows still in the
//! `-wal` file and creates nothing in the data dir), one short query per
//! batch on a fresh handle that is closed at once, so no read transaction outlives a batch and
//! the writer can always checkpoint. Activity rows change after they are
//! written (a tool's outcome lands later), so instead of a rowid cursor each
//! scan rereads a trailing 30-minute window before the newest `at` it has
//! seen; the ledger's occurrence keys count each message once.

use std::path::Path;

use rusqlite::Connection;
use rusqlite::types::Value;

use super::{ReadContext, Sink, Source, SourceError, SourceReport};
use crate::record::{BatchBuilder, Cell, Column};

/// How far back each scan rereads, before the newest row already seen.
pub const REREAD_WINDOW_MS: i64 = 30 * 60 * 1000;

const COLUMNS: &[Column] = &[
    Column::text("id"),
    Column::text("thread_id"),
    Column::int("at"),
    Column::text("turn_id"),
    Column::text("bot_id"),
    Column::text("tool_name"),
    Column::text("output"),
    Column::int("exit_code"),
];

/// Rows are read in pages in `(at, id)` order; a row whose `data` is not JSON
/// comes back with `d` null and is counted as skipped.
const QUERY: &str = "
SELECT id, thread_id, at,
       json_extract(d, '$.turnId'), json_extract(d, '$.from.botId'),
       json_extract(d, '$.tool.name'), json_extract(d, '$.tool.output'),
       json_extract(d, '$.tool.exitCode'), d IS NULL
FROM (SELECT id, thread_id, at, CASE WHEN json_valid(data) THEN data END AS d
      FROM messages
      WHERE type = 'activity' AND at >= ?1 AND (at > ?2 OR (at = ?2 AND id > ?3)))
WHERE d IS NULL OR json_extract(d, '$.tool.ok') = 0
ORDER BY at, id
LIMIT ?4";

/// Reads failed tool calls (`kind = tool-failure`) from `messages.db`.
#[derive(Debug, Clone)]
pub struct MessagesSource {
    pub file: String,
}

impl Default for MessagesSource {
    fn default() -> Self {
        MessagesSource { file: "messages.db".into() }
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Cursor {
    /// The newest `at` seen, ms.
    hwm: i64,
}

fn text_of(v: &Value) -> Option<String> {
    match v {
        Value::Null | Value::Blob(_) => None,
        Value::Integer(i) => Some(i.to_string()),
        Value::Real(f) => Some(f.to_string()),
        Value::Text(s) => Some(s.clone()),
    }
}

fn int_of(v: &Value) -> Option<i64> {
    match v {
        Value::Integer(i) => Some(*i),
        Value::Real(f) => Some(*f as i64),
        Value::Text(s) => s.trim().parse().ok(),
        _ => None,
    }
}

struct Row {
    id: String,
    thread_id: Option<String>,
    at: i64,
    turn_id: Option<String>,
    bot_id: Option<String>,
    tool_name: Option<String>,
    output: Option<String>,
    exit_code: Option<i64>,
    malformed: bool,
}

/// One page of rows after `(after_at, after_id)`, on a handle closed on return.
fn page(path: &Path, window_start: i64, after_at: i64, after_id: &str, limit: usize) -> rusqlite::Result<Vec<Row>> {
    super::sqlite::with_db(path, |conn| page_on(conn, window_start, after_at, after_id, limit))
}

fn page_on(
    conn: &Connection,
    window_start: i64,
    after_at: i64,
    after_id: &str,
    limit: usize,
) -> rusqlite::Result<Vec<Row>> {
    let mut stmt = conn.prepare(QUERY)?;
    let rows = stmt.query_map(rusqlite::params![window_start, after_at, after_id, limit as i64], |r| {
        Ok(Row {
            id: text_of(&r.get::<_, Value>(0)?).unwrap_or_default(),
            thread_id: text_of(&r.get::<_, Value>(1)?),
            at: int_of(&r.get::<_, Value>(2)?).unwrap_or(0),
            turn_id: text_of(&r.get::<_, Value>(3)?),
            bot_id: text_of(&r.get::<_, Value>(4)?),
            tool_name: text_of(&r.get::<_, Value>(5)?),
            output: text_of(&r.get::<_, Value>(6)?),
            exit_code: int_of(&r.get::<_, Value>(7)?),
            malformed: r.get::<_, bool>(8)?,
        })
    })?;
    rows.collect()
}

impl Source for MessagesSource {
    fn name(&self) -> &str {
        "messages"
    }
    fn kinds(&self) -> &'static [&'static str] {
        &["tool-failure"]
    }

    fn watch(&self, data_dir: &Path) -> Option<Vec<std::path::PathBuf>> {
        let db = data_dir.join(&self.file);
        Some(vec![super::sqlite::wal_path(&db), db])
    }

    fn read(&self, ctx: &ReadContext<'_>, sink: &mut Sink<'_>) -> Result<SourceReport, SourceError> {
        let path = ctx.data_dir.join(&self.file);
        if !path.exists() {
            return Ok(SourceReport::missing(ctx));
        }
        let prev_hwm = ctx.cursor.and_then(|c| serde_json::from_str::<Cursor>(c).ok()).map(|c| c.hwm);
        let window_start = prev_hwm.map_or(i64::MIN, |h| h.saturating_sub(REREAD_WINDOW_MS));
        let mut report = SourceReport::default();
        let mut hwm = prev_hwm.unwrap_or(0);
        let (mut after_at, mut after_id) = (i64::MIN, String::new());
        let mut builder = BatchBuilder::new("messages", "tool-failure", COLUMNS);
        loop {
            let rows = page(&path, window_start, after_at, &after_id, ctx.batch_rows).map_err(|e| {
                SourceError::Read { source_name: "messages".into(), path: path.clone(), source: Box::new(e) }
            })?;
            let last_page = rows.len() < ctx.batch_rows;
            for row in rows {
                after_at = row.at;
                after_id.clone_from(&row.id);
                if row.malformed || row.id.is_empty() {
                    report.skipped += 1;
                    continue;
                }
                hwm = hwm.max(row.at);
                let cells = [
                    Cell::Text(&row.id),
                    row.thread_id.as_deref().map_or(Cell::Null, Cell::Text),
                    Cell::Int(row.at),
                    row.turn_id.as_deref().map_or(Cell::Null, Cell::Text),
                    row.bot_id.as_deref().map_or(Cell::Null, Cell::Text),
                    row.tool_name.as_deref().map_or(Cell::Null, Cell::Text),
                    row.output.as_deref().map_or(Cell::Null, Cell::Text),
                    row.exit_code.map_or(Cell::Null, Cell::Int),
                ];
                builder
                    .push_row(&cells)
                    .map_err(|e| SourceError::Stopped { source_name: "messages".into(), reason: e.to_string() })?;
                report.records += 1;
            }
            if !builder.is_empty() {
                sink(builder.take())
                    .map_err(|reason| SourceError::Stopped { source_name: "messages".into(), reason })?;
            }
            if last_page {
                break;
            }
        }
        report.cursor = Some(serde_json::to_string(&Cursor { hwm }).unwrap_or_default());
        Ok(report)
    }
}
