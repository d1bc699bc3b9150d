//! A digest of one append-only file (such as an `index.jsonl`): its size, line
//! count and hash, and whether it only grew since the previous scan.
//!
//! This source owns one file (relative to the data dir unless absolute) and
//! reads it in a single streaming pass of 64 KiB chunks, never holding the
//! whole file in memory. It must never write, create or lock anything it reads,
//! and never follows anything outside what it was configured to read: it opens
//! that one path and nothing else. Its cursor remembers the size, line count and
//! sha256 prefix of the file as it was last time; while streaming, this scan
//! also hashes the first `prev_bytes` bytes, so `appended_only` says whether the
//! old content is still there unchanged. It also keeps the file's identity
//! (its inode, on Unix) and a generation that counts the times the file
//! disappeared or was replaced, so a deletion, a re-creation and another file
//! renamed into place are facts of their own: the scan that first finds the
//! file gone sends one row saying so (`present` false); the scan that finds
//! it back, or finds another file under its name, sends `replaced` true. A
//! missing file is reported, never fatal.

use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::model::record::{BatchBuilder, Cell, Column};
use crate::sources::{ReadContext, Sink, Source, SourceError, SourceReport};

const COLUMNS: &[Column] = &[
    Column::text("path"),
    Column::int("bytes"),
    Column::int("lines"),
    Column::text("sha256_prefix"),
    Column::int("prev_bytes"),
    Column::int("prev_lines"),
    Column::text("prev_sha256_prefix"),
    Column::boolean("appended_only"),
    Column::boolean("present"),
    Column::boolean("replaced"),
    Column::int("generation"),
];

/// Bytes read per `read` call.
const CHUNK: usize = 64 * 1024;

/// What the previous scan saw.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Cursor {
    /// The file's size, bytes.
    bytes: u64,
    /// Its count of `\n`.
    lines: u64,
    /// The first 16 hex chars of the sha256 of the whole file.
    sha256_prefix: String,
    /// The same, over the first `bytes` of the scan before (null when there
    /// was none, or when the file had shrunk below it).
    #[serde(default)]
    prefix_sha256_at_prev_len: Option<String>,
    /// The file's inode when it was read (none where the platform has none).
    #[serde(default)]
    inode: Option<u64>,
    /// The file was gone at the last scan (the other fields are from before).
    #[serde(default)]
    gone: bool,
    /// How many times the file disappeared or was replaced.
    #[serde(default)]
    generation: u64,
}

#[cfg(unix)]
fn inode(meta: &std::fs::Metadata) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    Some(meta.ino())
}

#[cfg(not(unix))]
fn inode(_meta: &std::fs::Metadata) -> Option<u64> {
    None
}

/// Digests one append-only file (`kind = digest`).
#[derive(Debug, Clone)]
pub struct DigestSource {
    /// The name detectors subscribe to.
    pub name: String,
    /// The file, relative to the data dir unless absolute.
    pub path: PathBuf,
}

impl DigestSource {
    pub fn new(name: impl Into<String>, path: impl Into<PathBuf>) -> Self {
        DigestSource { name: name.into(), path: path.into() }
    }

    fn stopped(&self, reason: String) -> SourceError {
        SourceError::Stopped { source_name: self.name.clone(), reason }
    }
}

/// The first 16 hex chars (8 bytes) of a sha256.
fn hex16(hasher: Sha256) -> String {
    hasher.finalize()[..8].iter().map(|b| format!("{b:02x}")).collect()
}

fn as_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// One read of the file: its size, lines and hash, and the hash of its
/// first `prev_len` bytes (the old content, as it reads now).
struct Digested {
    bytes: u64,
    lines: u64,
    sha256_prefix: String,
    /// None if the file shrank below the old length (or there was none).
    head_prefix: Option<String>,
}

impl DigestSource {
    fn digest(&self, mut file: std::fs::File, path: &Path, prev_len: Option<u64>) -> Result<Digested, SourceError> {
        let mut whole = Sha256::new();
        let mut head = Sha256::new();
        let mut bytes = 0u64;
        let mut lines = 0u64;
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = match file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let path = path.to_owned();
                    return Err(SourceError::Read { source_name: self.name.clone(), path, source: Box::new(e) });
                }
            };
            let chunk = &buf[..n];
            whole.update(chunk);
            lines += chunk.iter().filter(|&&b| b == b'\n').count() as u64;
            if let Some(limit) = prev_len
                && bytes < limit
            {
                let take = usize::try_from(limit - bytes).map_or(n, |left| left.min(n));
                head.update(&chunk[..take]);
            }
            bytes += n as u64;
        }
        let head_prefix = match prev_len {
            Some(limit) if bytes >= limit => Some(hex16(head)),
            _ => None,
        };
        Ok(Digested { bytes, lines, sha256_prefix: hex16(whole), head_prefix })
    }
}

impl Source for DigestSource {
    fn evidence_columns(&self) -> &'static [&'static str] {
        &["path"]
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn kinds(&self) -> &'static [&'static str] {
        &["digest"]
    }

    fn watch(&self, data_dir: &std::path::Path) -> Option<Vec<PathBuf>> {
        Some(vec![data_dir.join(&self.path)])
    }

    fn read(&self, ctx: &ReadContext<'_>, sink: &mut Sink<'_>) -> Result<SourceReport, SourceError> {
        let path = ctx.data_dir.join(&self.path);
        // An unreadable cursor counts as no cursor: this is then a first scan.
        let prev: Option<Cursor> = ctx.cursor.and_then(|c| serde_json::from_str(c).ok());
        let file = match super::safe_fs::open_regular(&path) {
            Ok(f) => f,
            Err(e) if e.is_not_found() => {
                return match prev {
                    Some(p) if !p.gone => self.disappeared(p, sink),
                    _ => Ok(SourceReport::missing(ctx)),
                };
            }
            Err(e) => {
                return Err(SourceError::Open { source_name: self.name.clone(), path, source: Box::new(e) });
            }
        };
        let ino = file.metadata().ok().as_ref().and_then(inode);
        let replaced = prev.as_ref().map(|p| p.gone || (p.inode.is_some() && ino.is_some() && p.inode != ino));
        let generation = prev.as_ref().map_or(0, |p| p.generation + u64::from(replaced == Some(true)));
        let prev_len = prev.as_ref().map(|p| p.bytes);

        let Digested { bytes, lines, sha256_prefix, head_prefix } = self.digest(file, &path, prev_len)?;
        let appended_only = prev.as_ref().map(|p| head_prefix.as_deref() == Some(p.sha256_prefix.as_str()));

        let shown = self.path.to_string_lossy();
        let row = [
            Cell::Text(&shown),
            Cell::Int(as_i64(bytes)),
            Cell::Int(as_i64(lines)),
            Cell::Text(&sha256_prefix),
            prev.as_ref().map_or(Cell::Null, |p| Cell::Int(as_i64(p.bytes))),
            prev.as_ref().map_or(Cell::Null, |p| Cell::Int(as_i64(p.lines))),
            prev.as_ref().map_or(Cell::Null, |p| Cell::Text(&p.sha256_prefix)),
            appended_only.map_or(Cell::Null, Cell::Boolean),
            Cell::Boolean(true),
            replaced.map_or(Cell::Null, Cell::Boolean),
            Cell::Int(as_i64(generation)),
        ];
        self.send(&row, sink)?;
        let cursor = Cursor {
            bytes,
            lines,
            sha256_prefix,
            prefix_sha256_at_prev_len: head_prefix,
            inode: ino,
            gone: false,
            generation,
        };
        self.report(&cursor)
    }
}

impl DigestSource {
    fn send(&self, row: &[Cell<'_>], sink: &mut Sink<'_>) -> Result<(), SourceError> {
        let mut builder = BatchBuilder::new(&self.name, "digest", COLUMNS);
        builder.push_row(row).map_err(|e| self.stopped(e.to_string()))?;
        sink(builder.take()).map_err(|reason| self.stopped(reason))
    }

    fn report(&self, cursor: &Cursor) -> Result<SourceReport, SourceError> {
        let cursor = serde_json::to_string(cursor).map_err(|e| SourceError::Read {
            source_name: self.name.clone(),
            path: self.path.clone(),
            source: Box::new(e),
        })?;
        Ok(SourceReport { records: 1, cursor: Some(cursor), ..SourceReport::default() })
    }

    /// The first scan to find the file gone: one row saying so (the previous
    /// reading beside it), and a cursor that remembers it is gone, so the
    /// next scans send nothing until it is back.
    fn disappeared(&self, prev: Cursor, sink: &mut Sink<'_>) -> Result<SourceReport, SourceError> {
        let shown = self.path.to_string_lossy();
        let generation = prev.generation + 1;
        let row = [
            Cell::Text(&shown),
            Cell::Null,
            Cell::Null,
            Cell::Null,
            Cell::Int(as_i64(prev.bytes)),
            Cell::Int(as_i64(prev.lines)),
            Cell::Text(&prev.sha256_prefix),
            Cell::Null,
            Cell::Boolean(false),
            Cell::Boolean(false),
            Cell::Int(as_i64(generation)),
        ];
        self.send(&row, sink)?;
        self.report(&Cursor { gone: true, generation, ..prev })
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::io::Write;
    use std::path::Path;

    use super::*;
    use crate::model::record::Batch;

    /// One digest row, decoded.
    #[derive(Debug, PartialEq)]
    struct Row {
        path: String,
        bytes: i64,
        lines: i64,
        sha: String,
        prev_bytes: Option<i64>,
        prev_lines: Option<i64>,
        prev_sha: Option<String>,
        appended_only: Option<bool>,
    }

    fn is_null(b: &Batch, col: usize) -> bool {
        b.nulls.get(col / 8).is_some_and(|byte| byte & (1 << (col % 8)) != 0)
    }

    fn decode(b: &Batch) -> Row {
        assert_eq!((b.kind.as_str(), b.rows), ("digest", 1));
        let text = |i: usize| {
            let start = if i == 0 { 0 } else { b.text_ends[i - 1] as usize };
            String::from_utf8(b.text[start..b.text_ends[i] as usize].to_vec()).unwrap()
        };
        // Text columns: path, sha256_prefix, prev_sha256_prefix; int-backed:
        // bytes, lines, prev_bytes, prev_lines, appended_only.
        Row {
            path: text(0),
            bytes: b.ints[0],
            lines: b.ints[1],
            sha: text(1),
            prev_bytes: (!is_null(b, 4)).then_some(b.ints[2]),
            prev_lines: (!is_null(b, 5)).then_some(b.ints[3]),
            prev_sha: (!is_null(b, 6)).then(|| text(2)),
            appended_only: (!is_null(b, 7)).then_some(b.ints[4] == 1),
        }
    }

    /// `(present, replaced, generation)` of a digest row.
    fn identity(b: &Batch) -> (bool, Option<bool>, i64) {
        (b.ints[5] == 1, (!is_null(b, 9)).then_some(b.ints[6] == 1), b.ints[7])
    }

    fn scan(src: &DigestSource, dir: &Path, cursor: Option<&str>) -> (SourceReport, Option<Row>) {
        let ctx = ReadContext { data_dir: dir, scan_time_ms: 0, batch_rows: 100, cursor };
        let mut rows = Vec::new();
        let report = src
            .read(&ctx, &mut |b| {
                rows.push(decode(&b));
                Ok(())
            })
            .unwrap();
        assert!(rows.len() <= 1);
        (report, rows.pop())
    }

    fn sha16(data: &[u8]) -> String {
        let mut h = Sha256::new();
        h.update(data);
        hex16(h)
    }

    #[test]
    fn first_scan_has_no_previous_values() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("index.jsonl"), b"{\"a\":1}\n{\"b\":2}\n").unwrap();
        let src = DigestSource::new("index", "index.jsonl");
        let (report, row) = scan(&src, tmp.path(), None);
        assert_eq!(report.records, 1);
        let row = row.unwrap();
        assert_eq!(
            row,
            Row {
                path: "index.jsonl".into(),
                bytes: 16,
                lines: 2,
                sha: sha16(b"{\"a\":1}\n{\"b\":2}\n"),
                prev_bytes: None,
                prev_lines: None,
                prev_sha: None,
                appended_only: None,
            }
        );
        assert_eq!(row.sha.len(), 16);
        let cursor: serde_json::Value = serde_json::from_str(report.cursor.as_deref().unwrap()).unwrap();
        assert_eq!(cursor["bytes"], 16);
        assert_eq!(cursor["lines"], 2);
        assert_eq!(cursor["sha256_prefix"], row.sha.as_str());
        assert!(cursor["prefix_sha256_at_prev_len"].is_null());
    }

    #[test]
    fn an_append_across_chunk_boundaries_is_appended_only() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("big.jsonl");
        // Longer than two chunks, with an odd length so the old end falls mid-chunk.
        let line = b"{\"k\":\"0123456789abcdef\"}\n";
        let old: Vec<u8> = line.iter().copied().cycle().take(line.len() * 6000 + 7).collect();
        fs::write(&path, &old).unwrap();
        let src = DigestSource::new("big", &path);
        let (report, first) = scan(&src, tmp.path(), None);
        let first = first.unwrap();
        let cursor = report.cursor.unwrap();

        fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(&[b'x'; 70_000]).unwrap();
        let (report, row) = scan(&src, tmp.path(), Some(&cursor));
        let row = row.unwrap();
        assert_eq!(row.bytes, old.len() as i64 + 70_000);
        assert_eq!(row.lines, 6000);
        assert_eq!(row.prev_bytes, Some(old.len() as i64));
        assert_eq!(row.prev_lines, Some(6000));
        assert_eq!(row.prev_sha.as_deref(), Some(first.sha.as_str()));
        assert_eq!(row.appended_only, Some(true));
        assert_ne!(row.sha, first.sha);
        let cursor: serde_json::Value = serde_json::from_str(report.cursor.as_deref().unwrap()).unwrap();
        assert_eq!(cursor["prefix_sha256_at_prev_len"], first.sha.as_str());

        // Unchanged since: still appended-only (nothing was rewritten).
        let (_, again) = scan(&src, tmp.path(), Some(&serde_json::to_string(&cursor).unwrap()));
        assert_eq!(again.unwrap().appended_only, Some(true));
    }

    #[test]
    fn a_rewritten_or_truncated_file_is_not_appended_only() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("log");
        fs::write(&path, b"one\ntwo\n").unwrap();
        let src = DigestSource::new("log", "log");
        let (report, _) = scan(&src, tmp.path(), None);
        let cursor = report.cursor.unwrap();

        fs::write(&path, b"ONE\ntwo\nthree\n").unwrap();
        let (_, row) = scan(&src, tmp.path(), Some(&cursor));
        assert_eq!(row.unwrap().appended_only, Some(false));

        fs::write(&path, b"one\n").unwrap();
        let (report, row) = scan(&src, tmp.path(), Some(&cursor));
        let row = row.unwrap();
        assert_eq!((row.bytes, row.prev_bytes, row.appended_only), (4, Some(8), Some(false)));
        let next: serde_json::Value = serde_json::from_str(report.cursor.as_deref().unwrap()).unwrap();
        assert!(next["prefix_sha256_at_prev_len"].is_null());
    }

    #[test]
    fn a_deletion_a_recreation_and_a_file_renamed_into_place_are_each_sent_once() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("index.jsonl");
        fs::write(&path, b"one\n").unwrap();
        let src = DigestSource::new("p", "index.jsonl");
        let mut cursor: Option<String> = None;
        let mut step = || {
            let ctx = ReadContext { data_dir: tmp.path(), scan_time_ms: 0, batch_rows: 1, cursor: cursor.as_deref() };
            let mut seen = Vec::new();
            let report = src
                .read(&ctx, &mut |b| {
                    seen.push(identity(&b));
                    Ok(())
                })
                .unwrap();
            cursor = report.cursor;
            seen
        };
        assert_eq!(step(), [(true, None, 0)], "the first reading");
        fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(b"two\n").unwrap();
        assert_eq!(step(), [(true, Some(false), 0)], "appended in place");
        fs::remove_file(&path).unwrap();
        assert_eq!(step(), [(false, Some(false), 1)], "gone: one row");
        assert_eq!(step(), [], "still gone: nothing more");
        fs::write(&path, b"one\ntwo\n").unwrap();
        assert_eq!(step(), [(true, Some(true), 2)], "back: replaced");
        assert_eq!(step(), [(true, Some(false), 2)]);
        // Another file with the same bytes renamed into place.
        let other = tmp.path().join("other");
        fs::write(&other, b"one\ntwo\nthree\n").unwrap();
        fs::rename(&other, &path).unwrap();
        assert_eq!(step(), [(true, Some(true), 3)], "another inode");
    }

    #[test]
    fn a_missing_file_is_reported_and_keeps_the_cursor() {
        let tmp = tempfile::tempdir().unwrap();
        let src = DigestSource::new("gone", "nope.jsonl");
        let (report, row) = scan(&src, tmp.path(), Some("{\"bytes\":1}"));
        assert!(report.missing);
        assert!(row.is_none());
        assert_eq!(report.cursor.as_deref(), Some("{\"bytes\":1}"));
        assert!(!tmp.path().join("nope.jsonl").exists(), "nothing is created");
    }

    #[test]
    fn a_bad_cursor_is_a_first_scan_and_a_directory_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("f"), b"").unwrap();
        let src = DigestSource::new("f", "f");
        let (_, row) = scan(&src, tmp.path(), Some("garbage"));
        let row = row.unwrap();
        assert_eq!((row.bytes, row.lines, row.prev_bytes, row.appended_only), (0, 0, None, None));

        let dir = DigestSource::new("d", "");
        let ctx = ReadContext { data_dir: tmp.path(), scan_time_ms: 0, batch_rows: 1, cursor: None };
        let err = dir.read(&ctx, &mut |_| Ok(())).unwrap_err();
        assert!(matches!(err, SourceError::Open { .. }), "{err}");
    }

    #[test]
    fn a_sink_that_stops_stops_the_read() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("f"), b"x\n").unwrap();
        let src = DigestSource::new("f", "f");
        let ctx = ReadContext { data_dir: tmp.path(), scan_time_ms: 0, batch_rows: 1, cursor: None };
        let err = src.read(&ctx, &mut |_| Err("no".into())).unwrap_err();
        assert!(matches!(err, SourceError::Stopped { .. }), "{err}");
    }
}
