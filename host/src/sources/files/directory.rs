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
//!
//! Noise stays out: dot-files (`.gitkeep`, `.DS_Store`, an uploader's
//! `.name.part` before it is renamed into place) are not listed unless
//! `hidden` is set, nor are names matching the `ignore` patterns (default
//! [`DEFAULT_IGNORE`]). A file still being written is not listed either: a new
//! or changed file modified less than `settle` ago is looked at a second
//! time once `settle` has passed since its mtime (one wait per scan, at most
//! `settle`), and if its size or mtime moved between the two looks it waits
//! for the next scan (its previous listing stays in the cursor). A file the
//! watcher saw renamed into place and not written since
//! ([`super::arrivals`]: the common delivery of a finished file, in the
//! long-running mode where fast sentinels are kicked) landed complete: it is
//! looked at a second time at once, with no wait.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::model::record::{BatchBuilder, Cell, Column};
use crate::sources::{ReadContext, Sink, Source, SourceError, SourceReport};

const COLUMNS: &[Column] =
    &[Column::text("name"), Column::int("size"), Column::int("mtime"), Column::boolean("changed")];

/// The cursor: per file name, `[size, mtime]` as listed last time.
type Listing = BTreeMap<String, (i64, Option<i64>)>;

/// Names left out by default: editors' swap and backup files, lock files,
/// and temporaries.
pub const DEFAULT_IGNORE: &[&str] = &["*.tmp", "*.swp", "*~", ".#*"];
/// How long a new or changed file must hold still before it is listed.
pub const DEFAULT_SETTLE: Duration = Duration::from_millis(500);

/// Lists the regular files of one directory (`kind = file`).
#[derive(Debug, Clone)]
pub struct DirectorySource {
    /// The name detectors subscribe to.
    pub name: String,
    /// The directory, relative to the data dir unless absolute.
    pub path: PathBuf,
    /// Name patterns left out (`*` matches any run of characters).
    pub ignore: Vec<String>,
    /// Whether dot-files are listed.
    pub hidden: bool,
    /// How long a new or changed file must keep its size and mtime.
    pub settle: Duration,
}

impl DirectorySource {
    pub fn new(name: impl Into<String>, path: impl Into<PathBuf>) -> Self {
        DirectorySource {
            name: name.into(),
            path: path.into(),
            ignore: DEFAULT_IGNORE.iter().map(|p| (*p).to_owned()).collect(),
            hidden: false,
            settle: DEFAULT_SETTLE,
        }
    }

    /// Whether a name is noise: a dot-file (unless `hidden`) or an ignored pattern.
    fn is_noise(&self, name: &str) -> bool {
        (!self.hidden && name.starts_with('.')) || self.ignore.iter().any(|p| super::glob::glob_match(p, name))
    }

    /// The files of `files` still being written: new or changed since
    /// `previous`, modified less than `settle` ago, and different at a
    /// second look, taken once each of them has either `settle` past its
    /// mtime or been seen moved in ([`wait_to_settle`]).
    fn still_written(&self, dir: &Path, files: &[(String, i64, Option<i64>)], previous: &Listing) -> Vec<String> {
        let now = mtime_of(SystemTime::now());
        let settle_ms = i64::try_from(self.settle.as_millis()).unwrap_or(i64::MAX);
        let young: Vec<&(String, i64, Option<i64>)> = files
            .iter()
            .filter(|(name, size, mtime)| {
                previous.get(name) != Some(&(*size, *mtime)) && mtime.is_some_and(|m| now - m < settle_ms)
            })
            .collect();
        if young.is_empty() {
            return Vec::new();
        }
        wait_to_settle(dir, &young, settle_ms);
        young
            .into_iter()
            .filter(|(name, size, mtime)| {
                let again = std::fs::symlink_metadata(dir.join(name)).ok();
                again.is_none_or(|m| (i64::try_from(m.len()).unwrap_or(i64::MAX), mtime_ms(&m)) != (*size, *mtime))
            })
            .map(|f| f.0.clone())
            .collect()
    }

    fn stopped(&self, reason: String) -> SourceError {
        SourceError::Stopped { source_name: self.name.clone(), reason }
    }
}

/// How often a wait for young files looks again whether the watcher has
/// seen them moved in (the event may still be on its way when the scan
/// lists the directory).
const LOOK_AGAIN: Duration = Duration::from_millis(5);

/// Waits until every file of `young` has `settle_ms` past its mtime or was
/// seen moved in and not written since ([`landed_complete`]): at most
/// `settle_ms` in all (an mtime in the future waits no longer), and not at
/// all when every one of them landed complete.
fn wait_to_settle(dir: &Path, young: &[&(String, i64, Option<i64>)], settle_ms: i64) {
    let give_up = mtime_of(SystemTime::now()).saturating_add(settle_ms);
    loop {
        let waiting = young.iter().filter(|f| !landed_complete(dir, f));
        let Some(settled) = waiting.filter_map(|f| f.2).max().map(|m| m.saturating_add(settle_ms)) else { return };
        let left = settled.min(give_up) - mtime_of(SystemTime::now());
        if left <= 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(u64::try_from(left).unwrap_or(0)).min(LOOK_AGAIN));
    }
}

/// Whether the watcher saw `file` renamed into `dir` and nothing written to
/// it since (its mtime, set by the last write, not after the move was seen).
fn landed_complete(dir: &Path, (name, _, mtime): &&(String, i64, Option<i64>)) -> bool {
    super::arrivals::moved_in(dir, name).is_some_and(|seen_at| mtime.is_some_and(|m| m <= seen_at))
}

/// Modification time in ms since the epoch (negative before it), if the
/// platform reports one.
fn mtime_ms(meta: &std::fs::Metadata) -> Option<i64> {
    Some(mtime_of(meta.modified().ok()?))
}

fn mtime_of(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_millis()).unwrap_or(i64::MAX),
    }
}

impl Source for DirectorySource {
    fn evidence_columns(&self) -> &'static [&'static str] {
        &["name"]
    }
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
            if self.is_noise(&name) {
                continue;
            }
            let size = i64::try_from(meta.len()).unwrap_or(i64::MAX);
            files.push((name, size, mtime_ms(&meta)));
        }
        files.sort();

        // An unreadable cursor counts as no cursor: every file is then new.
        let previous: Listing = ctx.cursor.and_then(|c| serde_json::from_str(c).ok()).unwrap_or_default();
        let waiting = self.still_written(&dir, &files, &previous);
        let mut listing = Listing::new();
        let mut builder = BatchBuilder::new(&self.name, "file", COLUMNS);
        let batch_rows = ctx.batch_rows.max(1);
        for (name, size, mtime) in &files {
            if waiting.contains(name) {
                // Still being written: listed by a later scan.
                if let Some(before) = previous.get(name) {
                    listing.insert(name.clone(), *before);
                }
                continue;
            }
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
    use std::io::Write;
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
            for (r, name) in b.first_texts().into_iter().enumerate() {
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

    #[test]
    fn dot_files_and_ignored_names_are_noise_unless_configured() {
        let tmp = tempfile::tempdir().unwrap();
        for f in
            [".gitkeep", ".DS_Store", ".order.json.part", "order.json.swp", "x.tmp", "notes~", ".#lock", "order.json"]
        {
            fs::write(tmp.path().join(f), b"1").unwrap();
            set_mtime(&tmp.path().join(f), 1_700_000_000);
        }
        let src = DirectorySource::new("d", "");
        let (_, batches) = read_all(&src, &ctx(tmp.path(), None, 10));
        let names: Vec<String> = rows(&batches).into_iter().map(|r| r.0).collect();
        assert_eq!(names, ["order.json"]);
        let all = DirectorySource { hidden: true, ignore: vec!["*.swp".into()], ..src };
        let (_, batches) = read_all(&all, &ctx(tmp.path(), None, 10));
        assert_eq!(rows(&batches).len(), 7, "only the .swp left out");
    }

    #[test]
    fn a_file_still_being_written_waits_for_the_next_scan() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("upload.bin");
        fs::write(&path, [0u8; 4096]).unwrap();
        fs::write(tmp.path().join("whole.json"), b"{}").unwrap();
        let src = DirectorySource { settle: Duration::from_secs(2), ..DirectorySource::new("d", "") };
        // The uploader writes its next chunk between the two looks.
        let writer = {
            let path = path.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(100));
                fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(&[1u8; 4096]).unwrap();
            })
        };
        let (report, batches) = read_all(&src, &ctx(tmp.path(), None, 10));
        writer.join().unwrap();
        let names: Vec<String> = rows(&batches).into_iter().map(|r| r.0).collect();
        assert_eq!(names, ["whole.json"], "the file whose size moved waits");
        let cursor = report.cursor.unwrap();
        assert!(!cursor.contains("upload.bin"), "{cursor}");
        // Next scan, nothing more written: listed, as new, at its full size.
        let (_, batches) = read_all(&src, &ctx(tmp.path(), Some(&cursor), 10));
        assert!(rows(&batches).contains(&("upload.bin".into(), 8192, true)), "{:?}", rows(&batches));
    }

    #[test]
    fn a_file_seen_moved_in_is_listed_at_once_and_one_written_since_the_move_waits() {
        use crate::sources::files::arrivals::{self, Seen};
        let tmp = tempfile::tempdir().unwrap();
        let src = DirectorySource { settle: Duration::from_secs(10), ..DirectorySource::new("d", "") };
        // Written under a dot-name, renamed into place, the rename seen by the watcher.
        fs::write(tmp.path().join(".order.json.part"), b"{}").unwrap();
        fs::rename(tmp.path().join(".order.json.part"), tmp.path().join("order.json")).unwrap();
        arrivals::note(&tmp.path().join("order.json"), Seen::MovedIn);
        let started = std::time::Instant::now();
        let (report, batches) = read_all(&src, &ctx(tmp.path(), None, 10));
        // The wait would be the whole settle (10 s): a bound, not a race.
        assert!(started.elapsed() < Duration::from_secs(5), "no wait: {:?}", started.elapsed());
        assert_eq!(rows(&batches), [("order.json".into(), 2, true)]);
        // Moved in, then written in place: it may be growing, and it is.
        let src = DirectorySource { settle: Duration::from_millis(600), ..src };
        let path = tmp.path().join("order.json");
        fs::write(&path, b"{\"more\": 1}").unwrap();
        arrivals::note(&path, Seen::Written);
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(b"   ").unwrap();
        });
        let (_, batches) = read_all(&src, &ctx(tmp.path(), report.cursor.as_deref(), 10));
        writer.join().unwrap();
        assert!(rows(&batches).is_empty(), "written since the move: it waited and moved: {:?}", rows(&batches));
    }

    #[test]
    fn a_file_with_an_mtime_in_the_future_waits_at_most_the_settle_time() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("ahead.json"), b"{}").unwrap();
        let hour_ahead = SystemTime::now() + Duration::from_secs(3600);
        fs::File::options().write(true).open(tmp.path().join("ahead.json")).unwrap().set_modified(hour_ahead).unwrap();
        let src = DirectorySource { settle: Duration::from_millis(200), ..DirectorySource::new("d", "") };
        let started = std::time::Instant::now();
        let (_, batches) = read_all(&src, &ctx(tmp.path(), None, 10));
        // Unbounded, the wait would last the hour: a bound, not a race.
        assert!(started.elapsed() < Duration::from_secs(60), "{:?}", started.elapsed());
        assert_eq!(rows(&batches).len(), 1, "held still across the wait: listed");
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
