//! A directory listing: which regular files a configured directory holds, and
//! which of them changed since the previous scan.
//!
//! This source owns one directory (relative to the data dir unless absolute)
//! and lists it non-recursively, by metadata only: it never opens a file's
//! contents, and it must never write, create or lock anything there. It never
//! follows anything outside what it was configured to read: subdirectories
//! are not entered and symbolic links are neither followed nor reported, only
//! the directory's own regular files are. Its cursor is the previous listing
//! (`{name: [size, mtime]}`), so each record says whether its file is new or
//! different since then. A missing directory is reported, never fatal.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::UNIX_EPOCH;

use crate::model::record::{BatchBuilder, Cell, Column};
use crate::sources::{ReadContext, Sink, Source, SourceError, SourceReport};

const COLUMNS: &[Column] =
    &[Column::text("name"), Column::int("size"), Column::int("mtime"), Column::boolean("changed")];

/// The cursor: per file name, `[size, mtime]` as listed last time.
type Listing = BTreeMap<String, (i64, Option<i64>)>;

/// Lists the regular files of one directory (`kind = file`).
#[derive(Debug, Clone)]
pub struct DirectorySource {
    /// The name detectors subscribe to.
    pub name: String,
    /// The directory, relative to the data dir unless absolute.
    pub path: PathBuf,
}

impl DirectorySource {
    pub fn new(name: impl Into<String>, path: impl Into<PathBuf>) -> Self {
        DirectorySource { name: name.into(), path: path.into() }
    }

    fn stopped(&self, reason: String) -> SourceError {
        SourceError::Stopped { source_name: self.name.clone(), reason }
    }
}

/// Modification time in ms since the epoch (negative before it), if the
/// platform reports one.
fn mtime_ms(meta: &std::fs::Metadata) -> Option<i64> {
    let modified = meta.modified().ok()?;
    let ms = match modified.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_millis()).unwrap_or(i64::MAX),
    };
    Some(ms)
}

impl Source for DirectorySource {
    fn name(&self) -> &str {
        &self.name
    }
    fn kinds(&self) -> &'static [&'static str] {
        &["file"]
    }

    fn watch(&self, data_dir: &std::path::Path) -> Option<Vec<PathBuf>> {
        let dir = data_dir.join(&self.path);
        let mut paths = vec![dir.clone()];
        if let Ok(entries) = std::fs::read_dir(&dir) {
            let mut files: Vec<PathBuf> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
            files.sort();
            paths.extend(files);
        }
        Some(paths)
    }

    fn read(&self, ctx: &ReadContext<'_>, sink: &mut Sink<'_>) -> Result<SourceReport, SourceError> {
        let dir = ctx.data_dir.join(&self.path);
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(SourceReport::missing(ctx));
            }
            Err(e) => {
                return Err(SourceError::Open { source_name: self.name.clone(), path: dir, source: Box::new(e) });
            }
        };
        let mut report = SourceReport::default();

        // List first, then sort: records go out in name order.
        let mut files: Vec<(String, i64, Option<i64>)> = Vec::new();
        for entry in entries {
            let Ok(entry) = entry else {
                report.skipped += 1;
                continue;
            };
            // `DirEntry::metadata` does not follow symbolic links, so a link
            // is not a regular file here and is left alone.
            let meta = match entry.metadata() {
                Ok(m) => m,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue, // removed while listing
                Err(_) => {
                    report.skipped += 1;
                    continue;
                }
            };
            if !meta.is_file() {
                continue;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            let size = i64::try_from(meta.len()).unwrap_or(i64::MAX);
            files.push((name, size, mtime_ms(&meta)));
        }
        files.sort();

        // An unreadable cursor counts as no cursor: every file is then new.
        let previous: Listing = ctx.cursor.and_then(|c| serde_json::from_str(c).ok()).unwrap_or_default();
        let mut listing = Listing::new();
        let mut builder = BatchBuilder::new(&self.name, "file", COLUMNS);
        let batch_rows = ctx.batch_rows.max(1);
        for (name, size, mtime) in &files {
            let changed = previous.get(name) != Some(&(*size, *mtime));
            let row = [Cell::Text(name), Cell::Int(*size), mtime.map_or(Cell::Null, Cell::Int), Cell::Boolean(changed)];
            builder.push_row(&row).map_err(|e| self.stopped(e.to_string()))?;
            listing.insert(name.clone(), (*size, *mtime));
            report.records += 1;
            if builder.rows() as usize >= batch_rows {
                sink(builder.take()).map_err(|reason| self.stopped(reason))?;
            }
        }
        if !builder.is_empty() {
            sink(builder.take()).map_err(|reason| self.stopped(reason))?;
        }
        let cursor = serde_json::to_string(&listing).map_err(|e| SourceError::Read {
            source_name: self.name.clone(),
            path: dir.clone(),
            source: Box::new(e),
        })?;
        report.cursor = Some(cursor);
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::path::Path;

    use super::*;
    use crate::model::record::Batch;

    fn ctx<'a>(data_dir: &'a Path, cursor: Option<&'a str>, batch_rows: usize) -> ReadContext<'a> {
        ReadContext { data_dir, scan_time_ms: 0, batch_rows, cursor }
    }

    fn read_all(src: &DirectorySource, ctx: &ReadContext<'_>) -> (SourceReport, Vec<Batch>) {
        let mut batches = Vec::new();
        let report = src
            .read(ctx, &mut |b| {
                batches.push(b);
                Ok(())
            })
            .unwrap();
        (report, batches)
    }

    /// `(name, size, changed)` of every row, in order.
    fn rows(batches: &[Batch]) -> Vec<(String, i64, bool)> {
        let mut out = Vec::new();
        for b in batches {
            assert_eq!(b.kind, "file");
            let n = b.rows as usize;
            let mut start = 0usize;
            for r in 0..n {
                let end = b.text_ends[r] as usize;
                let name = String::from_utf8(b.text[start..end].to_vec()).unwrap();
                start = end;
                // Int-backed columns in order: size, mtime, changed.
                out.push((name, b.ints[r], b.ints[2 * n + r] == 1));
            }
        }
        out
    }

    fn set_mtime(path: &Path, secs: u64) {
        let f = fs::File::options().write(true).open(path).unwrap();
        f.set_modified(UNIX_EPOCH + std::time::Duration::from_secs(secs)).unwrap();
    }

    #[test]
    fn lists_regular_files_sorted_and_compares_with_the_previous_listing() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("inbox");
        fs::create_dir(&dir).unwrap();
        fs::write(dir.join("b.txt"), b"bb").unwrap();
        fs::write(dir.join("a.txt"), b"a").unwrap();
        fs::write(dir.join("c.txt"), b"ccc").unwrap();
        fs::write(dir.join("e.txt"), b"eeeee").unwrap();
        fs::create_dir(dir.join("sub")).unwrap();
        fs::write(dir.join("sub").join("deep.txt"), b"x").unwrap();
        for f in ["a.txt", "b.txt", "c.txt", "e.txt"] {
            set_mtime(&dir.join(f), 1_700_000_000);
        }
        let src = DirectorySource::new("inbox", "inbox");

        let (report, batches) = read_all(&src, &ctx(tmp.path(), None, 3));
        assert_eq!(report.records, 4);
        assert!(!report.missing);
        assert_eq!(batches.len(), 2, "bounded by batch_rows");
        assert_eq!(
            rows(&batches),
            vec![
                ("a.txt".into(), 1, true),
                ("b.txt".into(), 2, true),
                ("c.txt".into(), 3, true),
                ("e.txt".into(), 5, true)
            ]
        );
        assert_eq!(batches[0].ints[batches[0].rows as usize], 1_700_000_000_000, "mtime in ms");
        let cursor = report.cursor.unwrap();
        let parsed: serde_json::Value = serde_json::from_str(&cursor).unwrap();
        assert_eq!(parsed["a.txt"], serde_json::json!([1, 1_700_000_000_000i64]));

        // Unchanged, resized, touched, new, removed.
        fs::write(dir.join("b.txt"), b"bbbb").unwrap();
        set_mtime(&dir.join("b.txt"), 1_700_000_000);
        set_mtime(&dir.join("c.txt"), 1_700_000_001);
        fs::write(dir.join("d.txt"), b"").unwrap();
        fs::remove_file(dir.join("a.txt")).unwrap();
        let (report, batches) = read_all(&src, &ctx(tmp.path(), Some(&cursor), 100));
        assert_eq!(report.records, 4);
        assert_eq!(
            rows(&batches),
            vec![
                ("b.txt".into(), 4, true),
                ("c.txt".into(), 3, true),
                ("d.txt".into(), 0, true),
                ("e.txt".into(), 5, false)
            ]
        );
        let cursor = report.cursor.unwrap();
        assert!(!cursor.contains("a.txt"), "the cursor is the last listing only");

        // Nothing changed: nothing is flagged.
        let (_, batches) = read_all(&src, &ctx(tmp.path(), Some(&cursor), 100));
        assert!(rows(&batches).iter().all(|(_, _, changed)| !changed));
    }

    #[test]
    fn an_absolute_path_ignores_the_data_dir() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("x"), b"1").unwrap();
        let src = DirectorySource::new("abs", tmp.path());
        let elsewhere = tempfile::tempdir().unwrap();
        let (report, batches) = read_all(&src, &ctx(elsewhere.path(), None, 10));
        assert_eq!(report.records, 1);
        assert_eq!(rows(&batches)[0].0, "x");
    }

    #[test]
    fn a_missing_directory_is_reported_and_keeps_the_cursor() {
        let tmp = tempfile::tempdir().unwrap();
        let src = DirectorySource::new("gone", "nope");
        let (report, batches) = read_all(&src, &ctx(tmp.path(), Some(r#"{"a":[1,2]}"#), 10));
        assert!(report.missing);
        assert_eq!(report.records, 0);
        assert_eq!(report.cursor.as_deref(), Some(r#"{"a":[1,2]}"#));
        assert!(batches.is_empty());
        assert!(!tmp.path().join("nope").exists(), "nothing is created");
    }

    #[test]
    fn a_bad_cursor_means_every_file_is_new() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("f"), b"1").unwrap();
        let src = DirectorySource::new("d", "");
        let (report, batches) = read_all(&src, &ctx(tmp.path(), Some("not json"), 10));
        assert_eq!(report.records, 1);
        assert!(rows(&batches)[0].2);
    }

    #[test]
    fn a_file_instead_of_a_directory_is_an_open_error() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("plain"), b"1").unwrap();
        let src = DirectorySource::new("d", "plain");
        let err = src.read(&ctx(tmp.path(), None, 10), &mut |_| Ok(())).unwrap_err();
        assert!(matches!(err, SourceError::Open { .. }), "{err}");
    }

    #[test]
    fn a_sink_that_stops_stops_the_read() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("f"), b"1").unwrap();
        let src = DirectorySource::new("d", "");
        let err = src.read(&ctx(tmp.path(), None, 10), &mut |_| Err("full".into())).unwrap_err();
        assert!(matches!(err, SourceError::Stopped { ref reason, .. } if reason == "full"), "{err}");
    }

    #[cfg(unix)]
    #[test]
    fn symbolic_links_are_not_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret"), b"s").unwrap();
        fs::create_dir(tmp.path().join("d")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), tmp.path().join("d").join("link")).unwrap();
        std::os::unix::fs::symlink(outside.path(), tmp.path().join("d").join("dirlink")).unwrap();
        fs::write(tmp.path().join("d").join("real"), b"r").unwrap();
        let src = DirectorySource::new("d", "d");
        let (report, batches) = read_all(&src, &ctx(tmp.path(), None, 10));
        assert_eq!(report.records, 1);
        assert_eq!(rows(&batches)[0].0, "real");
    }
}
