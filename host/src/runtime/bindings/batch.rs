//! A batch at the version edge: converted once into the newest WIT shape,
//! and once more, on first use, into each frozen release's.
//!
//! It owns [`PreparedBatch`]; it never calls a guest (the session does,
//! through the bindings of the detector's version).

use std::fmt;

use super::{since_v0_1_0, types};
use crate::model::record::{Batch, ColumnType};

/// A batch converted once into the WIT shape, ready to push to any number of
/// detectors (converted once more, on first use, for 0.1.0 detectors).
pub struct PreparedBatch {
    pub(crate) inner: types::Batch,
    v0_1_0: std::sync::OnceLock<since_v0_1_0::types::Batch>,
}

impl fmt::Debug for PreparedBatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PreparedBatch")
            .field("source", &self.inner.source)
            .field("kind", &self.inner.kind)
            .field("rows", &self.inner.rows)
            .finish()
    }
}

impl PreparedBatch {
    pub fn new(b: Batch) -> Self {
        let columns = b
            .columns
            .iter()
            .map(|c| types::Column {
                name: c.name.to_string(),
                ty: match c.ty {
                    ColumnType::Text => types::ColumnType::Text,
                    ColumnType::Int => types::ColumnType::Int,
                    ColumnType::Float => types::ColumnType::Float,
                    ColumnType::Boolean => types::ColumnType::Boolean,
                },
            })
            .collect();
        PreparedBatch {
            inner: types::Batch {
                source: b.source,
                kind: b.kind,
                columns,
                rows: b.rows,
                text: b.text,
                text_ends: b.text_ends,
                ints: b.ints,
                floats: b.floats,
                nulls: b.nulls,
            },
            v0_1_0: std::sync::OnceLock::new(),
        }
    }

    /// The batch in the 0.1.0 shape, converted on first use.
    pub(crate) fn v0_1_0(&self) -> &since_v0_1_0::types::Batch {
        self.v0_1_0.get_or_init(|| since_v0_1_0::batch(&self.inner))
    }

    pub fn source(&self) -> &str {
        &self.inner.source
    }
    pub fn kind(&self) -> &str {
        &self.inner.kind
    }
    pub fn rows(&self) -> u32 {
        self.inner.rows
    }
}
