//! The measurements, in the order a run makes them: start-up once, then for
//! each data size the raw read, the full scan, the fast path, every detector
//! as a component, unmetered, natively and as its core-module peer, and the
//! real binary's peak memory.
//!
//! Each ratio's two sides are measured in the same run, interleaved where
//! they are repeated, and summarised by the median of the repetitions, so a
//! shared, noisy machine moves both sides alike. This module measures and
//! returns numbers; it prints nothing (progress goes through a callback).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use sentinel_host::core::sentinel::Sentinel;
use sentinel_host::model::observation::{ConfigValue, Descriptor};
use sentinel_host::model::record::Batch;
use sentinel_host::runtime::{Limits, LoadedDetector, PreparedBatch, Runtime, ScanContext};
use sentinel_host::sources::ReadContext;
use sentinel_host::{ScanOptions, run_scan};

use crate::data::{self, DataSet};
use crate::native::{self, NativeRun};
use crate::peer::wire::PeerBatch;
use crate::peer::{self, PeerRun, Peers};
use crate::report::{DetectorResult, LongRunning, Report, ScanPhases, SizeResult, Startup, StartupDetector};
use crate::stats::{median, ms, percentile, ratio, us};

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    pub detectors: PathBuf,
    /// The release `sentinel-host` binary, for the memory runs; `None` skips
    /// them (peak memory and the binary's time then read 0), as the smoke
    /// test does.
    pub host: Option<PathBuf>,
    /// The folder of built core-module peers (`peer::build`); `None` runs
    /// no peer (the peer columns read `–`).
    pub peers: Option<PathBuf>,
    /// The warm compiled-component cache; `None` means `cache/` in `work`.
    pub cache: Option<PathBuf>,
    /// Target record counts.
    pub sizes: Vec<usize>,
    /// Where data dirs, caches and scan outputs go.
    pub work: PathBuf,
    /// Repetitions of each timed step; `None` picks by size.
    pub reps: Option<usize>,
    pub batch_rows: usize,
    /// The sandbox's limits: the product's own in `cargo xtask bench`; the
    /// smoke test raises the deadline (its subject is that the benchmark
    /// runs, on a machine busy with other tests).
    pub limits: Limits,
}

/// Only the component-vs-native table, for the detectors named in `only`
/// (every detector with a native twin when empty): what a change to the
/// guest, the SDK or the engine is judged by, without the minutes the rest
/// of the suite takes. Returns one `(records, results)` per size.
pub fn detectors_only(
    opts: &Options,
    only: &[String],
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<(u64, Vec<DetectorResult>)>> {
    std::fs::create_dir_all(&opts.work).with_context(|| format!("cannot create {}", opts.work.display()))?;
    let warm_cache = opts.cache.clone().unwrap_or_else(|| opts.work.join("cache"));
    let components = Components::load(opts, &warm_cache)?;
    known_names(only, components.loaded.iter().map(|d| d.descriptor.name.as_str()), "detector")?;
    let wanted = |n: &str| if only.is_empty() { native::twin(n).is_some() } else { only.iter().any(|o| o == n) };
    let mut out = Vec::new();
    for &target in &opts.sizes {
        let set = data::prepare(&opts.work, target)?;
        let reps = reps_for(opts, set.records);
        let mut batches = Vec::new();
        read_sources(&set, opts.batch_rows, &mut |b| batches.push(b))?;
        let mut results = Vec::new();
        for d in components.loaded.iter().filter(|d| wanted(&d.descriptor.name)) {
            progress(&format!("{} records: {}, {reps} times", set.records, d.descriptor.name));
            results.push(components.measure(d, &set, &batches, reps)?);
        }
        out.push((set.records as u64, results));
    }
    Ok(out)
}

/// Refuses an `--only` name that is none of `known` (a typo would
/// otherwise measure nothing and print an empty table), naming it and what
/// there is.
fn known_names<'a>(only: &[String], known: impl Iterator<Item = &'a str>, what: &str) -> Result<()> {
    let known: Vec<&str> = known.collect();
    let unknown: Vec<&str> = only.iter().map(String::as_str).filter(|o| !known.contains(o)).collect();
    ensure!(
        unknown.is_empty(),
        "--only: no {what} named {} (there are: {})",
        unknown.iter().map(|u| format!("`{u}`")).collect::<Vec<_>>().join(", "),
        known.join(", ")
    );
    Ok(())
}

/// One source's raw read at one size: its records and median time, and the
/// part of the floor that reads the same data (`None` when none does).
pub struct SourceRead {
    pub source: String,
    pub records: u64,
    pub read: Duration,
    pub floor: Option<Duration>,
}

/// The raw read source by source at each size, beside the floor's part for
/// the same data (`--read-only`): where the reader's gap to the floor is.
pub fn read_only(
    opts: &Options,
    only: &[String],
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<(usize, Vec<SourceRead>)>> {
    std::fs::create_dir_all(&opts.work).with_context(|| format!("cannot create {}", opts.work.display()))?;
    let sources = sentinel_host::config::Config::default().sources();
    known_names(only, sources.iter().map(|s| s.name()), "source")?;
    let mut out = Vec::new();
    for &target in &opts.sizes {
        let set = data::prepare(&opts.work, target)?;
        let reps = reps_for(opts, set.records);
        progress(&format!("{} records: every source, {reps} times", set.records));
        let copy = crate::floors::copy_databases(&set.dir)?;
        let mut rows = Vec::new();
        for s in sources.iter().filter(|s| only.is_empty() || only.iter().any(|o| o == s.name())) {
            let (mut times, mut floors, mut records) = (Vec::new(), Vec::new(), 0);
            for _ in 0..reps {
                let ctx = ReadContext {
                    data_dir: &set.dir,
                    scan_time_ms: set.scan_time_ms,
                    batch_rows: opts.batch_rows,
                    cursor: None,
                };
                let t = Instant::now();
                let report = s
                    .read(&ctx, &mut |b| {
                        drop(std::hint::black_box(b));
                        Ok(())
                    })
                    .with_context(|| format!("source {}", s.name()))?;
                times.push(t.elapsed());
                records = report.records;
                let floor = match s.name() {
                    "messages" => Some(crate::floors::sqlite_shell_one(copy.path(), "messages.db")?),
                    "runtime" => Some(crate::floors::sqlite_shell_one(copy.path(), "runtime.db")?),
                    "events" => Some(crate::floors::line_count(&set.dir)?.0),
                    _ => None,
                };
                floors.extend(floor);
            }
            let floor = (!floors.is_empty()).then(|| median(&floors));
            rows.push(SourceRead { source: s.name().to_owned(), records, read: median(&times), floor });
        }
        out.push((set.records, rows));
    }
    Ok(out)
}

fn reps_for(opts: &Options, records: usize) -> usize {
    opts.reps.unwrap_or(if records <= 200_000 { 5 } else { 3 }).max(1)
}

/// Runs everything and returns the report (without date, machine and git
/// revision, which the caller fills in).
pub fn run(opts: &Options, progress: &mut dyn FnMut(&str)) -> Result<Report> {
    std::fs::create_dir_all(&opts.work).with_context(|| format!("cannot create {}", opts.work.display()))?;
    let warm_cache = opts.cache.clone().unwrap_or_else(|| opts.work.join("cache"));
    let mut sets = Vec::new();
    for &target in &opts.sizes {
        progress(&format!("{target} records: generating the data dir"));
        sets.push(data::prepare(&opts.work, target)?);
    }
    // The scan measurements use the shipped Rust detectors (those with a
    // native twin); detectors in other languages are measured one by one.
    // Loading them all, once for the whole run, also fills the warm cache
    // every later step uses.
    let components = Components::load(opts, &warm_cache)?;
    let shipped = &components.loaded;
    let scan_set = subset(shipped.iter().filter(|d| native::twin(&d.descriptor.name).is_some()))?;
    // The real binary first, one run per size: its peak memory as it reports it.
    let mut memory = Vec::new();
    for set in &sets {
        progress(&format!("{} records: peak memory of the real binary", set.records));
        memory.push(binary_run(opts, set, scan_set.path(), &warm_cache)?);
    }
    let long_running = match (&opts.host, sets.first()) {
        (Some(host), Some(set)) => {
            progress(&format!("{} records: resident memory of the long-running mode", set.records));
            let rust = written_in_rust(&opts.detectors)?;
            let rust_set =
                subset(shipped.iter().filter(|d| rust.iter().any(|name| d.path.file_stem() == Some(name.as_ref()))))?;
            long_running(host, &opts.detectors, rust_set.path(), set, &warm_cache)?
        }
        _ => None,
    };
    progress("start-up: cold and warm loads, instantiation");
    let startup = startup(opts, &warm_cache)?;
    let mut sizes = Vec::new();
    for (set, mem) in sets.iter().zip(memory) {
        sizes.push(size(opts, &components, scan_set.path(), &warm_cache, set, mem, progress)?);
    }
    Ok(Report::new(startup, sizes).with_long_running(long_running))
}

/// Copies of these detectors' components in a folder of their own (a run of
/// the binary takes a folder).
fn subset<'a>(detectors: impl Iterator<Item = &'a LoadedDetector>) -> Result<tempfile::TempDir> {
    let set = tempfile::tempdir()?;
    for d in detectors {
        let name = d.path.file_name().context("a detector file name")?;
        std::fs::copy(&d.path, set.path().join(name))?;
    }
    Ok(set)
}

/// The components in `detectors` whose source folder beside them is a Rust
/// crate, by name, as `xtask` reads a detector folder's language: the
/// long-running mode's baseline is these, so that what the comparison shows
/// is what the ports in other languages add, whatever the number of Rust
/// detectors.
fn written_in_rust(detectors: &Path) -> Result<Vec<String>> {
    let sources = xtask::guest::detectors_under(detectors)?;
    Ok(sources.into_iter().filter(|d| d.lang == xtask::guest::Lang::Rust).map(|d| d.name).collect())
}

/// Runs of each side of the long-running comparison, alternated.
const RESIDENT_RUNS: usize = 3;

/// `run --interval 1` over the smallest data dir, with every shipped
/// detector and with the Rust ones alone: what each holds resident once
/// its ticks have settled. [`RESIDENT_RUNS`] runs of each, alternated, each
/// after the same warm-up (the compiled components read into the page
/// cache), summed up by the median of each figure.
fn long_running(host: &Path, all: &Path, rust: &Path, set: &DataSet, warm_cache: &Path) -> Result<Option<LongRunning>> {
    use crate::resident::{self, Resident};
    let settle = Duration::from_secs(8);
    let count = |dir: &Path| -> Result<usize> {
        Ok(std::fs::read_dir(dir)?.flatten().filter(|e| e.path().extension().is_some_and(|x| x == "wasm")).count())
    };
    let (mut every, mut rust_only): (Vec<Resident>, Vec<Resident>) = (Vec::new(), Vec::new());
    for _ in 0..RESIDENT_RUNS {
        for (dir, runs) in [(all, &mut every), (rust, &mut rust_only)] {
            resident::warm_page_cache(warm_cache)?;
            runs.extend(resident::long_running(host, dir, &set.dir, warm_cache, settle)?);
        }
    }
    let (Some(e), Some(r)) = (resident::median(&every), resident::median(&rust_only)) else { return Ok(None) };
    Ok(Some(LongRunning {
        records: set.records as u64,
        runs: every.len().min(rust_only.len()),
        every_detectors: count(all).unwrap_or(0),
        every_rss_kib: e.rss_kib,
        every_peak_kib: e.peak_kib,
        every_anon_kib: e.anon_kib,
        every_file_kib: e.file_kib,
        every_touched_file_kib: e.touched_file_kib,
        every_rss_runs_kib: every.iter().map(|r| r.rss_kib).collect(),
        rust_detectors: count(rust).unwrap_or(0),
        rust_rss_kib: r.rss_kib,
        rust_peak_kib: r.peak_kib,
        rust_anon_kib: r.anon_kib,
        rust_file_kib: r.file_kib,
        rust_touched_file_kib: r.touched_file_kib,
        rust_rss_runs_kib: rust_only.iter().map(|r| r.rss_kib).collect(),
    }))
}

/// One run of the release binary, as a user runs it: wall time and its own
/// peak RSS.
fn binary_run(opts: &Options, set: &DataSet, detectors: &Path, warm_cache: &Path) -> Result<BinaryRun> {
    let Some(host) = &opts.host else {
        return Ok(BinaryRun { wall: Duration::ZERO, peak_rss_kib: 0 });
    };
    let out = tempfile::tempdir()?;
    // The signing key of this throwaway folder: never in the user's config folder.
    let key = tempfile::tempdir()?;
    let child = crate::rss::measure(
        Command::new(host)
            .args(["run", "--once", "--no-fast-path", "--json", "--detectors"])
            .arg(detectors)
            .arg("--data-dir")
            .arg(&set.dir)
            .arg("--out")
            .arg(out.path())
            .arg("--key-file")
            .arg(key.path().join("bench.ed25519"))
            .arg("--cache-dir")
            .arg(warm_cache)
            .arg("--scan-time")
            .arg(set.scan_time_ms.to_string()),
    )?;
    Ok(BinaryRun { wall: child.wall, peak_rss_kib: child.peak_rss_kib.unwrap_or(0) })
}

struct BinaryRun {
    wall: Duration,
    peak_rss_kib: u64,
}

fn load_all(runtime: &Runtime, dir: &Path) -> Result<Vec<LoadedDetector>> {
    let mut out = Vec::new();
    for d in runtime.load_dir(dir)? {
        out.push(d.map_err(|e| anyhow::anyhow!(sentinel_host::scan::error_chain(&e)))?);
    }
    ensure!(!out.is_empty(), "no detectors in {}", dir.display());
    Ok(out)
}

fn defaults(d: &Descriptor) -> Vec<(String, ConfigValue)> {
    d.config.iter().map(|k| (k.name.clone(), k.default.clone())).collect()
}

fn startup(opts: &Options, warm_cache: &Path) -> Result<Startup> {
    let reps = opts.reps.unwrap_or(3).max(1);
    let mut cold = Vec::new();
    let mut warm = Vec::new();
    // Fill the warm cache first, so that warm runs interleave with cold ones.
    load_all(&Runtime::new(opts.limits.clone())?.with_cache(warm_cache.to_owned()), &opts.detectors)?;
    for _ in 0..reps {
        let empty = tempfile::tempdir()?;
        let t = Instant::now();
        load_all(&Runtime::new(opts.limits.clone())?.with_cache(empty.path().to_owned()), &opts.detectors)?;
        cold.push(t.elapsed());
        let t = Instant::now();
        load_all(&Runtime::new(opts.limits.clone())?.with_cache(warm_cache.to_owned()), &opts.detectors)?;
        warm.push(t.elapsed());
    }
    let runtime = Runtime::new(opts.limits.clone())?.with_cache(warm_cache.to_owned());
    let loaded = load_all(&runtime, &opts.detectors)?;
    let mut detectors = Vec::new();
    for d in &loaded {
        let mut times = Vec::new();
        for _ in 0..50 {
            let ctx = ScanContext { scan_time_ms: 0, window_start_ms: 0, config: defaults(&d.descriptor), state: None };
            let t = Instant::now();
            let scan = runtime.start_scan(d, ctx).map_err(|f| anyhow::anyhow!("{}: {}", f.detector, f.message))?;
            times.push(t.elapsed());
            drop(scan);
        }
        detectors.push(StartupDetector {
            name: d.descriptor.name.clone(),
            bytes: d.size,
            instantiate_p50_us: us(percentile(&times, 50.0)),
            instantiate_p99_us: us(percentile(&times, 99.0)),
        });
    }
    Ok(Startup {
        detectors: loaded.len(),
        cold_ms: ms(median(&cold)),
        warm_ms: ms(median(&warm)),
        per_detector: detectors,
    })
}

/// Reads every default source once, in the scan's order, handing each batch
/// to `sink`; returns the records read.
fn read_sources(set: &DataSet, batch_rows: usize, sink: &mut dyn FnMut(Batch)) -> Result<u64> {
    let mut sources = sentinel_host::config::Config::default().sources();
    sources.sort_by_key(|s| !s.is_reference());
    let mut records = 0;
    for s in &sources {
        let ctx = ReadContext { data_dir: &set.dir, scan_time_ms: set.scan_time_ms, batch_rows, cursor: None };
        let report = s
            .read(&ctx, &mut |b| {
                sink(b);
                Ok(())
            })
            .with_context(|| format!("source {}", s.name()))?;
        records += report.records;
    }
    Ok(records)
}

fn scan_options(opts: &Options, detectors: &Path, set: &DataSet, out: &Path, warm_cache: &Path) -> ScanOptions {
    let mut o = ScanOptions::new(detectors);
    o.limits = opts.limits.clone();
    o.data_dir = Some(set.dir.clone());
    o.out = Some(out.to_owned());
    o.cache_dir = Some(warm_cache.to_owned());
    o.scan_time_ms = Some(set.scan_time_ms);
    o.batch_rows = opts.batch_rows;
    o.no_fast_path = true;
    o
}

fn size(
    opts: &Options,
    components: &Components,
    scan_set: &Path,
    warm_cache: &Path,
    set: &DataSet,
    mem: BinaryRun,
    progress: &mut dyn FnMut(&str),
) -> Result<SizeResult> {
    let reps = reps_for(opts, set.records);
    let label = set.records;
    progress(&format!("{label} records: raw read and full scan, {reps} times each"));
    let scans = scans(opts, scan_set, set, warm_cache, reps)?;
    progress(&format!("{label} records: the floors (sqlite3 shell, NDJSON line count), {reps} times each"));
    let (sqlite_shell_ms, ndjson_lines_ms) = floors(set, reps)?;
    progress(&format!("{label} records: fast path"));
    let fast_path_ms = fast_path(opts, scan_set, set, scans.out.path(), warm_cache, reps.max(5))?;
    progress(&format!("{label} records: a tick over read data, one-shot and by a sentinel that keeps its detectors"));
    let (oneshot_tick_ms, kept_tick_ms) = ticks(opts, scan_set, set, scans.out.path(), warm_cache, reps.max(5))?;

    progress(&format!("{label} records: detectors as components and natively"));
    let mut batches = Vec::new();
    read_sources(set, opts.batch_rows, &mut |b| batches.push(b))?;
    let mut detectors = Vec::new();
    for d in &components.loaded {
        // A detector in another language has no native twin: its cost per
        // record is what matters, and the sizes up to 200 k records show it
        // (at 1 M records it would add minutes a repetition).
        if native::twin(&d.descriptor.name).is_none() && set.records > 200_000 {
            continue;
        }
        detectors.push(components.measure(d, set, &batches, reps)?);
    }
    let fire_bytes = fire_bytes(scans.out.path())?;
    Ok(SizeResult {
        records: set.records as u64,
        delivered: scans.records_read,
        batches: batches.len(),
        reps,
        raw_read_ms: ms(median(&scans.raw)),
        sqlite_shell_ms,
        ndjson_lines_ms,
        full_scan_ms: ms(median(&scans.full)),
        fast_path_ms,
        oneshot_tick_ms,
        kept_tick_ms,
        fires: scans.fires,
        fire_bytes,
        fire_log_ms: ms(median(&scans.fire_log)),
        phases: Some(scans.phases()),
        binary_scan_ms: ms(mem.wall),
        peak_rss_kib: mem.peak_rss_kib,
        observations: scans.observations,
        detectors,
    })
}

/// The raw reads and full scans of one size, interleaved, and what the
/// last scan reported and wrote (`out`, which the fast path and the ticks
/// scan again).
struct Scans {
    raw: Vec<Duration>,
    full: Vec<Duration>,
    fire_log: Vec<Duration>,
    /// Per phase (read, decide, commit, export), one time a repetition.
    phases: [Vec<Duration>; 4],
    records_read: u64,
    observations: u64,
    fires: u64,
    out: tempfile::TempDir,
}

impl Scans {
    fn phases(&self) -> ScanPhases {
        let [read, decide, commit, export] = &self.phases;
        ScanPhases {
            read_ms: ms(median(read)),
            decide_ms: ms(median(decide)),
            commit_ms: ms(median(commit)),
            export_ms: ms(median(export)),
        }
    }
}

fn scans(opts: &Options, scan_set: &Path, set: &DataSet, warm_cache: &Path, reps: usize) -> Result<Scans> {
    let (mut raw, mut full, mut fire_log) = (Vec::new(), Vec::new(), Vec::new());
    let mut phases: [Vec<Duration>; 4] = Default::default();
    let (mut records_read, mut observations, mut fires) = (0, 0, 0);
    let mut last_out = None;
    for _ in 0..reps {
        let t = Instant::now();
        records_read = read_sources(set, opts.batch_rows, &mut |b| drop(std::hint::black_box(b)))?;
        raw.push(t.elapsed());
        let out = tempfile::tempdir()?;
        let t = Instant::now();
        let report = run_scan(&scan_options(opts, scan_set, set, out.path(), warm_cache))?;
        full.push(t.elapsed());
        ensure!(report.failed_detectors() == 0, "a detector failed in the full scan: {:?}", report.detectors);
        observations = report.detectors.iter().map(|d| d.observations as u64).sum();
        fire_log.push(Duration::from_micros(report.fire_log_us));
        let p = report.phases.context("a full scan reports its phases")?;
        for (times, us) in phases.iter_mut().zip([p.read_us, p.decide_us, p.commit_us, p.export_us]) {
            times.push(Duration::from_micros(us));
        }
        fires = report.issues.fires;
        last_out = Some(out);
    }
    let out = last_out.context("no scan ran")?;
    Ok(Scans { raw, full, fire_log, phases, records_read, observations, fires, out })
}

/// The floors, median of `reps` each: the `sqlite3` shell on a copy of the
/// databases (`None` without the shell) and the line count, in ms.
fn floors(set: &DataSet, reps: usize) -> Result<(Option<f64>, f64)> {
    let (mut sqlite, mut lines) = (Vec::new(), Vec::new());
    let shell = crate::floors::sqlite_shell_available();
    let copy = crate::floors::copy_databases(&set.dir)?;
    for _ in 0..reps {
        if shell {
            sqlite.push(crate::floors::sqlite_shell(copy.path())?);
        }
        lines.push(crate::floors::line_count(&set.dir)?.0);
    }
    Ok((shell.then(|| ms(median(&sqlite))), ms(median(&lines))))
}

/// The bytes of the fire log's segments in a scan's output folder.
fn fire_bytes(out: &Path) -> Result<u64> {
    Ok(std::fs::read_dir(out)?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("fires-"))
        .map(|e| e.metadata().map(|m| m.len()).unwrap_or(0))
        .sum())
}

/// The scan again over unchanged data, `reps` times: it must take the
/// fast path. Median, in ms.
fn fast_path(
    opts: &Options,
    scan_set: &Path,
    set: &DataSet,
    out: &Path,
    warm_cache: &Path,
    reps: usize,
) -> Result<f64> {
    let mut fast = Vec::new();
    for _ in 0..reps {
        let mut o = scan_options(opts, scan_set, set, out, warm_cache);
        o.no_fast_path = false;
        let t = Instant::now();
        let report = run_scan(&o)?;
        fast.push(t.elapsed());
        ensure!(report.unchanged_since.is_some(), "the second scan of unchanged data did not take the fast path");
    }
    Ok(ms(median(&fast)))
}

/// A tick that finds nothing new (fast path off), after a full scan into
/// `out`: as `run --once` does it (open, load every component from the warm
/// cache, read, commit) and as the long-running mode does it (one sentinel,
/// components kept loaded). The difference is the start-up saved per tick.
fn ticks(
    opts: &Options,
    scan_set: &Path,
    set: &DataSet,
    out: &Path,
    warm_cache: &Path,
    reps: usize,
) -> Result<(f64, f64)> {
    let options = || scan_options(opts, scan_set, set, out, warm_cache);
    let mut oneshot = Vec::new();
    for _ in 0..reps {
        let t = Instant::now();
        let report = run_scan(&options())?;
        oneshot.push(t.elapsed());
        ensure!(report.failed_detectors() == 0, "a detector failed in a one-shot tick: {:?}", report.detectors);
    }
    let mut sentinel = Sentinel::open(options())?;
    sentinel.scan()?;
    let mut kept = Vec::new();
    for _ in 0..reps {
        let t = Instant::now();
        let report = sentinel.scan()?;
        kept.push(t.elapsed());
        ensure!(report.failed_detectors() == 0, "a detector failed in a kept tick: {:?}", report.detectors);
    }
    ensure!(
        sentinel.loads() as usize == std::fs::read_dir(scan_set)?.count(),
        "the kept sentinel loaded a component twice"
    );
    Ok((ms(median(&oneshot)), ms(median(&kept))))
}

/// Every detector in `detectors/`, loaded once a run into the real runtime,
/// those with a native twin into an unmetered one beside it, and those with
/// a core-module peer as that peer, on the real runtime's engine.
struct Components {
    runtime: Runtime,
    loaded: Vec<LoadedDetector>,
    unmetered: Unmetered,
    peers: Option<Peers>,
}

impl Components {
    fn load(opts: &Options, warm_cache: &Path) -> Result<Self> {
        let runtime = Runtime::new(opts.limits.clone())?.with_cache(warm_cache.to_owned());
        let loaded = load_all(&runtime, &opts.detectors)?;
        let unmetered = Unmetered::load(opts, warm_cache, &loaded)?;
        let peers = match &opts.peers {
            Some(dir) => Some(Peers::load(&runtime, dir, loaded.iter().map(|d| d.descriptor.name.as_str()))?),
            None => None,
        };
        Ok(Components { runtime, loaded, unmetered, peers })
    }

    /// `d`'s row of the component-vs-native table, over `batches`.
    fn measure(&self, d: &LoadedDetector, set: &DataSet, batches: &[Batch], reps: usize) -> Result<DetectorResult> {
        let peer = self.peers.as_ref().filter(|p| p.has(&d.descriptor.name));
        let sides = Sides { unmetered: self.unmetered.twin(d), peer };
        detector(&self.runtime, d, sides, set, batches, reps)
    }
}

/// What a component is measured beside: itself unmetered, its core-module
/// peer (each when it has one).
struct Sides<'a> {
    unmetered: Option<(&'a Runtime, &'a LoadedDetector)>,
    peer: Option<&'a Peers>,
}

/// The detectors with a native twin, loaded again into a runtime without
/// fuel or epoch deadline: run beside the real one, they show how much of
/// the component's time metering takes (`Runtime::unmetered`).
struct Unmetered {
    runtime: Runtime,
    loaded: Vec<LoadedDetector>,
}

impl Unmetered {
    fn load(opts: &Options, warm_cache: &Path, metered: &[LoadedDetector]) -> Result<Self> {
        let runtime = Runtime::unmetered(opts.limits.clone())?.with_cache(warm_cache.to_owned());
        let mut loaded = Vec::new();
        for d in metered.iter().filter(|d| native::twin(&d.descriptor.name).is_some()) {
            loaded.push(runtime.load(&d.path).map_err(|e| anyhow::anyhow!(sentinel_host::scan::error_chain(&e)))?);
        }
        Ok(Unmetered { runtime, loaded })
    }

    /// The unmetered copy of `d`, when it has a native twin.
    fn twin(&self, d: &LoadedDetector) -> Option<(&Runtime, &LoadedDetector)> {
        let loaded = self.loaded.iter().find(|u| u.descriptor.name == d.descriptor.name)?;
        Some((&self.runtime, loaded))
    }
}

/// One run of a component exactly as a scan calls it: fresh store, `start`,
/// every batch, `finish`.
struct ComponentRun {
    /// CPU time of this thread, and wall time, for the whole run.
    cpu: Duration,
    wall: Duration,
    /// Each `push` call, and the `finish` call alone as the runtime times it
    /// (`finish` also tears the store down, which costs with the memory the
    /// guest touched).
    pushes: Vec<Duration>,
    finish: Duration,
    observations: usize,
    fuel: u64,
}

fn run_component(
    runtime: &Runtime,
    d: &LoadedDetector,
    ctx: ScanContext,
    prepared: &[PreparedBatch],
) -> Result<ComponentRun> {
    let name = &d.descriptor.name;
    let t = Instant::now();
    let cpu = crate::cpu::thread_now();
    let mut pushes = Vec::with_capacity(prepared.len());
    let mut scan = runtime.start_scan(d, ctx).map_err(|f| anyhow::anyhow!("{name}: start: {}", f.message))?;
    for b in prepared {
        let c = Instant::now();
        scan.push(b).map_err(|f| anyhow::anyhow!("{name}: push: {}", f.message))?;
        pushes.push(c.elapsed());
    }
    let outcome = scan.finish().map_err(|f| anyhow::anyhow!("{name}: finish: {}", f.message))?;
    let wall = t.elapsed();
    let (observations, fuel, finish) = (outcome.observations.len(), outcome.stats.fuel, outcome.stats.finish);
    drop(outcome);
    Ok(ComponentRun { cpu: crate::cpu::thread_now().saturating_sub(cpu), wall, pushes, finish, observations, fuel })
}

fn detector(
    runtime: &Runtime,
    d: &LoadedDetector,
    sides: Sides<'_>,
    set: &DataSet,
    batches: &[Batch],
    reps: usize,
) -> Result<DetectorResult> {
    let name = d.descriptor.name.clone();
    let wanted: Vec<&Batch> = batches
        .iter()
        .filter(|b| d.descriptor.subscriptions.iter().any(|s| s.source == b.source && s.kind == b.kind))
        .collect();
    let records: u64 = wanted.iter().map(|b| u64::from(b.rows)).sum();
    let prepared: Vec<PreparedBatch> = wanted.iter().map(|b| PreparedBatch::new((*b).clone())).collect();
    let twin = native::twin(&name);
    let wit: Vec<_> = if twin.is_some() { wanted.iter().map(|b| native::to_wit(b)).collect() } else { Vec::new() };
    let config = defaults(&d.descriptor);
    let wit_ctx = native::context(set.scan_time_ms, &config);
    let ctx =
        || ScanContext { scan_time_ms: set.scan_time_ms, window_start_ms: 0, config: config.clone(), state: None };
    let peer_batches: Vec<PeerBatch> =
        if sides.peer.is_some() { wanted.iter().map(|b| PeerBatch::new(b)).collect() } else { Vec::new() };
    let peer_ctx = peer::wire::context(set.scan_time_ms, 0, &config);

    // The four sides interleaved, one run of each per repetition.
    let mut runs = Runs::default();
    for _ in 0..reps {
        runs.metered.push(run_component(runtime, d, ctx(), &prepared)?);
        if let Some((runtime, d)) = sides.unmetered {
            runs.unmetered.push(run_component(runtime, d, ctx(), &prepared)?);
        }
        if let Some(twin) = twin {
            runs.natives.push(twin(&wit_ctx, &wit).map_err(|e| anyhow::anyhow!("{name} (native): {e}"))?);
        }
        if let Some(p) = sides.peer {
            runs.peers.push(p.run(&name, &d.descriptor.emits, &peer_ctx, set.scan_time_ms, &peer_batches)?);
        }
    }
    runs.agree(&name)?;
    Ok(summarise(name, records, &runs))
}

/// A detector's runs on every side, one a repetition each.
#[derive(Default)]
struct Runs {
    metered: Vec<ComponentRun>,
    unmetered: Vec<ComponentRun>,
    natives: Vec<NativeRun>,
    peers: Vec<PeerRun>,
}

impl Runs {
    /// Every side reported as many observations as the component: a side
    /// that computes something else measures nothing.
    fn agree(&self, name: &str) -> Result<()> {
        let component = self.metered.last().map_or(0, |r| r.observations);
        let others = [
            ("unmetered", self.unmetered.iter().map(|r| r.observations).collect::<Vec<_>>()),
            ("its native twin", self.natives.iter().map(|r| r.observations).collect()),
            ("its core-module peer", self.peers.iter().map(|r| r.observations).collect()),
        ];
        for (side, counts) in others {
            if let Some(n) = counts.iter().find(|&&n| n != component) {
                bail!("{name}: the component reported {component} observations, {side} {n}");
            }
        }
        Ok(())
    }
}

/// A detector's runs reduced to its row: CPU time of the calling thread
/// (what the ratios are computed from, median of the repetitions), wall
/// time beside it, and the latency of every call. `unmetered` and `natives`
/// are empty for a detector without a native twin, `peers` for one without
/// a core-module peer (or a run without peers).
fn summarise(name: String, records: u64, runs: &Runs) -> DetectorResult {
    let Runs { metered, unmetered, natives, peers } = runs;
    let median_ms = |times: Vec<Duration>| (!times.is_empty()).then(|| ms(median(&times)));
    let component_ms = median_ms(metered.iter().map(|r| r.cpu).collect()).unwrap_or_default();
    let component_wall_ms = median_ms(metered.iter().map(|r| r.wall).collect()).unwrap_or_default();
    let unmetered_ms = median_ms(unmetered.iter().map(|r| r.cpu).collect());
    let native_ms = median_ms(natives.iter().map(|n| n.cpu).collect());
    let native_wall_ms = median_ms(natives.iter().map(|n| n.total).collect());
    let peer_ms = median_ms(peers.iter().map(|p| p.cpu).collect());
    let calls: Vec<Duration> = metered.iter().flat_map(|r| r.pushes.iter().copied()).collect();
    let finishes: Vec<Duration> = metered.iter().map(|r| r.finish).collect();
    let native_calls: Vec<Duration> = natives.iter().flat_map(|n| n.pushes.iter().copied()).collect();
    let per_record = |t: f64| if records > 0 { t * 1e6 / records as f64 } else { 0.0 };
    DetectorResult {
        name,
        records,
        observations: metered.last().map_or(0, |r| r.observations),
        fuel: metered.last().map_or(0, |r| r.fuel),
        component_ms,
        native_ms,
        component_ns_per_record: per_record(component_ms),
        native_ns_per_record: native_ms.map(per_record),
        ratio: native_ms.map(|n| ratio(component_ms, n)),
        wall_ratio: native_wall_ms.map(|n| ratio(component_wall_ms, n)),
        unmetered_ns_per_record: unmetered_ms.map(per_record),
        unmetered_ratio: unmetered_ms.zip(native_ms).map(|(u, n)| ratio(u, n)),
        peer_ns_per_record: peer_ms.map(per_record),
        peer_ratio: peer_ms.map(|p| ratio(component_ms, p)),
        push_p50_us: us(percentile(&calls, 50.0)),
        push_p99_us: us(percentile(&calls, 99.0)),
        push_max_us: us(calls.iter().copied().max().unwrap_or_default()),
        fire_p50_us: us(percentile(&finishes, 50.0)),
        fire_p99_us: us(percentile(&finishes, 99.0)),
        fire_max_us: us(finishes.iter().copied().max().unwrap_or_default()),
        fire_samples: finishes.len(),
        native_push_p99_us: (!natives.is_empty()).then(|| us(percentile(&native_calls, 99.0))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_only_name_that_is_no_source_or_detector_is_refused_by_name() {
        let only = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        let known = ["messages", "events"];
        assert!(known_names(&only(&[]), known.into_iter(), "source").is_ok());
        assert!(known_names(&only(&["events"]), known.into_iter(), "source").is_ok());
        let e = known_names(&only(&["events", "mesages"]), known.into_iter(), "source").unwrap_err().to_string();
        assert_eq!(e, "--only: no source named `mesages` (there are: messages, events)");
    }

    #[test]
    fn the_long_running_baseline_is_every_detector_written_in_rust_and_no_port() {
        let rust = written_in_rust(&xtask::guest::repo_root().join("detectors")).unwrap();
        for name in ["cost", "queue_wait", "retry_loop", "tool_error", "turn_stop", "anomaly_watch"] {
            assert!(rust.iter().any(|r| r == name), "{name} is written in Rust: {rust:?}");
        }
        for port in ["cost_py", "queue_wait_js", "cost_c"] {
            assert!(!rust.iter().any(|r| r == port), "{port} is a port: {rust:?}");
        }
    }
}
