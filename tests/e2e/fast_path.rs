//! The unchanged-data fast path and the config file, end to end.

use rusqlite::Connection;
use serde_json::Value;
use xtask::datagen::{self, Activity};

use crate::support::*;

fn run_at(s: &Scratch, data: &std::path::Path, at: i64, extra: &[&str]) -> Value {
    let mut args = vec!["--scan-time".to_owned(), at.to_string()];
    args.extend(extra.iter().map(|a| a.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // The detectors are copied once: a reinstalled detector is a change.
    let detectors = s.path("detectors");
    let detectors = if detectors.exists() { detectors } else { s.detectors_with(&[]) };
    let o = run(&detectors, data, &s.path("out"), &args);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn an_unchanged_data_dir_is_not_read_again_until_something_changes() {
    let s = Scratch::new();
    let data = s.path("data");
    std::fs::create_dir_all(&data).unwrap();
    let tool = "mcp__agents__x";
    datagen::insert_activity(&data, &Activity::failed("m1", 1_000, "t1", tool, "boom 1")).unwrap();
    let first = run_at(&s, &data, 10_000, &[]);
    assert!(first["unchangedSince"].is_null());
    // A full scan says where its time went, within its own elapsed time.
    let phases: u64 = ["readUs", "decideUs", "commitUs", "exportUs"]
        .iter()
        .map(|p| first["phases"][p].as_u64().unwrap_or_else(|| panic!("{p} in {first:#}")))
        .sum();
    assert!(phases <= first["elapsedMs"].as_u64().unwrap() * 1000 + 1000, "{first:#}");
    let second = run_at(&s, &data, 11_000, &[]);
    assert_eq!(second["unchangedSince"], 10_000, "{second:#}");
    assert!(second.get("phases").is_none(), "the fast path has no phases: {second:#}");
    assert_eq!(second["sources"].as_array().unwrap().len(), 0, "no source was read");
    assert_eq!(second["detectors"].as_array().unwrap().len(), 0, "no detector ran");
    // --no-fast-path scans anyway.
    let forced = run_at(&s, &data, 11_500, &["--no-fast-path"]);
    assert!(forced["unchangedSince"].is_null());
    // A new row changes the database: the next run reads it.
    datagen::insert_activity(&data, &Activity::failed("m2", 2_000, "t1", tool, "boom 2")).unwrap();
    let third = run_at(&s, &data, 12_000, &[]);
    assert!(third["unchangedSince"].is_null());
    assert_eq!(third["issues"]["counted"], 1);
}

#[test]
fn queued_work_crossing_its_threshold_ends_the_fast_path() {
    let s = Scratch::new();
    let data = s.path("data");
    std::fs::create_dir_all(&data).unwrap();
    {
        let c = Connection::open(data.join("runtime.db")).unwrap();
        c.execute_batch(
            "CREATE TABLE assignment_events(id INTEGER PRIMARY KEY, assignment_id TEXT, thread_id TEXT, bot_id TEXT,
             event TEXT, at INTEGER);
             INSERT INTO assignment_events(assignment_id, thread_id, bot_id, event, at)
             VALUES ('as-1', 'th', 'bot-1', 'enqueued', 100000);",
        )
        .unwrap();
    }
    // Queued at 100 s with a 300 s threshold: it crosses at 400 s.
    let first = run_at(&s, &data, 200_000, &[]);
    assert!(first["unchangedSince"].is_null());
    assert_eq!(first["issues"]["counted"], 0);
    let before = run_at(&s, &data, 399_000, &[]);
    assert_eq!(before["unchangedSince"], 200_000, "nothing changed and nothing crossed yet");
    let after = run_at(&s, &data, 401_000, &[]);
    assert!(after["unchangedSince"].is_null(), "the wait crossed its threshold: {after:#}");
    let waits = issues_of(&s.path("out"), "queue_wait");
    assert_eq!(waits.len(), 1);
    assert_eq!(waits[0]["title"], "delegated work still waiting after more than 5 min");
}

#[test]
fn the_config_file_moves_sources_and_sets_detector_values() {
    let s = Scratch::new();
    let data = s.path("data");
    std::fs::create_dir_all(data.join("db")).unwrap();
    // The messages database lives elsewhere in this application's layout.
    let tool = "mcp__agents__x";
    datagen::insert_activity(&data.join("db"), &Activity::failed("m1", 1_000, "t1", tool, "boom")).unwrap();
    let config = s.path("sentinel.toml");
    std::fs::write(
        &config,
        "[sources.messages]\nfile = \"db/messages.db\"\n\n[detectors.tool_error]\nharness_tools = \"computer\"\n",
    )
    .unwrap();
    let summary = run_at(&s, &data, 10_000, &["--config", config.to_str().unwrap()]);
    assert_eq!(summary["issues"]["counted"], 1, "{summary:#}");
    assert_eq!(issues(&s.path("out"))[0]["origin"], "external", "harness_tools came from the file");

    std::fs::write(&config, "[sources.mesages]\nfile = \"x\"\n").unwrap();
    let o = run(&s.detectors_with(&[]), &data, &s.path("out"), &["--config", config.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(3));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("sentinel.toml") && err.contains("mesages"), "{err}");
}

#[test]
fn a_tool_call_that_fails_45_minutes_after_its_row_was_written_is_counted() {
    let s = Scratch::new();
    let data = s.path("data");
    std::fs::create_dir_all(&data).unwrap();
    let (tool, min) = ("mcp__agents__build", 60_000i64);
    let t = 1_000_000i64;
    let running = Activity { ok: None, ..Activity::failed("m1", t, "t1", tool, "") };
    datagen::insert_activity(&data, &running).unwrap();
    datagen::insert_activity(&data, &Activity::failed("m2", t + min, "t2", tool, "boom")).unwrap();
    assert_eq!(run_at(&s, &data, t + 2 * min, &[])["issues"]["counted"], 1);
    // Newer rows move the source's 30-minute window past the running call.
    datagen::insert_activity(&data, &Activity::failed("m3", t + 45 * min, "t3", tool, "boom")).unwrap();
    assert_eq!(run_at(&s, &data, t + 46 * min, &[])["issues"]["counted"], 1);
    // The long build fails: its row is updated, its `at` stays 45 minutes back.
    datagen::insert_activity(&data, &Activity::failed("m1", t, "t1", tool, "build failed")).unwrap();
    let last = run_at(&s, &data, t + 47 * min, &[]);
    assert_eq!(last["issues"]["counted"], 1, "the late outcome is counted: {last:#}");
    let total: i64 = issues_of(&s.path("out"), "tool_error").iter().map(|i| i["count"].as_i64().unwrap()).sum();
    assert_eq!(total, 3, "each failed call once");
}
