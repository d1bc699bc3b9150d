//! `service install`, `service uninstall` and `check-install`, with the real
//! binary: the systemd units pass `systemd-analyze verify`, the launchd plist
//! has the right shape, nothing is written into the data dir, and a moved
//! binary or a removed detector makes the install stale.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use xtask::datagen::{self, Activity};

use crate::support::*;

/// A home of the test's own, so nothing on the machine is read or touched.
struct Home {
    home: PathBuf,
    config: PathBuf,
    runtime: PathBuf,
}

impl Home {
    fn new(s: &Scratch) -> Self {
        let home = s.path("home");
        let config = home.join(".config");
        let runtime = s.path("run");
        for d in [&home, &config, &runtime] {
            std::fs::create_dir_all(d).unwrap();
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        Home { home, config, runtime }
    }

    fn command(&self, binary: &Path) -> Command {
        let mut c = Command::new(binary);
        // Nothing of the machine's: no sentinels file named by the runner's environment.
        c.env_remove("SENTINELS_CONFIG_PATH")
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", &self.config)
            .env("XDG_STATE_HOME", self.home.join(".local/state"))
            .env("XDG_RUNTIME_DIR", &self.runtime);
        c
    }

    fn run(&self, binary: &Path, args: &[&str]) -> Output {
        self.command(binary).args(args).output().expect("sentinel-host runs")
    }
}

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_sentinel-host"))
}

fn text(o: &Output) -> String {
    format!("stdout: {}\nstderr: {}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Every path under `dir` with its size and modification time.
fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            if m.is_dir() {
                stack.push(e.path());
            }
            out.push(format!("{} {} {:?}", e.path().display(), m.len(), m.modified().ok()));
        }
    }
    out.sort();
    out
}

/// `service install` as given; see [`install`] for one that must succeed.
fn try_install(h: &Home, binary: &Path, platform: &str, detectors: &Path, data: &Path, out: &Path) -> Output {
    h.run(
        binary,
        &[
            "service",
            "install",
            "--platform",
            platform,
            "--detectors",
            detectors.to_str().unwrap(),
            "--data-dir",
            data.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
    )
}

fn install(h: &Home, binary: &Path, platform: &str, detectors: &Path, data: &Path, out: &Path) -> Output {
    let o = try_install(h, binary, platform, detectors, data, out);
    assert_eq!(o.status.code(), Some(0), "service install failed\n{}", text(&o));
    o
}

/// The argument list a schedule installed for these folders runs (every path
/// resolved; no config file in the test's home, so no `--config`/`--sentinels`).
fn scheduled_run(detectors: &Path, data: &Path, out: &Path) -> Vec<String> {
    let canon = |p: &Path| p.canonicalize().unwrap().to_string_lossy().into_owned();
    let mut args = vec![canon(&bin()), "run".into(), "--once".into(), "--detectors".into(), canon(detectors)];
    args.extend(["--data-dir".into(), canon(data), "--out".into(), canon(out)]);
    args
}

fn data_dir(s: &Scratch) -> PathBuf {
    let data = s.path("data dir");
    std::fs::create_dir_all(&data).unwrap();
    datagen::generate(&data, &datagen::DataSpec::default()).unwrap();
    data
}

#[cfg(target_os = "linux")]
#[test]
fn the_systemd_units_pass_systemd_analyze_verify_and_nothing_is_written_to_the_data_dir() {
    let s = Scratch::new();
    let h = Home::new(&s);
    let data = data_dir(&s);
    let detectors = s.detectors_with(&[]);
    // Spaces, a percent sign and a dollar sign: each needs escaping in a unit.
    let out = s.path("sentinel state/50% $out");
    let before = tree(&data);
    let o = install(&h, &bin(), "linux", &detectors, &data, &out);
    assert_eq!(tree(&data), before, "service install wrote into the data dir");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("systemctl --user enable --now openmausbot-sentinel.timer"), "{stdout}");
    assert!(stdout.contains("nothing is installed yet"), "{stdout}");

    let service = out.join("openmausbot-sentinel.service");
    let timer = out.join("openmausbot-sentinel.timer");
    let unit = std::fs::read_to_string(&service).unwrap();
    assert!(unit.contains(&format!("ExecStart=\"{}\" \"run\" \"--once\"", bin().canonicalize().unwrap().display())));
    assert!(std::fs::read_to_string(&timer).unwrap().contains("OnUnitActiveSec=120s"));
    // Nothing was installed: the scheduler's folder is untouched.
    assert!(!h.config.join("systemd").exists());

    let verify =
        h.command(Path::new("systemd-analyze")).args(["verify", "--user"]).arg(&service).arg(&timer).output().expect(
            "systemd-analyze is installed (cargo xtask test installs Debian's systemd package when it is missing)",
        );
    let err = String::from_utf8_lossy(&verify.stderr);
    assert_eq!(verify.status.code(), Some(0), "systemd-analyze verify failed\n{}", text(&verify));
    assert!(!err.contains("openmausbot-sentinel"), "systemd-analyze verify complained:\n{err}");

    // The command the unit runs, split by a parser that is not ours: POSIX
    // shell words (Python's shlex: double quotes, `\\` and `\"` inside
    // them, as systemd.service(5) "Command lines" has it), then systemd's
    // `%%` and `$$` escapes, and systemd-analyze verify above has checked
    // the first word is an executable. It must be the argument list the
    // unit is meant to run, and our own splitter must agree.
    let exec = unit.lines().find_map(|l| l.strip_prefix("ExecStart=")).unwrap();
    let expected = scheduled_run(&detectors, &data, &out);
    let oracle = Command::new("python3")
        .args([
            "-c",
            "import json, re, shlex, sys\n\
             words = shlex.split(sys.argv[1], posix=True)\n\
             print(json.dumps([re.sub(r'%%|\\$\\$', lambda m: m.group(0)[0], w) for w in words]))",
        ])
        .arg(exec)
        .output()
        .expect("python3 runs");
    assert_eq!(oracle.status.code(), Some(0), "{}", text(&oracle));
    let independent: Vec<String> = serde_json::from_slice(&oracle.stdout).unwrap();
    assert_eq!(independent, expected, "ExecStart={exec}");
    let args = sentinel_host::ops::service::systemd_split(exec).unwrap();
    assert_eq!(args, expected, "our splitter agrees with the independent one");
    let scan = h.command(Path::new(&args[0])).args(&args[1..]).output().unwrap();
    assert_eq!(scan.status.code(), Some(0), "{}", text(&scan));
    assert!(out.join("issues.jsonl").is_file());
    assert_eq!(tree(&data), before, "the scheduled scan wrote into the data dir");

    let un = h.run(&bin(), &["service", "uninstall", "--platform", "linux"]);
    assert_eq!(un.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&un.stdout).contains("systemctl --user disable --now openmausbot-sentinel.timer"));
}

#[test]
fn the_launchd_plist_is_xml_of_the_right_shape() {
    let s = Scratch::new();
    let h = Home::new(&s);
    let data = data_dir(&s);
    let detectors = s.detectors_with(&[]);
    let out = s.path("Application Support/a & b <c>");
    let before = tree(&data);
    let o = install(&h, &bin(), "macos", &detectors, &data, &out);
    assert_eq!(tree(&data), before, "service install wrote into the data dir");
    assert!(String::from_utf8_lossy(&o.stdout).contains("launchctl bootstrap gui/$(id -u)"), "{}", text(&o));

    let xml = std::fs::read_to_string(out.join("com.openmausbot.sentinel.plist")).unwrap();
    let opts = roxmltree::ParsingOptions { allow_dtd: true, ..Default::default() };
    let doc = roxmltree::Document::parse_with_options(&xml, opts).expect("the plist is well-formed XML");
    let plist = doc.root_element();
    assert_eq!(plist.tag_name().name(), "plist");
    assert_eq!(plist.attribute("version"), Some("1.0"));
    let dict = plist.children().find(|n| n.has_tag_name("dict")).expect("a top-level dict");
    let items: Vec<roxmltree::Node<'_, '_>> = dict.children().filter(|n| n.is_element()).collect();
    let value = |key: &str| {
        let i = items.iter().position(|n| n.has_tag_name("key") && n.text() == Some(key));
        items[i.unwrap_or_else(|| panic!("no key {key} in\n{xml}")) + 1]
    };
    assert_eq!(value("Label").text(), Some("com.openmausbot.sentinel"));
    let start = value("StartInterval");
    assert_eq!((start.tag_name().name(), start.text()), ("integer", Some("120")));
    let args: Vec<String> = value("ProgramArguments")
        .children()
        .filter(|n| n.has_tag_name("string"))
        .map(|n| n.text().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(args, scheduled_run(&detectors, &data, &out));
    let log = out.canonicalize().unwrap().join("sentinel.log").to_string_lossy().into_owned();
    for key in ["StandardOutPath", "StandardErrorPath"] {
        assert_eq!(value(key).text(), Some(log.as_str()), "{key}");
    }

    // check-install reads the plist back (here the copy in sentinel's folder:
    // this home has no ~/Library/LaunchAgents).
    let o = h.run(&bin(), &["check-install", "--platform", "macos", "--out", out.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let json: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(json["schedule"]["out"], out.canonicalize().unwrap().to_string_lossy().into_owned());
    assert_eq!(json["installed"], false);
}

#[test]
fn the_windows_task_runs_a_script_in_sentinels_folder() {
    let s = Scratch::new();
    let h = Home::new(&s);
    let data = data_dir(&s);
    let out = s.path("out");
    let o = install(&h, &bin(), "windows", &s.detectors_with(&[]), &data, &out);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("schtasks /Create /F /TN openmausbot-sentinel /SC MINUTE /MO 2 /TR "), "{stdout}");
    let script = std::fs::read_to_string(out.join("openmausbot-sentinel.cmd")).unwrap();
    assert!(script.contains("\"run\" \"--once\" \"--detectors\""), "{script}");
    assert!(script.contains("sentinel.log"), "{script}");
}

fn check(h: &Home, out: &Path) -> (Option<i32>, String, Value) {
    let args = ["check-install", "--platform", "linux", "--out", out.to_str().unwrap()];
    let o = h.run(&bin(), &args);
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let j = h.run(&bin(), &json_args);
    assert_eq!(j.status.code(), o.status.code(), "{}", text(&j));
    (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned(), serde_json::from_slice(&j.stdout).unwrap())
}

#[test]
fn check_install_passes_a_fresh_install_and_finds_a_moved_binary_and_a_removed_detector() {
    let s = Scratch::new();
    let h = Home::new(&s);
    let data = s.path("data");
    std::fs::create_dir_all(&data).unwrap();
    datagen::insert_activity(&data, &Activity::failed("m1", 1_000, "t1", "mcp__agents__x", "boom")).unwrap();
    let detectors = s.detectors_with(&[]);
    let out = s.path("out");

    // Nothing written yet: not installed.
    let (code, stdout, json) = check(&h, &out);
    assert_eq!(code, Some(10), "{stdout}");
    assert!(stdout.starts_with("not installed:"), "{stdout}");
    assert_eq!(json["status"], "notInstalled");

    // Installed from a copy of the binary, as from an app that can move.
    let copy_dir = s.path("app");
    std::fs::create_dir_all(&copy_dir).unwrap();
    let copy = copy_dir.join("sentinel-host");
    std::fs::copy(bin(), &copy).unwrap();
    install(&h, &copy, "linux", &detectors, &data, &out);
    let (code, stdout, json) = check(&h, &out);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.starts_with("ok:"), "{stdout}");
    assert_eq!(json["installed"], false, "only the copy in sentinel's folder exists: {json:#}");
    assert_eq!(json["detectors"].as_array().unwrap().len(), listing(&detectors).len());

    // The printed commands copy the unit into the scheduler's folder: that copy is read.
    let units = h.config.join("systemd/user");
    std::fs::create_dir_all(&units).unwrap();
    for f in ["openmausbot-sentinel.service", "openmausbot-sentinel.timer"] {
        std::fs::copy(out.join(f), units.join(f)).unwrap();
    }
    let (code, _, json) = check(&h, &out);
    assert_eq!(code, Some(0));
    assert_eq!(json["installed"], true);
    assert_eq!(json["file"], units.join("openmausbot-sentinel.service").to_str().unwrap());

    // The binary moves away: stale, with the path named.
    let moved = s.path("moved-sentinel-host");
    std::fs::rename(&copy, &moved).unwrap();
    let (code, stdout, json) = check(&h, &out);
    assert_eq!(code, Some(9), "{stdout}");
    assert!(stdout.starts_with("stale install: binary "), "{stdout}");
    assert!(stdout.contains(copy.to_str().unwrap()) && stdout.contains("rerun sentinel-host service install"));
    assert_eq!(json["problems"].as_array().unwrap().len(), 1, "{json:#}");

    // Put back, then a detector is removed: stale again, naming it.
    std::fs::rename(&moved, &copy).unwrap();
    assert_eq!(check(&h, &out).0, Some(0));
    let gone = detectors.join("cost.wasm");
    std::fs::remove_file(&gone).unwrap();
    let (code, stdout, json) = check(&h, &out);
    assert_eq!(code, Some(9), "{stdout}");
    assert!(stdout.contains("cost.wasm is gone"), "{stdout}");
    let missing: Vec<&Value> =
        json["detectors"].as_array().unwrap().iter().filter(|d| d["status"] == "missing").collect();
    assert_eq!(missing.len(), 1, "{json:#}");

    // A detector that no longer loads is stale too.
    std::fs::write(detectors.join("tool_error.wasm"), b"not a component").unwrap();
    let (code, stdout, _) = check(&h, &out);
    assert_eq!(code, Some(9));
    assert!(stdout.contains("tool_error.wasm no longer loads"), "{stdout}");

    // Installing again from where things are now makes it fresh.
    std::fs::remove_file(detectors.join("tool_error.wasm")).unwrap();
    install(&h, &copy, "linux", &detectors, &data, &out);
    for f in ["openmausbot-sentinel.service", "openmausbot-sentinel.timer"] {
        std::fs::copy(out.join(f), units.join(f)).unwrap();
    }
    let (code, stdout, _) = check(&h, &out);
    assert_eq!(code, Some(0), "{stdout}");
}

#[test]
fn install_refuses_a_detector_that_does_not_load_and_an_out_inside_the_data_dir() {
    let s = Scratch::new();
    let h = Home::new(&s);
    let data = s.path("data");
    std::fs::create_dir_all(&data).unwrap();
    let detectors = s.detectors_with(&[]);
    std::fs::write(detectors.join("broken.wasm"), b"nope").unwrap();
    let o = try_install(&h, &bin(), "linux", &detectors, &data, &s.path("out"));
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("broken.wasm"), "{}", text(&o));
    std::fs::remove_file(detectors.join("broken.wasm")).unwrap();
    let o = try_install(&h, &bin(), "linux", &detectors, &data, &data.join("out"));
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    assert!(listing(&data).is_empty(), "nothing written into the data dir");
}

#[test]
fn the_schedule_passes_the_sentinels_file_seen_at_install_and_check_install_finds_it_gone() {
    let s = Scratch::new();
    let h = Home::new(&s);
    let data = data_dir(&s);
    let detectors = s.detectors_with(&[]);
    let out = s.path("out");
    let yaml = s.path("gate way/sentinels.yaml");
    std::fs::create_dir_all(yaml.parent().unwrap()).unwrap();
    std::fs::write(&yaml, "sentinels:\n  watch-health-watch: {}\n").unwrap();
    let install_args = |extra: &[&str]| {
        let mut a = vec![
            "service".to_owned(),
            "install".into(),
            "--platform".into(),
            "linux".into(),
            "--detectors".into(),
            detectors.to_str().unwrap().into(),
            "--data-dir".into(),
            data.to_str().unwrap().into(),
            "--out".into(),
            out.to_str().unwrap().into(),
        ];
        a.extend(extra.iter().map(|e| (*e).to_owned()));
        a
    };

    // The variable set at install time is written into the schedule as a flag.
    let o = h.command(&bin()).args(install_args(&[])).env("SENTINELS_CONFIG_PATH", &yaml).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains(&format!("sentinels: {}", yaml.display())), "{}", text(&o));
    let unit = std::fs::read_to_string(out.join("openmausbot-sentinel.service")).unwrap();
    let exec = unit.lines().find_map(|l| l.strip_prefix("ExecStart=")).unwrap();
    let args = sentinel_host::ops::service::systemd_split(exec).unwrap();
    let at = args.iter().position(|a| a == "--sentinels").unwrap_or_else(|| panic!("no --sentinels in {exec}"));
    assert_eq!(Path::new(&args[at + 1]), yaml);

    // The scheduled scan reads that file whatever its own environment says.
    let scan = h
        .command(Path::new(&args[0]))
        .args(&args[1..])
        .arg("--json")
        .env("SENTINELS_CONFIG_PATH", s.path("not-this.yaml"))
        .output()
        .unwrap();
    assert_eq!(scan.status.code(), Some(0), "{}", text(&scan));
    let summary: Value = serde_json::from_slice(&scan.stdout).unwrap();
    let health = detector(&summary, "watch_health_watch");
    assert!(!health["note"].as_str().unwrap_or("").starts_with("inert"), "bound by the file: {health:#}");
    let inbox = detector(&summary, "file_inbox_watch");
    assert!(inbox["note"].as_str().unwrap().starts_with("inert"), "not in the file: {inbox:#}");

    // The file goes away: the install is stale, and says which file.
    std::fs::remove_file(&yaml).unwrap();
    let (code, stdout, _) = check(&h, &out);
    assert_eq!(code, Some(9), "{stdout}");
    assert!(stdout.contains("sentinels file") && stdout.contains("sentinels.yaml is gone"), "{stdout}");

    // A file that does not parse is refused at install, naming it (exit 3).
    std::fs::write(&yaml, "sentinels:\n  no-such-watch: {}\n").unwrap();
    let o = h.command(&bin()).args(install_args(&["--sentinels", yaml.to_str().unwrap()])).output().unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("sentinels.yaml"), "{}", text(&o));
}
