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
