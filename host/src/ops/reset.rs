//! `reset`: starting the ledger's state again by hand.
//!
//! It owns that one command: the output folder chosen as a scan would, the
//! ledger opened under its writer lock and its state reset (issues and every
//! fire kept). It
//! never touches the data dir.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::base::out_dir;
use crate::ledger::Ledger;
use crate::scan::{ScanError, resolve_data_dir};

/// What `sentinel-host reset` did.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResetOutcome {
    pub out_dir: PathBuf,
    pub issues_kept: u64,
    /// Every fire: the fire log is never cleared or rewritten by a reset.
    pub fires_kept: u64,
}

/// Starts the ledger's state again by hand, exactly as a release that changes
/// the store's shape does: cursors, occurrence keys and detector state are
/// cleared, issues and every fire are kept (the log goes on from its last
/// entry), and only newer occurrences are counted from now on.
pub fn reset_state(data_dir: Option<&Path>, out: Option<&Path>) -> Result<ResetOutcome, ScanError> {
    let data_dir = resolve_data_dir(data_dir)?;
    let out = out_dir::prepare(out, &data_dir)?;
    let mut ledger = Ledger::open(&out)?;
    let report = ledger.reset_state("reset by hand")?;
    Ok(ResetOutcome { out_dir: out, issues_kept: report.issues_kept, fires_kept: report.fires_kept })
}
