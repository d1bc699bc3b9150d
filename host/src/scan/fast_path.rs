//! The unchanged-data fast path: when nothing a scan could read, load or be
//! configured with changed since the last scan, nothing is owed (no detector
//! behind its sources, no health change for the health source to report, no
//! fire-log file changed by anyone but the ledger's own export), and no
//! wake-up (a cadence, a quarantine ending, queued work) has come, the scan
//! stops before loading or reading anything.
//!
//! It owns the stamp (a digest of what decides that), the rule for what a
//! scan leaves owed, and the check against what the last scan stored. It
//! never reads a record.

use std::path::{Path, PathBuf};

use super::ScanOptions;
use crate::ledger::{Ledger, LedgerError, MetaKey};
use crate::model::standing::Health;
use crate::sources::Source;

/// Whether this scan may stop at once: its stamp is the last scan's (the
/// last scan stores none when it left something owed, see [`owes`]), the
/// state was not reset, the fire log's files are as the ledger last
/// exported them, and no wake-up (cadence, quarantine ending, queued work)
/// has come.
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
    if !ledger.fire_files_as_exported()? {
        return Ok(None);
    }
    if ledger.meta_ms(&MetaKey::NextWake)?.is_some_and(|w| scan_time >= w) {
        return Ok(None);
    }
    Ok(Some(ledger.meta_ms(&MetaKey::LastScan)?))
}

/// Whether a scan whose detectors went from `before` to `after` leaves work
/// owed to the next one, which must then not take the fast path: a detector
/// failed (it is behind its sources and runs again to catch up), or a
/// detector's standing or failure counts changed (the health source reports
/// what the previous scans committed). The time of the last scan alone is
/// not a change.
pub(crate) fn owes(before: &Health, after: &Health) -> bool {
    (&before.state, before.failures_in_a_row, before.failures_total, &before.last_failure)
        != (&after.state, after.failures_in_a_row, after.failures_total, &after.last_failure)
}

/// A digest of everything that decides whether a scan can find anything new:
/// the host version, each source's watched files ([`crate::base::file_stamp`]), the
/// detector files, the config and the limits. `None` when a source cannot
/// tell (an HTTP endpoint): then every run scans.
pub(crate) fn stamp(sources: &[Box<dyn Source>], data_dir: &Path, opts: &ScanOptions) -> Option<String> {
    use sha2::{Digest, Sha256};
    use std::fmt::Write;
    let mut text = format!("v{}\n", env!("CARGO_PKG_VERSION"));
    let mut stat = |p: &Path| {
        let _ = writeln!(text, "{}", crate::base::file_stamp::line(p));
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
