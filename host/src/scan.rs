//! One scan, end to end: sources → detectors → ledger.
//!
//! The scan loads the detectors, reads each source once (reference sources
//! first) and fans every batch out to the detectors subscribed to it, asks
//! each for its decision, and commits what they report, with the sources'
//! cursors and the detectors' state, in one ledger transaction. A detector
//! that fails or is refused is reported and left out; a source that cannot be
//! read is reported and its cursor is kept. The scan never prints: it returns
//! a [`ScanReport`] for the CLI to render.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::config::{Config, parse_duration};
use crate::health::{self, Gate, Health, Outcome, Policy};
use crate::ledger::out_dir::{self, OutDirError};
use crate::ledger::{CommitReport, Ledger, LedgerError, ScanCommit};
use crate::observation::{ConfigValue, Descriptor, Observation};
use crate::runtime::{CallFailure, DetectorScan, Limits, PreparedBatch, Runtime, RuntimeError, ScanContext};
use crate::sources::{ReadContext, Source};

/// Everything a scan needs to know.
#[derive(Debug, Clone)]
pub struct ScanOptions {
    pub detectors_dir: PathBuf,
    /// The data dir; `None` means the default `~/.openmausbot`.
    pub data_dir: Option<PathBuf>,
    /// The output folder; `None` means the per-OS default.
    pub out: Option<PathBuf>,
    pub limits: Limits,
    /// Config values for every detector that declares the key (for example
    /// `queue_wait` from `--queue-wait`), then per-detector ones.
    pub global_config: Vec<(String, ConfigValue)>,
    pub detector_config: Vec<(String, String, ConfigValue)>,
    /// Rows per batch.
    pub batch_rows: usize,
    /// The scan time in ms; `None` means now.
    pub scan_time_ms: Option<i64>,
    /// The config file's sources and detector values.
    pub config: Config,
    /// Scan even when nothing changed since the last scan.
    pub no_fast_path: bool,
    /// Where compiled components are kept; `None` means `cache/` in the
    /// output folder.
    pub cache_dir: Option<PathBuf>,
    /// Quarantine and probation numbers.
    pub health: Policy,
    /// Set (by a signal handler) to stop the scan in flight: it then commits
    /// nothing and returns [`ScanError::Interrupted`].
    pub stop: Option<Arc<AtomicBool>>,
    /// Told how the scan is going, after every batch.
    pub progress: Option<ProgressFn>,
}

/// How far a scan has got, for a progress display.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    /// `loading`, `reading`, `deciding` or `committing`.
    pub phase: &'static str,
    /// The source being read.
    pub source: String,
    /// Records read so far, all sources together.
    pub records: u64,
    /// Detectors running, and loaded.
    pub detectors_running: usize,
    pub detectors_total: usize,
}

/// A progress observer. The library only calls it; the binary renders.
#[derive(Clone)]
pub struct ProgressFn(pub Arc<dyn Fn(&Progress) + Send + Sync>);

impl std::fmt::Debug for ProgressFn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressFn")
    }
}

impl ScanOptions {
    pub fn new(detectors_dir: impl Into<PathBuf>) -> Self {
        ScanOptions {
            detectors_dir: detectors_dir.into(),
            data_dir: None,
            out: None,
            limits: Limits::default(),
            global_config: Vec::new(),
            detector_config: Vec::new(),
            batch_rows: 256,
            scan_time_ms: None,
            config: Config::default(),
            no_fast_path: false,
            cache_dir: None,
            health: Policy::default(),
            stop: None,
            progress: None,
        }
    }

    fn stopped(&self) -> bool {
        self.stop.as_ref().is_some_and(|s| s.load(Ordering::SeqCst))
    }

    fn tell(&self, p: impl FnOnce() -> Progress) {
        if let Some(f) = &self.progress {
            (f.0)(&p());
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    #[error("data dir {path} is not a readable directory")]
    DataDir { path: PathBuf },
    #[error("no data dir given and no home directory to find ~/.openmausbot in")]
    NoDataDir,
    #[error(transparent)]
    OutDir(#[from] OutDirError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error("config for detector {detector}: key `{key}` expects {expected}, got {got}")]
    ConfigType { detector: String, key: String, expected: &'static str, got: &'static str },
    #[error("scan stopped before it committed: nothing was written")]
    Interrupted,
}

/// How a detector fared in this scan.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DetectorSummary {
    /// The descriptor name, or the file stem when it never loaded.
    pub name: String,
    pub path: PathBuf,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// `ok`, `failed` (loaded but a call failed), `refused` (not loaded),
    /// `quarantined` (loaded, not run) or `not-due` (its cadence has not
    /// come round and no source it reads was read, so it lost nothing).
    pub status: &'static str,
    /// For a detector with a cadence: when it is next due (ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_due: Option<i64>,
    /// Its health after this scan: `ok`, `probation` or `quarantined`.
    pub health: &'static str,
    /// Its fires this scan were marked `probation` (a field, never the title).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub probation: bool,
    /// Whether its compiled code came from the cache: `hit`, `miss`, `replaced`, `off`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache: Option<&'static str>,
    pub observations: usize,
    pub records: u64,
    pub calls: u32,
    pub fuel: u64,
    /// The slowest call and the final decision call, in microseconds.
    pub slowest_call_us: u64,
    pub finish_us: u64,
    /// Instantiation and `start`, and every call together, in microseconds:
    /// `(callsUs - startUs - finishUs) / records` is the cost of a record.
    pub start_us: u64,
    pub calls_us: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<FailureSummary>,
    pub logs: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FailureSummary {
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backtrace: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceSummary {
    pub name: String,
    /// `ok`, `missing`, `failed` or `not-read` (every detector that reads
    /// it is waiting for its cadence; its cursor stays).
    pub status: &'static str,
    pub records: u64,
    pub skipped: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What a completed scan reports.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScanReport {
    pub data_dir: PathBuf,
    pub out_dir: PathBuf,
    pub issues_file: PathBuf,
    pub scan_time: i64,
    pub elapsed_ms: u64,
    /// Set when nothing changed since the scan at this time (ms), so no row
    /// was read and no detector ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unchanged_since: Option<i64>,
    /// Why the ledger's state was started again at this scan, if it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state_reset: Option<String>,
    pub sources: Vec<SourceSummary>,
    pub detectors: Vec<DetectorSummary>,
    pub issues: CommitReport,
    /// The process's peak resident memory so far, in KiB (Linux: `VmHWM`);
    /// absent where the system does not tell.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_rss_kib: Option<u64>,
}

impl ScanReport {
    /// Detectors that did not do their part: failed, refused or quarantined.
    /// One waiting for its cadence (`not-due`) lost nothing and is not counted.
    pub fn failed_detectors(&self) -> usize {
        self.detectors.iter().filter(|d| !matches!(d.status, "ok" | "not-due")).count()
    }
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// Resolves the data dir and checks it is a directory.
pub fn resolve_data_dir(data_dir: Option<&Path>) -> Result<PathBuf, ScanError> {
    let dir = match data_dir {
        Some(d) => d.to_owned(),
        None => out_dir::default_data_dir().ok_or(ScanError::NoDataDir)?,
    };
    match std::fs::metadata(&dir) {
        Ok(m) if m.is_dir() => Ok(out_dir::resolve(&dir)),
        _ => Err(ScanError::DataDir { path: dir }),
    }
}

/// The config a detector gets: its defaults, overridden by the config file's
/// `[detectors.NAME]` values, then by `--queue-wait`/`--cost`, then by
/// `--set`, each checked against the default's type.
fn detector_config(
    d: &Descriptor,
    opts: &ScanOptions,
    from_file: &[(String, String, ConfigValue)],
) -> Result<Vec<(String, ConfigValue)>, ScanError> {
    let mut out = Vec::with_capacity(d.config.len());
    for key in &d.config {
        let specific = |list: &'_ [(String, String, ConfigValue)]| {
            list.iter().rev().find(|(det, k, _)| *det == d.name && *k == key.name).map(|(_, _, v)| v.clone())
        };
        let given = specific(&opts.detector_config)
            .or_else(|| opts.global_config.iter().rev().find(|(k, _)| *k == key.name).map(|(_, v)| v.clone()))
            .or_else(|| specific(from_file));
        let given = given.as_ref();
        let value = match given {
            None => key.default.clone(),
            Some(v) => coerce(v, &key.default).ok_or_else(|| ScanError::ConfigType {
                detector: d.name.clone(),
                key: key.name.clone(),
                expected: key.default.type_name(),
                got: v.type_name(),
            })?,
        };
        out.push((key.name.clone(), value));
    }
    Ok(out)
}

/// Converts an operator value to the type of the default where that is lossless.
pub fn coerce(v: &ConfigValue, default: &ConfigValue) -> Option<ConfigValue> {
    use ConfigValue as C;
    Some(match (v, default) {
        (C::Boolean(b), C::Boolean(_)) => C::Boolean(*b),
        (C::Integer(i), C::Integer(_)) => C::Integer(*i),
        (C::Integer(i), C::Float(_)) => C::Float(*i as f64),
        (C::Float(f), C::Float(_)) => C::Float(*f),
        (C::Integer(i), C::DurationMs(_)) if *i >= 0 => C::DurationMs(*i as u64 * 1000),
        (C::DurationMs(d), C::DurationMs(_)) => C::DurationMs(*d),
        (C::Text(s), C::DurationMs(_)) => C::DurationMs(parse_duration(s)?),
        (C::Text(s), C::Text(_)) => C::Text(s.clone()),
        _ => return None,
    })
}

struct Active<'r> {
    index: usize,
    scan: DetectorScan<'r>,
}

/// Runs one scan.
pub fn run_scan(opts: &ScanOptions) -> Result<ScanReport, ScanError> {
    let started = Instant::now();
    let data_dir = resolve_data_dir(opts.data_dir.as_deref())?;
    let out = out_dir::prepare(opts.out.as_deref(), &data_dir)?;
    let mut ledger = Ledger::open(&out)?;
    let state_reset = ledger.reset_reason().map(str::to_owned);
    let scan_time = opts.scan_time_ms.unwrap_or_else(now_ms);
    ledger.finish_pending_export()?;

    let mut sources = opts.config.sources();
    sources.sort_by_key(|s| !s.is_reference());

    // The unchanged-data fast path: same files, same detectors, same config,
    // and no queued work has crossed its threshold since.
    let stamp = fast_path_stamp(&sources, &data_dir, opts);
    if let Some(stamp) = &stamp
        && !opts.no_fast_path
        && state_reset.is_none()
        && ledger.meta("fast_stamp")?.as_deref() == Some(stamp.as_str())
        && ledger.meta("next_wake")?.and_then(|w| w.parse::<i64>().ok()).is_none_or(|w| scan_time < w)
    {
        let last = ledger.meta("last_scan")?.and_then(|t| t.parse().ok());
        return Ok(ScanReport {
            unchanged_since: last.or(Some(0)),
            data_dir,
            issues_file: ledger.issues_path(),
            out_dir: out,
            scan_time,
            elapsed_ms: started.elapsed().as_millis() as u64,
            state_reset: None,
            sources: Vec::new(),
            detectors: Vec::new(),
            issues: CommitReport { total_issues: ledger.total_issues()?, ..CommitReport::default() },
            peak_rss_kib: peak_rss_kib(),
        });
    }

    let cache_dir = match &opts.cache_dir {
        Some(dir) => {
            let dir = out_dir::resolve(dir);
            if dir.starts_with(&data_dir) {
                return Err(ScanError::OutDir(OutDirError::InsideDataDir { out: dir, data_dir }));
            }
            dir
        }
        None => out_dir::cache_dir(&out),
    };
    let runtime = Runtime::new(opts.limits.clone())?.with_cache(cache_dir);
    let mut summaries = Vec::new();
    let mut loaded = Vec::new();
    opts.tell(|| Progress {
        phase: "loading",
        source: String::new(),
        records: 0,
        detectors_running: 0,
        detectors_total: 0,
    });
    for result in runtime.load_dir(&opts.detectors_dir)? {
        match result {
            Ok(d) => {
                summaries.push(DetectorSummary {
                    name: d.descriptor.name.clone(),
                    path: d.path.clone(),
                    version: Some(d.descriptor.version.clone()),
                    status: "ok",
                    next_due: None,
                    health: "ok",
                    probation: false,
                    cache: Some(d.cache.label()),
                    observations: 0,
                    records: 0,
                    calls: 0,
                    fuel: 0,
                    slowest_call_us: 0,
                    finish_us: 0,
                    start_us: 0,
                    calls_us: 0,
                    failure: None,
                    logs: Vec::new(),
                });
                loaded.push(d);
            }
            Err(e) => summaries.push(DetectorSummary {
                name: e.path().file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default(),
                path: e.path().to_owned(),
                version: None,
                status: "refused",
                next_due: None,
                health: "ok",
                probation: false,
                cache: None,
                observations: 0,
                records: 0,
                calls: 0,
                fuel: 0,
                slowest_call_us: 0,
                finish_us: 0,
                start_us: 0,
                calls_us: 0,
                failure: Some(FailureSummary {
                    kind: "load",
                    phase: None,
                    message: error_chain(&e),
                    backtrace: None,
                    stderr: None,
                }),
                logs: Vec::new(),
            }),
        }
    }
    // Summaries of loaded detectors, by position in `loaded`.
    let loaded_summary: Vec<usize> =
        summaries.iter().enumerate().filter(|(_, s)| s.status == "ok").map(|(i, _)| i).collect();

    let mut cursors_in = BTreeMap::new();
    for s in &sources {
        cursors_in.insert(s.name(), ledger.cursor(s.name())?);
    }
    // Sources keep their own windows (cursors); the context gives no lower bound.
    let window_start = 0;

    let from_file = opts.config.detector_values();
    // The earliest moment queued work crosses a detector's `queue_wait`.
    let mut queue_waits: Vec<u64> = Vec::new();
    let mut active: Vec<Active<'_>> = Vec::new();
    let mut healths: BTreeMap<String, Health> = ledger.health()?.into_iter().map(|h| (h.detector.clone(), h)).collect();
    let mut on_probation = vec![false; loaded.len()];
    // Health first: a quarantined detector is not run and pulls nothing in.
    let mut candidate = vec![false; loaded.len()];
    for (index, d) in loaded.iter().enumerate() {
        let summary = &mut summaries[loaded_summary[index]];
        let h = healths.entry(d.descriptor.name.clone()).or_insert_with(|| Health::new(&d.descriptor.name));
        match health::gate(h, scan_time) {
            Gate::Skip { until } => {
                summary.status = "quarantined";
                summary.failure = Some(FailureSummary {
                    kind: "quarantined",
                    phase: None,
                    message: format!(
                        "not run: {} failures in a row (last: {}); back on probation at {until} ms",
                        h.failures_in_a_row,
                        h.last_failure.as_deref().unwrap_or("unknown")
                    ),
                    backtrace: None,
                    stderr: None,
                });
                continue;
            }
            Gate::Probation => on_probation[index] = true,
            Gate::Run => {}
        }
        candidate[index] = true;
    }
    // Cadence: a detector that asked for one runs when it is due, and also
    // whenever a source it reads is read (cursors are per source).
    let mut last_runs: Vec<Option<i64>> = Vec::with_capacity(loaded.len());
    for d in &loaded {
        let last = match d.descriptor.cadence_seconds {
            Some(_) => ledger.meta(&cadence_key(&d.descriptor.name))?.and_then(|v| v.parse().ok()),
            None => None,
        };
        last_runs.push(last);
    }
    let due: Vec<bool> =
        loaded.iter().zip(&last_runs).map(|(d, last)| is_due(d.descriptor.cadence_seconds, *last, scan_time)).collect();
    let subscriptions: Vec<BTreeSet<&str>> =
        loaded
            .iter()
            .zip(&candidate)
            .map(|(d, &c)| {
                if c { d.descriptor.subscriptions.iter().map(|s| s.source.as_str()).collect() } else { BTreeSet::new() }
            })
            .collect();
    let reference: BTreeSet<&str> = sources.iter().filter(|s| s.is_reference()).map(|s| s.name()).collect();
    let candidate_due: Vec<bool> = due.iter().zip(&candidate).map(|(&d, &c)| d && c).collect();
    let runs = plan_runs(&subscriptions, &candidate_due, &reference);
    let skipped_sources = sources_to_skip(&subscriptions, &runs);
    let mut cadence_meta: Vec<(String, Option<String>)> = Vec::new();
    let mut next_wake: Option<i64> = None;
    for (index, d) in loaded.iter().enumerate() {
        if !candidate[index] {
            continue;
        }
        let cadence = d.descriptor.cadence_seconds;
        // Running now moves its next turn to a cadence from now.
        let last_run = if runs[index] { Some(scan_time) } else { last_runs[index] };
        if let Some(next) = next_due(cadence, last_run) {
            next_wake = Some(next_wake.map_or(next, |w: i64| w.min(next)));
            summaries[loaded_summary[index]].next_due = Some(next);
        }
        if !runs[index] {
            summaries[loaded_summary[index]].status = "not-due";
            continue;
        }
        if cadence.is_some() {
            cadence_meta.push((cadence_key(&d.descriptor.name), Some(scan_time.to_string())));
        }
        summaries[loaded_summary[index]].probation = on_probation[index];
        let config = detector_config(&d.descriptor, opts, &from_file)?;
        let state = ledger.state(&d.descriptor.name)?;
        if let Some((_, ConfigValue::DurationMs(ms))) = config.iter().find(|(k, _)| k == "queue_wait") {
            queue_waits.push(*ms);
        }
        let ctx = ScanContext { scan_time_ms: scan_time, window_start_ms: window_start, config, state };
        match runtime.start_scan(d, ctx) {
            Ok(scan) => active.push(Active { index, scan }),
            Err(f) => record_failure(&mut summaries[loaded_summary[index]], &f),
        }
    }

    let mut source_summaries = Vec::new();
    let mut cursors_out = BTreeMap::new();
    let total_detectors = loaded.len();
    let mut records_read: u64 = 0;
    // Sources are read on their own thread while the detectors take batches
    // on this one (two cores do the two halves at once); a small bounded
    // channel keeps memory flat. Observations go to the ledger's staging as
    // each call returns them, so they are not held in memory either.
    std::thread::scope(|s| -> Result<(), ScanError> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Read>(4);
        let (sources, data_dir, cursors_in, skipped_sources) = (&sources, &data_dir, &cursors_in, &skipped_sources);
        s.spawn(move || {
            for (i, source) in sources.iter().enumerate() {
                if skipped_sources.contains(source.name()) {
                    if tx.send(Read::Skipped(i)).is_err() {
                        return;
                    }
                    continue;
                }
                if opts.stopped() {
                    return;
                }
                let ctx = ReadContext {
                    data_dir,
                    scan_time_ms: scan_time,
                    batch_rows: opts.batch_rows.max(1),
                    cursor: cursors_in.get(source.name()).and_then(|c| c.as_deref()),
                };
                let result = source.read(&ctx, &mut |batch| {
                    if opts.stopped() {
                        return Err("stopped by a signal".to_owned());
                    }
                    tx.send(Read::Batch(batch)).map_err(|_| "the scan stopped taking batches".to_owned())
                });
                if tx.send(Read::Done(i, result)).is_err() {
                    return;
                }
            }
        });
        for msg in rx {
            if opts.stopped() {
                return Err(ScanError::Interrupted);
            }
            let (i, result) = match msg {
                Read::Batch(batch) => {
                    let batch = PreparedBatch::new(batch);
                    records_read += u64::from(batch.rows());
                    let mut a = 0;
                    while a < active.len() {
                        let index = active[a].index;
                        let wants = loaded[index]
                            .descriptor
                            .subscriptions
                            .iter()
                            .any(|s| s.source == batch.source() && s.kind == batch.kind());
                        if !wants {
                            a += 1;
                            continue;
                        }
                        match active[a].scan.push(&batch) {
                            Ok(()) => {
                                let observations = active[a].scan.take_observations();
                                stage(&mut ledger, observations, on_probation[index])?;
                                a += 1;
                            }
                            Err(f) => {
                                let gone = active.remove(a);
                                ledger.unstage(&loaded[index].descriptor.name)?;
                                let summary = &mut summaries[loaded_summary[gone.index]];
                                fill_stats(summary, gone.scan.stats());
                                summary.observations = 0;
                                record_failure(summary, &f);
                            }
                        }
                    }
                    opts.tell(|| Progress {
                        phase: "reading",
                        source: batch.source().to_owned(),
                        records: records_read,
                        detectors_running: active.len(),
                        detectors_total: total_detectors,
                    });
                    continue;
                }
                Read::Skipped(i) => {
                    // Every detector that reads it is waiting for its cadence: its
                    // cursor stays where it is, so they get these records when due.
                    source_summaries.push(SourceSummary {
                        name: sources[i].name().to_owned(),
                        status: "not-read",
                        records: 0,
                        skipped: 0,
                        error: None,
                    });
                    continue;
                }
                Read::Done(i, result) => (i, result),
            };
            let source = &sources[i];
            match result {
                Ok(report) => {
                    for at in &report.open_since {
                        for ms in &queue_waits {
                            let crossing = at.saturating_add(*ms as i64);
                            if crossing > scan_time {
                                next_wake = Some(next_wake.map_or(crossing, |w: i64| w.min(crossing)));
                            }
                        }
                    }
                    if let Some(c) = report.cursor {
                        cursors_out.insert(source.name().to_owned(), c);
                    }
                    source_summaries.push(SourceSummary {
                        name: source.name().to_owned(),
                        status: if report.missing { "missing" } else { "ok" },
                        records: report.records,
                        skipped: report.skipped,
                        error: None,
                    });
                }
                Err(e) => source_summaries.push(SourceSummary {
                    name: source.name().to_owned(),
                    status: "failed",
                    records: 0,
                    skipped: 0,
                    error: Some(error_chain(&e)),
                }),
            }
        }
        Ok(())
    })?;
    if opts.stopped() {
        return Err(ScanError::Interrupted);
    }

    let mut states = BTreeMap::new();
    opts.tell(|| Progress {
        phase: "deciding",
        source: String::new(),
        records: records_read,
        detectors_running: active.len(),
        detectors_total: total_detectors,
    });
    for a in active {
        let summary = &mut summaries[loaded_summary[a.index]];
        let name = &loaded[a.index].descriptor.name;
        let before = a.scan.accepted();
        match a.scan.finish() {
            Ok(outcome) => {
                fill_stats(summary, &outcome.stats);
                summary.observations = before + outcome.observations.len();
                summary.logs = outcome.logs.iter().map(|l| format!("{}: {}", l.level, l.message)).collect();
                if outcome.logs_dropped > 0 {
                    summary.logs.push(format!("({} more lines dropped: log budget spent)", outcome.logs_dropped));
                }
                states.insert(name.clone(), outcome.state);
                stage(&mut ledger, outcome.observations, on_probation[a.index])?;
            }
            Err(f) => {
                ledger.unstage(name)?;
                record_failure(summary, &f);
            }
        }
    }

    // Only detectors that loaded have health: a refused file is not a detector yet.
    let mut health = Vec::new();
    for &i in &loaded_summary {
        let d = &mut summaries[i];
        let outcome = match (d.status, &d.failure) {
            ("ok", _) => Outcome::Clean,
            ("failed", Some(f)) => {
                Outcome::Failed(f.phase.as_ref().map_or_else(|| f.kind.to_owned(), |p| format!("{} in {p}", f.kind)))
            }
            _ => Outcome::DidNotRun,
        };
        let before = healths.remove(&d.name).unwrap_or_else(|| Health::new(&d.name));
        let after = health::after(before, &outcome, scan_time, &opts.health);
        d.health = after.state.label();
        health.push(after);
    }
    if opts.stopped() {
        return Err(ScanError::Interrupted);
    }
    opts.tell(|| Progress {
        phase: "committing",
        source: String::new(),
        records: records_read,
        detectors_running: 0,
        detectors_total: total_detectors,
    });
    let mut meta = vec![
        ("fast_stamp".into(), stamp),
        ("next_wake".into(), next_wake.map(|w| w.to_string())),
        ("last_scan".into(), Some(scan_time.to_string())),
    ];
    meta.extend(cadence_meta);
    let issues =
        ledger.commit(ScanCommit { observations: &[], cursors: cursors_out, states, health, scan_time, meta })?;
    Ok(ScanReport {
        data_dir,
        issues_file: ledger.issues_path(),
        out_dir: out,
        scan_time,
        elapsed_ms: started.elapsed().as_millis() as u64,
        unchanged_since: None,
        state_reset,
        sources: source_summaries,
        detectors: summaries,
        issues,
        peak_rss_kib: peak_rss_kib(),
    })
}

/// This process's peak resident set in KiB, from `/proc/self/status`
/// (`VmHWM`, which starts again at exec, unlike `getrusage`'s figure).
pub fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?.trim().trim_end_matches("kB").trim().parse().ok()
}

/// What the reading thread sends: a batch, a source skipped for cadence, or
/// how a source's read ended.
enum Read {
    Batch(crate::record::Batch),
    Skipped(usize),
    Done(usize, Result<crate::sources::SourceReport, crate::sources::SourceError>),
}

/// Stages one call's observations, marked `probation` (a field, never the
/// title) when their detector is on probation.
fn stage(ledger: &mut Ledger, mut observations: Vec<Observation>, probation: bool) -> Result<(), ScanError> {
    for o in &mut observations {
        o.probation = probation;
    }
    Ok(ledger.stage(&observations)?)
}

/// The ledger key of a detector's last run, for its cadence.
fn cadence_key(detector: &str) -> String {
    format!("cadence.{detector}")
}

/// When a detector with a cadence is next due: a cadence after its last run.
/// `None` when it has no cadence or has never run here (due every scan).
pub fn next_due(cadence_seconds: Option<u32>, last_run: Option<i64>) -> Option<i64> {
    Some(last_run?.saturating_add(i64::from(cadence_seconds?) * 1000))
}

/// Whether a detector is due: it has no cadence, has never run here, or its
/// cadence has passed since its last run.
pub fn is_due(cadence_seconds: Option<u32>, last_run: Option<i64>, scan_time: i64) -> bool {
    next_due(cadence_seconds, last_run).is_none_or(|next| scan_time >= next)
}

/// Which detectors run this scan. Those due run; so does every other that
/// reads a source a running detector reads, until nothing changes: source
/// cursors are per source, so reading a source past a detector would lose
/// its records for good. Reference sources are read whole every scan and
/// keep no cursor, so they pull nobody in. `subscriptions[i]` is the
/// sources detector `i` reads (empty for one that cannot run at all).
pub fn plan_runs(subscriptions: &[BTreeSet<&str>], due: &[bool], reference: &BTreeSet<&str>) -> Vec<bool> {
    let mut runs = due.to_vec();
    loop {
        let read: BTreeSet<&str> = subscriptions
            .iter()
            .zip(&runs)
            .filter(|(_, r)| **r)
            .flat_map(|(s, _)| s.iter().copied())
            .filter(|s| !reference.contains(s))
            .collect();
        let mut changed = false;
        for (i, subs) in subscriptions.iter().enumerate() {
            if !runs[i] && subs.iter().any(|s| read.contains(s)) {
                runs[i] = true;
                changed = true;
            }
        }
        if !changed {
            return runs;
        }
    }
}

/// The sources not read this scan: every detector that reads them is
/// waiting for its cadence. A source no detector reads is read as before.
pub fn sources_to_skip<'a>(subscriptions: &[BTreeSet<&'a str>], runs: &[bool]) -> BTreeSet<&'a str> {
    let wanted: BTreeSet<&str> = subscriptions.iter().flat_map(|s| s.iter().copied()).collect();
    wanted.into_iter().filter(|src| !subscriptions.iter().zip(runs).any(|(s, &r)| r && s.contains(src))).collect()
}

/// A digest of everything that decides whether a scan can find anything new:
/// the host version, each source's watched files (size, modification time,
/// inode), the detector files, the config and the limits. `None` when a
/// source cannot tell (an HTTP endpoint): then every run scans.
fn fast_path_stamp(sources: &[Box<dyn Source>], data_dir: &Path, opts: &ScanOptions) -> Option<String> {
    use sha2::{Digest, Sha256};
    use std::fmt::Write;
    let mut text = format!("v{}\n", env!("CARGO_PKG_VERSION"));
    let mut stat = |p: &Path| {
        let line = match std::fs::metadata(p) {
            Ok(m) => {
                let mtime =
                    m.modified().ok().and_then(|t| t.duration_since(UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos());
                #[cfg(unix)]
                let ino = std::os::unix::fs::MetadataExt::ino(&m);
                #[cfg(not(unix))]
                let ino = 0;
                format!("{} {} {mtime} {ino}", p.display(), m.len())
            }
            Err(_) => format!("{} -", p.display()),
        };
        let _ = writeln!(text, "{line}");
    };
    for s in sources {
        for p in s.watch(data_dir)? {
            stat(&p);
        }
    }
    let mut detectors: Vec<PathBuf> = std::fs::read_dir(&opts.detectors_dir)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "wasm"))
        .collect();
    detectors.sort();
    for p in &detectors {
        stat(p);
    }
    let _ = writeln!(
        text,
        "{}\n{:?}\n{:?}\n{:?}",
        opts.config.digest, opts.global_config, opts.detector_config, opts.limits
    );
    Some(crate::hex(&Sha256::digest(text.as_bytes())[..16]))
}

/// One detector file as an operator sees it: what it is, what it may do,
/// and how it has fared.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DetectorInfo {
    #[serde(flatten)]
    pub inspection: crate::runtime::Inspection,
    /// From the ledger of the output folder, when there is one.
    pub health: Option<Health>,
}

/// Inspects every `*.wasm` in `detectors_dir`, with health from the ledger of
/// the output folder for `data_dir` (nothing is created when it has none).
pub fn inspect_detectors(
    detectors_dir: &Path,
    data_dir: Option<&Path>,
    out: Option<&Path>,
) -> Result<Vec<DetectorInfo>, ScanError> {
    let out = resolve_data_dir(data_dir).ok().and_then(|d| out_dir::choose(out, &d).ok());
    let runtime = runtime_for_checks(out.as_deref())?;
    let files = crate::runtime::detector_files(detectors_dir)?;
    let healths: Vec<Health> = match out {
        Some(out) if out.join(crate::ledger::STORE_FILE).is_file() => Ledger::open(&out)?.health()?,
        _ => Vec::new(),
    };
    Ok(files
        .iter()
        .map(|f| {
            let inspection = runtime.inspect(f);
            let name = inspection.descriptor.as_ref().map(|d| d.name.clone());
            let health = name.and_then(|n| healths.iter().find(|h| h.detector == n).cloned());
            DetectorInfo { inspection, health }
        })
        .collect())
}

/// A runtime for checking detectors outside a scan (`detectors inspect`,
/// `check-install`): it reuses the compiled code scans left in the output
/// folder, when there is any, and never creates a cache of its own.
pub(crate) fn runtime_for_checks(out: Option<&Path>) -> Result<Runtime, RuntimeError> {
    let runtime = Runtime::new(Limits::default())?;
    Ok(match out.map(out_dir::cache_dir).filter(|c| c.is_dir()) {
        Some(cache) => runtime.with_cache(cache),
        None => runtime,
    })
}

/// What `sentinel-host reset` did.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResetOutcome {
    pub out_dir: PathBuf,
    pub issues_kept: u64,
}

/// Starts the ledger's state again by hand, exactly as a release that changes
/// the store's shape does: cursors, occurrence keys and detector state are
/// cleared, issues are kept, and only newer occurrences are counted from now on.
pub fn reset_state(data_dir: Option<&Path>, out: Option<&Path>) -> Result<ResetOutcome, ScanError> {
    let data_dir = resolve_data_dir(data_dir)?;
    let out = out_dir::prepare(out, &data_dir)?;
    let mut ledger = Ledger::open(&out)?;
    let report = ledger.reset_state("reset by hand")?;
    Ok(ResetOutcome { out_dir: out, issues_kept: report.issues_kept })
}

fn fill_stats(summary: &mut DetectorSummary, stats: &crate::runtime::CallStats) {
    summary.records = stats.records;
    summary.calls = stats.calls;
    summary.fuel = stats.fuel;
    summary.slowest_call_us = stats.slowest.as_micros() as u64;
    summary.finish_us = stats.finish.as_micros() as u64;
    summary.start_us = stats.start.as_micros() as u64;
    summary.calls_us = stats.total.as_micros() as u64;
}

fn record_failure(summary: &mut DetectorSummary, f: &CallFailure) {
    summary.status = "failed";
    summary.failure = Some(FailureSummary {
        kind: f.kind.label(),
        phase: Some(f.phase.to_string()),
        message: f.message.clone(),
        backtrace: f.backtrace.clone(),
        stderr: f.stderr.clone(),
    });
}

/// An error and its causes, joined with `: `.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set<'a>(v: &[&'a str]) -> BTreeSet<&'a str> {
        v.iter().copied().collect()
    }

    #[test]
    fn cadence_is_due_after_its_interval_and_on_the_first_scan() {
        assert!(is_due(None, Some(100), 100));
        assert!(is_due(Some(60), None, 0));
        assert!(!is_due(Some(60), Some(1_000), 60_999));
        assert!(is_due(Some(60), Some(1_000), 61_000));
    }

    #[test]
    fn a_detector_not_due_runs_when_a_source_it_reads_is_read() {
        let reference = set(&["bots"]);
        // 0: every scan, reads messages and bots. 1: cadence, reads events
        // and messages. 2: cadence, reads http and bots. 3: cadence, reads
        // events only.
        let subs =
            vec![set(&["messages", "bots"]), set(&["events", "messages"]), set(&["http", "bots"]), set(&["events"])];
        let runs = plan_runs(&subs, &[true, false, false, false], &reference);
        // 1 shares messages with 0; 3 shares events with 1 (pulled in in turn);
        // 2 shares only the reference source, so it waits and http is not read.
        assert_eq!(runs, [true, true, false, true]);
        assert_eq!(sources_to_skip(&subs, &runs), set(&["http"]));
        // Nobody due: only sources with no running reader are skipped.
        let runs = plan_runs(&subs, &[false, false, false, false], &reference);
        assert_eq!(runs, [false; 4]);
        assert_eq!(sources_to_skip(&subs, &runs), set(&["bots", "events", "http", "messages"]));
        // A detector that cannot run (quarantined) subscribes to nothing here.
        let subs = vec![set(&["messages"]), BTreeSet::new()];
        assert_eq!(plan_runs(&subs, &[true, false], &reference), [true, false]);
    }
}
