//! Shared test support: components built once per test run, data dirs,
//! running the binary, reading its output.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value;

/// The repository root.
pub fn root() -> PathBuf {
    xtask::guest::repo_root()
}

/// The shipped detectors (Rust, Python and JavaScript), built from source
/// once per test run (the same code path as `cargo xtask build-detectors`),
/// into a folder of the test's own. The build's load check fills the shared
/// compiled-component cache, so no scan of the run compiles them again.
pub fn shipped_detectors() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dest = root().join("target").join("e2e").join("detectors");
        xtask::guest::build_detectors_with(&root(), &dest, &build_options())
            .expect("the shipped detectors build and load");
        dest
    })
}

/// The repository's target folder (toolchains, guest builds) and the shared cache.
pub fn build_options() -> xtask::guest::BuildOptions {
    xtask::guest::BuildOptions { target_dir: root().join("target"), cache_dir: Some(shared_cache()) }
}

/// The hostile fixtures of tests/guests, built from source once per run.
pub fn fixture(name: &str) -> PathBuf {
    static BUILT: OnceLock<Vec<(String, PathBuf)>> = OnceLock::new();
    let built = BUILT.get_or_init(|| xtask::guest::build_fixtures(&root()).expect("the guest fixtures build"));
    built.iter().find(|(n, _)| n == name).map(|(_, p)| p.clone()).unwrap_or_else(|| panic!("no fixture {name}"))
}

/// One compiled-component cache for the whole test run: every test runs the
/// same components, and compiling them is most of a scan's time.
pub fn shared_cache() -> PathBuf {
    // The user cache folder the host uses by default when XDG_CACHE_HOME is
    // `user_cache_home()` (`cargo xtask build-detectors` fills it the same way).
    user_cache_home().join(sentinel_host::base::out_dir::APP_DIR).join("components")
}

/// The XDG_CACHE_HOME every test gives the binary when it leaves the cache
/// to the default: under target/, never the real user cache.
pub fn user_cache_home() -> PathBuf {
    root().join("target").join("e2e").join("xdg-cache")
}

/// A scratch folder: a detectors dir made of the named components.
pub struct Scratch {
    pub dir: tempfile::TempDir,
}

impl Scratch {
    pub fn new() -> Self {
        Scratch { dir: tempfile::Builder::new().prefix("sentinel-e2e-").tempdir().expect("tempdir") }
    }
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }
    /// A detectors dir with the shipped Rust detectors and the given
    /// fixtures. The Python and JavaScript ports are left out here: each
    /// costs seconds to compile into a fresh cache, and several tests use
    /// one; `twins.rs`, `replay.rs` and the `scaffold` test run them.
    pub fn detectors_with(&self, fixtures: &[&str]) -> PathBuf {
        let rust: Vec<String> = xtask::guest::detectors_under(&root().join("detectors"))
            .unwrap()
            .into_iter()
            .filter(|d| d.lang == xtask::guest::Lang::Rust)
            .map(|d| d.name)
            .collect();
        self.detectors_in("detectors", &rust.iter().map(String::as_str).collect::<Vec<_>>(), fixtures)
    }

    /// A detectors dir `folder` with the named shipped detectors (Rust or
    /// not) and the given fixtures.
    pub fn detectors_in(&self, folder: &str, names: &[&str], fixtures: &[&str]) -> PathBuf {
        let dir = self.path(folder);
        std::fs::create_dir_all(&dir).unwrap();
        for entry in std::fs::read_dir(shipped_detectors()).unwrap() {
            let p = entry.unwrap().path();
            let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
            if p.extension().is_some_and(|e| e == "wasm") && names.contains(&stem.as_str()) {
                std::fs::copy(&p, dir.join(p.file_name().unwrap())).unwrap();
            }
        }
        for f in fixtures {
            std::fs::copy(fixture(f), dir.join(format!("{f}.wasm"))).unwrap();
        }
        dir
    }
}

/// The per-call deadline of every test scan whose subject is not the
/// deadline itself: the tests run in parallel on a shared machine, some
/// compile components into a cold cache, and a good detector descheduled
/// for 100 ms must not fail a test about something else. The product's
/// 100 ms is what `hostile.rs` tests with an endless loop and a sleeper
/// (built with [`run_command_with_product_deadline`]).
pub const TEST_DEADLINE_MS: &str = "60000";

/// An empty sentinels file of the test run's (`{}`: no sentinel bound).
pub fn no_sentinels() -> PathBuf {
    static FILE: OnceLock<PathBuf> = OnceLock::new();
    FILE.get_or_init(|| {
        let dir = root().join("target").join("e2e");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("no-sentinels.yaml");
        // Written once per run; the same bytes every time, so a test binary
        // started beside this one reads a whole file either way.
        if std::fs::read(&path).ok().as_deref() != Some(b"{}\n") {
            let tmp = dir.join(format!("no-sentinels.yaml.{}", std::process::id()));
            std::fs::write(&tmp, "{}\n").unwrap();
            std::fs::rename(&tmp, &path).unwrap();
        }
        path
    })
    .clone()
}

/// Keeps the machine's configuration away from a `sentinel-host` command:
/// the sentinels file is [`no_sentinels`] (so neither the runner's
/// `SENTINELS_CONFIG_PATH` nor a real `/etc/gateway/sentinels.yaml` is
/// read) and the user config folder one under target/ that holds no
/// `config.toml` (so no `~/.config/sentinel/config.toml`). A test that
/// wants either sets its own after this.
pub fn isolate(c: &mut Command) -> &mut Command {
    c.env(sentinel_host::config::SENTINELS_ENV, no_sentinels())
        .env("XDG_CONFIG_HOME", root().join("target").join("e2e").join("no-user-config"))
}

/// The `sentinel-host` binary under test, [`isolate`]d: every e2e run of it
/// starts here.
pub fn sentinel_host() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sentinel-host"));
    isolate(&mut c);
    c
}

/// `sentinel-host run --detectors … --data-dir … --out … --cache-dir <shared>
/// --deadline-ms 60000`, ready for more arguments (`--once`, `--interval`, ...).
pub fn run_command(detectors: &Path, data_dir: &Path, out: &Path) -> Command {
    let mut c = run_command_with_product_deadline(detectors, data_dir, out);
    c.args(["--deadline-ms", TEST_DEADLINE_MS]);
    c
}

/// As [`run_command`], with the product's own 100 ms deadline per call.
pub fn run_command_with_product_deadline(detectors: &Path, data_dir: &Path, out: &Path) -> Command {
    let mut c = sentinel_host();
    c.arg("run")
        .arg("--detectors")
        .arg(detectors)
        .arg("--data-dir")
        .arg(data_dir)
        .arg("--out")
        .arg(out)
        .arg("--cache-dir")
        .arg(shared_cache());
    c
}

/// Runs `sentinel-host run --once --json` and returns the process output;
/// a run that does not end within five minutes fails the test.
pub fn run(detectors: &Path, data_dir: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut c = run_command(detectors, data_dir, out);
    c.args(["--once", "--json"]).args(extra);
    run_within(c, std::time::Duration::from_secs(300))
}

/// `detectors inspect --json` over `detectors` for this data dir and output
/// folder; it must exit 0.
pub fn inspect(detectors: &Path, data_dir: &Path, out: &Path) -> Vec<Value> {
    inspect_with_cache_home(detectors, data_dir, out, &user_cache_home())
}

/// [`inspect`] with this XDG_CACHE_HOME.
pub fn inspect_with_cache_home(detectors: &Path, data_dir: &Path, out: &Path, cache_home: &Path) -> Vec<Value> {
    let o = sentinel_host()
        .env("XDG_CACHE_HOME", cache_home)
        .args(["detectors", "inspect", "--json", "--detectors"])
        .arg(detectors)
        .arg("--data-dir")
        .arg(data_dir)
        .arg("--out")
        .arg(out)
        .output()
        .expect("sentinel-host runs");
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("inspect --json prints JSON")
}

/// Runs `sentinel-host replay` of `cases` against `detector`, with the shared cache.
pub fn replay(detector: &Path, cases: &Path) -> Output {
    sentinel_host()
        .args(["replay", "--detector"])
        .arg(detector)
        .arg("--cases")
        .arg(cases)
        .arg("--cache-dir")
        .arg(shared_cache())
        .args(["--deadline-ms", TEST_DEADLINE_MS])
        .env_remove("SENTINEL_BLESS")
        .output()
        .expect("sentinel-host runs")
}

/// Runs a scan that must complete and returns its JSON summary.
pub fn scan(detectors: &Path, data_dir: &Path, out: &Path) -> Value {
    let output = run(detectors, data_dir, out, &[]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "scan failed\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("--json prints one JSON object")
}

/// The lines of `issues.jsonl`.
pub fn issues(out: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(out.join("issues.jsonl")).expect("issues.jsonl exists");
    text.lines().map(|l| serde_json::from_str(l).expect("each line is JSON")).collect()
}

/// The lines of `issues.jsonl` of one kind.
pub fn issues_of(out: &Path, kind: &str) -> Vec<Value> {
    issues(out).into_iter().filter(|i| i["kind"] == kind).collect()
}

/// The summary entry of one detector.
pub fn detector<'a>(summary: &'a Value, name: &str) -> &'a Value {
    summary["detectors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == name)
        .unwrap_or_else(|| panic!("no detector {name} in {summary:#}"))
}

/// Every file name in a folder, sorted.
pub fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

/// Runs `cmd` to completion within `limit`, or kills it and fails the test:
/// every hostile case must end in bounded time.
pub fn run_within(mut cmd: Command, limit: std::time::Duration) -> Output {
    use std::process::Stdio;
    let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("sentinel-host runs");
    wait_within(child, limit)
}

/// Waits for a child spawned with piped stdout and stderr to exit within
/// `limit`, or kills it and fails the test; its output.
pub fn wait_within(mut child: std::process::Child, limit: std::time::Duration) -> Output {
    use std::io::Read;
    let pipe_reader = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            buf
        })
    };
    let out = pipe_reader(Box::new(child.stdout.take().unwrap()));
    let err = pipe_reader(Box::new(child.stderr.take().unwrap()));
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the process did not finish within {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    Output { status, stdout: out.join().unwrap(), stderr: err.join().unwrap() }
}

/// Every entry under `dir` (not following links) with its type, size and
/// modification time: equal before and after a run means nothing was written.
pub fn tree_state(dir: &Path) -> Vec<(String, String, u64, Option<std::time::SystemTime>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let meta = std::fs::symlink_metadata(e.path()).unwrap();
            let rel = e.path().strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            if meta.is_dir() {
                stack.push(e.path());
            }
            out.push((rel, format!("{:?}", meta.file_type()), meta.len(), meta.modified().ok()));
        }
    }
    out.sort();
    out
}

/// Polls `f` every 100 ms until it is true, or fails after `secs`.
pub fn wait_for(secs: u64, what: &str, child: &mut std::process::Child, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while std::time::Instant::now() < deadline {
        if f() {
            return;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("sentinel-host exited ({status}) while waiting for {what}");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = child.kill();
    panic!("timed out after {secs} s waiting for {what}");
}

/// Every file under `dir`, at any depth.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() { out.extend(files_under(&p)) } else { out.push(p) }
    }
    out
}

/// Every entry of the exported fire log in `out` (`fires-*.ndjson`, in order), parsed.
pub fn fire_entries(out: &Path) -> Vec<Value> {
    let mut segments: Vec<_> = files_under(out)
        .into_iter()
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("fires-") && n.ends_with(".ndjson"))
        })
        .collect();
    segments.sort();
    segments
        .iter()
        .flat_map(|p| std::fs::read_to_string(p).unwrap().lines().map(str::to_owned).collect::<Vec<_>>())
        .map(|l| serde_json::from_str::<Value>(&l).unwrap())
        .collect()
}

/// The exported fire log's entries of type `ty`, in order.
pub fn fires_of_type(out: &Path, ty: &str) -> Vec<Value> {
    fire_entries(out).into_iter().filter(|e| e["type"] == ty).collect()
}
