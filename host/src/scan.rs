//! One scan, end to end: sources → detectors → ledger.
//!
//! The scan loads the detectors, reads each source once (reference sources
//! first) and fans every batch out to the detectors subscribed to it, asks
//! each for its decision, and commits what they report, with the sources'
//! cursors and the detectors' state, in one ledger transaction. A detector
//! that fails or is refused is reported and left out; a source that cannot be
//! read is reported and its cursor is kept. The scan never prints: it returns
//! a [`ScanReport`] for the CLI to render.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::ledger::out_dir::{self, OutDirError};
use crate::ledger::{CommitReport, HealthUpdate, Ledger, LedgerError, ScanCommit};
use crate::observation::{ConfigValue, Descriptor, Observation};
use crate::runtime::{CallFailure, DetectorScan, Limits, PreparedBatch, Runtime, RuntimeError, ScanContext};
use crate::sources::{self, ReadContext};

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
    /// `ok`, `failed` (loaded but a call failed) or `refused` (not loaded).
    pub status: &'static str,
    pub observations: usize,
    pub records: u64,
    pub calls: u32,
    pub fuel: u64,
    /// The slowest call and the final decision call, in microseconds.
    pub slowest_call_us: u64,
    pub finish_us: u64,
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
    /// `ok`, `missing` or `failed`.
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
    /// Why the ledger's state was started again at this scan, if it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state_reset: Option<String>,
    pub sources: Vec<SourceSummary>,
    pub detectors: Vec<DetectorSummary>,
    pub issues: CommitReport,
}

impl ScanReport {
    pub fn failed_detectors(&self) -> usize {
        self.detectors.iter().filter(|d| d.status != "ok").count()
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

/// The config a detector gets: its defaults, overridden by operator values of
/// the same key, each checked against the default's type.
fn detector_config(d: &Descriptor, opts: &ScanOptions) -> Result<Vec<(String, ConfigValue)>, ScanError> {
    let mut out = Vec::with_capacity(d.config.len());
    for key in &d.config {
        let given = opts
            .detector_config
            .iter()
            .rev()
            .find(|(det, k, _)| *det == d.name && *k == key.name)
            .map(|(_, _, v)| v)
            .or_else(|| opts.global_config.iter().rev().find(|(k, _)| *k == key.name).map(|(_, v)| v));
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
fn coerce(v: &ConfigValue, default: &ConfigValue) -> Option<ConfigValue> {
    use ConfigValue as C;
    Some(match (v, default) {
        (C::Boolean(b), C::Boolean(_)) => C::Boolean(*b),
        (C::Integer(i), C::Integer(_)) => C::Integer(*i),
        (C::Integer(i), C::Float(_)) => C::Float(*i as f64),
        (C::Float(f), C::Float(_)) => C::Float(*f),
        (C::Integer(i), C::DurationMs(_)) if *i >= 0 => C::DurationMs(*i as u64 * 1000),
        (C::DurationMs(d), C::DurationMs(_)) => C::DurationMs(*d),
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

    let runtime = Runtime::new(opts.limits.clone())?;
    let mut summaries = Vec::new();
    let mut loaded = Vec::new();
    for result in runtime.load_dir(&opts.detectors_dir)? {
        match result {
            Ok(d) => {
                summaries.push(DetectorSummary {
                    name: d.descriptor.name.clone(),
                    path: d.path.clone(),
                    version: Some(d.descriptor.version.clone()),
                    status: "ok",
                    observations: 0,
                    records: 0,
                    calls: 0,
                    fuel: 0,
                    slowest_call_us: 0,
                    finish_us: 0,
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
                observations: 0,
                records: 0,
                calls: 0,
                fuel: 0,
                slowest_call_us: 0,
                finish_us: 0,
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

    let mut sources = sources::default_sources();
    sources.sort_by_key(|s| !s.is_reference());
    let mut cursors_in = BTreeMap::new();
    for s in &sources {
        cursors_in.insert(s.name(), ledger.cursor(s.name())?);
    }
    let window_start = 0;

    let mut active: Vec<Active<'_>> = Vec::new();
    for (index, d) in loaded.iter().enumerate() {
        let config = detector_config(&d.descriptor, opts)?;
        let state = ledger.state(&d.descriptor.name)?;
        let ctx = ScanContext { scan_time_ms: scan_time, window_start_ms: window_start, config, state };
        match runtime.start_scan(d, ctx) {
            Ok(scan) => active.push(Active { index, scan }),
            Err(f) => record_failure(&mut summaries[loaded_summary[index]], &f),
        }
    }

    let mut source_summaries = Vec::new();
    let mut cursors_out = BTreeMap::new();
    for source in &sources {
        let ctx = ReadContext {
            data_dir: &data_dir,
            scan_time_ms: scan_time,
            batch_rows: opts.batch_rows.max(1),
            cursor: cursors_in.get(source.name()).and_then(|c| c.as_deref()),
        };
        let mut sink = |batch| {
            let batch = PreparedBatch::new(batch);
            let mut i = 0;
            while i < active.len() {
                let wants = loaded[active[i].index]
                    .descriptor
                    .subscriptions
                    .iter()
                    .any(|s| s.source == batch.source() && s.kind == batch.kind());
                if wants && let Err(f) = active[i].scan.push(&batch) {
                    let gone = active.remove(i);
                    let summary = &mut summaries[loaded_summary[gone.index]];
                    fill_stats(summary, gone.scan.stats());
                    record_failure(summary, &f);
                    continue;
                }
                i += 1;
            }
            Ok(())
        };
        match source.read(&ctx, &mut sink) {
            Ok(report) => {
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

    let mut observations: Vec<Observation> = Vec::new();
    let mut states = BTreeMap::new();
    for a in active {
        let summary = &mut summaries[loaded_summary[a.index]];
        match a.scan.finish() {
            Ok(outcome) => {
                fill_stats(summary, &outcome.stats);
                summary.observations = outcome.observations.len();
                summary.logs = outcome.logs.iter().map(|l| format!("{}: {}", l.level, l.message)).collect();
                if outcome.logs_dropped > 0 {
                    summary.logs.push(format!("({} more lines dropped: log budget spent)", outcome.logs_dropped));
                }
                states.insert(loaded[a.index].descriptor.name.clone(), outcome.state);
                observations.extend(outcome.observations);
            }
            Err(f) => record_failure(summary, &f),
        }
    }

    let health = summaries
        .iter()
        .map(|d| HealthUpdate {
            detector: d.name.clone(),
            status: d.status,
            failure: d.failure.as_ref().map(|f| match &f.phase {
                Some(phase) => format!("{} in {phase}", f.kind),
                None => f.kind.to_owned(),
            }),
        })
        .collect();
    let issues =
        ledger.commit(ScanCommit { observations: &observations, cursors: cursors_out, states, health, scan_time })?;
    Ok(ScanReport {
        data_dir,
        issues_file: ledger.issues_path(),
        out_dir: out,
        scan_time,
        elapsed_ms: started.elapsed().as_millis() as u64,
        state_reset,
        sources: source_summaries,
        detectors: summaries,
        issues,
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
