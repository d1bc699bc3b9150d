//! `cargo xtask`: the project's chores.
//!
//! - `build-detectors`: every detector under `detectors/` (Rust, Python,
//!   JavaScript) → `detectors/<name>.wasm`
//! - `new-detector NAME --lang rust|python|js`: a new detector folder that
//!   builds and passes its own replay case
//! - `demo`: build, generate a reference data dir, scan it, show the issues
//! - `test`: the whole suite as CI runs it (format, lints, tests)

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use xtask::{datagen, guest};

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
        /// rust, python or js.
        #[arg(long, default_value = "rust")]
        lang: guest::Lang,
    },
    /// Generate a reference data dir and scan it with every detector.
    Demo {
        /// Where to generate the data dir [default: target/demo/data].
        #[arg(long)]
        data_dir: Option<PathBuf>,
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
    /// Run the whole suite as CI does: fmt, clippy, tests.
    Test,
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
    match cli.command {
        Cmd::BuildDetectors => {
            build_detectors(&root)?;
        }
        Cmd::NewDetector { name, lang } => {
            let dir = xtask::scaffold::new_detector(&root, &name, lang)?;
            let folder = dir.strip_prefix(&root).unwrap_or(&dir).display().to_string();
            println!("created {folder} ({})", lang.as_str());
            println!("next: cargo xtask build-detectors");
            println!(
                "      cargo run -p sentinel-host -- replay --detector detectors/{name}.wasm --cases {folder}/cases"
            );
        }
        Cmd::Demo { data_dir } => demo(&root, data_dir)?,
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
    }
    Ok(())
}

fn build_detectors(root: &Path) -> Result<()> {
    let built = guest::build_detectors(root, &root.join("detectors"))?;
    println!("{:<24} {:<7} {:>10}  sha256", "detector", "lang", "bytes");
    for b in &built {
        println!("{:<24} {:<7} {:>10}  {}", b.name, b.lang.as_str(), b.size, b.sha256);
    }
    println!("{} detectors in {}", built.len(), root.join("detectors").display());
    Ok(())
}

fn cargo(root: &Path) -> Command {
    let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    c.current_dir(root);
    c
}

fn step(what: &str, cmd: &mut Command) -> Result<()> {
    eprintln!("==> {what}");
    let status = cmd.status().with_context(|| format!("cannot start: {what}"))?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}

fn demo(root: &Path, data_dir: Option<PathBuf>) -> Result<()> {
    build_detectors(root)?;
    let data = data_dir.unwrap_or_else(|| root.join("target/demo/data"));
    if data.exists() {
        std::fs::remove_dir_all(&data).with_context(|| format!("cannot clear {}", data.display()))?;
    }
    let truth = datagen::generate(&data, &datagen::DataSpec::default())?;
    eprintln!(
        "==> generated {}: {} activity rows, {} failed tool calls",
        data.display(),
        truth.activity_rows,
        truth.failures.len()
    );
    // Output must live outside the data dir and outside any git repository.
    let out = std::env::temp_dir().join("sentinel-demo-out");
    if out.exists() {
        std::fs::remove_dir_all(&out)?;
    }
    step(
        "sentinel-host run",
        cargo(root)
            .args(["run", "--quiet", "-p", "sentinel-host", "--", "run", "--once", "--detectors"])
            .arg(root.join("detectors"))
            .arg("--data-dir")
            .arg(&data)
            .arg("--out")
            .arg(&out)
            // The cache the build's load check filled: the scan compiles nothing.
            .arg("--cache-dir")
            .arg(guest::BuildOptions::for_repo(root).cache_dir.unwrap_or_else(|| out.join("cache"))),
    )?;
    let issues = std::fs::read_to_string(out.join("issues.jsonl")).context("the scan wrote no issues.jsonl")?;
    println!("\n{} issues in {}:", issues.lines().count(), out.join("issues.jsonl").display());
    for line in issues.lines() {
        let v: serde_json::Value = serde_json::from_str(line)?;
        println!(
            "  {:>3}x  {:<12} {:<8} {:<8} {:<28} {}",
            v["count"],
            v["kind"].as_str().unwrap_or(""),
            v["origin"].as_str().unwrap_or(""),
            v["severity"].as_str().unwrap_or(""),
            v["tool"].as_str().unwrap_or(""),
            v["title"].as_str().unwrap_or("")
        );
    }
    Ok(())
}

fn test(root: &Path) -> Result<()> {
    guest::ensure_wasm_target()?;
    guest::ensure_components(&["rustfmt", "clippy"])?;
    step("cargo fmt --check", cargo(root).args(["fmt", "--all", "--check"]))?;
    step("cargo clippy", cargo(root).args(["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"]))?;
    step("cargo test", cargo(root).args(["test", "--workspace"]))?;
    Ok(())
}
