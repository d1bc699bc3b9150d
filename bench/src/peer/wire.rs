//! The host's half of the peer's layouts (the guest's is
//! `bench/peer/abi`): a batch as the lists the guest takes over, and the
//! scan context as one buffer. Owns only encoding, done once per batch
//! before any timing (as `PreparedBatch` is for the component); never
//! calls the guest.

use sentinel_host::model::observation::ConfigValue;
use sentinel_host::model::record::{Batch, ColumnType};

/// One list to copy into guest memory: its bytes (little-endian, as the
/// canonical ABI lays lists out), its alignment and its length in elements.
#[derive(Debug, Clone)]
pub struct List {
    pub bytes: Vec<u8>,
    pub align: u32,
    pub len: u32,
}

impl List {
    fn of<T: Copy>(items: &[T], to_le: impl Fn(T) -> Vec<u8>, align: u32) -> Self {
        List { bytes: items.iter().flat_map(|&x| to_le(x)).collect(), align, len: items.len() as u32 }
    }
    fn bytes(b: &[u8]) -> Self {
        List { bytes: b.to_vec(), align: 1, len: b.len() as u32 }
    }
}

/// A batch ready to write into a peer: its lists in the descriptor's order
/// (`source, kind, text, text_ends, ints, floats, nulls`), each column's
/// name and type code, and its row count.
#[derive(Debug, Clone)]
pub struct PeerBatch {
    pub rows: u32,
    pub columns: Vec<(List, u32)>,
    pub lists: [List; 7],
}

impl PeerBatch {
    pub fn new(b: &Batch) -> Self {
        let columns = b
            .columns
            .iter()
            .map(|c| {
                let ty = match c.ty {
                    ColumnType::Text => 0,
                    ColumnType::Int => 1,
                    ColumnType::Float => 2,
                    ColumnType::Boolean => 3,
                };
                (List::bytes(c.name.as_bytes()), ty)
            })
            .collect();
        PeerBatch {
            rows: b.rows,
            columns,
            lists: [
                List::bytes(b.source.as_bytes()),
                List::bytes(b.kind.as_bytes()),
                List::bytes(&b.text),
                List::of(&b.text_ends, |x: u32| x.to_le_bytes().to_vec(), 4),
                List::of(&b.ints, |x: i64| x.to_le_bytes().to_vec(), 8),
                List::of(&b.floats, |x: f64| x.to_le_bytes().to_vec(), 8),
                List::bytes(&b.nulls),
            ],
        }
    }
}

/// The scan context in the guest's layout (`peer_abi::decode_context`).
pub fn context(scan_time_ms: i64, window_start_ms: i64, config: &[(String, ConfigValue)]) -> List {
    let mut out = Vec::new();
    out.extend(scan_time_ms.to_le_bytes());
    out.extend(window_start_ms.to_le_bytes());
    out.extend((config.len() as u32).to_le_bytes());
    let string = |out: &mut Vec<u8>, s: &str| {
        out.extend((s.len() as u32).to_le_bytes());
        out.extend(s.as_bytes());
    };
    for (name, value) in config {
        string(&mut out, name);
        match value {
            ConfigValue::Boolean(b) => out.extend([0, u8::from(*b)]),
            ConfigValue::Integer(i) => {
                out.push(1);
                out.extend(i.to_le_bytes());
            }
            ConfigValue::Float(f) => {
                out.push(2);
                out.extend(f.to_bits().to_le_bytes());
            }
            ConfigValue::Text(t) => {
                out.push(3);
                string(&mut out, t);
            }
            ConfigValue::DurationMs(d) => {
                out.push(4);
                out.extend(d.to_le_bytes());
            }
        }
    }
    out.push(0); // no state
    List::bytes(&out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sentinel_host::model::record::Column;

    #[test]
    fn a_batch_is_laid_out_as_the_guest_takes_it() {
        let b = Batch {
            source: "events".into(),
            kind: "turn".into(),
            columns: vec![Column::text("id"), Column::named("n".into(), ColumnType::Int)],
            rows: 1,
            text: b"e1".to_vec(),
            text_ends: vec![2],
            ints: vec![-2],
            floats: vec![],
            nulls: vec![0],
        };
        let p = PeerBatch::new(&b);
        assert_eq!(p.columns[1].1, 1);
        assert_eq!(p.lists[3].bytes, 2u32.to_le_bytes());
        assert_eq!((p.lists[4].bytes.as_slice(), p.lists[4].align, p.lists[4].len), (&(-2i64).to_le_bytes()[..], 8, 1));
        assert_eq!(p.lists[5].len, 0);
        let ctx = context(7, 0, &[("k".into(), ConfigValue::Boolean(true))]);
        assert_eq!((ctx.len, ctx.align), (8 + 8 + 4 + 4 + 1 + 2 + 1, 1));
    }
}
