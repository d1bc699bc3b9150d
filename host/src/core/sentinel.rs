//! The sentinel: the long-lived core that owns the runtime, the loaded
//! detectors and the only writer of one output folder, across scans.
//!
//! It owns, for as long as it lives: the output folder's writer lock and
//! ledger (a second process on the same folder is refused), the wasmtime
//! runtime (one engine, created on the first scan that needs it), the
//! fire log's signing key (opened with the ledger, from its own file), the
//! [`Catalog`] of loaded detectors (each file loaded once, again when it
//! changes), and the operator's commands, applied between scans, each in a
//! transaction of its own. A scan borrows all of it ([`crate::scan`]). It
//! never prints, never installs signal handlers and never loops: the
//! long-running mode ([`crate::core::daemon`]) decides when to scan and hands it
//! the commands that reach it over a channel ([`Handle`]).

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock, mpsc};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::base::out_dir::{self, OutDirError};
use crate::core::catalog::{Catalog, Refresh};
use crate::ledger::{Admin, Ledger, LedgerError};
use crate::model::standing::{self, Health};
use crate::runtime::Runtime;
use crate::scan::{Scan, ScanError, ScanOptions, ScanReport, resolve_data_dir};

/// What an operator (the watch API's admin routes, or the kicker) may ask of a
/// running sentinel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Scan now instead of at the next interval.
    ScanNow,
    /// A watched directory changed: scan now, and this scan runs the fast
    /// sentinels (the kicker's command).
    Kick,
    /// Look at the detectors folder again now (changed files are reloaded).
    Reload,
    /// Bench a detector: not run for the quarantine time.
    Quarantine(String),
    /// Let a quarantined detector back, on probation.
    Release(String),
    /// Run a disabled detector again; it reads what it missed.
    Enable(String),
    /// Stop running a detector; its positions stay where they are.
    Disable(String),
    /// Run a detector at the next scan whatever its cadence, and scan now;
    /// a diagnostic fire records it, naming the tenant it was aimed at.
    ForceWake { detector: String, tenant: String },
    /// Mark an issue fixed, with the operator's note; a `fix` fire records it.
    FixIssue { sig: String, note: Option<String> },
    /// Set a fixed or regressed issue open again; a `reopen` fire records it.
    ReopenIssue(String),
}

impl Command {
    /// Whether the long-running mode should scan at once after applying it.
    pub fn scans(&self) -> bool {
        matches!(self, Command::ScanNow | Command::Kick | Command::ForceWake { .. })
    }

    fn detector(&self) -> Option<&str> {
        match self {
            Command::ScanNow | Command::Kick | Command::Reload | Command::FixIssue { .. } | Command::ReopenIssue(_) => {
                None
            }
            Command::Quarantine(d)
            | Command::Release(d)
            | Command::Enable(d)
            | Command::Disable(d)
            | Command::ForceWake { detector: d, .. } => Some(d),
        }
    }
}

/// What a command did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "applied")]
pub enum Applied {
    /// A scan was asked for; it runs next.
    ScanQueued,
    Reloaded {
        loaded: Vec<PathBuf>,
        dropped: Vec<PathBuf>,
    },
    Health {
        health: Health,
    },
    Admin {
        detector: String,
        disabled: bool,
        wake: bool,
    },
    /// A force-wake: queued, with its diagnostic fire.
    #[serde(rename_all = "camelCase")]
    Woken {
        detector: String,
        tenant: String,
        fire_seq: u64,
    },
    /// An issue's state changed, with the fire that records it.
    Issue {
        change: crate::ledger::StateChange,
    },
}

/// One loaded detector as the watch API lists it: what its descriptor says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RosterEntry {
    pub name: String,
    pub version: String,
    pub emits: Vec<String>,
    /// Its cooldown (a stock sentinel's from the sentinels file), seconds.
    pub cadence_seconds: Option<u32>,
    /// A stock sentinel's cadence class.
    pub class: Option<crate::config::stock::Class>,
    pub path: PathBuf,
}

/// The loaded detectors, published by the core after every look at the
/// folder, read by anyone (the watch API) without waiting for a scan.
#[derive(Debug, Clone, Default)]
pub struct Roster(Arc<RwLock<Vec<RosterEntry>>>);

impl Roster {
    pub fn get(&self) -> Vec<RosterEntry> {
        self.0.read().map(|r| r.clone()).unwrap_or_default()
    }

    fn set(&self, entries: Vec<RosterEntry>) {
        if let Ok(mut r) = self.0.write() {
            *r = entries;
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("no detector named {0} is loaded")]
    UnknownDetector(String),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error(transparent)]
    Scan(#[from] ScanError),
    #[error(transparent)]
    Issue(#[from] crate::ledger::LifecycleError),
    #[error("the sentinel is gone: it stopped before it answered")]
    Gone,
}

/// One command on its way to the sentinel, with where its answer goes.
#[derive(Debug)]
pub struct Request {
    pub command: Command,
    pub reply: mpsc::Sender<Result<Applied, CommandError>>,
}

/// The sending end of a sentinel's commands; cheap to clone, usable from
/// any thread.
#[derive(Debug, Clone)]
pub struct Handle(mpsc::Sender<Request>);

impl Handle {
    /// A handle and the receiver the long-running mode takes commands from.
    pub fn channel() -> (Handle, mpsc::Receiver<Request>) {
        let (tx, rx) = mpsc::channel();
        (Handle(tx), rx)
    }

    /// Sends `command` and waits until the sentinel has applied it (between
    /// scans: at most one scan's time).
    pub fn send(&self, command: Command) -> Result<Applied, CommandError> {
        let (reply, answer) = mpsc::channel();
        self.0.send(Request { command, reply }).map_err(|_| CommandError::Gone)?;
        answer.recv().map_err(|_| CommandError::Gone)?
    }
}

/// Runs one scan: a [`Sentinel`] for one scan (what `run --once` does).
pub fn run_scan(opts: &ScanOptions) -> Result<ScanReport, ScanError> {
    Sentinel::open(opts.clone())?.scan()
}

/// The long-lived core of one output folder.
pub struct Sentinel {
    opts: ScanOptions,
    data_dir: PathBuf,
    out: PathBuf,
    cache_dir: PathBuf,
    ledger: Ledger,
    runtime: Option<Runtime>,
    catalog: Catalog,
    /// Why the ledger was started again when it was opened, told once.
    state_reset: Option<String>,
    roster: Roster,
    /// A kick arrived since the last scan (see [`Sentinel::watch_for_kicks`]).
    kick_pending: bool,
    /// See [`Sentinel::take_key_notice`].
    key_notice: Option<String>,
    /// Detector builds loaded since the last scan that no longer produce a
    /// fixed issue's signature: told in the next scan's summary.
    regression_warnings: Vec<crate::scan::RegressionWarning>,
}

impl std::fmt::Debug for Sentinel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sentinel").field("out", &self.out).field("catalog", &self.catalog).finish_non_exhaustive()
    }
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

impl Sentinel {
    /// Resolves the data dir and the output folder, takes the folder's
    /// writer lock and opens its ledger. Nothing is loaded yet.
    pub fn open(opts: ScanOptions) -> Result<Self, ScanError> {
        let data_dir = resolve_data_dir(opts.data_dir.as_deref())?;
        let out = out_dir::prepare(opts.out.as_deref(), &data_dir)?;
        let cache_dir = match &opts.cache_dir {
            Some(dir) => {
                let dir = out_dir::resolve(dir);
                if dir.starts_with(&data_dir) {
                    return Err(ScanError::OutDir(OutDirError::InsideDataDir { out: dir, data_dir }));
                }
                dir
            }
            None => out_dir::cache_dir(&out, &data_dir),
        };
        crate::firelog::KeyFile::locate_outside(&out, opts.key_file.as_deref(), &data_dir)
            .map_err(|e| ScanError::Ledger(crate::ledger::LedgerError::Key(Box::new(e))))?;
        let mut ledger = Ledger::open(&out)?;
        let key_notice = ledger.open_signing_key(opts.key_file.as_deref())?.notice();
        let state_reset = ledger.reset_reason().map(str::to_owned);
        Ok(Sentinel {
            opts,
            data_dir,
            out,
            cache_dir,
            ledger,
            runtime: None,
            catalog: Catalog::default(),
            state_reset,
            roster: Roster::default(),
            kick_pending: false,
            key_notice,
            regression_warnings: Vec::new(),
        })
    }

    /// What opening the signing key did, when it did more than open it (an
    /// older folder's key moved out, a new key for a new log): told once.
    pub fn take_key_notice(&mut self) -> Option<String> {
        self.key_notice.take()
    }

    pub fn out_dir(&self) -> &Path {
        &self.out
    }

    /// The data dir, resolved.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    pub fn options(&self) -> &ScanOptions {
        &self.opts
    }

    /// Components loaded since this sentinel was opened.
    pub fn loads(&self) -> u64 {
        self.catalog.loads()
    }

    fn runtime(&mut self) -> Result<&Runtime, ScanError> {
        if self.runtime.is_none() {
            let runtime = Runtime::new(self.opts.limits.clone())?.with_cache(self.cache_dir.clone());
            self.runtime = Some(runtime);
        }
        Ok(self.runtime.as_ref().expect("just made"))
    }

    /// Looks at the detectors folder again: changed and new files are
    /// loaded, removed ones dropped, the others kept.
    pub fn reload(&mut self) -> Result<Refresh, ScanError> {
        let dir = self.opts.detectors_dir.clone();
        self.runtime()?;
        let runtime = self.runtime.as_ref().expect("made above");
        let refresh = self.catalog.refresh(runtime, &dir)?;
        self.check_regressions(|d| refresh.loaded.contains(&d.path));
        self.roster.set(
            self.catalog
                .listing()
                .0
                .iter()
                .map(|(d, _)| RosterEntry {
                    name: d.descriptor.name.clone(),
                    version: d.descriptor.version.clone(),
                    emits: d.descriptor.emits.clone(),
                    cadence_seconds: self
                        .opts
                        .config
                        .cooldown_seconds(&d.descriptor.name, d.descriptor.cadence_seconds),
                    class: crate::config::stock::find(&d.descriptor.name).map(|s| s.class),
                    path: d.path.clone(),
                })
                .collect(),
        );
        Ok(refresh)
    }

    /// Runs the regression cases of the loaded detectors `pick` chooses:
    /// every file just loaded (a changed file, or every file at the first
    /// look), or the one whose case a fix just captured (its baseline). A
    /// build that no longer produces a fixed issue's signature gets its
    /// `diagnostic` fire (once per build and signature) and a line in the
    /// next summary. A failure is logged, never the scan's.
    fn check_regressions(&mut self, pick: impl Fn(&crate::runtime::LoadedDetector) -> bool) {
        let Some(runtime) = self.runtime.as_ref() else { return };
        let at = self.opts.scan_time_ms.unwrap_or_else(now_ms);
        for (detector, _) in self.catalog.listing().0.into_iter().filter(|(d, _)| pick(d)) {
            match crate::core::regression::check::check_build(runtime, &mut self.ledger, &self.out, detector, at) {
                Ok(warnings) => {
                    for w in &warnings {
                        tracing::warn!(detector = %w.detector, sig = %w.sig, fire = w.fire_seq, why = %w.why,
                            "a detector update no longer produces a fixed issue's signature");
                    }
                    self.regression_warnings.extend(warnings);
                }
                Err(e) => tracing::warn!(
                    detector = %detector.descriptor.name,
                    error = %crate::base::sanitize::one_line(&crate::base::errors::error_chain(&e)),
                    "the regression cases could not be checked"
                ),
            }
        }
    }

    /// The loaded detectors as published after every look at the folder.
    /// From now on the fast sentinels run only in scans a [`Command::Kick`]
    /// asked for (a watcher kicks them), and in the first scan they ever
    /// run; without this, every scan is a kick (a run under a schedule).
    pub fn watch_for_kicks(&mut self) {
        self.opts.kicked = Some(false);
    }

    pub fn roster(&self) -> Roster {
        self.roster.clone()
    }

    /// One scan: the fast path when nothing changed, else plan → read →
    /// fan out → stage → settle → commit, with the detectors kept loaded.
    pub fn scan(&mut self) -> Result<ScanReport, ScanError> {
        let started = Instant::now();
        if self.opts.kicked.is_some() {
            self.opts.kicked = Some(std::mem::take(&mut self.kick_pending));
        }
        // The watchdog's budget runs for this scan only, never between scans.
        self.opts.deadline = self.opts.scan_budget.map(|b| started + b);
        let result = self.scan_from(started).map(|mut r| {
            r.regression_warnings = std::mem::take(&mut self.regression_warnings);
            r
        });
        self.opts.deadline = None;
        if result.is_ok() {
            self.digest_if_due();
        }
        result
    }

    /// The threshold rule and the daily digest, when `[report]` asks for
    /// them; a failure is logged (the next scan tries again), never the scan's.
    fn digest_if_due(&mut self) {
        let Some(cfg) = self.opts.config.report.clone() else { return };
        let now = self.opts.scan_time_ms.unwrap_or_else(now_ms);
        if let Some(rule) = crate::core::digest::threshold_rule(&cfg) {
            match self.ledger.mark_thresholds(&rule, now) {
                Ok(fired) if !fired.is_empty() => tracing::info!(fires = ?fired, "issues crossed the threshold"),
                Ok(_) => {}
                Err(e) => tracing::warn!(
                    error = %crate::base::sanitize::one_line(&crate::base::errors::error_chain(&e)),
                    "the threshold rule could not be applied; the next scan tries again"
                ),
            }
        }
        match crate::core::digest::if_due(&mut self.ledger, &self.out, &cfg, now) {
            Ok(Some(made)) => tracing::info!(
                since = made.period.since,
                until = made.period.until,
                file = ?made.file,
                fire = ?made.fire,
                "daily digest made"
            ),
            Ok(None) => {}
            Err(e) => tracing::warn!(
                error = %crate::base::sanitize::one_line(&crate::base::errors::error_chain(&e)),
                "the daily digest could not be made; the next scan tries again"
            ),
        }
    }

    fn scan_from(&mut self, started: Instant) -> Result<ScanReport, ScanError> {
        let scan_time = self.opts.scan_time_ms.unwrap_or_else(now_ms);
        if self.opts.stopped() {
            return Err(self.opts.stop_error("starting"));
        }
        self.ledger.finish_pending_export()?;
        let mut sources = self.opts.config.sources();
        if self.opts.config.health_bound() {
            sources.push(Box::new(crate::sources::HealthSource::new(self.out.clone())));
        }
        sources.sort_by_key(|s| !s.is_reference());
        let stamp = crate::scan::fast_path::stamp(&sources, &self.data_dir, &self.opts);
        let unchanged = crate::scan::fast_path::unchanged(
            &self.ledger,
            stamp.as_deref(),
            &self.opts,
            self.state_reset.is_some(),
            scan_time,
        )?;
        if let Some(last) = unchanged {
            return crate::scan::unchanged(&self.ledger, &self.data_dir, &self.out, scan_time, started, last);
        }
        self.opts.tell(|| crate::scan::Progress::at(crate::scan::ScanPhase::Loading, 0, 0, 0));
        self.reload()?;
        if self.opts.stopped() {
            return Err(self.opts.stop_error("loading the detectors"));
        }
        let runtime = self.runtime.as_ref().expect("reload made it");
        let (loaded, refused) = self.catalog.listing();
        let scan = Scan {
            opts: &self.opts,
            data_dir: &self.data_dir,
            out: &self.out,
            ledger: &mut self.ledger,
            runtime,
            scan_time,
            started,
            state_reset: self.state_reset.take(),
            sources,
            stamp,
        };
        scan.run(loaded, refused)
    }

    /// Applies one command between scans, in a transaction of its own.
    pub fn apply(&mut self, command: &Command) -> Result<Applied, CommandError> {
        if let Some(name) = command.detector()
            && !self.is_loaded(name)?
        {
            return Err(CommandError::UnknownDetector(name.to_owned()));
        }
        let now = self.opts.scan_time_ms.unwrap_or_else(now_ms);
        let policy = self.opts.health;
        let admin = |ledger: &mut Ledger, name: &str, change: &dyn Fn(&mut Admin)| {
            let mut a = ledger.admin(name)?;
            change(&mut a);
            ledger.set_admin(name, &a)?;
            Ok::<_, LedgerError>(Applied::Admin { detector: name.to_owned(), disabled: a.disabled, wake: a.wake })
        };
        Ok(match command {
            Command::ScanNow => Applied::ScanQueued,
            Command::Kick => {
                self.kick_pending = true;
                Applied::ScanQueued
            }
            Command::Reload => {
                let r = self.reload()?;
                Applied::Reloaded { loaded: r.loaded, dropped: r.dropped }
            }
            Command::Quarantine(name) => Applied::Health {
                health: self.ledger.change_health(name, now, |h| standing::quarantine_by_hand(h, now, &policy))?,
            },
            Command::Release(name) => {
                Applied::Health { health: self.ledger.change_health(name, now, |h| standing::release(h, &policy))? }
            }
            Command::Enable(name) => admin(&mut self.ledger, name, &|a| a.disabled = false)?,
            Command::Disable(name) => admin(&mut self.ledger, name, &|a| a.disabled = true)?,
            Command::ForceWake { detector, tenant } => {
                admin(&mut self.ledger, detector, &|a| a.wake = true)?;
                let version = self.roster.get().into_iter().find(|r| &r.name == detector).map(|r| r.version);
                let reason = format!("force-wake by the operator; tenant {tenant}");
                let fire_seq = self.ledger.diagnostic_fire(detector, version, now, reason)?;
                Applied::Woken { detector: detector.clone(), tenant: tenant.clone(), fire_seq }
            }
            Command::FixIssue { sig, note } => {
                let mut change = self.ledger.fix_issue(sig, now, note.as_deref())?;
                change.case = Some(crate::core::regression::capture::capture_fixed(
                    &self.ledger,
                    &change,
                    (&self.out, &self.data_dir),
                    &self.opts.config,
                    &self.opts.detector_config,
                    now,
                ));
                if let Some(crate::ledger::CaseCapture::Captured { .. }) = &change.case {
                    self.check_regressions(|d| d.descriptor.name == change.detector);
                }
                Applied::Issue { change }
            }
            Command::ReopenIssue(sig) => Applied::Issue { change: self.ledger.reopen_issue(sig, now)? },
        })
    }

    /// Whether a detector of that name is loaded (the folder is looked at
    /// first when nothing is loaded yet).
    fn is_loaded(&mut self, name: &str) -> Result<bool, ScanError> {
        if self.catalog.loads() == 0 {
            self.reload()?;
        }
        Ok(self.catalog.listing().0.iter().any(|(d, _)| d.descriptor.name == name))
    }
}
