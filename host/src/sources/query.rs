//! A configured SQLite database and query (for example an outbox table the
//! stock sentinels watch).
//!
//! The query must be a `SELECT` (checked when the config is loaded; the handle
//! is read-only anyway, see [`super::sqlite`]). With a `cursor` column, the
//! query reads only rows past the highest value seen, through the `:cursor`
//! parameter, and is run page by page (`LIMIT`) on a fresh handle each time, so
//! no read transaction outlives a page. Without one, each scan reads at most
//! `max_rows` rows. Values are typed by the configured column types, text
//! otherwise; a value that does not fit its type is null.

use std::path::{Path, PathBuf};

use rusqlite::types::Value;

use super::{ReadContext, Sink, Source, SourceError, SourceReport};
use crate::record::{BatchBuilder, Cell, Column, ColumnType};

/// A configured column type: `text`, `int`, `float` or `boolean`.
pub fn parse_column_type(s: &str) -> Option<ColumnType> {
    Some(match s {
        "text" => ColumnType::Text,
        "int" | "integer" => ColumnType::Int,
        "float" | "real" => ColumnType::Float,
        "bool" | "boolean" => ColumnType::Boolean,
        _ => return None,
    })
}

/// Rows of a configured query.
#[derive(Debug, Clone)]
pub struct QuerySource {
    pub name: String,
    /// The database, relative to the data dir unless absolute.
    pub file: PathBuf,
    pub kind: String,
    pub query: String,
    pub cursor: Option<String>,
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

fn text_of(v: &Value) -> Option<String> {
    match v {
        Value::Integer(i) => Some(i.to_string()),
        Value::Real(f) => Some(f.to_string()),
        Value::Text(s) => Some(s.clone()),
        Value::Null | Value::Blob(_) => None,
    }
}

impl QuerySource {
    fn path(&self, data_dir: &Path) -> PathBuf {
        data_dir.join(&self.file)
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
        Some(vec![super::sqlite::wal_path(&db), db])
    }

    fn read(&self, ctx: &ReadContext<'_>, sink: &mut Sink<'_>) -> Result<SourceReport, SourceError> {
        let path = self.path(ctx.data_dir);
        if !path.exists() {
            return Ok(SourceReport::missing(ctx));
        }
        let mut after: i64 = ctx.cursor.and_then(|c| c.parse().ok()).unwrap_or(i64::MIN);
        let page_rows = ctx.batch_rows.max(1);
        let sql = match &self.cursor {
            Some(_) => format!("SELECT * FROM ({}) LIMIT {page_rows}", self.query),
            None => format!("SELECT * FROM ({}) LIMIT {}", self.query, self.max_rows),
        };
        let mut report = SourceReport::default();
        let mut builder: Option<BatchBuilder> = None;
        loop {
            let (names, rows) = super::sqlite::with_db(&path, |conn| {
                let mut stmt = conn.prepare(&sql)?;
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
            let b = builder.get_or_insert_with(|| {
                let cols: Vec<Column> = names.iter().zip(&kinds).map(|(n, k)| Column::named(n.clone(), *k)).collect();
                BatchBuilder::new(&self.name, &self.kind, &cols)
            });
            let cursor_col = self.cursor.as_ref().and_then(|c| names.iter().position(|n| n == c));
            let got = rows.len();
            for row in &rows {
                let texts: Vec<Option<String>> = row.iter().map(text_of).collect();
                let cells: Vec<Cell<'_>> = row
                    .iter()
                    .zip(&kinds)
                    .zip(&texts)
                    .map(|((v, k), t)| match k {
                        ColumnType::Text => t.as_deref().map_or(Cell::Null, Cell::Text),
                        _ => cell(v, *k),
                    })
                    .collect();
                b.push_row(&cells)
                    .map_err(|e| SourceError::Stopped { source_name: self.name.clone(), reason: e.to_string() })?;
                report.records += 1;
                if let Some(Value::Integer(c)) = cursor_col.map(|i| &row[i]) {
                    after = after.max(*c);
                }
            }
            if !b.is_empty() {
                sink(b.take()).map_err(|reason| SourceError::Stopped { source_name: self.name.clone(), reason })?;
            }
            if self.cursor.is_none() || got < page_rows || report.records as usize >= self.max_rows {
                break;
            }
        }
        if self.cursor.is_some() {
            report.cursor = Some(after.to_string());
        }
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            columns: vec![("id".into(), ColumnType::Int), ("acked".into(), ColumnType::Boolean)],
            max_rows: 100,
        };
        let read = |cursor: Option<&str>| {
            let ctx = ReadContext { data_dir: dir.path(), scan_time_ms: 0, batch_rows: 2, cursor };
            let mut ids = Vec::new();
            let r = source
                .read(&ctx, &mut |b| {
                    ids.extend(b.ints[..b.rows as usize].iter().copied());
                    Ok(())
                })
                .unwrap();
            (ids, r.cursor)
        };
        let (ids, cursor) = read(None);
        assert_eq!(ids, [1, 2, 3, 4, 5]);
        c.execute("INSERT INTO outbox(status, acked) VALUES('y', 1)", []).unwrap();
        let (ids, _) = read(cursor.as_deref());
        assert_eq!(ids, [6]);
    }
}
