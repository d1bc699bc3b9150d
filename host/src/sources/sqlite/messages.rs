//! `messages.db`: failed tool calls, from the activity rows of a WAL database
//! the application is writing while we read.
//!
//! Opened read-only by [`super`] (which reads the rows still in the
//! `-wal` file and creates nothing in the data dir), one short query per
//! batch on the read's handle ([`super::pages`]): no read transaction
//! outlives a batch, so the writer can always checkpoint. Activity rows change after they are
//! written (a tool's outcome lands later), so instead of a rowid cursor each
//! scan rereads a trailing 30-minute window before the newest `at` it has
//! seen; the ledger's occurrence keys count each message once. A row whose
//! outcome is not known yet (a tool object with no `ok`: the call is still
//! running) is kept in the cursor and read again past the window until it
//! resolves, so a long call that fails is still counted: at most
//! [`PENDING_MAX_ROWS`] rows (the newest), none older than
//! [`PENDING_MAX_AGE_MS`] before the newest `at`.
//!
//! SQLite selects the rows (an activity, its `at` an integer, in the window, in
//! `at` order through the application's index: the rows of one `at` are put
//! in `id` order here, holding only the kept ones, never a sorter copying
//! every row) and hands each one's `data` over whole, borrowed from the row;
//! the JSON is classified in Rust in one pass ([`activity`]: failed,
//! pending, malformed, or neither), exactly as the query that used to run
//! `json_valid` and `json_extract` over every row in SQLite classified it
//! (that query is kept as the tests' oracle). Since the filter runs in Rust,
//! a page's statement steps on through the rows until the page has
//! `batch_rows` rows kept (failed, pending or malformed) or the rows run out;
//! only kept rows are copied.
//!
//! The file is untrusted. Pages advance strictly on a typed key, `(at, id)`
//! with `at` an integer and `id` text. A row whose `at` has another type (an
//! ISO date, a float) cannot be ordered against the cursor, so it is never
//! paged over; it is counted as skipped by one count query at the end of the
//! read, over the index on `at` alone. A row whose `id` is not text (a
//! number, a blob, null) is read once, by the page that reads its `at`
//! whole, and skipped and counted there. A page whose first row is not past
//! the previous page's last, or whose `at` goes back (a schema change
//! between pages, an index that lies), ends the read as this source's error,
//! never a loop; ids compare as bytes whatever collation the column declares
//! (a key repeated within one page, a table with no unique id, is read, not
//! refused). A kept row whose id, thread id or fields are text that is not
//! UTF-8 is skipped and counted. A view or virtual table standing in for
//! `messages` is refused
//! ([`super::require_table`]).

use std::collections::VecDeque;
use std::path::Path;

use super::activity::{self, Class, Fields};
use super::pages::PagedRead;
use rusqlite::Connection;
use rusqlite::types::{ToSqlOutput, ValueRef};

use crate::model::record::{BatchBuilder, Cell, Column};
use crate::sources::{ReadContext, Sink, Source, SourceError, SourceReport};

/// How far back each scan rereads, before the newest row already seen.
pub const REREAD_WINDOW_MS: i64 = 30 * 60 * 1000;

/// Rows still pending (outcome not known) followed past the window, at most.
pub const PENDING_MAX_ROWS: usize = 1000;
/// How long before the newest `at` a pending row is still followed.
pub const PENDING_MAX_AGE_MS: i64 = 24 * 60 * 60 * 1000;

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

/// Activity rows past the key `(?2, ?3)` in `at` order, from `?1` on (the
/// window's start, or the key's `at` when that is later), each with its
/// `data` whole: the rows are classified in Rust ([`activity`]), so a page
/// steps on until it has its rows or the rows run out. The index on `at`
/// keeps it in order without a sort (the plan is tested); the rows of one
/// `at` are put in `id` order in Rust ([`Group`]), so SQLite never copies a
/// row's `data` into a sorter. The ids compare as bytes (`COLLATE BINARY`,
/// whatever the column declares), as the Rust sort does. A row whose id is
/// not text is read (and counted as skipped) once, by the page that reads
/// its `at` whole; a page resuming within that `at` takes text ids only.
const PAGE_QUERY: &str = "
SELECT id, thread_id, at, data FROM messages
WHERE type = 'activity' AND typeof(at) = 'integer'
  AND at >= ?1 AND (at > ?2 OR (at = ?2 AND typeof(id) = 'text' AND id > ?3 COLLATE BINARY))
ORDER BY at";

/// The rows of the cursor's pending keys (`?1`, a JSON array of ids) from
/// before the window (`?2`), with [`PAGE_QUERY`]'s columns.
const PENDING_QUERY: &str = "
SELECT id, thread_id, at, data FROM messages
WHERE id IN (SELECT value FROM json_each(?1)) AND type = 'activity'
  AND typeof(at) = 'integer' AND typeof(id) = 'text' AND at < ?2
ORDER BY at, id";

/// Activity rows in the window whose `at` is not an integer (and those at
/// the very first key, `at` = `i64::MIN`, whose id is not text): skipped,
/// and counted here because the pages never reach them. Every condition on
/// `at` is read from the index on it, so a row is looked up in the table
/// only when its `at` is mistyped: one pass over the index, not the rows.
const COUNT_MISTYPED: &str = "
SELECT COUNT(*) FROM messages
WHERE at >= ?1 AND (typeof(at) <> 'integer' OR (at = -9223372036854775808 AND typeof(id) <> 'text'))
  AND type = 'activity'";

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
    /// Rows seen with their outcome not known yet, `(at, id)`, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pending: Vec<(i64, String)>,
}

/// A failed call's row, its cells owned (the page's statement is gone
/// before the batch is built).
struct Row {
    id: String,
    thread_id: Option<String>,
    at: i64,
    fields: Fields<'static>,
}

/// A row of [`PAGE_QUERY`] (or [`PENDING_QUERY`]) with its `data` classified:
/// `None` when it is neither a failed call, a pending one nor malformed.
enum Kept {
    Failed(Row),
    Pending(i64, String),
    /// Malformed, or a kept row whose id or thread id is not UTF-8: its id
    /// as stored.
    Skipped(Vec<u8>),
}

impl Kept {
    /// The row's id, as it is ordered.
    fn id(&self) -> &[u8] {
        match self {
            Kept::Failed(row) => row.id.as_bytes(),
            Kept::Pending(_, id) => id.as_bytes(),
            Kept::Skipped(id) => id,
        }
    }
}

/// A thread id cell as the query's `text_of` made it: `Err` for text that
/// is not UTF-8.
fn thread_id_of(v: ValueRef<'_>) -> Result<Option<String>, std::str::Utf8Error> {
    Ok(match v {
        ValueRef::Null | ValueRef::Blob(_) => None,
        ValueRef::Integer(i) => Some(i.to_string()),
        ValueRef::Real(f) => Some(f.to_string()),
        ValueRef::Text(t) => Some(std::str::from_utf8(t)?.to_owned()),
    })
}

/// The row `r` (whose key is `(at, id)`) classified, on the read's handle.
fn kept(conn: &Connection, r: &rusqlite::Row<'_>, at: i64, id: &[u8]) -> rusqlite::Result<Option<Kept>> {
    let class = activity::classify(conn, r.get_ref(3)?)?;
    if class == Class::Other {
        return Ok(None);
    }
    let (Ok(id), Ok(thread_id)) = (std::str::from_utf8(id), thread_id_of(r.get_ref(1)?)) else {
        return Ok(Some(Kept::Skipped(id.to_vec())));
    };
    Ok(Some(match class {
        Class::Failed(fields) => {
            Kept::Failed(Row { id: id.to_owned(), thread_id, at, fields: activity::owned(fields) })
        }
        Class::Pending => Kept::Pending(at, id.to_owned()),
        Class::Malformed | Class::Other => Kept::Skipped(id.as_bytes().to_vec()),
    }))
}

/// One page: the rows kept past the previous page's key, in order, at most
/// `limit` of them.
#[derive(Default)]
struct Page {
    kept: Vec<Kept>,
    /// The last key read, the next page's start.
    last: Option<(i64, Vec<u8>)>,
    /// The rows ran out before `limit` were kept.
    ran_out: bool,
    /// A row came back before the previous one (or, first on the page, not
    /// past the previous page's key): the key it did not advance past.
    disorder: Option<(i64, Vec<u8>)>,
    /// Rows read whose id is not text: skipped.
    mistyped: u64,
}

/// One page of rows after `after`, on the read's handle.
fn page(db: &mut PagedRead<'_>, window_start: i64, after: (i64, &[u8]), limit: usize) -> rusqlite::Result<Page> {
    db.run(|conn| {
        super::require_table(conn, "messages")?;
        page_on(conn, window_start, after, limit.max(1))
    })
}

fn page_on(conn: &Connection, window_start: i64, after: (i64, &[u8]), limit: usize) -> rusqlite::Result<Page> {
    let mut stmt = conn.prepare_cached(PAGE_QUERY)?;
    let from = window_start.max(after.0);
    let after_id = ToSqlOutput::Borrowed(ValueRef::Text(after.1));
    let mut rows = stmt.query(rusqlite::params![from, after.0, after_id])?;
    let mut page = Page::default();
    let mut group = Group { at: after.0, kept: Vec::new() };
    while let Some(r) = rows.next()? {
        let at: i64 = r.get(2)?;
        let id = match r.get_ref(0)? {
            ValueRef::Text(t) => Some(t),
            _ => None,
        };
        // `at` never goes back, and the key's own `at` resumes past its id.
        if at < group.at || (at == after.0 && id.is_none_or(|id| id <= after.1)) {
            page.disorder = Some((group.at, group.kept.last().map_or_else(|| after.1.to_vec(), |k| k.id().to_vec())));
            return Ok(page);
        }
        if at != group.at {
            if group.flush(&mut page, limit) {
                return Ok(page);
            }
            group.at = at;
        }
        let Some(id) = id else {
            page.mistyped += 1;
            continue;
        };
        if let Some(k) = kept(conn, r, at, id)? {
            group.push(k, limit - page.kept.len());
        }
    }
    if !group.flush(&mut page, limit) {
        page.ran_out = true;
    }
    Ok(page)
}

/// The kept rows of one `at`, in the order SQLite read them (the index's),
/// put in `id` order when the group ends: at most the `room` smallest ids
/// are held, the others read again by the next page.
struct Group {
    at: i64,
    kept: Vec<Kept>,
}

impl Group {
    /// Holds `k`; past twice the `room` (never 0: the page is not full) the
    /// smallest ids are kept.
    fn push(&mut self, k: Kept, room: usize) {
        self.kept.push(k);
        if self.kept.len() >= 2 * room {
            self.sort();
            self.kept.truncate(room);
        }
    }

    fn sort(&mut self) {
        self.kept.sort_by(|a, b| a.id().cmp(b.id()));
    }

    /// The group's rows into `page`, in `id` order, up to `limit`: whether
    /// the page is full (its last key set where it stopped).
    fn flush(&mut self, page: &mut Page, limit: usize) -> bool {
        self.sort();
        let room = limit - page.kept.len();
        let full = self.kept.len() >= room;
        self.kept.truncate(room);
        if full {
            page.last = self.kept.last().map(|k| (self.at, k.id().to_vec()));
        }
        page.kept.append(&mut self.kept);
        full
    }
}

fn count_mistyped(db: &mut PagedRead<'_>, window_start: i64) -> rusqlite::Result<u64> {
    db.run(|conn| conn.prepare_cached(COUNT_MISTYPED)?.query_row([window_start], |r| r.get::<_, i64>(0)))
        .map(|n| u64::try_from(n).unwrap_or(0))
}

/// The rows of `pending` from before `window_start`, each with what became
/// of it (a row gone from the table is simply not there): failed, still
/// pending, or (`Skipped`) resolved: it succeeded, is no longer a tool
/// call, or is malformed, so there is nothing to follow.
fn pending_rows(db: &mut PagedRead<'_>, pending: &[(i64, String)], window_start: i64) -> rusqlite::Result<Vec<Kept>> {
    let ids = serde_json::to_string(&pending.iter().map(|(_, id)| id).collect::<Vec<_>>()).unwrap_or_default();
    db.run(|conn| {
        super::require_table(conn, "messages")?;
        let mut stmt = conn.prepare_cached(PENDING_QUERY)?;
        let mut rows = stmt.query(rusqlite::params![ids, window_start])?;
        let mut out = Vec::new();
        while let Some(r) = rows.next()? {
            let id = match r.get_ref(0)? {
                ValueRef::Text(t) => t,
                _ => &[],
            };
            out.push(kept(conn, r, r.get(2)?, id)?.unwrap_or_else(|| Kept::Skipped(id.to_vec())));
        }
        Ok(out)
    })
}

/// The pending rows the next scan follows: those kept and those found,
/// none older than [`PENDING_MAX_AGE_MS`] before `hwm`, the newest
/// [`PENDING_MAX_ROWS`], oldest first.
fn pending_kept(mut rows: Vec<(i64, String)>, hwm: i64) -> Vec<(i64, String)> {
    rows.retain(|(at, _)| *at >= hwm.saturating_sub(PENDING_MAX_AGE_MS));
    rows.sort();
    rows.dedup();
    let over = rows.len().saturating_sub(PENDING_MAX_ROWS);
    rows.drain(..over);
    rows
}

/// One row into `builder`.
fn push(builder: &mut BatchBuilder, row: &Row) -> Result<(), SourceError> {
    let f = &row.fields;
    let cells = [
        Cell::Text(&row.id),
        row.thread_id.as_deref().map_or(Cell::Null, Cell::Text),
        Cell::Int(row.at),
        f.turn_id.as_deref().map_or(Cell::Null, Cell::Text),
        f.bot_id.as_deref().map_or(Cell::Null, Cell::Text),
        f.tool_name.as_deref().map_or(Cell::Null, Cell::Text),
        f.output.as_deref().map_or(Cell::Null, Cell::Text),
        f.exit_code.map_or(Cell::Null, Cell::Int),
    ];
    builder.push_row(&cells).map_err(|e| SourceError::Stopped { source_name: "messages".into(), reason: e.to_string() })
}

/// The rows `kept` pending from before the window: the failed ones into
/// `builder`, the still pending returned to be followed on.
fn followed(
    db: &mut PagedRead<'_>,
    kept: &[(i64, String)],
    window_start: i64,
    path: &Path,
    builder: &mut BatchBuilder,
    report: &mut SourceReport,
) -> Result<VecDeque<(i64, String)>, SourceError> {
    let mut pending = VecDeque::new();
    if kept.is_empty() {
        return Ok(pending);
    }
    let rows = pending_rows(db, kept, window_start).map_err(|e| SourceError::Read {
        source_name: "messages".into(),
        path: path.to_owned(),
        source: Box::new(e),
    })?;
    for row in rows {
        match row {
            Kept::Failed(row) if !row.id.is_empty() => {
                push(builder, &row)?;
                report.records += 1;
            }
            Kept::Pending(at, id) => pending.push_back((at, id)),
            _ => {}
        }
    }
    Ok(pending)
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
        Some(vec![super::wal_path(&db), db])
    }

    fn read(&self, ctx: &ReadContext<'_>, sink: &mut Sink<'_>) -> Result<SourceReport, SourceError> {
        let path = ctx.data_dir.join(&self.file);
        if std::fs::symlink_metadata(&path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
            return Ok(SourceReport::missing(ctx));
        }
        let read_err =
            |e| SourceError::Read { source_name: "messages".into(), path: path.clone(), source: Box::new(e) };
        let prev = ctx.cursor.and_then(|c| serde_json::from_str::<Cursor>(c).ok());
        let prev_hwm = prev.as_ref().map(|c| c.hwm);
        let window_start = prev_hwm.map_or(i64::MIN, |h| h.saturating_sub(REREAD_WINDOW_MS));
        let mut report = SourceReport::default();
        let mut hwm = prev_hwm.unwrap_or(0);
        let mut builder = BatchBuilder::new("messages", "tool-failure", COLUMNS);
        let mut db = PagedRead::open(&path).map_err(read_err)?;
        // Rows pending when last seen, from before the window: the failed
        // ones first (they are the oldest), the still pending kept.
        let kept = prev.map(|c| c.pending).unwrap_or_default();
        let mut pending = followed(&mut db, &kept, window_start, &path, &mut builder, &mut report)?;
        if !builder.is_empty() {
            sink(builder.take()).map_err(|reason| SourceError::Stopped { source_name: "messages".into(), reason })?;
        }
        let mut after: (i64, Vec<u8>) = (i64::MIN, Vec::new());
        loop {
            let page = page(&mut db, window_start, (after.0, &after.1), ctx.batch_rows).map_err(read_err)?;
            if let Some((at, id)) = page.disorder {
                return Err(SourceError::Read {
                    source_name: "messages".into(),
                    path: path.clone(),
                    source: format!(
                        "the page key did not advance past (at {at}, id {:?}): the table changed under the read",
                        crate::base::sanitize::one_line(&String::from_utf8_lossy(&id))
                    )
                    .into(),
                });
            }
            report.skipped += page.mistyped;
            for row in page.kept {
                match row {
                    // Followed until it resolves; the oldest give way first.
                    Kept::Pending(at, id) => {
                        if pending.len() == PENDING_MAX_ROWS {
                            pending.pop_front();
                        }
                        pending.push_back((at, id));
                    }
                    Kept::Failed(row) if !row.id.is_empty() => {
                        hwm = hwm.max(row.at);
                        push(&mut builder, &row)?;
                        report.records += 1;
                    }
                    Kept::Failed(_) | Kept::Skipped(_) => report.skipped += 1,
                }
            }
            if !builder.is_empty() {
                sink(builder.take())
                    .map_err(|reason| SourceError::Stopped { source_name: "messages".into(), reason })?;
            }
            if page.ran_out {
                break;
            }
            after = page.last.unwrap_or(after);
        }
        report.skipped += count_mistyped(&mut db, window_start).map_err(read_err)?;
        let pending = pending_kept(pending.into(), hwm);
        report.cursor = Some(serde_json::to_string(&Cursor { hwm, pending }).unwrap_or_default());
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db(dir: &Path) -> Connection {
        let c = Connection::open(dir.join("messages.db")).unwrap();
        c.execute_batch(
            "CREATE TABLE messages(id TEXT PRIMARY KEY, thread_id TEXT, at INTEGER, type TEXT, data TEXT);
             CREATE INDEX messages_at ON messages(at);",
        )
        .unwrap();
        c
    }

    fn failed(c: &Connection, id: &str, at: rusqlite::types::Value) {
        c.execute(
            "INSERT INTO messages VALUES(?1, 'th', ?2, 'activity', '{\"tool\":{\"ok\":false,\"name\":\"bash\"}}')",
            rusqlite::params![id, at],
        )
        .unwrap();
    }

    fn read(dir: &Path, cursor: Option<&str>) -> (Vec<String>, SourceReport) {
        read_in(dir, cursor, 2)
    }

    /// A read in pages of `batch_rows`: the ids delivered, and the report.
    fn read_in(dir: &Path, cursor: Option<&str>, batch_rows: usize) -> (Vec<String>, SourceReport) {
        let ctx = ReadContext { data_dir: dir, scan_time_ms: 0, batch_rows, cursor };
        let mut ids = Vec::new();
        let report = MessagesSource::default()
            .read(&ctx, &mut |b| {
                ids.extend(b.first_texts());
                Ok(())
            })
            .unwrap();
        (ids, report)
    }

    #[test]
    fn a_text_at_is_skipped_and_counted_never_paged_forever() {
        use rusqlite::types::Value::{Integer, Real, Text};
        let dir = tempfile::tempdir().unwrap();
        let c = db(dir.path());
        failed(&c, "m1", Integer(100));
        failed(&c, "m2", Text("2026-01-01T00:00:00Z".into()));
        failed(&c, "m3", Integer(200));
        failed(&c, "m4", Real(150.5));
        failed(&c, "m5", Integer(300));
        failed(&c, "m6", Text("later".into()));
        let (ids, report) = read(dir.path(), None);
        assert_eq!(ids, ["m1", "m3", "m5"]);
        assert_eq!((report.records, report.skipped), (3, 3));
        // The next scan rereads its window and still ends.
        let (ids, report) = read(dir.path(), report.cursor.as_deref());
        assert_eq!(ids, ["m1", "m3", "m5"]);
        assert_eq!(report.skipped, 3);
    }

    #[test]
    fn the_page_query_reads_through_the_index_on_at_with_no_sorter() {
        let dir = tempfile::tempdir().unwrap();
        let c = db(dir.path());
        let plan: Vec<String> = c
            .prepare(&format!("EXPLAIN QUERY PLAN {PAGE_QUERY}"))
            .unwrap()
            .query_map(rusqlite::params![0, 0, ""], |r| r.get(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        // Read through the index on `at`, with no sorter at all: not of the
        // window, not of the rows of one `at` (they are sorted in Rust).
        assert!(plan.iter().any(|l| l.contains("USING INDEX messages_at")), "{plan:?}");
        assert!(!plan.iter().any(|l| l.contains("TEMP B-TREE")), "{plan:?}");
    }

    #[test]
    fn malformed_rows_are_skipped_between_failed_ones_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let c = db(dir.path());
        failed(&c, "m1", 100.into());
        c.execute("INSERT INTO messages VALUES('m2', 'th', 150, 'activity', '{not json')", []).unwrap();
        c.execute("INSERT INTO messages VALUES('m3', 'th', 160, 'activity', '{\"tool\":{\"ok\":true}}')", []).unwrap();
        failed(&c, "m4", 200.into());
        failed(&c, "m0", 200.into());
        let (ids, report) = read(dir.path(), None);
        assert_eq!(ids, ["m1", "m0", "m4"], "(at, id) order across pages of two");
        assert_eq!((report.records, report.skipped), (3, 1));
    }

    /// Rows of one `at` more than a page holds, stored out of `id` order in
    /// a column that declares `NOCASE`: read in byte order across pages of
    /// one, none lost or repeated (a `NOCASE` resume would lose `a` and `c` after `B`).
    #[test]
    fn the_rows_of_one_at_are_paged_in_byte_order_whatever_the_collation() {
        let dir = tempfile::tempdir().unwrap();
        let c = Connection::open(dir.path().join("messages.db")).unwrap();
        c.execute_batch(
            "CREATE TABLE messages(id TEXT COLLATE NOCASE, thread_id TEXT, at INTEGER, type TEXT, data TEXT);
             CREATE INDEX messages_at ON messages(at);",
        )
        .unwrap();
        for (id, at) in [("m", 50), ("c", 100), ("B", 100), ("a", 100), ("D", 100), ("z", 200)] {
            failed(&c, id, at.into());
        }
        c.execute("INSERT INTO messages VALUES('b0', 'th', 100, 'activity', '{\"tool\":{\"ok\":true}}')", []).unwrap();
        for batch_rows in [1, 2, 3, 100] {
            let (ids, _) = read_in(dir.path(), None, batch_rows);
            assert_eq!(ids, ["m", "B", "D", "a", "c", "z"], "pages of {batch_rows}");
        }
    }

    /// Ids that are not text (an integer, null, a blob: the column declares
    /// no type), in groups of one `at` cut by pages of any size and at the
    /// very first key: each skipped and counted once, the text ones read.
    #[test]
    fn rows_whose_id_is_not_text_are_counted_once_whatever_the_pages() {
        let dir = tempfile::tempdir().unwrap();
        let c = Connection::open(dir.path().join("messages.db")).unwrap();
        c.execute_batch(
            "CREATE TABLE messages(id, thread_id TEXT, at INTEGER, type TEXT, data TEXT);
             CREATE INDEX messages_at ON messages(at);",
        )
        .unwrap();
        let rows = "('m1', 100), (7, 100), (NULL, 100), (x'00', 100), ('m0', 100), ('m2', 200), (8, 200), \
                    (9, -9223372036854775808), ('a', -9223372036854775808), (x'01', 300)";
        c.execute_batch(&format!(
            "CREATE TEMP TABLE k(id, at); INSERT INTO k VALUES {rows};
             INSERT INTO messages SELECT id, 'th', at, 'activity', '{{\"tool\":{{\"ok\":false}}}}' FROM k;"
        ))
        .unwrap();
        for batch_rows in [1, 2, 3, 100] {
            let (ids, report) = read_in(dir.path(), None, batch_rows);
            assert_eq!(ids, ["a", "m0", "m1", "m2"], "pages of {batch_rows}");
            assert_eq!(report.skipped, 6, "pages of {batch_rows}");
        }
    }

    fn activity(c: &Connection, id: &str, at: i64, ok: Option<bool>) {
        let data = serde_json::json!({"tool": {"name": "build", "ok": ok}});
        c.execute(
            "INSERT OR REPLACE INTO messages VALUES(?1, 'th', ?2, 'activity', ?3)",
            rusqlite::params![id, at, data.to_string()],
        )
        .unwrap();
    }

    #[test]
    fn a_row_still_pending_past_the_window_is_followed_until_it_resolves() {
        let dir = tempfile::tempdir().unwrap();
        let c = db(dir.path());
        let min = 60_000;
        activity(&c, "long", 0, None);
        activity(&c, "short", 0, None);
        activity(&c, "other", min, Some(false));
        let (ids, report) = read(dir.path(), None);
        assert_eq!(ids, ["other"]);
        // A newer row moves the window (30 minutes before it) past them.
        activity(&c, "later", 45 * min, Some(false));
        let (ids, report) = read(dir.path(), report.cursor.as_deref());
        assert_eq!(ids, ["other", "later"], "the window reread, as every scan does");
        // 45 minutes after its `at`, the long call fails; the short one succeeded.
        activity(&c, "long", 0, Some(false));
        activity(&c, "short", 0, Some(true));
        let (ids, report) = read(dir.path(), report.cursor.as_deref());
        assert_eq!(ids, ["long", "later"], "the pending row, counted once it failed");
        let cursor: Cursor = serde_json::from_str(report.cursor.as_deref().unwrap()).unwrap();
        assert!(cursor.pending.is_empty(), "both resolved: nothing followed any more");
    }

    #[test]
    fn pending_rows_are_bounded_by_count_and_age() {
        let day = PENDING_MAX_AGE_MS;
        let rows: Vec<(i64, String)> = (0..PENDING_MAX_ROWS as i64 + 5).map(|i| (day + i, format!("p{i}"))).collect();
        let mut with_old = rows.clone();
        with_old.push((0, "old".into()));
        let kept = pending_kept(with_old, 2 * day);
        assert_eq!(kept.len(), PENDING_MAX_ROWS);
        assert_eq!(kept[0], rows[5], "the newest kept, oldest first");
        assert!(!kept.iter().any(|(_, id)| id == "old"), "older than the age limit: dropped");
    }

    #[test]
    fn a_view_standing_in_for_messages_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let c = Connection::open(dir.path().join("messages.db")).unwrap();
        c.execute_batch(
            "CREATE TABLE real(id TEXT, thread_id TEXT, at INTEGER, type TEXT, data TEXT);
             CREATE VIEW messages AS SELECT * FROM real;",
        )
        .unwrap();
        let ctx = ReadContext { data_dir: dir.path(), scan_time_ms: 0, batch_rows: 2, cursor: None };
        let err = MessagesSource::default().read(&ctx, &mut |_| Ok(())).unwrap_err();
        let chain = format!("{err}: {}", std::error::Error::source(&err).unwrap());
        assert!(chain.contains("`messages` is a view"), "{chain}");
    }
}
