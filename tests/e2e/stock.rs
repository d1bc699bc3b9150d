//! The stock sentinels on real inputs, through the real binary and the
//! sentinels config file (`SENTINELS_CONFIG_PATH`): a real directory, a real
//! HTTP server on loopback, a real SQLite outbox written by another
//! connection (this process), a real append-only file rewritten in the
//! middle, silence over a real backlog, and a hostile detector quarantined
//! and seen by watch-health-watch.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::Value;

use crate::support::*;

/// Fails, showing what the command printed, unless it exited 0.
fn exits_0(o: &std::process::Output) {
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
}

/// A run with the sentinels file `yaml` (and no other config), past the
/// fast path.
fn run_with(detectors: &Path, data: &Path, out: &Path, yaml: &Path, extra: &[&str]) -> Value {
    run_as_users_do(detectors, data, out, yaml, &[&["--no-fast-path"], extra].concat())
}

/// A run with the sentinels file `yaml`, as a user runs it (fast path on).
fn run_as_users_do(detectors: &Path, data: &Path, out: &Path, yaml: &Path, extra: &[&str]) -> Value {
    let o = run_command(detectors, data, out)
        .args(["--once", "--json"])
        .args(extra)
        .env("SENTINELS_CONFIG_PATH", yaml)
        .env("XDG_CONFIG_HOME", out.with_file_name("no-such-config"))
        .output()
        .unwrap();
    exits_0(&o);
    serde_json::from_slice(&o.stdout).unwrap()
}

fn count(out: &Path, kind: &str) -> i64 {
    issues_of(out, kind).iter().map(|i| i["count"].as_i64().unwrap()).sum()
}

fn outbox(db: &Path) -> rusqlite::Connection {
    let c = rusqlite::Connection::open(db).unwrap();
    c.execute_batch(
        "PRAGMA journal_mode=WAL;
         CREATE TABLE IF NOT EXISTS outbox (id INTEGER PRIMARY KEY, status TEXT NOT NULL, worker_provenance TEXT);",
    )
    .unwrap();
    c
}

#[test]
fn the_stock_sentinels_fire_on_real_inputs_and_stay_quiet_otherwise() {
    let s = Scratch::new();
    let data = s.path("gateway");
    let out = s.path("out");
    for dir in ["inbox", "council/sessions"] {
        std::fs::create_dir_all(data.join(dir)).unwrap();
    }
    std::fs::write(data.join("inbox/already-there.json"), "{}").unwrap();
    let index = data.join("council/sessions/index.jsonl");
    std::fs::write(&index, "{\"s\":1}\n{\"s\":2}\n{\"s\":3}\n").unwrap();
    let db = outbox(&data.join("outbox.db"));
    db.execute_batch(
        "INSERT INTO outbox VALUES (1, 'acked', 'VerifiedExact'), (2, 'acked', NULL), (3, 'pending', NULL);",
    )
    .unwrap();
    let (url, depth) = xtask::gateway::serve_depth().unwrap();
    depth.store(5, Ordering::SeqCst);
    let yaml = s.path("sentinels.yaml");
    std::fs::write(
        &yaml,
        format!(
            r#"# the gateway's sentinels
sources:
  directory:
    - {{ name: gw-inbox, path: inbox }}
  digest:
    - {{ name: gw-precedents, path: council/sessions/index.jsonl }}
  http:
    - {{ name: gw-queue, url: "{url}", jsonpath: "$.active_total" }}
  sqlite:
    - name: gw-outbox
      file: outbox.db
      query: "SELECT id, status, worker_provenance FROM outbox WHERE id > :cursor ORDER BY id"
      cursor: id
      columns: {{ id: int }}
sentinels:
  file-inbox-watch:    {{ roles: {{ inbox: gw-inbox }} }}
  precedent-integrity-watch: {{ roles: {{ precedents: gw-precedents }} }}
  queue-depth-watch:
    roles: {{ queue: gw-queue }}
    values: {{ threshold: 10 }}
  completion-verify-watch: {{ roles: {{ outbox: gw-outbox }} }}
"#
        ),
    )
    .unwrap();
    let detectors = s.detectors_with(&[]);

    // First scan: the inbox's listing is the baseline, the precedent log's
    // first digest has nothing to compare with, the depth is under 10; the
    // outbox's acked row without provenance is a fact.
    let s1 = run_with(&detectors, &data, &out, &yaml, &[]);
    assert_eq!(count(&out, "file_inbox_watch"), 0, "{s1:#}");
    assert_eq!(count(&out, "precedent_integrity_watch"), 0);
    assert_eq!(count(&out, "queue_depth_watch"), 0);
    assert_eq!(count(&out, "completion_verify_watch"), 1);
    assert_eq!(detector(&s1, "file_inbox_watch")["note"], Value::Null, "its role is bound");
    let silence = detector(&s1, "silence_watch")["note"].as_str().unwrap().to_owned();
    assert!(silence.contains("inert") && silence.contains("audit, backlog"), "{silence}");
    assert!(detector(&s1, "anomaly_watch")["note"].as_str().unwrap().contains("experimental"));
    // The scanner detectors still work as before, beside them.
    assert_eq!(detector(&s1, "tool_error")["status"], "ok");

    // Second scan: a new file, an append, a deeper queue, two more outbox rows.
    std::thread::sleep(Duration::from_millis(20));
    std::fs::write(data.join("inbox/new-order.json"), "{\"n\":1}").unwrap();
    std::fs::OpenOptions::new().append(true).open(&index).unwrap().write_all(b"{\"s\":4}\n").unwrap();
    depth.store(12, Ordering::SeqCst);
    db.execute_batch("INSERT INTO outbox VALUES (4, 'acked', 'Inferred'), (5, 'acked', 'VerifiedExact');").unwrap();
    run_with(&detectors, &data, &out, &yaml, &[]);
    let inbox = issues_of(&out, "file_inbox_watch");
    assert_eq!(count(&out, "file_inbox_watch"), 1, "{inbox:#?}");
    assert_eq!(inbox[0]["evidenceRef"], serde_json::json!({"source": "inbox", "id": "new-order.json"}));
    assert_eq!(count(&out, "precedent_integrity_watch"), 0, "an append never fires");
    assert_eq!(count(&out, "queue_depth_watch"), 1, "the depth crossed 10");
    assert_eq!(count(&out, "completion_verify_watch"), 2);

    // Third scan: the queue stays deep (no new fact); the log is rewritten in
    // the middle, same size, same lines.
    depth.store(40, Ordering::SeqCst);
    std::fs::write(&index, "{\"s\":1}\n{\"s\":9}\n{\"s\":3}\n{\"s\":4}\n").unwrap();
    run_with(&detectors, &data, &out, &yaml, &[]);
    assert_eq!(count(&out, "queue_depth_watch"), 1, "still deep: no new crossing");
    let rewrites = issues_of(&out, "precedent_integrity_watch");
    assert_eq!(count(&out, "precedent_integrity_watch"), 1, "{rewrites:#?}");
    assert_eq!(rewrites[0]["evidenceRef"]["id"], "council/sessions/index.jsonl");
    // No raw content anywhere: not the provenance, not the log's lines, not the body.
    let text = std::fs::read_to_string(out.join("issues.jsonl")).unwrap();
    for raw in ["Inferred", "\"s\":9", "active_total"] {
        assert!(!text.contains(raw), "{raw} leaked into issues.jsonl");
    }
    drop(db);
}

#[test]
fn silence_with_a_backlog_fires_and_silence_alone_does_not() {
    let s = Scratch::new();
    let data = s.path("gateway");
    let out = s.path("out");
    for dir in ["audit", "backlog"] {
        std::fs::create_dir_all(data.join(dir)).unwrap();
    }
    std::fs::write(data.join("audit/2026-11-30.ndjson"), "{}\n").unwrap();
    let yaml = s.path("sentinels.yaml");
    std::fs::write(
        &yaml,
        "sources:\n  directory:\n    - { name: audit, path: audit }\n    - { name: gw-backlog, path: backlog }\n\
         sentinels:\n  silence-watch:\n    roles: { backlog: gw-backlog }\n    values: { threshold_hours: 6 }\n",
    )
    .unwrap();
    let detectors = s.detectors_with(&[]);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let hour = 3_600_000;
    let at = |t: i64| run_with(&detectors, &data, &out, &yaml, &["--scan-time", &t.to_string()]);
    let s1 = at(now);
    assert_eq!(detector(&s1, "silence_watch")["note"], Value::Null, "audit bound by name, backlog by role");
    // Seven hours of silence, nothing pending: not a fact.
    at(now + 7 * hour);
    assert_eq!(count(&out, "silence_watch"), 0);
    // Work arrives and the silence goes on: a fact, once.
    std::fs::write(data.join("backlog/job-1.json"), "{}").unwrap();
    at(now + 8 * hour);
    at(now + 9 * hour);
    assert_eq!(count(&out, "silence_watch"), 1, "{:#?}", issues(&out));
    // An audit event ends the silence: the backlog alone does not fire again.
    std::fs::write(data.join("audit/2026-12-01.ndjson"), "{}\n").unwrap();
    let later = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    at(later.max(now + 9 * hour) + 1000);
    assert_eq!(count(&out, "silence_watch"), 1);
}

/// A generated data dir, watch-health-watch in the sentinels file, and the
/// `endless_loop` fixture (killed at its deadline every scan) beside the
/// shipped detectors.
struct Hostile {
    data: std::path::PathBuf,
    out: std::path::PathBuf,
    yaml: std::path::PathBuf,
    detectors: std::path::PathBuf,
}

fn hostile(s: &Scratch) -> Hostile {
    let data = s.path("data");
    xtask::datagen::generate(&data, &xtask::datagen::DataSpec::default()).unwrap();
    let yaml = s.path("sentinels.yaml");
    std::fs::write(&yaml, "sentinels:\n  watch-health-watch: {}\n").unwrap();
    Hostile { data, out: s.path("out"), yaml, detectors: s.detectors_with(&["endless_loop"]) }
}

#[test]
fn a_quarantined_hostile_detector_is_seen_by_watch_health_watch_which_never_reports_itself() {
    let s = Scratch::new();
    let Hostile { data, out, yaml, detectors } = hostile(&s);
    let hour = 3_600_000i64;
    let at = |t: i64| run_with(&detectors, &data, &out, &yaml, &["--scan-time", &t.to_string()]);
    at(10 * hour);
    let s2 = at(11 * hour);
    assert_eq!(detector(&s2, "endless_loop")["health"], "quarantined", "{s2:#}");
    assert_eq!(detector(&s2, "watch_health_watch")["note"], Value::Null, "the health source is the host's own");
    // The next scan's health source shows the quarantine and the kill.
    at(12 * hour);
    let seen = issues_of(&out, "watch_health_watch");
    let titles: Vec<&str> = seen.iter().map(|i| i["title"].as_str().unwrap()).collect();
    assert!(titles.contains(&"a sentinel was quarantined"), "{seen:#?}");
    assert!(titles.iter().any(|t| t.starts_with("a sentinel was hard-killed")), "{seen:#?}");
    assert!(seen.iter().all(|i| i["evidenceRef"]["id"] == "endless_loop"), "{seen:#?}");
    // Seen again, the same events are not counted again (each kill, one
    // per failed scan, and the quarantine are one fire each).
    let total = || issues_of(&out, "watch_health_watch").iter().map(|i| i["count"].as_i64().unwrap()).sum::<i64>();
    let before = total();
    assert_eq!(before, 3, "two kills and a quarantine: {:#?}", issues(&out));
    at(13 * hour);
    assert_eq!(total(), before);
    // A broken fire log is a finding it reports.
    let segment = out.join("fires-000001.ndjson");
    let text = std::fs::read_to_string(&segment).unwrap();
    std::fs::write(&segment, text.replacen("endless_loop", "endless_lööp", 1)).unwrap();
    at(14 * hour);
    let broken: Vec<Value> = issues_of(&out, "watch_health_watch")
        .into_iter()
        .filter(|i| i["title"] == "the fire log's hash chain does not verify")
        .collect();
    assert_eq!(broken.len(), 1, "{:#?}", issues(&out));
}

#[test]
fn watch_health_watch_sees_a_quarantine_and_a_tampered_chain_behind_the_fast_path() {
    // As a user runs it (fast path on), the data dir never changing after
    // the first scan: what the health source reports must still come out.
    let s = Scratch::new();
    let Hostile { data, out, yaml, detectors } = hostile(&s);
    let hour = 3_600_000i64;
    let at = |t: i64| run_as_users_do(&detectors, &data, &out, &yaml, &["--scan-time", &t.to_string()]);
    let titles = || -> Vec<String> {
        issues_of(&out, "watch_health_watch").iter().map(|i| i["title"].as_str().unwrap().to_owned()).collect()
    };
    at(10 * hour);
    let s2 = at(11 * hour);
    assert!(s2["unchangedSince"].is_null(), "a failed detector is owed a retry: {s2:#}");
    assert_eq!(detector(&s2, "endless_loop")["health"], "quarantined", "{s2:#}");
    let s3 = at(12 * hour);
    assert!(s3["unchangedSince"].is_null(), "a health change is owed to the health source: {s3:#}");
    assert!(titles().iter().any(|t| t == "a sentinel was quarantined"), "{:#?}", titles());
    // Nothing owed any more: the fast path holds again (the ledger's own
    // export of the fires seen is not a change).
    let s4 = at(13 * hour);
    assert_eq!(s4["unchangedSince"], 12 * hour, "{s4:#}");
    // A tampered fire log ends it: the health source verifies and reports.
    let segment = out.join("fires-000001.ndjson");
    let text = std::fs::read_to_string(&segment).unwrap();
    std::fs::write(&segment, text.replacen("endless_loop", "endless_lööp", 1)).unwrap();
    let s5 = at(14 * hour);
    assert!(s5["unchangedSince"].is_null(), "{s5:#}");
    assert!(titles().iter().any(|t| t == "the fire log's hash chain does not verify"), "{:#?}", titles());
}

#[test]
fn a_bad_sentinels_file_is_exit_3_naming_the_key_and_the_line() {
    let s = Scratch::new();
    let data = s.path("data");
    std::fs::create_dir_all(&data).unwrap();
    let yaml = s.path("sentinels.yaml");
    std::fs::write(&yaml, "sentinels:\n  file-inbox-watch:\n    roles:\n      inbox: nowhere\n").unwrap();
    let o = run_command(&s.detectors_with(&[]), &data, &s.path("out"))
        .args(["--once"])
        .env("SENTINELS_CONFIG_PATH", &yaml)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("sentinels.yaml") && err.contains("line 4") && err.contains("roles.inbox"), "{err}");
    // A path the variable names must exist.
    let o = run_command(&s.detectors_with(&[]), &data, &s.path("out"))
        .args(["--once"])
        .env("SENTINELS_CONFIG_PATH", s.path("missing.yaml"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", String::from_utf8_lossy(&o.stderr));
}

/// The long-running mode with an interval of an hour (only a kick can bring
/// a second scan), and its summaries, one a line.
fn long_running(
    detectors: &Path,
    data: &Path,
    out: &Path,
    yaml: &Path,
) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    use std::io::BufRead;
    let mut child = run_command(detectors, data, out)
        .args(["--interval", "3600", "--json"])
        .env("SENTINELS_CONFIG_PATH", yaml)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    (child, rx)
}

/// A gateway with an inbox bound to file-inbox-watch: the data dir and the
/// sentinels file.
fn inbox_gateway(s: &Scratch) -> (std::path::PathBuf, std::path::PathBuf) {
    let data = s.path("gateway");
    std::fs::create_dir_all(data.join("inbox")).unwrap();
    let yaml = s.path("sentinels.yaml");
    std::fs::write(
        &yaml,
        "sources:\n  directory:\n    - { name: gw-inbox, path: inbox }\nsentinels:\n  file-inbox-watch:\n    roles: { inbox: gw-inbox }\n",
    )
    .unwrap();
    (data, yaml)
}

#[test]
fn a_file_landing_in_the_inbox_is_fired_on_without_waiting_for_the_next_tick() {
    let s = Scratch::new();
    let (data, yaml) = inbox_gateway(&s);
    let out = s.path("out");
    let (mut child, rx) = long_running(&s.detectors_with(&[]), &data, &out, &yaml);
    let first = rx.recv_timeout(Duration::from_secs(120)).expect("the first scan");
    let first: Value = serde_json::from_str(&first).unwrap();
    assert_eq!(detector(&first, "file_inbox_watch")["status"], "ok", "{first:#}");
    std::fs::write(data.join("inbox/order-7.json"), "{}").unwrap();
    let second = rx.recv_timeout(Duration::from_secs(60));
    let _ = child.kill();
    let _ = child.wait();
    let second: Value = serde_json::from_str(&second.expect("a kicked scan, long before the hour")).unwrap();
    assert_eq!(detector(&second, "file_inbox_watch")["observations"], 1, "{second:#}");
    assert!(first["lastKick"].is_null() && second["lastKick"].as_i64().unwrap() > 0, "the summary says when");
    assert_eq!(count(&out, "file_inbox_watch"), 1);
}

#[test]
fn with_no_sentinels_config_the_stock_sentinels_are_inert_and_change_nothing() {
    let s = Scratch::new();
    let data = s.path("data");
    xtask::datagen::generate(&data, &xtask::datagen::DataSpec::default()).unwrap();
    let scanners = ["tool_error", "turn_stop", "queue_wait", "cost", "retry_loop"];
    let without = s.detectors_in("without", &scanners, &[]);
    let with = s.detectors_with(&[]);
    let quiet = |dir: &Path, out: &str| {
        let o = run_command(dir, &data, &s.path(out))
            .args(["--once", "--json"])
            // A sentinels file that binds nothing (an unset variable would let
            // a real /etc/gateway/sentinels.yaml in).
            .env("SENTINELS_CONFIG_PATH", no_sentinels())
            .env("XDG_CONFIG_HOME", s.path("no-config"))
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice::<Value>(&o.stdout).unwrap()
    };
    quiet(&without, "out-without");
    let summary = quiet(&with, "out-with");
    for stock in sentinel_host::config::stock::STOCK {
        let d = detector(&summary, stock.name);
        assert_eq!((d["status"].as_str(), d["observations"].as_i64()), (Some("ok"), Some(0)), "{d:#}");
        assert!(d["note"].as_str().unwrap().starts_with("inert"), "{d:#}");
    }
    let read = |out: &str| std::fs::read_to_string(s.path(out).join("issues.jsonl")).unwrap();
    assert!(!read("out-without").is_empty());
    assert_eq!(read("out-with"), read("out-without"), "the same issues, byte for byte");
}

/// The evidence ids of `detector`'s fires in the fire log, in order.
fn fired_ids(out: &Path, detector: &str) -> Vec<String> {
    let mut segments: Vec<_> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("fires-"))
        .collect();
    segments.sort();
    let mut ids = Vec::new();
    for segment in segments {
        // A line still being written (no newline yet) is not an entry yet.
        for line in std::fs::read_to_string(segment).unwrap().split_inclusive('\n').filter(|l| l.ends_with('\n')) {
            let entry: Value = serde_json::from_str(line).unwrap();
            if entry["detector"] == detector && entry["type"] == "occurrence" {
                ids.push(entry["evidenceId"].as_str().unwrap().to_owned());
            }
        }
    }
    ids
}

#[test]
fn rows_acked_in_place_in_a_rollback_journal_outbox_fire_once_each_while_the_writer_commits() {
    let s = Scratch::new();
    let data = s.path("gateway");
    let ctl = s.path("ctl");
    let out = s.path("out");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::create_dir_all(&ctl).unwrap();
    let yaml = s.path("sentinels.yaml");
    std::fs::write(
        &yaml,
        r#"sources:
  sqlite:
    - name: gw-outbox
      file: outbox.db
      query: "SELECT id, status, worker_provenance, updated_at FROM outbox WHERE updated_at > :cursor ORDER BY updated_at"
      cursor: updated_at
      reread: 10m
      columns: { id: int, updated_at: int }
sentinels:
  completion-verify-watch: { roles: { outbox: gw-outbox } }
"#,
    )
    .unwrap();
    let detectors = s.detectors_with(&[]);
    const PHASES: usize = 6;
    // The application: another process, another SQLite (Python's), writing
    // the outbox in place in rollback-journal mode.
    let mut writer = std::process::Command::new("python3")
        .arg(root().join("tests/e2e/outbox_writer.py"))
        .arg(data.join("outbox.db"))
        .arg(&ctl)
        .arg(PHASES.to_string())
        .stdin(std::process::Stdio::null())
        .stderr(std::fs::File::create(ctl.join("child.err")).unwrap())
        .spawn()
        .expect("python3 runs the writer");
    for phase in 0..PHASES {
        wait_for(120, &format!("the writer's phase {phase}"), &mut writer, || {
            ctl.join(format!("phase-{phase}")).exists()
        });
        // The writer keeps committing while this scan reads.
        run_with(&detectors, &data, &out, &yaml, &[]);
        std::fs::write(ctl.join(format!("scanned-{phase}")), "").unwrap();
    }
    // The writer's own lifetime bounds this wait.
    assert!(writer.wait().unwrap().success(), "{}", std::fs::read_to_string(ctl.join("child.err")).unwrap());
    run_with(&detectors, &data, &out, &yaml, &[]);
    run_with(&detectors, &data, &out, &yaml, &[]);

    let done: Value = serde_json::from_str(&std::fs::read_to_string(ctl.join("done")).unwrap()).unwrap();
    assert!(done["beats"].as_i64().unwrap() > 0, "the writer committed while the scans read");
    let mut expected: Vec<String> =
        done["fire"].as_array().unwrap().iter().map(|i| i.as_i64().unwrap().to_string()).collect();
    let mut fired = fired_ids(&out, "completion_verify_watch");
    fired.sort_by_key(|id| id.parse::<i64>().unwrap());
    expected.sort_by_key(|id| id.parse::<i64>().unwrap());
    assert_eq!(fired, expected, "exactly the unverified acks, once each");
    assert_eq!(listing(&data), ["outbox.db"], "the reads created nothing beside the database");
}

#[test]
fn windowed_sentinels_read_each_row_once_and_agree_with_a_recomputation() {
    let s = Scratch::new();
    let data = s.path("gateway");
    let out = s.path("out");
    std::fs::create_dir_all(&data).unwrap();
    let db = rusqlite::Connection::open(data.join("ledger.db")).unwrap();
    db.execute_batch(
        "PRAGMA journal_mode=WAL;
         CREATE TABLE spend (id INTEGER PRIMARY KEY, batch INTEGER, at INTEGER, usd REAL);
         CREATE TABLE escalations (id INTEGER PRIMARY KEY, batch INTEGER, at INTEGER, failed INTEGER);",
    )
    .unwrap();
    let sentinels = |spend_source: &str| {
        format!(
            r#"sources:
  sqlite:
{spend_source}
    - name: gw-escalations
      file: ledger.db
      query: "SELECT id, at, failed FROM escalations WHERE id > :cursor ORDER BY id"
      cursor: id
      columns: {{ id: int, at: int, failed: boolean }}
sentinels:
  ledger-delta-watch:
    enabled: true
    roles: {{ spend: gw-spend }}
    values: {{ window_hours: 1, baseline_windows: 3, threshold_pct: 50, min_baseline_usd: 5 }}
  anomaly-watch:
    enabled: true
    roles: {{ escalations: gw-escalations }}
    values: {{ window_hours: 1, alpha: 0.3, max_drift: 0.2, min_events: 5 }}
"#
        )
    };
    let detectors = s.detectors_with(&[]);
    // A source that would read every row at every scan is refused.
    let yaml = s.path("sentinels.yaml");
    std::fs::write(
        &yaml,
        sentinels(
            "    - name: gw-spend\n      file: ledger.db\n      query: \"SELECT at, usd FROM spend\"\n      columns: { at: int, usd: float }",
        ),
    )
    .unwrap();
    let o = run_command(&detectors, &data, &out).args(["--once"]).env("SENTINELS_CONFIG_PATH", &yaml).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains("sentinels.yaml") && err.contains("line 3") && err.contains("no `cursor`"), "{err}");
    assert!(!out.join("issues.jsonl").exists(), "nothing was scanned");

    std::fs::write(
        &yaml,
        sentinels(
            "    - name: gw-spend\n      file: ledger.db\n      query: \"SELECT id, at, usd FROM spend WHERE id > :cursor ORDER BY id\"\n      cursor: id\n      columns: { id: int, at: int, usd: float }",
        ),
    )
    .unwrap();
    const H: i64 = 3_600_000;
    let t0 = 500_000 * H; // on an hour
    let scans: Vec<i64> = (0..20).map(|k| t0 + k * 20 * 60_000 + 60_000).collect();
    for (k, &t) in scans.iter().enumerate() {
        // Rows dated since the scan before, added before this one.
        let since = if k == 0 { t0 } else { scans[k - 1] };
        let window = (t - t0) / H;
        for j in 0..3i64 {
            let at = since + (j + 1) * (t - since) / 4;
            let spike = if window == 3 || window == 5 { 4.0 } else { 1.0 };
            let usd = (4.0 + ((k as i64 * 7 + j) % 5) as f64 * 0.25) * spike;
            db.execute("INSERT INTO spend(batch, at, usd) VALUES (?1, ?2, ?3)", rusqlite::params![k as i64, at, usd])
                .unwrap();
        }
        for j in 0..4i64 {
            let at = since + (j + 1) * (t - since) / 5;
            let failed = if window == 4 { j != 3 } else { (k as i64 + j) % 7 == 0 };
            db.execute(
                "INSERT INTO escalations(batch, at, failed) VALUES (?1, ?2, ?3)",
                rusqlite::params![k as i64, at, failed],
            )
            .unwrap();
        }
        run_with(&detectors, &data, &out, &yaml, &["--scan-time", &t.to_string()]);
    }
    let params = serde_json::json!({
        "scans": scans,
        "ledger": {"window_ms": H, "baseline_windows": 3, "threshold_pct": 50.0, "min_baseline_usd": 5.0},
        "anomaly": {"window_ms": H, "alpha": 0.3, "max_drift": 0.2, "min_events": 5},
    });
    let oracle = std::process::Command::new("python3")
        .arg(root().join("tests/e2e/windowed_oracle.py"))
        .arg(data.join("ledger.db"))
        .arg(params.to_string())
        .output()
        .expect("python3 runs the oracle");
    assert!(oracle.status.success(), "{}", String::from_utf8_lossy(&oracle.stderr));
    let expected: Value = serde_json::from_slice(&oracle.stdout).unwrap();
    let windows = |key: &str| -> Vec<String> {
        expected[key].as_array().unwrap().iter().map(|w| format!("window:{}", w.as_i64().unwrap())).collect()
    };
    assert!(!windows("ledger").is_empty() && !windows("anomaly").is_empty(), "the data has spikes: {expected}");
    assert_eq!(fired_ids(&out, "ledger_delta_watch"), windows("ledger"));
    assert_eq!(fired_ids(&out, "anomaly_watch"), windows("anomaly"));
}

#[test]
fn the_precedent_log_appended_rewritten_truncated_deleted_recreated_fires_once_per_event_but_the_append() {
    let s = Scratch::new();
    let data = s.path("gateway");
    let out = s.path("out");
    std::fs::create_dir_all(data.join("council/sessions")).unwrap();
    let index = data.join("council/sessions/index.jsonl");
    std::fs::write(&index, "{\"s\":1}\n{\"s\":2}\n").unwrap();
    let yaml = s.path("sentinels.yaml");
    std::fs::write(
        &yaml,
        "sources:\n  digest:\n    - { name: gw-precedents, path: council/sessions/index.jsonl }\n\
         sentinels:\n  precedent-integrity-watch: { roles: { precedents: gw-precedents } }\n",
    )
    .unwrap();
    let detectors = s.detectors_with(&[]);
    let scan = || {
        run_with(&detectors, &data, &out, &yaml, &[]);
        issues_of(&out, "precedent_integrity_watch").iter().map(|i| i["count"].as_i64().unwrap()).sum::<i64>()
    };
    assert_eq!(scan(), 0, "the first reading");
    std::fs::OpenOptions::new().append(true).open(&index).unwrap().write_all(b"{\"s\":3}\n").unwrap();
    assert_eq!(scan(), 0, "an append is the log's life");
    std::fs::write(&index, "{\"s\":1}\n{\"s\":7}\n{\"s\":3}\n").unwrap();
    assert_eq!(scan(), 1, "rewritten in the middle");
    std::fs::write(&index, "{\"s\":1}\n").unwrap();
    assert_eq!(scan(), 2, "truncated");
    std::fs::remove_file(&index).unwrap();
    assert_eq!(scan(), 3, "deleted");
    assert_eq!(scan(), 3, "still gone: the same event");
    std::fs::write(&index, "{\"s\":1}\n").unwrap();
    assert_eq!(scan(), 4, "re-created");
    assert_eq!(scan(), 4, "unchanged since");
    let titles: Vec<String> =
        issues_of(&out, "precedent_integrity_watch").iter().map(|i| i["title"].as_str().unwrap().to_owned()).collect();
    assert!(titles.iter().any(|t| t.ends_with("disappeared")), "{titles:?}");
    assert!(titles.iter().any(|t| t.ends_with("replaced by another file")), "{titles:?}");
    // Its replay cases, deletion and replacement included, pass.
    let o = replay(
        &shipped_detectors().join("precedent_integrity_watch.wasm"),
        &root().join("detectors/precedent-integrity-watch/cases"),
    );
    exits_0(&o);
}

#[test]
fn a_file_renamed_into_the_inbox_fires_at_once_without_waiting_for_its_settle_time() {
    let s = Scratch::new();
    let data = s.path("gateway");
    for dir in ["inbox", "staging"] {
        std::fs::create_dir_all(data.join(dir)).unwrap();
    }
    let yaml = s.path("sentinels.yaml");
    // A settle time far past what the test waits: only a file seen moved in escapes it.
    std::fs::write(
        &yaml,
        "sources:\n  directory:\n    - { name: gw-inbox, path: inbox, settle: 120s }\n\
         sentinels:\n  file-inbox-watch:\n    roles: { inbox: gw-inbox }\n",
    )
    .unwrap();
    let out = s.path("out");
    let (mut child, rx) = long_running(&s.detectors_with(&[]), &data, &out, &yaml);
    rx.recv_timeout(Duration::from_secs(120)).expect("the first scan");
    // Written beside the inbox, then renamed into it: the common delivery.
    std::fs::write(data.join("staging/order-9.json"), "{\"order\":9}").unwrap();
    std::fs::rename(data.join("staging/order-9.json"), data.join("inbox/order-9.json")).unwrap();
    let landed = std::time::Instant::now();
    wait_for(60, "the renamed file's fire", &mut child, || fired_ids(&out, "file_inbox_watch").len() == 1);
    let waited = landed.elapsed();
    let _ = child.kill();
    let _ = child.wait();
    // Waiting for the settle would take 120 s: a bound, not a race.
    assert!(waited < Duration::from_secs(60), "{waited:?}");
    assert_eq!(fired_ids(&out, "file_inbox_watch"), ["order-9.json"]);
    let _ = rx;
}

#[test]
fn inbox_noise_and_files_still_being_written_do_not_fire_and_each_complete_file_fires_once() {
    let s = Scratch::new();
    let (data, yaml) = inbox_gateway(&s);
    let inbox = data.join("inbox");
    let out = s.path("out");
    let (mut child, rx) = long_running(&s.detectors_with(&[]), &data, &out, &yaml);
    rx.recv_timeout(Duration::from_secs(120)).expect("the first scan");
    // An editor's swap file and a Finder droppings file.
    std::fs::write(inbox.join("order-1.json.swp"), "x").unwrap();
    std::fs::write(inbox.join(".DS_Store"), "x").unwrap();
    // An rsync-style delivery: a dot-named temporary renamed into place.
    std::fs::write(inbox.join(".order-2.json.AbCdEf"), "{\"order\":2}").unwrap();
    std::fs::rename(inbox.join(".order-2.json.AbCdEf"), inbox.join("order-2.json")).unwrap();
    // An upload in six chunks 200 ms apart, the watcher kicking all along.
    {
        let mut f = std::fs::File::create(inbox.join("upload-3.bin")).unwrap();
        for chunk in 0..6u8 {
            f.write_all(&[chunk; 4096]).unwrap();
            f.flush().unwrap();
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    // A last file: once it has fired, every state before it has been scanned.
    std::fs::write(inbox.join("zz-last.json"), "{}").unwrap();
    wait_for(120, "the last file's fire", &mut child, || {
        out.join("fires-000001.ndjson").exists()
            && fired_ids(&out, "file_inbox_watch").contains(&"zz-last.json".to_owned())
    });
    let _ = child.kill();
    let _ = child.wait();
    let mut fired = fired_ids(&out, "file_inbox_watch");
    fired.sort();
    assert_eq!(fired, ["order-2.json", "upload-3.bin", "zz-last.json"], "one fire per complete file");
    let _ = rx;
}

#[test]
fn the_fast_sentinel_runs_only_when_kicked_and_a_polling_one_ticks_on_its_cooldown() {
    let s = Scratch::new();
    let data = s.path("gateway");
    for dir in ["inbox", "audit", "backlog"] {
        std::fs::create_dir_all(data.join(dir)).unwrap();
    }
    std::fs::write(data.join("audit/today.ndjson"), "{}\n").unwrap();
    let yaml = s.path("sentinels.yaml");
    std::fs::write(
        &yaml,
        "sources:\n  directory:\n    - { name: inbox, path: inbox }\n    - { name: audit, path: audit }\n    - { name: backlog, path: backlog }\n\
         sentinels:\n  file-inbox-watch: {}\n  silence-watch:\n    cooldown: 2s\n",
    )
    .unwrap();
    let out = s.path("out");
    let (mut child, rx) = long_running(&s.detectors_with(&[]), &data, &out, &yaml);
    let next = || -> Value {
        let line = rx.recv_timeout(Duration::from_secs(120)).expect("a summary");
        serde_json::from_str(&line).unwrap()
    };
    // A kick's folded second scan may find nothing changed: no detector ran.
    let status = |v: &Value, d: &str| {
        if v["unchangedSince"].is_i64() {
            return "unchanged".to_owned();
        }
        detector(v, d)["status"].as_str().unwrap().to_owned()
    };
    let first = next();
    assert_eq!((status(&first, "file_inbox_watch"), status(&first, "silence_watch")), ("ok".into(), "ok".into()));
    assert!(detector(&first, "silence_watch")["nextDue"].as_i64().is_some(), "{first:#}");
    // Nothing written, an interval of an hour: the next scan is the cooldown's tick.
    let tick = next();
    assert_eq!(status(&tick, "silence_watch"), "ok", "{tick:#}");
    assert_eq!(status(&tick, "file_inbox_watch"), "not-due", "a fast sentinel does not tick");
    // The inbox stirs: the kicked scan runs the fast sentinel.
    std::fs::write(data.join("inbox/order-1.json"), "{}").unwrap();
    let kicked = loop {
        let v = next();
        if status(&v, "file_inbox_watch") == "ok" {
            break v;
        }
    };
    assert_eq!(detector(&kicked, "file_inbox_watch")["observations"], 1, "{kicked:#}");
    assert!(kicked["lastKick"].as_i64().is_some());
    // And the ticks go on without it.
    let tick = loop {
        let v = next();
        if status(&v, "silence_watch") == "ok" {
            break v;
        }
    };
    assert_eq!(status(&tick, "file_inbox_watch"), "not-due", "{tick:#}");
    let _ = child.kill();
    let _ = child.wait();
    // `detectors list` names the classes and the next due time.
    let o = sentinel_host()
        .args(["detectors", "list", "--detectors"])
        .arg(s.path("detectors"))
        .arg("--data-dir")
        .arg(&data)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&o.stdout);
    let line = |name: &str| listing.lines().find(|l| l.starts_with(name)).unwrap_or_default().to_owned();
    assert!(line("file_inbox_watch").contains(" fast"), "{listing}");
    assert!(line("silence_watch").contains(" polling") && line("silence_watch").contains("next due"), "{listing}");
    assert!(line("anomaly_watch").contains(" deep"), "{listing}");
    // The next due time reads as a span from now (`in 59s`, `now`), not raw epoch ms.
    let due = line("silence_watch");
    let due = due.split("next due ").nth(1).unwrap_or_default();
    assert!(due == "now" || due.starts_with("in ") && due.ends_with(|c: char| c.is_ascii_alphabetic()), "{listing}");
}
