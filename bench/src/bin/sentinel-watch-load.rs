//! `sentinel-watch-load`: the watch API's read latency while the sentinel
//! scans. A bounded load on loopback: a few clients of our own (one
//! connection per request, as a browser or a poller would), for as long as
//! one full scan of the data set takes, against a release
//! `sentinel-host serve` whose ledger already holds that data set's fires
//! and issues. Reports p50 / p99 / max per read endpoint, and with `--json` /
//! `--markdown` writes them into the benchmark's page (`cargo xtask bench` does).
//!
//! It owns the load and its figures only; the data dirs are the benchmark's
//! (`sentinel_bench::data`). Run it through `cargo xtask bench` or by hand:
//! `sentinel-watch-load --host target/release/sentinel-host --detectors detectors --records 1000000`.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use sentinel_bench::stats::{ms, percentile};
use sentinel_bench::watch_load::{Endpoint, WatchLoad};
use sentinel_bench::{data, provenance};

#[derive(Parser)]
#[command(name = "sentinel-watch-load", about = "the watch API's read latency while a scan runs")]
struct Args {
    /// The release sentinel-host binary.
    #[arg(long)]
    host: PathBuf,
    /// Folder of built detector components (the five Rust scanner detectors are used).
    #[arg(long)]
    detectors: PathBuf,
    /// Records in the data set.
    #[arg(long, default_value_t = 1_000_000)]
    records: usize,
    /// Concurrent clients.
    #[arg(long, default_value_t = 2)]
    clients: usize,
    /// Where data dirs and caches go.
    #[arg(long, default_value = "target/bench")]
    work: PathBuf,
    /// The longest the load runs, in seconds, whether or not the scan ended.
    #[arg(long, default_value_t = 900)]
    max_seconds: u64,
    /// Also keep the result under `watchLoad` in this JSON file (docs/benchmarks.json).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Also write the table into this Markdown file, between its watch-load markers.
    #[arg(long)]
    markdown: Option<PathBuf>,
}

/// The reads under load; `/v1/chain` and `/` verify the whole fire log
/// when it changed, and answer from the kept verification while it did not.
const ENDPOINTS: &[&str] = &[
    "/v1/sentinels",
    "/v1/fires?limit=50",
    "/v1/issues?limit=50",
    "/v1/gates",
    "/v1/public-key",
    "/v1/chain",
    "/",
    "/v1/fires?limit=50&sentinel=tool_error",
];
const SCANNERS: &[&str] = &["tool_error", "turn_stop", "queue_wait", "cost", "retry_loop"];

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("sentinel-watch-load: error: {e:#}");
        std::process::exit(1);
    }
}

/// One GET with its own connection; the status code.
fn get(addr: &str, path: &str) -> Result<u16> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")?;
    let mut body = Vec::new();
    s.read_to_end(&mut body)?;
    let head = String::from_utf8_lossy(&body[..body.len().min(16)]).into_owned();
    head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).context("no status line")
}

fn host(args: &Args, sub: &str) -> Command {
    let mut c = Command::new(&args.host);
    c.arg(sub);
    c
}

fn run(args: Args) -> Result<()> {
    std::fs::create_dir_all(&args.work)?;
    let set = data::prepare(&args.work, args.records)?;
    let detectors = args.work.join("watch-load-detectors");
    std::fs::create_dir_all(&detectors)?;
    for name in SCANNERS {
        std::fs::copy(args.detectors.join(format!("{name}.wasm")), detectors.join(format!("{name}.wasm")))
            .with_context(|| format!("no {name}.wasm in {}", args.detectors.display()))?;
    }
    let cache = std::fs::canonicalize(&args.work)?.join("cache");
    let out = std::env::temp_dir().join(format!("sentinel-watch-load-{}", std::process::id()));
    let location = |c: &mut Command| {
        c.arg("--data-dir").arg(&set.dir).arg("--out").arg(&out);
    };
    // A ledger that already holds the data set's fires and issues, then its
    // positions cleared: the served scan reads every record again.
    eprintln!("==> a first scan of {} records fills the ledger", set.records);
    let mut first = host(&args, "run");
    first.args(["--once", "--scan-timeout", "0"]).arg("--detectors").arg(&detectors).arg("--cache-dir").arg(&cache);
    location(&mut first);
    if !first.stdout(Stdio::null()).status()?.success() {
        bail!("the first scan failed");
    }
    let mut reset = host(&args, "reset");
    location(&mut reset);
    if !reset.stdout(Stdio::null()).status()?.success() {
        bail!("reset failed");
    }
    let log = out.with_extension("log");
    let mut serve = host(&args, "serve");
    serve.arg("--detectors").arg(&detectors).arg("--cache-dir").arg(&cache);
    location(&mut serve);
    let mut child = serve
        .args(["--listen", "127.0.0.1:0", "--interval", "3600", "--no-fast-path", "--scan-timeout", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .spawn()?;
    let text = || std::fs::read_to_string(&log).unwrap_or_default();
    let started = Instant::now();
    let addr = loop {
        if let Some(rest) = text().split("watch API listening on http://").nth(1) {
            break rest.split_whitespace().next().unwrap_or_default().to_owned();
        }
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            bail!("serve did not start: {}", text());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    eprintln!("==> {} clients read {addr} while the served scan reads {} records", args.clients, set.records);
    let done = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..args.clients)
        .map(|i| {
            let (addr, done) = (addr.clone(), Arc::clone(&done));
            std::thread::spawn(move || {
                let mut lat: Vec<Vec<Duration>> = vec![Vec::new(); ENDPOINTS.len()];
                let mut errors = 0u64;
                let mut n = i;
                while !done.load(Ordering::SeqCst) {
                    let e = n % ENDPOINTS.len();
                    let t = Instant::now();
                    match get(&addr, ENDPOINTS[e]) {
                        Ok(200) => lat[e].push(t.elapsed()),
                        _ => errors += 1,
                    }
                    n += 1;
                }
                (lat, errors)
            })
        })
        .collect();
    let bound = Duration::from_secs(args.max_seconds);
    while !text().contains("scan done") && started.elapsed() < bound {
        std::thread::sleep(Duration::from_millis(20));
    }
    let scan_s = started.elapsed().as_secs_f64();
    done.store(true, Ordering::SeqCst);
    let mut lat: Vec<Vec<Duration>> = vec![Vec::new(); ENDPOINTS.len()];
    let mut errors = 0;
    for c in clients {
        let (l, e) = c.join().map_err(|_| anyhow::anyhow!("a client panicked"))?;
        for (all, mine) in lat.iter_mut().zip(l) {
            all.extend(mine);
        }
        errors += e;
    }
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let _ = child.wait();
    let scanned = text().contains("scan done");
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_file(&log);
    let result = WatchLoad {
        date: provenance::today(),
        git: provenance::git_rev(),
        records: set.records as u64,
        clients: args.clients,
        scan_s,
        scanned,
        errors,
        endpoints: endpoints(&lat),
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

/// p50 / p99 / max per endpoint, then over all reads.
fn endpoints(lat: &[Vec<Duration>]) -> Vec<Endpoint> {
    let row = |name: String, l: &[Duration]| Endpoint {
        endpoint: name,
        requests: l.len(),
        p50_ms: ms(percentile(l, 50.0)),
        p99_ms: ms(percentile(l, 99.0)),
        max_ms: ms(percentile(l, 100.0)),
    };
    let mut out: Vec<Endpoint> = ENDPOINTS.iter().zip(lat).map(|(e, l)| row(format!("`GET {e}`"), l)).collect();
    let all: Vec<Duration> = lat.iter().flatten().copied().collect();
    out.push(row("all reads".into(), &all));
    out
}
