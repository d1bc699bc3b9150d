//! Resident memory of the long-running mode, as a user runs it.
//!
//! Owns one measurement: the release binary in `run --interval 1` over a
//! data dir, with a given detectors dir, sampled from `/proc/<pid>/status`
//! (`VmRSS` after its ticks have settled, its `RssAnon` part, and `VmHWM`,
//! the peak) for a few
//! seconds, then stopped. Linux only (elsewhere it reports nothing). Never
//! judges: the report compares every shipped detector with the Rust ones.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

/// What the long-running binary held.
#[derive(Debug, Clone, Copy, Default)]
pub struct Resident {
    /// `VmRSS` at the last sample, KiB.
    pub rss_kib: u64,
    /// `VmHWM` at the last sample, KiB.
    pub peak_kib: u64,
    /// `RssAnon` at the last sample, KiB: the part of `VmRSS` that is the
    /// process's own (heap, stacks, guest memories), not pages mapped from
    /// files (the binary, compiled components from the cache), which the
    /// kernel shares and can drop.
    pub anon_kib: u64,
}

fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line[field.len()..].trim().trim_end_matches("kB").trim().parse().ok()
}

/// Runs `host run --interval 1` for `for_how_long`, then reads its memory.
pub fn long_running(
    host: &Path,
    detectors: &Path,
    data_dir: &Path,
    cache: &Path,
    for_how_long: Duration,
) -> Result<Option<Resident>> {
    if !cfg!(target_os = "linux") {
        return Ok(None);
    }
    let out = tempfile::tempdir()?;
    // The signing key of this throwaway folder: never in the user's config folder.
    let key = tempfile::tempdir()?;
    let mut child = Command::new(host)
        .args(["run", "--interval", "1", "--detectors"])
        .arg(detectors)
        .arg("--data-dir")
        .arg(data_dir)
        .arg("--out")
        .arg(out.path())
        .arg("--key-file")
        .arg(key.path().join("bench.ed25519"))
        .arg("--cache-dir")
        .arg(cache)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("cannot start {}", host.display()))?;
    let started = Instant::now();
    let mut last = None;
    while started.elapsed() < for_how_long {
        std::thread::sleep(Duration::from_millis(250));
        if let Some(status) = child.try_wait()? {
            anyhow::bail!("the long-running binary stopped early: {status}");
        }
        let field = |name| status_kib(child.id(), name);
        if let (Some(rss_kib), Some(peak_kib), Some(anon_kib)) = (field("VmRSS:"), field("VmHWM:"), field("RssAnon:")) {
            last = Some(Resident { rss_kib, peak_kib, anon_kib });
        }
    }
    child.kill()?;
    child.wait()?;
    Ok(last)
}
