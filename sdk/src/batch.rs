//! Typed access to the packed, columnar batches the host sends.

use crate::__bindings::sentinel::detector::types::{self, ColumnType};

#[derive(Debug, Clone, Copy)]
enum Slot {
    Text(usize),
    Int(usize),
    Float(usize),
}

/// A batch of records of one kind from one source.
///
/// Look columns up once with [`Batch::column`], then read cells by row:
///
/// ```ignore
/// let tool = batch.column("tool_name");
/// for row in 0..batch.rows() {
///     let name = tool.and_then(|c| batch.text(c, row)).unwrap_or("");
/// }
/// ```
/// or, more simply, iterate [`Row`]s with [`Batch::iter`] and read cells by
/// name. That costs a search of the column names for every cell, which a
/// component pays several times over: `queue_wait` and `turn_stop` took about
/// 35% less time per record in a component (355 → 219 and 345 → 225 ns) once
/// they looked columns up once per batch (`cargo xtask bench`). Use rows for small batches and
/// readability, columns in a detector's hot loop.
#[derive(Debug)]
pub struct Batch {
    source: String,
    kind: String,
    names: Vec<String>,
    types: Vec<ColumnType>,
    slots: Vec<Slot>,
    rows: usize,
    text: String,
    text_ends: Vec<u32>,
    ints: Vec<i64>,
    floats: Vec<f64>,
    nulls: Vec<u8>,
}

impl Batch {
    /// Checks the layout once, so cell reads need no further checks than bounds.
    pub(crate) fn new(raw: types::Batch) -> Result<Self, String> {
        let rows = raw.rows as usize;
        let (mut t, mut i, mut f) = (0, 0, 0);
        let mut slots = Vec::with_capacity(raw.columns.len());
        for c in &raw.columns {
            slots.push(match c.ty {
                ColumnType::Text => {
                    t += 1;
                    Slot::Text(t - 1)
                }
                ColumnType::Int | ColumnType::Boolean => {
                    i += 1;
                    Slot::Int(i - 1)
                }
                ColumnType::Float => {
                    f += 1;
                    Slot::Float(f - 1)
                }
            });
        }
        let bad = |what: &str| format!("batch {}/{}: {what}", raw.source, raw.kind);
        if raw.text_ends.len() != t * rows || raw.ints.len() != i * rows || raw.floats.len() != f * rows {
            return Err(bad("cell arrays do not match columns x rows"));
        }
        if raw.nulls.len() < (raw.columns.len() * rows).div_ceil(8) {
            return Err(bad("null bitmap too short"));
        }
        if raw.text_ends.windows(2).any(|w| w[0] > w[1])
            || raw.text_ends.last().is_some_and(|&e| e as usize > raw.text.len())
        {
            return Err(bad("text offsets out of order or out of range"));
        }
        let text = String::from_utf8(raw.text).map_err(|_| bad("text is not UTF-8"))?;
        // Every cell then starts and ends on a character boundary, which is
        // what lets `text` slice without checking again.
        if raw.text_ends.iter().any(|&e| !text.is_char_boundary(e as usize)) {
            return Err(bad("a text offset cuts a character"));
        }
        let types = raw.columns.iter().map(|c| c.ty).collect();
        Ok(Batch {
            source: raw.source,
            kind: raw.kind,
            names: raw.columns.into_iter().map(|c| c.name).collect(),
            types,
            slots,
            rows,
            text,
            text_ends: raw.text_ends,
            ints: raw.ints,
            floats: raw.floats,
            nulls: raw.nulls,
        })
    }

    /// Builds a batch in memory, for tests and replay cases.
    pub fn from_rows(source: &str, kind: &str, columns: &[(&str, ColumnKind)], rows: &[Vec<Value>]) -> Self {
        let n = rows.len();
        let mut text = String::new();
        let (mut text_ends, mut ints, mut floats) = (Vec::new(), Vec::new(), Vec::new());
        let mut nulls = vec![0u8; (columns.len() * n).div_ceil(8)];
        for (c, (_, kind)) in columns.iter().enumerate() {
            for (r, row) in rows.iter().enumerate() {
                let v = &row[c];
                if matches!(v, Value::Null) {
                    let bit = c * n + r;
                    nulls[bit / 8] |= 1 << (bit % 8);
                }
                match kind {
                    ColumnKind::Text => {
                        if let Value::Text(s) = v {
                            text.push_str(s);
                        }
                        text_ends.push(text.len() as u32);
                    }
                    ColumnKind::Int | ColumnKind::Boolean => ints.push(match v {
                        Value::Int(i) => *i,
                        Value::Bool(b) => i64::from(*b),
                        _ => 0,
                    }),
                    ColumnKind::Float => floats.push(match v {
                        Value::Float(x) => *x,
                        _ => 0.0,
                    }),
                }
            }
        }
        let raw = types::Batch {
            source: source.into(),
            kind: kind.into(),
            columns: columns
                .iter()
                .map(|(name, k)| types::Column {
                    name: (*name).into(),
                    ty: match k {
                        ColumnKind::Text => ColumnType::Text,
                        ColumnKind::Int => ColumnType::Int,
                        ColumnKind::Float => ColumnType::Float,
                        ColumnKind::Boolean => ColumnType::Boolean,
                    },
                })
                .collect(),
            rows: n as u32,
            text: text.into_bytes(),
            text_ends,
            ints,
            floats,
            nulls,
        };
        Batch::new(raw).expect("from_rows builds a consistent batch")
    }

    pub fn source(&self) -> &str {
        &self.source
    }
    pub fn kind(&self) -> &str {
        &self.kind
    }
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// True for records of `kind` from `source`.
    pub fn is(&self, source: &str, kind: &str) -> bool {
        self.source == source && self.kind == kind
    }

    /// The index of a column, if the batch has it.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    pub fn is_null(&self, col: usize, row: usize) -> bool {
        let bit = col * self.rows + row;
        self.nulls.get(bit / 8).is_none_or(|b| b & (1 << (bit % 8)) != 0)
    }

    /// A text cell; `None` when null, out of range or not a text column.
    pub fn text(&self, col: usize, row: usize) -> Option<&str> {
        let Slot::Text(t) = *self.slots.get(col)? else {
            return None;
        };
        if row >= self.rows || self.is_null(col, row) {
            return None;
        }
        let idx = t * self.rows + row;
        let end = *self.text_ends.get(idx)? as usize;
        let start = if idx == 0 { 0 } else { self.text_ends[idx - 1] as usize };
        // SAFETY: `Batch::new` checked that the ends are in order, within the
        // text, and each on a character boundary; `start` is the previous end
        // (or 0), so `start..end` is a valid range of whole characters. The
        // checked `str::get` this replaces was the most expensive part of a
        // cell read in a component (its boundary checks are branches, and
        // each branch costs fuel): docs/benchmarks.md.
        Some(unsafe { self.text.get_unchecked(start..end) })
    }

    /// An int cell (booleans read as 0 or 1).
    pub fn int(&self, col: usize, row: usize) -> Option<i64> {
        let Slot::Int(i) = *self.slots.get(col)? else {
            return None;
        };
        if row >= self.rows || self.is_null(col, row) {
            return None;
        }
        Some(self.ints[i * self.rows + row])
    }

    /// A time in ms: an int cell, or a finite float cell truncated to whole
    /// ms (a source that writes `1791895722799.0`); `None` otherwise.
    pub fn time(&self, col: usize, row: usize) -> Option<i64> {
        let f = match *self.slots.get(col)? {
            Slot::Int(_) => return self.int(col, row),
            Slot::Float(_) => self.float(col, row)?,
            Slot::Text(_) => return None,
        };
        // `i64::MAX as f64` rounds up to 2^63, itself out of range.
        (f.is_finite() && f >= i64::MIN as f64 && f < i64::MAX as f64).then_some(f as i64)
    }

    /// A float cell; int columns are widened.
    pub fn float(&self, col: usize, row: usize) -> Option<f64> {
        match *self.slots.get(col)? {
            Slot::Float(f) if row < self.rows && !self.is_null(col, row) => Some(self.floats[f * self.rows + row]),
            Slot::Int(_) => self.int(col, row).map(|i| i as f64),
            _ => None,
        }
    }

    pub fn boolean(&self, col: usize, row: usize) -> Option<bool> {
        if self.types.get(col) != Some(&ColumnType::Boolean) {
            return None;
        }
        self.int(col, row).map(|i| i != 0)
    }

    /// Rows, for code that prefers reading by column name.
    pub fn iter(&self) -> impl Iterator<Item = Row<'_>> {
        (0..self.rows).map(move |index| Row { batch: self, index })
    }
}

/// One row of a [`Batch`], read by column name.
#[derive(Debug, Clone, Copy)]
pub struct Row<'a> {
    batch: &'a Batch,
    index: usize,
}

impl<'a> Row<'a> {
    pub fn index(&self) -> usize {
        self.index
    }
    pub fn text(&self, name: &str) -> Option<&'a str> {
        self.batch.text(self.batch.column(name)?, self.index)
    }
    pub fn int(&self, name: &str) -> Option<i64> {
        self.batch.int(self.batch.column(name)?, self.index)
    }
    pub fn float(&self, name: &str) -> Option<f64> {
        self.batch.float(self.batch.column(name)?, self.index)
    }
    pub fn boolean(&self, name: &str) -> Option<bool> {
        self.batch.boolean(self.batch.column(name)?, self.index)
    }
}

/// Column types for [`Batch::from_rows`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnKind {
    Text,
    Int,
    Float,
    Boolean,
}

/// Cell values for [`Batch::from_rows`].
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Text(String),
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Text(s.into())
    }
}
impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::Int(i)
    }
}
impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(o: Option<T>) -> Self {
        o.map_or(Value::Null, Into::into)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_read_back_by_column_and_row_with_nulls() {
        let b = Batch::from_rows(
            "messages",
            "tool-failure",
            &[("id", ColumnKind::Text), ("at", ColumnKind::Int), ("output", ColumnKind::Text)],
            &[vec!["m1".into(), 10.into(), "boom é".into()], vec!["m2".into(), Value::Null, Value::Null]],
        );
        let (id, at, out) = (b.column("id").unwrap(), b.column("at").unwrap(), b.column("output").unwrap());
        assert_eq!(b.text(id, 1), Some("m2"));
        assert_eq!(b.int(at, 0), Some(10));
        assert_eq!(b.int(at, 1), None);
        assert_eq!(b.text(out, 0), Some("boom é"));
        assert_eq!(b.text(out, 1), None);
        assert_eq!(b.text(at, 0), None, "wrong type reads as none");
        let rows: Vec<_> = b.iter().map(|r| r.text("id").unwrap().to_owned()).collect();
        assert_eq!(rows, ["m1", "m2"]);
    }

    #[test]
    fn an_inconsistent_batch_is_refused() {
        let raw = types::Batch {
            source: "s".into(),
            kind: "k".into(),
            columns: vec![types::Column { name: "a".into(), ty: ColumnType::Text }],
            rows: 2,
            text: b"ab".to_vec(),
            text_ends: vec![1],
            ints: vec![],
            floats: vec![],
            nulls: vec![0],
        };
        assert!(Batch::new(raw).is_err());
    }

    #[test]
    fn an_offset_inside_a_character_is_refused() {
        let raw = types::Batch {
            source: "s".into(),
            kind: "k".into(),
            columns: vec![types::Column { name: "a".into(), ty: ColumnType::Text }],
            rows: 2,
            text: "éa".as_bytes().to_vec(),
            text_ends: vec![1, 3],
            ints: vec![],
            floats: vec![],
            nulls: vec![0],
        };
        assert!(Batch::new(raw).unwrap_err().contains("cuts a character"));
    }

    /// A raw batch as a hostile or buggy host might send it: any column types,
    /// any row count, and cell arrays of any length (often, but not always,
    /// the right one), offsets in any order, bytes that may not be UTF-8.
    fn raw_batch() -> impl proptest::strategy::Strategy<Value = types::Batch> {
        use proptest::prelude::*;
        let ty = prop_oneof![
            Just(ColumnType::Text),
            Just(ColumnType::Int),
            Just(ColumnType::Float),
            Just(ColumnType::Boolean)
        ];
        (proptest::collection::vec(ty, 0..5), 0u32..6, any::<bool>()).prop_flat_map(|(types, rows, exact)| {
            let n = rows as usize;
            let count = |pred: fn(&ColumnType) -> bool| types.iter().filter(|t| pred(t)).count() * n;
            let t = count(|t| matches!(t, ColumnType::Text));
            let i = count(|t| matches!(t, ColumnType::Int | ColumnType::Boolean));
            let f = count(|t| matches!(t, ColumnType::Float));
            let len = move |k: usize| if exact { k..k + 1 } else { 0..k + 3 };
            let columns: Vec<types::Column> =
                types.iter().enumerate().map(|(c, ty)| types::Column { name: format!("c{c}"), ty: *ty }).collect();
            (
                Just(columns),
                Just(rows),
                // Random bytes (mostly not UTF-8), or text with multi-byte
                // characters whose offsets may cut one.
                prop_oneof![
                    proptest::collection::vec(any::<u8>(), 0..24),
                    "[a-zé€😀]{0,8}".prop_map(String::into_bytes)
                ],
                proptest::collection::vec(0u32..30, len(t)).prop_map(move |mut ends| {
                    if exact {
                        ends.sort();
                    }
                    ends
                }),
                proptest::collection::vec(any::<i64>(), len(i)),
                proptest::collection::vec(any::<f64>(), len(f)),
                proptest::collection::vec(any::<u8>(), 0..4),
            )
                .prop_map(|(columns, rows, text, text_ends, ints, floats, nulls)| types::Batch {
                    source: "s".into(),
                    kind: "k".into(),
                    columns,
                    rows,
                    text,
                    text_ends,
                    ints,
                    floats,
                    nulls,
                })
        })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 512, ..Default::default() })]

        /// The decoder refuses what is inconsistent, and a batch it accepts
        /// answers every cell read, in range or not, without panicking.
        #[test]
        fn any_raw_batch_is_refused_or_reads_without_panicking(raw in raw_batch()) {
            let columns = raw.columns.len();
            let (bytes, ends) = (raw.text.clone(), raw.text_ends.clone());
            if let Ok(b) = Batch::new(raw) {
                // Every cell reads as exactly its bytes, checked the slow way.
                for (i, &end) in ends.iter().enumerate() {
                    let start = if i == 0 { 0 } else { ends[i - 1] as usize };
                    let (col, row) = (i / b.rows.max(1), i % b.rows.max(1));
                    let text_col = b.slots.iter().enumerate().filter(|(_, s)| matches!(s, Slot::Text(_))).nth(col);
                    if let Some((c, _)) = text_col && !b.is_null(c, row) {
                        let expected = std::str::from_utf8(&bytes[start..end as usize]).ok();
                        proptest::prop_assert_eq!(b.text(c, row), expected);
                    }
                }
                for col in 0..columns + 2 {
                    for row in 0..b.rows() + 2 {
                        let _ = (b.is_null(col, row), b.text(col, row), b.int(col, row));
                        let _ = (b.float(col, row), b.boolean(col, row));
                    }
                }
                for r in b.iter() {
                    let _ = (r.text("c0"), r.int("c1"), r.float("c2"), r.boolean("c3"));
                }
            }
        }
    }
}
