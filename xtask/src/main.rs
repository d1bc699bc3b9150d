//! `cargo xtask`: the project's chores.
//!
//! - `build-detectors`: every detector under `detectors/` (Rust, Python,
//!   JavaScript, C) → `detectors/<name>.wasm`
//! - `new-detector NAME --lang rust|python|js|c [--standalone DIR]`: a new
//!   detector folder that builds and passes its own replay case (with
//!   `--standalone`, a project of its own outside the repository)
//! - `demo [--ports]`: build the Rust detectors and the stock sentinels,
//!   generate a reference data dir and a gateway layout, scan them, show the
//!   issues (with `--ports`, then the Python, JavaScript and C ports too)
//! - `test`: the whole suite as CI runs it (format, lints, tests,
//!   schemathesis, the Debian package installed and removed)
//! - `dist [--profile P]`: a tarball and a Debian package of the binary,
//!   the detectors, the man pages, completions and the systemd unit
//! - `bench`: the benchmark (release build) → `docs/benchmarks.md` and `.json`

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use xtask::{datagen, dist, guest, lints};

mod fleet_bench;
mod package_test;
mod pyvenv;
mod schemathesis;

#[derive(Parser)]
#[command(name = "cargo xtask")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Build every detector to detectors/<name>.wasm and check the host accepts it.
    BuildDetectors,
    /// Create detectors/<name>/: a detector that builds, passes its replay case and loads.
    NewDetector {
        /// The detector's name: lowercase letters, digits and _.
        name: String,
        /// rust, python, js or c (c: in this repository only).
        #[arg(long, default_value = "rust")]
        lang: guest::Lang,
        /// Make a project of its own in DIR (new or empty), outside the
        /// workspace, that builds with its language's own commands.
        #[arg(long, value_name = "DIR")]
        standalone: Option<PathBuf>,
    },
    /// Build the Rust detectors and stock sentinels, scan a generated data
    /// dir and a gateway layout with them, and show the issues.
    Demo {
        /// Where to generate the data dir [default: target/demo/data].
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Then build the Python, JavaScript and C ports (python3, npm and
        /// clang are needed) and scan again with them: the same counts.
        #[arg(long)]
        ports: bool,
    },
    /// Generate a reference data dir only.
    GenData {
        dir: PathBuf,
        #[arg(long, default_value_t = 7)]
        seed: u64,
        /// Turns per thread (3 bots x 2 threads each): 12 makes the demo's few hundred rows.
        #[arg(long, default_value_t = 12)]
        turns_per_thread: usize,
    },
    /// Run the whole suite as CI does: fmt, clippy, tests, schemathesis, the package.
    Test,
    /// Build a tarball and a Debian package into target/dist/ (docs: README, "Installing").
    Dist {
        /// The cargo profile the binary is built in: `release` for a real
        /// release; CI packages the `dev` build its tests already made.
        #[arg(long, default_value = "release")]
        profile: String,
    },
    /// Only the package's install test (part of `test`): build it, install
    /// it, run it as the `sentinel` user, remove it.
    PackageTest {
        #[arg(long, default_value = "dev")]
        profile: String,
    },
    /// Only the watch API's schemathesis run (part of `test`), against a live `serve`.
    Schemathesis,
    /// Run the benchmark in a release build and write docs/benchmarks.md and docs/benchmarks.json.
    Bench {
        /// Target record counts, comma-separated [default: 10000,100000,1000000].
        #[arg(long, value_delimiter = ',')]
        sizes: Option<Vec<usize>>,
        /// Repetitions of every timed step [default: 5 up to 200k records, then 3].
        #[arg(long)]
        reps: Option<usize>,
        /// Print the results only; leave docs/ as it is.
        #[arg(long)]
        no_write: bool,
        /// Only the fleet part: 100 000 fires shipped to a local nats-server.
        #[arg(long)]
        fleet_only: bool,
    },
}

fn main() {
    if let Err(e) = run(Cli::parse()) {
        eprintln!("xtask: error: {e}");
        for cause in e.chain().skip(1) {
            eprintln!("  caused by: {cause}");
        }
        std::process::exit(1);
    }
}

fn run(cli: Cli) -> Result<()> {
    let root = guest::repo_root();
    let builds_c = matches!(
        cli.command,
        Cmd::BuildDetectors
            | Cmd::Bench { .. }
            | Cmd::Demo { ports: true, .. }
            | Cmd::Dist { .. }
            | Cmd::PackageTest { .. }
    );
    if builds_c && !cfg!(feature = "c") {
        return again_with_c(&root);
    }
    match cli.command {
        Cmd::BuildDetectors => {
            build_detectors(&root)?;
        }
        Cmd::NewDetector { name, lang, standalone: Some(dir) } => {
            let dir = xtask::scaffold::new_standalone(&root, &name, lang, &dir)?;
            println!("created {} ({}): a standalone detector project", dir.display(), lang.as_str());
            println!("next: its README.md says how to build, replay, inspect and install it");
        }
        Cmd::NewDetector { name, lang, standalone: None } => {
            let dir = xtask::scaffold::new_detector(&root, &name, lang)?;
            let folder = dir.strip_prefix(&root).unwrap_or(&dir).display().to_string();
            println!("created {folder} ({})", lang.as_str());
            println!("next: cargo xtask build-detectors");
            println!(
                "      cargo run -p sentinel-host -- replay --detector detectors/{name}.wasm --cases {folder}/cases"
            );
        }
        Cmd::Demo { data_dir, ports } => demo(&root, data_dir, ports)?,
        Cmd::GenData { dir, seed, turns_per_thread } => {
            let truth = datagen::generate(&dir, &datagen::DataSpec { seed, turns_per_thread, ..Default::default() })?;
            println!(
                "{}: {} activity rows, {} failed tool calls",
                dir.display(),
                truth.activity_rows,
                truth.failures.len()
            );
        }
        Cmd::Test => test(&root)?,
        Cmd::Schemathesis => schemathesis::run(&root)?,
        Cmd::Dist { profile } => {
            let made = dist(&root, &profile)?;
            println!("{}\n{}", made.deb.display(), made.tarball.display());
        }
        Cmd::PackageTest { profile } => package_test::run(&root, &profile)?,
        Cmd::Bench { no_write, fleet_only: true, .. } => bench_fleet(&root, no_write)?,
        Cmd::Bench { sizes, reps, no_write, fleet_only: false } => {
            bench(&root, sizes, reps, no_write)?;
            bench_fleet(&root, no_write)?
        }
    }
    Ok(())
}

/// Runs this same command again from an xtask built with its `c` feature
/// (the C bindings generator, see Cargo.toml), for the commands that build
/// the C detector: so `demo` and `test` never build the generator.
fn again_with_c(root: &Path) -> Result<()> {
    let status = cargo(root)
        .args(["run", "--quiet", "-p", "xtask", "--features", "c", "--"])
        .args(std::env::args_os().skip(1))
        .status()
        .context("cannot run cargo")?;
    if !status.success() {
        std::process::exit(status.code().unwrap_or(1));
    }
    Ok(())
}

fn build_detectors(root: &Path) -> Result<()> {
    let built = guest::build_detectors(root, &root.join("detectors"))?;
    print_built(&built, &root.join("detectors"));
    Ok(())
}

fn print_built(built: &[guest::Built], dir: &Path) {
    println!("{:<24} {:<7} {:>10}  sha256", "detector", "lang", "bytes");
    for b in built {
        println!("{:<24} {:<7} {:>10}  {}", b.name, b.lang.as_str(), b.size, b.sha256);
    }
    println!("{} detectors built into {}", built.len(), dir.display());
}

fn cargo(root: &Path) -> Command {
    let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    c.current_dir(root);
    c
}

fn step(what: &str, cmd: &mut Command) -> Result<()> {
    eprintln!("==> {what}");
    let started = std::time::Instant::now();
    let status = cmd.status().with_context(|| format!("cannot start: {what}"))?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    eprintln!("<== {what}: {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// Clears `dir` when it exists (the demo's folders start empty every run).
fn fresh(dir: &Path) -> Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("cannot clear {}", dir.display()))?;
    }
    Ok(())
}

/// The product first: the Rust detectors and the stock sentinels (cargo
/// alone builds them), the scanner's issues, the gateway's fires; then, with
/// `ports`, the same detectors in Python, JavaScript and C.
fn demo(root: &Path, data_dir: Option<PathBuf>, ports: bool) -> Result<()> {
    let opts = guest::BuildOptions::for_repo(root);
    let detectors = root.join("target/demo/detectors");
    fresh(&detectors)?;
    // The host's binary builds while the detectors do (two target folders,
    // two cargo locks): a core the one leaves idle, the other takes.
    eprintln!("==> cargo build -p sentinel-host, beside the detectors");
    let mut host =
        cargo(root).args(["build", "--quiet", "-p", "sentinel-host"]).spawn().context("cannot start cargo")?;
    let built = guest::build_detectors_in(root, &detectors, &opts, &[guest::Lang::Rust]);
    let host = host.wait().context("cargo build -p sentinel-host")?;
    print_built(&built?, &detectors);
    if !host.success() {
        bail!("cargo build -p sentinel-host failed ({host})");
    }
    let data = data_dir.unwrap_or_else(|| root.join("target/demo/data"));
    fresh(&data)?;
    let truth = datagen::generate(&data, &datagen::DataSpec::default())?;
    eprintln!(
        "==> generated {}: {} activity rows, {} failed tool calls",
        data.display(),
        truth.activity_rows,
        truth.failures.len()
    );
    // Output must live outside the data dir and outside any git repository.
    let out = std::env::temp_dir().join("sentinel-demo-out");
    // Both scans at one time: a wait still running counts the same in each.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_millis() as i64;
    let issues = scan_and_list(root, (&detectors, &data, &out), now, "sentinel-host run")?;
    gateway_demo(root, &detectors)?;
    if !ports {
        println!("\nthe Python, JavaScript and C ports of two detectors: cargo xtask demo --ports");
        return Ok(());
    }
    eprintln!("\n==> the ports: the same detectors in Python, JavaScript and C");
    let others = [guest::Lang::Python, guest::Lang::Js, guest::Lang::C];
    print_built(&guest::build_detectors_in(root, &detectors, &opts, &others)?, &detectors);
    let out = std::env::temp_dir().join("sentinel-demo-ports-out");
    let with_ports = scan_and_list(root, (&detectors, &data, &out), now, "sentinel-host run (with the ports)")?;
    let counts =
        |v: &[serde_json::Value]| v.iter().map(|i| (i["sig"].to_string(), i["count"].to_string())).collect::<Vec<_>>();
    let same = counts(&issues) == counts(&with_ports);
    println!(
        "{}",
        if same {
            "the same issues and counts: an occurrence is counted once, whichever detector reports it"
        } else {
            "the counts differ with the ports: a port does not report what its original does"
        }
    );
    if !same {
        bail!("the ports changed the demo's counts");
    }
    Ok(())
}

/// One scan of `data` with `detectors` into a fresh `out` at `scan_time`,
/// and its issues listed.
fn scan_and_list(
    root: &Path,
    (detectors, data, out): (&Path, &Path, &Path),
    scan_time: i64,
    what: &str,
) -> Result<Vec<serde_json::Value>> {
    fresh(out)?;
    step(
        what,
        cargo(root)
            .args(["run", "--quiet", "-p", "sentinel-host", "--", "run", "--once", "--detectors"])
            .arg(detectors)
            .arg("--data-dir")
            .arg(data)
            .arg("--out")
            .arg(out)
            .arg("--scan-time")
            .arg(scan_time.to_string())
            // The cache the build's load check filled: the scan compiles nothing.
            .arg("--cache-dir")
            .arg(guest::BuildOptions::for_repo(root).cache_dir.unwrap_or_else(|| out.join("cache"))),
    )?;
    let issues = std::fs::read_to_string(out.join("issues.jsonl")).context("the scan wrote no issues.jsonl")?;
    println!("\n{} issues in {}:", issues.lines().count(), out.join("issues.jsonl").display());
    let issues: Vec<serde_json::Value> = issues.lines().map(serde_json::from_str).collect::<Result<_, _>>()?;
    print!("{}", listing(&issues));
    Ok(issues)
}

/// The demo's listing of issues: count, kind, origin, severity, tool, and
/// what tells groups apart. Issues of one kind that share a title are per-bot
/// groups (`queue_wait`, `cost`), so their bot is shown; a bot on any other
/// issue is only its newest occurrence's, so it is left out.
pub fn listing(issues: &[serde_json::Value]) -> String {
    let text = |v: &serde_json::Value, k: &str| v[k].as_str().unwrap_or("").to_owned();
    let mut same_title = std::collections::HashMap::<(String, String), usize>::new();
    for v in issues {
        *same_title.entry((text(v, "kind"), text(v, "title"))).or_default() += 1;
    }
    let mut s = String::new();
    for v in issues {
        let per_bot = same_title[&(text(v, "kind"), text(v, "title"))] > 1;
        let bot = if per_bot { text(v, "botId") } else { String::new() };
        s.push_str(&format!(
            "  {:>3}x  {:<12} {:<8} {:<8} {:<28} {:<8} {}{}\n",
            v["count"],
            text(v, "kind"),
            text(v, "origin"),
            text(v, "severity"),
            text(v, "tool"),
            bot,
            text(v, "title"),
            if v["probation"] == true { "  (probation)" } else { "" }
        ));
    }
    s
}

/// Installs Debian's `package` with apt-get (on Linux) when `tool` is not
/// on `PATH`: the tests drive these real programs.
pub(crate) fn ensure_debian_tool(tool: &str, package: &str, why: &str) -> Result<()> {
    if !cfg!(target_os = "linux") || Command::new(tool).arg("--version").output().is_ok() {
        return Ok(());
    }
    eprintln!("installing {tool} with apt-get (package {package})");
    let install = || Command::new("apt-get").args(["install", "-y", "--no-install-recommends", package]).status();
    let ok = install().is_ok_and(|s| s.success())
        || (Command::new("apt-get").arg("update").status().is_ok_and(|s| s.success())
            && install().is_ok_and(|s| s.success()));
    if !ok {
        bail!("cannot install {tool}: run `apt-get install {package}` ({why})");
    }
    Ok(())
}

/// The stock sentinels on a generated gateway-shaped layout: a quiet scan
/// (the baseline), then the gateway stirs and the next scan, seven hours
/// later, fires each sentinel whose condition now holds.
fn gateway_demo(root: &Path, detectors: &Path) -> Result<()> {
    use std::sync::atomic::Ordering;
    let dir = root.join("target/demo/gateway");
    fresh(&dir)?;
    let (url, depth) = xtask::gateway::serve_depth()?;
    depth.store(12, Ordering::SeqCst);
    let yaml = xtask::gateway::generate(&dir, &url)?;
    eprintln!("\n==> generated a gateway layout in {} (config: {})", dir.display(), yaml.display());
    let out = std::env::temp_dir().join("sentinel-demo-gateway-out");
    fresh(&out)?;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_millis() as i64;
    let scan = |what: &str, at: i64| {
        step(
            what,
            cargo(root)
                .args(["run", "--quiet", "-p", "sentinel-host", "--", "run", "--once", "--no-fast-path", "--detectors"])
                .arg(detectors)
                .arg("--data-dir")
                .arg(&dir)
                .arg("--out")
                .arg(&out)
                .arg("--scan-time")
                .arg(at.to_string())
                .arg("--cache-dir")
                .arg(guest::BuildOptions::for_repo(root).cache_dir.unwrap_or_else(|| out.join("cache")))
                .env("SENTINELS_CONFIG_PATH", &yaml),
        )
    };
    scan("sentinel-host run (the gateway, quiet: the baseline)", now)?;
    xtask::gateway::stir(&dir)?;
    depth.store(75, Ordering::SeqCst);
    scan("sentinel-host run (7 h later: the gateway stirred)", now + 7 * 3_600_000)?;
    let issues = std::fs::read_to_string(out.join("issues.jsonl")).context("the scan wrote no issues.jsonl")?;
    println!("\n{} stock-sentinel issues in {}:", issues.lines().count(), out.join("issues.jsonl").display());
    for line in issues.lines() {
        let v: serde_json::Value = serde_json::from_str(line)?;
        println!(
            "  {:>3}x  {:<26} {:<7} {:<24} {}",
            v["count"],
            v["kind"].as_str().unwrap_or(""),
            v["severity"].as_str().unwrap_or(""),
            format!(
                "{}:{}",
                v["evidenceRef"]["source"].as_str().unwrap_or(""),
                v["evidenceRef"]["id"].as_str().unwrap_or("")
            ),
            v["title"].as_str().unwrap_or("")
        );
    }
    Ok(())
}

/// The service tests check the generated systemd units with
/// `systemd-analyze verify` (and fail without it).
fn ensure_systemd_analyze() -> Result<()> {
    ensure_debian_tool("systemd-analyze", "systemd", "the service tests need it")
}

/// The real-errors test (tests/e2e/real_errors.rs) runs `sqlite3` on a
/// missing table and `git` outside a repository; tests/e2e/logrotate.rs
/// rotates with `logrotate`.
fn ensure_real_programs() -> Result<()> {
    ensure_debian_tool("sqlite3", "sqlite3", "the real-errors test needs it")?;
    ensure_debian_tool("git", "git", "the real-errors test needs it")?;
    ensure_debian_tool("script", "bsdutils", "the progress-line test runs the binary on its pseudo-terminal")?;
    ensure_debian_tool("logrotate", "logrotate", "the events source's rotation test rotates with it")
}

/// The fleet tests (tests/e2e/fleet.rs) start a real `nats-server` and
/// check the stream with an independent consumer, nats-py in a venv.
fn ensure_fleet_tools(root: &Path) -> Result<()> {
    ensure_debian_tool("nats-server", "nats-server", "the fleet tests ship into it")?;
    pyvenv::ensure(root, "nats-py", "nats-py", NATS_PY, ("bin/python", &["-c", "import nats"]))?;
    Ok(())
}

/// The nats-py the fleet tests' consumer is checked with.
const NATS_PY: &str = "2.16.0";

/// The suite's cargo command: linted, and without incremental compilation,
/// which saves nothing on a first build and costs a quarter of our crates'
/// compile time (the host crate: 36 s of CPU against 47 s) and gigabytes of
/// `target/debug/incremental`. A rerun with nothing changed compiles nothing
/// either way.
fn linted(cmd: &mut Command) -> &mut Command {
    lints::linted(cmd).env("CARGO_INCREMENTAL", "0")
}

fn test(root: &Path) -> Result<()> {
    guest::ensure_wasm_target()?;
    guest::ensure_components(&["rustfmt", "clippy"])?;
    ensure_systemd_analyze()?;
    ensure_real_programs()?;
    ensure_fleet_tools(root)?;
    // The watch API's status page is loaded in headless Chromium (tests/e2e/watch.rs).
    ensure_debian_tool("chromium", "chromium", "the status page test needs it")?;
    // `/metrics` is scraped by a real Prometheus and linted by its promtool (tests/e2e/metrics.rs).
    ensure_debian_tool("prometheus", "prometheus", "the metrics test scrapes serve with it")?;
    step("cargo fmt --check", cargo(root).args(["fmt", "--all", "--check"]))?;
    // The lints and the test build are one build: the workspace's own crates
    // are compiled by clippy-driver (every target, -D warnings), the
    // dependencies once by rustc for both (lints::linted).
    step(
        "cargo test --no-run, linted (clippy -D warnings on every workspace target)",
        linted(cargo(root).args(["test", "--workspace", "--all-targets", "--no-run"])),
    )?;
    // Tests never write into the real user cache folder: a scan left to the
    // default cache uses this one (the e2e harness sets it too). The same
    // wrapper as the build, so nothing is compiled again.
    let tests = |what: &str, args: &[&str]| {
        step(
            what,
            linted(cargo(root).args(["test", "--workspace"]).args(args))
                .env("XDG_CACHE_HOME", root.join("target/test-xdg-cache")),
        )
    };
    // The watch API's schemathesis run needs only the binary just built:
    // it runs beside the tests, and is waited for even when they fail (its
    // server is stopped before we return).
    let fuzz = schemathesis::beside(root);
    let tested = tests("cargo test", &["--all-targets"]).and_then(|()| tests("cargo test --doc", &["--doc"]));
    let fuzzed = fuzz.finish();
    tested?;
    fuzzed?;
    // The package of the build the tests used, installed as a user would.
    package_test::run(root, "dev")
}

/// The binary built in `profile`, every detector built, both packed
/// (target/dist/).
fn dist(root: &Path, profile: &str) -> Result<dist::Made> {
    step(
        &format!("cargo build -p sentinel-host --profile {profile}"),
        cargo(root).args(["build", "-p", "sentinel-host", "--profile", profile]),
    )?;
    let detectors = root.join("target/dist/detectors");
    guest::build_detectors(root, &detectors)?;
    let inputs = dist::Inputs { binary: dist::binary_of(root, profile), detectors, profile: profile.to_owned() };
    dist::package(&inputs, &root.join("target/dist/package"))
}

fn bench(root: &Path, sizes: Option<Vec<usize>>, reps: Option<usize>, no_write: bool) -> Result<()> {
    ensure_debian_tool("sqlite3", "sqlite3", "the benchmark's floor under the raw read needs it")?;
    build_detectors(root)?;
    // The canonical-ABI peers of the shipped Rust detectors: core modules,
    // built as the detectors are (sentinel_bench::peer::build builds the same).
    let peers = guest::build_core_modules(&root.join("bench/peer"), &root.join("target/bench-peer"))?;
    let largest = sizes.as_ref().and_then(|s| s.iter().max().copied()).unwrap_or(1_000_000);
    step(
        "cargo build --release (host and benchmark)",
        cargo(root).args(["build", "--release", "-p", "sentinel-host", "-p", "sentinel-bench"]),
    )?;
    let release = root.join("target/release");
    let mut cmd = Command::new(release.join("sentinel-bench"));
    cmd.current_dir(root)
        .arg("--detectors")
        .arg(root.join("detectors"))
        .arg("--peers")
        .arg(peers)
        .arg("--host")
        .arg(release.join("sentinel-host"))
        .arg("--work")
        .arg(root.join("target/bench"))
        .arg("--compare")
        .arg(root.join("docs/benchmarks.json"));
    if let Some(sizes) = sizes {
        cmd.arg("--sizes").arg(sizes.iter().map(ToString::to_string).collect::<Vec<_>>().join(","));
    }
    if let Some(reps) = reps {
        cmd.arg("--reps").arg(reps.to_string());
    }
    if !no_write {
        cmd.arg("--json").arg(root.join("docs/benchmarks.json")).arg("--markdown").arg(root.join("docs/benchmarks.md"));
    }
    step("sentinel-bench", &mut cmd)?;
    // The watch API's read latency while a scan of the largest data set runs,
    // written beside the runner's results (its own markers in the page, the
    // `watchLoad` key of the JSON).
    let mut load = Command::new(release.join("sentinel-watch-load"));
    load.current_dir(root)
        .arg("--host")
        .arg(release.join("sentinel-host"))
        .arg("--detectors")
        .arg(root.join("detectors"))
        .arg("--work")
        .arg(root.join("target/bench"))
        .arg("--records")
        .arg(largest.to_string());
    // A fast sentinel's latency from a file landing in its inbox to its
    // fire in the log, in the long-running mode.
    let mut latency = Command::new(release.join("sentinel-fire-latency"));
    latency
        .current_dir(root)
        .arg("--host")
        .arg(release.join("sentinel-host"))
        .arg("--detectors")
        .arg(root.join("detectors"));
    latency.arg("--work").arg(root.join("target/bench"));
    for c in [&mut load, &mut latency] {
        if !no_write {
            c.arg("--json")
                .arg(root.join("docs/benchmarks.json"))
                .arg("--markdown")
                .arg(root.join("docs/benchmarks.md"));
        }
    }
    step("sentinel-watch-load", &mut load)?;
    step("sentinel-fire-latency", &mut latency)
}

/// Fires the fleet bench ships, and the `in_flight` values it tries.
const FLEET_FIRES: usize = 100_000;
const FLEET_IN_FLIGHT: [usize; 2] = [1, 64];

/// `cargo xtask bench`'s fleet part (docs/benchmarks.md, docs/fleet.md).
fn bench_fleet(root: &Path, no_write: bool) -> Result<()> {
    ensure_debian_tool("nats-server", "nats-server", "the fleet bench ships to a local one")?;
    build_detectors(root)?;
    // The same packages as the runner's build, so their features (and the
    // release artifacts) are shared.
    step(
        "cargo build --release (host)",
        cargo(root).args([
            "build",
            "--release",
            "-p",
            "sentinel-host",
            "-p",
            "sentinel-bench",
            "--bin",
            "sentinel-host",
        ]),
    )?;
    eprintln!("==> fleet: {FLEET_FIRES} fires to a local nats-server");
    let host = root.join("target/release/sentinel-host");
    let setup = fleet_bench::Setup {
        host: &host,
        detectors: &root.join("detectors"),
        work: &std::env::temp_dir().join("sentinel-fleet-bench"),
        fires: FLEET_FIRES,
    };
    let result = fleet_bench::run(&setup, &FLEET_IN_FLIGHT)?;
    print!("{}", result.markdown());
    if !no_write {
        result.write(&root.join("docs/benchmarks.md"), &root.join("docs/benchmarks.json"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn per_bot_groups_with_one_title_show_their_bot() {
        let issue = |kind: &str, bot: &str, title: &str| serde_json::json!({"count": 3, "kind": kind, "origin": "harness", "severity": "high", "botId": bot, "title": title});
        let out = super::listing(&[
            issue("queue_wait", "bot-01", "waited more than 5 min"),
            issue("queue_wait", "bot-02", "waited more than 5 min"),
            issue("tool_error", "bot-03", "no layer <n>"),
        ]);
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].contains("bot-01") && lines[1].contains("bot-02"), "{out}");
        assert!(!lines[2].contains("bot-03"), "a bot that does not group the issue is not shown: {out}");
    }
}
