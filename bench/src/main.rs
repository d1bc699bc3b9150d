//! `sentinel-bench`: runs the benchmark suite and writes its results. Run it
//! through `cargo xtask bench`, which builds the detectors and a release host
//! first.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result};
use clap::Parser;
use sentinel_bench::report::{self, Machine, Report};
use sentinel_bench::suite::{self, Options};

#[derive(Parser)]
#[command(name = "sentinel-bench", about = "sentinel's benchmark: ratios measured in one run")]
struct Args {
    /// Folder of built detector components.
    #[arg(long)]
    detectors: PathBuf,
    /// The release sentinel-host binary (for the peak-memory runs).
    #[arg(long)]
    host: PathBuf,
    /// Target record counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "10000,100000,1000000")]
    sizes: Vec<usize>,
    /// Where data dirs and caches go.
    #[arg(long, default_value = "target/bench")]
    work: PathBuf,
    /// Repetitions of every timed step (default: 5 up to 200k records, then 3).
    #[arg(long)]
    reps: Option<usize>,
    #[arg(long, default_value_t = 256)]
    batch_rows: usize,
    /// Write the JSON results here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write the tables into this Markdown file, between its result markers.
    #[arg(long)]
    markdown: Option<PathBuf>,
    /// A previous JSON result to compare ratios with.
    #[arg(long)]
    compare: Option<PathBuf>,
}

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("sentinel-bench: error: {e}");
        for cause in e.chain().skip(1) {
            eprintln!("  caused by: {cause}");
        }
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<()> {
    let old: Option<Report> = match &args.compare {
        Some(p) if p.exists() => Some(
            serde_json::from_slice(&std::fs::read(p).with_context(|| format!("cannot read {}", p.display()))?)
                .with_context(|| format!("{} is not a benchmark result", p.display()))?,
        ),
        _ => None,
    };
    let opts = Options {
        detectors: args.detectors,
        host: Some(args.host),
        cache: None,
        sizes: args.sizes,
        work: args.work,
        reps: args.reps,
        batch_rows: args.batch_rows,
        limits: sentinel_host::runtime::Limits::default(),
    };
    let started = std::time::Instant::now();
    let mut report = suite::run(&opts, &mut |m| eprintln!("==> [{:>4}s] {m}", started.elapsed().as_secs()))?;
    report.date = today();
    report.git = git_rev();
    report.machine = machine();
    let tables = report.markdown();
    println!("{tables}");
    if let Some(old) = &old {
        println!("Compared with {} ({}):", old.date, old.git);
        for line in report.compare(old) {
            println!("  {line}");
        }
    }
    if let Some(p) = &args.json {
        std::fs::write(p, serde_json::to_string_pretty(&report)? + "\n")
            .with_context(|| format!("cannot write {}", p.display()))?;
    }
    if let Some(p) = &args.markdown {
        let doc = std::fs::read_to_string(p).unwrap_or_default();
        std::fs::write(p, report::splice(&doc, &tables)).with_context(|| format!("cannot write {}", p.display()))?;
    }
    Ok(())
}

/// Today's UTC date, `YYYY-MM-DD` (the status page's calendar).
fn today() -> String {
    let ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
    let mut day = sentinel_host::watch::page::utc(i64::try_from(ms).unwrap_or(i64::MAX));
    day.truncate("YYYY-MM-DD".len());
    day
}

fn git_rev() -> String {
    Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or_else(|| "unknown".into(), |o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
}

fn machine() -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, v)| v.trim().to_owned()))
        .unwrap_or_else(|| std::env::consts::ARCH.to_owned());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let kib: f64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    Machine {
        cpu,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        memory_gib: kib / (1024.0 * 1024.0),
        os: std::env::consts::OS.to_owned(),
    }
}
