//! `events/*.ndjson`: append-only event logs that get rotated, rewritten,
//! truncated and deleted while we read them.
//!
//! Each file is read from a byte offset, one complete line at a time (a
//! partial last line is left for the next scan). A file's cursor remembers its
//! offset, a fingerprint of its first line, a checksum of the bytes just
//! before the offset, and the highest `createdAt` delivered from it. A file
//! *continues* a cursor when its first line has that fingerprint and the bytes
//! before that offset are still the same: then reading resumes at the offset.
//! That one content test covers appends, a rename (the file moved and a new
//! one took its path), a copy (copytruncate), inode reuse and two files with
//! identical first lines. A file that continues no cursor is read from the
//! start; when its path had a cursor (the file shrank, was truncated and
//! rewritten, or replaced by a rewrite that keeps its tail), lines whose
//! `createdAt` is not above that path's high-water mark are skipped, because
//! they were delivered before. A cursor no file of the glob continues is
//! followed by its fingerprint among the folder's other files: a file that
//! left the glob by a rename within the folder (logrotate's default
//! `th.ndjson` → `th.ndjson.1`, a new `th.ndjson` created) is read on from
//! where the cursor stopped, and followed (under its new name, through
//! further renames) for as long as it is in the folder, since its writer may
//! still append to it until it reopens. A cursor no file continues at all is
//! dropped. Malformed lines, invalid UTF-8 and over-long lines are
//! skipped and counted. Nothing is ever written next to the logs. A matching
//! entry that is not a regular file (a FIFO, a socket, a device, a folder) or
//! is a symbolic link is never read: it is skipped, counted and named in a
//! warning ([`super::safe_fs`]).
//!
//! The parts, as Vector's file source keeps them apart: [`fingerprint`]
//! (what identifies a file), [`matching`] (which cursor each file
//! continues), [`file_read`] (one file read from an offset) and [`line`]
//! (one line's shape).

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::glob::glob_match;
use crate::model::record::BatchBuilder;
use crate::sources::{ReadContext, Sink, Source, SourceError, SourceReport};

mod file_read;
mod fingerprint;
mod line;
mod matching;

pub use line::TURN_COMPLETED;

/// Reads `turn.completed` events from NDJSON logs matching a glob.
#[derive(Debug, Clone)]
pub struct EventsSource {
    pub name: String,
    /// Folder (relative to the data dir unless absolute) and file-name pattern,
    /// with `*` matching any run of characters: `events` and `*.ndjson`.
    pub dir: PathBuf,
    pub pattern: String,
    /// Lines longer than this are skipped and counted.
    pub max_line_bytes: usize,
}

impl Default for EventsSource {
    fn default() -> Self {
        EventsSource {
            name: "events".into(),
            dir: PathBuf::from("events"),
            pattern: "*.ndjson".into(),
            max_line_bytes: 1 << 20,
        }
    }
}

/// One file's cursor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileCursor {
    /// Bytes consumed: always just after a newline.
    pub offset: u64,
    /// Hex of the first 8 bytes of sha256 of the first line.
    pub fingerprint: String,
    /// Hex of the first 8 bytes of sha256 of the (up to) 64 bytes before `offset`.
    pub tail: String,
}

/// The source's cursor: one entry per file name, one high-water mark per thread.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventsCursor {
    pub files: BTreeMap<String, FileCursor>,
    /// The highest `createdAt` delivered, by `threadId` (`""` for lines without one).
    #[serde(default)]
    pub threads: BTreeMap<String, i64>,
}

/// Counts of one scan, summed over files.
#[derive(Debug, Default)]
struct Tally {
    records: u64,
    skipped: u64,
}

/// One file opened for this scan: its name in the folder, the open file,
/// its length and the fingerprint of its first line.
struct Opened {
    name: String,
    file: File,
    len: u64,
    fp: Option<String>,
}

/// The glob's files, opened, and the entries refused (named in `warnings`).
struct Listed {
    opened: Vec<Opened>,
    warnings: Vec<String>,
    refused: u64,
}

impl EventsSource {
    fn folder(&self, data_dir: &Path) -> PathBuf {
        if self.dir.is_absolute() { self.dir.clone() } else { data_dir.join(&self.dir) }
    }

    fn err(&self, path: &Path, e: std::io::Error) -> SourceError {
        SourceError::Read { source_name: self.name.clone(), path: path.to_owned(), source: Box::new(e) }
    }

    /// Opens every file of the glob once; a file that vanished since the
    /// listing is skipped. `None`: the folder does not exist.
    fn open_listed(&self, folder: &Path) -> Result<Option<Listed>, SourceError> {
        let entries = match std::fs::read_dir(folder) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(SourceError::Open {
                    source_name: self.name.clone(),
                    path: folder.to_owned(),
                    source: Box::new(e),
                });
            }
        };
        let mut names: Vec<String> = entries
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| glob_match(&self.pattern, n))
            .collect();
        names.sort();
        let mut listed = Listed { opened: Vec::new(), warnings: Vec::new(), refused: 0 };
        for name in names {
            let path = folder.join(&name);
            // Regular files only, never through a link, and no open can block.
            let mut file = match super::safe_fs::open_regular(&path) {
                Ok(f) => f,
                Err(e) if e.is_not_found() => continue,
                Err(e) => {
                    listed.warnings.push(format!("{}: {e}", path.display()));
                    listed.refused += 1;
                    continue;
                }
            };
            let len = file.metadata().map_err(|e| self.err(&path, e))?.len();
            let fp = fingerprint::fingerprint(&mut file).map_err(|e| self.err(&path, e))?;
            listed.opened.push(Opened { name, file, len, fp });
        }
        Ok(Some(listed))
    }

    /// Reads each planned file from its start, into batches for `sink`; the
    /// next cursor. A continuing file delivers everything after its offset.
    /// A file read from its start skips each line at or below its thread's
    /// high-water mark as it was when this scan began: whatever is above it
    /// was never delivered, whichever file it was in and in whatever order
    /// the files are read (files change while a scan runs).
    fn read_planned(
        &self,
        planned: Vec<matching::Planned>,
        previous: &EventsCursor,
        ctx: &ReadContext<'_>,
        sink: &mut Sink<'_>,
        tally: &mut Tally,
    ) -> Result<EventsCursor, SourceError> {
        let mut builder = BatchBuilder::new(&self.name, "turn-completed", TURN_COMPLETED);
        let mut next = EventsCursor { files: BTreeMap::new(), threads: previous.threads.clone() };
        for mut p in planned {
            let Some(fp) = p.opened.fp.clone() else { continue };
            let (from, prev_tail) = match &p.start {
                Some(cur) => (cur.offset, cur.tail.clone()),
                None => (0, String::new()),
            };
            let read = file_read::FileRead {
                source: self,
                name: &p.opened.name,
                fp,
                skip: p.start.is_none().then_some(&previous.threads),
                ctx,
                threads: &mut next.threads,
                builder: &mut builder,
                sink,
                tally,
            };
            match read.read(&mut p.opened.file, from, &prev_tail)? {
                Some(cursor) => {
                    next.files.insert(p.opened.name.clone(), cursor);
                }
                None => {
                    // It changed while read: the cursor it continued (or its
                    // path's) is kept for the next scan.
                    let key = p.origin.as_ref().unwrap_or(&p.opened.name);
                    if let Some(old) = previous.files.get(key) {
                        next.files.insert(key.clone(), old.clone());
                    }
                }
            }
        }
        if !builder.is_empty() {
            sink(builder.take()).map_err(|reason| SourceError::Stopped { source_name: self.name.clone(), reason })?;
        }
        Ok(next)
    }
}

impl Source for EventsSource {
    fn name(&self) -> &str {
        &self.name
    }
    fn kinds(&self) -> &'static [&'static str] {
        &["turn-completed"]
    }

    /// The folder and every entry in it, not only the glob's: a file that
    /// left the glob by a rename is still followed, and its writer may still
    /// append to it.
    fn watch(&self, data_dir: &Path) -> Option<Vec<PathBuf>> {
        let folder = self.folder(data_dir);
        let mut paths = vec![folder.clone()];
        if let Ok(entries) = std::fs::read_dir(&folder) {
            let mut names: Vec<String> =
                entries.filter_map(Result::ok).filter_map(|e| e.file_name().into_string().ok()).collect();
            names.sort();
            paths.extend(names.into_iter().map(|n| folder.join(n)));
        }
        Some(paths)
    }

    fn read(&self, ctx: &ReadContext<'_>, sink: &mut Sink<'_>) -> Result<SourceReport, SourceError> {
        let folder = self.folder(ctx.data_dir);
        let previous: EventsCursor = ctx.cursor.and_then(|c| serde_json::from_str(c).ok()).unwrap_or_default();
        let Some(listed) = self.open_listed(&folder)? else { return Ok(SourceReport::missing(ctx)) };
        let planned = matching::plan(&folder, listed.opened, &previous);
        let mut tally = Tally { skipped: listed.refused, ..Tally::default() };
        let next = self.read_planned(planned, &previous, ctx, sink, &mut tally)?;
        Ok(SourceReport {
            records: tally.records,
            skipped: tally.skipped,
            missing: false,
            cursor: Some(serde_json::to_string(&next).unwrap_or_default()),
            warnings: listed.warnings,
            ..SourceReport::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ids delivered by one read of `dir` from `cursor`, and the next cursor.
    fn read_ids(dir: &Path, cursor: Option<&str>) -> (Vec<String>, Option<String>) {
        let src = EventsSource { max_line_bytes: 200, ..EventsSource::default() };
        let ctx = ReadContext { data_dir: dir, scan_time_ms: 0, batch_rows: 3, cursor };
        let mut ids = Vec::new();
        let report = src
            .read(&ctx, &mut |b| {
                ids.extend(b.first_texts());
                Ok(())
            })
            .unwrap();
        (ids, report.cursor)
    }

    #[test]
    fn a_file_renamed_out_of_the_glob_is_followed_until_its_tail_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let events = dir.path().join("events");
        std::fs::create_dir(&events).unwrap();
        let append = |name: &str, ids: &[u32]| {
            let mut f = std::fs::OpenOptions::new().create(true).append(true).open(events.join(name)).unwrap();
            for id in ids {
                let line = format!(r#"{{"type":"turn.completed","id":"e{id}","threadId":"t","createdAt":{id}}}"#);
                std::io::Write::write_all(&mut f, format!("{line}\n").as_bytes()).unwrap();
            }
        };
        let sorted = |mut v: Vec<String>| {
            v.sort();
            v
        };
        append("a.ndjson", &[1, 2]);
        let (ids, cursor) = read_ids(dir.path(), None);
        assert_eq!(ids, ["e1", "e2"]);
        // Appended, then rotated the logrotate way; the writer still has the
        // old file open and appends once more; a new file is created.
        append("a.ndjson", &[3]);
        std::fs::rename(events.join("a.ndjson"), events.join("a.ndjson.1")).unwrap();
        append("a.ndjson.1", &[4]);
        append("a.ndjson", &[5]);
        let (ids, cursor) = read_ids(dir.path(), cursor.as_deref());
        assert_eq!(sorted(ids), ["e3", "e4", "e5"]);
        append("a.ndjson.1", &[6]);
        append("a.ndjson", &[7]);
        let (ids, cursor) = read_ids(dir.path(), cursor.as_deref());
        assert_eq!(sorted(ids), ["e6", "e7"]);
        // Rotated again: .1 -> .2 (still followed), a.ndjson -> .1.
        append("a.ndjson", &[8]);
        std::fs::rename(events.join("a.ndjson.1"), events.join("a.ndjson.2")).unwrap();
        std::fs::rename(events.join("a.ndjson"), events.join("a.ndjson.1")).unwrap();
        append("a.ndjson.2", &[9]);
        append("a.ndjson", &[10]);
        let (ids, cursor) = read_ids(dir.path(), cursor.as_deref());
        assert_eq!(sorted(ids), ["e10", "e8", "e9"]);
        let (ids, _) = read_ids(dir.path(), cursor.as_deref());
        assert!(ids.is_empty(), "nothing twice: {ids:?}");
    }

    /// One line of a hostile log: a good event, junk, an over-long line,
    /// invalid UTF-8, a CRLF line, or an event with mistyped fields.
    fn line() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        prop_oneof![
            (0u32..1000, 0i64..1_000_000).prop_map(|(id, at)| format!(
                r#"{{"type":"turn.completed","id":"e{id}","threadId":"t","createdAt":{at},"ok":false}}"#
            )
            .into_bytes()),
            proptest::collection::vec(any::<u8>().prop_filter("no newline", |b| *b != b'\n'), 0..40),
            Just(vec![b'x'; 300]),
            Just(b"{\"type\":\"turn.completed\",\"id\":7,\"createdAt\":\"soon\"}".to_vec()),
            Just(b"{\"type\":\"turn.completed\",\"id\":\"crlf\",\"createdAt\":5}\r".to_vec()),
            Just(vec![0xff, 0xfe, b'{']),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 48, ..Default::default() })]

        /// However the log's bytes arrive (appends cut anywhere, partial
        /// lines included), reading after each append delivers exactly what
        /// one read of the whole file delivers, and never panics.
        #[test]
        fn appends_cut_anywhere_deliver_what_one_read_delivers(
            lines in proptest::collection::vec(line(), 0..30),
            cuts in proptest::collection::vec(0usize..2000, 0..6),
        ) {
            let mut bytes = Vec::new();
            for l in &lines {
                bytes.extend_from_slice(l);
                bytes.push(b'\n');
            }
            let whole = tempfile::tempdir().unwrap();
            std::fs::create_dir(whole.path().join("events")).unwrap();
            std::fs::write(whole.path().join("events").join("a.ndjson"), &bytes).unwrap();
            let (expected, _) = read_ids(whole.path(), None);

            let pieces = tempfile::tempdir().unwrap();
            std::fs::create_dir(pieces.path().join("events")).unwrap();
            let path = pieces.path().join("events").join("a.ndjson");
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(bytes.len())).collect();
            cuts.push(bytes.len());
            cuts.sort();
            let (mut got, mut cursor, mut written) = (Vec::new(), None, 0);
            for cut in cuts {
                let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&path).unwrap();
                std::io::Write::write_all(&mut f, &bytes[written..cut]).unwrap();
                written = cut;
                let (ids, next) = read_ids(pieces.path(), cursor.as_deref());
                got.extend(ids);
                cursor = next;
            }
            proptest::prop_assert_eq!(got, expected);
        }
    }
}
