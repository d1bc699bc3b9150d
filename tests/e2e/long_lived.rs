//! The long-lived core, with the real binary: a detector that fails (or sits
//! out a quarantine) loses no records, one output folder has one writer, and
//! the long-running mode loads each component once and picks up a changed,
//! added or removed detector file without a restart.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use rusqlite::Connection;
use serde_json::Value;
use xtask::datagen::{self, Activity};

use crate::support::*;

const HOUR: i64 = 3_600_000;

/// One batch of records in each source kind: failed tool calls (SQLite with
/// a trailing window), queue waits (SQLite read by id) and `turn.completed`
/// events (NDJSON). Returns how many records of each it added.
fn add_records(data: &Path, batch: u32, at: i64) -> [u32; 3] {
    for i in 0..3 {
        let id = format!("m{batch}-{i}");
        datagen::insert_activity(data, &Activity::failed(&id, at + i64::from(i), "t1", "Bash", "exit 1")).unwrap();
    }
    let runtime = Connection::open(data.join("runtime.db")).unwrap();
    runtime
        .execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE IF NOT EXISTS assignment_events(id INTEGER PRIMARY KEY, assignment_id TEXT, thread_id TEXT,
                 bot_id TEXT, event TEXT, at INTEGER);",
        )
        .unwrap();
    for i in 0..2 {
        let assignment = format!("as{batch}-{i}");
        for (event, t) in [("enqueued", at), ("started", at + 1_000)] {
            runtime
                .execute(
                    "INSERT INTO assignment_events(assignment_id, thread_id, bot_id, event, at) VALUES (?1, 'th', 'b', ?2, ?3)",
                    rusqlite::params![assignment, event, t],
                )
                .unwrap();
        }
    }
    std::fs::create_dir_all(data.join("events")).unwrap();
    let mut log = std::fs::OpenOptions::new().create(true).append(true).open(data.join("events/th.ndjson")).unwrap();
    for i in 0..4 {
        let id = format!("ev{batch}-{i}");
        let line = serde_json::json!({"type": "turn.completed", "id": id, "threadId": "th", "turnId": id,
            "botId": "b", "createdAt": at + i64::from(i), "ok": true, "stopReason": "end_turn", "cost": 0.1});
        writeln!(log, "{line}").unwrap();
    }
    [3, 2, 4]
}

/// The count of the `fickle` issue of one source (0 when there is none);
/// its title is the source's name (with the prefix while on probation).
pub(crate) fn fickle_count(out: &Path, source: &str) -> i64 {
    issues_of(out, "fickle")
        .iter()
        .find(|i| i["title"].as_str().unwrap().ends_with(source))
        .map_or(0, |i| i["count"].as_i64().unwrap())
}

#[test]
fn a_detector_that_fails_then_sits_out_a_quarantine_reports_every_missed_record_exactly_once() {
    let s = Scratch::new();
    let data = s.path("data");
    std::fs::create_dir_all(&data).unwrap();
    let detectors = s.detectors_in("detectors", &["tool_error"], &["fickle"]);
    let out = s.path("out");
    let scan_at = |t: i64, fail: bool| -> Value {
        let set = format!("fickle.fail={fail}");
        let o = run(&detectors, &data, &out, &["--no-fast-path", "--scan-time", &t.to_string(), "--set", &set]);
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let mut expected = [0u32; 3];
    let add = |expected: &mut [u32; 3], batch, at| {
        for (e, n) in expected.iter_mut().zip(add_records(&data, batch, at)) {
            *e += n;
        }
    };

    add(&mut expected, 1, 10 * HOUR);
    let s1 = scan_at(10 * HOUR + 60_000, true);
    assert_eq!(detector(&s1, "fickle")["status"], "failed");
    assert_eq!(detector(&s1, "tool_error")["status"], "ok", "the others go on and move on");
    add(&mut expected, 2, 11 * HOUR);
    let s2 = scan_at(11 * HOUR + 60_000, true);
    assert_eq!(detector(&s2, "fickle")["health"], "quarantined");
    add(&mut expected, 3, 12 * HOUR);
    let s3 = scan_at(12 * HOUR + 60_000, false);
    assert_eq!(detector(&s3, "fickle")["status"], "quarantined", "sits out its quarantine");
    assert_eq!(fickle_count(&out, "messages"), 0);

    // Back on probation a day later: it reads everything it missed, once.
    add(&mut expected, 4, 36 * HOUR);
    let s4 = scan_at(36 * HOUR + 60_000, false);
    assert_eq!(detector(&s4, "fickle")["status"], "ok", "{s4:#}");
    let counts = || ["messages", "runtime", "events"].map(|src| fickle_count(&out, src));
    assert_eq!(counts(), expected.map(i64::from), "every record of every source, once: {s4:#}");
    // And again: nothing counted twice, new records once.
    let s5 = scan_at(37 * HOUR, false);
    assert_eq!(s5["issues"]["counted"], 0, "{s5:#}");
    add(&mut expected, 5, 38 * HOUR);
    scan_at(38 * HOUR + 60_000, false);
    assert_eq!(counts(), expected.map(i64::from));
    let tool_errors: i64 = issues_of(&out, "tool_error").iter().map(|i| i["count"].as_i64().unwrap()).sum();
    assert_eq!(tool_errors, i64::from(expected[0]), "tool_error counted each failed call once too");
}

#[test]
fn a_detector_that_fails_one_scan_catches_up_on_the_next_behind_the_fast_path() {
    // As a user runs it: fast path on, the same config every scan; the
    // failure passes with nothing in the stamp changed (a transient one).
    let s = Scratch::new();
    let data = s.path("data");
    std::fs::create_dir_all(&data).unwrap();
    let detectors = s.detectors_in("detectors", &["tool_error"], &["fickle"]);
    let out = s.path("out");
    let set = format!("fickle.fail_before={}", 10 * HOUR + 120_000);
    let scan_at = |t: i64| -> Value {
        let o = run(&detectors, &data, &out, &["--scan-time", &t.to_string(), "--set", &set]);
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let expected = add_records(&data, 1, 10 * HOUR);
    let s1 = scan_at(10 * HOUR + 60_000);
    assert_eq!(detector(&s1, "fickle")["status"], "failed", "{s1:#}");
    // The data dir is unchanged: the fast path would hide what fickle missed.
    let s2 = scan_at(10 * HOUR + 180_000);
    assert!(s2["unchangedSince"].is_null(), "a detector behind its sources ends the fast path: {s2:#}");
    assert_eq!(detector(&s2, "fickle")["status"], "ok", "{s2:#}");
    let counts = || ["messages", "runtime", "events"].map(|src| fickle_count(&out, src));
    assert_eq!(counts(), expected.map(i64::from), "every missed record, once: {s2:#}");
    // Its health moved back (one failure forgotten): one more scan for the
    // health source, then the fast path holds again, and nothing is recounted.
    let s3 = scan_at(10 * HOUR + 240_000);
    let s4 = scan_at(10 * HOUR + 300_000);
    assert_eq!(s4["unchangedSince"], 10 * HOUR + 240_000, "nothing owed any more: {s3:#} {s4:#}");
    assert_eq!(counts(), expected.map(i64::from));
}

#[test]
fn a_disabled_detector_keeps_its_place_and_catches_up_when_enabled() {
    // Disable and enable are commands to the core; the library test of the
    // daemon sends them over the channel. Here: a detector removed from the
    // folder for a while and put back reads what it missed, since its
    // position stayed in the ledger.
    let s = Scratch::new();
    let data = s.path("data");
    std::fs::create_dir_all(&data).unwrap();
    let detectors = s.detectors_in("detectors", &["tool_error"], &["fickle"]);
    let out = s.path("out");
    let scan_at = |t: i64| {
        let o = run(&detectors, &data, &out, &["--no-fast-path", "--scan-time", &t.to_string()]);
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    };
    let mut expected = add_records(&data, 1, HOUR);
    scan_at(HOUR + 1_000);
    let parked = s.path("fickle.wasm");
    std::fs::rename(detectors.join("fickle.wasm"), &parked).unwrap();
    for (e, n) in expected.iter_mut().zip(add_records(&data, 2, 2 * HOUR)) {
        *e += n;
    }
    scan_at(2 * HOUR + 1_000);
    std::fs::rename(&parked, detectors.join("fickle.wasm")).unwrap();
    scan_at(3 * HOUR);
    assert_eq!(["messages", "runtime", "events"].map(|src| fickle_count(&out, src)), expected.map(i64::from));
}

#[test]
fn two_runs_on_one_output_folder_at_once_never_count_twice() {
    let s = Scratch::new();
    let data = s.path("data");
    std::fs::create_dir_all(&data).unwrap();
    let detectors = s.detectors_in("detectors", &["tool_error"], &["fickle"]);
    let out = s.path("out");
    let expected = add_records(&data, 1, HOUR);
    let spawn = || {
        run_command(&detectors, &data, &out)
            .args(["--once", "--json", "--no-fast-path"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let outputs = [a.wait_with_output().unwrap(), b.wait_with_output().unwrap()];
    let codes: Vec<Option<i32>> = outputs.iter().map(|o| o.status.code()).collect();
    assert!(codes.contains(&Some(0)), "{codes:?}");
    for o in outputs.iter().filter(|o| o.status.code() != Some(0)) {
        assert_eq!(o.status.code(), Some(11), "refused with the documented code");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("in use by another sentinel-host (pid "), "{err}");
    }
    // Whatever the interleaving, one more run leaves every record counted once.
    let last = scan(&detectors, &data, &out);
    assert_eq!(last["issues"]["counted"], 0, "{last:#}");
    assert_eq!(["messages", "runtime", "events"].map(|src| fickle_count(&out, src)), expected.map(i64::from));
}

/// Every JSON summary the long-running mode printed so far.
fn summaries(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path).unwrap_or_default().lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

fn load_of(summary: &Value, name: &str) -> Option<String> {
    summary["detectors"].as_array()?.iter().find(|d| d["name"] == name).map(|d| d["load"].as_str().unwrap().to_owned())
}

#[test]
fn the_long_running_mode_loads_each_component_once_and_follows_the_folder() {
    let s = Scratch::new();
    let data = s.path("data");
    std::fs::create_dir_all(&data).unwrap();
    add_records(&data, 1, HOUR);
    let detectors = s.detectors_in("detectors", &["tool_error"], &[]);
    let out = s.path("out");
    let log_path = s.path("stdout.jsonl");
    let log = log_path.as_path();
    let mut child = run_command(&detectors, &data, &out)
        .args(["--json", "--interval", "1", "--no-fast-path"])
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(log).unwrap())
        .stderr(std::fs::File::create(s.path("stderr.log")).unwrap())
        .spawn()
        .unwrap();
    let kept = |name: &'static str| move || summaries(log).iter().any(|r| load_of(r, name).as_deref() == Some("kept"));
    wait_for(120, "a scan that kept tool_error loaded", &mut child, kept("tool_error"));
    let first = summaries(log);
    assert_eq!(load_of(&first[0], "tool_error").as_deref(), Some("loaded"), "the first scan loads it");

    // Added while running: loaded once, then kept.
    std::fs::copy(shipped_detectors().join("turn_stop.wasm"), detectors.join("turn_stop.wasm")).unwrap();
    wait_for(120, "the added detector, kept", &mut child, kept("turn_stop"));
    // Removed while running: gone from the next scans.
    let seen = summaries(log).len();
    std::fs::remove_file(detectors.join("turn_stop.wasm")).unwrap();
    wait_for(120, "a scan without the removed detector", &mut child, || {
        summaries(log)
            .iter()
            .skip(seen + 1)
            .any(|r| load_of(r, "tool_error").is_some() && load_of(r, "turn_stop").is_none())
    });
    // Changed while running (another component under the same file name): loaded again.
    let seen = summaries(log).len();
    std::fs::copy(shipped_detectors().join("cost.wasm"), detectors.join("tool_error.wasm")).unwrap();
    wait_for(120, "the changed file, loaded again", &mut child, || {
        summaries(log).iter().skip(seen).any(|r| load_of(r, "cost").as_deref() == Some("loaded"))
    });
    let kill = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(kill.success());
    assert!(child.wait().unwrap().success());
    // Across every scan, tool_error was loaded exactly once.
    let loads = summaries(log).iter().filter(|r| load_of(r, "tool_error").as_deref() == Some("loaded")).count();
    assert_eq!(loads, 1);
}
