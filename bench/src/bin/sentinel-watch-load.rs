//! `sentinel-watch-load`: the watch API's read latency while the sentinel
//! scans, and over big fire logs. A bounded load on loopback: a few clients
//! of our own (one connection per request, as a browser or a poller would),
//! first for as long as one full scan of the data set takes, against a
//! release `sentinel-host serve` whose ledger already holds that data set's
//! fires and issues; then, with nothing scanning, for `--log-seconds` over
//! output folders whose log holds each of `--log-sizes` fires
//! ([`sentinel_bench::fire_log`]), after timing the one full verification
//! the first `/v1/chain` makes. Reports p50 / p99 / max per read endpoint,
//! and with `--json` / `--markdown` writes them into the benchmark's page
//! (`cargo xtask bench` does).
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
use sentinel_bench::watch_load::{Endpoint, LogLoad, WatchLoad};
use sentinel_bench::{data, fire_log, provenance};

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
    /// Fire-log sizes the reads are measured over with no scan running
    /// (logs made through the ledger, kept in the temporary folder for the next run).
    #[arg(long, value_delimiter = ',', default_value = "100000,1000000")]
    log_sizes: Vec<u64>,
    /// Seconds of reads over each log.
    #[arg(long, default_value_t = 20)]
    log_seconds: u64,
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
/// The reads over a big log: the chain's verification and the status page
/// (kept between requests while the log is unchanged), a page of the rare
/// sentinel's fires (all at the log's start), of the busy one's, and of
/// every fire.
const LOG_ENDPOINTS: &[&str] = &[
    "/v1/chain",
    "/",
    "/v1/fires?limit=50&sentinel=cost",
    "/v1/fires?limit=50&sentinel=tool_error",
    "/v1/fires?limit=50",
];

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

/// A running `serve`: the process, its address, its log file.
struct Served {
    child: std::process::Child,
    addr: String,
    log: PathBuf,
}

impl Served {
    fn text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM, then waits for it.
    fn stop(mut self) {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// Starts `serve` (`serve` is the command with its folders and flags) and
/// waits for its address.
fn start(mut serve: Command, log: PathBuf) -> Result<Served> {
    let child = serve
        .args(["--listen", "127.0.0.1:0", "--interval", "3600", "--scan-timeout", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .spawn()?;
    let mut served = Served { child, addr: String::new(), log };
    let started = Instant::now();
    loop {
        if let Some(rest) = served.text().split("watch API listening on http://").nth(1) {
            served.addr = rest.split_whitespace().next().unwrap_or_default().to_owned();
            return Ok(served);
        }
        if started.elapsed() > Duration::from_secs(60) {
            let text = served.text();
            served.stop();
            bail!("serve did not start: {text}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Latencies per endpoint of `endpoints` and the failures, from `clients`
/// reading in turn until `done` is set.
type Latencies = (Vec<Vec<Duration>>, u64);

/// Starts `clients` reading `endpoints` of `addr` in turn until `done`;
/// joining the handles gives each one's [`Latencies`].
fn readers(
    addr: &str,
    endpoints: &'static [&'static str],
    clients: usize,
    done: &Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<Latencies>> {
    (0..clients)
        .map(|i| {
            let (addr, done) = (addr.to_owned(), Arc::clone(done));
            std::thread::spawn(move || {
                let mut lat: Vec<Vec<Duration>> = vec![Vec::new(); endpoints.len()];
                let mut errors = 0u64;
                let mut n = i;
                while !done.load(Ordering::SeqCst) {
                    let e = n % endpoints.len();
                    let t = Instant::now();
                    match get(&addr, endpoints[e]) {
                        Ok(200) => lat[e].push(t.elapsed()),
                        _ => errors += 1,
                    }
                    n += 1;
                }
                (lat, errors)
            })
        })
        .collect()
}

/// Joins the readers: every client's latencies per endpoint, and the failures.
fn joined(handles: Vec<std::thread::JoinHandle<Latencies>>, endpoints: usize) -> Result<Latencies> {
    let mut lat: Vec<Vec<Duration>> = vec![Vec::new(); endpoints];
    let mut errors = 0;
    for c in handles {
        let (l, e) = c.join().map_err(|_| anyhow::anyhow!("a client panicked"))?;
        for (all, mine) in lat.iter_mut().zip(l) {
            all.extend(mine);
        }
        errors += e;
    }
    Ok((lat, errors))
}

fn copy_detectors(args: &Args, names: &[&str], into: &std::path::Path) -> Result<()> {
    std::fs::create_dir_all(into)?;
    for name in names {
        std::fs::copy(args.detectors.join(format!("{name}.wasm")), into.join(format!("{name}.wasm")))
            .with_context(|| format!("no {name}.wasm in {}", args.detectors.display()))?;
    }
    Ok(())
}

/// The reads while the served scan reads the data set again: the result
/// without its logs.
fn scan_load(args: &Args) -> Result<WatchLoad> {
    let set = data::prepare(&args.work, args.records)?;
    let detectors = args.work.join("watch-load-detectors");
    copy_detectors(args, SCANNERS, &detectors)?;
    let cache = std::fs::canonicalize(&args.work)?.join("cache");
    let out = std::env::temp_dir().join(format!("sentinel-watch-load-{}", std::process::id()));
    let location = |c: &mut Command| {
        c.arg("--data-dir").arg(&set.dir).arg("--out").arg(&out);
    };
    // A ledger that already holds the data set's fires and issues, then its
    // positions cleared: the served scan reads every record again.
    eprintln!("==> a first scan of {} records fills the ledger", set.records);
    let mut first = host(args, "run");
    first.args(["--once", "--scan-timeout", "0"]).arg("--detectors").arg(&detectors).arg("--cache-dir").arg(&cache);
    location(&mut first);
    if !first.stdout(Stdio::null()).status()?.success() {
        bail!("the first scan failed");
    }
    let mut reset = host(args, "reset");
    location(&mut reset);
    if !reset.stdout(Stdio::null()).status()?.success() {
        bail!("reset failed");
    }
    let mut serve = host(args, "serve");
    serve.arg("--detectors").arg(&detectors).arg("--cache-dir").arg(&cache).arg("--no-fast-path");
    location(&mut serve);
    let started = Instant::now();
    let served = start(serve, out.with_extension("log"))?;
    eprintln!("==> {} clients read {} while the served scan reads {} records", args.clients, served.addr, set.records);
    let done = Arc::new(AtomicBool::new(false));
    let handles = readers(&served.addr, ENDPOINTS, args.clients, &done);
    let bound = Duration::from_secs(args.max_seconds);
    while !served.text().contains("scan done") && started.elapsed() < bound {
        std::thread::sleep(Duration::from_millis(20));
    }
    let scan_s = started.elapsed().as_secs_f64();
    done.store(true, Ordering::SeqCst);
    let (lat, errors) = joined(handles, ENDPOINTS.len())?;
    let scanned = served.text().contains("scan done");
    served.stop();
    let _ = std::fs::remove_dir_all(&out);
    Ok(WatchLoad {
        date: provenance::today(),
        git: provenance::git_rev(),
        records: set.records as u64,
        clients: args.clients,
        scan_s,
        scanned,
        errors,
        endpoints: endpoints(ENDPOINTS, &lat),
        logs: Vec::new(),
    })
}

/// The reads over a log of `fires` fires, nothing scanning (an empty data
/// dir): the first `/v1/chain` timed on its own, then `--log-seconds` of
/// reads.
fn log_load(args: &Args, fires: u64) -> Result<LogLoad> {
    let made = Instant::now();
    let log = fire_log::prepare(&std::env::temp_dir(), fires)?;
    eprintln!("==> a fire log of {fires} fires ready in {:.1} s", made.elapsed().as_secs_f64());
    let root = log.out.parent().context("the log's folder")?.to_owned();
    let (detectors, data) = (root.join("detectors"), root.join("data"));
    copy_detectors(args, &[fire_log::BUSY, fire_log::RARE], &detectors)?;
    std::fs::create_dir_all(&data)?;
    let mut serve = host(args, "serve");
    serve.arg("--detectors").arg(&detectors).arg("--data-dir").arg(&data).arg("--out").arg(&log.out);
    serve.arg("--cache-dir").arg(std::fs::canonicalize(&args.work)?.join("cache")).arg("--key-file").arg(&log.key_file);
    let served = start(serve, root.join("serve.log"))?;
    let t = Instant::now();
    let first = get(&served.addr, "/v1/chain");
    let first_chain_ms = ms(t.elapsed());
    if !matches!(first, Ok(200)) {
        let text = served.text();
        served.stop();
        bail!("the first /v1/chain over {fires} fires failed ({first:?}): {text}");
    }
    eprintln!("==> {} clients read {} for {} s over {fires} fires", args.clients, served.addr, args.log_seconds);
    let done = Arc::new(AtomicBool::new(false));
    let handles = readers(&served.addr, LOG_ENDPOINTS, args.clients, &done);
    std::thread::sleep(Duration::from_secs(args.log_seconds));
    done.store(true, Ordering::SeqCst);
    let (lat, errors) = joined(handles, LOG_ENDPOINTS.len())?;
    served.stop();
    Ok(LogLoad {
        fires,
        first_chain_ms,
        seconds: args.log_seconds as f64,
        errors,
        endpoints: endpoints(LOG_ENDPOINTS, &lat),
    })
}

fn run(args: Args) -> Result<()> {
    std::fs::create_dir_all(&args.work)?;
    let mut result = scan_load(&args)?;
    for &fires in &args.log_sizes {
        result.logs.push(log_load(&args, fires)?);
    }
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
fn endpoints(names: &[&str], lat: &[Vec<Duration>]) -> Vec<Endpoint> {
    let row = |name: String, l: &[Duration]| Endpoint {
        endpoint: name,
        requests: l.len(),
        p50_ms: ms(percentile(l, 50.0)),
        p99_ms: ms(percentile(l, 99.0)),
        max_ms: ms(percentile(l, 100.0)),
    };
    let mut out: Vec<Endpoint> = names.iter().zip(lat).map(|(e, l)| row(format!("`GET {e}`"), l)).collect();
    let all: Vec<Duration> = lat.iter().flatten().copied().collect();
    out.push(row("all reads".into(), &all));
    out
}
