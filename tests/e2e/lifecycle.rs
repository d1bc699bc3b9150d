//! Issue states end to end: fix, a regression after a new occurrence, reopen
//! and fix again, all on the real binary and recorded in the fire log.

use std::path::Path;

use xtask::datagen::{self, Activity};

use crate::support::*;

fn issues_cmd(args: &[&str], data: &Path, out: &Path) -> std::process::Output {
    let mut c = sentinel_host();
    c.arg("issues").args(args).arg("--data-dir").arg(data).arg("--out").arg(out);
    run_within(c, std::time::Duration::from_secs(60))
}

fn fire_types(out: &Path) -> Vec<String> {
    fire_entries(out).iter().map(|e| e["type"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn a_fixed_issue_with_a_new_occurrence_is_regressed_with_a_signed_regression_fire() {
    let s = Scratch::new();
    let data = s.path("data");
    let out = s.path("out");
    let t = 1_791_895_000_000_i64;
    let fail = |id: &str, at: i64, turn: &str| {
        datagen::insert_activity(&data, &Activity::failed(id, at, turn, "Bash", "exit 2: no such file")).unwrap();
    };
    fail("m1", t, "t1");
    let detectors = s.detectors_with(&[]);
    let scan_at = |at: i64| {
        let o = run(&detectors, &data, &out, &["--no-fast-path", "--scan-time", &at.to_string()]);
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    };
    scan_at(t + 60_000);
    let issue = issues_of(&out, "tool_error").remove(0);
    let sig = issue["sig"].as_str().unwrap().to_owned();
    assert_eq!(issue["state"], "open");

    let o = issues_cmd(&["fix", &sig, "--note", "release 1.2"], &data, &out);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let o = issues_cmd(&["fix", &sig], &data, &out);
    assert_eq!(o.status.code(), Some(2), "fixing a fixed issue is refused");
    let o = issues_cmd(&["list", "--state", "fixed", "--json"], &data, &out);
    let listed = String::from_utf8(o.stdout).unwrap();
    assert!(listed.contains(&sig) && listed.contains("\"fixNote\":\"release 1.2\""), "{listed}");

    // The same data again: no regression. A new occurrence: regressed.
    scan_at(t + 120_000);
    assert_eq!(issues_of(&out, "tool_error")[0]["state"], "fixed");
    fail("m2", t + 130_000, "t2");
    scan_at(t + 180_000);
    let issue = &issues_of(&out, "tool_error")[0];
    assert_eq!((issue["state"].as_str(), issue["count"].as_i64()), (Some("regressed"), Some(2)));
    assert!(issue["fixedAt"].as_i64().is_some());

    let o = issues_cmd(&["reopen", &sig], &data, &out);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let o = issues_cmd(&["fix", &sig], &data, &out);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let o = issues_cmd(&["show", &sig], &data, &out);
    let shown: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(shown["state"], "fixed");
    let o = issues_cmd(&["show", "tool_error:0000000000000000"], &data, &out);
    assert_eq!(o.status.code(), Some(2), "an unknown signature is the operator's input");

    let types = fire_types(&out);
    let lifecycle: Vec<_> = types.iter().filter(|t| *t != "occurrence").map(String::as_str).collect();
    assert_eq!(lifecycle, ["fix", "regression", "reopen", "fix"], "{types:?}");
    let mut verify = sentinel_host();
    verify.arg("verify").arg("--data-dir").arg(&data).arg("--out").arg(&out);
    let o = run_within(verify, std::time::Duration::from_secs(60));
    assert_eq!(o.status.code(), Some(0), "the chain verifies: {}", String::from_utf8_lossy(&o.stdout));
}
