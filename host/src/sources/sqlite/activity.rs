//! One activity row's `data`, classified exactly as `messages.db`'s query
//! used to classify it inside SQLite (`json_valid(data)`, `json_extract` of
//! `$.turnId`, `$.from.botId` and `$.tool.name`, `.output`, `.exitCode`,
//! `.ok`, and `json_type(data, '$.tool')`), in one pass in Rust.
//!
//! It owns the JSON shape of an activity and how an extracted value becomes
//! a cell. It never pages, keeps no cursor and never writes.
//!
//! The pass is a streaming `serde_json` visitor over the row's text, which
//! it borrows: a string without escapes is never copied, and what no path
//! names is read over, never built. Before it, the common plain shape (no
//! escape, no float, shallow: [`plain`]) is read byte by byte, giving
//! exactly the visitor's values (what it saves: `docs/benchmarks.md`); any
//! other text goes to the visitor. A key matches a path step as SQLite's
//! does (its first occurrence wins; an escaped key is compared unescaped, up
//! to a `\u0000` in it). Where the pass cannot be sure of SQLite's answer it
//! does not guess: the row's `data` is handed to SQLite's own functions, in
//! one statement on the read's handle ([`BY_SQLITE`]), and that answer is
//! taken. That happens when `data` is not text in UTF-8 (a blob, a number,
//! invalid bytes), when `serde_json` refuses it (not JSON, JSON5, nesting
//! deeper than its limit of 128 where SQLite's is 1000, a number out of
//! `f64`'s range, a lone surrogate, bytes after a NUL), and when a value the
//! read needs is a float, an integer past `i64`, or (for a text field) an
//! object or array, which `json_extract` returns as its own minified text.
//! So the row is skipped as malformed exactly when `json_valid(data)` is
//! false, and every cell is the one the query gave; the module's proptest
//! keeps the query as the oracle.
//!
//! One deliberate difference: where the query handed back text that is not
//! UTF-8 for a row it kept (an id, a thread id or a field; a lone surrogate
//! escape unescapes to such bytes), converting it ended the whole read with
//! an error, on every scan, for that one row. Such a row is now skipped and
//! counted as malformed.

mod plain;

use std::borrow::Cow;

use rusqlite::Connection;
use rusqlite::types::ValueRef;
use serde::de::{self, Deserialize, DeserializeSeed, Deserializer, Visitor};

/// `data`'s JSON, judged and extracted by SQLite itself, with the query's
/// expressions (`?1` is the row's `data`, bound as it was stored): whether
/// it is malformed, the five fields, whether the call failed, whether it is
/// still pending.
pub(super) const BY_SQLITE: &str = "
SELECT d IS NULL,
       json_extract(d, '$.turnId'), json_extract(d, '$.from.botId'),
       json_extract(d, '$.tool.name'), json_extract(d, '$.tool.output'),
       json_extract(d, '$.tool.exitCode'),
       COALESCE(json_extract(d, '$.tool.ok') = 0, 0),
       COALESCE(d IS NOT NULL AND json_extract(d, '$.tool.ok') IS NULL AND json_type(d, '$.tool') = 'object', 0)
FROM (SELECT CASE WHEN json_valid(?1) THEN ?1 END AS d)";

/// The fields a failed call's record takes, as `json_extract` gave them
/// and `text_of` / `int_of` turned them into cells.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct Fields<'a> {
    pub turn_id: Option<Cow<'a, str>>,
    pub bot_id: Option<Cow<'a, str>>,
    pub tool_name: Option<Cow<'a, str>>,
    pub output: Option<Cow<'a, str>>,
    pub exit_code: Option<i64>,
}

/// `fields` with its text copied out of the row it borrows.
pub(super) fn owned(f: Fields<'_>) -> Fields<'static> {
    let own = |c: Option<Cow<'_, str>>| c.map(|c| Cow::Owned(c.into_owned()));
    Fields {
        turn_id: own(f.turn_id),
        bot_id: own(f.bot_id),
        tool_name: own(f.tool_name),
        output: own(f.output),
        exit_code: f.exit_code,
    }
}

/// What one activity row is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Class<'a> {
    /// Not JSON as `json_valid(X)` has it (or null, or a kept row whose
    /// values are not UTF-8): skipped and counted.
    Malformed,
    /// `tool.ok` is 0 in SQLite's terms (`false`, `0`, `0.0`, `-0` ...).
    Failed(Fields<'a>),
    /// A tool object whose `ok` is absent or null: the call is running.
    Pending,
    /// Anything else: a call that succeeded, or no tool call.
    Other,
}

/// Classifies one row's `data`, on the read's handle `conn` when the fast
/// pass leaves it to SQLite.
pub(super) fn classify<'a>(conn: &Connection, data: ValueRef<'a>) -> rusqlite::Result<Class<'a>> {
    if let ValueRef::Null = data {
        return Ok(Class::Malformed);
    }
    if let ValueRef::Text(bytes) = data
        && let Ok(text) = std::str::from_utf8(bytes)
        && let Some(class) = fast(text)
    {
        return Ok(class);
    }
    by_sqlite(conn, data)
}

/// A value at one of the paths, as far as the fast pass takes it.
#[derive(Debug, Default)]
enum Got<'a> {
    #[default]
    Absent,
    Null,
    /// An integer in `i64` (`true` and `false` are 1 and 0, as
    /// `json_extract` returns them).
    Int(i64),
    Text(Cow<'a, str>),
    /// An object or an array: `json_extract` returns its minified text.
    Nested,
    /// A float, or an integer past `i64`: SQLite's number conversion decides.
    Odd,
}

impl<'a> Got<'a> {
    /// As `text_of` turned the extracted value into a text cell; `None`
    /// when only SQLite can say.
    fn text(self) -> Option<Option<Cow<'a, str>>> {
        match self {
            Got::Absent | Got::Null => Some(None),
            Got::Int(i) => Some(Some(Cow::Owned(i.to_string()))),
            Got::Text(s) => Some(Some(s)),
            Got::Nested | Got::Odd => None,
        }
    }
    /// As `int_of` turned it into an exit code (a nested value's text never
    /// parses as an integer).
    fn int(self) -> Option<Option<i64>> {
        match self {
            Got::Absent | Got::Null | Got::Nested => Some(None),
            Got::Int(i) => Some(Some(i)),
            Got::Text(s) => Some(s.trim().parse().ok()),
            Got::Odd => None,
        }
    }
}

/// The paths' values in one object.
#[derive(Default)]
struct Top<'a> {
    turn_id: Option<Got<'a>>,
    /// `$.from.botId`, once `from` was seen.
    bot_id: Option<Got<'a>>,
    /// `$.tool`, once seen: `None` inside when it is not an object.
    tool: Option<Option<Tool<'a>>>,
}

#[derive(Default)]
struct Tool<'a> {
    name: Option<Got<'a>>,
    output: Option<Got<'a>>,
    exit_code: Option<Got<'a>>,
    ok: Option<Got<'a>>,
}

/// The class of `text`, or `None` when SQLite must decide: read by the
/// plain pass ([`plain`]) when `text` has its shape, else by `serde_json`.
fn fast(text: &str) -> Option<Class<'_>> {
    match plain::top(text) {
        Some(top) => class_of(top),
        None => fast_serde(text),
    }
}

/// The class of `text` read by `serde_json`, or `None` when SQLite must decide.
fn fast_serde(text: &str) -> Option<Class<'_>> {
    let mut de = serde_json::Deserializer::from_str(text);
    let top = de.deserialize_any(TopVisitor).ok()?;
    de.end().ok()?;
    class_of(top)
}

/// The class the paths' values give, or `None` when SQLite must decide.
fn class_of(top: Top<'_>) -> Option<Class<'_>> {
    let Some(tool) = top.tool.flatten() else {
        // No tool object: `$.tool.ok` is null and `$.tool` no object.
        return Some(Class::Other);
    };
    match tool.ok.unwrap_or_default() {
        Got::Absent | Got::Null => return Some(Class::Pending),
        Got::Int(0) => {}
        Got::Odd => return None,
        Got::Int(_) | Got::Text(_) | Got::Nested => return Some(Class::Other),
    }
    Some(Class::Failed(Fields {
        turn_id: top.turn_id.unwrap_or_default().text()?,
        bot_id: top.bot_id.unwrap_or_default().text()?,
        tool_name: tool.name.unwrap_or_default().text()?,
        output: tool.output.unwrap_or_default().text()?,
        exit_code: tool.exit_code.unwrap_or_default().int()?,
    }))
}

/// Whether an object's key is the path step `label`, as SQLite compares
/// them: unescaped, and (its quirk) only up to a NUL the key escapes.
fn is(key: &str, label: &str) -> bool {
    key == label || (key.len() > label.len() && key.starts_with(label) && key.as_bytes()[label.len()] == 0)
}

/// An object key, matched against the labels of one level as it is read
/// (borrowed or, escaped, unescaped once by `serde_json`), never kept.
struct Key<const N: usize>(&'static [&'static str; N]);

impl<'de, const N: usize> DeserializeSeed<'de> for Key<N> {
    type Value = Option<usize>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de, const N: usize> Visitor<'de> for Key<N> {
    type Value = Option<usize>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an object key")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(self.0.iter().position(|label| is(v, label)))
    }
}

const TOP_KEYS: &[&str; 3] = &["turnId", "from", "tool"];
const FROM_KEYS: &[&str; 1] = &["botId"];
const TOOL_KEYS: &[&str; 4] = &["name", "output", "exitCode", "ok"];

/// The visitor methods of a value that is not an object, where an object
/// was looked for: it is read over and `$value` returned.
macro_rules! not_an_object {
    ($value:expr) => {
        fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
            SkipVisitor.visit_seq(seq).map(|()| $value)
        }
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($value)
        }
    };
}

/// The whole value: every path is null unless it is an object.
struct TopVisitor;

impl<'de> Visitor<'de> for TopVisitor {
    type Value = Top<'de>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut top = Top::default();
        while let Some(key) = map.next_key_seed(Key(TOP_KEYS))? {
            match key {
                Some(0) if top.turn_id.is_none() => top.turn_id = Some(map.next_value()?),
                Some(1) if top.bot_id.is_none() => top.bot_id = Some(map.next_value_seed(FromVisitor)?),
                Some(2) if top.tool.is_none() => top.tool = Some(map.next_value_seed(ToolVisitor)?),
                _ => map.next_value::<Skip>().map(drop)?,
            }
        }
        Ok(top)
    }
    not_an_object!(Top::default());
}

/// `from`'s value: its `botId`, absent when it is not an object.
struct FromVisitor;

impl<'de> DeserializeSeed<'de> for FromVisitor {
    type Value = Got<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for FromVisitor {
    type Value = Got<'de>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut bot_id = None;
        while let Some(key) = map.next_key_seed(Key(FROM_KEYS))? {
            match key {
                Some(0) if bot_id.is_none() => bot_id = Some(map.next_value()?),
                _ => map.next_value::<Skip>().map(drop)?,
            }
        }
        Ok(bot_id.unwrap_or_default())
    }
    not_an_object!(Got::Absent);
}

/// `tool`'s value: its four fields, `None` when it is not an object.
struct ToolVisitor;

impl<'de> DeserializeSeed<'de> for ToolVisitor {
    type Value = Option<Tool<'de>>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ToolVisitor {
    type Value = Option<Tool<'de>>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut tool = Tool::default();
        while let Some(key) = map.next_key_seed(Key(TOOL_KEYS))? {
            let slot = match key {
                Some(0) => Some(&mut tool.name),
                Some(1) => Some(&mut tool.output),
                Some(2) => Some(&mut tool.exit_code),
                Some(3) => Some(&mut tool.ok),
                _ => None,
            };
            match slot {
                Some(slot) if slot.is_none() => *slot = Some(map.next_value()?),
                _ => map.next_value::<Skip>().map(drop)?,
            }
        }
        Ok(Some(tool))
    }
    not_an_object!(None);
}

impl<'de> Deserialize<'de> for Got<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(GotVisitor)
    }
}

struct GotVisitor;

impl<'de> Visitor<'de> for GotVisitor {
    type Value = Got<'de>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Got::Text(Cow::Borrowed(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Got::Text(Cow::Owned(v.to_owned())))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Got::Int(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(i64::try_from(v).map_or(Got::Odd, Got::Int))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Got::Odd)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Got::Int(i64::from(v)))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Got::Null)
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        SkipVisitor.visit_seq(seq).map(|()| Got::Nested)
    }
    fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        SkipVisitor.visit_map(map).map(|()| Got::Nested)
    }
}

/// A value read over and dropped. Unlike `serde::de::IgnoredAny` (which
/// `serde_json` reads with no depth limit at all) it goes through
/// `deserialize_any`, so nesting past `serde_json`'s limit is an error and
/// SQLite decides the row: accepting what `json_valid` refuses (deeper than
/// 1000) is never possible.
struct Skip;

impl<'de> Deserialize<'de> for Skip {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(SkipVisitor).map(|()| Skip)
    }
}

struct SkipVisitor;

impl<'de> Visitor<'de> for SkipVisitor {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element::<Skip>()?.is_some() {}
        Ok(())
    }
    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_entry::<Skip, Skip>()?.is_some() {}
        Ok(())
    }
}

/// A value `SQLite` handed back for a text cell (`text_of`): `Err` when it
/// is text that is not UTF-8.
fn text_of(v: ValueRef<'_>) -> Result<Option<Cow<'static, str>>, NotUtf8> {
    Ok(match v {
        ValueRef::Null | ValueRef::Blob(_) => None,
        ValueRef::Integer(i) => Some(Cow::Owned(i.to_string())),
        ValueRef::Real(f) => Some(Cow::Owned(f.to_string())),
        ValueRef::Text(t) => Some(Cow::Owned(std::str::from_utf8(t).map_err(|_| NotUtf8)?.to_owned())),
    })
}

/// An exit code as the JSON held it (`int_of`: loosely typed).
fn int_of(v: ValueRef<'_>) -> Result<Option<i64>, NotUtf8> {
    Ok(match v {
        ValueRef::Integer(i) => Some(i),
        ValueRef::Real(f) => Some(f as i64),
        ValueRef::Text(t) => std::str::from_utf8(t).map_err(|_| NotUtf8)?.trim().parse().ok(),
        ValueRef::Null | ValueRef::Blob(_) => None,
    })
}

/// Text that is not UTF-8 where a cell wants text.
#[derive(Debug)]
struct NotUtf8;

enum FieldError {
    Sql(rusqlite::Error),
    NotUtf8,
}

impl From<rusqlite::Error> for FieldError {
    fn from(e: rusqlite::Error) -> Self {
        FieldError::Sql(e)
    }
}

impl From<NotUtf8> for FieldError {
    fn from(_: NotUtf8) -> Self {
        FieldError::NotUtf8
    }
}

/// [`BY_SQLITE`]'s five fields as cells.
fn fields_of(r: &rusqlite::Row<'_>) -> Result<Fields<'static>, FieldError> {
    Ok(Fields {
        turn_id: text_of(r.get_ref(1)?)?,
        bot_id: text_of(r.get_ref(2)?)?,
        tool_name: text_of(r.get_ref(3)?)?,
        output: text_of(r.get_ref(4)?)?,
        exit_code: int_of(r.get_ref(5)?)?,
    })
}

/// The class SQLite's own functions give `data` ([`BY_SQLITE`]). An error
/// of the JSON functions themselves (a blob they call malformed) makes the
/// row malformed, where the query ended the read; any other error (the
/// page's budget ran out) is the read's.
fn by_sqlite(conn: &Connection, data: ValueRef<'_>) -> rusqlite::Result<Class<'static>> {
    let mut stmt = conn.prepare_cached(BY_SQLITE)?;
    let mut rows = stmt.query([rusqlite::types::ToSqlOutput::Borrowed(data)])?;
    let row = match rows.next() {
        Ok(Some(row)) => row,
        Ok(None) => return Ok(Class::Malformed),
        Err(rusqlite::Error::SqliteFailure(e, _)) if e.extended_code == rusqlite::ffi::SQLITE_ERROR => {
            return Ok(Class::Malformed);
        }
        Err(e) => return Err(e),
    };
    if row.get::<_, bool>(0)? {
        return Ok(Class::Malformed);
    }
    let (failed, pending) = (row.get::<_, bool>(6)?, row.get::<_, bool>(7)?);
    if !failed && !pending {
        return Ok(Class::Other);
    }
    match fields_of(row) {
        Ok(fields) if failed => Ok(Class::Failed(fields)),
        Ok(_) => Ok(Class::Pending),
        Err(FieldError::NotUtf8) => Ok(Class::Malformed),
        Err(FieldError::Sql(e)) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rows an application writes are classified by the pass alone;
    /// what it cannot be sure of is left to SQLite (`None`). (That both
    /// agree with the query is `messages_oracle`'s proptest.)
    #[test]
    fn plain_rows_are_classified_without_sqlite_and_odd_ones_left_to_it() {
        let failed =
            r#"{"from":{"botId":"b"},"tool":{"exitCode":2,"name":"bash","ok":false,"output":"e\u00e9"},"turnId":"t"}"#;
        let fields = Fields {
            turn_id: Some("t".into()),
            bot_id: Some("b".into()),
            tool_name: Some("bash".into()),
            output: Some("eé".into()),
            exit_code: Some(2),
        };
        assert_eq!(fast(failed), Some(Class::Failed(fields)));
        assert_eq!(fast(r#"{"tool":{"name":"Read","ok":true,"output":"fine"},"turnId":"t"}"#), Some(Class::Other));
        assert_eq!(fast(r#"{"tool":{"name":"Read","ok":null}}"#), Some(Class::Pending));
        assert_eq!(fast(r#"{"tool":{"name":"Read"}}"#), Some(Class::Pending));
        assert_eq!(fast(r#"{"tool":[{"ok":false}]}"#), Some(Class::Other), "not an object");
        assert_eq!(fast(r#"{"tool":{"ok":true},"tool":{"ok":false}}"#), Some(Class::Other), "the first wins");
        let borrowed = fast(failed);
        let Some(Class::Failed(f)) = &borrowed else { unreachable!() };
        assert!(matches!(f.tool_name, Some(Cow::Borrowed(_))), "no copy of a plain string");
        for odd in [
            r#"{"tool":{"ok":0.0}}"#.to_owned(),
            r#"{"tool":{"ok":false,"exitCode":1.5}}"#.to_owned(),
            r#"{"tool":{"ok":false,"output":{"a":1}}}"#.to_owned(),
            r#"{"tool":{"ok":false,"name":9223372036854775808}}"#.to_owned(),
            format!("{{\"tool\":{{\"ok\":false}},\"x\":{}1{}}}", "[".repeat(129), "]".repeat(129)),
            r#"{"tool":{"ok":false,"name":"\ud800"}}"#.to_owned(),
            r#"{"tool":{"ok":false}} x"#.to_owned(),
            r#"{tool:{ok:false}}"#.to_owned(),
        ] {
            assert_eq!(fast(&odd), None, "{odd}");
        }
    }
}
