//! What the host promises a detector about its state and its streams, and
//! what output it refuses (docs/sandbox.md), through the `keeper` fixture:
//! state persisted between scans, unchanged by a failed scan, capped at
//! 1 MiB (exactly 1 MiB kept); an undeclared kind and an empty occurrence key
//! refused; stdin closed, stdout and stderr cut at 64 KiB, stderr's tail shown.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;
use xtask::datagen::{self, DataSpec};

use crate::support::*;

/// The state blob's cap (docs/sandbox.md, limits).
const STATE_CAP: usize = 1 << 20;

/// One scan with the keeper's config; its summary entry.
fn keeper_scan(detectors: &Path, data: &Path, out: &Path, sets: &[&str]) -> Value {
    let mut extra = vec!["--no-fast-path"];
    for s in sets {
        extra.extend(["--set", s]);
    }
    let o = run(detectors, data, out, &extra);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let summary: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(detector(&summary, "tool_error")["status"], "ok", "the others run: {summary:#}");
    detector(&summary, "keeper").clone()
}

/// The titles of the keeper's issues: `state=N` for each count it was given.
fn given(out: &Path) -> BTreeSet<String> {
    issues_of(out, "keeper").iter().map(|i| i["title"].as_str().unwrap().to_owned()).collect()
}

fn set(titles: &[&str]) -> BTreeSet<String> {
    titles.iter().map(|t| (*t).to_owned()).collect()
}

#[test]
fn state_is_kept_between_scans_unchanged_by_a_failed_scan_and_capped_at_one_mebibyte() {
    let s = Scratch::new();
    let data = s.path("data");
    datagen::generate(&data, &DataSpec::default()).unwrap();
    let detectors = s.detectors_with(&["keeper"]);
    let out = s.path("out");
    let ok = |d: &Value| assert_eq!(d["status"], "ok", "{d:#}");

    ok(&keeper_scan(&detectors, &data, &out, &[]));
    ok(&keeper_scan(&detectors, &data, &out, &[]));
    assert_eq!(given(&out), set(&["state=none", "state=1"]), "the state written by one scan is the next one's");

    // A failed scan: its new state (3) is dropped with its observations.
    let failed = keeper_scan(&detectors, &data, &out, &["keeper.mode=fail"]);
    assert_eq!(failed["status"], "failed", "{failed:#}");
    assert!(failed["failure"]["message"].as_str().unwrap().contains("it was given 2"), "{failed:#}");
    ok(&keeper_scan(&detectors, &data, &out, &[]));
    assert_eq!(given(&out), set(&["state=none", "state=1", "state=2"]), "the failed scan left the state as it was");

    // Exactly the cap is kept; one byte more is refused and not kept.
    let at_cap = format!("keeper.pad={}", STATE_CAP - 8);
    ok(&keeper_scan(&detectors, &data, &out, &[&at_cap]));
    let over_cap = format!("keeper.pad={}", STATE_CAP - 7);
    let over = keeper_scan(&detectors, &data, &out, &[&over_cap]);
    assert_eq!(over["status"], "failed", "{over:#}");
    assert_eq!(over["failure"]["kind"], "invalid-output", "{over:#}");
    let message = over["failure"]["message"].as_str().unwrap();
    assert!(message.contains(&format!("state of {} bytes", STATE_CAP + 1)), "{message}");
    assert!(message.contains(&format!("over the limit of {STATE_CAP}")), "{message}");
    ok(&keeper_scan(&detectors, &data, &out, &[]));
    assert_eq!(
        given(&out),
        set(&["state=none", "state=1", "state=2", "state=3", "state=4"]),
        "a 1 MiB state was kept and read back (4), the larger one was not (5)"
    );
}

#[test]
fn an_undeclared_kind_and_an_empty_occurrence_key_are_refused() {
    let s = Scratch::new();
    let data = s.path("data");
    datagen::generate(&data, &DataSpec::default()).unwrap();
    let detectors = s.detectors_with(&["keeper"]);
    for (mode, named) in [("undeclared-kind", "not_mine"), ("empty-key", "empty")] {
        let out = s.path(&format!("out-{mode}"));
        let d = keeper_scan(&detectors, &data, &out, &[&format!("keeper.mode={mode}")]);
        assert_eq!(d["status"], "failed", "{d:#}");
        assert_eq!(d["failure"]["kind"], "invalid-output", "{d:#}");
        assert_eq!(d["failure"]["phase"], "finish", "{d:#}");
        let message = d["failure"]["message"].as_str().unwrap();
        assert!(message.contains(named), "{mode}: the message names what was wrong: {message}");
        assert_eq!(d["observations"], 0, "{d:#}");
        assert!(issues_of(&out, "keeper").is_empty() && issues_of(&out, "not_mine").is_empty());
    }
}

#[test]
fn stdin_is_closed_and_stdout_and_stderr_are_cut_at_64_kib() {
    let s = Scratch::new();
    let data = s.path("data");
    datagen::generate(&data, &DataSpec::default()).unwrap();
    let d = keeper_scan(&s.detectors_with(&["keeper"]), &data, &s.path("out"), &["keeper.mode=stdio"]);
    assert_eq!(d["status"], "failed", "{d:#}");
    // 100 lines of 1000 bytes tried on each stream: 65 fit in 64 KiB (65 536
    // bytes), the 66th finds the stream closed; stdin is at its end at once.
    assert!(d["failure"]["message"].as_str().unwrap().contains("stdin=0 stdout-lines=65 stderr-lines=65"), "{d:#}");
    // The tail of stderr comes with any failure, a detector-error included.
    let tail = d["failure"]["stderr"].as_str().unwrap_or_else(|| panic!("no stderr tail: {d:#}"));
    assert!(!tail.is_empty() && tail.len() <= 4 * 1024, "a tail of stderr, not all of it: {} bytes", tail.len());
    assert!(tail.trim_end().chars().all(|c| c == 'e' || c == '\n' || c == '…'), "{tail:?}");
}
