//! One scan, as its data flows: plan → read → fan out → stage → settle →
//! report.
//!
//! - [`plan`] decides who runs with what, and which reads feed them (one per
//!   distinct position in a source);
//! - [`read`] runs those reads on a thread of its own, into a bounded channel;
//! - [`fanout`] pushes each batch to the detectors that read it and hands
//!   what they report to a staging thread, which stages and tallies it in
//!   the ledger while the next calls run;
//! - [`settle`] asks for the decisions, works out health and where each
//!   detector's reads leave it, for one commit;
//! - [`report`] is what comes back to the caller.
//!
//! The scan owns none of the long-lived parts: the [`Sentinel`](crate::core::sentinel::Sentinel)
//! holds the runtime, the loaded detectors and the ledger across scans and
//! lends them to [`run`]. A detector that fails or is refused is reported and
//! left out, and keeps its positions; a source that cannot be read is
//! reported and every position in it is kept. The scan never prints.

pub mod fanout;
pub(crate) mod fast_path;
pub mod plan;
pub mod read;
pub mod report;
pub mod settle;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub use crate::base::errors::error_chain;
use crate::base::out_dir::{self, OutDirError};
use crate::config::Config;
use crate::ledger::{CommitReport, Ledger, LedgerError, MetaEntry, ScanCommit};
use crate::model::observation::ConfigValue;
use crate::model::standing::Policy;
use crate::runtime::{Limits, LoadedDetector, Runtime, RuntimeError};
use crate::sources::Source;
pub use plan::{coerce, is_due, next_due, plan_runs};
pub use report::{
    DetectorStatus, DetectorSummary, FailureSummary, LoadKind, Phases, RegressionWarning, ScanReport, SourceStatus,
    SourceSummary, peak_rss_kib,
};
use settle::Settled;

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
    /// The whole-scan watchdog: a scan still running this long after it
    /// started stops before its commit and returns [`ScanError::Overrun`]
    /// naming what held it. `None`: no budget (the binary's default is 300 s).
    pub scan_budget: Option<Duration>,
    /// Whether a watcher kicks the fast sentinels: `None`, nothing does (a
    /// run under a schedule, `--once`), so every scan is a kick; `Some(b)`,
    /// the long-running mode's watcher does, and `b` says whether this scan
    /// was kicked (set by the sentinel as each scan starts).
    pub kicked: Option<bool>,
    /// When the scan in flight overruns its budget (set as each scan starts).
    pub(crate) deadline: Option<Instant>,
    /// The fire log's signing key file (`--key-file`, the config file's
    /// `[fire_log] key_file`); `None`: the folder's default key file
    /// ([`crate::firelog::KeyFile::locate`]).
    pub key_file: Option<PathBuf>,
}

/// Where a scan is, for a progress display.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanPhase {
    Loading,
    Reading,
    Deciding,
    Committing,
}

impl ScanPhase {
    /// The word the progress line shows.
    pub fn as_str(self) -> &'static str {
        match self {
            ScanPhase::Loading => "loading",
            ScanPhase::Reading => "reading",
            ScanPhase::Deciding => "deciding",
            ScanPhase::Committing => "committing",
        }
    }
}

/// How far a scan has got, for a progress display.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    pub phase: ScanPhase,
    /// The source being read.
    pub source: String,
    /// Records read so far, all sources together.
    pub records: u64,
    /// Detectors running, and loaded.
    pub detectors_running: usize,
    pub detectors_total: usize,
}

impl Progress {
    pub(crate) fn at(phase: ScanPhase, records: u64, running: usize, total: usize) -> Self {
        Progress { phase, source: String::new(), records, detectors_running: running, detectors_total: total }
    }
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
            scan_budget: None,
            kicked: None,
            deadline: None,
            key_file: None,
        }
    }

    /// Stop asked for by a signal, or the scan's budget spent.
    pub(crate) fn stopped(&self) -> bool {
        self.stop.as_ref().is_some_and(|s| s.load(Ordering::SeqCst)) || self.overrun()
    }

    fn overrun(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// Why the scan stopped before its commit: its budget was spent while
    /// `held_by` ran, or a signal asked.
    pub(crate) fn stop_error(&self, held_by: impl Into<String>) -> ScanError {
        match (self.overrun(), self.scan_budget) {
            (true, Some(budget)) => {
                ScanError::Overrun { budget_ms: budget.as_millis() as u64, held_by: held_by.into() }
            }
            _ => ScanError::Interrupted,
        }
    }

    pub(crate) fn tell(&self, p: impl FnOnce() -> Progress) {
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
    #[error("scan stopped before it committed: nothing was written")]
    Interrupted,
    #[error(
        "scan overran its {budget_ms} ms budget while {held_by}; it stopped before its commit, nothing was written (--scan-timeout)"
    )]
    Overrun { budget_ms: u64, held_by: String },
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

/// The report of a scan that found nothing changed since `last`: no row
/// read, no detector loaded or run.
pub(crate) fn unchanged(
    ledger: &Ledger,
    data_dir: &Path,
    out: &Path,
    scan_time: i64,
    started: Instant,
    last: Option<i64>,
) -> Result<ScanReport, ScanError> {
    Ok(ScanReport {
        unchanged_since: last.or(Some(0)),
        data_dir: data_dir.to_owned(),
        issues_file: ledger.issues_path(),
        out_dir: out.to_owned(),
        scan_time,
        elapsed_ms: started.elapsed().as_millis() as u64,
        state_reset: None,
        sources: Vec::new(),
        detectors: Vec::new(),
        issues: CommitReport { total_issues: ledger.total_issues()?, ..CommitReport::default() },
        fire_log_us: 0,
        phases: None,
        peak_rss_kib: peak_rss_kib(),
        last_kick: None,
        regression_warnings: Vec::new(),
    })
}

/// What one scan borrows from the sentinel that runs it.
pub(crate) struct Scan<'a> {
    pub opts: &'a ScanOptions,
    pub data_dir: &'a Path,
    pub out: &'a Path,
    pub ledger: &'a mut Ledger,
    pub runtime: &'a Runtime,
    pub scan_time: i64,
    pub started: Instant,
    pub state_reset: Option<String>,
    pub sources: Vec<Box<dyn Source>>,
    pub stamp: Option<String>,
}

impl Scan<'_> {
    /// Runs the scan over `loaded` detectors and the summaries of the files
    /// that did not load.
    pub(crate) fn run(
        self,
        loaded: Vec<(&LoadedDetector, DetectorSummary)>,
        refused: Vec<DetectorSummary>,
    ) -> Result<ScanReport, ScanError> {
        let Scan { opts, data_dir, out, ledger, runtime, scan_time, started, state_reset, sources, stamp } = self;
        let total = loaded.len();
        let mut plan = plan::plan(runtime, loaded, &sources, ledger, opts, scan_time)?;
        let running = plan.slots.iter().filter(|s| s.scan.is_some()).count();
        let versions: std::collections::BTreeMap<String, String> =
            plan.slots.iter().map(|s| (s.name().to_owned(), s.detector.descriptor.version.clone())).collect();
        // Counting starts with the first observation staged (what a scan
        // that stopped before its commit left staged is dropped).
        ledger.begin_scan(scan_time, versions.clone())?;
        let phase = Instant::now();
        let (ends, mut source_summaries, records, next_wake) =
            read_and_fan_out(&mut plan, &sources, ledger, opts, data_dir, scan_time, total, running)?;
        let mut phases = Phases { read_us: micros(phase), ..Phases::default() };
        if opts.stopped() {
            return Err(opts.stop_error("reading the last source"));
        }
        opts.tell(|| Progress::at(ScanPhase::Deciding, records, running, total));
        let phase = Instant::now();
        let limits = (runtime.limits().fires_per_scan, &opts.health);
        let settled = settle::settle(&mut plan, ledger, (&ends, &sources), scan_time, &versions, limits)?;
        phases.decide_us = micros(phase);
        if opts.stopped() {
            return Err(opts.stop_error("the detectors made their decisions"));
        }
        opts.tell(|| Progress::at(ScanPhase::Committing, records, 0, total));
        let next_wake = [next_wake, plan.next_due].into_iter().flatten().min();
        // A source that failed (a file caught mid-change, a query over its
        // budget) must be read again next run even if no file changes.
        let any_failed = source_summaries.iter().any(|s| s.error.is_some());
        // So must a detector that failed (it is behind its sources) and the
        // health source after any health change (it reports what is committed).
        let owed = plan.slots.iter().zip(&settled.health).any(|(slot, after)| fast_path::owes(&slot.health, after));
        let mut meta = vec![
            MetaEntry::FastStamp(stamp.filter(|_| !any_failed && !owed)),
            MetaEntry::NextWake(next_wake),
            MetaEntry::LastScan(scan_time),
        ];
        meta.append(&mut plan.meta);
        let phase = Instant::now();
        let Settled { states, health, positions, cursors } = settled;
        let commit = ScanCommit { observations: &[], cursors, positions, states, health, scan_time, versions, meta };
        let issues = ledger.commit(commit)?;
        phases.export_us = ledger.export_time().as_micros() as u64;
        phases.commit_us = micros(phase).saturating_sub(phases.export_us);
        for slot in plan.slots.iter().filter(|s| s.woken) {
            let admin = crate::ledger::Admin { wake: false, ..slot.admin.clone() };
            ledger.set_admin(slot.name(), &admin)?;
        }
        source_summaries.extend(plan.not_read.iter().map(|&i| SourceSummary::not_read(sources[i].name())));
        let mut detectors: Vec<DetectorSummary> = plan.slots.into_iter().map(|s| s.summary).collect();
        detectors.extend(refused);
        detectors.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(ScanReport {
            data_dir: data_dir.to_owned(),
            issues_file: ledger.issues_path(),
            out_dir: out.to_owned(),
            scan_time,
            elapsed_ms: started.elapsed().as_millis() as u64,
            unchanged_since: None,
            state_reset,
            sources: source_summaries,
            detectors,
            issues,
            fire_log_us: ledger.fire_log_time().as_micros() as u64,
            phases: Some(phases),
            peak_rss_kib: peak_rss_kib(),
            last_kick: None,
            regression_warnings: Vec::new(),
        })
    }
}

fn micros(since: Instant) -> u64 {
    since.elapsed().as_micros() as u64
}

type ReadOutcome = (settle::Ends, Vec<SourceSummary>, u64, Option<i64>);

/// Reads the plan's reads on a thread of their own while this one fans the
/// batches out; returns where each read ended, the sources' summaries, the
/// records read and the moment queued work next crosses a threshold.
#[allow(clippy::too_many_arguments)]
fn read_and_fan_out(
    plan: &mut plan::Plan<'_>,
    sources: &[Box<dyn Source>],
    ledger: &mut Ledger,
    opts: &ScanOptions,
    data_dir: &Path,
    scan_time: i64,
    total: usize,
    running: usize,
) -> Result<ReadOutcome, ScanError> {
    let mut ends: settle::Ends = vec![None; plan.units.len()];
    let mut summaries: Vec<SourceSummary> = Vec::new();
    let mut records: u64 = 0;
    let mut next_wake: Option<i64> = None;
    let stopped = || opts.stopped();
    let units = std::mem::take(&mut plan.units);
    let result = std::thread::scope(|s| -> Result<(), ScanError> {
        let (stager, staging) = fanout::Stager::spawn(s, ledger);
        let reader = read::Reader {
            units: &units,
            sources,
            data_dir,
            scan_time,
            batch_rows: opts.batch_rows,
            stopped: &stopped,
        };
        let fanned = fan_out(
            &stager,
            reader.spawn(s),
            plan,
            Fan { units: &units, sources, opts, scan_time, total },
            (&mut ends, &mut summaries, &mut records, &mut next_wake),
        );
        drop(stager);
        tracing::debug!("reading and detectors done");
        let staged = staging.join().expect("the staging thread does not panic");
        tracing::debug!("staging done");
        // A ledger error stopped the staging thread first: it is the cause.
        staged?;
        fanned.map_err(|e| e.unwrap_or_else(|| unreachable!("staging ended without an error")))
    });
    plan.units = units;
    let _ = running;
    result?;
    Ok((ends, summaries, records, next_wake))
}

/// What [`fan_out`] reads.
struct Fan<'a> {
    units: &'a [plan::Unit],
    sources: &'a [Box<dyn Source>],
    opts: &'a ScanOptions,
    scan_time: i64,
    total: usize,
}

/// What [`fan_out`] fills in: where each read ended, the sources'
/// summaries, the records read, the next wake.
type ReadTotals<'a> = (&'a mut settle::Ends, &'a mut Vec<SourceSummary>, &'a mut u64, &'a mut Option<i64>);

/// The scan thread's part of [`read_and_fan_out`]: every batch to its
/// detectors, every read's end to its summary. `Err(None)`: the staging
/// thread stopped (its join says why).
fn fan_out(
    stager: &fanout::Stager,
    batches: std::sync::mpsc::Receiver<read::Read>,
    plan: &mut plan::Plan<'_>,
    Fan { units, sources, opts, scan_time, total }: Fan<'_>,
    (ends, summaries, records, next_wake): ReadTotals<'_>,
) -> Result<(), Option<ScanError>> {
    {
        let mut reading: Option<usize> = units.first().map(|u| u.source);
        for msg in batches {
            if opts.stopped() {
                let held_by =
                    reading.map_or_else(|| "reading".to_owned(), |i| format!("reading source {}", sources[i].name()));
                return Err(Some(opts.stop_error(held_by)));
            }
            match msg {
                read::Read::Batch(u, batch) => {
                    reading = Some(units[u].source);
                    *records += fanout::push(&mut plan.slots, &units[u], batch, stager).map_err(|_| None)?;
                    opts.tell(|| Progress {
                        source: sources[units[u].source].name().to_owned(),
                        ..Progress::at(
                            ScanPhase::Reading,
                            *records,
                            plan.slots.iter().filter(|s| s.scan.is_some()).count(),
                            total,
                        )
                    });
                }
                read::Read::Done(u, result) => {
                    reading = units.get(u + 1).map(|n| n.source);
                    let name = sources[units[u].source].name();
                    let summary = match summaries.iter().position(|s| s.name == name) {
                        Some(i) => &mut summaries[i],
                        None => {
                            summaries.push(SourceSummary {
                                name: name.to_owned(),
                                status: SourceStatus::Ok,
                                records: 0,
                                skipped: 0,
                                reads: 0,
                                error: None,
                                warnings: Vec::new(),
                            });
                            summaries.last_mut().expect("just pushed")
                        }
                    };
                    summary.reads += 1;
                    match result {
                        Ok(report) => {
                            let waits = units[u].members.iter().filter_map(|&m| plan.slots[m].queue_wait_ms);
                            *next_wake = next_crossing(*next_wake, waits, &report.open_since, scan_time);
                            ends[u] = Some(read_ended(summary, report));
                        }
                        Err(e) => {
                            summary.status = SourceStatus::Failed;
                            summary.error = Some(error_chain(&e));
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// The earliest moment queued work (open since each of `open_since`)
/// crosses a member's threshold after the scan time, with `wake` so far.
fn next_crossing(
    wake: Option<i64>,
    waits: impl Iterator<Item = u64>,
    open_since: &[i64],
    scan_time: i64,
) -> Option<i64> {
    let mut wake = wake;
    for ms in waits {
        for at in open_since {
            let crossing = at.saturating_add(ms as i64);
            if crossing > scan_time {
                wake = Some(wake.map_or(crossing, |w: i64| w.min(crossing)));
            }
        }
    }
    wake
}

/// A read that ended: its counts and warnings into its source's summary;
/// returns where it ended.
fn read_ended(summary: &mut SourceSummary, report: crate::sources::SourceReport) -> Option<String> {
    summary.records += report.records;
    summary.skipped += report.skipped;
    for w in report.warnings {
        if !summary.warnings.contains(&w) {
            summary.warnings.push(w);
        }
    }
    if report.missing && summary.status == SourceStatus::Ok {
        summary.status = SourceStatus::Missing;
    }
    report.cursor
}
