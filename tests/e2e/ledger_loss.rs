//! The fire log outlives `ledger.db`: a deleted ledger continues the chain
//! from the exported head and never writes an exported byte again, a
//! rollback with the ledger deleted is a finding on the host's own folder,
//! and a tampered log is refused before anything is written (issue 33).

use std::path::Path;

use xtask::datagen::{self, Activity};

use crate::ledger::verify;
use crate::support::*;

/// `n` failed tool calls, ids `m{from}`.., a second apart.
fn failures(data: &Path, from: usize, n: usize) {
    for i in from..from + n {
        // One turn each: one occurrence of one kind each (no retry loop).
        let (id, turn, output) = (format!("m{i}"), format!("t{i}"), format!("no layer {i} in /l{i}"));
        let a = Activity::failed(&id, 1_000 * (i as i64 + 1), &turn, "mcp__agents__load_layer", &output);
        datagen::insert_activity(data, &a).unwrap();
    }
}

/// As [`failures`], `n` of them in one transaction (thousands, quickly).
fn many_failures(data: &Path, from: usize, n: usize) {
    let mut c = datagen::messages_db(data).unwrap();
    let tx = c.transaction().unwrap();
    for i in from..from + n {
        let data = serde_json::json!({"turnId": format!("t{i}"), "from": {"botId": "bot-x"},
            "tool": {"name": "mcp__agents__load_layer", "ok": false, "output": format!("no layer {i} in /l{i}")}});
        tx.execute(
            "INSERT INTO messages(id, thread_id, at, type, data) VALUES(?1, 'th-x', ?2, 'activity', ?3)",
            rusqlite::params![format!("m{i}"), 1_000 * (i as i64 + 1), data.to_string()],
        )
        .unwrap();
    }
    tx.commit().unwrap();
}

fn delete_ledger(out: &Path) {
    for f in ["ledger.db", "ledger.db-wal", "ledger.db-shm"] {
        let _ = std::fs::remove_file(out.join(f));
    }
}

/// Every fire-log file of `out` (segments, head, public key) and its bytes.
fn log_files(out: &Path) -> Vec<(String, Vec<u8>)> {
    listing(out)
        .into_iter()
        .filter(|n| n.starts_with("fires"))
        .map(|n| (n.clone(), std::fs::read(out.join(n)).unwrap()))
        .collect()
}

/// `verify --json` with `extra`, as (exit code, JSON).
fn verify_with(out: &Path, extra: &[&str]) -> (Option<i32>, serde_json::Value) {
    let o = sentinel_host().args(["verify", "--json", "--out"]).arg(out).args(extra).output().unwrap();
    let v = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {o:?}"));
    (o.status.code(), v)
}

/// What `verify --json` said of one check.
fn check<'a>(v: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    v["checks"].as_array().unwrap().iter().find(|c| c["check"] == name).unwrap_or_else(|| panic!("{name}: {v:#}"))
}

#[test]
fn a_deleted_ledger_keeps_every_fire_byte_for_byte_and_the_chain_goes_on() {
    let s = Scratch::new();
    let data = s.path("data");
    std::fs::create_dir_all(&data).unwrap();
    failures(&data, 0, 3);
    let detectors = s.detectors_with(&[]);
    let out = s.path("out");
    let summary = scan(&detectors, &data, &out);
    assert_eq!(summary["issues"]["fires"], 3, "{summary:#}");
    let segment = std::fs::read(out.join("fires-000001.ndjson")).unwrap();

    delete_ledger(&out);
    // Two new failures, then two scans: the first continues the chain, the
    // second finds nothing new.
    failures(&data, 3, 2);
    let first = scan(&detectors, &data, &out);
    let reset = first["stateReset"].as_str().unwrap_or_default();
    assert!(reset.contains("3 entries copied") && reset.contains("the next fire is entry 4"), "{first:#}");
    assert_eq!(
        (first["issues"]["counted"].as_u64(), first["issues"]["fires"].as_u64()),
        (Some(2), Some(2)),
        "{first:#}"
    );
    let second = scan(&detectors, &data, &out);
    assert_eq!(second["issues"]["counted"], 0, "{second:#}");

    let now = std::fs::read(out.join("fires-000001.ndjson")).unwrap();
    assert!(now.starts_with(&segment), "an old fire's bytes were written again");
    let fires = fire_entries(&out);
    let seqs: Vec<u64> = fires.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5], "the chain goes on from entry 3");
    assert_eq!(fires[3]["prev"], fires[2]["hash"]);
    let v = verify(&out);
    assert_eq!((v["ok"].as_bool(), v["entries"].as_u64()), (Some(true), Some(5)), "{v:#}");
    assert_eq!(check(&v, "ledger-anchor")["status"], "ok", "{v:#}");
    let counted: u64 = issues(&out).iter().map(|i| i["count"].as_u64().unwrap()).sum();
    assert_eq!(counted, 5, "every failure counted once, none twice");
    assert_eq!(fires.iter().filter(|e| e["type"] == "occurrence").count(), 5);
}

#[test]
fn a_deleted_ledger_continues_the_open_segment_to_its_end_and_the_next_one_after_it() {
    // 4094 fires: segment 1 two short of its 4096. After the ledger is
    // deleted, five more: two close segment 1, three open segment 2.
    let s = Scratch::new();
    let data = s.path("data");
    many_failures(&data, 0, 4094);
    let detectors = s.detectors_with(&[]);
    let out = s.path("out");
    let first = scan(&detectors, &data, &out);
    assert_eq!(first["issues"]["fires"], 4094, "{:#}", first["issues"]);
    let segment = std::fs::read(out.join("fires-000001.ndjson")).unwrap();
    delete_ledger(&out);
    many_failures(&data, 4094, 5);
    let again = scan(&detectors, &data, &out);
    assert_eq!(again["issues"]["fires"], 5, "{:#}", again["issues"]);

    let closed = std::fs::read_to_string(out.join("fires-000001.ndjson")).unwrap();
    assert!(closed.as_bytes().starts_with(&segment), "an old fire's bytes were written again");
    assert_eq!(closed.lines().count(), 4096, "segment 1 filled to its end, then closed");
    assert_eq!(std::fs::read_to_string(out.join("fires-000002.ndjson")).unwrap().lines().count(), 3);
    let v = verify(&out);
    assert_eq!((v["ok"].as_bool(), v["entries"].as_u64(), v["segments"].as_u64()), (Some(true), Some(4099), Some(2)));
    let counted: u64 = issues(&out).iter().map(|i| i["count"].as_u64().unwrap()).sum();
    assert_eq!(counted, 4099, "every failure counted once");
}

#[test]
fn a_rollback_with_the_ledger_deleted_is_exit_12_on_the_hosts_own_folder() {
    let s = Scratch::new();
    let data = s.path("data");
    std::fs::create_dir_all(&data).unwrap();
    failures(&data, 0, 2);
    let detectors = s.detectors_with(&[]);
    let out = s.path("out");
    scan(&detectors, &data, &out);
    let older = log_files(&out);
    failures(&data, 2, 2);
    assert_eq!(scan(&detectors, &data, &out)["issues"]["fires"], 2);

    // The attacker: the older files put back, the ledger that anchors the
    // newer head deleted.
    for (name, bytes) in &older {
        std::fs::write(out.join(name), bytes).unwrap();
    }
    delete_ledger(&out);
    let (code, v) = verify_with(&out, &[]);
    assert_eq!(code, Some(12), "{v:#}");
    assert_eq!(v["finding"]["file"], "ledger.db", "{v:#}");
    assert!(v["finding"]["problem"].as_str().unwrap().contains("rollback"), "{v:#}");
    assert_eq!(check(&v, "ledger-anchor")["status"], "failed", "{v:#}");
    assert_eq!(check(&v, "chain")["status"], "ok", "the files alone are self-consistent: {v:#}");
    let human = sentinel_host().args(["verify", "--out"]).arg(&out).output().unwrap();
    assert_eq!(human.status.code(), Some(12));
    assert!(String::from_utf8_lossy(&human.stdout).starts_with("BROKEN: ledger.db: the ledger is missing"));

    // Handed over on purpose, the files are checked alone, and verify says
    // what it could not check.
    let (code, v) = verify_with(&out, &["--handed-over"]);
    assert_eq!(code, Some(0), "{v:#}");
    assert_eq!(check(&v, "ledger-anchor")["status"], "not-checked", "{v:#}");
    assert!(check(&v, "ledger-anchor")["why"].as_str().unwrap().contains("rollback"), "{v:#}");
    assert_eq!(check(&v, "witness")["status"], "not-checked", "{v:#}");
}

#[test]
fn a_tampered_log_with_the_ledger_deleted_is_refused_by_the_scan_and_nothing_is_written() {
    let s = Scratch::new();
    let data = s.path("data");
    std::fs::create_dir_all(&data).unwrap();
    failures(&data, 0, 3);
    let detectors = s.detectors_with(&[]);
    let out = s.path("out");
    scan(&detectors, &data, &out);
    let seg = out.join("fires-000001.ndjson");
    let text = std::fs::read_to_string(&seg).unwrap();
    std::fs::write(&seg, text.replacen("\"m1\"", "\"m7\"", 1)).unwrap();
    delete_ledger(&out);
    failures(&data, 3, 1);
    let files = log_files(&out);
    let issues_before = std::fs::read(out.join("issues.jsonl")).unwrap();

    let o = run(&detectors, &data, &out, &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(12), "{err}");
    assert!(err.contains("fires-000001.ndjson, line 2, entry 2") && err.contains("altered"), "{err}");
    assert!(err.contains("nothing was written"), "{err}");
    assert!(!out.join("ledger.db").exists(), "no ledger was created");
    assert_eq!(log_files(&out), files, "the exported log is untouched");
    assert_eq!(std::fs::read(out.join("issues.jsonl")).unwrap(), issues_before);
}
