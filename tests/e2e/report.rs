//! The friction digest end to end: three days of history scanned day by day,
//! an issue fixed and one regressed, and `report` checked against an
//! independent recomputation from the exported fire log
//! (`report_oracle.py`); a quiet period says so; every format escapes what
//! the data dir wrote.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use xtask::datagen::{self, Activity};

use crate::support::*;

const DAY: i64 = 86_400_000;

/// The wall clock, ms: an operator's fix is stamped with it, so the history
/// is laid out in the three UTC days before today.
fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

fn report(data: &Path, out: &Path, args: &[&str]) -> std::process::Output {
    let mut c = sentinel_host();
    c.arg("report").args(args).arg("--data-dir").arg(data).arg("--out").arg(out);
    run_within(c, Duration::from_secs(60))
}

fn ok_stdout(o: &std::process::Output) -> String {
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// Three days of failures: four errors, each on its own days and turns.
fn history(data: &Path, t0: i64) {
    let errors = [
        ("Bash", "exit 2: no such file or directory"),
        ("Read", "permission denied while opening the config"),
        ("Fetch", "connection refused by the upstream <script>alert(1)</script>"),
        ("Bash", "exit 137: killed by the out-of-memory killer"),
    ];
    let mut n = 0;
    for day in 0..3 {
        for (e, (tool, text)) in errors.iter().enumerate() {
            // Error e fails (e + day) % 4 + 1 times on this day, in turns of two calls each.
            for k in 0..(e as i64 + day) % 4 + 1 {
                n += 1;
                let (id, turn) = (format!("m{n}"), format!("t{day}-{e}-{}", k / 2));
                let at = t0 + day * DAY + 3_600_000 * (e as i64 + 1) + k * 60_000;
                datagen::insert_activity(data, &Activity::failed(&id, at, &turn, tool, text)).unwrap();
            }
        }
    }
}

#[test]
fn the_digest_ranks_as_a_recomputation_from_the_fire_log_does() {
    let s = Scratch::new();
    let (data, out) = (s.path("data"), s.path("out"));
    let detectors = s.detectors_with(&[]);
    let scan_at = |at: i64| {
        let o = run(&detectors, &data, &out, &["--no-fast-path", "--scan-time", &at.to_string()]);
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    };
    let now = now_ms();
    let t0 = now.div_euclid(DAY) * DAY - 3 * DAY;
    history(&data, t0);
    for day in 0..3 {
        scan_at(t0 + day * DAY + 23 * 3_600_000);
    }
    let issues = issues_of(&out, "tool_error");
    assert_eq!(issues.len(), 4, "one issue per error: {issues:?}");
    // One fixed, then seen again: a fix and a regression in the period.
    let sig = issues[0]["sig"].as_str().unwrap().to_owned();
    let mut fix = sentinel_host();
    fix.args(["issues", "fix", &sig, "--data-dir"]).arg(&data).arg("--out").arg(&out);
    ok_stdout(&run_within(fix, Duration::from_secs(60)));
    let again = Activity::failed("late", now + 60_000, "t-late", "Bash", "exit 2: no such file or directory");
    datagen::insert_activity(&data, &again).unwrap();
    scan_at(now + 120_000);

    // From the history's first midnight to an hour after the regression.
    let until = now + 3_600_000;
    let since = t0;
    let length = format!("{}ms", until - since);
    let period = ["--since", length.as_str(), "--until", &until.to_string()];
    let json = ok_stdout(&report(&data, &out, &[&period[..], &["--format", "json", "--top", "0"]].concat()));
    let got: Value = serde_json::from_str(&json).unwrap();
    let oracle = std::process::Command::new("python3")
        .arg(root().join("tests/e2e/report_oracle.py"))
        .arg(&out)
        .args([since.to_string(), until.to_string()])
        .output()
        .unwrap();
    assert!(oracle.status.success(), "{}", String::from_utf8_lossy(&oracle.stderr));
    let want: Value = serde_json::from_slice(&oracle.stdout).unwrap();
    let ranked: Vec<Value> = got["costliest"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| serde_json::json!({"sig": c["sig"], "count": c["count"], "wastedTurns": c["wastedTurns"], "perDay": c["perDay"]}))
        .collect();
    assert_eq!(Value::from(ranked), want["costliest"], "the ranking, counts and trend");
    assert_eq!(want["costliest"].as_array().unwrap().len(), 4, "every issue had an occurrence");
    let sigs = |v: &Value| -> Vec<Value> { v.as_array().unwrap().iter().map(|e| e["sig"].clone()).collect() };
    for section in ["new", "regressed", "fixed"] {
        assert_eq!(Value::from(sigs(&got[section])), want[section], "{section}");
    }
    assert_eq!((&want["regressed"], &want["fixed"]), (&serde_json::json!([sig]), &serde_json::json!([sig])));
    // An hour past now falls on tomorrow when the test runs in the day's last hour.
    let tomorrow = usize::from((until - 1).div_euclid(DAY) > now.div_euclid(DAY));
    assert_eq!(got["days"].as_array().unwrap().len(), 4 + tomorrow, "three days of history, today (and tomorrow)");

    // What the data dir wrote is escaped in every format.
    let html = ok_stdout(&report(&data, &out, &[&period[..], &["--format", "html"]].concat()));
    assert!(html.contains("<svg class=\"spark\"") && !html.contains("<script>"), "{html}");
    let text = ok_stdout(&report(&data, &out, &period));
    assert!(text.contains("costliest") && text.contains("regressed"), "{text}");

    // A quiet day: nothing happened, and it says so.
    let quiet = ok_stdout(&report(&data, &out, &["--until", &(t0 - DAY).to_string()]));
    assert!(quiet.contains("nothing happened"), "{quiet}");
    let o = report(&data, &out, &["--since", "500d"]);
    assert_eq!(o.status.code(), Some(2), "a period over the limit is the operator's input");
}

/// `run --once` at `at` with the config file `config` (and `TZ`, when given).
fn scan_with(detectors: &Path, data: &Path, out: &Path, config: &Path, at: i64, tz: Option<&str>) {
    let mut c = run_command(detectors, data, out);
    c.args(["--once", "--json", "--no-fast-path", "--scan-time", &at.to_string(), "--config"]).arg(config);
    if let Some(tz) = tz {
        c.env("TZ", tz);
    }
    let o = run_within(c, Duration::from_secs(300));
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
}

/// One failed `Bash` call, its id its turn.
fn fail(data: &Path, id: &str, at: i64) {
    datagen::insert_activity(data, &Activity::failed(id, at, id, "Bash", "exit 2: no such file or directory")).unwrap();
}

#[test]
fn the_daily_digest_is_written_once_at_the_local_hour_covers_days_the_machine_was_off_and_a_quiet_day_sends_nothing() {
    let s = Scratch::new();
    let (data, out) = (s.path("data"), s.path("out"));
    let detectors = s.detectors_with(&[]);
    let config = s.path("config.toml");
    std::fs::write(&config, "[report]\ndaily_at_hour = 7\n").unwrap();
    // 2026-10-12T00:00:00Z; the zone is UTC+2 (POSIX TZ's sign is west), so
    // 07:00 local is 05:00Z.
    let d: i64 = 1_791_763_200_000;
    let h = 3_600_000;
    let scan_at = |at: i64| scan_with(&detectors, &data, &out, &config, at, Some("XXX-2"));
    let fail = |id: &str, at: i64| fail(&data, id, at);
    let digests = || if out.join("digests").exists() { listing(&out.join("digests")) } else { Vec::new() };
    fail("before", d + h);
    // 08:00 local: the series starts; no digest of the time before.
    scan_at(d + 6 * h);
    assert!(digests().is_empty() && fires_of_type(&out, "digest").is_empty());
    fail("day0-a", d + 10 * h);
    fail("day0-b", d + 11 * h);
    scan_at(d + 12 * h);
    assert!(digests().is_empty(), "not due before 07:00 local: {:?}", digests());
    // 07:30 local the next day: due, written once.
    scan_at(d + DAY + 5 * h + 30 * 60_000);
    scan_at(d + DAY + 6 * h);
    assert_eq!(digests(), ["digest-2026-10-13.json", "digest-2026-10-13.md"]);
    let first: Value =
        serde_json::from_slice(&std::fs::read(out.join("digests/digest-2026-10-13.json")).unwrap()).unwrap();
    assert_eq!((first["since"].as_i64(), first["until"].as_i64()), (Some(d + 5 * h), Some(d + DAY + 5 * h)));
    assert_eq!(first["occurrences"], 2, "the two failures after the series began: {first:#}");
    // Off for three days: one digest covers the whole stretch.
    fail("day2", d + 2 * DAY + 10 * h);
    scan_at(d + 4 * DAY + 5 * h + 10 * 60_000);
    let second: Value =
        serde_json::from_slice(&std::fs::read(out.join("digests/digest-2026-10-16.json")).unwrap()).unwrap();
    assert_eq!(
        (second["since"].as_i64(), second["until"].as_i64()),
        (Some(d + DAY + 5 * h), Some(d + 4 * DAY + 5 * h))
    );
    assert_eq!((second["occurrences"].as_u64(), second["days"].as_array().map(Vec::len)), (Some(1), Some(4)));
    // A quiet day: nothing written, nothing sent.
    scan_at(d + 5 * DAY + 5 * h + 10 * 60_000);
    assert_eq!(digests().len(), 4, "{:?}", digests());
    let fires = fires_of_type(&out, "digest");
    assert_eq!(fires.len(), 2, "one fire per digest that was not quiet: {fires:#?}");
    assert!(
        fires[0]["reason"].as_str().unwrap().starts_with("digests/digest-2026-10-13.md: 2 occurrences"),
        "{fires:#?}"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(out.join("digests/digest-2026-10-16.md")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let mut verify = sentinel_host();
    verify.arg("verify").arg("--out").arg(&out).arg("--data-dir").arg(&data);
    let o = run_within(verify, Duration::from_secs(60));
    assert_eq!(
        o.status.code(),
        Some(0),
        "the digest fires are chained and signed: {}",
        String::from_utf8_lossy(&o.stdout)
    );
}

#[test]
fn an_issue_crossing_the_threshold_records_one_threshold_fire_and_a_bad_window_is_refused() {
    let s = Scratch::new();
    let (data, out) = (s.path("data"), s.path("out"));
    let detectors = s.detectors_with(&[]);
    let config = s.path("config.toml");
    std::fs::write(&config, "[report]\nthreshold_count = 3\nthreshold_window = \"2h\"\n").unwrap();
    let t: i64 = 1_791_763_200_000 + 10 * 3_600_000;
    let scan_at = |at: i64| scan_with(&detectors, &data, &out, &config, at, None);
    let fail = |id: &str, at: i64| fail(&data, id, at);
    let thresholds = |out: &Path| fires_of_type(out, "threshold");
    fail("a", t);
    fail("b", t + 60_000);
    scan_at(t + 120_000);
    assert!(thresholds(&out).is_empty(), "two of three");
    fail("c", t + 180_000);
    scan_at(t + 240_000);
    fail("d", t + 300_000);
    scan_at(t + 360_000);
    let fired = thresholds(&out);
    assert_eq!(fired.len(), 1, "once per crossing, not once per scan over it: {fired:#?}");
    let sig = issues_of(&out, "tool_error")[0]["sig"].clone();
    assert_eq!(fired[0]["sig"], sig);
    assert!(fired[0]["reason"].as_str().unwrap().starts_with("3 occurrences"), "{fired:#?}");

    std::fs::write(&config, "[report]\nthreshold_count = 3\nthreshold_window = \"90m\"\n").unwrap();
    let mut c = run_command(&detectors, &data, &out);
    c.args(["--once", "--config"]).arg(&config);
    let o = run_within(c, Duration::from_secs(300));
    assert_eq!(o.status.code(), Some(3), "a window that is not whole hours is a config error");
    assert!(String::from_utf8_lossy(&o.stderr).contains("threshold_window"), "{}", String::from_utf8_lossy(&o.stderr));
}
