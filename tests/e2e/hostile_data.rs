//! A hostile data dir: the watched application (or whoever can write its
//! folder) plants what would hang, flood or mislead the host. Every case runs
//! the real binary under a time limit and checks: it ends in bounded time,
//! exits 0 (a failing source is a warning, docs/cli.md), names what it
//! skipped, the good detectors' issues are intact, and nothing in the data dir
//! changed.

use std::path::Path;
use std::time::Duration;

use rusqlite::Connection;
use serde_json::Value;
use xtask::datagen::{self, DataSpec};

use crate::support::*;

/// Long enough for a cold scan on a loaded CI machine, far below "forever".
const LIMIT: Duration = Duration::from_secs(120);

struct Case {
    s: Scratch,
    data: std::path::PathBuf,
    detectors: std::path::PathBuf,
    failures: usize,
}

fn case() -> Case {
    let s = Scratch::new();
    let data = s.path("data");
    let truth = datagen::generate(&data, &DataSpec::default()).unwrap();
    let detectors = s.detectors_with(&[]);
    Case { s, data, detectors, failures: truth.failures.len() }
}

impl Case {
    /// Runs one scan under the time limit with a private temporary folder;
    /// checks the exit code, that the data dir is as it was and that no copy
    /// was left behind, and returns the summary.
    fn scan(&self, human: bool) -> (Value, String) {
        self.scan_in(human, "out")
    }

    /// As [`Case::scan`], into the output folder `out` of the scratch folder.
    fn scan_in(&self, human: bool, out: &str) -> (Value, String) {
        let before = tree_state(&self.data);
        let tmp = self.s.path("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        let mut cmd = run_command(&self.detectors, &self.data, &self.s.path(out));
        cmd.arg("--once").env("TMPDIR", &tmp);
        if !human {
            cmd.arg("--json");
        }
        let out = run_within(cmd, LIMIT);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(out.status.code(), Some(0), "stdout: {stdout}\nstderr: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(tree_state(&self.data), before, "nothing in the data dir changed");
        assert_eq!(listing(&tmp), Vec::<String>::new(), "no private copy outlived the scan");
        let summary = if human { Value::Null } else { serde_json::from_str(&stdout).expect("one JSON object") };
        (summary, stdout)
    }

    /// tool_error reported every failure the generator wrote.
    fn tool_errors_intact(&self) {
        let total: i64 =
            issues_of(&self.s.path("out"), "tool_error").iter().map(|i| i["count"].as_i64().unwrap()).sum();
        assert_eq!(total as usize, self.failures, "the good detector still reports everything");
    }
}

fn source<'a>(summary: &'a Value, name: &str) -> &'a Value {
    summary["sources"].as_array().unwrap().iter().find(|s| s["name"] == name).unwrap_or_else(|| panic!("{summary:#}"))
}

fn mkfifo(path: &Path) {
    assert!(std::process::Command::new("mkfifo").arg(path).status().unwrap().success());
}

#[test]
fn a_text_at_in_messages_is_skipped_and_counted_not_read_forever() {
    let c = case();
    {
        let db = Connection::open(c.data.join("messages.db")).unwrap();
        let failed = r#"{"tool":{"ok":false,"name":"bash","output":"boom"}}"#;
        for (id, at) in [("hostile-1", "2026-01-01T00:00:00Z"), ("hostile-2", "yesterday"), ("hostile-3", "")] {
            db.execute(
                "INSERT INTO messages(id, thread_id, at, type, data) VALUES(?1, 'th-h', ?2, 'activity', ?3)",
                rusqlite::params![id, at, failed],
            )
            .unwrap();
        }
        // A real `at` and a number where the id should be: not pageable either.
        db.execute(
            "INSERT INTO messages(id, thread_id, at, type, data) VALUES('hostile-4', 'th-h', 1.5, 'activity', ?1)",
            [failed],
        )
        .unwrap();
        db.execute(
            "INSERT INTO messages(id, thread_id, at, type, data) VALUES(7, 'th-h', 5, 'activity', ?1)",
            [failed],
        )
        .unwrap();
    }
    let (summary, _) = c.scan(false);
    let messages = source(&summary, "messages");
    assert_eq!(messages["status"], "ok", "{messages:#}");
    // `7` in a TEXT column is stored as text '7': pageable, read. The other four are skipped.
    assert_eq!(messages["skipped"], 4, "{messages:#}");
    let total: i64 = issues_of(&c.s.path("out"), "tool_error").iter().map(|i| i["count"].as_i64().unwrap()).sum();
    assert_eq!(total as usize, c.failures + 1, "every good failure, plus the one with id 7");
    // The next scan, from the cursor, after one more such row: it ends too.
    Connection::open(c.data.join("messages.db"))
        .unwrap()
        .execute(
            "INSERT INTO messages(id, thread_id, at, type, data) VALUES('hostile-5', 'th-h', 'now', 'activity', '{}')",
            [],
        )
        .unwrap();
    let (again, _) = c.scan(false);
    // Counted within the reread window: the four text `at`s (text sorts after
    // every number), not the real 1.5, long before the window.
    assert_eq!(source(&again, "messages")["skipped"], 4, "{again:#}");
}

#[test]
fn a_fifo_in_place_of_bots_json_is_a_warning_not_a_hang() {
    let c = case();
    std::fs::remove_file(c.data.join("bots.json")).unwrap();
    mkfifo(&c.data.join("bots.json"));
    let (summary, _) = c.scan(false);
    let bots = source(&summary, "bots");
    assert_eq!(bots["status"], "failed");
    assert!(bots["error"].as_str().unwrap().contains("a FIFO"), "{bots:#}");
    c.tool_errors_intact();
    // A failed source is read again by the next run, files changed or not:
    // no unchanged-data shortcut past it.
    let (again, _) = c.scan(false);
    assert!(again["unchangedSince"].is_null(), "{again:#}");
    assert_eq!(source(&again, "bots")["status"], "failed", "{again:#}");
}

#[test]
fn fifos_and_links_among_the_event_logs_are_skipped_with_a_warning() {
    let c = case();
    mkfifo(&c.data.join("events").join("fifo.ndjson"));
    // /dev/zero is an endless line: read through a link it would never end.
    std::os::unix::fs::symlink("/dev/zero", c.data.join("events").join("zero.ndjson")).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", c.data.join("events").join("leak.ndjson")).unwrap();
    let (summary, _) = c.scan(false);
    let events = source(&summary, "events");
    assert_eq!(events["status"], "ok", "{events:#}");
    let warnings: Vec<&str> = events["warnings"].as_array().unwrap().iter().map(|w| w.as_str().unwrap()).collect();
    assert_eq!(warnings.len(), 3, "{warnings:?}");
    assert!(warnings.iter().any(|w| w.contains("fifo.ndjson") && w.contains("a FIFO")), "{warnings:?}");
    assert!(warnings.iter().any(|w| w.contains("zero.ndjson") && w.contains("symbolic link")), "{warnings:?}");
    assert!(events["skipped"].as_u64().unwrap() >= 3);
    assert!(
        !issues_of(&c.s.path("out"), "turn_stop").is_empty() || !issues_of(&c.s.path("out"), "turn_timeout").is_empty()
    );
    c.tool_errors_intact();
}

#[test]
fn a_symlinked_or_oversized_bots_json_is_refused_by_name() {
    let c = case();
    std::fs::remove_file(c.data.join("bots.json")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", c.data.join("bots.json")).unwrap();
    let (summary, _) = c.scan(false);
    assert!(source(&summary, "bots")["error"].as_str().unwrap().contains("symbolic link"), "{summary:#}");
    c.tool_errors_intact();

    let c = case();
    let big = format!("{{\"bots\": [], \"pad\": \"{}\"}}", "x".repeat(17 << 20));
    std::fs::write(c.data.join("bots.json"), big).unwrap();
    let (summary, _) = c.scan(false);
    let err = source(&summary, "bots")["error"].as_str().unwrap().to_owned();
    assert!(err.contains("over the cap of 16777216 bytes"), "{err}");
}

#[test]
fn a_view_in_place_of_a_reference_table_fails_that_source_only() {
    let c = case();
    {
        let db = Connection::open(c.data.join("runtime.db")).unwrap();
        db.execute_batch(
            "ALTER TABLE assignment_events RENAME TO real_events;
             CREATE VIEW assignment_events AS
               WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n)
               SELECT x AS id, '' AS assignment_id, '' AS thread_id, '' AS bot_id, '' AS event, 0 AS at FROM n;",
        )
        .unwrap();
    }
    let (summary, _) = c.scan(false);
    let runtime = source(&summary, "runtime");
    assert_eq!(runtime["status"], "failed");
    assert!(runtime["error"].as_str().unwrap().contains("`assignment_events` is a view"), "{runtime:#}");
    c.tool_errors_intact();
}

#[test]
fn a_directory_in_place_of_a_database_fails_that_source_only() {
    let c = case();
    std::fs::remove_file(c.data.join("runtime.db")).unwrap();
    std::fs::create_dir(c.data.join("runtime.db")).unwrap();
    let (summary, human) = (c.scan(false).0, c.scan(true).1);
    assert!(source(&summary, "runtime")["error"].as_str().unwrap().contains("a directory"), "{summary:#}");
    assert!(human.contains("runtime FAILED"), "{human}");
    c.tool_errors_intact();
}

#[test]
fn escape_sequences_in_the_data_never_reach_the_terminal_raw() {
    let c = case();
    let name = "evil\u{1b}[2J\u{202e}.ndjson";
    mkfifo(&c.data.join("events").join(name));
    // Its own output folder: a second scan into one would take the unchanged-data path.
    let (_, human) = c.scan_in(true, "out-human");
    assert!(!human.contains('\u{1b}') && !human.contains('\u{202e}'), "{human:?}");
    assert!(human.contains("evil\\u{1b}[2J\\u{202e}.ndjson"), "{human}");
    let (summary, json) = c.scan(false);
    assert!(!json.contains('\u{1b}') && !json.contains('\u{202e}'), "{json:?}");
    assert!(json.contains("evil\\u001b[2J\\u202e.ndjson"), "{json}");
    // The same text to a JSON reader.
    let warning = source(&summary, "events")["warnings"][0].as_str().unwrap().to_owned();
    assert!(warning.contains(name), "{warning:?}");
}

#[test]
fn an_orphaned_wal_is_read_from_a_private_copy_that_does_not_outlive_the_scan() {
    let c = case();
    let db = c.data.join("messages.db");
    let wal = c.data.join("messages.db-wal");
    let crashed = c.s.path("crashed");
    std::fs::create_dir_all(&crashed).unwrap();
    {
        // A writer that "crashes" with a row only in its -wal: its files are
        // copied while it is open, and put back once it is gone, without -shm.
        let w = Connection::open(&db).unwrap();
        w.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
        w.execute(
            "INSERT INTO messages(id, thread_id, at, type, data) VALUES('late', 'th-w', 5, 'activity', ?1)",
            [r#"{"tool":{"ok":false,"name":"bash","output":"late failure"}}"#],
        )
        .unwrap();
        std::fs::copy(&db, crashed.join("m.db")).unwrap();
        std::fs::copy(&wal, crashed.join("m.db-wal")).unwrap();
    }
    std::fs::copy(crashed.join("m.db"), &db).unwrap();
    std::fs::copy(crashed.join("m.db-wal"), &wal).unwrap();
    let _ = std::fs::remove_file(c.data.join("messages.db-shm"));
    // Case::scan checks the private temporary folder is empty afterwards.
    let (summary, _) = c.scan(false);
    assert_eq!(source(&summary, "messages")["status"], "ok", "{summary:#}");
    let total: i64 = issues_of(&c.s.path("out"), "tool_error").iter().map(|i| i["count"].as_i64().unwrap()).sum();
    assert_eq!(total as usize, c.failures + 1, "the row only in the orphaned -wal is read");
}
