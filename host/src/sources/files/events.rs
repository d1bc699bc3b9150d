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

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::model::record::{BatchBuilder, Cell, Column};
use crate::sources::{ReadContext, Sink, Source, SourceError, SourceReport};

/// The columns of a `turn-completed` record.
pub const TURN_COMPLETED: &[Column] = &[
    Column::text("id"),
    Column::text("thread_id"),
    Column::text("turn_id"),
    Column::text("bot_id"),
    Column::int("created_at"),
    Column::boolean("ok"),
    Column::text("stop_reason"),
    Column::float("cost"),
    Column::text("file"),
];

/// Bytes of the first line hashed into the fingerprint.
const FINGERPRINT_BYTES: usize = 4096;
/// Bytes before the offset whose checksum proves the file still holds what was read.
const TAIL_BYTES: u64 = 64;
/// Bytes read at a time.
const CHUNK: usize = 64 * 1024;

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

fn short_hash(bytes: &[u8]) -> String {
    crate::base::hex(&Sha256::digest(bytes)[..8])
}

/// `*` matches any run of characters, everything else matches itself.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == name;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !name.starts_with(first) || !name[first.len()..].ends_with(last) || name.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

/// The fingerprint of a file's first complete line, if it has one.
fn fingerprint(file: &mut File) -> std::io::Result<Option<String>> {
    file.seek(SeekFrom::Start(0))?;
    let mut buf = vec![0u8; FINGERPRINT_BYTES];
    let mut filled = 0;
    while filled < buf.len() {
        let n = file.read(&mut buf[filled..])?;
        if n == 0 {
            break;
        }
        filled += n;
    }
    Ok(fingerprint_of(&buf[..filled]))
}

/// The fingerprint of the first line in `head` (the first bytes of a file).
fn fingerprint_of(head: &[u8]) -> Option<String> {
    let head = &head[..head.len().min(FINGERPRINT_BYTES)];
    match head.iter().position(|&b| b == b'\n') {
        Some(nl) => Some(short_hash(&head[..nl])),
        // A first line longer than the window is fingerprinted by the window.
        None if head.len() == FINGERPRINT_BYTES => Some(short_hash(head)),
        None => None,
    }
}

/// Keeps only the last `n` bytes.
fn keep_last(buf: &mut Vec<u8>, n: usize) {
    if buf.len() > n {
        buf.drain(..buf.len() - n);
    }
}

/// The checksum of the bytes before `offset`.
fn tail_at(file: &mut File, offset: u64) -> std::io::Result<String> {
    let start = offset.saturating_sub(TAIL_BYTES);
    file.seek(SeekFrom::Start(start))?;
    let mut buf = vec![0u8; (offset - start) as usize];
    file.read_exact(&mut buf)?;
    Ok(short_hash(&buf))
}

/// Whether `file` (of `len` bytes, first line `fp`) continues `cursor`.
fn continues(file: &mut File, len: u64, fp: &str, cursor: &FileCursor) -> bool {
    cursor.fingerprint == fp && len >= cursor.offset && tail_at(file, cursor.offset).is_ok_and(|t| t == cursor.tail)
}

/// A parsed `turn.completed` line.
struct Event {
    id: String,
    thread_id: Option<String>,
    turn_id: Option<String>,
    bot_id: Option<String>,
    created_at: Option<i64>,
    ok: Option<bool>,
    stop_reason: Option<String>,
    cost: Option<f64>,
}

enum Line {
    TurnCompleted(Event),
    Other,
    Malformed,
}

fn parse(line: &[u8]) -> Line {
    let Ok(text) = std::str::from_utf8(line) else { return Line::Malformed };
    let Ok(v) = serde_json::from_str::<serde_json::Value>(text) else { return Line::Malformed };
    let Some(obj) = v.as_object() else { return Line::Malformed };
    let s = |k: &str| obj.get(k).and_then(|x| x.as_str()).map(str::to_owned);
    if obj.get("type").and_then(|t| t.as_str()) != Some("turn.completed") {
        return Line::Other;
    }
    let created_at = obj.get("createdAt").and_then(|x| x.as_i64().or_else(|| x.as_f64().map(|f| f as i64)));
    let Some(id) = s("id") else { return Line::Malformed };
    Line::TurnCompleted(Event {
        id,
        thread_id: s("threadId"),
        turn_id: s("turnId"),
        bot_id: s("botId"),
        created_at,
        ok: obj.get("ok").and_then(|x| x.as_bool()),
        stop_reason: s("stopReason"),
        cost: obj.get("cost").and_then(|x| x.as_f64()),
    })
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

impl EventsSource {
    /// For each of `orphans` (cursors no file of the glob continued), the
    /// file of `folder` outside the glob (not in `listed`) that continues
    /// it, if there is one: the same name first (a file already followed),
    /// then any other (a rename, again). Entries that are not regular files,
    /// or cannot be opened, are passed over without a word: they are not
    /// the source's.
    fn follow_out_of_glob<'c>(
        &self,
        folder: &Path,
        listed: &[String],
        orphans: &[(&'c String, &'c FileCursor)],
    ) -> Vec<(&'c String, &'c FileCursor, Opened)> {
        if orphans.is_empty() {
            return Vec::new();
        }
        let mut others: Vec<Opened> = std::fs::read_dir(folder)
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| !listed.contains(n))
            .filter_map(|name| {
                let mut file = super::safe_fs::open_regular(&folder.join(&name)).ok()?;
                let len = file.metadata().ok()?.len();
                let fp = fingerprint(&mut file).ok()?;
                Some(Opened { name, file, len, fp })
            })
            .collect();
        others.sort_by(|a, b| a.name.cmp(&b.name));
        let mut followed = Vec::new();
        for &(from, cur) in orphans {
            let mut pick = |same: bool| {
                others.iter_mut().position(|o| {
                    (o.name == *from) == same
                        && o.fp.as_ref().is_some_and(|fp| continues(&mut o.file, o.len, &fp.clone(), cur))
                })
            };
            if let Some(i) = pick(true).or_else(|| pick(false)) {
                followed.push((from, cur, others.swap_remove(i)));
                others.sort_by(|a, b| a.name.cmp(&b.name));
            }
        }
        followed
    }

    fn folder(&self, data_dir: &Path) -> PathBuf {
        if self.dir.is_absolute() { self.dir.clone() } else { data_dir.join(&self.dir) }
    }

    fn err(&self, path: &Path, e: std::io::Error) -> SourceError {
        SourceError::Read { source_name: self.name.clone(), path: path.to_owned(), source: Box::new(e) }
    }

    /// Reads complete lines of `file` from `start` and returns the new cursor,
    /// raising the threads' high-water marks; `None` when the file changed
    /// since it was listed, so the cursor it had must be kept. With `skip` (a file read again
    /// from its start), lines at or below their thread's mark in `skip` are
    /// skipped.
    #[allow(clippy::too_many_arguments)]
    fn read_file(
        &self,
        file: &mut File,
        name: &str,
        start: u64,
        prev_tail: &str,
        fp: String,
        skip: Option<&BTreeMap<String, i64>>,
        threads: &mut BTreeMap<String, i64>,
        ctx: &ReadContext<'_>,
        builder: &mut BatchBuilder,
        sink: &mut Sink<'_>,
        tally: &mut Tally,
    ) -> Result<Option<FileCursor>, SourceError> {
        let path = self.folder(ctx.data_dir).join(name);
        // The bytes before `start`, so the tail checksum can be kept from what
        // is actually consumed, even if the file changes under us.
        let mut rolling: Vec<u8> = Vec::new();
        if start > 0 {
            let from = start.saturating_sub(TAIL_BYTES);
            let mut pre = vec![0u8; (start - from) as usize];
            let read = file.seek(SeekFrom::Start(from)).and_then(|_| file.read_exact(&mut pre));
            if read.is_err() || short_hash(&pre) != prev_tail {
                // It changed since the check: keep the cursor as it was. A
                // copy of the old content can still continue it; the changed
                // file is reset by the next scan, skipping what was delivered.
                return Ok(None);
            }
            rolling = pre;
        }
        file.seek(SeekFrom::Start(start)).map_err(|e| self.err(&path, e))?;
        let mut offset = start;
        // Read from the start, the fingerprint comes from what is actually
        // read: the file may have changed since it was listed.
        let mut head: Vec<u8> = Vec::new();
        let mut pending: Vec<u8> = Vec::new();
        // The last bytes of the line being read, for the tail checksum.
        let mut line_tail: Vec<u8> = Vec::new();
        // True while inside a line already over the limit: skip to its end.
        let mut overlong = false;
        let mut chunk = vec![0u8; CHUNK];
        loop {
            let n = file.read(&mut chunk).map_err(|e| self.err(&path, e))?;
            if n == 0 {
                break;
            }
            let mut data = &chunk[..n];
            while let Some(nl) = data.iter().position(|&b| b == b'\n') {
                let piece = &data[..nl];
                if start == 0 && head.len() < FINGERPRINT_BYTES {
                    let first_line = head.is_empty();
                    head.extend_from_slice(&line_tail);
                    head.extend_from_slice(&data[..=nl]);
                    // The file listed is not the file being read: it was
                    // replaced or truncated meanwhile. Read nothing of it now;
                    // the next scan sees the new state whole.
                    if first_line && fingerprint_of(&head).as_ref() != Some(&fp) {
                        return Ok(None);
                    }
                }
                rolling.extend_from_slice(&line_tail);
                rolling.extend_from_slice(&data[..=nl]);
                keep_last(&mut rolling, TAIL_BYTES as usize);
                line_tail.clear();
                data = &data[nl + 1..];
                let line_len = pending.len() + piece.len();
                offset += line_len as u64 + 1;
                if overlong || line_len > self.max_line_bytes {
                    tally.skipped += 1;
                    overlong = false;
                    pending.clear();
                    continue;
                }
                pending.extend_from_slice(piece);
                let line = std::mem::take(&mut pending);
                let line = line.strip_suffix(b"\r").unwrap_or(&line);
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                match parse(line) {
                    Line::Malformed => tally.skipped += 1,
                    Line::Other => {}
                    Line::TurnCompleted(ev) => {
                        let thread = ev.thread_id.as_deref().unwrap_or("");
                        if let (Some(seen), Some(c)) = (skip, ev.created_at)
                            && seen.get(thread).is_some_and(|&h| c <= h)
                        {
                            continue;
                        }
                        let hwm = threads.get(thread).copied();
                        if let Some(c) = ev.created_at
                            && hwm.is_none_or(|h| c > h)
                        {
                            threads.insert(thread.to_owned(), c);
                        }
                        let cells = [
                            Cell::Text(&ev.id),
                            ev.thread_id.as_deref().map_or(Cell::Null, Cell::Text),
                            ev.turn_id.as_deref().map_or(Cell::Null, Cell::Text),
                            ev.bot_id.as_deref().map_or(Cell::Null, Cell::Text),
                            ev.created_at.map_or(Cell::Null, Cell::Int),
                            ev.ok.map_or(Cell::Null, Cell::Boolean),
                            ev.stop_reason.as_deref().map_or(Cell::Null, Cell::Text),
                            ev.cost.map_or(Cell::Null, Cell::Float),
                            Cell::Text(name),
                        ];
                        builder.push_row(&cells).map_err(|e| SourceError::Stopped {
                            source_name: self.name.clone(),
                            reason: e.to_string(),
                        })?;
                        tally.records += 1;
                        if builder.rows() as usize >= ctx.batch_rows {
                            sink(builder.take())
                                .map_err(|reason| SourceError::Stopped { source_name: self.name.clone(), reason })?;
                        }
                    }
                }
            }
            // What is left is part of a line that has no newline yet.
            line_tail.extend_from_slice(data);
            keep_last(&mut line_tail, TAIL_BYTES as usize);
            if overlong || pending.len() + data.len() > self.max_line_bytes {
                overlong = true;
                pending.clear();
            } else {
                pending.extend_from_slice(data);
            }
        }
        // A partial last line (or a partial over-long one) is not consumed.
        let tail = short_hash(&rolling);
        Ok(Some(FileCursor { offset, fingerprint: fp, tail }))
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
        let entries = match std::fs::read_dir(&folder) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(SourceReport::missing(ctx));
            }
            Err(e) => {
                return Err(SourceError::Open { source_name: self.name.clone(), path: folder, source: Box::new(e) });
            }
        };
        let mut names: Vec<String> = entries
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| glob_match(&self.pattern, n))
            .collect();
        names.sort();

        // Open every file once; a file that vanished since the listing is skipped.
        let mut current = Vec::new();
        let (mut warnings, mut refused) = (Vec::new(), 0);
        for name in names {
            let path = folder.join(&name);
            // Regular files only, never through a link, and no open can block.
            let mut file = match super::safe_fs::open_regular(&path) {
                Ok(f) => f,
                Err(e) if e.is_not_found() => continue,
                Err(e) => {
                    warnings.push(format!("{}: {e}", path.display()));
                    refused += 1;
                    continue;
                }
            };
            let len = file.metadata().map_err(|e| self.err(&path, e))?.len();
            let fp = fingerprint(&mut file).map_err(|e| self.err(&path, e))?;
            current.push(Opened { name, file, len, fp });
        }

        // First, files that continue their own path's cursor; then the others
        // may continue a cursor no file claimed (a rename or a copy).
        let mut start: Vec<Option<FileCursor>> = vec![None; current.len()];
        // The name of the cursor each file continues.
        let mut origin: Vec<Option<String>> = vec![None; current.len()];
        let mut claimed: Vec<&str> = Vec::new();
        for (i, c) in current.iter_mut().enumerate() {
            if let (Some(fp), Some(cur)) = (&c.fp, previous.files.get(&c.name))
                && continues(&mut c.file, c.len, fp, cur)
            {
                start[i] = Some(cur.clone());
                origin[i] = Some(c.name.clone());
                claimed.push(c.name.as_str());
            }
        }
        let claimed: Vec<String> = claimed.into_iter().map(str::to_owned).collect();
        let mut adopted: Vec<String> = Vec::new();
        for (i, c) in current.iter_mut().enumerate() {
            let Some(fp) = &c.fp else { continue };
            if start[i].is_some() {
                continue;
            }
            // Of the unclaimed cursors this file continues, the one that read
            // the most: a short common prefix (a header line) proves little.
            let orphan = previous
                .files
                .iter()
                .filter(|(name, cur)| {
                    !claimed.contains(name) && !adopted.contains(name) && **name != c.name && cur.offset > 0 && {
                        let file = &mut c.file;
                        continues(file, c.len, fp, cur)
                    }
                })
                .max_by_key(|(_, cur)| cur.offset);
            if let Some((name, cur)) = orphan {
                start[i] = Some(cur.clone());
                origin[i] = Some(name.clone());
                adopted.push(name.clone());
            }
        }

        // A cursor no listed file continues: its file may have left the glob
        // by a rename within the folder (logrotate's `th.ndjson.1`), and
        // what was appended before (or after: a writer that still has it
        // open) is read from where the cursor stopped.
        let listed: Vec<String> = current.iter().map(|c| c.name.clone()).collect();
        let orphans: Vec<(&String, &FileCursor)> = previous
            .files
            .iter()
            .filter(|(name, cur)| cur.offset > 0 && !claimed.contains(name) && !adopted.contains(name))
            .collect();
        for (from, cur, opened) in self.follow_out_of_glob(&folder, &listed, &orphans) {
            current.push(opened);
            start.push(Some(cur.clone()));
            origin.push(Some(from.clone()));
        }

        let mut builder = BatchBuilder::new(&self.name, "turn-completed", TURN_COMPLETED);
        let mut tally = Tally { skipped: refused, ..Tally::default() };
        let mut next = EventsCursor { files: BTreeMap::new(), threads: previous.threads.clone() };
        // A continuing file delivers everything after its offset. A file read
        // from its start skips each line at or below its thread's high-water
        // mark as it was when this scan began: whatever is above it was never
        // delivered, whichever file it was in and in whatever order the files
        // are read (files change while a scan runs).
        for i in 0..current.len() {
            let c = &mut current[i];
            let Some(fp) = c.fp.clone() else { continue };
            let (from, prev_tail, skip) = match &start[i] {
                Some(cur) => (cur.offset, cur.tail.clone(), false),
                None => (0, String::new(), true),
            };
            let cursor = self.read_file(
                &mut c.file,
                &c.name,
                from,
                &prev_tail,
                fp,
                skip.then_some(&previous.threads),
                &mut next.threads,
                ctx,
                &mut builder,
                sink,
                &mut tally,
            )?;
            match cursor {
                Some(cursor) => {
                    next.files.insert(c.name.clone(), cursor);
                }
                None => {
                    // It changed while read: the cursor it continued (or its
                    // path's) is kept for the next scan.
                    let key = origin[i].as_ref().unwrap_or(&c.name);
                    if let Some(old) = previous.files.get(key) {
                        next.files.insert(key.clone(), old.clone());
                    }
                }
            }
        }
        if !builder.is_empty() {
            sink(builder.take()).map_err(|reason| SourceError::Stopped { source_name: self.name.clone(), reason })?;
        }
        Ok(SourceReport {
            records: tally.records,
            skipped: tally.skipped,
            missing: false,
            cursor: Some(serde_json::to_string(&next).unwrap_or_default()),
            warnings,
            ..SourceReport::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_like_a_shell_star() {
        assert!(glob_match("*.ndjson", "th-1.ndjson"));
        assert!(glob_match("*.ndjson", ".ndjson"));
        assert!(!glob_match("*.ndjson", "th-1.ndjson.1"));
        assert!(glob_match("th-*-*.log", "th-a-b.log"));
        assert!(!glob_match("th-*-*.log", "th-a.log"));
        assert!(glob_match("exact", "exact"));
    }

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
