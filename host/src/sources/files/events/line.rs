//! One line of an event log: a `turn.completed` event, another event, or
//! something that is not an event at all.
//!
//! It owns the line's JSON shape and the record's cells. It never reads a
//! file and never decides whether an event was delivered before.

use std::borrow::Cow;

use serde::de::{self, Deserialize, DeserializeSeed, Deserializer, Visitor};

use crate::model::record::{Cell, Column};

/// The columns of a `turn-completed` record.
pub const TURN_COMPLETED: &[Column] = &[
    Column::text("id"),
    Column::text("thread_id"),
    Column::text("turn_id"),
    Column::text("bot_id"),
    Column::int("created_at"),
    Column::boolean("ok"),
    Column::text("stop_reason"),
    Column::float("cost"),
    Column::text("file"),
];

/// A parsed `turn.completed` line, its text borrowed from the line where
/// it holds no escape.
pub(super) struct Event<'a> {
    pub id: Cow<'a, str>,
    pub thread_id: Option<Cow<'a, str>>,
    pub turn_id: Option<Cow<'a, str>>,
    pub bot_id: Option<Cow<'a, str>>,
    pub created_at: Option<i64>,
    pub ok: Option<bool>,
    pub stop_reason: Option<Cow<'a, str>>,
    pub cost: Option<f64>,
}

pub(super) enum Line<'a> {
    TurnCompleted(Event<'a>),
    Other,
    Malformed,
}

/// A line is an object with a `type`; a `turn.completed` one needs a
/// string `id`; the other fields are taken when their JSON type fits
/// (`createdAt` any number, truncated) and left out otherwise; a key given
/// twice counts by its last value. Anything that is not one JSON object
/// (invalid UTF-8, a number out of range anywhere, trailing bytes) is
/// malformed.
pub(super) fn parse(line: &[u8]) -> Line<'_> {
    let Ok(text) = std::str::from_utf8(line) else { return Line::Malformed };
    let mut de = serde_json::Deserializer::from_str(text);
    let Ok(fields) = de.deserialize_map(FieldsVisitor) else { return Line::Malformed };
    if de.end().is_err() {
        return Line::Malformed;
    }
    if fields.ty.as_ref().and_then(Scalar::as_str) != Some("turn.completed") {
        return Line::Other;
    }
    let Some(id) = fields.id.and_then(Scalar::into_str) else { return Line::Malformed };
    Line::TurnCompleted(Event {
        id,
        thread_id: fields.thread_id.and_then(Scalar::into_str),
        turn_id: fields.turn_id.and_then(Scalar::into_str),
        bot_id: fields.bot_id.and_then(Scalar::into_str),
        created_at: fields.created_at.and_then(|v| v.as_i64()),
        ok: fields.ok.and_then(|v| v.as_bool()),
        stop_reason: fields.stop_reason.and_then(Scalar::into_str),
        cost: fields.cost.and_then(|v| v.as_f64()),
    })
}

/// One JSON value as far as a field needs it: a string (borrowed when it
/// has no escape), a number, a boolean, or something else (null, an array,
/// an object: read to its end, every number in it checked as
/// `serde_json::Value` would).
enum Scalar<'a> {
    Str(Cow<'a, str>),
    I64(i64),
    U64(u64),
    F64(f64),
    Bool(bool),
    Other,
}

impl<'a> Scalar<'a> {
    fn as_str(&self) -> Option<&str> {
        match self {
            Scalar::Str(s) => Some(s),
            _ => None,
        }
    }
    fn into_str(self) -> Option<Cow<'a, str>> {
        match self {
            Scalar::Str(s) => Some(s),
            _ => None,
        }
    }
    /// As `serde_json::Value::as_i64`, then `as_f64` truncated.
    fn as_i64(&self) -> Option<i64> {
        match *self {
            Scalar::I64(i) => Some(i),
            Scalar::U64(u) => Some(i64::try_from(u).unwrap_or(u as f64 as i64)),
            Scalar::F64(f) => Some(f as i64),
            _ => None,
        }
    }
    fn as_f64(&self) -> Option<f64> {
        match *self {
            Scalar::I64(i) => Some(i as f64),
            Scalar::U64(u) => Some(u as f64),
            Scalar::F64(f) => Some(f),
            _ => None,
        }
    }
    fn as_bool(&self) -> Option<bool> {
        match *self {
            Scalar::Bool(b) => Some(b),
            _ => None,
        }
    }
}

impl<'de> Deserialize<'de> for Scalar<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ScalarVisitor)
    }
}

struct ScalarVisitor;

impl<'de> Visitor<'de> for ScalarVisitor {
    type Value = Scalar<'de>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Scalar::Str(Cow::Borrowed(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Scalar::Str(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Scalar::Str(Cow::Owned(v)))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Scalar::I64(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Scalar::U64(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Scalar::F64(v))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Scalar::Bool(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Scalar::Other)
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<Scalar<'de>>()?.is_some() {}
        Ok(Scalar::Other)
    }
    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<de::IgnoredAny, Scalar<'de>>()?.is_some() {}
        Ok(Scalar::Other)
    }
}

/// The fields of a line that a record takes, each by its last value.
#[derive(Default)]
struct Fields<'a> {
    ty: Option<Scalar<'a>>,
    id: Option<Scalar<'a>>,
    thread_id: Option<Scalar<'a>>,
    turn_id: Option<Scalar<'a>>,
    bot_id: Option<Scalar<'a>>,
    created_at: Option<Scalar<'a>>,
    ok: Option<Scalar<'a>>,
    stop_reason: Option<Scalar<'a>>,
    cost: Option<Scalar<'a>>,
}

struct FieldsVisitor;

/// An object key, as the slot of [`Fields`] it names (`None`: a key no
/// record takes), compared unescaped as `serde_json::Value` keys are and
/// read without being copied: `Cow<str>`'s own `Deserialize` always copies.
struct Key<'f, 'de>(&'f mut Fields<'de>);

impl<'f, 'de> DeserializeSeed<'de> for Key<'f, 'de> {
    type Value = Option<&'f mut Option<Scalar<'de>>>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'f, 'de> Visitor<'de> for Key<'f, 'de> {
    type Value = Option<&'f mut Option<Scalar<'de>>>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an object key")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        let f = self.0;
        Ok(Some(match v {
            "type" => &mut f.ty,
            "id" => &mut f.id,
            "threadId" => &mut f.thread_id,
            "turnId" => &mut f.turn_id,
            "botId" => &mut f.bot_id,
            "createdAt" => &mut f.created_at,
            "ok" => &mut f.ok,
            "stopReason" => &mut f.stop_reason,
            "cost" => &mut f.cost,
            _ => return Ok(None),
        }))
    }
}

impl<'de> Visitor<'de> for FieldsVisitor {
    type Value = Fields<'de>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut f = Fields::default();
        while let Some(slot) = map.next_key_seed(Key(&mut f))? {
            let value: Scalar<'de> = map.next_value()?;
            if let Some(slot) = slot {
                *slot = Some(value);
            }
        }
        Ok(f)
    }
}

impl Event<'_> {
    /// The record's cells, in [`TURN_COMPLETED`]'s order; `file` names the log.
    pub(super) fn cells<'a>(&'a self, file: &'a str) -> [Cell<'a>; 9] {
        [
            Cell::Text(&self.id),
            self.thread_id.as_deref().map_or(Cell::Null, Cell::Text),
            self.turn_id.as_deref().map_or(Cell::Null, Cell::Text),
            self.bot_id.as_deref().map_or(Cell::Null, Cell::Text),
            self.created_at.map_or(Cell::Null, Cell::Int),
            self.ok.map_or(Cell::Null, Cell::Boolean),
            self.stop_reason.as_deref().map_or(Cell::Null, Cell::Text),
            self.cost.map_or(Cell::Null, Cell::Float),
            Cell::Text(file),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parse as it was, through `serde_json::Value`: the oracle.
    fn by_value(line: &[u8]) -> Option<Option<Vec<String>>> {
        let text = std::str::from_utf8(line).ok()?;
        let v = serde_json::from_str::<serde_json::Value>(text).ok()?;
        let obj = v.as_object()?;
        let s = |k: &str| obj.get(k).and_then(|x| x.as_str()).map(str::to_owned);
        if obj.get("type").and_then(|t| t.as_str()) != Some("turn.completed") {
            return Some(None);
        }
        let created_at = obj.get("createdAt").and_then(|x| x.as_i64().or_else(|| x.as_f64().map(|f| f as i64)));
        let id = s("id")?;
        Some(Some(vec![
            id,
            format!("{:?}", s("threadId")),
            format!("{:?}", s("turnId")),
            format!("{:?}", s("botId")),
            format!("{created_at:?}"),
            format!("{:?}", obj.get("ok").and_then(|x| x.as_bool())),
            format!("{:?}", s("stopReason")),
            format!("{:?}", obj.get("cost").and_then(|x| x.as_f64())),
        ]))
    }

    fn by_visitor(line: &[u8]) -> Option<Option<Vec<String>>> {
        match parse(line) {
            Line::Malformed => None,
            Line::Other => Some(None),
            Line::TurnCompleted(e) => {
                let own = |c: &Option<Cow<'_, str>>| c.as_deref().map(str::to_owned);
                Some(Some(vec![
                    e.id.into_owned(),
                    format!("{:?}", own(&e.thread_id)),
                    format!("{:?}", own(&e.turn_id)),
                    format!("{:?}", own(&e.bot_id)),
                    format!("{:?}", e.created_at),
                    format!("{:?}", e.ok),
                    format!("{:?}", own(&e.stop_reason)),
                    format!("{:?}", e.cost),
                ]))
            }
        }
    }

    /// A JSON value of the kinds a hostile log holds in a field.
    fn value() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        prop_oneof![
            Just("\"turn.completed\"".to_owned()),
            Just("\"turn.started\"".to_owned()),
            "[a-z]{0,6}".prop_map(|s| format!("\"{s}\"")),
            Just(r#""es\"caped\u00e9\n""#.to_owned()),
            Just(r#""\ud800""#.to_owned()),
            any::<i64>().prop_map(|n| n.to_string()),
            any::<u64>().prop_map(|n| n.to_string()),
            any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| format!("{f:e}")),
            Just("1e400".to_owned()),
            Just("-0.5".to_owned()),
            Just("true".to_owned()),
            Just("null".to_owned()),
            Just("[1, {\"a\": [2e999]}]".to_owned()),
            Just("{\"ok\": false, \"n\": [1, 2]}".to_owned()),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 2000, ..Default::default() })]

        /// The visitor reads every line exactly as parsing it into a
        /// `serde_json::Value` did: the same fields, the same malformed ones.
        #[test]
        fn a_line_parses_as_it_did_through_a_json_value(
            fields in proptest::collection::vec(
                (proptest::sample::select(vec!["type", "id", "threadId", "turnId", "botId", "createdAt", "ok",
                    "stopReason", "cost", "other", "t\\u0079pe"]), value()),
                0..12,
            ),
            shape in 0u8..6,
        ) {
            let body: Vec<String> = fields.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
            let line = match shape {
                0 => format!("[{}]", body.join(",")),
                1 => format!("{{{}}} x", body.join(",")),
                2 => format!("{{{}", body.join(",")),
                3 => format!("  {{{}}}  ", body.join(",")),
                _ => format!("{{{}}}", body.join(",")),
            };
            proptest::prop_assert_eq!(by_visitor(line.as_bytes()), by_value(line.as_bytes()), "{}", line);
        }
    }

    #[test]
    fn odd_lines_parse_as_they_did_through_a_json_value() {
        let lines: &[&[u8]] = &[
            b"",
            b"42",
            b"\"turn.completed\"",
            br#"{"type":"turn.completed"}"#,
            br#"{"type":"turn.completed","id":"a","id":7}"#,
            br#"{"type":"turn.completed","id":7,"id":"a"}"#,
            br#"{"type":"turn.completed","id":"a","createdAt":18446744073709551615}"#,
            br#"{"type":"turn.completed","id":"a","createdAt":9.9e18,"cost":3}"#,
            br#"{"type":"turn.completed","id":"a","x":1e400}"#,
            b"{\"type\":\"turn.completed\",\"id\":\"\xff\"}",
        ];
        for line in lines {
            assert_eq!(by_visitor(line), by_value(line), "{}", String::from_utf8_lossy(line));
        }
    }
}
