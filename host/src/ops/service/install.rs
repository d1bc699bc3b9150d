//! Installing: writing the current platform's schedule and its manifest into
//! sentinel's own output folder.
//!
//! It owns [`install`] (the paths resolved and checked, the detectors loaded
//! once so a broken one is named now, the files written `0600`) and the
//! [`Manifest`] beside them. It never runs `systemctl`, `launchctl` or
//! `schtasks` and never writes outside the output folder.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::text::{install_commands, installed_dir, render, uninstall_commands};
use super::{INTERVAL_SECONDS, MANIFEST_FILE, Platform, Schedule, ServiceError};
use crate::base::out_dir;
use crate::runtime::{Limits, Runtime};

/// What `service install` recorded, beside the schedule: the detector files
/// present then, so `check-install` can tell one went missing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub platform: Platform,
    #[serde(flatten)]
    pub schedule: Schedule,
    pub detectors: Vec<PathBuf>,
    pub interval_seconds: u32,
}

/// Where the schedule is for, and from which binary.
#[derive(Debug, Clone)]
pub struct InstallOptions {
    pub platform: Platform,
    /// The detectors folder; `None` means `./detectors`.
    pub detectors_dir: Option<PathBuf>,
    pub data_dir: Option<PathBuf>,
    pub out: Option<PathBuf>,
    /// The binary the schedule runs; `None` means this process's executable.
    pub binary: Option<PathBuf>,
    /// The config file; `None` means the default file when it exists.
    pub config: Option<PathBuf>,
    /// The sentinels file; `None` means `SENTINELS_CONFIG_PATH`, else the
    /// default path when a file is there.
    pub sentinels: Option<PathBuf>,
}

/// What `service install` wrote and what to run next.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InstallOutcome {
    pub platform: Platform,
    pub schedule: Schedule,
    pub detectors: Vec<PathBuf>,
    pub files: Vec<PathBuf>,
    pub commands: Vec<String>,
    pub uninstall_commands: Vec<String>,
    /// Why the schedule may break sooner than it should (a binary in a build folder).
    pub warnings: Vec<String>,
}

/// Why a binary at `binary` is a fragile thing for a schedule to run, if it is.
pub fn fragile_binary(binary: &Path) -> Option<String> {
    let in_build = binary
        .parent()
        .and_then(|p| p.parent())
        .is_some_and(|p| p.file_name().is_some_and(|n| n == "target") && p.join("CACHEDIR.TAG").exists());
    let in_temp = binary.starts_with(out_dir::resolve(&std::env::temp_dir()));
    (in_build || in_temp).then(|| {
        format!(
            "the schedule runs {}, which is in a {} folder: it breaks when that is cleaned or moved; install the binary somewhere stable (for example `cargo install --path host`) and run service install from there",
            binary.display(),
            if in_build { "cargo build" } else { "temporary" }
        )
    })
}

fn check_path(p: &Path) -> Result<(), ServiceError> {
    let Some(s) = p.to_str() else {
        return Err(ServiceError::BadPath { path: p.to_owned(), why: "it is not valid UTF-8" });
    };
    if s.contains(['\n', '\r']) {
        return Err(ServiceError::BadPath { path: p.to_owned(), why: "it contains a line break" });
    }
    Ok(())
}

/// Writes the platform's schedule and the manifest into the output folder
/// (chosen exactly as `run` chooses it) and returns the commands that install
/// it. Every detector must load now, so a fresh install always passes
/// [`check_install`](super::check_install). Nothing is written anywhere else.
pub fn install(opts: &InstallOptions) -> Result<InstallOutcome, ServiceError> {
    let data_dir = crate::scan::resolve_data_dir(opts.data_dir.as_deref())?;
    let out = out_dir::choose(opts.out.as_deref(), &data_dir)?;
    let binary = match &opts.binary {
        Some(b) => b.clone(),
        None => std::env::current_exe().map_err(ServiceError::CurrentExe)?,
    };
    let binary = out_dir::resolve(&binary);
    let detectors_dir = out_dir::resolve(opts.detectors_dir.as_deref().unwrap_or(Path::new("detectors")));
    let detectors = crate::runtime::detector_files(&detectors_dir)?;
    if detectors.is_empty() {
        return Err(ServiceError::NoDetectors { path: detectors_dir });
    }
    let config = opts.config.clone().or_else(crate::config::default_path).map(|p| out_dir::resolve(&p));
    let sentinels = opts.sentinels.clone().or_else(crate::config::sentinels_path).map(|p| out_dir::resolve(&p));
    // The files must parse now: a schedule that fails every scan is stale at once.
    crate::config::Config::load_with(config.as_deref(), sentinels.as_deref())?;
    let schedule = Schedule { binary, detectors_dir, data_dir, out: out.clone(), config, sentinels };
    for p in schedule.paths() {
        check_path(p)?;
    }
    out_dir::create(&out)?;
    // Loaded exactly as a scan loads them (duplicate names refused too), and
    // compiled into the cache the scheduled scans use, so the first starts warm.
    let runtime = Runtime::new(Limits::default())?.with_cache(out_dir::cache_dir(&out, &schedule.data_dir));
    if let Some(e) = runtime.load_dir(&schedule.detectors_dir)?.into_iter().find_map(Result::err) {
        return Err(ServiceError::DetectorRefused {
            path: e.path().to_owned(),
            reason: crate::base::errors::error_chain(&e),
        });
    }
    let mut files = Vec::new();
    for (name, text) in render(opts.platform, &schedule) {
        let path = out.join(name);
        write_file(&path, text.as_bytes())?;
        files.push(path);
    }
    let manifest = Manifest {
        platform: opts.platform,
        schedule: schedule.clone(),
        detectors: detectors.clone(),
        interval_seconds: INTERVAL_SECONDS,
    };
    let path = out.join(MANIFEST_FILE);
    let json = serde_json::to_vec_pretty(&manifest)
        .map_err(|e| ServiceError::Write { path: path.clone(), source: std::io::Error::other(e) })?;
    write_file(&path, &json)?;
    files.push(path);
    let installed = installed_dir(opts.platform);
    Ok(InstallOutcome {
        warnings: fragile_binary(&schedule.binary).into_iter().collect(),
        platform: opts.platform,
        commands: install_commands(opts.platform, &out, installed.as_deref()),
        uninstall_commands: uninstall_commands(opts.platform, installed.as_deref()),
        schedule,
        detectors,
        files,
    })
}

/// Writes a file `0600`, atomically.
fn write_file(path: &Path, bytes: &[u8]) -> Result<(), ServiceError> {
    crate::base::private_fs::write_atomic(path, bytes)
        .map_err(|source| ServiceError::Write { path: path.to_owned(), source })
}
