//! Segments written ahead: the fire log's segments a scan closes, written to
//! temporary files while its records still flow, and put in place after its
//! commit.
//!
//! At 1 M records a scan seals about 170 k fires (92 MB of lines); exporting
//! their segments after the commit (reading the lines back from the store,
//! writing and syncing 43 files) took about 0.7 s of the scan's tail. The
//! tally's appender hands every line it seals to an [`AheadWriter`], which
//! writes each segment that starts within the scan to a temporary file
//! beside the exports as its lines come (through a small buffer: nothing
//! of a segment is held in memory) and, once the segment's 4096th entry is
//! in, hands the file to a thread of its own that syncs it. After the
//! commit the export ([`Ledger::export_fires`](crate::ledger::Ledger::export_fires)) renames the synced
//! ones into place and writes the rest (the segment the scan started in the
//! middle of, and the open one, which the commit's own fires may extend)
//! from the store, as it always did.
//!
//! It owns those temporary files: none is put in place before the commit
//! that stores its entries, and every one not put in place is removed (a
//! segment left open, a tally abandoned, a commit that failed). It never
//! decides a line (the appender seals it, in the order the commit moves it
//! into the store) and never fails a scan: a segment it could not write is
//! left to the export.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{SyncSender, sync_channel};
use std::thread::JoinHandle;

use crate::firelog::{SEGMENT_ENTRIES, segment_name};

/// Closed segments waiting for the syncing thread, at most.
const QUEUED: usize = 4;

/// What a segment written ahead is named until the commit puts it in
/// place: `.<segment>` + this + the writer's process id, `-` and a random
/// part (`private_fs::temp_name`).
pub(in crate::ledger) const AHEAD_MARK: &str = ".ahead";

/// Writes a scan's segments from the lines its tally seals.
pub(in crate::ledger) struct AheadWriter {
    dir: PathBuf,
    /// The sequence number the next line must have; when a line does not,
    /// writing ahead stops and the export writes everything from the store.
    next: u64,
    /// The segment being written, when it started within this scan.
    open: Option<Segment>,
    syncer: Option<Syncer>,
}

/// A segment being written ahead.
struct Segment {
    index: u64,
    path: PathBuf,
    file: BufWriter<File>,
}

/// A closed segment's file, written and not yet synced.
struct Closed {
    index: u64,
    path: PathBuf,
    file: File,
}

/// The thread that syncs closed segments.
struct Syncer {
    tx: SyncSender<Closed>,
    thread: JoinHandle<BTreeMap<u64, PathBuf>>,
}

/// The segments written ahead and synced, by index, for the export to put
/// in place; whatever it does not take is removed when this is dropped.
#[derive(Debug, Default)]
pub(in crate::ledger) struct Ready {
    files: BTreeMap<u64, PathBuf>,
}

impl AheadWriter {
    /// Writes the segments that start after entry `before` (the fire log's
    /// length when the scan began), into files in `dir`.
    pub(in crate::ledger) fn new(dir: &Path, before: u64) -> Self {
        AheadWriter { dir: dir.to_owned(), next: before + 1, open: None, syncer: None }
    }

    /// Takes the line sealed as entry `seq`.
    pub(in crate::ledger) fn push(&mut self, seq: u64, line: &str) {
        if seq != self.next {
            // Not the chain this writer was started on: leave it all to the export.
            self.next = 0;
            self.abandon();
            return;
        }
        self.next += 1;
        if (seq - 1).is_multiple_of(SEGMENT_ENTRIES) {
            self.abandon();
            self.open = Segment::create(&self.dir, seq.div_ceil(SEGMENT_ENTRIES));
        }
        let Some(segment) = &mut self.open else { return };
        if let Err(error) = segment.file.write_all(line.as_bytes()).and_then(|()| segment.file.write_all(b"\n")) {
            tracing::debug!(path = %segment.path.display(), %error, "fire log segment left to the export");
            self.abandon();
            return;
        }
        if seq.is_multiple_of(SEGMENT_ENTRIES)
            && let Some(segment) = self.open.take()
        {
            self.close(segment);
        }
    }

    /// Removes the segment being written, if any.
    fn abandon(&mut self) {
        if let Some(segment) = self.open.take() {
            drop(segment.file);
            let _ = std::fs::remove_file(&segment.path);
        }
    }

    /// Hands a segment whose last entry is in to the syncing thread.
    fn close(&mut self, segment: Segment) {
        let Segment { index, path, file } = segment;
        let file = match file.into_inner() {
            Ok(file) => file,
            Err(error) => {
                tracing::debug!(path = %path.display(), error = %error.error(), "fire log segment left to the export");
                let _ = std::fs::remove_file(&path);
                return;
            }
        };
        if self.syncer.is_none() {
            self.syncer = Syncer::spawn();
        }
        let closed = Closed { index, path, file };
        let sent = match &self.syncer {
            Some(syncer) => syncer.tx.send(closed).map_err(|unsent| unsent.0),
            None => Err(closed),
        };
        if let Err(closed) = sent {
            let _ = std::fs::remove_file(&closed.path);
        }
    }

    /// Waits for the segments still being synced; called once the commit
    /// that stores their entries is durable. A segment left open is removed.
    pub(in crate::ledger) fn finish(mut self) -> Ready {
        self.stop()
    }

    /// Removes the segment left open and waits for the syncing thread.
    fn stop(&mut self) -> Ready {
        self.abandon();
        Ready { files: self.syncer.take().map(Syncer::join).unwrap_or_default() }
    }
}

impl Drop for AheadWriter {
    /// Not finished: the scan was not committed, so nothing it wrote ahead
    /// may be put in place (dropping the [`Ready`] removes it).
    fn drop(&mut self) {
        drop(self.stop());
    }
}

impl Segment {
    /// A new `0600` file for segment `index`; `None` (the export writes it)
    /// when it cannot be created.
    fn create(dir: &Path, index: u64) -> Option<Segment> {
        let name = crate::base::private_fs::temp_name(&segment_name(index), AHEAD_MARK);
        let path = match name {
            Ok(name) => dir.join(name),
            Err(error) => {
                tracing::debug!(%error, "fire log segment left to the export");
                return None;
            }
        };
        match crate::base::private_fs::create_file(&path) {
            Ok(file) => Some(Segment { index, path, file: BufWriter::with_capacity(1 << 16, file) }),
            Err(error) => {
                tracing::debug!(path = %path.display(), %error, "fire log segment left to the export");
                None
            }
        }
    }
}

impl Syncer {
    fn spawn() -> Option<Syncer> {
        let (tx, rx) = sync_channel::<Closed>(QUEUED);
        let thread = std::thread::Builder::new()
            .name("fire-segments".into())
            .spawn(move || {
                let mut synced = BTreeMap::new();
                for Closed { index, path, file } in rx {
                    match file.sync_all() {
                        Ok(()) => {
                            synced.insert(index, path);
                        }
                        Err(error) => {
                            let _ = std::fs::remove_file(&path);
                            tracing::debug!(path = %path.display(), %error, "fire log segment left to the export");
                        }
                    }
                }
                synced
            })
            .ok()?;
        Some(Syncer { tx, thread })
    }

    fn join(self) -> BTreeMap<u64, PathBuf> {
        drop(self.tx);
        self.thread.join().unwrap_or_default()
    }
}

impl Ready {
    /// Puts segment `index` in place as `path`, if it was written ahead;
    /// false when it was not (or could not be moved), and the export writes it.
    pub(in crate::ledger) fn put(&mut self, index: u64, path: &Path) -> bool {
        let Some(ahead) = self.files.remove(&index) else { return false };
        match std::fs::rename(&ahead, path) {
            Ok(()) => true,
            Err(error) => {
                tracing::debug!(path = %ahead.display(), %error, "fire log segment left to the export");
                let _ = std::fs::remove_file(&ahead);
                false
            }
        }
    }
}

impl Drop for Ready {
    fn drop(&mut self) {
        for path in self.files.values() {
            let _ = std::fs::remove_file(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(from: u64, to: u64) -> Vec<(u64, String)> {
        (from..=to).map(|seq| (seq, format!("{{\"seq\":{seq}}}"))).collect()
    }

    /// A writer started after entry `before`, fed `lines`.
    fn fed(dir: &Path, before: u64, lines: impl IntoIterator<Item = (u64, String)>) -> AheadWriter {
        let mut ahead = AheadWriter::new(dir, before);
        for (seq, line) in lines {
            ahead.push(seq, &line);
        }
        ahead
    }

    fn leftovers(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn only_segments_that_start_and_close_within_the_scan_are_written_ahead() {
        let dir = tempfile::tempdir().unwrap();
        // Entries 3..=13 with four a segment: segment 1 started before the
        // scan, 2 and 3 close within it, 4 is left open.
        let mut ready = fed(dir.path(), 2, lines(3, 13)).finish();
        assert_eq!(ready.files.keys().copied().collect::<Vec<_>>(), vec![2, 3]);
        let target = dir.path().join(segment_name(2));
        assert!(ready.put(2, &target));
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "{\"seq\":5}\n{\"seq\":6}\n{\"seq\":7}\n{\"seq\":8}\n");
        assert!(!ready.put(1, &dir.path().join(segment_name(1))), "segment 1 is the export's");
        drop(ready);
        assert_eq!(leftovers(dir.path()), vec![segment_name(2)], "segment 3, not taken, is removed");
    }

    #[test]
    fn a_scan_not_committed_leaves_no_segment_written_ahead() {
        let dir = tempfile::tempdir().unwrap();
        drop(fed(dir.path(), 0, lines(1, 12)));
        assert_eq!(leftovers(dir.path()), Vec::<String>::new());
    }

    #[test]
    fn a_break_in_the_chain_leaves_every_later_segment_to_the_export() {
        let dir = tempfile::tempdir().unwrap();
        let ahead = fed(dir.path(), 0, lines(1, 4).into_iter().chain(lines(6, 12)));
        assert_eq!(ahead.finish().files.keys().copied().collect::<Vec<_>>(), vec![1]);
    }

    #[test]
    fn a_segment_that_cannot_be_written_ahead_is_left_to_the_export() {
        let tmp = tempfile::tempdir().unwrap();
        // Segment 1's file cannot be created (its folder is not there yet);
        // segment 2's can.
        let dir = tmp.path().join("later");
        let mut ahead = fed(&dir, 0, lines(1, 4));
        std::fs::create_dir(&dir).unwrap();
        for (seq, line) in lines(5, 8) {
            ahead.push(seq, &line);
        }
        assert_eq!(ahead.finish().files.keys().copied().collect::<Vec<_>>(), vec![2]);
    }
}
