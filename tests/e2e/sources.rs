//! The sources end to end: a writer in another process that checkpoints while
//! scans run, a data dir left byte-for-byte as it was, and malformed, missing
//! or unreadable inputs that fail one source and never the scan.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use rusqlite::{Connection, OpenFlags, params};
use serde_json::{Value, json};
use xtask::datagen::{self, DataSpec, Rng};

use crate::support::*;

/// The summary entry of one source.
fn source<'a>(summary: &'a Value, name: &str) -> &'a Value {
    summary["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no source {name} in {summary:#}"))
}

/// The sum of `count` over the `tool_error` issues (other detectors report
/// other things from the same data dir).
fn total_count(out: &Path) -> u64 {
    if !out.join("issues.jsonl").exists() {
        return 0;
    }
    issues(out).iter().filter(|i| i["kind"] == "tool_error").map(|i| i["count"].as_u64().unwrap()).sum()
}

/// Asserts every source but `except` read fine.
fn assert_others_ok(summary: &Value, except: &[&str]) {
    for s in summary["sources"].as_array().unwrap() {
        if !except.iter().any(|e| s["name"] == *e) {
            assert_eq!(s["status"], "ok", "the other sources still read: {summary:#}");
        }
    }
}

/// `turn.completed` lines datagen writes: one per turn.
fn completed_turns(spec: &DataSpec) -> u64 {
    (spec.bots * spec.threads_per_bot * spec.turns_per_thread) as u64
}

/// Asserts a source read fine and returns its record count.
fn ok_records(summary: &Value, name: &str) -> u64 {
    let s = source(summary, name);
    assert_eq!(s["status"], "ok", "source {name}: {summary:#}");
    assert!(s.get("error").is_none(), "source {name}: {summary:#}");
    s["records"].as_u64().unwrap()
}

/// Asserts a source failed with an error naming `file` and the source.
fn assert_failed(summary: &Value, name: &str, file: &str) {
    let s = source(summary, name);
    assert_eq!(s["status"], "failed", "source {name}: {summary:#}");
    assert_eq!(s["records"], 0, "{summary:#}");
    let error = s["error"].as_str().unwrap_or_else(|| panic!("a failed source says why: {summary:#}"));
    assert!(error.contains(file), "the error names {file}: {error}");
    assert!(error.contains(name), "the error names the source {name}: {error}");
}

// ---------------------------------------------------------------------------
// A writer in another process.
// ---------------------------------------------------------------------------

/// Rows between two checkpoints (`WRITER_CHECKPOINT_EVERY` of the writer).
const CHECKPOINT_EVERY: u64 = 20;
/// Failed rows written after the last checkpoint: they live only in the -wal.
const HELD_FAILED: u64 = 15;

/// What the writer child (`tests/e2e/wal_writer.py`) did, saved after every row.
#[derive(Debug, Default, serde::Deserialize)]
struct WriterStatus {
    /// Activity rows in messages.db, failed or not.
    rows: u64,
    /// Failed tool calls among them.
    failed: u64,
    /// Rows in runtime.db.
    runtime_rows: u64,
    /// `rows` when messages.db was last checkpointed whole.
    rows_at_checkpoint: u64,
    /// Checkpoints tried, over both databases.
    attempts: u64,
    /// Checkpoints that completed (busy = 0): the writer retries each until it does.
    checkpoints: u64,
    /// Times a checkpoint reported busy (a reader inside a query) and was tried again.
    busy_retries: u64,
    /// The rows after the last checkpoint are written; the connections stay open.
    held: bool,
}

impl WriterStatus {
    fn load(ctl: &Path) -> Option<Self> {
        serde_json::from_slice(&std::fs::read(ctl.join("status.json")).ok()?).ok()
    }
}

/// The writer child, stopped and reaped however the test ends.
struct WriterChild {
    child: Child,
    ctl: PathBuf,
}

impl WriterChild {
    fn spawn(data: &Path, ctl: &Path) -> Self {
        std::fs::create_dir_all(ctl).unwrap();
        // The application's writer: another process, another SQLite (Python's).
        let child = Command::new("python3")
            .arg(root().join("tests/e2e/wal_writer.py"))
            .arg(data)
            .arg(ctl)
            .env("WRITER_CHECKPOINT_EVERY", CHECKPOINT_EVERY.to_string())
            .env("WRITER_HELD_FAILED", HELD_FAILED.to_string())
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(ctl.join("child.out")).unwrap())
            .stderr(std::fs::File::create(ctl.join("child.err")).unwrap())
            .spawn()
            .expect("python3 runs the writer (the README lists python3 as a requirement)");
        WriterChild { child, ctl: ctl.to_owned() }
    }

    fn output(&self) -> String {
        let read = |n: &str| std::fs::read_to_string(self.ctl.join(n)).unwrap_or_default();
        format!("stdout:\n{}\nstderr:\n{}", read("child.out"), read("child.err"))
    }

    /// Waits until the child's status satisfies `ready`.
    fn wait_for(&mut self, what: &str, ready: impl Fn(&WriterStatus) -> bool) -> WriterStatus {
        // A bound on a hang, not a threshold: on a loaded machine a second is slow.
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(st) = WriterStatus::load(&self.ctl)
                && ready(&st)
            {
                return st;
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("the writer exited ({status}) before {what}\n{}", self.output());
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}\n{}", self.output());
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Fails the test if the writer has exited (an insert that met a lock ends it).
    fn assert_alive(&mut self, when: &str) {
        if let Some(status) = self.child.try_wait().unwrap() {
            panic!("the writer exited ({status}) {when}: a lock held by the scan?\n{}", self.output());
        }
    }

    /// Lets the child close its connections and exit; its final status.
    fn finish(mut self) -> WriterStatus {
        std::fs::write(self.ctl.join("stop"), b"").unwrap();
        std::fs::write(self.ctl.join("exit"), b"").unwrap();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "the writer failed ({status})\n{}", self.output());
        WriterStatus::load(&self.ctl).expect("the writer saved its status")
    }
}

impl Drop for WriterChild {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_some() {
            return;
        }
        let _ = std::fs::write(self.ctl.join("stop"), b"");
        let _ = std::fs::write(self.ctl.join("exit"), b"");
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if self.child.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Rows of `messages` in the main database file alone (`immutable=1` reads
/// no -wal and creates nothing).
fn rows_in_main_file(db: &Path) -> u64 {
    let uri = format!("file:{}?immutable=1", db.display());
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI;
    let c = Connection::open_with_flags(uri, flags).unwrap();
    c.query_row("SELECT COUNT(*) FROM messages", [], |r| r.get::<_, i64>(0)).unwrap() as u64
}

#[test]
fn wal_checkpoints_are_never_blocked_and_rows_only_in_the_wal_are_counted() {
    let s = Scratch::new();
    let data = s.path("data");
    // The datagen schema (messages.db and runtime.db in WAL mode), no rows.
    let truth = datagen::generate(&data, &DataSpec { bots: 0, ..DataSpec::default() }).unwrap();
    assert_eq!(truth.activity_rows, 0);
    let detectors = s.detectors_with(&[]);
    let out = s.path("out");

    let mut writer = WriterChild::spawn(&data, &s.path("ctl"));
    writer.wait_for("two checkpoints", |st| st.checkpoints >= 2);
    let mut scans_overlapped = 0;
    // Queue waits read from runtime.db: one per assignment (both of its events
    // are written in one transaction, so none is ever seen open).
    let mut runtime_records = 0;
    // At least three scans, and as many more as it takes for the writer to
    // have checkpointed ten times (scans are fast once components are cached).
    for round in 0.. {
        let so_far = WriterStatus::load(&s.path("ctl")).unwrap();
        if round >= 3 && so_far.checkpoints >= 10 || round >= 200 {
            break;
        }
        let before = so_far;
        let summary = scan(&detectors, &data, &out);
        let after = WriterStatus::load(&s.path("ctl")).unwrap();
        ok_records(&summary, "messages");
        runtime_records += ok_records(&summary, "runtime");
        assert_eq!(detector(&summary, "tool_error")["status"], "ok", "{summary:#}");
        // Every insert runs with a busy timeout of 0: a lock held by the scan
        // would have failed one and ended the writer.
        writer.assert_alive("after a scan");
        if after.rows > before.rows && after.checkpoints > before.checkpoints {
            scans_overlapped += 1;
        }
    }
    assert!(scans_overlapped >= 2, "the writer wrote and completed checkpoints while the scans ran");

    // Rows written after the last checkpoint live only in messages.db-wal.
    std::fs::write(s.path("ctl").join("stop"), b"").unwrap();
    let held = writer.wait_for("the rows after the last checkpoint", |st| st.held);
    let db = data.join("messages.db");
    assert!(std::fs::metadata(data.join("messages.db-wal")).unwrap().len() > 0, "the newest rows are in the -wal");
    assert_eq!(rows_in_main_file(&db), held.rows_at_checkpoint, "the main file holds what was checkpointed");
    assert!(held.rows - held.rows_at_checkpoint >= HELD_FAILED, "{held:?}");
    let last = scan(&detectors, &data, &out);
    ok_records(&last, "messages");
    runtime_records += ok_records(&last, "runtime");
    assert_eq!(runtime_records, held.runtime_rows / 2, "every assignment in runtime.db, -wal included, read once");
    assert!(
        std::fs::metadata(data.join("messages.db-wal")).unwrap().len() > 0,
        "the scan checkpointed nothing: the rows are still only in the -wal"
    );
    let counted = total_count(&out);

    let done = writer.finish();
    eprintln!("writer: {done:?} ({} busy checkpoint attempts retried)", done.busy_retries);
    assert_eq!(done.rows, held.rows, "no row after the held ones");
    // The writer retries a busy checkpoint until it completes: none is left
    // pending, and every insert succeeded without waiting (busy timeout 0).
    assert_eq!(done.checkpoints, done.attempts, "every checkpoint completed: {done:?}");
    assert_eq!(
        done.attempts,
        2 * (held.rows_at_checkpoint / CHECKPOINT_EVERY),
        "both databases, every {CHECKPOINT_EVERY} rows"
    );
    assert!(done.checkpoints >= 10, "enough checkpoints to mean something: {done:?}");
    assert!(done.failed > HELD_FAILED && done.failed < done.rows, "{done:?}");
    assert_eq!(counted, done.failed, "every failed row the writer wrote is counted exactly once, -wal rows too");
    let runtime = Connection::open_with_flags(data.join("runtime.db"), OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let runtime_rows: i64 = runtime.query_row("SELECT COUNT(*) FROM assignment_events", [], |r| r.get(0)).unwrap();
    assert_eq!(runtime_rows as u64, done.runtime_rows, "runtime.db lost no write");
}

// ---------------------------------------------------------------------------
// The data dir, byte for byte.
// ---------------------------------------------------------------------------

/// One entry of the data dir as it was.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    Dir { mtime: SystemTime },
    File { mtime: SystemTime, len: u64, bytes: Vec<u8> },
    Other,
}

/// Every entry under `dir` (itself included, as ""), recursively, with its
/// bytes and mtime.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Entry> {
    fn walk(root: &Path, path: &Path, out: &mut BTreeMap<PathBuf, Entry>) {
        let meta = std::fs::symlink_metadata(path).unwrap();
        let rel = path.strip_prefix(root).unwrap().to_owned();
        let mtime = meta.modified().unwrap();
        if meta.is_dir() {
            out.insert(rel, Entry::Dir { mtime });
            for e in std::fs::read_dir(path).unwrap() {
                walk(root, &e.unwrap().path(), out);
            }
        } else if meta.is_file() {
            out.insert(rel, Entry::File { mtime, len: meta.len(), bytes: std::fs::read(path).unwrap() });
        } else {
            out.insert(rel, Entry::Other);
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// What differs between two snapshots, one line per entry (never the bytes).
fn changes(before: &BTreeMap<PathBuf, Entry>, after: &BTreeMap<PathBuf, Entry>, ignore: &[&str]) -> Vec<String> {
    let mut v = Vec::new();
    for (p, b) in before {
        if ignore.iter().any(|i| p.as_os_str() == *i) {
            continue;
        }
        match (b, after.get(p)) {
            (_, None) => v.push(format!("{} was deleted", p.display())),
            (b, Some(a)) if a == b => {}
            (Entry::File { mtime: m1, len: l1, bytes: b1 }, Some(Entry::File { mtime: m2, len: l2, bytes: b2 })) => {
                if b1 != b2 {
                    v.push(format!("{}: bytes changed ({l1} -> {l2} bytes)", p.display()));
                }
                if m1 != m2 {
                    v.push(format!("{}: mtime changed", p.display()));
                }
            }
            (Entry::Dir { .. }, Some(Entry::Dir { .. })) => {
                v.push(format!("{}/: mtime changed (an entry was created or removed)", p.display()))
            }
            (b, Some(a)) => v.push(format!("{}: {b:?} became {a:?}", p.display())),
        }
    }
    for p in after.keys().filter(|p| !before.contains_key(*p)) {
        v.push(format!("{} was created", p.display()));
    }
    v
}

/// Names ending like SQLite's side files.
fn side_files(snap: &BTreeMap<PathBuf, Entry>) -> Vec<String> {
    snap.keys()
        .map(|p| p.to_string_lossy().into_owned())
        .filter(|p| p.ends_with("-wal") || p.ends_with("-shm") || p.ends_with("-journal"))
        .collect()
}

#[test]
fn a_scan_of_a_quiescent_data_dir_changes_no_byte_no_mtime_and_creates_no_file() {
    let s = Scratch::new();
    let data = s.path("data");
    let spec = DataSpec::default();
    let truth = datagen::generate(&data, &spec).unwrap();
    let before = snapshot(&data);
    assert_eq!(side_files(&before), Vec::<String>::new(), "datagen closed its connections: the dir is quiescent");
    assert!(before.contains_key(Path::new("messages.db")) && before.contains_key(Path::new("runtime.db")));
    let detectors = s.detectors_with(&[]);

    let first = scan(&detectors, &data, &s.path("out"));
    assert_eq!(changes(&before, &snapshot(&data), &[]), Vec::<String>::new(), "the first scan left no trace");
    // Every source really read its file, so the check above means something.
    for src in first["sources"].as_array().unwrap() {
        assert_eq!(src["status"], "ok", "{first:#}");
    }
    assert_eq!(ok_records(&first, "messages"), truth.failures.len() as u64);
    assert_eq!(ok_records(&first, "events"), completed_turns(&spec));
    assert_eq!(ok_records(&first, "bots"), spec.bots as u64);

    // Again, with cursors, and into a fresh output folder.
    scan(&detectors, &data, &s.path("out"));
    scan(&detectors, &data, &s.path("out2"));
    assert_eq!(changes(&before, &snapshot(&data), &[]), Vec::<String>::new(), "later scans left no trace");
}

#[test]
fn a_scan_beside_a_live_writer_creates_nothing_and_leaves_the_database_bytes_unchanged() {
    let s = Scratch::new();
    let data = s.path("data");
    let spec = DataSpec::default();
    let truth = datagen::generate(&data, &spec).unwrap();
    // The application is running: its connection owns -wal and -shm, and the
    // newest failures are only in the -wal.
    let writer = Connection::open(data.join("messages.db")).unwrap();
    writer.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
    let live = 12;
    for i in 0..live {
        let data = json!({"turnId": "turn-live", "from": {"botId": "bot-00"},
            "tool": {"name": "mcp__agents__send_message", "ok": false, "output": format!("queue {i} is full")}});
        writer
            .execute(
                "INSERT INTO messages(id, thread_id, at, type, data) VALUES(?1, 'th-live', ?2, 'activity', ?3)",
                params![format!("live-{i:03}"), spec.start_ms + 100_000_000 + i, data.to_string()],
            )
            .unwrap();
    }
    let before = snapshot(&data);
    assert_eq!(side_files(&before), ["messages.db-shm", "messages.db-wal"], "the writer's side files");
    let wal_len = |snap: &BTreeMap<PathBuf, Entry>| match &snap[Path::new("messages.db-wal")] {
        Entry::File { len, .. } => *len,
        e => panic!("{e:?}"),
    };
    assert!(wal_len(&before) > 0);
    let detectors = s.detectors_with(&[]);

    let summary = scan(&detectors, &data, &s.path("out"));
    let after = snapshot(&data);
    // The scanner shares the writer's -shm (its read marks live there); it
    // must not touch anything else, nor create or remove any file.
    assert_eq!(changes(&before, &after, &["messages.db-shm"]), Vec::<String>::new());
    assert!(matches!(after[Path::new("messages.db-shm")], Entry::File { .. }));
    assert_eq!(
        ok_records(&summary, "messages"),
        truth.failures.len() as u64 + live as u64,
        "the rows only in the -wal were read"
    );
    assert_eq!(total_count(&s.path("out")), truth.failures.len() as u64 + live as u64);

    // The writer is unharmed: it writes and checkpoints at once.
    writer.busy_timeout(Duration::from_millis(0)).unwrap();
    writer.execute("UPDATE messages SET at = at WHERE id = 'live-000'", []).unwrap();
    let busy: i64 = writer.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0)).unwrap();
    assert_eq!(busy, 0, "no reader lingers after the scan");
}

// ---------------------------------------------------------------------------
// Malformed, missing and unreadable inputs.
// ---------------------------------------------------------------------------

#[test]
fn garbage_invalid_utf8_and_truncated_event_lines_are_skipped_and_counted_while_valid_lines_are_read() {
    let s = Scratch::new();
    let data = s.path("data");
    let spec = DataSpec::default();
    let truth = datagen::generate(&data, &spec).unwrap();
    let completed = |id: &str, at: i64| {
        json!({"type": "turn.completed", "id": id, "threadId": "th-bad", "turnId": format!("turn-{id}"),
            "botId": "bot-00", "createdAt": at, "ok": false, "stopReason": "error", "cost": 0.5})
        .to_string()
    };
    let mut log = Vec::new();
    let mut line = |bytes: &[u8]| {
        log.extend_from_slice(bytes);
        log.push(b'\n');
    };
    line(completed("ev-bad-1", 1_000).as_bytes());
    line(b"this is not json at all");
    line(br#"{"type":"turn.started","id":"ev-bad-s","threadId":"th-bad","createdAt":1500}"#);
    line(b"[1, 2, 3]");
    line(completed("ev-bad-2", 2_000).as_bytes());
    // Invalid UTF-8 inside an otherwise valid event.
    let mut invalid = completed("ev-bad-x", 2_500).into_bytes();
    invalid.splice(10..10, [0xff, 0xfe, 0xc3]);
    line(&invalid);
    // A line cut short mid-write, then the rest of the file went on.
    let whole = completed("ev-bad-t", 2_700);
    line(&whole.as_bytes()[..whole.len() / 2]);
    line(b"");
    line(completed("ev-bad-3", 3_000).as_bytes());
    // A last line still being written: no newline yet, left for a later scan.
    let partial = completed("ev-bad-p", 4_000);
    log.extend_from_slice(&partial.as_bytes()[..partial.len() - 7]);
    std::fs::write(data.join("events").join("th-bad.ndjson"), &log).unwrap();
    // A file of nothing but garbage beside it.
    std::fs::write(data.join("events").join("noise.ndjson"), b"\x00\x01\x02\n{{{{\n\xff\xff\xff\xff\n").unwrap();

    let out = s.path("out");
    let summary = scan(&s.detectors_with(&[]), &data, &out);
    let events = source(&summary, "events");
    assert_eq!(events["status"], "ok", "{summary:#}");
    assert_eq!(events["records"], completed_turns(&spec) + 3, "the valid turn.completed lines, and only them");
    let skipped = events["skipped"].as_u64().unwrap();
    assert!(skipped > 0, "{summary:#}");
    assert_eq!(skipped, 4 + 3, "each garbage, non-UTF-8 or truncated line counts once: {summary:#}");
    // The rest of the scan is untouched.
    assert_eq!(ok_records(&summary, "messages"), truth.failures.len() as u64);
    assert_eq!(ok_records(&summary, "bots"), spec.bots as u64);
    assert_eq!(total_count(&out), truth.failures.len() as u64);

    // Once the last line is complete, it is read, and nothing is read twice.
    let mut f = std::fs::OpenOptions::new().append(true).open(data.join("events").join("th-bad.ndjson")).unwrap();
    std::io::Write::write_all(&mut f, &partial.as_bytes()[partial.len() - 7..]).unwrap();
    std::io::Write::write_all(&mut f, b"\n").unwrap();
    drop(f);
    let again = scan(&s.detectors_with(&[]), &data, &out);
    assert_eq!(source(&again, "events")["records"], 1, "{again:#}");
    assert_eq!(source(&again, "events")["skipped"], 0, "{again:#}");
}

#[test]
fn a_corrupt_messages_db_fails_its_source_naming_the_file_and_the_scan_completes() {
    let s = Scratch::new();
    let data = s.path("data");
    let spec = DataSpec::default();
    datagen::generate(&data, &spec).unwrap();
    let db = data.join("messages.db");
    let len = std::fs::metadata(&db).unwrap().len() as usize;
    let mut rng = Rng::new(99);
    let noise: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
    std::fs::write(&db, &noise).unwrap();

    let out = s.path("out");
    let o = run(&s.detectors_with(&[]), &data, &out, &[]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "a broken source never fails the scan\n{stderr}");
    let summary: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_failed(&summary, "messages", "messages.db");
    assert_others_ok(&summary, &["messages"]);
    assert_eq!(ok_records(&summary, "bots"), spec.bots as u64);
    assert_eq!(ok_records(&summary, "events"), completed_turns(&spec));
    assert_eq!(detector(&summary, "tool_error")["status"], "ok", "{summary:#}");
    assert_eq!(total_count(&out), 0, "no failure read from a corrupt file");
    assert_others_ok(&summary, &["messages"]);
    assert_eq!(std::fs::read(&db).unwrap(), noise, "the corrupt file is left as it was");
    assert_eq!(listing(&data), ["bots.json", "events", "messages.db", "runtime.db"], "nothing created");
}

#[test]
fn a_missing_file_is_reported_missing_and_the_other_sources_still_read() {
    let spec = DataSpec::default();

    // No messages.db.
    let s = Scratch::new();
    let data = s.path("data");
    datagen::generate(&data, &spec).unwrap();
    std::fs::remove_file(data.join("messages.db")).unwrap();
    let summary = scan(&s.detectors_with(&[]), &data, &s.path("out"));
    let messages = source(&summary, "messages");
    assert_eq!(messages["status"], "missing", "{summary:#}");
    assert_others_ok(&summary, &["messages"]);
    assert_eq!((messages["records"].as_u64(), messages.get("error")), (Some(0), None));
    assert_eq!(ok_records(&summary, "bots"), spec.bots as u64);
    assert_eq!(ok_records(&summary, "events"), completed_turns(&spec));
    assert!(!data.join("messages.db").exists(), "a missing database is not created");
    assert_eq!(listing(&data), ["bots.json", "events", "runtime.db"]);

    // No bots.json and no events folder.
    let s = Scratch::new();
    let data = s.path("data");
    let truth = datagen::generate(&data, &spec).unwrap();
    std::fs::remove_file(data.join("bots.json")).unwrap();
    std::fs::remove_dir_all(data.join("events")).unwrap();
    let summary = scan(&s.detectors_with(&[]), &data, &s.path("out"));
    for name in ["bots", "events"] {
        assert_eq!(source(&summary, name)["status"], "missing", "{summary:#}");
        assert_eq!(source(&summary, name)["records"], 0);
    }
    assert_others_ok(&summary, &["bots", "events"]);
    assert_eq!(ok_records(&summary, "messages"), truth.failures.len() as u64);
    assert_eq!(total_count(&s.path("out")), truth.failures.len() as u64);
}

#[test]
fn a_bots_json_that_is_not_json_fails_its_source_naming_it_and_failures_are_still_reported() {
    let s = Scratch::new();
    let data = s.path("data");
    let spec = DataSpec::default();
    let truth = datagen::generate(&data, &spec).unwrap();
    std::fs::write(data.join("bots.json"), b"{\"bots\": [ this is not json").unwrap();
    let out = s.path("out");
    let summary = scan(&s.detectors_with(&[]), &data, &out);
    assert_failed(&summary, "bots", "bots.json");
    assert_others_ok(&summary, &["bots"]);
    assert_eq!(ok_records(&summary, "messages"), truth.failures.len() as u64);
    assert_eq!(ok_records(&summary, "events"), completed_turns(&spec));
    assert_eq!(detector(&summary, "tool_error")["status"], "ok", "{summary:#}");
    assert_eq!(total_count(&out), truth.failures.len() as u64, "every failure is still counted");
}

#[test]
fn an_input_that_cannot_be_read_fails_its_source_naming_it_and_the_others_still_read() {
    let spec = DataSpec::default();
    // Tests run as root, so permissions stop no read: each input is made a
    // thing of the wrong kind instead.
    let s = Scratch::new();
    let data = s.path("data");
    let truth = datagen::generate(&data, &spec).unwrap();
    std::fs::remove_file(data.join("bots.json")).unwrap();
    std::fs::create_dir(data.join("bots.json")).unwrap();
    let summary = scan(&s.detectors_with(&[]), &data, &s.path("out"));
    assert_failed(&summary, "bots", "bots.json");
    assert_others_ok(&summary, &["bots"]);
    assert_eq!(ok_records(&summary, "messages"), truth.failures.len() as u64);
    assert_eq!(ok_records(&summary, "events"), completed_turns(&spec));
    assert_eq!(total_count(&s.path("out")), truth.failures.len() as u64);

    let s = Scratch::new();
    let data = s.path("data");
    datagen::generate(&data, &spec).unwrap();
    std::fs::remove_file(data.join("messages.db")).unwrap();
    std::fs::create_dir(data.join("messages.db")).unwrap();
    let summary = scan(&s.detectors_with(&[]), &data, &s.path("out"));
    assert_failed(&summary, "messages", "messages.db");
    assert_others_ok(&summary, &["messages"]);
    assert_eq!(ok_records(&summary, "bots"), spec.bots as u64);
    assert_eq!(ok_records(&summary, "events"), completed_turns(&spec));
    assert_eq!(listing(&data), ["bots.json", "events", "messages.db", "runtime.db"], "nothing created");
    assert_eq!(listing(&data.join("messages.db")), Vec::<String>::new(), "nothing created");

    let s = Scratch::new();
    let data = s.path("data");
    let truth = datagen::generate(&data, &spec).unwrap();
    std::fs::remove_dir_all(data.join("events")).unwrap();
    std::fs::write(data.join("events"), b"a file where a folder belongs\n").unwrap();
    let summary = scan(&s.detectors_with(&[]), &data, &s.path("out"));
    assert_failed(&summary, "events", "data/events");
    assert_others_ok(&summary, &["events"]);
    assert_eq!(ok_records(&summary, "bots"), spec.bots as u64);
    assert_eq!(ok_records(&summary, "messages"), truth.failures.len() as u64);
}
