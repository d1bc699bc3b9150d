//! Quarantine and probation over several runs, driven by the data.

use serde_json::Value;
use xtask::datagen::{self, Activity};

use crate::support::*;

const HOUR: i64 = 3_600_000;

#[test]
fn two_failures_quarantine_then_probation_then_restored() {
    let s = Scratch::new();
    let data = s.path("data");
    std::fs::create_dir_all(&data).unwrap();
    let tool = "mcp__agents__x";
    datagen::insert_activity(&data, &Activity::failed("m1", 1_000, "t1", tool, "boom 1")).unwrap();
    datagen::insert_activity(&data, &Activity::failed("m2", 2_000, "t1", "boom", "x")).unwrap();
    let detectors = s.detectors_with(&["flaky"]);
    let out = s.path("out");
    let at = |t: i64| -> Value {
        let o = run(&detectors, &data, &out, &["--no-fast-path", "--scan-time", &t.to_string()]);
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let flaky_title =
        || issues_of(&out, "flaky").first().map(|i| i["title"].as_str().unwrap().to_owned()).unwrap_or_default();
    let flaky_probation = || issues_of(&out, "flaky").first().map(|i| i["probation"].clone()).unwrap_or_default();

    let s1 = at(10 * HOUR);
    assert_eq!(
        (detector(&s1, "flaky")["status"].as_str(), detector(&s1, "flaky")["health"].as_str()),
        (Some("failed"), Some("ok"))
    );
    let s2 = at(11 * HOUR);
    assert_eq!(detector(&s2, "flaky")["health"], "quarantined", "two failures in a row");
    // A quarantine is a fact: it is in the fire log, with why, and the log verifies.
    let quarantines: Vec<Value> =
        fire_entries(&out).into_iter().filter(|e| e["type"] == "quarantine" && e["detector"] == "flaky").collect();
    assert_eq!(quarantines.len(), 1, "{quarantines:#?}");
    assert!(quarantines[0]["reason"].as_str().unwrap().starts_with("2 failures in a row"), "{quarantines:#?}");
    assert_eq!(crate::ledger::verify(&out)["ok"], true);
    let s3 = at(12 * HOUR);
    assert_eq!(detector(&s3, "flaky")["status"], "quarantined", "not run while quarantined");
    assert_eq!(detector(&s3, "flaky")["calls"], 0);
    assert_eq!(detector(&s3, "tool_error")["status"], "ok", "the others still run");

    // The input that broke it is gone; after 24 h it comes back on probation.
    datagen::insert_activity(&data, &Activity::failed("m2", 2_000, "t1", "mcp__agents__y", "x")).unwrap();
    let s4 = at(36 * HOUR);
    assert_eq!(detector(&s4, "flaky")["status"], "ok");
    assert_eq!(detector(&s4, "flaky")["probation"], true);
    assert_eq!(detector(&s4, "flaky")["health"], "probation");
    // Probation is a field of the issue; the title (and so the issue) stays the same.
    assert_eq!(flaky_title(), "saw 2 rows", "a title never changes with health");
    assert_eq!(flaky_probation(), true, "the newest fire was made on probation");
    // The CLI's listing prefixes a detector that ran on probation, as the spec's `[PROBATION]`.
    let t = (37 * HOUR).to_string();
    let o =
        run_command(&detectors, &data, &out).args(["--once", "--no-fast-path", "--scan-time", &t]).output().unwrap();
    let listing = String::from_utf8_lossy(&o.stdout);
    assert!(listing.lines().any(|l| l.trim_start().starts_with("ok       [PROBATION] flaky")), "{listing}");
    let s6 = at(38 * HOUR);
    assert_eq!(detector(&s6, "flaky")["health"], "ok", "three clean scans restore it");
    at(39 * HOUR);
    assert_eq!(flaky_title(), "saw 2 rows", "restored fires carry no prefix");
    assert_eq!(
        flaky_probation(),
        Value::Null,
        "a restored detector's fire is not on probation (the field is left out)"
    );
    assert_eq!(issues_of(&out, "flaky").len(), 1, "one issue before, during and after probation");
}

#[test]
fn detectors_inspect_shows_imports_verdicts_and_health() {
    let s = Scratch::new();
    let data = s.path("data");
    std::fs::create_dir_all(&data).unwrap();
    let detectors = s.detectors_with(&["http_caller", "panicker"]);
    datagen::insert_activity(&data, &Activity::failed("m1", 1_000, "t1", "x", "boom")).unwrap();
    let out = s.path("out");
    run(&detectors, &data, &out, &[]);
    let infos = inspect(&detectors, &data, &out);
    let by_file = |stem: &str| {
        infos.iter().find(|i| i["path"].as_str().unwrap().ends_with(&format!("{stem}.wasm"))).unwrap().clone()
    };
    let http = by_file("http_caller");
    assert!(http["error"].as_str().unwrap().contains("wasi:http/outgoing-handler"));
    let verdicts: Vec<(String, String)> = serde_json::from_value(http["imports"].clone()).unwrap();
    assert!(verdicts.iter().any(|(i, v)| i.starts_with("wasi:http/outgoing-handler") && v.starts_with("refused")));
    assert!(verdicts.iter().any(|(i, v)| i.starts_with("wasi:io/streams") && v == "granted"));
    let panicker = by_file("panicker");
    assert_eq!(panicker["witVersion"], "0.2.0");
    assert_eq!(panicker["health"]["failuresInARow"], 1);
    assert_eq!(panicker["health"]["lastFailure"], "trap in push");
    let tool_error = by_file("tool_error");
    assert_eq!(tool_error["health"]["state"], "ok");
    assert_eq!(tool_error["descriptor"]["subscriptions"][1]["kind"], "tool-failure");
}

#[test]
fn detectors_inspect_reuses_the_compiled_code_a_scan_left() {
    let s = Scratch::new();
    let data = s.path("data");
    std::fs::create_dir_all(&data).unwrap();
    let detectors = s.detectors_in("detectors", &["cost", "turn_stop"], &[]);
    datagen::insert_activity(&data, &Activity::failed("m1", 1_000, "t1", "x", "boom")).unwrap();
    // A user cache folder of its own: empty until the scan below.
    let cache_home = s.path("xdg-cache");
    let caches = |out: &std::path::Path| {
        let infos = inspect_with_cache_home(&detectors, &data, out, &cache_home);
        infos.iter().map(|i| i["cache"].as_str().unwrap_or("-").to_owned()).collect::<Vec<_>>()
    };
    // No output folder yet: nothing to reuse, and nothing is created.
    let out = s.path("out");
    assert_eq!(caches(&out), ["off", "off"]);
    assert!(!out.exists(), "inspect created the output folder");
    // A scan with the default cache (the user cache folder), then inspect hits it.
    let o = sentinel_host()
        .env("XDG_CACHE_HOME", &cache_home)
        .args(["run", "--once", "--json", "--detectors"])
        .arg(&detectors)
        .arg("--data-dir")
        .arg(&data)
        .arg("--out")
        .arg(&out)
        .args(["--deadline-ms", TEST_DEADLINE_MS])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(caches(&out), ["hit", "hit"]);
}
