//! `sentinel-fire-latency`: a fast sentinel's latency from a file landing in
//! its inbox to its fire in the log. A release `sentinel-host run
//! --interval 3600` (the long-running mode: nothing ticks within the
//! measurement, only the inbox watcher's kicks scan) with file-inbox-watch
//! bound to an inbox; files land one at a time, each the way a delivery
//! lands it, and each one's time runs from that moment to its fire line in
//! `fires-*.ndjson` (polled every millisecond or two). Reports p50 / p99 /
//! max per delivery style, and with `--json` / `--markdown` writes them into
//! the benchmark's page (`cargo xtask bench` does).
//!
//! It owns the measurement and its figures only; it writes only under its
//! own folder in the temporary folder (removed after a run that ends well)
//! and the detector cache under `--work`. By hand:
//! `sentinel-fire-latency --host target/release/sentinel-host --detectors detectors`.

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use sentinel_bench::fire_latency::{Delivery, FireLatency};
use sentinel_bench::provenance;
use sentinel_bench::stats::{ms, percentile};

#[derive(Parser)]
#[command(name = "sentinel-fire-latency", about = "a fast sentinel's latency from a file landing to its fire")]
struct Args {
    /// The release sentinel-host binary.
    #[arg(long)]
    host: PathBuf,
    /// Folder of built detector components (file_inbox_watch.wasm is used).
    #[arg(long)]
    detectors: PathBuf,
    /// Where the detector cache goes (`cache/` under it).
    #[arg(long, default_value = "target/bench")]
    work: PathBuf,
    /// Files delivered by a rename into the inbox.
    #[arg(long, default_value_t = 100)]
    renamed: usize,
    /// Files written in place in the inbox.
    #[arg(long, default_value_t = 10)]
    in_place: usize,
    /// Also keep the result under `fireLatency` in this JSON file (docs/benchmarks.json).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Also write the table into this Markdown file, between its fire-latency markers.
    #[arg(long)]
    markdown: Option<PathBuf>,
}

/// The directory source's default `settle` (what the run uses).
const SETTLE_MS: u64 = 500;
/// The longest one fire may take before the run gives up.
const BOUND: Duration = Duration::from_secs(30);
/// The pause after each fire, so the next file lands on a quiet sentinel
/// (the kick's folded scan, if any, has ended).
const QUIET: Duration = Duration::from_millis(300);

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("sentinel-fire-latency: error: {e:#}");
        std::process::exit(1);
    }
}

/// The run's folders: the data dir with its inbox, a staging folder beside
/// it (the same file system, so a rename is a rename), the output folder.
struct Folders {
    root: PathBuf,
    inbox: PathBuf,
    staging: PathBuf,
    out: PathBuf,
}

/// In the temporary folder: an output folder inside a git repository is refused.
fn folders() -> Result<Folders> {
    let root = std::env::temp_dir().join(format!("sentinel-fire-latency-{}", std::process::id()));
    let f = Folders { inbox: root.join("data/inbox"), staging: root.join("staging"), out: root.join("out"), root };
    for dir in [&f.inbox, &f.staging, &f.root.join("detectors")] {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    Ok(f)
}

/// Starts the long-running mode; its summaries (one JSON line a scan) come
/// through the receiver.
fn start(args: &Args, f: &Folders) -> Result<(std::process::Child, mpsc::Receiver<String>)> {
    let detectors = f.root.join("detectors");
    std::fs::copy(args.detectors.join("file_inbox_watch.wasm"), detectors.join("file_inbox_watch.wasm"))
        .with_context(|| format!("no file_inbox_watch.wasm in {}", args.detectors.display()))?;
    let yaml = f.root.join("sentinels.yaml");
    std::fs::write(
        &yaml,
        "sources:\n  directory:\n    - { name: inbox, path: inbox }\nsentinels:\n  file-inbox-watch:\n    roles: { inbox: inbox }\n",
    )?;
    let mut child = Command::new(&args.host)
        .arg("run")
        .arg("--detectors")
        .arg(&detectors)
        .arg("--data-dir")
        .arg(f.root.join("data"))
        .arg("--out")
        .arg(&f.out)
        .arg("--cache-dir")
        .arg(std::fs::canonicalize(&args.work)?.join("cache"))
        .args(["--interval", "3600", "--json"])
        .env("SENTINELS_CONFIG_PATH", &yaml)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(f.root.join("run.log"))?)
        .spawn()
        .context("cannot start sentinel-host run")?;
    let stdout = child.stdout.take().context("no stdout")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    Ok((child, rx))
}

/// The file-inbox-watch occurrence fires in the log's complete lines.
fn fires(out: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(out) else { return 0 };
    entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("fires-"))
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .map(|text| {
            text.split_inclusive('\n')
                .filter(|l| l.ends_with('\n'))
                .filter(|l| l.contains("\"detector\":\"file_inbox_watch\"") && l.contains("\"type\":\"occurrence\""))
                .count()
        })
        .sum()
}

/// Lands `n` files with `land` (which returns when the file landed), one at
/// a time, and times each one to its fire; `seen` is the fires so far.
fn measure(
    out: &Path,
    n: usize,
    seen: &mut usize,
    mut land: impl FnMut(usize) -> Result<Instant>,
) -> Result<Vec<Duration>> {
    let mut times = Vec::with_capacity(n);
    for i in 0..n {
        let landed = land(i)?;
        while fires(out) <= *seen {
            if landed.elapsed() > BOUND {
                bail!("file {i}: no fire within {} s", BOUND.as_secs());
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        times.push(landed.elapsed());
        *seen += 1;
        std::thread::sleep(QUIET);
    }
    Ok(times)
}

fn row(delivery: &str, times: &[Duration]) -> Delivery {
    let mut sorted: Vec<f64> = times.iter().map(|t| ms(*t)).collect();
    sorted.sort_by(f64::total_cmp);
    let shown: Vec<String> = sorted.iter().map(|t| format!("{t:.0}")).collect();
    eprintln!("==> {delivery}, ms, sorted: {}", shown.join(" "));
    Delivery {
        delivery: delivery.to_owned(),
        files: times.len(),
        p50_ms: ms(percentile(times, 50.0)),
        p99_ms: ms(percentile(times, 99.0)),
        max_ms: ms(percentile(times, 100.0)),
    }
}

fn run(args: Args) -> Result<()> {
    std::fs::create_dir_all(&args.work)?;
    let f = folders()?;
    let (mut child, summaries) = start(&args, &f)?;
    summaries.recv_timeout(Duration::from_secs(120)).context("no first scan within 120 s")?;
    eprintln!("==> {} files renamed into the inbox, then {} written in place", args.renamed, args.in_place);
    let mut seen = 0;
    let body = |i: usize| format!("{{\"order\":{i},\"lines\":[\"{}\"]}}\n", "x".repeat(200));
    let renamed = measure(&f.out, args.renamed, &mut seen, |i| {
        let (staged, landed) = (f.staging.join(format!("order-{i}.json")), f.inbox.join(format!("order-{i}.json")));
        std::fs::write(&staged, body(i))?;
        let t = Instant::now();
        std::fs::rename(&staged, &landed)?;
        Ok(t)
    })?;
    let in_place = measure(&f.out, args.in_place, &mut seen, |i| {
        let t = Instant::now();
        std::fs::write(f.inbox.join(format!("written-{i}.json")), body(i))?;
        Ok(t)
    })?;
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&f.root);
    let result = FireLatency {
        date: provenance::today(),
        git: provenance::git_rev(),
        settle_ms: SETTLE_MS,
        deliveries: vec![
            row("renamed into the inbox (written beside it first)", &renamed),
            row("written in place in the inbox", &in_place),
        ],
    };
    println!("\n{}", result.markdown());
    if let Some(json) = &args.json {
        result.write_json(json)?;
    }
    if let Some(markdown) = &args.markdown {
        result.write_markdown(markdown)?;
    }
    Ok(())
}
