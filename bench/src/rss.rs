//! Peak memory of the real `sentinel-host` binary, run as a user would.
//!
//! The host reports its own peak (`peakRssKib` in `--json`, Linux's `VmHWM`,
//! which starts again at exec). A parent's view through `wait4` would not
//! do: Linux folds the parent's peak at spawn time into the child's
//! `ru_maxrss`, so it would measure the benchmark. Never used to judge a
//! test: the benchmark only reports it.

use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// How a measured child ended.
#[derive(Debug, Clone)]
pub struct ChildRun {
    pub wall: Duration,
    /// The host's own `peakRssKib`, when it reported one.
    pub peak_rss_kib: Option<u64>,
    pub summary: serde_json::Value,
}

/// Runs a `sentinel-host ... --json` command to completion.
pub fn measure(cmd: &mut Command) -> Result<ChildRun> {
    let started = Instant::now();
    let out = cmd.output().with_context(|| format!("cannot start {cmd:?}"))?;
    let wall = started.elapsed();
    if !out.status.success() {
        bail!("{cmd:?} failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr));
    }
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).context("the host's --json summary")?;
    Ok(ChildRun { wall, peak_rss_kib: summary["peakRssKib"].as_u64(), summary })
}
