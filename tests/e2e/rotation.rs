//! Log rotation against a model, in the style Vector and Fluent Bit test their
//! file sources: random sequences of appends, partial lines, rename-and-create,
//! copytruncate, truncate-and-rewrite, rewrite-and-replace, deletions and inode
//! reuse, done to real files between scans and *during* scans (between two
//! batches), checked against the sequence's own ground truth: every complete
//! `turn.completed` line present when a scan starts is delivered by the end of
//! that scan, and no line is ever delivered twice.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use sentinel_host::model::record::Batch;
use sentinel_host::sources::{EventsSource, ReadContext, Source};
use xtask::datagen::Rng;

const THREADS: &[&str] = &["alpha", "beta", "gamma"];
const HEADER: &str = r#"{"type":"log.opened","v":1}"#;

/// The model: what each thread's live file and the rotated files hold.
struct Model {
    dir: PathBuf,
    rng: Rng,
    next_id: u64,
    clock: i64,
    rotations: u64,
    headers: bool,
    /// Lines delivered so far, by id.
    delivered: BTreeMap<String, u32>,
    ops: Vec<String>,
    /// The second half of a line whose first half was written.
    partial_rest: BTreeMap<String, String>,
}

fn event(id: u64, thread: &str, at: i64) -> String {
    format!(
        r#"{{"type":"turn.completed","id":"ev-{id}","threadId":"{thread}","turnId":"t{id}","botId":"b","createdAt":{at},"ok":false,"stopReason":"error","cost":0.5}}"#
    )
}

impl Model {
    fn path(&self, thread: &str) -> PathBuf {
        self.dir.join(format!("{thread}.ndjson"))
    }

    /// Complete event ids present in every matching file right now.
    fn present(&self) -> BTreeSet<String> {
        let mut ids = BTreeSet::new();
        for entry in std::fs::read_dir(&self.dir).unwrap() {
            let p = entry.unwrap().path();
            if !p.to_string_lossy().ends_with(".ndjson") {
                continue;
            }
            let text = std::fs::read(&p).unwrap();
            let complete = match text.iter().rposition(|&b| b == b'\n') {
                Some(i) => &text[..=i],
                None => continue,
            };
            for line in complete.split(|&b| b == b'\n') {
                if let Ok(v) = serde_json::from_slice::<serde_json::Value>(line)
                    && v["type"] == "turn.completed"
                {
                    ids.insert(v["id"].as_str().unwrap().to_owned());
                }
            }
        }
        ids
    }

    fn complete_lines(path: &Path) -> Vec<String> {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let end = text.rfind('\n').map_or(0, |i| i + 1);
        text[..end].lines().map(str::to_owned).collect()
    }

    fn append(&mut self, thread: &str, n: usize) {
        // A partial line left by an earlier op is completed first.
        self.finish_partial(thread);
        let path = self.path(thread);
        let fresh = !path.exists();
        let mut f = OpenOptions::new().create(true).append(true).open(&path).unwrap();
        if fresh && self.headers {
            writeln!(f, "{HEADER}").unwrap();
        }
        for _ in 0..n {
            self.next_id += 1;
            self.clock += 1 + self.rng.below(5) as i64;
            writeln!(f, "{}", event(self.next_id, thread, self.clock)).unwrap();
        }
    }

    /// One random operation on the files. While a scan is reading (`in_scan`),
    /// only changes a reader can see atomically happen: appends, partial lines,
    /// renames, rewrites renamed into place and deletions. Truncating a file in
    /// place while a reader is inside it is a race no tailer can win (logrotate
    /// documents it for copytruncate), so those happen between scans.
    fn step(&mut self, in_scan: bool) {
        let thread = THREADS[self.rng.below(THREADS.len() as u64) as usize];
        let path = self.path(thread);
        let mut op = self.rng.below(100);
        if in_scan && matches!(op, 58..=73 | 94..) {
            op = self.rng.below(58);
        }
        let name = match op {
            0..=39 => {
                let n = 1 + self.rng.below(6) as usize;
                self.append(thread, n);
                "append"
            }
            40..=47 => {
                // Half a line, no newline yet: it must not be consumed.
                self.append(thread, 0);
                self.next_id += 1;
                self.clock += 1;
                let line = event(self.next_id, thread, self.clock);
                let mut f = OpenOptions::new().append(true).open(&path).unwrap();
                // The partial line is completed by the next append to this thread.
                f.write_all(&line.as_bytes()[..line.len() / 2]).unwrap();
                self.partial_rest.insert(thread.to_owned(), line[line.len() / 2..].to_owned());
                "partial"
            }
            48..=57 if path.exists() => {
                self.finish_partial(thread);
                self.rotations += 1;
                std::fs::rename(&path, self.dir.join(format!("{thread}.r{}.ndjson", self.rotations))).unwrap();
                let n = self.rng.below(3) as usize;
                self.append(thread, n);
                "rename-and-create"
            }
            58..=65 if path.exists() => {
                self.finish_partial(thread);
                self.rotations += 1;
                std::fs::copy(&path, self.dir.join(format!("{thread}.r{}.ndjson", self.rotations))).unwrap();
                OpenOptions::new().write(true).truncate(true).open(&path).unwrap();
                "copytruncate"
            }
            66..=73 if path.exists() => {
                // Rewritten in place, keeping only its newest lines (same inode).
                self.finish_partial(thread);
                let lines = Self::complete_lines(&path);
                let keep = self.rng.below(lines.len() as u64 + 1) as usize;
                let tail = lines[lines.len() - keep..].join("\n");
                let mut f = OpenOptions::new().write(true).truncate(true).open(&path).unwrap();
                if keep > 0 {
                    writeln!(f, "{tail}").unwrap();
                }
                "truncate-and-rewrite"
            }
            74..=81 if path.exists() => {
                // Rewritten to a new file renamed over the old (new inode).
                self.finish_partial(thread);
                let lines = Self::complete_lines(&path);
                let keep = self.rng.below(lines.len() as u64 + 1) as usize;
                let tmp = self.dir.join(format!("{thread}.tmp"));
                let mut body = lines[lines.len() - keep..].join("\n");
                if keep > 0 {
                    body.push('\n');
                }
                std::fs::write(&tmp, body).unwrap();
                std::fs::rename(&tmp, &path).unwrap();
                "rewrite-and-replace"
            }
            82..=87 => {
                // Retention deletes an idle log; the next append makes a new
                // file, which may well reuse the inode.
                self.finish_partial(thread);
                let _ = std::fs::remove_file(&path);
                let n = self.rng.below(2) as usize;
                self.append(thread, n);
                "delete-and-recreate"
            }
            88..=93 => {
                let rotated: Vec<PathBuf> = std::fs::read_dir(&self.dir)
                    .unwrap()
                    .map(|e| e.unwrap().path())
                    .filter(|p| p.to_string_lossy().contains(".r"))
                    .collect();
                if let Some(p) = rotated.first() {
                    std::fs::remove_file(p).unwrap();
                }
                "delete-rotated"
            }
            _ => {
                // Offset past the end: shrink below what was read, then grow a little.
                if path.exists() {
                    self.finish_partial(thread);
                    let lines = Self::complete_lines(&path);
                    let mut f = OpenOptions::new().write(true).truncate(true).open(&path).unwrap();
                    if let Some(last) = lines.last() {
                        writeln!(f, "{last}").unwrap();
                    }
                }
                "shrink"
            }
        };
        self.ops.push(format!("{name} {thread}"));
    }

    fn finish_partial(&mut self, thread: &str) {
        if let Some(rest) = self.partial_rest.remove(thread) {
            // The file may have been deleted meanwhile: then the line is gone.
            if let Ok(mut f) = OpenOptions::new().append(true).open(self.path(thread)) {
                writeln!(f, "{rest}").unwrap();
            }
        }
    }
}

/// Collects delivered ids from batches.
fn ids_of(batch: &Batch) -> Vec<String> {
    let (text, ends) = (&batch.text, &batch.text_ends);
    // `id` is the first text column: its cells are the first `rows` ends.
    (0..batch.rows as usize)
        .map(|r| {
            let start = if r == 0 { 0 } else { ends[r - 1] as usize };
            String::from_utf8(text[start..ends[r] as usize].to_vec()).unwrap()
        })
        .collect()
}

struct Harness {
    seed: u64,
    model: Model,
    cursor: Option<String>,
    source: EventsSource,
    data_dir: PathBuf,
}

impl Harness {
    /// One scan; `during` random operations happen between batches.
    fn scan(&mut self, during: u32) {
        let before = self.model.present();
        if std::env::var_os("ROTATION_DEBUG").is_some() {
            for e in std::fs::read_dir(&self.model.dir).unwrap() {
                let p = e.unwrap().path();
                eprintln!("--- {}\n{}", p.display(), std::fs::read_to_string(&p).unwrap_or_default());
            }
            eprintln!("cursor before: {:?}", self.cursor);
        }
        let ctx =
            ReadContext { data_dir: &self.data_dir, scan_time_ms: 0, batch_rows: 2, cursor: self.cursor.as_deref() };
        let mut got = Vec::new();
        let model = &mut self.model;
        let mut left = during;
        let report = self
            .source
            .read(&ctx, &mut |batch| {
                got.extend(ids_of(&batch));
                if left > 0 {
                    left -= 1;
                    model.step(true);
                }
                Ok(())
            })
            .unwrap();
        self.cursor = report.cursor;
        if std::env::var_os("ROTATION_DEBUG").is_some() {
            eprintln!("delivered: {got:?}\ncursor after: {:?}\nops so far: {:?}", self.cursor, self.model.ops);
        }
        for id in got {
            *self.model.delivered.entry(id).or_default() += 1;
        }
        let twice: Vec<_> = self.model.delivered.iter().filter(|(_, n)| **n > 1).collect();
        assert!(twice.is_empty(), "seed {}: delivered twice: {twice:?}\nops: {:?}", self.seed, self.model.ops);
        // A scan with no concurrent change delivers everything present when it
        // started; lines moved during a scan are owed by the next quiet one.
        let missed: Vec<_> = if during > 0 {
            Vec::new()
        } else {
            before.iter().filter(|id| !self.model.delivered.contains_key(*id)).collect()
        };
        assert!(
            missed.is_empty(),
            "seed {}: present at scan start but not delivered: {missed:?}\nops: {:?}\ncursor: {:?}",
            self.seed,
            self.model.ops,
            self.cursor
        );
        self.model.ops.push("scan".into());
    }
}

fn run_sequence(seed: u64, steps: usize, concurrent: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let data_dir = tmp.path().to_owned();
    let dir = data_dir.join("events");
    std::fs::create_dir_all(&dir).unwrap();
    let mut rng = Rng::new(seed);
    let headers = rng.below(2) == 0;
    let mut h = Harness {
        seed,
        model: Model {
            dir,
            rng,
            next_id: 0,
            clock: 1_000,
            rotations: 0,
            headers,
            delivered: BTreeMap::new(),
            ops: Vec::new(),
            partial_rest: BTreeMap::new(),
        },
        cursor: None,
        source: EventsSource::default(),
        data_dir,
    };
    for _ in 0..steps {
        match h.model.rng.below(10) {
            0..=1 => {
                let during = if concurrent { h.model.rng.below(3) as u32 } else { 0 };
                h.scan(during);
            }
            _ => h.model.step(false),
        }
    }
    // Quiet at last: two scans deliver everything still present.
    h.scan(0);
    h.scan(0);
}

/// The seeds a model test runs: `ROTATION_SEED=N` alone, or
/// `ROTATION_SEEDS` (300 by default) from `first`. A count of 0 or a value
/// that is not a number is refused: a model test that runs no sequence
/// would pass having checked nothing.
fn seeds(first: u64) -> std::ops::Range<u64> {
    if let Ok(s) = std::env::var("ROTATION_SEED") {
        let seed: u64 = s.parse().unwrap_or_else(|_| panic!("ROTATION_SEED={s:?} is not a seed (a number)"));
        return seed..seed + 1;
    }
    let count = match std::env::var("ROTATION_SEEDS") {
        Ok(n) => n.parse::<u64>().unwrap_or_else(|_| panic!("ROTATION_SEEDS={n:?} is not a count (a number)")),
        Err(_) => 300,
    };
    assert!(count > 0, "ROTATION_SEEDS=0 runs no sequence and checks nothing: give at least 1");
    first..first + count
}

#[test]
fn rotation_model_every_line_exactly_once() {
    for seed in seeds(0) {
        run_sequence(seed, 80, false);
    }
}

#[test]
fn rotation_model_with_changes_during_scans() {
    for seed in seeds(1000) {
        run_sequence(seed, 80, true);
    }
}

#[test]
fn two_files_with_identical_first_lines_keep_their_own_offsets() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("events");
    std::fs::create_dir_all(&dir).unwrap();
    for t in ["a", "b"] {
        std::fs::write(
            dir.join(format!("{t}.ndjson")),
            format!("{HEADER}\n{}\n", event(if t == "a" { 1 } else { 2 }, t, 10)),
        )
        .unwrap();
    }
    let source = EventsSource::default();
    let read = |cursor: Option<&str>| {
        let ctx = ReadContext { data_dir: tmp.path(), scan_time_ms: 0, batch_rows: 10, cursor };
        let mut ids = Vec::new();
        let r = source.read(&ctx, &mut |b| {
            ids.extend(ids_of(&b));
            Ok(())
        });
        (ids, r.unwrap().cursor)
    };
    let (first, cursor) = read(None);
    assert_eq!(first, ["ev-1", "ev-2"]);
    // b is replaced by a different file with the same first line.
    std::fs::write(dir.join("b.ndjson"), format!("{HEADER}\n{}\n{}\n", event(3, "b", 20), event(4, "b", 21))).unwrap();
    let (second, _) = read(cursor.as_deref());
    assert_eq!(second, ["ev-3", "ev-4"]);
}

#[test]
fn malformed_invalid_utf8_and_overlong_lines_are_skipped_and_counted() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("events");
    std::fs::create_dir_all(&dir).unwrap();
    let mut body = Vec::new();
    body.extend(format!("{}\n", event(1, "t", 1)).bytes());
    body.extend(b"this is not json\n");
    body.extend(b"{\"type\":\"turn.completed\",\"id\":\"ev-\xff\xfe\"}\n");
    body.extend(
        format!("{{\"type\":\"turn.completed\",\"id\":\"big\",\"pad\":\"{}\"}}\n", "x".repeat(2 << 20)).bytes(),
    );
    body.extend(b"{\"type\":\"turn.comp");
    body.extend(b"leted\",\"truncated\n");
    body.extend(format!("{}\n", event(2, "t", 2)).bytes());
    std::fs::write(dir.join("t.ndjson"), &body).unwrap();
    let ctx = ReadContext { data_dir: tmp.path(), scan_time_ms: 0, batch_rows: 10, cursor: None };
    let mut ids = Vec::new();
    let report = EventsSource::default()
        .read(&ctx, &mut |b| {
            ids.extend(ids_of(&b));
            Ok(())
        })
        .unwrap();
    assert_eq!(ids, ["ev-1", "ev-2"]);
    assert_eq!(report.skipped, 4, "not json, invalid utf-8, over-long, truncated json");
}
