//! Records as JSON rows, both ways: a replay case's batch packed as a source
//! would pack it, and rows of a source's batch written out as a case's.
//!
//! It owns [`CaseBatch`] (one batch of a case: source, kind, declared column
//! types, rows as JSON objects), packing it into a [`Batch`] ([`pack`]) and
//! taking chosen rows of a [`Batch`] back out ([`CaseBatch::of_rows`]). It
//! never reads or writes a file (replay and the regression cases do).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::record::{Batch, BatchBuilder, Cell, Column, ColumnType};

/// One batch of records, rows as JSON objects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseBatch {
    pub source: String,
    pub kind: String,
    /// Column types where inference from the values is not enough.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub columns: serde_json::Map<String, Value>,
    pub rows: Vec<serde_json::Map<String, Value>>,
}

fn type_name(ty: ColumnType) -> &'static str {
    match ty {
        ColumnType::Text => "text",
        ColumnType::Int => "int",
        ColumnType::Float => "float",
        ColumnType::Boolean => "boolean",
    }
}

impl CaseBatch {
    /// Rows `rows` of `batch`, every column's type declared (so the case
    /// packs back into the batch's own shape, nulls included).
    pub fn of_rows(batch: &Batch, rows: &[usize]) -> CaseBatch {
        let columns = batch.columns.iter().map(|c| (c.name.to_string(), Value::from(type_name(c.ty)))).collect();
        let rows = rows
            .iter()
            .map(|&row| {
                let cells = batch.columns.iter().enumerate().map(|(col, c)| {
                    let v = match batch.cell(col, row) {
                        Cell::Null => Value::Null,
                        Cell::Text(t) => Value::from(t),
                        Cell::Int(i) => Value::from(i),
                        Cell::Float(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
                        Cell::Boolean(b) => Value::from(b),
                    };
                    (c.name.to_string(), v)
                });
                cells.collect()
            })
            .collect();
        CaseBatch { source: batch.source.clone(), kind: batch.kind.clone(), columns, rows }
    }
}

fn column_type(
    name: &str,
    declared: &serde_json::Map<String, Value>,
    rows: &[serde_json::Map<String, Value>],
) -> ColumnType {
    match declared.get(name).and_then(Value::as_str) {
        Some("int") => return ColumnType::Int,
        Some("float") => return ColumnType::Float,
        Some("boolean") => return ColumnType::Boolean,
        Some("text") => return ColumnType::Text,
        _ => {}
    }
    let values = rows.iter().filter_map(|r| r.get(name)).filter(|v| !v.is_null());
    let mut ty = None;
    for v in values {
        let this = match v {
            Value::Bool(_) => ColumnType::Boolean,
            Value::Number(n) if n.is_i64() => ColumnType::Int,
            Value::Number(_) => ColumnType::Float,
            _ => ColumnType::Text,
        };
        ty = Some(match (ty, this) {
            (None, t) => t,
            (Some(ColumnType::Int), ColumnType::Float) | (Some(ColumnType::Float), ColumnType::Int) => {
                ColumnType::Float
            }
            (Some(a), b) if a == b => a,
            _ => ColumnType::Text,
        });
    }
    ty.unwrap_or(ColumnType::Text)
}

/// Packs a case batch the way a source would.
pub fn pack(b: &CaseBatch) -> Batch {
    let mut names: Vec<String> = Vec::new();
    for k in b.rows.iter().flat_map(|r| r.keys()) {
        if !names.contains(k) {
            names.push(k.clone());
        }
    }
    let columns: Vec<Column> =
        names.iter().map(|n| Column::named(n.clone(), column_type(n, &b.columns, &b.rows))).collect();
    let mut builder = BatchBuilder::new(&b.source, &b.kind, &columns);
    for row in &b.rows {
        let texts: Vec<Option<String>> = columns
            .iter()
            .map(|c| match row.get(c.name.as_ref()) {
                Some(Value::String(s)) => Some(s.clone()),
                Some(Value::Null) | None => None,
                Some(other) => Some(other.to_string()),
            })
            .collect();
        let cells: Vec<Cell<'_>> = columns
            .iter()
            .zip(&texts)
            .map(|(c, text)| {
                let v = row.get(c.name.as_ref()).unwrap_or(&Value::Null);
                match (c.ty, v) {
                    (_, Value::Null) => Cell::Null,
                    (ColumnType::Text, _) => text.as_deref().map_or(Cell::Null, Cell::Text),
                    (ColumnType::Int, v) => v.as_i64().map_or(Cell::Null, Cell::Int),
                    (ColumnType::Float, v) => v.as_f64().map_or(Cell::Null, Cell::Float),
                    (ColumnType::Boolean, v) => v.as_bool().map_or(Cell::Null, Cell::Boolean),
                }
            })
            .collect();
        // Every cell is of its column's type by construction.
        let _ = builder.push_row(&cells);
    }
    builder.take()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_taken_out_of_a_batch_pack_back_into_the_same_cells() {
        let cols = [Column::text("id"), Column::int("at"), Column::text("output"), Column::int("exit_code")];
        let mut b = BatchBuilder::new("messages", "tool-failure", &cols);
        b.push_row(&[Cell::Text("m1"), Cell::Int(5), Cell::Text("boom"), Cell::Null]).unwrap();
        b.push_row(&[Cell::Text("m2"), Cell::Int(6), Cell::Null, Cell::Int(127)]).unwrap();
        let batch = b.take();
        let case = CaseBatch::of_rows(&batch, &[1]);
        assert_eq!(case.rows.len(), 1);
        assert_eq!(case.rows[0]["id"], "m2");
        let packed = pack(&case);
        for (col, c) in batch.columns.iter().enumerate() {
            let at = packed.columns.iter().position(|p| p.name == c.name).expect("every column kept");
            assert_eq!(packed.columns[at].ty, c.ty, "declared types keep a column of nulls typed");
            assert_eq!(packed.cell(at, 0), batch.cell(col, 1), "{}", c.name);
        }
    }
}
