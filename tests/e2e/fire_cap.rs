//! A detector cannot fill the disk: the new fires and issues one detector
//! adds in one scan are capped (`[limits] fires_per_scan`, or one per record
//! it read), a detector over the cap fails that scan as `over-limit`, is
//! quarantined after two such scans, and nothing of its scan is committed;
//! the other detectors' results commit as they would have without it
//! (docs/sandbox.md).

use std::path::{Path, PathBuf};

use serde_json::Value;
use xtask::datagen::{self, DataSpec};

use crate::support::*;

const HOUR: i64 = 3_600_000;
const HOSTILE: &str = "fresh_keys";

/// One `run --once --json --no-fast-path` at `t` with `fires_per_scan`; its summary.
fn scan_at(s: &Scratch, detectors: &Path, data: &Path, out: &Path, fires_per_scan: u64, t: i64) -> Value {
    let config = s.path(&format!("cap-{fires_per_scan}.toml"));
    std::fs::write(&config, format!("[limits]\nfires_per_scan = {fires_per_scan}\n")).unwrap();
    let o = run(
        detectors,
        data,
        out,
        &["--no-fast-path", "--config", config.to_str().unwrap(), "--scan-time", &t.to_string()],
    );
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The bytes of every regular file in `out`, all together.
fn folder_bytes(out: &Path) -> u64 {
    files_under(out)
        .iter()
        .filter_map(|p| std::fs::symlink_metadata(p).ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum()
}

/// Fire log entries, without their place in the chain, of the detectors
/// other than `hostile` and watch-health-watch (which reports its quarantine).
fn others_fires(out: &Path) -> Vec<Value> {
    fire_entries(out)
        .into_iter()
        .filter(|e| e["detector"] != HOSTILE && e["detector"] != "watch_health_watch")
        .map(|mut e| {
            for k in ["seq", "prev", "hash"] {
                e.as_object_mut().unwrap().remove(k);
            }
            e
        })
        .collect()
}

fn others_issues(out: &Path) -> Vec<Value> {
    issues(out).into_iter().filter(|i| i["kind"] != HOSTILE && i["kind"] != "watch_health_watch").collect()
}

/// What the store kept of `detector`: its state rows, its fires.
fn stored_of(out: &Path, detector: &str) -> (i64, i64) {
    let c = rusqlite::Connection::open(out.join("ledger.db")).unwrap();
    let states =
        c.query_row("SELECT COUNT(*) FROM detector_state WHERE detector = ?1", [detector], |r| r.get(0)).unwrap();
    let fires = c
        .query_row(
            "SELECT COUNT(*) FROM fires WHERE json_extract(line, '$.detector') = ?1
                 AND json_extract(line, '$.type') = 'occurrence'",
            [detector],
            |r| r.get(0),
        )
        .unwrap();
    (states, fires)
}

/// A copy of `detectors` without the hostile fixture.
fn without_hostile(s: &Scratch, detectors: &Path) -> PathBuf {
    let base = s.path("base-detectors");
    std::fs::create_dir_all(&base).unwrap();
    for entry in std::fs::read_dir(detectors).unwrap() {
        let p = entry.unwrap().path();
        if p.file_stem().is_some_and(|n| n != HOSTILE) {
            std::fs::copy(&p, base.join(p.file_name().unwrap())).unwrap();
        }
    }
    base
}

#[test]
fn a_detector_adding_fresh_fires_is_stopped_at_its_cap_quarantined_and_commits_nothing() {
    let s = Scratch::new();
    let data = s.path("data");
    datagen::generate(&data, &DataSpec::default()).unwrap();
    let detectors = s.detectors_with(&[HOSTILE]);
    let base_detectors = without_hostile(&s, &detectors);
    let (out, base) = (s.path("out"), s.path("base"));
    // 100 fresh keys a record: far more than the cap of max(1000, records).
    let cap = 1000;
    let scans = [10 * HOUR, 11 * HOUR, 12 * HOUR];
    let mut summaries = Vec::new();
    for t in scans {
        summaries.push(scan_at(&s, &detectors, &data, &out, cap, t));
        scan_at(&s, &base_detectors, &data, &base, cap, t);
    }
    let d = |i: usize| detector(&summaries[i], HOSTILE).clone();
    let records = d(0)["records"].as_u64().unwrap();
    assert!(records > 0 && records * 100 > cap, "the fixture must be over its cap: {:#}", d(0));
    for i in [0, 1] {
        assert_eq!(d(i)["status"], "failed", "{:#}", d(i));
        assert_eq!(d(i)["failure"]["kind"], "over-limit", "{:#}", d(i));
        let message = d(i)["failure"]["message"].as_str().unwrap().to_owned();
        assert!(message.contains(&format!("over the limit of {cap} a scan")), "{message}");
        assert!(message.contains(&format!("would add {} new fires", records * 100)), "{message}");
    }
    assert_eq!(d(0)["health"], "ok", "one failure");
    assert_eq!(d(1)["health"], "quarantined", "two failures in a row quarantine it (sandbox.md)");
    assert_eq!((d(2)["status"].as_str(), d(2)["calls"].as_u64()), (Some("quarantined"), Some(0)));

    // Nothing of its scans: no fire, no issue, no state; only the quarantine.
    assert_eq!(stored_of(&out, HOSTILE), (0, 0));
    assert!(issues_of(&out, HOSTILE).is_empty());
    let own: Vec<Value> = fire_entries(&out).into_iter().filter(|e| e["detector"] == HOSTILE).collect();
    assert_eq!(own.len(), 1, "{own:#?}");
    assert_eq!(own[0]["type"], "quarantine");
    assert!(own[0]["reason"].as_str().unwrap().contains("over-limit"), "{own:#?}");
    assert_eq!(crate::ledger::verify(&out)["ok"], true);

    // The others: every summary, fire and issue as in the folder it never ran in.
    for (i, summary) in summaries.iter().enumerate() {
        for other in summary["detectors"].as_array().unwrap().iter().filter(|d| d["name"] != HOSTILE) {
            assert_eq!(other["status"], "ok", "scan {i}: {other:#}");
        }
    }
    assert!(!others_fires(&base).is_empty(), "the other detectors fire on this data");
    assert_eq!(others_fires(&out), others_fires(&base));
    assert_eq!(others_issues(&out), others_issues(&base));

    // Bounded: the folder holds what the other detectors wrote, and a few
    // entries about the hostile one (its quarantine, watch-health-watch's
    // fire), not its thousands of fires.
    let (hostile_bytes, base_bytes) = (folder_bytes(&out), folder_bytes(&base));
    assert!(hostile_bytes <= base_bytes + (128 << 10), "{hostile_bytes} bytes against {base_bytes} without it");
    // Without the cap (one far above what it adds), the same detector's one
    // scan commits every fire: the check above would fail.
    let open = s.path("uncapped");
    let summary = scan_at(&s, &detectors, &data, &open, 1_000_000, scans[0]);
    assert_eq!(detector(&summary, HOSTILE)["status"], "ok");
    assert_eq!(stored_of(&open, HOSTILE).1 as u64, records * 100);
    assert!(folder_bytes(&open) > base_bytes + (1 << 20), "{} bytes against {base_bytes}", folder_bytes(&open));
}

#[test]
fn the_default_cap_on_new_fires_is_in_the_sandbox_doc() {
    let sandbox = std::fs::read_to_string(root().join("docs/sandbox.md")).unwrap();
    let row = sandbox.lines().find(|l| l.starts_with("| new fires and new issues")).expect("a row for the cap");
    assert!(row.contains("10 000") && row.contains("`over-limit`"), "{row}");
    assert_eq!(sentinel_host::runtime::Limits::default().fires_per_scan, 10_000);
}
