//! The events source under the real `logrotate` (installed by `cargo xtask
//! test` like the suite's other programs), with the real binary, fast path
//! on as a user runs it: the default `create` rotation names the old file
//! `th.ndjson.1`, out of the source's glob, while its writer still has it
//! open and appends to it; every line written is counted once. And a
//! same-size rewrite with its modification time put back (`touch -r`) is a
//! change the fast path sees.

use std::io::Write as _;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::long_lived::fickle_count;
use crate::support::*;

/// Appends `n` `turn.completed` lines to `log`, ids from `*next`.
fn append(log: &mut std::fs::File, next: &mut u32, n: u32) {
    for _ in 0..n {
        *next += 1;
        let id = format!("ev-{next}");
        let line = serde_json::json!({"type": "turn.completed", "id": id, "threadId": "th", "turnId": id,
            "botId": "b", "createdAt": 1_000 + i64::from(*next), "ok": true, "stopReason": "end_turn", "cost": 0.1});
        writeln!(log, "{line}").unwrap();
    }
}

fn open_log(path: &Path) -> std::fs::File {
    std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap()
}

/// `logrotate -f` over `conf`, with its state file beside it.
fn logrotate(conf: &Path) {
    let o = Command::new("logrotate")
        .arg("-f")
        .arg("-s")
        .arg(conf.with_extension("state"))
        .arg(conf)
        .output()
        .expect("logrotate is installed (cargo xtask test installs it)");
    assert!(o.status.success(), "logrotate: {}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn logrotate_create_rotation_loses_no_line_and_counts_none_twice() {
    let s = Scratch::new();
    let data = s.path("data");
    let events = data.join("events");
    std::fs::create_dir_all(&events).unwrap();
    let log_path = events.join("th.ndjson");
    let conf = s.path("logrotate.conf");
    std::fs::write(&conf, format!("{} {{\n    rotate 5\n    create\n    nocompress\n}}\n", log_path.display()))
        .unwrap();
    let detectors = s.detectors_in("detectors", &[], &["fickle"]);
    let out = s.path("out");
    let mut t = 10_000i64;
    let mut scan = || -> Value {
        t += 60_000;
        let o = run(&detectors, &data, &out, &["--scan-time", &t.to_string()]);
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let mut next = 0u32;
    // The writer keeps its file open across rotations, as a daemon does
    // until it is told to reopen.
    let mut writer = open_log(&log_path);
    append(&mut writer, &mut next, 3);
    scan();
    assert_eq!(fickle_count(&out, "events"), 3);
    // Appended after the last scan, then rotated; the writer appends twice
    // more to the renamed file before it reopens.
    append(&mut writer, &mut next, 2);
    logrotate(&conf);
    assert!(events.join("th.ndjson.1").exists() && log_path.exists(), "logrotate's default naming");
    append(&mut writer, &mut next, 2);
    let s2 = scan();
    assert_eq!(fickle_count(&out, "events"), 7, "the lines of the rotated file, once: {s2:#}");
    // Still open: one more line there, then the writer reopens the new file.
    append(&mut writer, &mut next, 1);
    writer = open_log(&log_path);
    append(&mut writer, &mut next, 3);
    scan();
    assert_eq!(fickle_count(&out, "events"), 11);
    // Rotated again (.1 -> .2, the live file -> .1), lines on both sides.
    append(&mut writer, &mut next, 2);
    logrotate(&conf);
    assert!(events.join("th.ndjson.2").exists());
    append(&mut writer, &mut next, 1);
    writer = open_log(&log_path);
    append(&mut writer, &mut next, 2);
    scan();
    assert_eq!(fickle_count(&out, "events"), i64::from(next), "every line written, once");
    let quiet = scan();
    assert!(quiet["unchangedSince"].is_number(), "nothing changed: {quiet:#}");
    assert_eq!(fickle_count(&out, "events"), i64::from(next));

    // A same-size rewrite with the modification time put back is seen.
    let before = std::fs::read_to_string(&log_path).unwrap();
    let kept = s.path("mtime-ref");
    assert!(Command::new("touch").arg("-r").arg(&log_path).arg(&kept).status().unwrap().success());
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(&log_path, before.replacen("end_turn", "END_TURN", 1)).unwrap();
    assert!(Command::new("touch").arg("-r").arg(&kept).arg(&log_path).status().unwrap().success());
    assert_eq!(std::fs::metadata(&log_path).unwrap().len() as usize, before.len());
    let rewritten = scan();
    assert!(rewritten["unchangedSince"].is_null(), "a rewrite the mtime hides is still a change: {rewritten:#}");
}
