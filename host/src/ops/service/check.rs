//! Checking an installed schedule: reading it back and naming what no longer
//! exists or loads.
//!
//! It owns [`check_install`] and what it reports ([`InstallCheck`]). It only
//! reads: the installed file, the manifest, the binary and the detectors.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::install::Manifest;
use super::text::{installed_dir, parse_command};
use super::{MANIFEST_FILE, Platform, Schedule, ServiceError};
use crate::base::out_dir;
use crate::scan::ScanError;

/// What `check-install` found of one detector file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DetectorCheckStatus {
    /// Present and loads.
    Ok,
    /// Installed with the schedule, now gone.
    Missing,
    /// Present, but no longer loads.
    Refused,
}

/// One detector file of an installed schedule.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DetectorCheck {
    pub path: PathBuf,
    pub status: DetectorCheckStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What `check-install` found.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InstallCheck {
    pub platform: Platform,
    /// The schedule file read.
    pub file: PathBuf,
    /// Whether that file is the copy the scheduler reads (false: the copy in
    /// sentinel's folder, because the scheduler's folder has none).
    pub installed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<Schedule>,
    pub detectors: Vec<DetectorCheck>,
    /// Why the schedule is stale: each a path that is gone or a detector that no longer loads.
    pub problems: Vec<String>,
    /// Worth knowing, not stale.
    pub notes: Vec<String>,
}

impl InstallCheck {
    pub fn stale(&self) -> bool {
        !self.problems.is_empty()
    }
}

/// The outcome of `check-install`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase", rename_all_fields = "camelCase", tag = "status")]
pub enum CheckOutcome {
    /// No schedule anywhere it was looked for.
    NotInstalled {
        looked_in: Vec<PathBuf>,
    },
    Checked(Box<InstallCheck>),
}

/// Finds the schedule and checks that what it runs still exists and loads.
///
/// It reads the copy the scheduler uses when there is one (the unit in
/// `$XDG_CONFIG_HOME/systemd/user`, the plist in `~/Library/LaunchAgents`),
/// else the copy `service install` wrote in sentinel's folder (the output
/// folder for `data_dir`/`out`, chosen as `run` chooses it; on Windows the
/// task runs that copy). The manifest in the schedule's own `--out` folder
/// tells which detector files were installed.
pub fn check_install(
    platform: Platform,
    data_dir: Option<&Path>,
    out: Option<&Path>,
) -> Result<CheckOutcome, ServiceError> {
    let (file, installed) = match find_schedule_file(platform, data_dir, out)? {
        Ok(found) => found,
        Err(looked_in) => return Ok(CheckOutcome::NotInstalled { looked_in }),
    };
    let mut check = InstallCheck {
        platform,
        file: file.clone(),
        installed,
        schedule: None,
        detectors: Vec::new(),
        problems: Vec::new(),
        notes: Vec::new(),
    };
    if !installed {
        check.notes.push(format!(
            "read the copy in sentinel's folder: the scheduler's folder has no {}, so the printed install commands were not run",
            platform.files()[0]
        ));
    }
    let Some(schedule) = read_schedule(&mut check, platform, &file) else {
        return Ok(CheckOutcome::Checked(Box::new(check)));
    };
    check_paths(&mut check, &schedule);
    check_detectors(&mut check, &schedule)?;
    check.schedule = Some(schedule);
    Ok(CheckOutcome::Checked(Box::new(check)))
}

/// The schedule file and whether it is the copy the scheduler reads: the
/// scheduler's folder first, else sentinel's folder; or every path looked in.
fn find_schedule_file(
    platform: Platform,
    data_dir: Option<&Path>,
    out: Option<&Path>,
) -> Result<Result<(PathBuf, bool), Vec<PathBuf>>, ServiceError> {
    let name = platform.files()[0];
    let mut looked_in = Vec::new();
    if let Some(dir) = installed_dir(platform) {
        let p = dir.join(name);
        if p.is_file() {
            return Ok(Ok((p, true)));
        }
        looked_in.push(p);
    }
    let data = match data_dir {
        Some(d) => d.to_owned(),
        None => out_dir::default_data_dir().ok_or(ScanError::NoDataDir)?,
    };
    let folder = out_dir::choose(out, &out_dir::resolve(&data))?;
    let p = folder.join(name);
    if p.is_file() {
        // On Windows the task runs this very copy.
        return Ok(Ok((p, platform == Platform::Windows)));
    }
    looked_in.push(p);
    Ok(Err(looked_in))
}

/// The `run` command the schedule file holds, or the problem naming why
/// there is none.
fn read_schedule(check: &mut InstallCheck, platform: Platform, file: &Path) -> Option<Schedule> {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => {
            check.problems.push(format!("cannot read {}: {e}", file.display()));
            return None;
        }
    };
    let schedule = parse_command(platform, &text).and_then(|args| Schedule::from_command(&args));
    if schedule.is_none() {
        check.problems.push(format!("{} holds no sentinel-host run command", file.display()));
    }
    schedule
}

/// The binary, the config files and the data dir the schedule names.
fn check_paths(check: &mut InstallCheck, schedule: &Schedule) {
    if !schedule.binary.is_file() {
        check.problems.push(format!("binary {} is gone", schedule.binary.display()));
    }
    for (what, file) in [("config file", &schedule.config), ("sentinels file", &schedule.sentinels)] {
        if let Some(file) = file.as_ref().filter(|f| !f.is_file()) {
            check
                .problems
                .push(format!("{what} {} is gone: each scheduled scan exits with a config error", file.display()));
        }
    }
    if !schedule.data_dir.is_dir() {
        check.notes.push(format!(
            "data dir {} does not exist: each scheduled scan exits 5 until it does",
            schedule.data_dir.display()
        ));
    }
}

/// Every detector file the install recorded and the folder holds now,
/// loaded exactly as the scheduled scan will load them.
fn check_detectors(check: &mut InstallCheck, schedule: &Schedule) -> Result<(), ServiceError> {
    let manifest: Option<Manifest> = std::fs::read(schedule.out.join(MANIFEST_FILE))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .filter(|m: &Manifest| m.schedule.detectors_dir == schedule.detectors_dir);
    let runtime = crate::ops::inspect::runtime_for_checks(Some(&schedule.out))?;
    let loaded = match runtime.load_dir(&schedule.detectors_dir) {
        Ok(loaded) => loaded,
        Err(_) => {
            check.problems.push(format!("detectors folder {} is gone", schedule.detectors_dir.display()));
            Vec::new()
        }
    };
    let present: Vec<PathBuf> =
        loaded.iter().map(|l| l.as_ref().map_or_else(|e| e.path().to_owned(), |d| d.path.clone())).collect();
    match &manifest {
        Some(m) => check_missing(check, &m.detectors, &present),
        None => check.notes.push(format!(
            "no {MANIFEST_FILE} from the install in {}: only the detectors there now are checked",
            schedule.out.display()
        )),
    }
    if present.is_empty() && schedule.detectors_dir.is_dir() {
        check.problems.push(format!("detectors folder {} holds no *.wasm detector", schedule.detectors_dir.display()));
    }
    for l in loaded {
        match l {
            Ok(d) => check.detectors.push(DetectorCheck { path: d.path, status: DetectorCheckStatus::Ok, error: None }),
            Err(e) => {
                let error = crate::base::errors::error_chain(&e);
                check.problems.push(format!("detector {} no longer loads: {error}", e.path().display()));
                check.detectors.push(DetectorCheck {
                    path: e.path().to_owned(),
                    status: DetectorCheckStatus::Refused,
                    error: Some(error),
                });
            }
        }
    }
    Ok(())
}

/// The detectors the install recorded that the folder no longer holds.
fn check_missing(check: &mut InstallCheck, installed: &[PathBuf], present: &[PathBuf]) {
    for d in installed.iter().filter(|d| !present.contains(d)) {
        check.problems.push(format!("detector {} is gone", d.display()));
        check.detectors.push(DetectorCheck { path: d.clone(), status: DetectorCheckStatus::Missing, error: None });
    }
}
