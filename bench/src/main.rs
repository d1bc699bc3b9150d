//! `sentinel-bench`: runs the benchmark suite and writes its results. Run it
//! through `cargo xtask bench`, which builds the detectors and a release host
//! first.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Parser;
use sentinel_bench::provenance::{git_rev, machine, today};
use sentinel_bench::report::{self, Report};
use sentinel_bench::suite::{self, Options};

#[derive(Parser)]
#[command(name = "sentinel-bench", about = "sentinel's benchmark: ratios measured in one run")]
struct Args {
    /// Folder of built detector components.
    #[arg(long)]
    detectors: PathBuf,
    /// Folder of built core-module peers (`peer_<detector>.wasm`), for the
    /// detectors table's peer columns; without it they read `–`.
    #[arg(long)]
    peers: Option<PathBuf>,
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
    /// Run only the component-vs-native table and print it (writes nothing).
    #[arg(long)]
    detectors_only: bool,
    /// With --detectors-only: these detectors (default: every one with a native
    /// twin); with --read-only: these sources (default: every one). A name
    /// that is neither is refused.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Run only the raw read, source by source beside the floor's part for
    /// the same data, and print it (writes nothing).
    #[arg(long)]
    read_only: bool,
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
        peers: args.peers,
        host: Some(args.host),
        cache: None,
        sizes: args.sizes,
        work: args.work,
        reps: args.reps,
        batch_rows: args.batch_rows,
        limits: sentinel_host::runtime::Limits::default(),
    };
    let started = std::time::Instant::now();
    if args.detectors_only {
        let sizes = suite::detectors_only(&opts, &args.only, &mut |m| {
            eprintln!("==> [{:>4}s] {m}", started.elapsed().as_secs())
        })?;
        print!("{}", report::detector_lines(&sizes));
        return Ok(());
    }
    if args.read_only {
        let sizes =
            suite::read_only(&opts, &args.only, &mut |m| eprintln!("==> [{:>4}s] {m}", started.elapsed().as_secs()))?;
        print!("{}", report::read_lines(&sizes));
        return Ok(());
    }
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
