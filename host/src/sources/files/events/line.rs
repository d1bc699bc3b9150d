//! One line of an event log: a `turn.completed` event, another event, or
//! something that is not an event at all.
//!
//! It owns the line's JSON shape and the record's cells. It never reads a
//! file and never decides whether an event was delivered before.

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

/// A parsed `turn.completed` line.
pub(super) struct Event {
    pub id: String,
    pub thread_id: Option<String>,
    pub turn_id: Option<String>,
    pub bot_id: Option<String>,
    pub created_at: Option<i64>,
    pub ok: Option<bool>,
    pub stop_reason: Option<String>,
    pub cost: Option<f64>,
}

pub(super) enum Line {
    TurnCompleted(Event),
    Other,
    Malformed,
}

pub(super) fn parse(line: &[u8]) -> Line {
    let Ok(text) = std::str::from_utf8(line) else { return Line::Malformed };
    let Ok(v) = serde_json::from_str::<serde_json::Value>(text) else { return Line::Malformed };
    let Some(obj) = v.as_object() else { return Line::Malformed };
    let s = |k: &str| obj.get(k).and_then(|x| x.as_str()).map(str::to_owned);
    if obj.get("type").and_then(|t| t.as_str()) != Some("turn.completed") {
        return Line::Other;
    }
    let created_at = obj.get("createdAt").and_then(|x| x.as_i64().or_else(|| x.as_f64().map(|f| f as i64)));
    let Some(id) = s("id") else { return Line::Malformed };
    Line::TurnCompleted(Event {
        id,
        thread_id: s("threadId"),
        turn_id: s("turnId"),
        bot_id: s("botId"),
        created_at,
        ok: obj.get("ok").and_then(|x| x.as_bool()),
        stop_reason: s("stopReason"),
        cost: obj.get("cost").and_then(|x| x.as_f64()),
    })
}

impl Event {
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
