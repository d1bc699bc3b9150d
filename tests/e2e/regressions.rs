//! Regression cases end to end: a fixed issue's evidence record kept as a
//! case, `replay --regressions`, and a detector update that no longer
//! produces a fixed issue's signature warned about once, by name, with a
//! `diagnostic` fire, on the real binary.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use xtask::datagen::{self, Activity};

use crate::support::*;

fn issues_cmd(args: &[&str], data: &Path, out: &Path) -> std::process::Output {
    let mut c = sentinel_host();
    c.arg("issues").args(args).arg("--data-dir").arg(data).arg("--out").arg(out);
    run_within(c, Duration::from_secs(60))
}

fn replay_regressions(detectors: &Path, data: &Path, out: &Path) -> (Option<i32>, Value) {
    let mut c = sentinel_host();
    c.args(["replay", "--regressions", "--json", "--detectors"])
        .arg(detectors)
        .arg("--data-dir")
        .arg(data)
        .arg("--out")
        .arg(out)
        .arg("--cache-dir")
        .arg(shared_cache())
        .args(["--deadline-ms", TEST_DEADLINE_MS]);
    let o = run_within(c, Duration::from_secs(300));
    let json = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|_| panic!("replay --json prints JSON: {}", String::from_utf8_lossy(&o.stderr)));
    (o.status.code(), json)
}

fn diagnostics_naming(out: &Path, sig: &str) -> Vec<Value> {
    fires_of_type(out, "diagnostic").into_iter().filter(|f| f["sig"] == sig).collect()
}

#[test]
fn a_fixed_issue_is_kept_as_a_case_and_a_detector_update_blind_to_it_is_warned_once() {
    let s = Scratch::new();
    let (data, out) = (s.path("data"), s.path("out"));
    let t = 1_791_895_000_000_i64;
    let missing = "cat: /srv/notes/plan.txt: No such file or directory";
    datagen::insert_activity(&data, &Activity::failed("m1", t, "t1", "Bash", missing)).unwrap();
    datagen::insert_activity(&data, &Activity::failed("m2", t + 1, "t2", "mcp__agents__load_layer", "no layer 7"))
        .unwrap();
    // A retry loop: its evidence is the third failure, which alone makes no loop.
    for (i, id) in ["m3", "m4", "m5"].iter().enumerate() {
        let a = Activity::failed(id, t + 10 + i as i64, "t3", "Bash", "grep: /srv/pattern.txt: Permission denied");
        datagen::insert_activity(&data, &a).unwrap();
    }
    let detectors = s.detectors_with(&[]);
    let scan_at = |dir: &Path, at: i64| {
        let o = run(dir, &data, &out, &["--no-fast-path", "--scan-time", &at.to_string()]);
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice::<Value>(&o.stdout).expect("run --json prints its summary")
    };
    scan_at(&detectors, t + 60_000);
    let issues = issues_of(&out, "tool_error");
    let sig_of = |id: &str| {
        let i = issues.iter().find(|i| i["evidenceRef"]["id"] == id).unwrap_or_else(|| panic!("an issue of {id}"));
        i["sig"].as_str().unwrap().to_owned()
    };
    let (sig, other) = (sig_of("m1"), sig_of("m2"));
    let retry = issues_of(&out, "retry_loop")[0]["sig"].as_str().unwrap().to_owned();

    // The fix keeps the record, private, with the signature it must produce.
    let o = issues_cmd(&["fix", &sig], &data, &out);
    let said = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{said}{}", String::from_utf8_lossy(&o.stderr));
    assert!(said.contains("kept as a regression case"), "{said}");
    let case_file = out.join("regressions").join("tool_error").join(format!("{}.json", sig.replace(':', "-")));
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&case_file).expect("the case file").permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the case holds a raw record: only its owner reads it");
    }
    let case: Value = serde_json::from_str(&std::fs::read_to_string(&case_file).unwrap()).unwrap();
    assert_eq!(case["expect_sig"], sig.as_str());
    let rows: Vec<&Value> =
        case["records"].as_array().unwrap().iter().flat_map(|b| b["rows"].as_array().unwrap()).collect();
    assert!(rows.iter().any(|r| r["id"] == "m1" && r["output"] == missing), "the record as the source read it: {case}");
    assert!(!rows.iter().any(|r| r["id"] == "m2"), "only the evidence record: {case}");
    let o = issues_cmd(&["show", &sig], &data, &out);
    let shown: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(shown["regressionCase"], case_file.display().to_string());

    // The loop's case: kept, but its record alone makes no loop.
    let o = issues_cmd(&["fix", &retry], &data, &out);
    assert!(String::from_utf8_lossy(&o.stdout).contains("kept as a regression case"), "{o:?}");
    let verdict_of = |ran: &Value, sig: &str| {
        let case = ran["cases"].as_array().unwrap().iter().find(|c| c["sig"] == sig).cloned();
        case.unwrap_or_else(|| panic!("a case of {sig}: {ran}"))["verdict"].as_str().unwrap().to_owned()
    };

    // The shipped build still produces it; the loop's case guards nothing.
    let (code, ran) = replay_regressions(&detectors, &data, &out);
    assert_eq!((code, ran["failed"].as_u64()), (Some(0), Some(0)), "{ran}");
    assert_eq!((verdict_of(&ran, &sig), verdict_of(&ran, &retry)), ("produced".into(), "never-produced".into()));
    // The next run loads the same build: the baseline, and no warning.
    let summary = scan_at(&detectors, t + 90_000);
    assert!(summary.get("regressionWarnings").is_none(), "{summary}");

    // A build of the same detector that groups otherwise: caught by replay, ...
    let others: Vec<String> = xtask::guest::detectors_under(&root().join("detectors"))
        .unwrap()
        .into_iter()
        .filter(|d| d.lang == xtask::guest::Lang::Rust && d.name != "tool_error")
        .map(|d| d.name)
        .collect();
    let blind = s.detectors_in("blind", &others.iter().map(String::as_str).collect::<Vec<_>>(), &[]);
    std::fs::copy(fixture("blind-tool-error"), blind.join("tool_error.wasm")).unwrap();
    let (code, ran) = replay_regressions(&blind, &data, &out);
    assert_eq!((code, ran["failed"].as_u64()), (Some(8), Some(1)), "{ran}");
    assert_eq!((verdict_of(&ran, &sig), verdict_of(&ran, &retry)), ("not-produced".into(), "never-produced".into()));

    // ... and by the next run that loads it: one diagnostic fire, one warning.
    assert!(diagnostics_naming(&out, &sig).is_empty());
    let summary = scan_at(&blind, t + 120_000);
    let warned = summary["regressionWarnings"].as_array().cloned().unwrap_or_default();
    assert_eq!(warned.len(), 1, "{summary}");
    assert_eq!((warned[0]["detector"].as_str(), warned[0]["sig"].as_str()), (Some("tool_error"), Some(sig.as_str())));
    let fires = diagnostics_naming(&out, &sig);
    assert_eq!(fires.len(), 1, "{fires:?}");
    assert!(diagnostics_naming(&out, &retry).is_empty(), "a case no build produced is never lost");
    assert_eq!(fires[0]["detector"], "tool_error");
    assert!(fires[0]["reason"].as_str().unwrap().contains("no longer produces"), "{}", fires[0]);
    let mut human = run_command(&blind, &data, &out);
    human.args(["--once", "--no-fast-path", "--scan-time", &(t + 150_000).to_string()]);
    let o = run_within(human, Duration::from_secs(300));
    assert_eq!(o.status.code(), Some(0));
    assert!(!String::from_utf8_lossy(&o.stdout).contains("no longer produces"), "told once, not every scan");
    let summary = scan_at(&blind, t + 180_000);
    assert!(summary.get("regressionWarnings").is_none(), "the same build again: {summary}");
    assert_eq!(diagnostics_naming(&out, &sig).len(), 1, "one fire per build and signature");

    // A record that is gone: the fix still succeeds, and says there is no case.
    for f in ["messages.db", "messages.db-wal", "messages.db-shm"] {
        let _ = std::fs::remove_file(data.join(f));
    }
    let o = issues_cmd(&["fix", &other], &data, &out);
    let said = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{said}{}", String::from_utf8_lossy(&o.stderr));
    assert!(said.contains("no regression case kept"), "{said}");
    let o = issues_cmd(&["show", &other], &data, &out);
    let shown: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((shown["state"].as_str(), &shown["regressionCase"]), (Some("fixed"), &Value::Null));

    let mut verify = sentinel_host();
    verify.arg("verify").arg("--data-dir").arg(&data).arg("--out").arg(&out);
    let o = run_within(verify, Duration::from_secs(60));
    assert_eq!(o.status.code(), Some(0), "the chain verifies: {}", String::from_utf8_lossy(&o.stdout));
}

/// Every JSON summary the long-running mode printed so far.
fn summaries(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path).unwrap_or_default().lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

#[test]
fn the_long_running_mode_warns_once_when_a_detector_file_changes_into_a_build_blind_to_a_fixed_issue() {
    let s = Scratch::new();
    let (data, out) = (s.path("data"), s.path("out"));
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let failure = Activity::failed("m1", now - 60_000, "t1", "Bash", "cat: /srv/a: No such file or directory");
    datagen::insert_activity(&data, &failure).unwrap();
    let detectors = s.detectors_in("detectors", &["tool_error"], &[]);
    let o = run(&detectors, &data, &out, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let sig = issues_of(&out, "tool_error")[0]["sig"].as_str().unwrap().to_owned();
    let o = issues_cmd(&["fix", &sig], &data, &out);
    assert!(String::from_utf8_lossy(&o.stdout).contains("kept as a regression case"), "{o:?}");

    let log_path = s.path("stdout.jsonl");
    let log = log_path.as_path();
    let mut child = run_command(&detectors, &data, &out)
        .args(["--json", "--interval", "1", "--no-fast-path"])
        .stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(log).unwrap())
        .stderr(std::fs::File::create(s.path("stderr.log")).unwrap())
        .spawn()
        .unwrap();
    let warnings = |from: usize| -> Vec<Value> {
        summaries(log)
            .iter()
            .skip(from)
            .flat_map(|r| r["regressionWarnings"].as_array().cloned().unwrap_or_default())
            .collect()
    };
    wait_for(120, "two scans with the shipped build", &mut child, || summaries(log).len() >= 2);
    assert!(warnings(0).is_empty(), "the build that reported it still produces it");
    assert!(diagnostics_naming(&out, &sig).is_empty());

    // The file changes under the running sentinel: its next load is checked.
    std::fs::copy(fixture("blind-tool-error"), detectors.join("tool_error.wasm")).unwrap();
    wait_for(120, "the warning about the changed build", &mut child, || !warnings(0).is_empty());
    let seen = summaries(log).len();
    wait_for(120, "two more scans with the changed build", &mut child, || summaries(log).len() >= seen + 2);
    let kill = std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(kill.success());
    assert!(child.wait().unwrap().success());
    let all = warnings(0);
    assert_eq!(all.len(), 1, "told once, not every scan: {all:?}");
    assert_eq!((all[0]["detector"].as_str(), all[0]["sig"].as_str()), (Some("tool_error"), Some(sig.as_str())));
    let fires = diagnostics_naming(&out, &sig);
    assert_eq!(fires.len(), 1, "{fires:?}");
    assert_eq!(fires[0]["seq"], all[0]["fireSeq"]);
}
