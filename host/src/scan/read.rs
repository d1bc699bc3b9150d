//! Reading: the plan's reads, one after the other, on a thread of their own.
//!
//! It owns the reading thread and the small bounded channel (four batches) it
//! feeds, so reading and detecting run on two cores at once and memory stays
//! flat. Each read is one source from one position ([`Unit`]); its batches
//! and its end travel tagged with the read's index. It never calls a
//! detector and never writes: a stop request ends it between batches.

use std::path::Path;
use std::sync::mpsc::{Receiver, sync_channel};
use std::thread::Scope;

use super::plan::Unit;
use crate::model::record::Batch;
use crate::sources::{ReadContext, Source, SourceError, SourceReport};

/// What the reading thread sends.
pub(crate) enum Read {
    Batch(usize, Batch),
    Done(usize, Result<SourceReport, SourceError>),
}

/// What the reading thread needs.
pub(crate) struct Reader<'a> {
    pub units: &'a [Unit],
    pub sources: &'a [Box<dyn Source>],
    pub data_dir: &'a Path,
    pub scan_time: i64,
    pub batch_rows: usize,
    pub stopped: &'a (dyn Fn() -> bool + Sync),
}

impl<'a> Reader<'a> {
    /// Starts the reads on a thread of `scope`; the receiver yields their
    /// batches and ends, in order.
    pub fn spawn<'s>(self, scope: &'s Scope<'s, 'a>) -> Receiver<Read>
    where
        'a: 's,
    {
        let (tx, rx) = sync_channel::<Read>(4);
        scope.spawn(move || {
            for (i, unit) in self.units.iter().enumerate() {
                if (self.stopped)() {
                    return;
                }
                let ctx = ReadContext {
                    data_dir: self.data_dir,
                    scan_time_ms: self.scan_time,
                    batch_rows: self.batch_rows.max(1),
                    cursor: unit.cursor.as_deref(),
                };
                let result = self.sources[unit.source].read(&ctx, &mut |batch| {
                    if (self.stopped)() {
                        return Err("stopped by a signal".to_owned());
                    }
                    tx.send(Read::Batch(i, batch)).map_err(|_| "the scan stopped taking batches".to_owned())
                });
                if tx.send(Read::Done(i, result)).is_err() {
                    return;
                }
            }
        });
        rx
    }
}
