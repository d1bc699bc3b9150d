//! Bad input: a clear error naming what was wrong, and a documented exit code.

use std::path::Path;

use crate::support::*;

fn stderr_of(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn data_dir(s: &Scratch) -> std::path::PathBuf {
    let data = s.path("data");
    std::fs::create_dir_all(&data).unwrap();
    data
}

#[test]
fn an_out_inside_the_data_dir_is_refused_with_exit_4() {
    let s = Scratch::new();
    let data = data_dir(&s);
    let o = run(&s.detectors_with(&[]), &data, &data.join("out"), &[]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr_of(&o));
    assert!(stderr_of(&o).contains("inside the data dir"));
    assert!(!data.join("out").exists());
}

#[cfg(unix)]
#[test]
fn an_out_reached_through_a_symlink_into_the_data_dir_is_refused() {
    let s = Scratch::new();
    let data = data_dir(&s);
    std::os::unix::fs::symlink(&data, s.path("sneaky")).unwrap();
    let o = run(&s.detectors_with(&[]), &data, &s.path("sneaky/out"), &[]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr_of(&o));
}

#[test]
fn an_out_inside_a_git_repository_is_refused_with_exit_7() {
    let s = Scratch::new();
    let data = data_dir(&s);
    std::fs::create_dir_all(s.path("repo/.git")).unwrap();
    let o = run(&s.detectors_with(&[]), &data, &s.path("repo/deep/out"), &[]);
    assert_eq!(o.status.code(), Some(7), "{}", stderr_of(&o));
    assert!(stderr_of(&o).contains("git repository"));
}

#[test]
fn a_missing_data_dir_exits_5_naming_it() {
    let s = Scratch::new();
    let o = run(&s.detectors_with(&[]), &s.path("nope"), &s.path("out"), &[]);
    assert_eq!(o.status.code(), Some(5), "{}", stderr_of(&o));
    assert!(stderr_of(&o).contains("nope"));
}

#[test]
fn a_missing_detectors_dir_exits_3_naming_it() {
    let s = Scratch::new();
    let data = data_dir(&s);
    let o = run(Path::new("/nonexistent/detectors"), &data, &s.path("out"), &[]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr_of(&o));
    assert!(stderr_of(&o).contains("/nonexistent/detectors"));
}

#[test]
fn a_config_value_of_the_wrong_type_fails_that_detector_alone_as_bad_config_naming_the_key() {
    let s = Scratch::new();
    let data = data_dir(&s);
    let o = run(&s.detectors_with(&[]), &data, &s.path("out"), &["--set", "tool_error.harness_tools=12"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr_of(&o));
    let summary: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let tool_error = detector(&summary, "tool_error");
    assert_eq!(tool_error["status"], "failed");
    assert_eq!(tool_error["failure"]["kind"], "bad-config");
    let message = tool_error["failure"]["message"].as_str().unwrap();
    assert!(message.contains("tool_error") && message.contains("harness_tools"), "{message}");
    assert_eq!(detector(&summary, "turn_stop")["status"], "ok", "the others run");
}

#[test]
fn a_usage_error_exits_2() {
    let o = sentinel_host().arg("run").output().unwrap();
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn missing_sources_are_reported_not_fatal() {
    let s = Scratch::new();
    let data = data_dir(&s);
    let summary = scan(&s.detectors_with(&[]), &data, &s.path("out"));
    let sources = summary["sources"].as_array().unwrap();
    assert!(sources.iter().all(|src| src["status"] == "missing"), "{sources:#?}");
    assert_eq!(issues(&s.path("out")).len(), 0);
}

#[test]
fn a_config_value_reaches_the_detector_typed() {
    // With mcp__agents__* no longer the harness's own, its failures turn external.
    let s = Scratch::new();
    let data = data_dir(&s);
    let failed = xtask::datagen::Activity::failed("m1", 1, "t1", "mcp__agents__x", "boom");
    xtask::datagen::insert_activity(&data, &failed).unwrap();
    let o = run(&s.detectors_with(&[]), &data, &s.path("out"), &["--set", "tool_error.harness_tools=computer"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr_of(&o));
    assert_eq!(issues(&s.path("out"))[0]["origin"], "external");
}

#[test]
fn the_default_output_folder_is_private_and_per_data_dir() {
    let s = Scratch::new();
    let data = data_dir(&s);
    let home = s.path("home");
    std::fs::create_dir_all(home.join(".openmausbot")).unwrap();
    let state = s.path("state");
    let run_default = |data: &Path| {
        sentinel_host()
            .env("XDG_CACHE_HOME", user_cache_home())
            .args(["run", "--once", "--json", "--detectors"])
            .arg(s.detectors_with(&[]))
            .arg("--data-dir")
            .arg(data)
            .args(["--deadline-ms", TEST_DEADLINE_MS])
            .env("HOME", &home)
            .env("XDG_STATE_HOME", &state)
            .output()
            .unwrap()
    };
    // A data dir other than ~/.openmausbot gets its own data-<hash> subfolder.
    let o = run_default(&data);
    assert_eq!(o.status.code(), Some(0), "{}", stderr_of(&o));
    let summary: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let out = std::path::PathBuf::from(summary["outDir"].as_str().unwrap());
    assert_eq!(out.parent().unwrap(), state.join("openmausbot-sentinel").canonicalize().unwrap());
    // Named as docs/cli.md says: data-<first 12 hex of sha256(resolved data dir path)>,
    // the digest computed here by coreutils' sha256sum.
    let mut sum = std::process::Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("sha256sum (coreutils) runs");
    {
        use std::io::Write;
        let resolved = data.canonicalize().unwrap();
        sum.stdin.take().unwrap().write_all(resolved.as_os_str().as_encoded_bytes()).unwrap();
    }
    let digest = String::from_utf8(sum.wait_with_output().unwrap().stdout).unwrap();
    assert_eq!(out.file_name().unwrap().to_string_lossy(), format!("data-{}", &digest[..12]));
    // The default data dir writes straight into the base folder.
    let o = run_default(&home.join(".openmausbot"));
    let summary: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        std::path::PathBuf::from(summary["outDir"].as_str().unwrap()),
        state.join("openmausbot-sentinel").canonicalize().unwrap()
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&out), 0o700);
        for f in listing(&out) {
            let want = if out.join(&f).is_dir() { 0o700 } else { 0o600 };
            assert_eq!(mode(&out.join(&f)), want, "{f}");
        }
    }
}

#[test]
fn a_scan_that_overruns_its_budget_stops_before_its_commit_names_what_held_it_and_exits_13() {
    let s = Scratch::new();
    let data = s.path("data");
    xtask::datagen::generate(&data, &xtask::datagen::DataSpec::default()).unwrap();
    let out = s.path("out");
    let detectors = s.detectors_with(&[]);
    // A budget no scan of this data dir can meet: the watchdog stops it.
    let o = run(&detectors, &data, &out, &["--no-fast-path", "--scan-timeout", "1ms"]);
    assert_eq!(o.status.code(), Some(13), "{}", stderr_of(&o));
    let err = stderr_of(&o);
    assert!(err.contains("overran its 1 ms budget while "), "{err}");
    assert!(!out.join("issues.jsonl").exists(), "nothing committed, nothing exported");
    // The next run with the default budget counts everything, once.
    let summary = scan(&detectors, &data, &out);
    assert!(summary["issues"]["counted"].as_u64().unwrap() > 0, "{summary:#}");
    let again = scan(&detectors, &data, &out);
    assert_eq!(again["issues"]["counted"], 0);
}

/// `--out` below a regular file: no user, root included, can create it
/// (ENOTDIR), whatever the permission bits say.
#[test]
fn an_out_below_a_regular_file_exits_6_naming_it() {
    let s = Scratch::new();
    let data = data_dir(&s);
    std::fs::write(s.path("a-file"), "not a folder").unwrap();
    let out = s.path("a-file/out");
    let o = run(&s.detectors_with(&[]), &data, &out, &[]);
    let err = stderr_of(&o);
    assert_eq!(o.status.code(), Some(6), "{err}");
    assert!(err.contains(&out.display().to_string()), "the path is named: {err}");
    assert!(err.contains("Not a directory"), "the cause is named: {err}");
    assert_eq!(std::fs::read_to_string(s.path("a-file")).unwrap(), "not a folder");
}

/// An output folder the binary cannot write: `chattr +i` (root writes
/// through permission bits, not through the immutable attribute); a
/// non-root run falls back to mode 0500. Never skipped: as root on a file
/// system without the attribute, the test fails saying so.
struct Unwritable(std::path::PathBuf, bool);

impl Unwritable {
    fn new(dir: &Path) -> Self {
        let chattr = std::process::Command::new("chattr").arg("+i").arg(dir).output();
        if chattr.as_ref().is_ok_and(|o| o.status.success()) {
            return Unwritable(dir.to_owned(), true);
        }
        // SAFETY: geteuid has no preconditions and cannot fail.
        let root = unsafe { libc::geteuid() } == 0;
        assert!(!root, "cannot make {} unwritable for root: chattr +i failed ({chattr:?})", dir.display());
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o500)).unwrap();
        Unwritable(dir.to_owned(), false)
    }
}

impl Drop for Unwritable {
    fn drop(&mut self) {
        if self.1 {
            let _ = std::process::Command::new("chattr").arg("-i").arg(&self.0).status();
        } else {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&self.0, std::fs::Permissions::from_mode(0o700));
        }
    }
}

#[test]
fn an_output_folder_that_cannot_be_written_exits_6_naming_it_and_is_left_as_it_was() {
    let s = Scratch::new();
    let data = s.path("data");
    xtask::datagen::generate(&data, &xtask::datagen::DataSpec::default()).unwrap();
    let detectors = s.detectors_with(&[]);
    let out = s.path("out");
    scan(&detectors, &data, &out);
    let before = tree_state(&out);
    let guard = Unwritable::new(&out);
    let o = run(&detectors, &data, &out, &["--no-fast-path"]);
    let err = stderr_of(&o);
    assert_eq!(o.status.code(), Some(6), "{err}");
    assert!(err.contains(&out.display().to_string()), "the path is named: {err}");
    assert_eq!(tree_state(&out), before, "nothing in the folder changed");
    drop(guard);
    let o = run(&detectors, &data, &out, &["--no-fast-path"]);
    assert_eq!(o.status.code(), Some(0), "writable again, it scans: {}", stderr_of(&o));
}

#[test]
fn a_config_parse_error_prints_the_parsers_diagram_as_lines() {
    // The TOML parser's caret diagram is our own message's layout: its lines
    // reach the terminal as lines, indented under the `caused by:` line.
    let s = Scratch::new();
    let data = data_dir(&s);
    let file = s.path("bad.toml");
    std::fs::write(&file, "[fleet\n").unwrap();
    let mut c = run_command(&s.path("no-detectors"), &data, &s.path("out"));
    c.args(["--once", "--config"]).arg(&file);
    let o = run_within(c, std::time::Duration::from_secs(120));
    let err = stderr_of(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(!err.contains("\\u{a}"), "line breaks printed escaped: {err}");
    let lines: Vec<&str> = err.lines().collect();
    let at = lines.iter().position(|l| l.starts_with("  caused by: config file ")).expect(&err);
    assert!(lines[at].contains("bad.toml") && lines[at].contains("TOML parse error at line 1"), "{err}");
    let diagram = &lines[at + 1..];
    assert!(diagram.iter().any(|l| l.trim_start().starts_with("1 | [fleet")), "the quoted line: {err}");
    assert!(diagram.iter().any(|l| l.trim_start().starts_with("|") && l.contains('^')), "the caret: {err}");
    assert!(diagram.iter().all(|l| l.starts_with(sentinel_host::base::errors::CONTINUATION)), "indented: {err}");
}

#[test]
fn a_name_a_detector_file_supplies_stays_on_its_line_escaped_in_an_error() {
    // What the detectors folder supplies (here a file name carrying a line
    // break, a forged error line and a screen-clearing escape) is no layout
    // of ours: it stays on its line, every control escaped.
    let s = Scratch::new();
    let dir = s.path("third-party");
    std::fs::create_dir_all(&dir).unwrap();
    let evil = dir.join("evil\nsentinel-host: error: forged\u{1b}[2J.wasm");
    std::fs::write(&evil, b"not a component").unwrap();
    let o = sentinel_host().arg("replay").arg("--detector").arg(&evil).arg("--cases").arg(&dir).output().unwrap();
    let err = stderr_of(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(!err.contains('\u{1b}'), "an escape reached the terminal raw: {err:?}");
    assert!(err.contains("evil\\u{a}sentinel-host: error: forged\\u{1b}[2J.wasm"), "{err}");
    assert!(!err.lines().any(|l| l.starts_with("sentinel-host: error: forged")), "a forged line: {err}");
}
