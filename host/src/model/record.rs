//! Records as they cross into detectors: packed, columnar batches.
//!
//! A [`Batch`] holds rows of one kind from one source, laid out exactly as the
//! WIT `batch` record describes (all text in one byte buffer with end offsets,
//! integers and floats in one column array each, a null bitmap), so handing it
//! to a component is a few copies whatever its row count. Sources build
//! batches with [`BatchBuilder`]; the runtime moves them across. This module
//! knows nothing of where rows come from or who reads them.

use std::borrow::Cow;

/// The type of a column, mirroring the WIT `column-type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    Text,
    Int,
    Float,
    Boolean,
}

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

/// A named, typed column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    pub name: Cow<'static, str>,
    pub ty: ColumnType,
}

impl Column {
    /// A column whose name is known only at run time.
    pub fn named(name: String, ty: ColumnType) -> Self {
        Column { name: Cow::Owned(name), ty }
    }
    pub const fn text(name: &'static str) -> Self {
        Column { name: Cow::Borrowed(name), ty: ColumnType::Text }
    }
    pub const fn int(name: &'static str) -> Self {
        Column { name: Cow::Borrowed(name), ty: ColumnType::Int }
    }
    pub const fn float(name: &'static str) -> Self {
        Column { name: Cow::Borrowed(name), ty: ColumnType::Float }
    }
    pub const fn boolean(name: &'static str) -> Self {
        Column { name: Cow::Borrowed(name), ty: ColumnType::Boolean }
    }
}

/// One cell handed to [`BatchBuilder::push_row`].
#[derive(Debug, Clone, PartialEq)]
pub enum Cell<'a> {
    Null,
    Text(&'a str),
    Int(i64),
    Float(f64),
    Boolean(bool),
}

/// A finished batch, in the WIT layout.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    pub source: String,
    pub kind: String,
    pub columns: Vec<Column>,
    pub rows: u32,
    pub text: Vec<u8>,
    pub text_ends: Vec<u32>,
    pub ints: Vec<i64>,
    pub floats: Vec<f64>,
    pub nulls: Vec<u8>,
}

impl Batch {
    /// The first text column's cells, in row order (the id column of every
    /// source's batch): what the sources' own tests read back.
    #[cfg(test)]
    pub(crate) fn first_texts(&self) -> Vec<String> {
        let mut start = 0usize;
        let ends = &self.text_ends[..(self.rows as usize).min(self.text_ends.len())];
        ends.iter()
            .map(|&end| {
                let cell = String::from_utf8_lossy(&self.text[start..end as usize]).into_owned();
                start = end as usize;
                cell
            })
            .collect()
    }
}

impl Batch {
    /// The cell at column `col`, row `row` (`Cell::Null` out of range), read
    /// back from the packed layout as the builder wrote it.
    pub fn cell(&self, col: usize, row: usize) -> Cell<'_> {
        let rows = self.rows as usize;
        let (Some(column), true) = (self.columns.get(col), row < rows) else { return Cell::Null };
        let bit = col * rows + row;
        if self.nulls.get(bit / 8).is_some_and(|b| b & (1 << (bit % 8)) != 0) {
            return Cell::Null;
        }
        let before = |ty: fn(ColumnType) -> bool| self.columns[..col].iter().filter(|c| ty(c.ty)).count();
        match column.ty {
            ColumnType::Text => {
                let at = before(|t| t == ColumnType::Text) * rows + row;
                let start = if at == 0 { 0 } else { self.text_ends.get(at - 1).copied().unwrap_or(0) as usize };
                let end = self.text_ends.get(at).copied().unwrap_or(0) as usize;
                self.text.get(start..end).and_then(|b| std::str::from_utf8(b).ok()).map_or(Cell::Null, Cell::Text)
            }
            ColumnType::Int | ColumnType::Boolean => {
                let at = before(|t| matches!(t, ColumnType::Int | ColumnType::Boolean)) * rows + row;
                let v = self.ints.get(at).copied().unwrap_or(0);
                if column.ty == ColumnType::Boolean { Cell::Boolean(v != 0) } else { Cell::Int(v) }
            }
            ColumnType::Float => {
                let at = before(|t| t == ColumnType::Float) * rows + row;
                Cell::Float(self.floats.get(at).copied().unwrap_or(0.0))
            }
        }
    }
}

/// Which typed array a column lives in, and its position there.
#[derive(Debug, Clone, Copy)]
enum Slot {
    Text(usize),
    Int(usize),
    Float(usize),
}

/// Builds a [`Batch`] row by row, keeping the cells column-major.
#[derive(Debug)]
pub struct BatchBuilder {
    source: String,
    kind: String,
    columns: Vec<Column>,
    slots: Vec<Slot>,
    /// Per text column, its cells' text, one string per column.
    text_cols: Vec<Vec<u8>>,
    text_col_ends: Vec<Vec<u32>>,
    int_cols: Vec<Vec<i64>>,
    float_cols: Vec<Vec<f64>>,
    null_cols: Vec<Vec<bool>>,
    rows: u32,
    bytes: usize,
}

/// A row whose cells do not match the batch's columns: a bug in a source.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("row for {source_name}/{kind} does not fit column {column}: expected {expected:?}, got {got}")]
pub struct ShapeError {
    pub source_name: String,
    pub kind: String,
    pub column: String,
    pub expected: ColumnType,
    pub got: String,
}

impl BatchBuilder {
    pub fn new(source: &str, kind: &str, columns: &[Column]) -> Self {
        let mut slots = Vec::with_capacity(columns.len());
        let (mut t, mut i, mut f) = (0, 0, 0);
        for c in columns {
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
        BatchBuilder {
            source: source.to_owned(),
            kind: kind.to_owned(),
            columns: columns.to_vec(),
            slots,
            text_cols: vec![Vec::new(); t],
            text_col_ends: vec![Vec::new(); t],
            int_cols: vec![Vec::new(); i],
            float_cols: vec![Vec::new(); f],
            null_cols: vec![Vec::new(); columns.len()],
            rows: 0,
            bytes: 0,
        }
    }

    /// Rows pushed so far.
    pub fn rows(&self) -> u32 {
        self.rows
    }

    /// Approximate payload size so far, to bound batches by bytes as well as rows.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Appends one row; `cells` are in column order.
    pub fn push_row(&mut self, cells: &[Cell<'_>]) -> Result<(), ShapeError> {
        assert_eq!(cells.len(), self.columns.len(), "a row has one cell per column");
        // Check the whole row first so a bad row leaves the batch untouched.
        for (c, cell) in cells.iter().enumerate() {
            let ty = self.columns[c].ty;
            let ok = matches!(
                (ty, cell),
                (_, Cell::Null)
                    | (ColumnType::Text, Cell::Text(_))
                    | (ColumnType::Int, Cell::Int(_))
                    | (ColumnType::Float, Cell::Float(_))
                    | (ColumnType::Float, Cell::Int(_))
                    | (ColumnType::Boolean, Cell::Boolean(_))
            );
            if !ok {
                return Err(ShapeError {
                    source_name: self.source.clone(),
                    kind: self.kind.clone(),
                    column: self.columns[c].name.to_string(),
                    expected: ty,
                    got: format!("{cell:?}"),
                });
            }
        }
        for (c, cell) in cells.iter().enumerate() {
            self.null_cols[c].push(matches!(cell, Cell::Null));
            match self.slots[c] {
                Slot::Text(t) => {
                    if let Cell::Text(s) = cell {
                        self.text_cols[t].extend_from_slice(s.as_bytes());
                        self.bytes += s.len();
                    }
                    let end = u32::try_from(self.text_cols[t].len()).unwrap_or(u32::MAX);
                    self.text_col_ends[t].push(end);
                }
                Slot::Int(i) => {
                    let v = match cell {
                        Cell::Int(v) => *v,
                        Cell::Boolean(b) => i64::from(*b),
                        _ => 0,
                    };
                    self.int_cols[i].push(v);
                    self.bytes += 8;
                }
                Slot::Float(f) => {
                    let v = match cell {
                        Cell::Float(v) => *v,
                        Cell::Int(v) => *v as f64,
                        _ => 0.0,
                    };
                    self.float_cols[f].push(v);
                    self.bytes += 8;
                }
            }
        }
        self.rows += 1;
        Ok(())
    }

    /// Finishes the batch and resets the builder for the next one.
    pub fn take(&mut self) -> Batch {
        let rows = self.rows;
        let total_text: usize = self.text_cols.iter().map(Vec::len).sum();
        let mut text = Vec::with_capacity(total_text);
        let mut text_ends = Vec::with_capacity(self.text_cols.len() * rows as usize);
        for (col, ends) in self.text_cols.iter_mut().zip(self.text_col_ends.iter_mut()) {
            let base = u32::try_from(text.len()).unwrap_or(u32::MAX);
            text.extend_from_slice(col);
            text_ends.extend(ends.iter().map(|e| base + e));
            col.clear();
            ends.clear();
        }
        let mut ints = Vec::with_capacity(self.int_cols.len() * rows as usize);
        for col in &mut self.int_cols {
            ints.append(col);
        }
        let mut floats = Vec::with_capacity(self.float_cols.len() * rows as usize);
        for col in &mut self.float_cols {
            floats.append(col);
        }
        let cells = self.columns.len() * rows as usize;
        let mut nulls = vec![0u8; cells.div_ceil(8)];
        let mut bit = 0usize;
        for col in &mut self.null_cols {
            for &is_null in col.iter() {
                if is_null {
                    nulls[bit / 8] |= 1 << (bit % 8);
                }
                bit += 1;
            }
            col.clear();
        }
        self.rows = 0;
        self.bytes = 0;
        Batch {
            source: self.source.clone(),
            kind: self.kind.clone(),
            columns: self.columns.clone(),
            rows,
            text,
            text_ends,
            ints,
            floats,
            nulls,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COLS: &[Column] =
        &[Column::text("id"), Column::int("at"), Column::text("name"), Column::boolean("ok"), Column::float("cost")];

    #[test]
    fn cells_are_packed_column_major_with_running_text_offsets() {
        let mut b = BatchBuilder::new("s", "k", COLS);
        b.push_row(&[Cell::Text("a1"), Cell::Int(5), Cell::Text("x"), Cell::Boolean(true), Cell::Float(1.5)]).unwrap();
        b.push_row(&[Cell::Text("b22"), Cell::Int(7), Cell::Null, Cell::Boolean(false), Cell::Null]).unwrap();
        let batch = b.take();
        assert_eq!(batch.rows, 2);
        assert_eq!(batch.text, b"a1b22x");
        // id column ends at 2 and 5, name column ends at 6 then 6 (null).
        assert_eq!(batch.text_ends, vec![2, 5, 6, 6]);
        assert_eq!(batch.ints, vec![5, 7, 1, 0]);
        assert_eq!(batch.floats, vec![1.5, 0.0]);
        // bits: col2 row1 -> bit 5; col4 row1 -> bit 9.
        assert_eq!(batch.nulls, vec![1 << 5, 1 << 1]);
    }

    #[test]
    fn every_cell_reads_back_as_it_was_pushed() {
        let mut b = BatchBuilder::new("s", "k", COLS);
        let first = [Cell::Text("a1"), Cell::Int(5), Cell::Text("x"), Cell::Boolean(true), Cell::Float(1.5)];
        let second = [Cell::Text("b22"), Cell::Int(7), Cell::Null, Cell::Boolean(false), Cell::Null];
        b.push_row(&first).unwrap();
        b.push_row(&second).unwrap();
        let batch = b.take();
        for (row, cells) in [first, second].iter().enumerate() {
            for (col, cell) in cells.iter().enumerate() {
                assert_eq!(&batch.cell(col, row), cell, "column {col}, row {row}");
            }
        }
        assert_eq!(batch.cell(0, 2), Cell::Null, "past the last row");
    }

    #[test]
    fn take_resets_for_the_next_batch() {
        let mut b = BatchBuilder::new("s", "k", COLS);
        b.push_row(&[Cell::Text("a"), Cell::Int(1), Cell::Text("b"), Cell::Boolean(true), Cell::Float(0.0)]).unwrap();
        let _ = b.take();
        assert!(b.is_empty());
        b.push_row(&[Cell::Text("zz"), Cell::Int(2), Cell::Text("y"), Cell::Boolean(true), Cell::Float(0.0)]).unwrap();
        let batch = b.take();
        assert_eq!(batch.text, b"zzy");
        assert_eq!(batch.text_ends, vec![2, 3]);
    }

    #[test]
    fn a_mistyped_cell_is_refused_and_leaves_the_batch_unchanged() {
        let mut b = BatchBuilder::new("s", "k", COLS);
        let err = b.push_row(&[Cell::Int(1), Cell::Int(1), Cell::Null, Cell::Null, Cell::Null]).unwrap_err();
        assert_eq!(err.column, "id");
        assert!(b.is_empty());
    }
}
