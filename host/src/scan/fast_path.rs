//! The unchanged-data fast path: when nothing a scan could read, load or be
//! configured with changed since the last scan, and no queued work crossed
//! its threshold, the scan stops before loading or reading anything.
//!
//! It owns the stamp (a digest of what decides that) and the check against
//! what the last scan stored. It never reads a record.

use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use super::ScanOptions;
use crate::ledger::{Ledger, LedgerError, MetaKey};
use crate::sources::Source;

/// Whether this scan may stop at once: its stamp is the last scan's, the
/// state was not reset, and no wake-up (cadence, queued work) has come.
pub(crate) fn unchanged(
    ledger: &Ledger,
    stamp: Option<&str>,
    opts: &ScanOptions,
    reset: bool,
    scan_time: i64,
) -> Result<Option<Option<i64>>, LedgerError> {
    let Some(stamp) = stamp else { return Ok(None) };
    if opts.no_fast_path || reset || ledger.meta(&MetaKey::FastStamp)?.as_deref() != Some(stamp) {
        return Ok(None);
    }
    if ledger.meta_ms(&MetaKey::NextWake)?.is_some_and(|w| scan_time >= w) {
        return Ok(None);
    }
    Ok(Some(ledger.meta_ms(&MetaKey::LastScan)?))
}

/// A digest of everything that decides whether a scan can find anything new:
/// the host version, each source's watched files (size, modification time,
/// inode), the detector files, the config and the limits. `None` when a
/// source cannot tell (an HTTP endpoint): then every run scans.
pub(crate) fn stamp(sources: &[Box<dyn Source>], data_dir: &Path, opts: &ScanOptions) -> Option<String> {
    use sha2::{Digest, Sha256};
    use std::fmt::Write;
    let mut text = format!("v{}\n", env!("CARGO_PKG_VERSION"));
    let mut stat = |p: &Path| {
        let line = match std::fs::metadata(p) {
            Ok(m) => {
                let mtime =
                    m.modified().ok().and_then(|t| t.duration_since(UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos());
                #[cfg(unix)]
                let ino = std::os::unix::fs::MetadataExt::ino(&m);
                #[cfg(not(unix))]
                let ino = 0;
                format!("{} {} {mtime} {ino}", p.display(), m.len())
            }
            Err(_) => format!("{} -", p.display()),
        };
        let _ = writeln!(text, "{line}");
    };
    for s in sources {
        for p in s.watch(data_dir)? {
            stat(&p);
        }
    }
    let mut detectors: Vec<PathBuf> = std::fs::read_dir(&opts.detectors_dir)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "wasm"))
        .collect();
    detectors.sort();
    for p in &detectors {
        stat(p);
    }
    let _ = writeln!(
        text,
        "{}\n{:?}\n{:?}\n{:?}",
        opts.config.digest, opts.global_config, opts.detector_config, opts.limits
    );
    Some(crate::base::hex(&Sha256::digest(text.as_bytes())[..16]))
}
