//! A configured SQLite database and query (for example an outbox table the
//! stock sentinels watch).
//!
//! The query must be a `SELECT` (checked when the config is loaded; the handle
//! is read-only anyway, see [`super`]). With a `cursor` column, the
//! query reads only rows past the highest value seen, through the `:cursor`
//! parameter, and is run page by page (`LIMIT`) on a fresh handle each time, so
//! no read transaction outlives a page. Without one, each scan reads at most
//! `max_rows` rows. Values are typed by the configured column types, text
//! otherwise; a value that does not fit its type is null.
//!
//! Rows that change in place (an outbox row written `pending`, later
//! `acked`) are read with `reread`: the cursor is then a change column in ms
//! (`updated_at`), and each read starts that far back before the highest
//! value seen, so a row updated since is read again, and so is a row whose
//! change time ties with the highest one but committed after the read. A
//! row is then read more than once; the detectors reading such a source key
//! their observations by row and state (occurrence keys), and the windowed
//! sentinels refuse it (`stock`). (Rows tying on the change column across
//! a page boundary are read by the next scan's window.)
//!
//! Paging is strict: a row whose cursor value is not an integer is never
//! paged over (it cannot be ordered against the cursor); such rows are counted
//! as skipped by one count query at the end of the read. A full page that does
//! not move the cursor forward ends the read as this source's error (the query
//! does not filter on `:cursor`), and so does a page whose columns differ from
//! the first page's (the schema changed between pages). Rows read and skipped
//! together never exceed `max_rows` in one scan.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use super::pages::PagedRead;
use rusqlite::types::Value;

use crate::model::record::{BatchBuilder, Cell, Column, ColumnType};
use crate::sources::{ReadContext, Sink, Source, SourceError, SourceReport};

/// Rows of a configured query.
#[derive(Debug, Clone)]
pub struct QuerySource {
    pub name: String,
    /// The database, relative to the data dir unless absolute.
    pub file: PathBuf,
    pub kind: String,
    pub query: String,
    pub cursor: Option<String>,
    /// How far back before the highest cursor value each read starts (the
    /// cursor's units, ms); none: only rows past it.
    pub reread_ms: Option<i64>,
    pub columns: Vec<(String, ColumnType)>,
    pub max_rows: usize,
}

fn cell<'a>(v: &'a Value, kind: ColumnType) -> Cell<'a> {
    match (kind, v) {
        (_, Value::Null) => Cell::Null,
        (ColumnType::Text, Value::Text(s)) => Cell::Text(s),
        (ColumnType::Int, Value::Integer(i)) => Cell::Int(*i),
        (ColumnType::Int, Value::Real(f)) => Cell::Int(*f as i64),
        (ColumnType::Float, Value::Real(f)) => Cell::Float(*f),
        (ColumnType::Float, Value::Integer(i)) => Cell::Float(*i as f64),
        (ColumnType::Boolean, Value::Integer(i)) => Cell::Boolean(*i != 0),
        _ => Cell::Null,
    }
}

/// A value as text: a text value borrowed in place (no copy per cell), a
/// number written out, a blob or null none.
fn text_of(v: &Value) -> Option<Cow<'_, str>> {
    match v {
        Value::Integer(i) => Some(Cow::Owned(i.to_string())),
        Value::Real(f) => Some(Cow::Owned(f.to_string())),
        Value::Text(s) => Some(Cow::Borrowed(s)),
        Value::Null | Value::Blob(_) => None,
    }
}

impl QuerySource {
    fn path(&self, data_dir: &Path) -> PathBuf {
        data_dir.join(&self.file)
    }

    fn fail(&self, path: &Path, message: String) -> SourceError {
        SourceError::Read { source_name: self.name.clone(), path: path.to_owned(), source: message.into() }
    }

    /// Pushes one page's rows into the batch, moving `after` to the highest
    /// cursor value and counting a row whose cursor is not an integer as
    /// skipped.
    fn push_rows(
        &self,
        rows: &[Vec<Value>],
        kinds: &[ColumnType],
        cursor_col: Option<usize>,
        after: &mut i64,
        b: &mut BatchBuilder,
        report: &mut SourceReport,
    ) -> Result<(), SourceError> {
        let mut texts: Vec<Option<Cow<'_, str>>> = Vec::with_capacity(kinds.len());
        for row in rows {
            if let Some(i) = cursor_col {
                match row[i] {
                    Value::Integer(c) => *after = (*after).max(c),
                    _ => {
                        report.skipped += 1;
                        continue;
                    }
                }
            }
            texts.clear();
            texts.extend(row.iter().zip(kinds).map(|(v, k)| if *k == ColumnType::Text { text_of(v) } else { None }));
            let cells: Vec<Cell<'_>> = row
                .iter()
                .zip(kinds)
                .zip(&texts)
                .map(|((v, k), t)| match k {
                    ColumnType::Text => t.as_deref().map_or(Cell::Null, Cell::Text),
                    _ => cell(v, *k),
                })
                .collect();
            b.push_row(&cells)
                .map_err(|e| SourceError::Stopped { source_name: self.name.clone(), reason: e.to_string() })?;
            report.records += 1;
        }
        Ok(())
    }

    fn err(&self, path: &Path, e: rusqlite::Error) -> SourceError {
        SourceError::Read { source_name: self.name.clone(), path: path.to_owned(), source: Box::new(e) }
    }
}

impl Source for QuerySource {
    fn name(&self) -> &str {
        &self.name
    }
    fn kinds(&self) -> &'static [&'static str] {
        &[]
    }
    fn watch(&self, data_dir: &Path) -> Option<Vec<PathBuf>> {
        let db = self.path(data_dir);
        Some(vec![super::wal_path(&db), db])
    }

    fn read(&self, ctx: &ReadContext<'_>, sink: &mut Sink<'_>) -> Result<SourceReport, SourceError> {
        let path = self.path(ctx.data_dir);
        if std::fs::symlink_metadata(&path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
            return Ok(SourceReport::missing(ctx));
        }
        let highest: i64 = ctx.cursor.and_then(|c| c.parse().ok()).unwrap_or(i64::MIN);
        let mut after = highest.saturating_sub(self.reread_ms.unwrap_or(0));
        let page_rows = ctx.batch_rows.max(1);
        // Pages see only rows whose cursor value is an integer: the others
        // cannot be ordered against the cursor and would come back forever.
        let typed = |op: &str| {
            let col = self.cursor.as_deref().unwrap_or_default().replace('"', "\"\"");
            format!("typeof(\"{col}\") {op} 'integer'")
        };
        let sql = match &self.cursor {
            Some(_) => format!("SELECT * FROM ({}) WHERE {} LIMIT {page_rows}", self.query, typed("=")),
            None => format!("SELECT * FROM ({}) LIMIT {}", self.query, self.max_rows),
        };
        let first_after = after;
        let mut report = SourceReport::default();
        let mut builder: Option<(Vec<String>, BatchBuilder)> = None;
        let mut db = PagedRead::open(&path).map_err(|e| self.err(&path, e))?;
        loop {
            let (names, rows) = db
                .run(|conn| {
                    let mut stmt = conn.prepare_cached(&sql)?;
                    let names: Vec<String> = stmt.column_names().map(str::to_owned).collect();
                    let n = names.len();
                    let params: Vec<(&str, &dyn rusqlite::ToSql)> =
                        if self.cursor.is_some() { vec![(":cursor", &after)] } else { Vec::new() };
                    let rows = stmt.query_map(params.as_slice(), |r| (0..n).map(|i| r.get::<_, Value>(i)).collect())?;
                    Ok((names, rows.collect::<rusqlite::Result<Vec<Vec<Value>>>>()?))
                })
                .map_err(|e| self.err(&path, e))?;
            let kinds: Vec<ColumnType> = names
                .iter()
                .map(|n| self.columns.iter().find(|(c, _)| c == n).map_or(ColumnType::Text, |(_, k)| *k))
                .collect();
            let (first_names, b) = builder.get_or_insert_with(|| {
                let cols: Vec<Column> = names.iter().zip(&kinds).map(|(n, k)| Column::named(n.clone(), *k)).collect();
                (names.clone(), BatchBuilder::new(&self.name, &self.kind, &cols))
            });
            if *first_names != names {
                return Err(
                    self.fail(&path, format!("the columns changed between pages: {first_names:?} then {names:?}"))
                );
            }
            let cursor_col = self.cursor.as_ref().and_then(|c| names.iter().position(|n| n == c));
            let got = rows.len();
            let before = after;
            self.push_rows(&rows, &kinds, cursor_col, &mut after, b, &mut report)?;
            if !b.is_empty() {
                sink(b.take()).map_err(|reason| SourceError::Stopped { source_name: self.name.clone(), reason })?;
            }
            if self.cursor.is_none() || got < page_rows || (report.records + report.skipped) as usize >= self.max_rows {
                break;
            }
            if after <= before {
                let col = self.cursor.as_deref().unwrap_or_default();
                return Err(self.fail(
                    &path,
                    format!(
                        "a full page left the cursor `{col}` at {after}: the query must keep only rows past :cursor"
                    ),
                ));
            }
        }
        if self.cursor.is_some() {
            let count = format!("SELECT COUNT(*) FROM ({}) WHERE {}", self.query, typed("<>"));
            let mistyped: i64 = db
                .run(|conn| conn.query_row(&count, rusqlite::named_params! {":cursor": first_after}, |r| r.get(0)))
                .map_err(|e| self.err(&path, e))?;
            report.skipped += u64::try_from(mistyped).unwrap_or(0);
            // A re-read that found fewer rows (some deleted) keeps the highest.
            report.cursor = Some(after.max(highest).to_string());
        }
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first int column of every row one read sends, and its cursor.
    fn ids_read(
        source: &QuerySource,
        dir: &Path,
        cursor: Option<&str>,
        batch_rows: usize,
    ) -> (Vec<i64>, Option<String>) {
        let ctx = ReadContext { data_dir: dir, scan_time_ms: 0, batch_rows, cursor };
        let mut ids = Vec::new();
        let r = source
            .read(&ctx, &mut |b| {
                ids.extend(b.ints[..b.rows as usize].iter().copied());
                Ok(())
            })
            .unwrap();
        (ids, r.cursor)
    }

    #[test]
    fn a_cursor_query_reads_only_new_rows_page_by_page() {
        let dir = tempfile::tempdir().unwrap();
        let c = rusqlite::Connection::open(dir.path().join("o.db")).unwrap();
        c.execute_batch("CREATE TABLE outbox(id INTEGER PRIMARY KEY, status TEXT, acked INTEGER)").unwrap();
        for i in 1..=5 {
            c.execute("INSERT INTO outbox(status, acked) VALUES('x', ?1)", [i % 2]).unwrap();
        }
        let source = QuerySource {
            name: "outbox".into(),
            file: "o.db".into(),
            kind: "row".into(),
            query: "SELECT id, status, acked FROM outbox WHERE id > :cursor ORDER BY id".into(),
            cursor: Some("id".into()),
            reread_ms: None,
            columns: vec![("id".into(), ColumnType::Int), ("acked".into(), ColumnType::Boolean)],
            max_rows: 100,
        };
        let read = |cursor: Option<&str>| ids_read(&source, dir.path(), cursor, 2);
        let (ids, cursor) = read(None);
        assert_eq!(ids, [1, 2, 3, 4, 5]);
        c.execute("INSERT INTO outbox(status, acked) VALUES('y', 1)", []).unwrap();
        let (ids, _) = read(cursor.as_deref());
        assert_eq!(ids, [6]);
    }

    #[test]
    fn a_reread_window_reads_a_row_again_after_it_changes_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let c = rusqlite::Connection::open(dir.path().join("o.db")).unwrap();
        c.execute_batch(
            "CREATE TABLE outbox(id INTEGER PRIMARY KEY, status TEXT, updated_at INTEGER);
             INSERT INTO outbox VALUES (1, 'pending', 1000), (2, 'pending', 1500);",
        )
        .unwrap();
        let source = QuerySource {
            reread_ms: Some(10_000),
            cursor: Some("updated_at".into()),
            columns: vec![("id".into(), ColumnType::Int), ("updated_at".into(), ColumnType::Int)],
            ..outbox(dir.path(), "SELECT id, updated_at FROM outbox WHERE updated_at > :cursor ORDER BY updated_at")
        };
        let read = |cursor: Option<&str>| {
            let (ids, cursor) = ids_read(&source, dir.path(), cursor, 10);
            (ids, cursor.unwrap())
        };
        let (ids, cursor) = read(None);
        assert_eq!((ids, cursor.as_str()), (vec![1, 2], "1500"));
        // Row 1 is acked in place; a row ties with the highest change time.
        c.execute_batch("UPDATE outbox SET status = 'acked', updated_at = 2000 WHERE id = 1;").unwrap();
        c.execute_batch("INSERT INTO outbox VALUES (3, 'pending', 1500);").unwrap();
        let (ids, cursor) = read(Some(&cursor));
        assert_eq!(ids, [2, 3, 1], "the changed row and the late tie are read (again)");
        assert_eq!(cursor, "2000");
        // Without the window, the ack is never seen.
        let plain = QuerySource { reread_ms: None, ..source.clone() };
        let ctx = ReadContext { data_dir: dir.path(), scan_time_ms: 0, batch_rows: 1, cursor: Some("1500") };
        let mut rows = 0;
        plain
            .read(&ctx, &mut |b| {
                rows += b.rows;
                Ok(())
            })
            .unwrap();
        assert_eq!(rows, 1, "only the row changed at 2000");
    }

    fn outbox(dir: &Path, query: &str) -> QuerySource {
        QuerySource {
            name: "outbox".into(),
            file: dir.join("o.db"),
            kind: "row".into(),
            query: query.into(),
            cursor: Some("id".into()),
            reread_ms: None,
            columns: vec![("id".into(), ColumnType::Int)],
            max_rows: 1000,
        }
    }

    fn read_all(src: &QuerySource, dir: &Path) -> Result<SourceReport, SourceError> {
        let ctx = ReadContext { data_dir: dir, scan_time_ms: 0, batch_rows: 2, cursor: None };
        src.read(&ctx, &mut |_| Ok(()))
    }

    #[test]
    fn a_text_cursor_value_is_skipped_and_counted_and_the_read_ends() {
        let dir = tempfile::tempdir().unwrap();
        let c = rusqlite::Connection::open(dir.path().join("o.db")).unwrap();
        c.execute_batch(
            "CREATE TABLE outbox(id, v); INSERT INTO outbox VALUES (1,'a'),('x','b'),(2,'c'),('y','d'),(3,'e');",
        )
        .unwrap();
        let src = outbox(dir.path(), "SELECT id, v FROM outbox WHERE id > :cursor ORDER BY id");
        let report = read_all(&src, dir.path()).unwrap();
        assert_eq!((report.records, report.skipped, report.cursor.as_deref()), (3, 2, Some("3")));
    }

    #[test]
    fn a_query_that_ignores_the_cursor_ends_as_an_error_not_a_loop() {
        let dir = tempfile::tempdir().unwrap();
        let c = rusqlite::Connection::open(dir.path().join("o.db")).unwrap();
        c.execute_batch("CREATE TABLE outbox(id INTEGER, v); INSERT INTO outbox VALUES (5,'a'),(5,'b'),(5,'c');")
            .unwrap();
        // `:cursor` bound but unused, and every row has the same key.
        let src = outbox(dir.path(), "SELECT id, v FROM outbox WHERE :cursor IS NOT NULL");
        let err = read_all(&src, dir.path()).unwrap_err();
        let cause = std::error::Error::source(&err).unwrap().to_string();
        assert!(cause.contains("must keep only rows past :cursor"), "{cause}");
    }
}
