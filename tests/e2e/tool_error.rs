//! `tool_error` end to end: counts, grouping, privacy, idempotence.

use std::collections::BTreeSet;

use xtask::datagen::{self, Activity, DataSpec};

use crate::support::*;

#[test]
fn every_failed_call_is_counted_once_and_grouped_by_template() {
    let s = Scratch::new();
    let data = s.path("data");
    let truth = datagen::generate(&data, &DataSpec::default()).unwrap();
    assert!(truth.failures.len() > 20, "the generator makes failures worth reporting");
    let summary = scan(&s.detectors_with(&[]), &data, &s.path("out"));

    let issues = issues_of(&s.path("out"), "tool_error");
    let total: i64 = issues.iter().map(|i| i["count"].as_i64().unwrap()).sum();
    assert_eq!(total as usize, truth.failures.len(), "each failed call is one occurrence");
    let templates: BTreeSet<_> = truth.failures.iter().map(|f| f.template).collect();
    assert_eq!(issues.len(), templates.len(), "one issue per kind of failure: {issues:#?}");
    assert_eq!(detector(&summary, "tool_error")["status"], "ok");
    assert_eq!(summary["issues"]["totalIssues"], crate::support::issues(&s.path("out")).len());
    for i in &issues {
        assert_eq!(i["kind"], "tool_error");
        assert!(i["sig"].as_str().unwrap().starts_with("tool_error:"));
        assert_eq!(i["evidenceRef"]["source"], "messages");
        assert!(i["title"].as_str().unwrap().chars().count() <= 160);
    }
    // Harness failures rank high; shell failures carry the exit code and class.
    fn by_tool<'a>(issues: &'a [serde_json::Value], t: &'a str) -> impl Iterator<Item = &'a serde_json::Value> {
        issues.iter().filter(move |i| i["tool"] == t)
    }
    assert!(by_tool(&issues, "mcp__agents__load_layer").all(|i| i["origin"] == "harness" && i["severity"] == "high"));
    assert!(by_tool(&issues, "harness_notice").all(|i| i["origin"] == "harness"));
    let shell_titles: BTreeSet<_> = by_tool(&issues, "Bash").map(|i| i["title"].as_str().unwrap().to_owned()).collect();
    for t in &shell_titles {
        assert!(t == "timed out" || t.starts_with("exit "), "shell title {t}");
    }
}

#[test]
fn no_layer_12_and_no_layer_104_are_one_issue() {
    let s = Scratch::new();
    let data = s.path("data");
    std::fs::create_dir_all(&data).unwrap();
    let tool = "mcp__agents__load_layer";
    let layer = "no layer 12 in /a/b";
    datagen::insert_activity(&data, &Activity::failed("m1", 1_000, "t1", tool, layer)).unwrap();
    datagen::insert_activity(&data, &Activity::failed("m2", 2_000, "t1", tool, "no layer 104 in /c/d")).unwrap();
    let denied = "permission denied for ops@example.com";
    datagen::insert_activity(&data, &Activity::failed("m3", 3_000, "t2", tool, denied)).unwrap();
    let ok = Activity { ok: Some(true), ..Activity::failed("m4", 4_000, "t2", tool, "no layer 5 in /e") };
    datagen::insert_activity(&data, &ok).unwrap();
    let running = Activity { ok: None, ..Activity::failed("m5", 5_000, "t2", tool, "") };
    datagen::insert_activity(&data, &running).unwrap();
    scan(&s.detectors_with(&[]), &data, &s.path("out"));

    let issues = issues(&s.path("out"));
    assert_eq!(issues.len(), 2, "{issues:#?}");
    let layer = issues.iter().find(|i| i["title"] == "no layer <n> in <path>").expect("grouped issue");
    assert_eq!(layer["count"], 2);
    assert_eq!(layer["wastedTurns"], 1, "both failures cost the same turn");
    assert_eq!((layer["firstAt"].as_i64(), layer["lastAt"].as_i64()), (Some(1_000), Some(2_000)));
    assert_eq!(layer["evidenceRef"]["id"], "m2", "the latest evidence is kept");
}

#[test]
fn raw_output_and_bot_names_are_never_stored() {
    let s = Scratch::new();
    let data = s.path("data");
    let truth = datagen::generate(&data, &DataSpec::default()).unwrap();
    let out = s.path("out");
    scan(&s.detectors_with(&[]), &data, &out);

    // Every file sentinel wrote, at any depth, issues and ledger alike.
    let mut written = Vec::new();
    let mut stack = vec![out.clone()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() { stack.push(p) } else { written.extend(std::fs::read(&p).unwrap()) }
        }
    }
    assert!(written.len() > 1024, "issues.jsonl, the ledger and the fire log were written");
    let contains = |needle: &str| written.windows(needle.len()).any(|w| w == needle.as_bytes());
    // Not only the whole raw output: no variable fragment of it either (a
    // word holding a digit, a path, an address, a quoted value), which is
    // what a half-working normalizer would leave behind.
    let mut fragments = 0;
    for f in truth.failures.iter().filter(|f| !f.output.is_empty()) {
        assert!(!contains(&f.output), "raw output stored: {}", f.output);
        for word in f.output.split_whitespace() {
            let word = word.trim_matches(|c: char| matches!(c, ':' | '"' | '\'' | ',' | '.'));
            let variable = word.chars().any(|c| c.is_ascii_digit() || matches!(c, '/' | '@' | '"'));
            if word.len() >= 5 && variable && !word.chars().all(|c| c.is_ascii_digit()) {
                assert!(!contains(word), "a fragment {word:?} of the raw output {:?} was stored", f.output);
                fragments += 1;
            }
        }
    }
    assert!(fragments > 20, "the failures carry variable fragments to look for: {fragments}");
    for leak in ["/srv/projects/", "@example.com", "sk-live-", "api.github.com", "/home/user/work/"] {
        assert!(!contains(leak), "raw value {leak} stored");
    }
    for name in &truth.bot_names {
        assert!(!contains(name), "bot name {name} stored");
    }
}

#[test]
fn a_rerun_with_no_new_data_leaves_issues_byte_identical() {
    let s = Scratch::new();
    let data = s.path("data");
    datagen::generate(&data, &DataSpec::default()).unwrap();
    let detectors = s.detectors_with(&[]);
    let out = s.path("out");
    let first = scan(&detectors, &data, &out);
    let before = std::fs::read(out.join("issues.jsonl")).unwrap();
    let second = scan(&detectors, &data, &out);
    assert_eq!(before, std::fs::read(out.join("issues.jsonl")).unwrap());
    assert_eq!(second["issues"]["counted"], 0);
    assert_eq!(second["issues"]["newIssues"], 0);
    assert!(first["issues"]["counted"].as_u64().unwrap() > 0);
}

#[test]
fn the_data_dir_is_left_exactly_as_it_was() {
    let s = Scratch::new();
    let data = s.path("data");
    datagen::generate(&data, &DataSpec::default()).unwrap();
    let before = listing(&data);
    let bytes_before = std::fs::read(data.join("messages.db")).unwrap();
    scan(&s.detectors_with(&[]), &data, &s.path("out"));
    assert_eq!(listing(&data), before, "nothing created in the data dir");
    assert_eq!(std::fs::read(data.join("messages.db")).unwrap(), bytes_before);
}

#[test]
fn bot_names_stay_out_of_issues_when_bots_json_is_unreadable() {
    let s = Scratch::new();
    let data = s.path("data");
    let truth = datagen::generate(&data, &DataSpec::default()).unwrap();
    assert!(truth.failures.iter().any(|f| f.template == "room-timeout"), "the data has harness notices naming bots");
    std::fs::write(data.join("bots.json"), b"{ not json").unwrap();
    let out = s.path("out");
    let summary = scan(&s.detectors_with(&[]), &data, &out);
    assert_eq!(summary["sources"][0]["status"], "failed");
    let written = std::fs::read_to_string(out.join("issues.jsonl")).unwrap();
    for name in &truth.bot_names {
        assert!(!written.contains(name.as_str()), "bot name {name} stored");
    }
}

#[test]
fn queue_wait_and_cost_flags_reach_the_detectors_typed() {
    let s = Scratch::new();
    let data = s.path("data");
    datagen::generate(&data, &DataSpec::default()).unwrap();
    let detectors = s.detectors_with(&[]);
    let count = |out: &str, extra: &[&str]| {
        let o = run(&detectors, &data, &s.path(out), extra);
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
        let by_kind = |k: &str| issues_of(&s.path(out), k).iter().map(|i| i["count"].as_i64().unwrap()).sum::<i64>();
        (by_kind("cost"), by_kind("queue_wait"))
    };
    let (cost, wait) = count("default", &[]);
    assert!(cost > 0 && wait > 0, "the demo data has expensive turns and long waits");
    let (cost_hi, wait_hi) = count("high", &["--cost", "1000", "--queue-wait", "100000"]);
    assert_eq!((cost_hi, wait_hi), (0, 0));
    let (cost_lo, wait_lo) = count("low", &["--cost", "0.5", "--queue-wait", "1"]);
    assert!(cost_lo > cost && wait_lo > wait, "lower thresholds catch more: {cost_lo} > {cost}, {wait_lo} > {wait}");
}

#[test]
fn a_retry_loop_straddling_two_scans_is_found_once() {
    let s = Scratch::new();
    let data = s.path("data");
    let (tool, min) = ("mcp__agents__load_layer", 60_000);
    let t = 1_791_895_000_000_i64;
    let fail = |id: &str, at: i64, turn: &str, out: &str| {
        datagen::insert_activity(&data, &Activity::failed(id, at, turn, tool, out)).unwrap();
    };
    fail("m1", t, "t-loop", "no layer 1 in /a");
    fail("m2", t + min, "t-loop", "no layer 2 in /b");
    // A later failure elsewhere moves the trailing window past m1 and m2.
    fail("m9", t + 35 * min, "t-other", "disk full");
    let detectors = s.detectors_with(&[]);
    let out = s.path("out");
    let scan_at = |at: i64| {
        let o = run(&detectors, &data, &out, &["--no-fast-path", "--scan-time", &at.to_string()]);
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
        issues_of(&out, "retry_loop")
    };
    assert!(scan_at(t + 36 * min).is_empty(), "two failures are no loop yet");
    fail("m3", t + 40 * min, "t-loop", "no layer 3 in /c");
    let loops = scan_at(t + 41 * min);
    assert_eq!(loops.len(), 1, "the third failure, a scan later, makes the loop: {loops:#?}");
    assert_eq!((loops[0]["count"].as_i64(), loops[0]["firstAt"].as_i64()), (Some(1), Some(t)));
    assert_eq!(loops[0]["evidenceRef"]["id"], "m3");
    fail("m4", t + 42 * min, "t-loop", "no layer 4 in /d");
    let loops = scan_at(t + 43 * min);
    assert_eq!(loops.len(), 1);
    assert_eq!(loops[0]["count"], 1, "found once, however many scans see it");
}
