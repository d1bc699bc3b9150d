//! Peak memory of a child process: the real `sentinel-host` binary run as a
//! user would, its peak resident set read from `wait4`'s resource usage.
//!
//! Linux and macOS only (both report `ru_maxrss`; in KiB on Linux, bytes on
//! macOS). Never used to judge a test: the benchmark only reports it.

use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// How a measured child ended.
#[derive(Debug, Clone)]
pub struct ChildRun {
    pub wall: Duration,
    pub peak_rss_kib: u64,
    pub stdout: Vec<u8>,
}

/// Runs `cmd` to completion and returns its wall time and peak RSS. A
/// non-zero exit is an error carrying its stderr.
pub fn measure(cmd: &mut Command) -> Result<ChildRun> {
    let started = Instant::now();
    let stdout = tempfile::tempfile()?;
    let stderr = tempfile::tempfile()?;
    let child = cmd
        .stdout(stdout.try_clone()?)
        .stderr(stderr.try_clone()?)
        .spawn()
        .with_context(|| format!("cannot start {cmd:?}"))?;
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain old data, zero is a valid value for it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own child, not yet reaped (`child` is never waited
    // on by std); the pointers are valid for the call.
    let got = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall = started.elapsed();
    if got != pid {
        bail!("wait4 on {cmd:?} failed: {}", std::io::Error::last_os_error());
    }
    let read = |mut f: std::fs::File| -> Result<Vec<u8>> {
        use std::io::{Read, Seek};
        let mut v = Vec::new();
        f.seek(std::io::SeekFrom::Start(0))?;
        f.read_to_end(&mut v)?;
        Ok(v)
    };
    let out = read(stdout)?;
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        let err = read(stderr)?;
        bail!("{cmd:?} failed (wait status {status}): {}", String::from_utf8_lossy(&err));
    }
    let max = usage.ru_maxrss.max(0) as u64;
    let peak_rss_kib = if cfg!(target_os = "macos") { max / 1024 } else { max };
    Ok(ChildRun { wall, peak_rss_kib, stdout: out })
}
