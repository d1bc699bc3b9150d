//! Hostile components: each is stopped or refused, named, and never stops
//! the good detector in the same run from producing its issues.

use serde_json::Value;
use xtask::datagen::{self, DataSpec};

use crate::support::*;

/// Scans the demo data with the shipped detectors plus `fixtures`, checks
/// that tool_error still reported every failure, and returns the summary.
fn scan_with(fixtures: &[&str], extra_files: &[(&str, &[u8])]) -> Value {
    let s = Scratch::new();
    let data = s.path("data");
    let truth = datagen::generate(&data, &DataSpec::default()).unwrap();
    let detectors = s.detectors_with(fixtures);
    for (name, bytes) in extra_files {
        std::fs::write(detectors.join(name), bytes).unwrap();
    }
    let summary = scan(&detectors, &data, &s.path("out"));
    assert_eq!(detector(&summary, "tool_error")["status"], "ok", "{summary:#}");
    let total: i64 = issues_of(&s.path("out"), "tool_error").iter().map(|i| i["count"].as_i64().unwrap()).sum();
    assert_eq!(total as usize, truth.failures.len(), "the good detector still reports everything");
    summary
}

#[test]
fn an_endless_loop_is_stopped_by_fuel_or_the_deadline() {
    let summary = scan_with(&["endless_loop"], &[]);
    let d = detector(&summary, "endless_loop");
    assert_eq!(d["status"], "failed");
    let kind = d["failure"]["kind"].as_str().unwrap();
    assert!(kind == "fuel" || kind == "deadline", "stopped by {kind}");
    assert_eq!(d["failure"]["phase"], "push");
}

#[test]
fn an_endless_loop_meets_the_deadline_when_fuel_is_plentiful() {
    // With fuel out of the way, the 100 ms epoch deadline is what stops it.
    let s = Scratch::new();
    let data = s.path("data");
    datagen::generate(&data, &DataSpec::default()).unwrap();
    let mut cmd = run_command_with_product_deadline(&s.detectors_with(&["endless_loop"]), &data, &s.path("out"));
    cmd.args(["--once", "--json", "--fuel", "100000000000000"]);
    let out = run_within(cmd, std::time::Duration::from_secs(300));
    assert_eq!(out.status.code(), Some(0));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    let d = detector(&summary, "endless_loop");
    assert_eq!(d["failure"]["kind"], "deadline", "{d:#}");
    assert!(d["failure"]["message"].as_str().unwrap().contains("100 ms"));
}

#[test]
fn a_memory_bomb_is_stopped_by_the_memory_cap() {
    let summary = scan_with(&["memory_bomb"], &[]);
    let d = detector(&summary, "memory_bomb");
    assert_eq!(d["status"], "failed");
    assert_eq!(d["failure"]["kind"], "memory", "{d:#}");
}

#[test]
fn deep_recursion_is_stopped_by_the_stack_cap() {
    let summary = scan_with(&["deep_recursion"], &[]);
    let d = detector(&summary, "deep_recursion");
    assert_eq!(d["failure"]["kind"], "stack", "{d:#}");
    // The backtrace names guest functions.
    assert!(d["failure"]["backtrace"].as_str().unwrap().contains("dive"));
}

#[test]
fn a_panic_is_a_trap_with_its_message() {
    let summary = scan_with(&["panicker"], &[]);
    let d = detector(&summary, "panicker");
    assert_eq!(d["failure"]["kind"], "trap");
    assert!(d["failure"]["stderr"].as_str().unwrap().contains("panicker refuses batch"), "{d:#}");
}

#[test]
fn an_http_import_is_refused_at_load_with_the_import_named() {
    let summary = scan_with(&["http_caller"], &[]);
    let d = detector(&summary, "http_caller");
    assert_eq!(d["status"], "refused");
    let msg = d["failure"]["message"].as_str().unwrap();
    assert!(msg.contains("wasi:http/outgoing-handler"), "{msg}");
    assert!(msg.contains("http_caller.wasm"), "{msg}");
    assert_eq!(d["calls"], 0, "a refused component never runs");
}

#[test]
fn a_component_of_another_wit_version_is_refused_with_the_versions_named() {
    let summary = scan_with(&["wrong_version"], &[]);
    let d = detector(&summary, "wrong_version");
    assert_eq!(d["status"], "refused");
    let msg = d["failure"]["message"].as_str().unwrap();
    assert!(msg.contains("built against sentinel:detector@0.9.0"), "{msg}");
    assert!(msg.contains("this host speaks sentinel:detector@0.1.0 and sentinel:detector@0.2.0"), "{msg}");
}

#[test]
fn packed_observations_with_a_broken_layout_are_refused_with_the_fault_named() {
    let summary = scan_with(&["bad_pack"], &[]);
    let d = detector(&summary, "bad_pack");
    assert_eq!(
        (d["status"].as_str(), d["failure"]["kind"].as_str()),
        (Some("failed"), Some("invalid-output")),
        "{d:#}"
    );
    let msg = d["failure"]["message"].as_str().unwrap();
    assert!(msg.contains("packed observations: observation 0, field 7: offsets out of order, out of range"), "{msg}");
    assert_eq!(d["observations"], 0);
}

/// The compatibility promise: a component built against the released 0.1.0
/// contract (observations as records, not packed) still loads, passes the
/// replay cases of the detector it ports, and runs in a scan beside the
/// 0.2.0 components, reporting what its 0.2.0 original reports.
#[test]
fn a_component_built_against_wit_0_1_0_loads_runs_and_passes_replay() {
    let legacy = fixture("cost_v0_1_0");
    let o = replay(&legacy, &root().join("detectors/cost/cases"));
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(out.matches("PASS").count(), 2, "both of cost's cases: {out}");

    let summary = scan_with(&["cost_v0_1_0"], &[]);
    let (old, new) = (detector(&summary, "cost_v0_1_0"), detector(&summary, "cost"));
    assert_eq!(old["status"], "ok", "{summary:#}");
    assert!(new["observations"].as_u64().unwrap() > 0, "{summary:#}");
    assert_eq!(old["observations"], new["observations"], "{summary:#}");
}

#[test]
fn files_that_are_not_components_are_refused() {
    let summary = scan_with(&[], &[("junk.wasm", b"not wasm at all"), ("core.wasm", b"\0asm\x01\0\0\0")]);
    assert!(detector(&summary, "junk")["failure"]["message"].as_str().unwrap().contains("no wasm header"));
    assert!(detector(&summary, "core")["failure"]["message"].as_str().unwrap().contains("core wasm module"));
}

#[test]
fn all_hostile_components_at_once_leave_the_good_detector_untouched() {
    let summary =
        scan_with(&["endless_loop", "memory_bomb", "deep_recursion", "panicker", "http_caller", "wrong_version"], &[]);
    // Each is stopped by its own bound, in the same scan: none is refused for
    // sharing a kind with another (each emits its own).
    let stopped = |name: &str| {
        let d = detector(&summary, name);
        (d["status"].as_str().unwrap().to_owned(), d["failure"]["kind"].as_str().unwrap_or("-").to_owned())
    };
    let endless = stopped("endless_loop");
    assert!(
        endless == ("failed".into(), "fuel".into()) || endless == ("failed".into(), "deadline".into()),
        "{endless:?}"
    );
    assert_eq!(stopped("memory_bomb"), ("failed".into(), "memory".into()));
    assert_eq!(stopped("deep_recursion"), ("failed".into(), "stack".into()));
    assert_eq!(stopped("panicker"), ("failed".into(), "trap".into()));
    assert_eq!(stopped("http_caller").0, "refused");
    assert_eq!(stopped("wrong_version").0, "refused");
    let ok = summary["detectors"].as_array().unwrap().iter().filter(|d| d["status"] == "ok").count();
    assert_eq!(ok, summary["detectors"].as_array().unwrap().len() - 6, "every other detector ran: {summary:#}");
}

/// The `probe` issues of one scan, as probe name → result.
fn probes(out: &std::path::Path) -> std::collections::BTreeMap<String, String> {
    issues_of(out, "probe")
        .iter()
        .map(|i| {
            let (what, result) = i["title"].as_str().unwrap().split_once('=').unwrap();
            (what.to_owned(), result.to_owned())
        })
        .collect()
}

#[test]
fn a_component_that_tries_to_act_on_the_world_gets_nothing() {
    // It imports filesystem, sockets, environment and clocks (all linked),
    // and every attempt is denied at call time. What it would reach if it
    // were allowed is there: a listening loopback port and a readable file.
    let s = Scratch::new();
    let data = s.path("data");
    datagen::generate(&data, &DataSpec::default()).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_ok(), "the port listens");
    let _ = listener.accept().expect("the test's own connection is accepted");
    let file = s.path("readable.txt");
    std::fs::write(&file, "a file the prober could read if it were allowed").unwrap();
    assert!(std::fs::read(&file).is_ok());
    let detectors = s.detectors_with(&["prober"]);
    let scan_time: i64 = 1_791_895_722_799;
    let port_set = format!("prober.port={port}");
    let file_set = format!("prober.file={}", file.display());
    let mut seen = Vec::new();
    for out in [s.path("out-1"), s.path("out-2")] {
        let o = run(
            &detectors,
            &data,
            &out,
            &["--scan-time", &scan_time.to_string(), "--set", &port_set, "--set", &file_set],
        );
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
        let summary: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(detector(&summary, "prober")["status"], "ok", "{summary:#}");
        let got = probes(&out);
        let acts = ["connect", "resolve", "udp", "read-file", "read-etc", "read-cwd", "create", "env", "args"];
        for what in acts {
            assert_eq!(got.get(what).map(String::as_str), Some("denied"), "{what} was not denied: {got:?}");
        }
        // The wall clock is stopped at the scan time, the monotonic clock
        // does not advance over a 50 ms sleep and a million steps.
        assert_eq!(got["wall-ms"], scan_time.to_string(), "{got:?}");
        assert_eq!(got["monotonic-ns"], "0", "{got:?}");
        assert_eq!(got.len(), acts.len() + 3, "{got:?}");
        seen.push(got);
    }
    // Randomness is seeded: two scans (two processes) draw the same bytes.
    assert_eq!(seen[0]["random"], seen[1]["random"], "randomness is the same on every scan");
    // The listener saw no connection from the prober, and nothing was created.
    assert!(
        matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the prober reached the listening port"
    );
    assert!(!data.join("sentinel-probe.txt").exists() && !std::path::Path::new("sentinel-probe.txt").exists());
}

#[test]
fn observations_past_the_per_call_cap_are_refused() {
    // Fuel and the deadline raised far out of the way, so the cap is always
    // what stops it, however loaded the machine.
    let s = Scratch::new();
    let data = s.path("data");
    datagen::generate(&data, &DataSpec::default()).unwrap();
    let out = s.path("out");
    let mut cmd = run_command_with_product_deadline(&s.detectors_with(&["flood"]), &data, &out);
    cmd.args(["--once", "--json", "--fuel", "100000000000000", "--deadline-ms", "600000"]);
    let o = run_within(cmd, std::time::Duration::from_secs(300));
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let summary: Value = serde_json::from_slice(&o.stdout).unwrap();
    let d = detector(&summary, "flood");
    assert_eq!(d["status"], "failed", "{d:#}");
    assert_eq!(d["failure"]["kind"], "invalid-output", "{d:#}");
    assert_eq!(d["failure"]["phase"], "push", "{d:#}");
    let message = d["failure"]["message"].as_str().unwrap();
    assert!(message.contains("10001") && message.contains("over the limit of 10000"), "{message}");
    assert_eq!(d["observations"], 0);
    assert!(issues_of(&out, "flood").is_empty(), "not one of them reaches the ledger");
    assert_eq!(detector(&summary, "tool_error")["status"], "ok", "{summary:#}");
}

#[test]
fn ten_megabytes_of_log_are_cut_to_the_budget_and_the_scan_goes_on() {
    let summary = scan_with(&["chatty"], &[]);
    let d = detector(&summary, "chatty");
    assert_eq!(d["status"], "ok", "{d:#}");
    let logs = d["logs"].as_array().unwrap();
    let kept: usize = logs.iter().map(|l| l.as_str().unwrap().len()).sum();
    assert!(kept <= 70 * 1024, "at most the 64 KiB budget (plus labels): {kept}");
    assert!(logs.last().unwrap().as_str().unwrap().contains("more lines dropped"));
}

#[test]
fn an_empty_file_is_refused() {
    let summary = scan_with(&[], &[("empty.wasm", b"")]);
    assert_eq!(detector(&summary, "empty")["status"], "refused");
}

#[test]
fn a_detector_that_sleeps_in_the_host_is_stopped_within_the_rule() {
    // A sleep blocks inside the host, where the epoch deadline cannot reach;
    // the sandbox's frozen clock makes every sleep return at once, so the
    // loop is stopped like any other instead of holding the scan for 10 min.
    let s = Scratch::new();
    let data = s.path("data");
    datagen::generate(&data, &DataSpec::default()).unwrap();
    let mut child = sentinel_host()
        .args(["run", "--once", "--json", "--detectors"])
        .arg(s.detectors_with(&["sleeper"]))
        .arg("--data-dir")
        .arg(&data)
        .arg("--out")
        .arg(s.path("out"))
        .arg("--cache-dir")
        .arg(shared_cache())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A generous guard so a regression fails instead of hanging the suite.
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > std::time::Duration::from_secs(120) {
            let _ = child.kill();
            panic!("the scan was held by a sleeping detector");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    let d = detector(&summary, "sleeper");
    let kind = d["failure"]["kind"].as_str().unwrap();
    assert!(kind == "deadline" || kind == "fuel", "{d:#}");
    assert_eq!(detector(&summary, "tool_error")["status"], "ok");
}

#[test]
fn escape_sequences_from_a_detector_never_reach_the_terminal_raw() {
    let s = Scratch::new();
    let data = s.path("data");
    datagen::generate(&data, &DataSpec::default()).unwrap();
    let detectors = s.detectors_with(&["escaper"]);
    for json in [true, false] {
        // A fresh output folder each time: the second run must not take the unchanged-data path.
        let mut cmd = run_command(&detectors, &data, &s.path(if json { "out-json" } else { "out-human" }));
        cmd.arg("--once");
        if json {
            cmd.arg("--json");
        }
        let out = run_within(cmd, std::time::Duration::from_secs(120));
        assert_eq!(out.status.code(), Some(0));
        let text = String::from_utf8(out.stdout).unwrap();
        for raw in ['\u{1b}', '\u{7}', '\u{202e}', '\u{9b}', '\r'] {
            assert!(!text.contains(raw), "{raw:?} reached the output raw: {text:?}");
        }
        if json {
            let summary: Value = serde_json::from_str(&text).unwrap();
            let d = detector(&summary, "escaper");
            // A JSON reader still gets exactly what the detector sent.
            assert!(d["failure"]["message"].as_str().unwrap().contains("desrever"), "{d:#}");
            assert!(d["failure"]["message"].as_str().unwrap().contains("\\u{1b}]52;"), "escaped at the edge: {d:#}");
        } else {
            assert!(text.contains("\\u{1b}]52;c;cHduZWQ=\\u{7}\\u{1b}[2J\\u{202e}desrever"), "{text}");
            assert!(!text.lines().any(|l| l.starts_with("ok       forged")), "no forged line: {text}");
        }
    }
}

#[test]
fn a_component_squatting_a_name_is_refused_with_the_real_one_naming_both() {
    let s = Scratch::new();
    let data = s.path("data");
    datagen::generate(&data, &DataSpec::default()).unwrap();
    let detectors = s.detectors_with(&[]);
    // Loads first, in name order.
    std::fs::copy(fixture("squatter"), detectors.join("aaa.wasm")).unwrap();
    let out = s.path("out");
    let summary = scan(&detectors, &data, &out);
    let refused: Vec<&Value> =
        summary["detectors"].as_array().unwrap().iter().filter(|d| d["status"] == "refused").collect();
    assert_eq!(refused.len(), 2, "{summary:#}");
    for d in refused {
        let msg = d["failure"]["message"].as_str().unwrap();
        assert!(msg.contains("aaa.wasm") && msg.contains("tool_error.wasm"), "{msg}");
        assert!(msg.contains("both are refused"), "{msg}");
    }
    assert!(issues_of(&out, "tool_error").iter().all(|i| i["title"] != "pwned by the squatter"));
}

#[test]
fn oversized_and_out_of_range_observation_fields_are_clamped() {
    let s = Scratch::new();
    let data = s.path("data");
    datagen::generate(&data, &DataSpec::default()).unwrap();
    let out = s.path("out");
    let before = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let summary = scan(&s.detectors_with(&["field_bomb"]), &data, &out);
    let d = detector(&summary, "field_bomb");
    assert_eq!(d["status"], "ok", "{d:#}");
    let logs: Vec<&str> = d["logs"].as_array().unwrap().iter().map(|l| l.as_str().unwrap()).collect();
    assert!(logs.iter().any(|l| l.contains("host: clamped") && l.contains("wasted-turns")), "{logs:?}");
    let text = std::fs::read_to_string(out.join("issues.jsonl")).unwrap();
    assert!(text.lines().all(|l| l.len() < 8 * 1024), "no 64 KiB field stored");
    assert!(!text.contains('\u{1b}') && !text.contains('\u{202e}'));
    let bombs = issues_of(&out, "field_bomb");
    assert!(!bombs.is_empty());
    for issue in bombs {
        // Every time the issue carries, and its wasted turns, by name: a
        // renamed field fails here instead of being skipped.
        for k in ["firstAt", "lastAt"] {
            let n = issue[k].as_i64().unwrap_or_else(|| panic!("no {k} in {issue}"));
            assert!((0..=before + 2 * 86_400_000).contains(&n), "{k} = {n} is clamped into the window: {issue}");
        }
        let wasted = issue["wastedTurns"].as_u64().unwrap_or_else(|| panic!("no wastedTurns in {issue}"));
        assert!(wasted <= issue["count"].as_u64().unwrap(), "one wasted turn per occurrence: {issue}");
    }
}

#[test]
fn empty_log_lines_are_counted_per_line() {
    let summary = scan_with(&["line_spammer"], &[]);
    let d = detector(&summary, "line_spammer");
    assert_eq!(d["status"], "ok", "{d:#}");
    let logs = d["logs"].as_array().unwrap();
    assert!(logs.len() <= 1001, "at most the line cap plus the note: {}", logs.len());
    assert!(logs.last().unwrap().as_str().unwrap().contains("more lines dropped"));
}
