//! Every sandbox limit reaches the sandbox from the config file's `[limits]`
//! (and the three that have one, from their flag, which wins), each breach
//! reported as docs/sandbox.md says; a config mistake names its line; a
//! `--cache-dir` inside the data dir is refused.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;
use xtask::datagen::{self, DataSpec};

use crate::support::*;

/// The demo data dir and a detectors dir with `fixtures` (and the shipped
/// Rust detectors).
fn setup(s: &Scratch, fixtures: &[&str]) -> (PathBuf, PathBuf) {
    let data = s.path("data");
    datagen::generate(&data, &DataSpec::default()).unwrap();
    (data, s.detectors_with(fixtures))
}

/// A scan with `limits` (lines of the `[limits]` table; the deadline raised
/// unless they set it) as the config file, plus `extra`; its summary.
fn scan_with_limits(s: &Scratch, detectors: &Path, data: &Path, limits: &str, extra: &[&str]) -> Value {
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let n = RUNS.fetch_add(1, Ordering::Relaxed);
    let deadline =
        if limits.contains("deadline_ms") { String::new() } else { format!("deadline_ms = {TEST_DEADLINE_MS}\n") };
    let file = s.path(&format!("sentinel-{n}.toml"));
    std::fs::write(&file, format!("[limits]\n{limits}\n{deadline}")).unwrap();
    let mut c = run_command_with_product_deadline(detectors, data, &s.path(&format!("out-{n}")));
    c.args(["--once", "--json", "--no-fast-path", "--config"]).arg(&file).args(extra);
    let o = run_within(c, std::time::Duration::from_secs(300));
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn failure<'a>(summary: &'a Value, name: &str) -> (&'a str, &'a str) {
    let d = detector(summary, name);
    assert_eq!(d["status"], "failed", "{d:#}");
    (d["failure"]["kind"].as_str().unwrap(), d["failure"]["message"].as_str().unwrap())
}

#[test]
fn each_limit_in_the_config_file_reaches_the_sandbox() {
    let s = Scratch::new();
    let (data, detectors) = setup(&s, &["endless_loop", "memory_bomb", "keeper", "chatty"]);
    // (the [limits] line, the detector it stops, the kind, a part of its message)
    let cases: &[(&str, &str, &str, &str)] = &[
        ("fuel_per_call = 2000000", "endless_loop", "fuel", "2000000 units"),
        ("memory_mib = 16", "memory_bomb", "memory", "limit of 16777216 bytes"),
        ("observations_per_call = 5", "tool_error", "invalid-output", "over the limit of 5"),
        ("observations_per_scan = 7", "tool_error", "invalid-output", "more than 7 observations in one scan"),
        ("state_bytes = 4", "keeper", "invalid-output", "over the limit of 4"),
    ];
    for (line, name, kind, part) in cases {
        let summary = scan_with_limits(&s, &detectors, &data, line, &[]);
        let (got, message) = failure(&summary, name);
        assert_eq!(got, *kind, "{line}: {message}");
        assert!(message.contains(part), "{line}: {message}");
    }
    // Memory and fuel bind the load's `describe` too: too little of either
    // and a detector is refused at load, naming the limit.
    let summary = scan_with_limits(&s, &detectors, &data, "memory_mib = 1", &[]);
    let d = detector(&summary, "tool_error");
    assert_eq!(d["status"], "refused", "{d:#}");
    assert!(d["failure"]["message"].as_str().unwrap().contains("limit of 1048576 bytes"), "{d:#}");

    // The deadline, with fuel out of the way.
    let summary = scan_with_limits(&s, &detectors, &data, "deadline_ms = 30\nfuel_per_call = 100000000000000", &[]);
    let (kind, message) = failure(&summary, "endless_loop");
    assert_eq!((kind, message.contains("30 ms")), ("deadline", true), "{message}");

    // Streams and logs: the keeper's stdio mode counts the 1000-byte lines that fit.
    let summary = scan_with_limits(&s, &detectors, &data, "stdio_bytes = 2500", &["--set", "keeper.mode=stdio"]);
    let (_, message) = failure(&summary, "keeper");
    assert!(message.contains("stdout-lines=2 stderr-lines=2"), "{message}");
    let summary = scan_with_limits(&s, &detectors, &data, "log_bytes_per_scan = 4096", &[]);
    let logs = detector(&summary, "chatty")["logs"].as_array().unwrap().clone();
    let kept: usize = logs.iter().map(|l| l.as_str().unwrap().len()).sum();
    assert!((1..=4096 + 1024).contains(&kept), "at most the 4 KiB budget (plus the note): {kept}");
    assert!(logs.last().unwrap().as_str().unwrap().contains("more lines dropped"), "{logs:?}");

    // A component over its size cap is refused at load, naming the cap.
    let big = detectors.join("big.wasm");
    std::fs::write(&big, vec![0u8; (1 << 20) + 1]).unwrap();
    let summary = scan_with_limits(&s, &detectors, &data, "component_mib = 1", &[]);
    let d = detector(&summary, "big");
    assert_eq!(d["status"], "refused", "{d:#}");
    assert!(d["failure"]["message"].as_str().unwrap().contains("over the limit of 1048576"), "{d:#}");
    std::fs::remove_file(&big).unwrap();
}

#[test]
fn the_three_flags_win_over_the_config_file() {
    let s = Scratch::new();
    let (data, detectors) = setup(&s, &["endless_loop", "memory_bomb"]);
    // Each flag against a config value it overrides; the other limits as
    // they are (the deadline raised), so nothing else can stop the fixture.
    // --fuel: the endless loop runs out of exactly the fuel the flag gives.
    let summary = scan_with_limits(&s, &detectors, &data, "fuel_per_call = 100000000000000", &["--fuel", "2000000"]);
    let (kind, message) = failure(&summary, "endless_loop");
    assert_eq!((kind, message.contains("2000000 units")), ("fuel", true), "{message}");
    // --deadline-ms: the loop, with fuel out of the way, stops at the flag's deadline.
    let config = "fuel_per_call = 100000000000000\ndeadline_ms = 60000";
    let summary = scan_with_limits(&s, &detectors, &data, config, &["--deadline-ms", "40"]);
    let (kind, message) = failure(&summary, "endless_loop");
    assert_eq!((kind, message.contains("40 ms")), ("deadline", true), "{message}");
    // --memory-mib: the memory bomb meets the flag's cap.
    let summary = scan_with_limits(&s, &detectors, &data, "memory_mib = 128", &["--memory-mib", "24"]);
    let (kind, message) = failure(&summary, "memory_bomb");
    assert_eq!((kind, message.contains("limit of 25165824 bytes")), ("memory", true), "{message}");
}

#[test]
fn a_config_mistake_is_exit_3_naming_the_file_and_the_line() {
    let s = Scratch::new();
    let (data, detectors) = setup(&s, &[]);
    for (config, line, key) in [
        ("[limits]\nfuel_per_call = 5\n\n[limitz]\nx = 1\n", "line 4", "limitz"),
        (
            "[detectors.tool_error]\nharness_tools = \"a\"\n\n[limits]\ndeadline_ms = \"soon\"\n",
            "line 5",
            "deadline_ms",
        ),
    ] {
        let file = s.path("bad.toml");
        std::fs::write(&file, config).unwrap();
        let mut c = run_command(&detectors, &data, &s.path("out"));
        c.args(["--once", "--json", "--config"]).arg(&file);
        let o = run_within(c, std::time::Duration::from_secs(300));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(3), "{err}");
        assert!(err.contains("bad.toml") && err.contains(line) && err.contains(key), "{config:?}: {err}");
    }
}

#[test]
fn a_cache_dir_inside_the_data_dir_is_refused_and_nothing_is_written_there() {
    let s = Scratch::new();
    let (data, detectors) = setup(&s, &[]);
    let before = tree_state(&data);
    let mut c = sentinel_host();
    c.args(["run", "--once", "--json", "--detectors"])
        .arg(&detectors)
        .arg("--data-dir")
        .arg(&data)
        .arg("--out")
        .arg(s.path("out"))
        .arg("--cache-dir")
        .arg(data.join("cache"));
    let o = run_within(c, std::time::Duration::from_secs(300));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(4), "{err}");
    assert!(err.contains(&data.join("cache").display().to_string()) && err.contains("inside the data dir"), "{err}");
    assert_eq!(tree_state(&data), before, "nothing written into the data dir");
}

/// The table, instance and stack limits, each met by a fixture built from
/// source (the two hogs padded by xtask past the default 100 000 table
/// elements and 64 core instances; the deep recursion past the 512 KiB
/// stack), all in one scan: each fails alone with its kind named, and every
/// other detector runs and lands its issues. Raised in `[limits]`, the two
/// hogs load and run.
#[test]
fn the_table_instance_and_stack_limits_each_stop_only_their_fixture() {
    let s = Scratch::new();
    let data = s.path("data");
    let truth = datagen::generate(&data, &DataSpec::default()).unwrap();
    let detectors = s.detectors_with(&["table_hog", "instance_hog", "deep_recursion"]);
    let summary = scan_with_limits(&s, &detectors, &data, "", &[]);
    let refusal = |name: &str| {
        let d = detector(&summary, name);
        assert_eq!(d["status"], "refused", "{d:#}");
        let f = &d["failure"];
        (f["kind"].as_str().unwrap(), f["phase"].as_str().unwrap(), f["message"].as_str().unwrap())
    };
    let (kind, phase, message) = refusal("table_hog");
    assert_eq!((kind, phase), ("table", "instantiate"), "{message}");
    assert!(message.contains("table limit of 100000 elements exceeded (asked for 200000)"), "{message}");
    let (kind, phase, message) = refusal("instance_hog");
    assert_eq!((kind, phase), ("instances", "instantiate"), "{message}");
    assert!(message.contains("instance count limit of 64 exceeded"), "{message}");
    assert_eq!(failure(&summary, "deep_recursion").0, "stack");
    let all = summary["detectors"].as_array().unwrap();
    let ok: Vec<&str> = all.iter().filter(|d| d["status"] == "ok").map(|d| d["name"].as_str().unwrap()).collect();
    assert_eq!(ok.len(), all.len() - 3, "every other detector ran: {summary:#}");
    assert!(ok.contains(&"tool_error"), "{ok:?}");
    let out = Path::new(summary["outDir"].as_str().unwrap());
    let counted: u64 = issues_of(out, "tool_error").iter().map(|i| i["count"].as_u64().unwrap()).sum();
    assert_eq!(counted, truth.failures.len() as u64, "the other detectors' issues landed");

    // The same components under raised limits: both hogs load and run.
    let summary = scan_with_limits(&s, &detectors, &data, "table_elements = 300000\ninstances = 100", &[]);
    for name in ["table_hog", "instance_hog"] {
        let d = detector(&summary, name);
        assert_eq!(d["status"], "ok", "{d:#}");
        assert!(d["calls"].as_u64().unwrap() > 0, "it ran: {d:#}");
    }
}
