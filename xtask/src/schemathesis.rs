//! The watch API's property-based run: schemathesis (PyPI, pinned, in a
//! venv under `target/toolchains/`) against a live `sentinel-host serve`
//! on a loopback port, bounded in examples and in time.
//!
//! It owns installing the pinned tool, a small data dir and detectors
//! folder under `target/schemathesis/`, starting the server (the debug
//! binary `cargo test` built), running `st` against its `/openapi.json`
//! with the admin token, and stopping the server. `cargo xtask test` runs it
//! beside the tests ([`beside`]): it needs only the debug binary the build
//! made, its budget is wall-clock time, and the tests leave a core idle for
//! much of theirs; its report then goes to a file printed when it ends. It
//! never edits the API or its document: a failure here is a finding in the
//! host.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use xtask::{datagen, guest};

const VERSION: &str = "4.32.5";
const ADMIN_TOKEN: &str = "schemathesis-admin";
/// Examples per operation and the whole run's time budget.
const MAX_EXAMPLES: &str = "10";
const MAX_TIME_S: &str = "120";
/// A fixed seed: the same cases every run, so a failure can be replayed.
const SEED: &str = "20261130";

fn venv(root: &Path) -> Result<PathBuf> {
    let venv = crate::pyvenv::ensure(root, "schemathesis", "schemathesis", VERSION, ("bin/st", &["--version"]))?;
    Ok(venv.join("bin/st"))
}

/// A data dir with a few failures, and the tool_error and cost detectors.
fn fixture(root: &Path, work: &Path) -> Result<(PathBuf, PathBuf)> {
    let data = work.join("data");
    let detectors = work.join("detectors");
    std::fs::create_dir_all(&data)?;
    std::fs::create_dir_all(&detectors)?;
    std::fs::write(data.join("bots.json"), r#"{"bots": [{"id": "bot-x", "name": "Ada"}]}"#)?;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_millis() as i64;
    for (i, tool) in ["alpha", "bravo", "charlie"].iter().enumerate() {
        let id = format!("st-{i}");
        datagen::insert_activity(&data, &datagen::Activity::failed(&id, now - 60_000, "t1", tool, "error: failed"))?;
    }
    // Its own folder, not the e2e tests' (they may be building theirs
    // while this runs beside them).
    let built = root.join("target/schemathesis-detectors");
    if !built.join("tool_error.wasm").exists() || !built.join("cost.wasm").exists() {
        // Both are in Rust: no other toolchain is needed here.
        guest::build_detectors_in(root, &built, &guest::BuildOptions::for_repo(root), &[guest::Lang::Rust])?;
    }
    for name in ["tool_error", "cost"] {
        std::fs::copy(built.join(format!("{name}.wasm")), detectors.join(format!("{name}.wasm")))
            .with_context(|| format!("no built {name}.wasm in {}", built.display()))?;
    }
    Ok((data, detectors))
}

/// Stops the server it holds when dropped.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-TERM", &self.0.id().to_string()]).status();
        let _ = self.0.wait();
    }
}

/// A run on a thread of its own, its report going to a file.
pub struct Beside {
    handle: std::thread::JoinHandle<Result<()>>,
    report: PathBuf,
}

/// Starts the run beside whatever the caller does next.
pub fn beside(root: &Path) -> Beside {
    let report = root.join("target/schemathesis-report.txt");
    let (root, file) = (root.to_owned(), report.clone());
    let handle = std::thread::spawn(move || {
        let out = std::fs::File::create(&file).with_context(|| format!("cannot create {}", file.display()))?;
        run_into(&root, Stdio::from(out.try_clone()?), Stdio::from(out))
    });
    Beside { handle, report }
}

impl Beside {
    /// Waits for the run, prints its report, and gives its result.
    pub fn finish(self) -> Result<()> {
        let result = self.handle.join().map_err(|_| anyhow::anyhow!("the schemathesis thread panicked"))?;
        eprintln!("==> schemathesis against a live sentinel-host serve (docs/watch-api.md), run beside the tests:");
        eprint!("{}", std::fs::read_to_string(&self.report).unwrap_or_default());
        result
    }
}

/// The run, its report on the terminal.
pub fn run(root: &Path) -> Result<()> {
    run_into(root, Stdio::inherit(), Stdio::inherit())
}

fn run_into(root: &Path, stdout: Stdio, stderr: Stdio) -> Result<()> {
    let st = venv(root)?;
    let work = root.join("target/schemathesis");
    if work.exists() {
        std::fs::remove_dir_all(&work)?;
    }
    let (data, detectors) = fixture(root, &work)?;
    let log = work.join("serve.log");
    // The output folder may not be inside a git repository: a scratch one.
    let out = std::env::temp_dir().join(format!("sentinel-schemathesis-{}", std::process::id()));
    let binary = root.join("target/debug/sentinel-host");
    let mut child = Command::new(&binary)
        .arg("serve")
        .arg("--detectors")
        .arg(&detectors)
        .arg("--data-dir")
        .arg(&data)
        .arg("--out")
        .arg(&out)
        .args(["--listen", "127.0.0.1:0", "--interval", "5"])
        .env("WATCH_ADMIN_TOKEN", ADMIN_TOKEN)
        // Its negative cases send wrong tokens on purpose: the per-client
        // limit (429) would leave the admin routes' logic untested.
        .env("WATCH_TOKEN_FAILURES", "1000000")
        // Never the real user cache folder (as for cargo test).
        .env("XDG_CACHE_HOME", root.join("target/test-xdg-cache"))
        // Nor the real user config folder, where the signing key would go.
        .env("XDG_CONFIG_HOME", root.join("target/test-xdg-config"))
        .env_remove("WATCH_DISPATCHER_ENABLED")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .spawn()
        .with_context(|| format!("cannot start {} (built by cargo test)", binary.display()))?;
    let deadline = Instant::now() + Duration::from_secs(60);
    let base = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(rest) = text.split("watch API listening on ").nth(1) {
            break rest.split_whitespace().next().unwrap_or_default().to_owned();
        }
        if Instant::now() > deadline || child.try_wait()?.is_some() {
            let _ = child.kill();
            bail!("sentinel-host serve did not start: {text}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let server = Server(child);
    // Its cache (`.schemathesis/`) goes into the work folder, never the repository.
    let status = Command::new(&st)
        .current_dir(&work)
        .arg("run")
        .arg(format!("{base}/openapi.json"))
        .args([
            "--checks",
            "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance",
        ])
        .args(["--max-examples", MAX_EXAMPLES, "--max-time", MAX_TIME_S, "--seed", SEED, "--no-color"])
        .arg("--header")
        .arg(format!("Authorization: Bearer {ADMIN_TOKEN}"))
        .stdout(stdout)
        .stderr(stderr)
        .status()
        .context("cannot run schemathesis");
    drop(server);
    let _ = std::fs::remove_dir_all(&out);
    if !status?.success() {
        bail!("schemathesis found problems in the watch API (server log: {})", log.display());
    }
    Ok(())
}
