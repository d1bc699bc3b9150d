//! What a scan reports: per source and per detector, with statuses as enums
//! serialized to the strings the JSON summary has always shown.
//!
//! It owns the report's shape and the small rules of reading it (which
//! detectors count as failed). It never decides a status: the plan, the fan
//! out and the settling do, and write it here.

use std::path::PathBuf;

use serde::Serialize;

use crate::ledger::CommitReport;
use crate::model::failure::{Failure, FailureKind, Phase};
use crate::model::standing::Standing;
use crate::runtime::{CallFailure, CallStats};

/// How a detector fared in this scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DetectorStatus {
    /// Ran and completed.
    Ok,
    /// Loaded, but a call failed (or its config did not fit it).
    Failed,
    /// Not loaded.
    Refused,
    /// Loaded, not run: quarantined.
    Quarantined,
    /// Loaded, not run: its cadence has not come round (it loses nothing).
    NotDue,
    /// Loaded, not run: the operator disabled it (it loses nothing).
    Disabled,
}

/// How a source was read in this scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SourceStatus {
    Ok,
    /// The file it reads is not there.
    Missing,
    Failed,
    /// Nobody who reads it runs this scan: every position in it stays.
    NotRead,
}

/// Whether a detector's compiled component was loaded for this scan or kept
/// from an earlier one (the long-running mode loads each file once).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LoadKind {
    Loaded,
    Kept,
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
    pub status: DetectorStatus,
    /// Loaded for this scan, or kept loaded from an earlier one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load: Option<LoadKind>,
    /// For a detector with a cadence: when it is next due (ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_due: Option<i64>,
    /// Its health after this scan.
    pub health: Standing,
    /// It ran on probation: its fires were marked `probation` (a field, never the title).
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
    /// Why a stock sentinel sees nothing or does not run: its roles that no
    /// source fills, or the sentinels config turning it off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub logs: Vec<String>,
}

impl DetectorSummary {
    /// A detector that loaded, before the scan decides anything about it.
    pub(crate) fn loaded(d: &crate::runtime::LoadedDetector, load: LoadKind) -> Self {
        DetectorSummary {
            name: d.descriptor.name.clone(),
            path: d.path.clone(),
            version: Some(d.descriptor.version.clone()),
            status: DetectorStatus::Ok,
            load: Some(load),
            cache: Some(d.cache.label()),
            ..Self::blank()
        }
    }

    /// A file that did not load. A refusal that is a failed call (its
    /// `describe`, or the instantiation before it) keeps that call's kind
    /// (`memory`, `table`, `instances`, `fuel`, ...) and phase; every other
    /// is of kind `load`.
    pub(crate) fn refused(path: PathBuf, name: String, error: &crate::runtime::LoadError) -> Self {
        let message = crate::base::errors::error_chain(error);
        let failure = match error {
            crate::runtime::LoadError::Describe { failure: f, .. } => FailureSummary {
                kind: f.kind,
                phase: Some(f.phase),
                message,
                backtrace: f.backtrace.clone(),
                stderr: f.stderr.clone(),
            },
            _ => FailureSummary::new(FailureKind::Load, message),
        };
        DetectorSummary { name, path, status: DetectorStatus::Refused, failure: Some(failure), ..Self::blank() }
    }

    fn blank() -> Self {
        DetectorSummary {
            name: String::new(),
            path: PathBuf::new(),
            version: None,
            status: DetectorStatus::Ok,
            load: None,
            next_due: None,
            health: Standing::Ok,
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
            failure: None,
            note: None,
            logs: Vec::new(),
        }
    }

    pub(crate) fn fill_stats(&mut self, stats: &CallStats) {
        self.records = stats.records;
        self.calls = stats.calls;
        self.fuel = stats.fuel;
        self.slowest_call_us = stats.slowest.as_micros() as u64;
        self.finish_us = stats.finish.as_micros() as u64;
        self.start_us = stats.start.as_micros() as u64;
        self.calls_us = stats.total.as_micros() as u64;
    }

    pub(crate) fn fail(&mut self, f: &CallFailure) {
        self.status = DetectorStatus::Failed;
        self.failure = Some(FailureSummary {
            kind: f.kind,
            phase: Some(f.phase),
            message: f.message.clone(),
            backtrace: f.backtrace.clone(),
            stderr: f.stderr.clone(),
        });
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FailureSummary {
    pub kind: FailureKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backtrace: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
}

impl FailureSummary {
    pub(crate) fn new(kind: FailureKind, message: String) -> Self {
        FailureSummary { kind, phase: None, message, backtrace: None, stderr: None }
    }

    /// What the detector's health keeps of it.
    pub(crate) fn failure(&self) -> Failure {
        Failure { kind: self.kind, phase: self.phase }
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceSummary {
    pub name: String,
    pub status: SourceStatus,
    pub records: u64,
    pub skipped: u64,
    /// Reads of this source this scan: one per distinct position among the
    /// detectors that read it (more than one while a detector catches up).
    pub reads: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Entries the source passed over (a FIFO, a link), one line each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl SourceSummary {
    /// A source this scan did not read (everyone who reads it waits).
    pub fn not_read(name: &str) -> SourceSummary {
        SourceSummary {
            name: name.to_owned(),
            status: SourceStatus::NotRead,
            records: 0,
            skipped: 0,
            reads: 0,
            error: None,
            warnings: Vec::new(),
        }
    }
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
    /// Time the commit spent on the fire log (appending and exporting), µs.
    pub fire_log_us: u64,
    /// Where a full scan's time went; absent when it took the fast path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phases: Option<Phases>,
    /// The process's peak resident memory so far, in KiB (Linux: `VmHWM`);
    /// absent where the system does not tell.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_rss_kib: Option<u64>,
    /// In the long-running mode, when a change in a fast sentinel's
    /// directory last kicked a scan (ms); set by the caller that watches.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_kick: Option<i64>,
    /// Detector files loaded for this scan that no longer produce a fixed
    /// issue's signature from its regression case, each with its
    /// `diagnostic` fire (told once per build and signature).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub regression_warnings: Vec<RegressionWarning>,
}

/// A detector build that would no longer catch a fixed issue coming back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RegressionWarning {
    pub detector: String,
    /// The fixed issue's signature it no longer produces.
    pub sig: String,
    /// The `diagnostic` fire that records it.
    pub fire_seq: u64,
    /// What it did instead, one line.
    pub why: String,
}

/// A full scan's time by phase, in µs of wall clock. The four follow one
/// another; what is left of `elapsedMs` is opening, planning and loading.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Phases {
    /// Reading every source while the detectors take the batches and their
    /// observations are staged (three threads that overlap).
    pub read_us: u64,
    /// The detectors' `finish` calls, their states and health.
    pub decide_us: u64,
    /// The ledger's commit: the counts moved into the store in one
    /// transaction.
    pub commit_us: u64,
    /// After it, the exports: `issues.jsonl`, the fire log's changed
    /// segments and its signed head.
    pub export_us: u64,
}

impl ScanReport {
    /// Detectors that did not do their part: failed, refused or quarantined.
    /// One waiting for its cadence or disabled by the operator lost nothing
    /// and is not counted.
    pub fn failed_detectors(&self) -> usize {
        self.detectors
            .iter()
            .filter(|d| !matches!(d.status, DetectorStatus::Ok | DetectorStatus::NotDue | DetectorStatus::Disabled))
            .count()
    }
}

/// This process's peak resident set in KiB, from `/proc/self/status`
/// (`VmHWM`, which starts again at exec, unlike `getrusage`'s figure).
pub fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?.trim().trim_end_matches("kB").trim().parse().ok()
}
