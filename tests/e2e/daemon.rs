//! The long-running mode, with the real binary: it scans on its interval,
//! picks up rows written between scans, and on SIGTERM exits 0 with the
//! ledger consistent (a following `run --once` counts nothing twice and
//! loses nothing). Waits are polls with generous timeouts, never sleeps
//! that a slow machine could outrun.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use xtask::datagen::{self, Activity};

use crate::support::*;

const TOOL: &str = "mcp__agents__load_layer";

/// The total count of every issue in `issues.jsonl`, 0 when there is none yet.
fn total_count(out: &Path) -> i64 {
    let Ok(text) = std::fs::read_to_string(out.join("issues.jsonl")) else { return 0 };
    text.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).map(|i| i["count"].as_i64().unwrap_or(0)).sum()
}

#[test]
fn the_long_running_mode_scans_on_its_interval_and_stops_cleanly_on_sigterm() {
    let s = Scratch::new();
    let data = s.path("data");
    std::fs::create_dir_all(&data).unwrap();
    let out = s.path("out");
    let detectors = s.detectors_with(&[]);
    datagen::insert_activity(&data, &Activity::failed("m1", 1_000, "t1", TOOL, "no layer 12 in /a/b")).unwrap();

    let stdout = std::fs::File::create(s.path("stdout.jsonl")).unwrap();
    let stderr = std::fs::File::create(s.path("stderr.log")).unwrap();
    let mut child = run_command(&detectors, &data, &out)
        .args(["--json", "--interval", "1"])
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
        .unwrap();

    wait_for(180, "the first scan to count m1", &mut child, || total_count(&out) == 1);
    // New rows between ticks are picked up by a later scan, without a restart.
    datagen::insert_activity(&data, &Activity::failed("m2", 2_000, "t2", TOOL, "no layer 104 in /c")).unwrap();
    datagen::insert_activity(&data, &Activity::failed("m3", 3_000, "t2", "Bash", "command not found")).unwrap();
    wait_for(120, "a later scan to count m2 and m3", &mut child, || total_count(&out) == 3);
    // More scans ran than the two that found something (one a second, most unchanged).
    let lines = || std::fs::read_to_string(s.path("stdout.jsonl")).unwrap().lines().count();
    let seen = lines();
    wait_for(60, "another scan", &mut child, || lines() > seen);

    // A row lands and SIGTERM follows at once: whether or not the scan in
    // flight saw it, it is counted exactly once in the end.
    datagen::insert_activity(&data, &Activity::failed("m4", 4_000, "t3", TOOL, "no layer 7 in /d")).unwrap();
    let kill = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(kill.success());
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "sentinel-host did not stop within 60 s of SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    let log = std::fs::read_to_string(s.path("stderr.log")).unwrap();
    assert_eq!(status.code(), Some(0), "stderr:\n{log}");
    assert!(log.contains("scan done"), "the long-running mode logs each scan:\n{log}");
    assert!(log.contains("stopped"), "{log}");
    for line in std::fs::read_to_string(s.path("stdout.jsonl")).unwrap().lines() {
        let v: Value = serde_json::from_str(line).expect("one JSON object per scan and line");
        assert!(v["scanTime"].is_i64());
    }

    let after = scan(&detectors, &data, &out);
    let again = scan(&detectors, &data, &out);
    assert_eq!(again["issues"]["counted"], 0, "{again:#}");
    assert_eq!(total_count(&out), 4, "every row counted once: {after:#}");
    let layer = issues_of(&out, "tool_error").into_iter().find(|i| i["tool"] == TOOL).unwrap();
    assert_eq!(layer["count"], 3);
    assert_eq!(layer["wastedTurns"], 3);
}

#[test]
fn the_long_running_mode_stops_with_the_first_scans_error_code() {
    let s = Scratch::new();
    let o = sentinel_host()
        .env("XDG_CACHE_HOME", user_cache_home())
        .args(["run", "--interval", "1", "--detectors"])
        .arg(s.detectors_with(&[]))
        .arg("--data-dir")
        .arg(s.path("no-such-data-dir"))
        .arg("--out")
        .arg(s.path("out"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(5), "{}", String::from_utf8_lossy(&o.stderr));
}

/// A `turn.completed` line for the events log.
fn event(id: &str, at: i64) -> String {
    serde_json::json!({"type": "turn.completed", "id": id, "threadId": "th", "turnId": format!("turn-{id}"),
        "botId": "bot-1", "createdAt": at, "ok": true, "stopReason": "end_turn", "cost": 0.1})
    .to_string()
        + "\n"
}

#[test]
fn a_detector_waiting_for_its_cadence_loses_no_records() {
    use std::io::Write as _;
    let s = Scratch::new();
    let data = s.path("data");
    std::fs::create_dir_all(data.join("events")).unwrap();
    let log = data.join("events/th.ndjson");
    std::fs::write(&log, event("e1", 1_000)).unwrap();
    datagen::insert_activity(&data, &Activity::failed("m1", 1_000, "t1", TOOL, "no layer 1 in /a")).unwrap();
    // Only the fixture reads events here (turn_stop and cost would pull it in every scan).
    let detectors = s.detectors_in("detectors", &["tool_error"], &["cadenced"]);
    let out = s.path("out");
    let at = |t: i64| {
        let o = run(&detectors, &data, &out, &["--scan-time", &t.to_string()]);
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice::<Value>(&o.stdout).unwrap()
    };
    let source = |summary: &Value, name: &str| -> String {
        let sources = summary["sources"].as_array().unwrap();
        sources.iter().find(|s| s["name"] == name).unwrap()["status"].as_str().unwrap().to_owned()
    };
    let cadenced = || issues_of(&out, "cadenced").first().map_or(0, |i| i["count"].as_i64().unwrap());

    // First scan: due (never run), events read.
    let first = at(10_000);
    assert_eq!(detector(&first, "cadenced")["status"], "ok", "{first:#}");
    assert_eq!(detector(&first, "cadenced")["nextDue"], 70_000);
    assert_eq!(cadenced(), 1);

    // An event and a message land. 10 s later it is not due: events is not
    // read at all (its cursor stays), while tool_error runs on messages.
    std::fs::OpenOptions::new().append(true).open(&log).unwrap().write_all(event("e2", 2_000).as_bytes()).unwrap();
    datagen::insert_activity(&data, &Activity::failed("m2", 2_000, "t2", TOOL, "no layer 2 in /b")).unwrap();
    let second = at(20_000);
    assert_eq!(detector(&second, "cadenced")["status"], "not-due", "{second:#}");
    assert_eq!(detector(&second, "tool_error")["status"], "ok");
    assert_eq!(source(&second, "events"), "not-read", "{second:#}");
    assert_eq!(source(&second, "messages"), "ok");
    assert_eq!(cadenced(), 1);
    assert_eq!(issues_of(&out, "tool_error")[0]["count"], 2);

    // Nothing changes: the fast path holds until the detector is due...
    assert_eq!(at(30_000)["unchangedSince"], 20_000);
    // ...and its due time ends it: the event it waited for is counted, once.
    let due = at(70_000);
    assert!(due["unchangedSince"].is_null(), "{due:#}");
    assert_eq!(detector(&due, "cadenced")["status"], "ok");
    assert_eq!(source(&due, "events"), "ok");
    assert_eq!(cadenced(), 2);
    let again = at(200_000);
    assert_eq!(again["issues"]["counted"], 0, "{again:#}");
    assert_eq!(cadenced(), 2);
}
