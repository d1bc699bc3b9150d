//! Every shipped detector's replay cases pass through the real binary, and a
//! wrong expectation fails with the difference named.

use crate::support::*;

#[test]
fn every_shipped_replay_case_passes() {
    let mut ran = 0;
    for det in xtask::guest::detectors_under(&root().join("detectors")).unwrap() {
        let cases = det.dir.join("cases");
        assert!(cases.is_dir(), "detector {} ships no replay cases", det.name);
        let wasm = shipped_detectors().join(format!("{}.wasm", det.name));
        let o = replay(&wasm, &cases);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}: {}{}",
            det.name,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        ran += 1;
    }
    assert!(ran >= 7, "the five scanner detectors and the Python and JavaScript twins at least");
}

#[test]
fn a_wrong_expectation_fails_with_exit_8_and_the_difference() {
    let s = Scratch::new();
    let case = std::fs::read_to_string(root().join("detectors/cost/cases/threshold.json")).unwrap();
    let mut case: serde_json::Value = serde_json::from_str(&case).unwrap();
    case["expect"][0]["title"] = "a turn cost more than $9.99".into();
    let path = s.path("bad.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&case).unwrap()).unwrap();
    let o = replay(&shipped_detectors().join("cost.wasm"), &path);
    assert_eq!(o.status.code(), Some(8));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("FAIL") && out.contains("$9.99") && out.contains("$2.50"), "{out}");
    // An empty expectation means "must not fire": the same input then fails too.
    case["expect"] = serde_json::json!([]);
    std::fs::write(&path, serde_json::to_vec_pretty(&case).unwrap()).unwrap();
    assert_eq!(replay(&shipped_detectors().join("cost.wasm"), &path).status.code(), Some(8));
}

/// `SENTINEL_BLESS=1 sentinel-host replay` on one case file.
fn bless(detector: &std::path::Path, case: &std::path::Path) -> std::process::Output {
    sentinel_host()
        .args(["replay", "--detector"])
        .arg(detector)
        .arg("--cases")
        .arg(case)
        .arg("--cache-dir")
        .arg(shared_cache())
        .args(["--deadline-ms", TEST_DEADLINE_MS])
        .env("SENTINEL_BLESS", "1")
        .output()
        .expect("sentinel-host runs")
}

#[test]
fn blessing_refuses_a_title_holding_a_raw_value_and_writes_a_clean_one() {
    let s = Scratch::new();
    let cost = shipped_detectors().join("cost.wasm");
    let original = std::fs::read_to_string(root().join("detectors/cost/cases/threshold.json")).unwrap();
    let mut case: serde_json::Value = serde_json::from_str(&original).unwrap();
    case["expect"] = serde_json::json!([]);
    let path = s.path("case.json");

    // A clean title ("a turn cost more than $2.50", the threshold from the config) is blessed.
    std::fs::write(&path, serde_json::to_vec_pretty(&case).unwrap()).unwrap();
    let o = bless(&cost, &path);
    assert_eq!(o.status.code(), Some(8), "the case failed before it was blessed");
    let blessed: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(blessed["expect"][0]["title"], "a turn cost more than $2.50", "the expectation was rewritten");
    assert_eq!(replay(&cost, &path).status.code(), Some(0), "and now passes");

    // The same title, when the records' own text holds its number, reads as a raw value: refused.
    case["records"][0]["rows"][1]["bot_id"] = "bot 2.50".into();
    let text = serde_json::to_vec_pretty(&case).unwrap();
    std::fs::write(&path, &text).unwrap();
    let o = bless(&cost, &path);
    assert_eq!(o.status.code(), Some(8));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("not blessed") && out.contains("number 2.50"), "{out}");
    assert_eq!(std::fs::read(&path).unwrap(), text, "a refused expectation is left as it was");
}
