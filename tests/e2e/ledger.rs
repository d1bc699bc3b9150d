//! The ledger end to end: a kill at any point loses nothing and counts
//! nothing twice; a state reset by hand keeps issues and never double counts.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use rusqlite::Connection;
use xtask::datagen::{self, Activity, Rng};

use crate::support::*;

fn failure_row(c: &Connection, i: usize) {
    let (tool, output, exit) = if i.is_multiple_of(3) {
        ("Bash", format!("bash: tool-{i}: command not found"), Some(127))
    } else {
        ("mcp__agents__send", format!("queue {i} is full at /var/q/{i}"), None)
    };
    let data = serde_json::json!({"turnId": format!("t{}", i / 4), "from": {"botId": "b"},
        "tool": {"name": tool, "ok": false, "output": output, "exitCode": exit}});
    c.execute(
        "INSERT INTO messages(id, thread_id, at, type, data) VALUES(?1, 'th', ?2, 'activity', ?3)",
        rusqlite::params![format!("m{i:06}"), 1_000 + i as i64, data.to_string()],
    )
    .unwrap();
}

#[test]
fn a_kill_at_any_point_loses_nothing_and_counts_nothing_twice() {
    let s = Scratch::new();
    let data = s.path("data");
    std::fs::create_dir_all(&data).unwrap();
    let db = data.join("messages.db");
    {
        let c = xtask::datagen::messages_db(&data).unwrap();
        for i in 0..400 {
            failure_row(&c, i);
        }
    }
    let written = Arc::new(AtomicUsize::new(400));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (written, stop, db) = (written.clone(), stop.clone(), db.clone());
        std::thread::spawn(move || {
            let c = Connection::open(&db).unwrap();
            c.busy_timeout(Duration::from_secs(5)).unwrap();
            let mut i = written.load(Ordering::SeqCst);
            while !stop.load(Ordering::Relaxed) {
                failure_row(&c, i);
                i += 1;
                written.store(i, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(3));
            }
        })
    };

    let detectors = s.detectors_with(&[]);
    let out = s.path("out");
    let mut rng = Rng::new(2026);
    let (mut killed_in_commit, mut killed_elsewhere, mut completed) = (0, 0, 0);
    for round in 0..14u32 {
        let mut child = run_command(&detectors, &data, &out)
            .args(["--once", "--json"])
            .env("SENTINEL_LOG", "sentinel_host=debug")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, rx) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("ledger commit begin") {
                    let _ = tx.send(());
                }
            }
        });
        if round.is_multiple_of(2) {
            // Kill the moment the commit starts.
            if rx.recv_timeout(Duration::from_secs(60)).is_ok() {
                let _ = child.kill();
            }
        } else {
            // Kill at a random moment, which may be after the scan ended.
            std::thread::sleep(Duration::from_millis(rng.below(1_500)));
            let _ = child.kill();
        }
        let status = child.wait().unwrap();
        reader.join().unwrap();
        match (status.success(), round.is_multiple_of(2)) {
            (true, _) => completed += 1,
            (false, true) => killed_in_commit += 1,
            (false, false) => killed_elsewhere += 1,
        }
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let total = written.load(Ordering::SeqCst);

    let summary = scan(&detectors, &data, &out);
    assert_eq!(detector(&summary, "tool_error")["status"], "ok", "{:#}", detector(&summary, "tool_error"));
    let issues = issues_of(&out, "tool_error");
    let counted: u64 = issues.iter().map(|i| i["count"].as_u64().unwrap()).sum();
    assert_eq!(
        counted as usize, total,
        "every row counted exactly once ({killed_in_commit} killed in commit, {killed_elsewhere} elsewhere, {completed} completed)"
    );
    assert_eq!(issues.len(), 2, "{issues:#?}");
    assert!(killed_in_commit > 0, "some runs were killed inside the commit");
    // The fire log: one fire per count, no fire without its count, and a
    // signed head that matches the log, whatever the kills interrupted.
    let v = verify(&out);
    assert_eq!(v["ok"], true, "{v:#}");
    let fires = fire_entries(&out);
    let tool_error_fires = fires.iter().filter(|e| e["type"] == "occurrence" && e["kind"] == "tool_error").count();
    assert_eq!(tool_error_fires, total, "one fire per counted occurrence");
    let all_counts: u64 = crate::support::issues(&out).iter().map(|i| i["count"].as_u64().unwrap()).sum();
    assert_eq!(fires.iter().filter(|e| e["type"] == "occurrence").count() as u64, all_counts, "every kind");
}

/// `sentinel-host verify --json --out OUT` (exit 0 or 12) as JSON.
pub fn verify(out: &std::path::Path) -> serde_json::Value {
    let o = sentinel_host().args(["verify", "--json", "--out"]).arg(out).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {o:?}"));
    assert_eq!(o.status.code(), Some(if v["ok"] == true { 0 } else { 12 }), "{v:#}");
    v
}

#[test]
fn verify_passes_an_intact_log_names_a_tampered_entry_and_an_independent_verifier_agrees() {
    let s = Scratch::new();
    let data = s.path("data");
    std::fs::create_dir_all(&data).unwrap();
    for (i, out) in ["no layer 1 in /a", "bash: x: command not found", "no layer 2 in /b"].iter().enumerate() {
        let id = format!("m{i}");
        datagen::insert_activity(&data, &Activity::failed(&id, 1_000 + i as i64, "t1", "Bash", out)).unwrap();
    }
    let detectors = s.detectors_with(&[]);
    let out = s.path("out");
    let first = scan(&detectors, &data, &out);
    assert_eq!(first["issues"]["fires"], 3, "{first:#}");
    let v = verify(&out);
    assert_eq!((v["ok"].as_bool(), v["entries"].as_u64()), (Some(true), Some(3)), "{v:#}");
    assert!(v["kid"].as_str().unwrap().starts_with("sidecar-v1-"));
    let python = |out: &std::path::Path| {
        Command::new("python3").arg(root().join("docs/verify_fires.py")).arg(out).output().expect("python3 runs")
    };
    let p = python(&out);
    assert_eq!(
        p.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&p.stdout),
        String::from_utf8_lossy(&p.stderr)
    );
    assert!(String::from_utf8_lossy(&p.stdout).contains("3 entries chained"));
    // Without the `cryptography` package (an import of it that fails), the
    // signature is not checked, and that is not a pass.
    let hidden = s.path("no-cryptography");
    std::fs::create_dir_all(hidden.join("cryptography")).unwrap();
    std::fs::write(hidden.join("cryptography/__init__.py"), "raise ImportError('hidden by the test')\n").unwrap();
    let p = Command::new("python3")
        .arg(root().join("docs/verify_fires.py"))
        .arg(&out)
        .env("PYTHONPATH", &hidden)
        .output()
        .expect("python3 runs");
    assert_eq!(p.status.code(), Some(3), "{}", String::from_utf8_lossy(&p.stdout));
    assert!(String::from_utf8_lossy(&p.stdout).contains("signature not checked"));
    // No raw output and no bot name's text in the log: references only.
    let log = std::fs::read_to_string(out.join("fires-000001.ndjson")).unwrap();
    assert!(!log.contains("command not found") && !log.contains("/a"), "{log}");

    let seg = out.join("fires-000001.ndjson");
    std::fs::write(&seg, log.replacen("\"m1\"", "\"m9\"", 1)).unwrap();
    let v = verify(&out);
    assert_eq!(v["ok"], false);
    assert_eq!(
        (v["finding"]["file"].as_str(), v["finding"]["line"].as_u64()),
        (Some("fires-000001.ndjson"), Some(2)),
        "{v:#}"
    );
    assert_eq!(python(&out).status.code(), Some(1), "the independent verifier sees it too");
    let human = sentinel_host().args(["verify", "--out"]).arg(&out).output().unwrap();
    assert_eq!(human.status.code(), Some(12));
    assert!(String::from_utf8_lossy(&human.stdout).starts_with("BROKEN: fires-000001.ndjson, line 2, entry 2"));
}

/// The attacker holds the output folder and no key: it slips a `key` (a
/// hand-over to a key of its own) into an occurrence entry, where the hash
/// does not cover it, so the chain and the head still match. `verify`
/// refuses the line, naming the type and the field (docs/fire-log.md: a
/// line whose fields do not fit its type is not an entry).
#[test]
fn verify_refuses_a_forged_line_with_a_field_its_type_does_not_have() {
    let s = Scratch::new();
    let data = s.path("data");
    std::fs::create_dir_all(&data).unwrap();
    for i in 0..2 {
        let (id, output) = (format!("m{i}"), format!("no layer {i} in /x{i}"));
        datagen::insert_activity(&data, &Activity::failed(&id, 1_000 + i as i64, "t1", "Bash", &output)).unwrap();
    }
    let detectors = s.detectors_with(&[]);
    let out = s.path("out");
    assert_eq!(scan(&detectors, &data, &out)["issues"]["fires"], 2);
    assert_eq!(verify(&out)["ok"], true);
    let seg = out.join("fires-000001.ndjson");
    let log = std::fs::read_to_string(&seg).unwrap();
    let forged_key = format!(r#","key":{{"publicKey":"{}"}},"prev":"#, "cd".repeat(32));
    let forged = log.replacen(r#","prev":"#, &forged_key, 1);
    assert!(forged.lines().next().unwrap().contains(r#""type":"occurrence""#) && forged != log, "{forged}");
    std::fs::write(&seg, forged).unwrap();
    let v = verify(&out);
    assert_eq!(v["ok"], false, "{v:#}");
    assert_eq!(
        (v["finding"]["file"].as_str(), v["finding"]["line"].as_u64(), v["finding"]["seq"].as_u64()),
        (Some("fires-000001.ndjson"), Some(1), Some(1)),
        "{v:#}"
    );
    let problem = v["finding"]["problem"].as_str().unwrap();
    let named = "an entry of type `occurrence` cannot have the field `key`";
    assert!(problem.contains(named), "{problem}");
    let p = Command::new("python3").arg(root().join("docs/verify_fires.py")).arg(&out).output().expect("python3 runs");
    let said = String::from_utf8_lossy(&p.stdout);
    assert_eq!(p.status.code(), Some(1), "the independent verifier refuses it too: {said}");
    assert!(said.contains(named), "{said}");
}

#[test]
fn a_reset_by_hand_keeps_issues_and_counts_only_newer_occurrences() {
    let s = Scratch::new();
    let data = s.path("data");
    std::fs::create_dir_all(&data).unwrap();
    let tool = "mcp__agents__load_layer";
    datagen::insert_activity(&data, &Activity::failed("m1", 1_000, "t1", tool, "no layer 1 in /a")).unwrap();
    datagen::insert_activity(&data, &Activity::failed("m2", 2_000, "t1", tool, "no layer 2 in /b")).unwrap();
    let detectors = s.detectors_with(&[]);
    let out = s.path("out");
    scan(&detectors, &data, &out);

    let o = sentinel_host().args(["reset", "--json", "--data-dir"]).arg(&data).arg("--out").arg(&out).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let outcome: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(outcome["issuesKept"], 1);
    assert_eq!(outcome["firesKept"], 2, "a reset keeps every fire");
    let before = std::fs::read(out.join("fires-000001.ndjson")).unwrap();

    // A tool result that lands late (older than the newest recorded) is lost,
    // a newer one is counted, the ones already counted are not counted again.
    datagen::insert_activity(&data, &Activity::failed("m0", 500, "t0", tool, "no layer 0 in /z")).unwrap();
    datagen::insert_activity(&data, &Activity::failed("m3", 3_000, "t2", tool, "no layer 3 in /c")).unwrap();
    let summary = scan(&detectors, &data, &out);
    assert_eq!(summary["issues"]["counted"], 1);
    assert_eq!(summary["issues"]["belowFloor"], 3);
    assert_eq!(issues(&out)[0]["count"], 3);
    assert!(std::fs::read(out.join("fires-000001.ndjson")).unwrap().starts_with(&before), "no fire rewritten");
    assert_eq!(verify(&out)["entries"], 3, "the chain goes on");
}

#[test]
fn a_foreign_ledger_file_is_refused_with_exit_6_and_left_untouched() {
    let s = Scratch::new();
    let data = s.path("data");
    std::fs::create_dir_all(&data).unwrap();
    let out = s.path("out");
    std::fs::create_dir_all(&out).unwrap();
    // Private whatever the umask: a folder others can write is refused before its ledger is read.
    #[cfg(unix)]
    std::fs::set_permissions(&out, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    std::fs::write(out.join("ledger.db"), b"my notes, not a database").unwrap();
    let o = run(&s.detectors_with(&[]), &data, &out, &[]);
    assert_eq!(o.status.code(), Some(6), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("left untouched"));
    assert_eq!(std::fs::read(out.join("ledger.db")).unwrap(), b"my notes, not a database");
}

#[test]
fn verify_ends_within_its_bound_on_a_ledger_whose_meta_is_a_recursive_view() {
    let s = Scratch::new();
    let data = s.path("data");
    std::fs::create_dir_all(&data).unwrap();
    datagen::insert_activity(&data, &Activity::failed("m1", 1_000, "t1", "Bash", "exit 1")).unwrap();
    let out = s.path("out");
    scan(&s.detectors_with(&[]), &data, &out);
    {
        // Someone else's folder: its ledger's `meta` never ends a query.
        let c = rusqlite::Connection::open(out.join("ledger.db")).unwrap();
        c.execute_batch(
            "DROP TABLE meta;
             CREATE VIEW meta(key, value) AS
               WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT 'k' || n, n FROM r;",
        )
        .unwrap();
    }
    let o = sentinel_host().args(["verify", "--json", "--out"]).arg(&out).output().unwrap();
    assert_eq!(o.status.code(), Some(12), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["finding"]["file"], "ledger.db", "{v:#}");
    let problem = v["finding"]["problem"].as_str().unwrap_or_default();
    assert!(problem.contains("cannot read the ledger") && problem.contains("interrupt"), "{v:#}");
}
