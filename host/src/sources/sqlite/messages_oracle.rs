//! The equivalence oracle of the `messages.db` read: the query that
//! classified every activity row inside SQLite (`json_valid`, `json_extract`,
//! `json_type`), kept here as it was, and the read as it was built on it.
//! Hostile `data` values go into a real SQLite file, and the read that
//! classifies `data` in Rust ([`super::activity`]) must give exactly its
//! rows, cells, skipped count and cursor.
//!
//! It owns only tests. The one documented difference: a kept row whose
//! values are not UTF-8 ended the old read with an error; it is skipped and
//! counted now (here: the oracle counts it as skipped).

use std::path::Path;

use rusqlite::Connection;
use rusqlite::types::Value;

use super::messages::{MessagesSource, REREAD_WINDOW_MS};
use crate::sources::{ReadContext, Source, SourceReport};

/// The page query as it was (its `LIMIT` is `-1` here: one page).
const QUERY: &str = "
SELECT id, thread_id, at,
       json_extract(d, '$.turnId'), json_extract(d, '$.from.botId'),
       json_extract(d, '$.tool.name'), json_extract(d, '$.tool.output'),
       json_extract(d, '$.tool.exitCode'), d IS NULL,
       d IS NOT NULL AND json_extract(d, '$.tool.ok') IS NULL
FROM (SELECT id, thread_id, at, CASE WHEN json_valid(data) THEN data END AS d
      FROM messages
      WHERE type = 'activity' AND typeof(at) = 'integer' AND typeof(id) = 'text'
        AND at >= ?1 AND (at > ?2 OR (at = ?2 AND id > ?3))
      ORDER BY at, id LIMIT -1 OFFSET 0)
WHERE d IS NULL OR json_extract(d, '$.tool.ok') = 0
   OR (json_extract(d, '$.tool.ok') IS NULL AND json_type(d, '$.tool') = 'object')
ORDER BY at, id
LIMIT ?4";

/// The pending rows' query as it was.
const PENDING_QUERY: &str = "
SELECT id, thread_id, at,
       json_extract(d, '$.turnId'), json_extract(d, '$.from.botId'),
       json_extract(d, '$.tool.name'), json_extract(d, '$.tool.output'),
       json_extract(d, '$.tool.exitCode'), d IS NULL,
       COALESCE(json_extract(d, '$.tool.ok') IS NULL AND json_type(d, '$.tool') = 'object', 0),
       COALESCE(json_extract(d, '$.tool.ok') = 0, 0)
FROM (SELECT id, thread_id, at, CASE WHEN json_valid(data) THEN data END AS d
      FROM messages
      WHERE id IN (SELECT value FROM json_each(?1)) AND type = 'activity'
        AND typeof(at) = 'integer' AND typeof(id) = 'text' AND at < ?2)
ORDER BY at, id";

const COUNT_MISTYPED: &str = "
SELECT COUNT(*) FROM messages
WHERE type = 'activity' AND at >= ?1 AND NOT (typeof(at) = 'integer' AND typeof(id) = 'text')";

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

/// A row as the old read took it: its cells (as the batch prints them),
/// then malformed, pending, failed.
struct OldRow {
    at: i64,
    id: String,
    cells: Vec<String>,
    malformed: bool,
    pending: bool,
    failed: bool,
}

/// The old `row_of`; `None` where converting a value failed (the old read's
/// error, a skipped row now).
fn row_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<Option<OldRow>> {
    let row = (|| -> rusqlite::Result<OldRow> {
        let id: String = r.get(0)?;
        let at: i64 = r.get(2)?;
        let text = |i| -> rusqlite::Result<String> { Ok(format!("{:?}", text_of(&r.get::<_, Value>(i)?))) };
        let cells = vec![
            format!("{:?}", Some(&id)),
            text(1)?,
            format!("{:?}", Some(at)),
            text(3)?,
            text(4)?,
            text(5)?,
            text(6)?,
            format!("{:?}", int_of(&r.get::<_, Value>(7)?)),
        ];
        Ok(OldRow { at, id, cells, malformed: r.get(8)?, pending: r.get(9)?, failed: false })
    })();
    match row {
        Ok(mut row) => {
            if r.as_ref().column_count() > 10 {
                row.failed = r.get(10)?;
            }
            Ok(Some(row))
        }
        Err(rusqlite::Error::SqliteFailure(..)) => row.map(Some),
        Err(_) => Ok(None),
    }
}

#[derive(serde::Deserialize, serde::Serialize, Debug, PartialEq, Default)]
struct Cursor {
    hwm: i64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pending: Vec<(i64, String)>,
}

/// What a read gave: each record's cells, the records and skipped counts,
/// the cursor.
type Outcome = (Vec<Vec<String>>, u64, u64, Cursor);

/// The old read, in one page (its paging does not change what it reads).
fn old_read(c: &Connection, cursor: Option<&str>) -> rusqlite::Result<Outcome> {
    let prev = cursor.and_then(|c| serde_json::from_str::<Cursor>(c).ok());
    let window_start = prev.as_ref().map_or(i64::MIN, |p| p.hwm.saturating_sub(REREAD_WINDOW_MS));
    let mut hwm = prev.as_ref().map_or(0, |p| p.hwm);
    let (mut out, mut skipped, mut pending) = (Vec::new(), 0, Vec::new());
    if let Some(prev) = prev.as_ref().filter(|p| !p.pending.is_empty()) {
        let ids = serde_json::to_string(&prev.pending.iter().map(|(_, id)| id).collect::<Vec<_>>()).unwrap();
        let mut stmt = c.prepare(PENDING_QUERY)?;
        let mut rows = stmt.query(rusqlite::params![ids, window_start])?;
        while let Some(r) = rows.next()? {
            match row_of(r)? {
                Some(row) if row.failed && !row.malformed && !row.id.is_empty() => out.push(row.cells),
                Some(row) if !row.failed && row.pending => pending.push((row.at, row.id)),
                _ => {}
            }
        }
    }
    let mut stmt = c.prepare(QUERY)?;
    let mut rows = stmt.query(rusqlite::params![window_start, i64::MIN, "", -1])?;
    while let Some(r) = rows.next()? {
        match row_of(r)? {
            Some(row) if row.pending => pending.push((row.at, row.id)),
            Some(row) if !row.malformed && !row.id.is_empty() => {
                hwm = hwm.max(row.at);
                out.push(row.cells);
            }
            _ => skipped += 1,
        }
    }
    skipped += c.query_row(COUNT_MISTYPED, [window_start], |r| r.get::<_, i64>(0))? as u64;
    // As the read's `pending_kept` (the bounds are the read's own tests').
    pending.sort();
    pending.dedup();
    let records = out.len() as u64;
    Ok((out, records, skipped, Cursor { hwm, pending }))
}

/// The read under test, in pages of `batch_rows`.
fn new_read(dir: &Path, cursor: Option<&str>, batch_rows: usize) -> Outcome {
    let ctx = ReadContext { data_dir: dir, scan_time_ms: 0, batch_rows, cursor };
    let mut out = Vec::new();
    let report: SourceReport = MessagesSource::default()
        .read(&ctx, &mut |b| {
            for row in 0..b.rows as usize {
                out.push((0..b.columns.len()).map(|col| cell_text(&b.cell(col, row))).collect());
            }
            Ok(())
        })
        .expect("the read never fails on hostile data");
    let cursor = serde_json::from_str(report.cursor.as_deref().unwrap()).unwrap();
    (out, report.records, report.skipped, cursor)
}

fn cell_text(c: &crate::model::record::Cell<'_>) -> String {
    use crate::model::record::Cell;
    match c {
        Cell::Null => "None".into(),
        Cell::Text(s) => format!("{:?}", Some(*s)),
        Cell::Int(i) => format!("{:?}", Some(*i)),
        other => format!("{other:?}"),
    }
}

fn table(dir: &Path) -> Connection {
    let c = Connection::open(dir.join("messages.db")).unwrap();
    c.execute_batch(
        "CREATE TABLE messages(id TEXT PRIMARY KEY, thread_id TEXT, at INTEGER, type TEXT, data TEXT);
         CREATE INDEX messages_at ON messages(at);",
    )
    .unwrap();
    c
}

/// Nesting `inner` `depth` arrays deep.
fn deep(depth: usize, inner: &str) -> String {
    format!("{}{inner}{}", "[".repeat(depth), "]".repeat(depth))
}

mod hostile {
    use proptest::prelude::*;

    /// A JSON value (or not quite one) of the kinds a field holds.
    pub fn scalar() -> impl Strategy<Value = String> {
        let fixed: Vec<String> = [
            "\"bash\"",
            r#""es\"c\u00e9\n\/""#,
            r#""nul\u0000in""#,
            r#""\ud800""#,
            r#""\ud83d\ude00""#,
            r#""\x41""#,
            r#""\'""#,
            "\"42\"",
            "\" 7 \"",
            "\"0\"",
            "\"\"",
            "0",
            "-0",
            "0.0",
            "-0.0",
            "0e3",
            "0E-0",
            "1e-400",
            "3e-324",
            "2.9999999999999999",
            "1.5",
            "1e400",
            "-1e400",
            "1",
            "42",
            "-7",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775808",
            "-9223372036854775809",
            "18446744073709551616",
            "123456789012345678901234567890",
            "false",
            "true",
            "null",
            "[1,{\"a\":2}]",
            "{\"b\": [ 1 , 2 ], \"c\": \"x\\ty\"}",
            "{}",
            "[]",
            "+1",
            ".5",
            "1.",
            "0x1F",
            "01",
            "Infinity",
            "NaN",
            "'single'",
            "[1,]",
            "\"raw\ttab\"",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        prop_oneof![
            8 => proptest::sample::select(fixed),
            1 => (0usize..4).prop_map(|i| super::deep([127, 128, 999, 1000, 1001][i], "0")),
            1 => "[a-z]{0,6}".prop_map(|s| format!("\"{s}\"")),
            1 => any::<i64>().prop_map(|n| n.to_string()),
            1 => any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| format!("{f:e}")),
        ]
    }

    fn object(keys: Vec<&'static str>, value: BoxedStrategy<String>) -> impl Strategy<Value = String> {
        proptest::collection::vec((proptest::sample::select(keys), value), 0..6).prop_map(|fields| {
            let body: Vec<String> = fields.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
            format!("{{{}}}", body.join(","))
        })
    }

    /// A `tool` value: mostly an object with the fields the read takes.
    fn tool() -> impl Strategy<Value = String> {
        let keys = vec!["ok", "ok", "name", "output", "exitCode", "o\\u006b", "ok\\u0000x", "okay", "\\ud800"];
        prop_oneof![
            6 => object(keys, scalar().boxed()),
            1 => scalar(),
        ]
    }

    fn from() -> impl Strategy<Value = String> {
        prop_oneof![
            3 => object(vec!["botId", "botId", "bot\\u0049d", "id"], scalar().boxed()),
            1 => scalar(),
        ]
    }

    /// A whole `data` text.
    pub fn json() -> impl Strategy<Value = String> {
        let value = prop_oneof![tool(), from(), scalar()].boxed();
        let keys = vec!["tool", "tool", "from", "turnId", "t\\u006fol", "tool\\u0000x", "other"];
        let top = proptest::collection::vec((proptest::sample::select(keys), value), 0..6).prop_map(|fields| {
            let body: Vec<String> = fields.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
            format!("{{{}}}", body.join(","))
        });
        (top, 0u8..12).prop_map(|(obj, shape)| match shape {
            0 => format!("[{obj}]"),
            1 => format!("{obj} x"),
            2 => obj[..obj.len() - 1].to_owned(),
            3 => format!(" \t\r\n{obj}\n "),
            4 => format!("{obj}\0junk"),
            5 => format!("\u{feff}{obj}"),
            6 => format!("\u{b}{obj}"),
            7 => format!("// c\n{obj}"),
            8 => super::deep(1001, &obj),
            _ => obj,
        })
    }

    /// How `data` is stored: text, text with a byte that is not UTF-8, a
    /// blob of the text, a number, null.
    #[derive(Debug, Clone)]
    pub enum Stored {
        Text(String),
        BadUtf8(String),
        Blob(String),
        Int(i64),
        Real(f64),
        Null,
    }

    pub fn stored() -> impl Strategy<Value = Stored> {
        prop_oneof![
            20 => json().prop_map(Stored::Text),
            2 => json().prop_map(Stored::BadUtf8),
            2 => json().prop_map(Stored::Blob),
            1 => any::<i64>().prop_map(Stored::Int),
            1 => Just(Stored::Real(1.5)),
            1 => Just(Stored::Null),
        ]
    }
}

/// Inserts row `n` (below 100): `data` stored as `stored`, odd ids and
/// thread ids now and then.
fn insert(c: &Connection, n: usize, at: i64, kind: &str, odd: u8, stored: &hostile::Stored) {
    use hostile::Stored;
    use rusqlite::types::Value as V;
    let data = match stored {
        Stored::Text(s) => V::Text(s.clone()),
        Stored::BadUtf8(s) => {
            let mut b = s.clone().into_bytes();
            let at = b.len() / 2;
            b.insert(at, 0xff);
            V::Blob(b)
        }
        Stored::Blob(s) => V::Blob(s.clone().into_bytes()),
        Stored::Int(i) => V::Integer(*i),
        Stored::Real(f) => V::Real(*f),
        Stored::Null => V::Null,
    };
    let cast = if matches!(stored, Stored::BadUtf8(_)) { "CAST(?4 AS TEXT)" } else { "?4" };
    let (id, thread) = match odd {
        0 => ("CAST(X'6dff' || ?1 AS TEXT)", "'th'"),
        1 => ("''", "'th'"),
        2 => ("?1", "CAST(X'74ff' AS TEXT)"),
        3 => ("?1", "7"),
        4 => ("?1", "NULL"),
        5 => ("CAST(?1 AS BLOB)", "'th'"),
        6 => ("NULL", "'th'"),
        _ => ("?1", "'th'"),
    };
    let sql = format!("INSERT INTO messages VALUES({id}, {thread}, ?2, ?3, {cast})");
    // Ids not in insertion (rowid) order, so rows of one `at` come out of
    // the index in another order than the page's (`n` < 100: a permutation).
    let res = c.execute(&sql, rusqlite::params![format!("m{:02}", (n * 7) % 100), at, kind, data]);
    // An empty id twice is refused by the primary key: one is enough.
    if let Err(e) = res {
        assert!(e.to_string().contains("UNIQUE"), "{e}");
    }
}

const AT: [i64; 5] = [0, 1, 5, 40 * 60_000, 40 * 60_000 + 1];

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 300, ..Default::default() })]

    /// The read gives exactly what the query that classified `data` in
    /// SQLite gave: the same records, cells, skipped count and cursor,
    /// in pages of any size, and again from a cursor that follows
    /// pending rows from before the window.
    #[test]
    fn the_rust_classification_reads_what_the_sql_query_read(
        rows in proptest::collection::vec(
            (0usize..5, proptest::sample::select(vec!["activity", "activity", "activity", "text"]),
             0u8..40, hostile::stored()),
            1..10,
        ),
        batch_rows in 1usize..4,
        follow in proptest::collection::vec(proptest::bool::ANY, 10),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let c = table(dir.path());
        for (n, (at, kind, odd, stored)) in rows.iter().enumerate() {
            insert(&c, n, AT[*at], kind, *odd, stored);
        }
        let old = old_read(&c, None).unwrap();
        let new = new_read(dir.path(), None, batch_rows);
        proptest::prop_assert_eq!(&new.0, &old.0);
        proptest::prop_assert_eq!((new.1, new.2, &new.3), (old.1, old.2, &old.3));
        // Every row followed as pending from before the window.
        let pending: Vec<(i64, String)> = (0..rows.len())
            .filter(|n| follow[*n])
            .map(|n| (0, format!("m{n:02}")))
            .collect();
        let cursor = serde_json::to_string(&Cursor { hwm: AT[4], pending }).unwrap();
        let old = old_read(&c, Some(&cursor)).unwrap();
        let new = new_read(dir.path(), Some(&cursor), batch_rows);
        proptest::prop_assert_eq!(&new.0, &old.0);
        proptest::prop_assert_eq!((new.1, new.2, &new.3), (old.1, old.2, &old.3));
    }
}

/// Values at SQLite's edges, each in a row of its own, read as the query
/// read them: nesting at and past SQLite's depth limit (1000) and far
/// past `serde_json`'s (128), a key given twice, escaped keys.
#[test]
fn odd_data_reads_as_the_sql_query_read_it() {
    let dir = tempfile::tempdir().unwrap();
    let c = table(dir.path());
    let datas = [
        format!("{{\"tool\":{{\"ok\":false,\"output\":{}}}}}", deep(1000, "1")),
        format!("{{\"tool\":{{\"ok\":false,\"output\":{}}}}}", deep(999, "1")),
        format!("{{\"tool\":{{\"ok\":false}},\"x\":{}}}", deep(1001, "1")),
        format!("{{\"tool\":{{\"ok\":false}},\"x\":{}}}", deep(200_000, "1")),
        r#"{"tool":{"ok":true},"tool":{"ok":false}}"#.into(),
        r#"{"tool":{"ok":false,"ok":true,"name":"a","name":"b"}}"#.into(),
        r#"{"t\u006fol":{"\u006fk":false,"name":"esc"}}"#.into(),
        r#"{"tool\u0000junk":{"ok\u0000":0,"name":"nul"}}"#.into(),
        r#"{"tool":{"ok":-0.0e5,"exitCode":2.9999999999999999,"output":{"a":[1, 2.50]}}}"#.into(),
        r#"{"tool":{"ok":0,"name":"\ud800"}}"#.into(),
        r#"{"tool":{"ok":false}}"#.to_owned() + "\0 trailing",
        r#"{tool:{ok:false}}"#.into(),
    ];
    for (n, data) in datas.iter().enumerate() {
        insert(&c, n, 10, "activity", 9, &hostile::Stored::Text(data.clone()));
    }
    let old = old_read(&c, None).unwrap();
    let new = new_read(dir.path(), None, 2);
    assert_eq!(new.0, old.0);
    assert_eq!((new.1, new.2, &new.3), (old.1, old.2, &old.3));
}
