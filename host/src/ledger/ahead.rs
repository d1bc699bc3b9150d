//! Segments written ahead: the fire log's segments a scan closes, written to
//! temporary files while its records still flow, and put in place after its
//! commit.
//!
//! At 1 M records a scan seals about 170 k fires (92 MB of lines); exporting
//! their segments after the commit (reading the lines back from the store,
//! writing and syncing 43 files) took about 0.7 s of the scan's tail. The
//! tally's appender hands every line it seals to an [`AheadWriter`], which
//! gathers each segment that starts and closes within the scan (4096
//! entries) and passes it to a thread of its own that writes and syncs it
//! as a temporary file beside the exports. After the commit the export
//! ([`super::Ledger::export_fires`]) renames the ready ones into place and
//! writes the rest (the segment the scan started in the middle of, and the
//! open one, which the commit's own fires may extend) from the store, as it
//! always did.
//!
//! It owns those temporary files: none is put in place before the commit
//! that stores its entries, and every one not put in place is removed (a
//! tally abandoned, a commit that failed). It never decides a line (the
//! appender seals it, in the order the commit moves it into the store) and
//! never fails a scan: a segment it could not write is left to the export.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{SyncSender, sync_channel};
use std::thread::JoinHandle;

use crate::firelog::{SEGMENT_ENTRIES, segment_name};

/// Closed segments waiting for the writing thread, at most (2.2 MB each at
/// 1 M records).
const QUEUED: usize = 2;

/// Gathers a scan's closed segments from the lines its tally seals.
pub(super) struct AheadWriter {
    dir: PathBuf,
    /// The sequence number the next line must have; when a line does not,
    /// gathering stops and the export writes everything from the store.
    next: u64,
    /// The segment being gathered, when it started within this scan:
    /// `(index, lines so far)`.
    gathering: Option<(u64, Vec<u8>)>,
    /// The last segment's size: the next one's buffer starts with room for it.
    last_len: usize,
    writer: Option<Writer>,
}

/// The thread that writes closed segments.
struct Writer {
    tx: SyncSender<(u64, Vec<u8>)>,
    thread: JoinHandle<BTreeMap<u64, PathBuf>>,
}

/// The segments written ahead and synced, by index, for the export to put
/// in place; whatever it does not take is removed when this is dropped.
#[derive(Debug, Default)]
pub(super) struct Ready {
    files: BTreeMap<u64, PathBuf>,
}

impl AheadWriter {
    /// Gathers the segments that start after entry `before` (the fire log's
    /// length when the scan began), into files in `dir`.
    pub(super) fn new(dir: &Path, before: u64) -> Self {
        AheadWriter { dir: dir.to_owned(), next: before + 1, gathering: None, last_len: 0, writer: None }
    }

    /// Takes the line sealed as entry `seq`.
    pub(super) fn push(&mut self, seq: u64, line: &str) {
        if seq != self.next {
            // Not the chain this writer was started on: leave it all to the export.
            self.next = 0;
            self.gathering = None;
            return;
        }
        self.next += 1;
        if (seq - 1).is_multiple_of(SEGMENT_ENTRIES) {
            self.gathering = Some((seq.div_ceil(SEGMENT_ENTRIES), Vec::with_capacity(self.last_len)));
        }
        let Some((index, lines)) = &mut self.gathering else { return };
        lines.extend_from_slice(line.as_bytes());
        lines.push(b'\n');
        if seq.is_multiple_of(SEGMENT_ENTRIES) {
            let index = *index;
            let lines = self.gathering.take().map(|(_, lines)| lines).unwrap_or_default();
            self.last_len = lines.len();
            self.send(index, lines);
        }
    }

    fn send(&mut self, index: u64, lines: Vec<u8>) {
        if self.writer.is_none() {
            self.writer = Writer::spawn(&self.dir);
        }
        let sent = self.writer.as_ref().is_some_and(|w| w.tx.send((index, lines)).is_ok());
        if !sent {
            tracing::debug!(index, "fire log segment left to the export");
        }
    }

    /// Waits for the segments still being written; called once the commit
    /// that stores their entries is durable.
    pub(super) fn finish(mut self) -> Ready {
        Ready { files: self.writer.take().map(Writer::join).unwrap_or_default() }
    }
}

impl Drop for AheadWriter {
    /// Not finished: the scan was not committed, so nothing it wrote ahead
    /// may be put in place.
    fn drop(&mut self) {
        drop(Ready { files: self.writer.take().map(Writer::join).unwrap_or_default() });
    }
}

impl Writer {
    fn spawn(dir: &Path) -> Option<Writer> {
        let (tx, rx) = sync_channel::<(u64, Vec<u8>)>(QUEUED);
        let dir = dir.to_owned();
        let thread = std::thread::Builder::new()
            .name("fire-segments".into())
            .spawn(move || {
                let mut written = BTreeMap::new();
                for (index, lines) in rx {
                    let path = dir.join(format!(".{}.ahead{}", segment_name(index), std::process::id()));
                    match write_synced(&path, &lines) {
                        Ok(()) => {
                            written.insert(index, path);
                        }
                        Err(error) => {
                            let _ = std::fs::remove_file(&path);
                            tracing::debug!(path = %path.display(), %error, "fire log segment left to the export");
                        }
                    }
                }
                written
            })
            .ok()?;
        Some(Writer { tx, thread })
    }

    fn join(self) -> BTreeMap<u64, PathBuf> {
        drop(self.tx);
        self.thread.join().unwrap_or_default()
    }
}

/// A new `0600` file holding `bytes`, synced.
fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = crate::private_fs::create_file(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

impl Ready {
    /// Puts segment `index` in place as `path`, if it was written ahead;
    /// false when it was not (or could not be moved), and the export writes it.
    pub(super) fn put(&mut self, index: u64, path: &Path) -> bool {
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

    fn leftovers(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn only_segments_that_start_and_close_within_the_scan_are_written_ahead() {
        let dir = tempfile::tempdir().unwrap();
        // Entries 3..=13 with four a segment: segment 1 started before the
        // scan, 2 and 3 close within it, 4 is left open.
        let mut ahead = AheadWriter::new(dir.path(), 2);
        for (seq, line) in lines(3, 13) {
            ahead.push(seq, &line);
        }
        let mut ready = ahead.finish();
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
        let mut ahead = AheadWriter::new(dir.path(), 0);
        for (seq, line) in lines(1, 12) {
            ahead.push(seq, &line);
        }
        drop(ahead);
        assert_eq!(leftovers(dir.path()), Vec::<String>::new());
    }

    #[test]
    fn a_break_in_the_chain_leaves_every_later_segment_to_the_export() {
        let dir = tempfile::tempdir().unwrap();
        let mut ahead = AheadWriter::new(dir.path(), 0);
        for (seq, line) in lines(1, 4).into_iter().chain(lines(6, 12)) {
            ahead.push(seq, &line);
        }
        assert_eq!(ahead.finish().files.keys().copied().collect::<Vec<_>>(), vec![1]);
    }

    #[test]
    fn a_segment_that_cannot_be_written_ahead_is_left_to_the_export() {
        let dir = tempfile::tempdir().unwrap();
        // Something already stands where segment 1's file would go.
        std::fs::create_dir(dir.path().join(format!(".{}.ahead{}", segment_name(1), std::process::id()))).unwrap();
        let mut ahead = AheadWriter::new(dir.path(), 0);
        for (seq, line) in lines(1, 8) {
            ahead.push(seq, &line);
        }
        assert_eq!(ahead.finish().files.keys().copied().collect::<Vec<_>>(), vec![2]);
    }
}
