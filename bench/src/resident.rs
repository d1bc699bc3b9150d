//! Resident memory of the long-running mode, as a user runs it.
//!
//! Owns one measurement: the release binary in `run --interval 1` over a
//! data dir, with a given detectors dir, sampled from `/proc/<pid>/status`
//! every 250 ms once its first half has passed (the first scans are over
//! and it ticks over unchanged data), then stopped; each field is the
//! median of those samples: `VmRSS` (what `ps` shows), its `RssAnon` part
//! (the process's own pages: heap, stacks, guest memories) and its
//! `RssFile` part (pages of mapped files: the binary and the compiled
//! components it maps from the cache), and `VmHWM`, the peak; and, of
//! `RssFile`, the pages the process touched over that second half
//! (`clear_refs`, then `smaps`' `Referenced`). It also owns
//! the warm-up before a run ([`warm_page_cache`]): `RssFile` counts the
//! mapped pages the page cache holds (a fault maps the cached pages around
//! it too), so a run starts with the compiled components read once into
//! it, the same for every run. And [`median`], per field, of several runs.
//! Linux only (elsewhere it reports nothing). Never judges: the report
//! compares every shipped detector with the Rust ones.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

/// What the long-running binary held.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Resident {
    /// `VmRSS`, KiB.
    pub rss_kib: u64,
    /// `VmHWM` at the last sample, KiB.
    pub peak_kib: u64,
    /// `RssAnon`, KiB: the part of `VmRSS` that is the process's own (heap,
    /// stacks, guest memories), which only exit or swap gives back.
    pub anon_kib: u64,
    /// `RssFile`, KiB: pages mapped from files (the binary, compiled
    /// components from the cache), clean, shared with the page cache, and
    /// what the kernel drops first under a memory limit.
    pub file_kib: u64,
    /// The file-backed pages the process touched over the second half of
    /// its run (`/proc/<pid>/clear_refs` at its start, the file mappings'
    /// `Referenced` in `/proc/<pid>/smaps` at its end, less their private
    /// copies): of `RssFile`, what its ticks use, not what a fault mapped
    /// beside it. 0 where the kernel refuses either.
    pub touched_file_kib: u64,
}

fn status_kib(status: &str, field: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(field))?;
    line[field.len()..].trim().trim_end_matches("kB").trim().parse().ok()
}

/// One sample of `/proc/<pid>/status`.
fn sample(pid: u32) -> Option<Resident> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name| status_kib(&status, name);
    Some(Resident {
        rss_kib: field("VmRSS:")?,
        peak_kib: field("VmHWM:")?,
        anon_kib: field("RssAnon:")?,
        file_kib: field("RssFile:")?,
        touched_file_kib: 0,
    })
}

/// The `Referenced` KiB of the file-backed mappings in a `smaps` text, less
/// their `Anonymous` (private copies of file pages, already in `RssAnon`).
fn touched_file_kib(smaps: &str) -> u64 {
    let (mut total, mut file, mut referenced, mut anonymous) = (0, false, 0u64, 0u64);
    let mut close = |file: bool, referenced: u64, anonymous: u64| {
        if file {
            total += referenced.saturating_sub(anonymous);
        }
    };
    for line in smaps.lines() {
        let mut words = line.split_whitespace();
        let first = words.next().unwrap_or("");
        if first.contains('-') && !first.ends_with(':') {
            // A mapping's header: `start-end perms offset dev inode [path]`.
            close(file, referenced, anonymous);
            (referenced, anonymous) = (0, 0);
            file = words.nth(4).is_some_and(|path| path.starts_with('/'));
        } else if first == "Referenced:" {
            referenced = status_kib(line, "Referenced:").unwrap_or(0);
        } else if first == "Anonymous:" {
            anonymous = status_kib(line, "Anonymous:").unwrap_or(0);
        }
    }
    close(file, referenced, anonymous);
    total
}

/// The median of each field of `runs` (the lower middle for an even
/// count); the peak is the highest.
pub fn median(runs: &[Resident]) -> Option<Resident> {
    let mid = |f: fn(&Resident) -> u64| {
        let mut v: Vec<u64> = runs.iter().map(f).collect();
        v.sort_unstable();
        v[(v.len() - 1) / 2]
    };
    (!runs.is_empty()).then(|| Resident {
        rss_kib: mid(|r| r.rss_kib),
        peak_kib: runs.iter().map(|r| r.peak_kib).max().unwrap_or(0),
        anon_kib: mid(|r| r.anon_kib),
        file_kib: mid(|r| r.file_kib),
        touched_file_kib: mid(|r| r.touched_file_kib),
    })
}

/// Reads every file under `dir` (one level: the compiled-component cache)
/// once, so that the page cache holds all of them when a run starts.
/// Returns the bytes read.
pub fn warm_page_cache(dir: &Path) -> Result<u64> {
    let mut bytes = 0;
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let path = entry?.path();
        if path.is_file() {
            let mut f = std::fs::File::open(&path).with_context(|| format!("cannot open {}", path.display()))?;
            bytes += std::io::copy(&mut f, &mut std::io::sink())?;
        }
    }
    Ok(bytes)
}

/// Runs `host run --interval 1` for `for_how_long`, then reads its memory
/// (the median of the samples of its second half).
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
    let mut samples = Vec::new();
    let mut cleared = false;
    while started.elapsed() < for_how_long {
        std::thread::sleep(Duration::from_millis(250));
        if let Some(status) = child.try_wait()? {
            anyhow::bail!("the long-running binary stopped early: {status}");
        }
        if started.elapsed() < for_how_long / 2 {
            continue;
        }
        if !cleared {
            cleared = std::fs::write(format!("/proc/{}/clear_refs", child.id()), "1").is_ok();
        }
        samples.extend(sample(child.id()));
    }
    let smaps = std::fs::read_to_string(format!("/proc/{}/smaps", child.id())).unwrap_or_default();
    child.kill()?;
    child.wait()?;
    let touched = if cleared { touched_file_kib(&smaps) } else { 0 };
    Ok(median(&samples).map(|m| Resident { touched_file_kib: touched, ..m }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(rss: u64, peak: u64, anon: u64, file: u64) -> Resident {
        Resident { rss_kib: rss, peak_kib: peak, anon_kib: anon, file_kib: file, touched_file_kib: file / 2 }
    }

    #[test]
    fn the_touched_file_pages_are_the_file_mappings_referenced_less_their_private_copies() {
        let smaps = "\
55d0-55e0 r-xp 00000000 08:01 123 /usr/bin/sentinel-host
Rss:                 900 kB
Referenced:          600 kB
Anonymous:             0 kB
55e0-55f0 rw-p 00010000 08:01 123 /usr/bin/sentinel-host
Referenced:           40 kB
Anonymous:            30 kB
7f00-7f10 rw-p 00000000 00:00 0
Referenced:         5000 kB
Anonymous:          5000 kB
7f10-7f20 r--p 00000000 08:01 99 /cache/abc.cwasm
Referenced:          250 kB
Anonymous:             0 kB
7ffc-7ffd rw-p 00000000 00:00 0 [stack]
Referenced:           12 kB
";
        assert_eq!(touched_file_kib(smaps), 600 + 10 + 250, "the heap and the stack are not files");
    }

    #[test]
    fn this_processs_own_smaps_show_touched_file_pages() {
        // This process: its own binary is a file mapping it has touched.
        let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else { return };
        assert!(touched_file_kib(&smaps) > 0);
    }

    #[test]
    fn runs_are_summed_up_by_the_median_of_each_field_and_the_highest_peak() {
        let runs = [r(300, 310, 100, 200), r(900, 950, 120, 780), r(320, 330, 110, 210)];
        assert_eq!(median(&runs), Some(r(320, 950, 110, 210)), "one run with a full page cache moves nothing");
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn the_status_fields_are_read_in_kib() {
        let status = "Name:\tsentinel-host\nVmHWM:\t   84000 kB\nVmRSS:\t   83000 kB\nRssAnon:\t   21000 kB\nRssFile:\t   62000 kB\n";
        assert_eq!(status_kib(status, "RssFile:"), Some(62000));
        assert_eq!(status_kib(status, "RssShmem:"), None);
        let own = sample(std::process::id()).expect("this process's status");
        assert!(own.rss_kib >= own.anon_kib && own.rss_kib > 0, "{own:?}");
    }

    #[test]
    fn the_warm_up_reads_every_file_of_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.cwasm"), vec![1u8; 5000]).unwrap();
        std::fs::write(dir.path().join("b.cwasm"), vec![2u8; 3000]).unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        assert_eq!(warm_page_cache(dir.path()).unwrap(), 8000);
    }
}
