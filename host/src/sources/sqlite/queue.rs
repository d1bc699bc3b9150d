//! `runtime.db`: how long delegated work waited in the queue.
//!
//! Reads `assignment_events` in id order from the last id seen, on a
//! read-only handle (see [`super`]) closed after every page. An
//! `enqueued` or `resume_due` event opens a wait for its assignment; the next
//! `started` closes it and yields a `queue-wait` record with the gap;
//! `completed` or `cancelled` drop it. Waits still open are carried in the
//! cursor and yielded at every scan as still waiting, measured to the scan
//! time, so work that never starts is seen. Each record carries the id of the
//! event that opened the wait, which detectors use as the occurrence key: a
//! wait seen while open and again once started is one occurrence.
//!
//! The file is untrusted: pages advance strictly on `id` as an integer; a row
//! whose `id` is of another type is never paged over but counted as skipped,
//! and one whose `at` is not an integer, or whose assignment id (or, for an
//! event that opens a wait, thread or bot id) is text that is not UTF-8, is
//! skipped and counted (such a text used to end the whole read with an
//! error, every scan). A page whose
//! ids do not advance ends the read as this source's error, never a loop. A
//! view or virtual table standing in for `assignment_events` is refused.

use std::collections::BTreeMap;
use std::path::Path;

use super::pages::PagedRead;
use rusqlite::Connection;
use rusqlite::types::ValueRef;
use serde::{Deserialize, Serialize};

use crate::model::record::{BatchBuilder, Cell, Column};
use crate::sources::{ReadContext, Sink, Source, SourceError, SourceReport};

pub const QUEUE_WAIT: &[Column] = &[
    Column::int("queue_event_id"),
    Column::text("assignment_id"),
    Column::text("thread_id"),
    Column::text("bot_id"),
    Column::int("queued_at"),
    Column::int("started_at"),
    Column::int("wait_ms"),
    Column::boolean("waiting"),
];

/// Open waits kept in the cursor, at most; the oldest are dropped beyond it.
const MAX_OPEN: usize = 50_000;

/// Reads queue waits from `runtime.db`.
#[derive(Debug, Clone)]
pub struct QueueSource {
    pub file: String,
}

impl Default for QueueSource {
    fn default() -> Self {
        QueueSource { file: "runtime.db".into() }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Open {
    event_id: i64,
    at: i64,
    thread_id: Option<String>,
    bot_id: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Cursor {
    last_id: i64,
    open: BTreeMap<String, Open>,
}

/// What an event does to its assignment's wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Event {
    /// `enqueued` or `resume_due`: a wait opens.
    Opens,
    /// `started`: the wait closes into a record.
    Starts,
    /// `completed` or `cancelled`: the wait is dropped.
    Ends,
    Other,
}

impl Event {
    fn of(v: ValueRef<'_>) -> Event {
        match v {
            ValueRef::Text(b"enqueued" | b"resume_due") => Event::Opens,
            ValueRef::Text(b"started") => Event::Starts,
            ValueRef::Text(b"completed" | b"cancelled") => Event::Ends,
            _ => Event::Other,
        }
    }
}

struct Row {
    id: i64,
    assignment_id: String,
    event: Event,
    /// `None` when `at` is not an integer, or a text the row needs is not
    /// UTF-8: the row is skipped.
    at: Option<i64>,
    /// Only read for an event that opens a wait.
    thread_id: Option<String>,
    bot_id: Option<String>,
}

/// A text cell that is not UTF-8.
struct NotUtf8;

/// A cell as text: text, or an integer's digits; `None` otherwise.
fn text(v: ValueRef<'_>) -> Result<Option<String>, NotUtf8> {
    Ok(match v {
        ValueRef::Text(s) => Some(std::str::from_utf8(s).map_err(|_| NotUtf8)?.to_owned()),
        ValueRef::Integer(i) => Some(i.to_string()),
        _ => None,
    })
}

/// One row, reading only the cells its event needs.
fn row_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    let (id, event) = (r.get(0)?, Event::of(r.get_ref(4)?));
    let at = match r.get_ref(5)? {
        ValueRef::Integer(i) => Some(i),
        _ => None,
    };
    let assignment = text(r.get_ref(1)?);
    let (thread, bot) =
        if event == Event::Opens { (text(r.get_ref(2)?), text(r.get_ref(3)?)) } else { (Ok(None), Ok(None)) };
    Ok(match (assignment, thread, bot) {
        (Ok(a), Ok(thread_id), Ok(bot_id)) => {
            Row { id, assignment_id: a.unwrap_or_default(), event, at, thread_id, bot_id }
        }
        _ => Row { id, assignment_id: String::new(), event, at: None, thread_id: None, bot_id: None },
    })
}

fn page(conn: &Connection, after: i64, limit: usize) -> rusqlite::Result<Vec<Row>> {
    super::require_table(conn, "assignment_events")?;
    let mut stmt = conn.prepare_cached(
        "SELECT id, assignment_id, thread_id, bot_id, event, at FROM assignment_events
         WHERE typeof(id) = 'integer' AND id > ?1 ORDER BY id LIMIT ?2",
    )?;
    let rows = stmt.query_map(rusqlite::params![after, limit as i64], row_of)?;
    rows.collect()
}

/// Rows past `after` whose `id` is not an integer (text sorts after every
/// number, so `id > after` holds for all of them): skipped and counted.
fn count_mistyped(conn: &Connection, after: i64) -> rusqlite::Result<u64> {
    conn.prepare_cached("SELECT COUNT(*) FROM assignment_events WHERE id > ?1 AND typeof(id) <> 'integer'")?
        .query_row([after], |r| r.get::<_, i64>(0))
        .map(|n| u64::try_from(n).unwrap_or(0))
}

impl QueueSource {
    fn push(
        &self,
        builder: &mut BatchBuilder,
        ctx: &ReadContext<'_>,
        sink: &mut Sink<'_>,
        assignment: &str,
        open: &Open,
        started_at: Option<i64>,
    ) -> Result<(), SourceError> {
        let end = started_at.unwrap_or(ctx.scan_time_ms);
        let cells = [
            Cell::Int(open.event_id),
            Cell::Text(assignment),
            open.thread_id.as_deref().map_or(Cell::Null, Cell::Text),
            open.bot_id.as_deref().map_or(Cell::Null, Cell::Text),
            Cell::Int(open.at),
            started_at.map_or(Cell::Null, Cell::Int),
            Cell::Int(end.saturating_sub(open.at).max(0)),
            Cell::Boolean(started_at.is_none()),
        ];
        builder
            .push_row(&cells)
            .map_err(|e| SourceError::Stopped { source_name: "runtime".into(), reason: e.to_string() })?;
        if builder.rows() as usize >= ctx.batch_rows {
            sink(builder.take()).map_err(|reason| SourceError::Stopped { source_name: "runtime".into(), reason })?;
        }
        Ok(())
    }

    fn path(&self, data_dir: &Path) -> std::path::PathBuf {
        data_dir.join(&self.file)
    }
}

impl Source for QueueSource {
    fn evidence_columns(&self) -> &'static [&'static str] {
        &["assignment_id"]
    }
    fn name(&self) -> &str {
        "runtime"
    }
    fn kinds(&self) -> &'static [&'static str] {
        &["queue-wait"]
    }
    fn watch(&self, data_dir: &Path) -> Option<Vec<std::path::PathBuf>> {
        let db = self.path(data_dir);
        Some(vec![super::wal_path(&db), db])
    }

    fn read(&self, ctx: &ReadContext<'_>, sink: &mut Sink<'_>) -> Result<SourceReport, SourceError> {
        let path = self.path(ctx.data_dir);
        if std::fs::symlink_metadata(&path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
            return Ok(SourceReport::missing(ctx));
        }
        let read_err = |e| SourceError::Read { source_name: "runtime".into(), path: path.clone(), source: Box::new(e) };
        let mut cursor: Cursor = ctx.cursor.and_then(|c| serde_json::from_str(c).ok()).unwrap_or_default();
        let mut builder = BatchBuilder::new("runtime", "queue-wait", QUEUE_WAIT);
        let mut report = SourceReport::default();
        let first_id = cursor.last_id;
        let mut db = PagedRead::open(&path).map_err(read_err)?;
        loop {
            let rows = db.run(|c| page(c, cursor.last_id, ctx.batch_rows)).map_err(read_err)?;
            let last_page = rows.len() < ctx.batch_rows;
            for row in rows {
                if row.id <= cursor.last_id {
                    return Err(SourceError::Read {
                        source_name: "runtime".into(),
                        path: path.clone(),
                        source: format!("the page key did not advance past id {}", cursor.last_id).into(),
                    });
                }
                cursor.last_id = row.id;
                let Some(at) = row.at.filter(|_| !row.assignment_id.is_empty()) else {
                    report.skipped += 1;
                    continue;
                };
                match row.event {
                    Event::Opens => {
                        let open = Open { event_id: row.id, at, thread_id: row.thread_id, bot_id: row.bot_id };
                        cursor.open.insert(row.assignment_id, open);
                    }
                    Event::Starts => {
                        if let Some(open) = cursor.open.remove(&row.assignment_id) {
                            self.push(&mut builder, ctx, sink, &row.assignment_id, &open, Some(at))?;
                            report.records += 1;
                        }
                    }
                    Event::Ends => {
                        cursor.open.remove(&row.assignment_id);
                    }
                    Event::Other => {}
                }
            }
            if last_page {
                break;
            }
        }
        report.skipped += db.run(|c| count_mistyped(c, first_id)).map_err(read_err)?;
        // Work still waiting, measured to the scan time.
        for (assignment, open) in &cursor.open {
            self.push(&mut builder, ctx, sink, assignment, open, None)?;
            report.records += 1;
        }
        if !builder.is_empty() {
            sink(builder.take()).map_err(|reason| SourceError::Stopped { source_name: "runtime".into(), reason })?;
        }
        if cursor.open.len() > MAX_OPEN {
            let mut by_age: Vec<(i64, String)> = cursor.open.iter().map(|(a, o)| (o.at, a.clone())).collect();
            by_age.sort();
            for (_, a) in by_age.into_iter().take(cursor.open.len() - MAX_OPEN) {
                cursor.open.remove(&a);
            }
        }
        report.open_since = cursor.open.values().map(|o| o.at).collect();
        report.cursor = Some(serde_json::to_string(&cursor).unwrap_or_default());
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db(dir: &Path, rows: &[(&str, &str, i64)]) {
        let c = Connection::open(dir.join("runtime.db")).unwrap();
        c.execute_batch(
            "CREATE TABLE IF NOT EXISTS assignment_events(id INTEGER PRIMARY KEY, assignment_id TEXT, thread_id TEXT,
             bot_id TEXT, event TEXT, at INTEGER)",
        )
        .unwrap();
        for (a, e, at) in rows {
            c.execute(
                "INSERT INTO assignment_events(assignment_id, thread_id, bot_id, event, at) VALUES(?1, 't', 'b', ?2, ?3)",
                rusqlite::params![a, e, at],
            )
            .unwrap();
        }
    }

    fn read(dir: &Path, cursor: Option<&str>, now: i64) -> (Vec<(i64, i64, bool)>, SourceReport) {
        let ctx = ReadContext { data_dir: dir, scan_time_ms: now, batch_rows: 2, cursor };
        let mut out = Vec::new();
        let report = QueueSource::default()
            .read(&ctx, &mut |b| {
                // queue_event_id, wait_ms and waiting are int slots 0, 3 and 4.
                let n = b.rows as usize;
                for r in 0..n {
                    out.push((b.ints[r], b.ints[3 * n + r], b.ints[4 * n + r] != 0));
                }
                Ok(())
            })
            .unwrap();
        (out, report)
    }

    #[test]
    fn waits_are_measured_from_the_latest_enqueue_and_open_ones_to_the_scan_time() {
        let dir = tempfile::tempdir().unwrap();
        db(
            dir.path(),
            &[("a", "enqueued", 100), ("a", "started", 400), ("b", "enqueued", 200), ("c", "resume_due", 300)],
        );
        db(dir.path(), &[("c", "cancelled", 350)]);
        let (got, report) = read(dir.path(), None, 1_000);
        assert_eq!(got, vec![(1, 300, false), (3, 800, true)]);
        assert_eq!(report.open_since, vec![200]);
        // Next scan: b starts; the wait keeps the id of the event that opened it.
        db(dir.path(), &[("b", "started", 1_500)]);
        let (got, _) = read(dir.path(), report.cursor.as_deref(), 2_000);
        assert_eq!(got, vec![(3, 1_300, false)]);
    }

    #[test]
    fn a_text_at_or_id_is_skipped_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let c = Connection::open(dir.path().join("runtime.db")).unwrap();
        c.execute_batch(
            "CREATE TABLE assignment_events(id, assignment_id TEXT, thread_id TEXT, bot_id TEXT, event TEXT, at);
             INSERT INTO assignment_events VALUES
               (1, 'a', 't', 'b', 'enqueued', 100),
               (2, 'a', 't', 'b', 'started', 'noon'),
               ('three', 'b', 't', 'b', 'enqueued', 100),
               (4, 'c', 't', 'b', 'enqueued', 200),
               (5, 'c', 't', 'b', 'started', 500);",
        )
        .unwrap();
        let (got, report) = read(dir.path(), None, 1_000);
        // c's wait is read; a stays open (its start had no usable time).
        assert_eq!(got, vec![(4, 300, false), (1, 900, true)]);
        assert_eq!(report.skipped, 2);
    }

    /// A thread id that is not UTF-8 (and, for a start, an assignment id) skips
    /// that one row, counted, where it used to fail the whole read every scan.
    #[test]
    fn a_row_whose_text_is_not_utf8_is_skipped_and_counted_not_the_read() {
        let dir = tempfile::tempdir().unwrap();
        let c = Connection::open(dir.path().join("runtime.db")).unwrap();
        c.execute_batch(
            "CREATE TABLE assignment_events(id INTEGER PRIMARY KEY, assignment_id TEXT, thread_id TEXT, bot_id TEXT,
                                            event TEXT, at INTEGER);
             INSERT INTO assignment_events VALUES
               (1, 'a', CAST(x'ff' AS TEXT), 'b', 'enqueued', 100),
               (2, 'c', 't', 'b', 'enqueued', 200),
               (3, CAST(x'c3' AS TEXT), 't', 'b', 'started', 300),
               (4, 'c', CAST(x'ff' AS TEXT), 'b', 'started', 500);",
        )
        .unwrap();
        let (got, report) = read(dir.path(), None, 1_000);
        // A start reads no thread id: c's wait closes at 500.
        assert_eq!(got, vec![(2, 300, false)]);
        assert_eq!(report.skipped, 2);
    }
}
