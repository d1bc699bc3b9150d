//! `issues`: the operator's list of issues and their life, from the command
//! line.
//!
//! It owns those commands: the output folder chosen as a scan would, the
//! issues read through the read-only view (`list`, `show`: a running scan is
//! never waited for), and a fix or a reopen through the ledger under its
//! writer lock (refused while a scan runs: the watch API's admin routes go
//! through the running core instead). A fix keeps the issue's regression
//! case (its latest evidence record read again, read-only, through the
//! config's sources: [`crate::core::regression::capture`]); apart from that
//! read it never touches the data dir.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::base::out_dir;
use crate::config::Config;
use crate::core::regression::capture::capture_fixed;
use crate::ledger::{IssueLine, IssueState, Ledger, LedgerView, LifecycleError, StateChange};
use crate::scan::{ScanError, resolve_data_dir};

/// Why an `issues` command failed.
#[derive(Debug, thiserror::Error)]
pub enum IssuesError {
    #[error(transparent)]
    Scan(#[from] ScanError),
    #[error(transparent)]
    Lifecycle(#[from] LifecycleError),
    #[error("no issue has the signature `{0}`")]
    Unknown(String),
}

fn out_folder(data_dir: Option<&Path>, out: Option<&Path>) -> Result<PathBuf, ScanError> {
    let data_dir = resolve_data_dir(data_dir)?;
    Ok(out_dir::prepare(out, &data_dir)?)
}

/// The issues of the output folder, those in `state` only when given.
pub fn list(
    data_dir: Option<&Path>,
    out: Option<&Path>,
    state: Option<IssueState>,
) -> Result<Vec<IssueLine>, IssuesError> {
    let out = out_folder(data_dir, out)?;
    let Some(view) = LedgerView::open(&out).map_err(ScanError::from)? else { return Ok(Vec::new()) };
    let issues = view.issues().map_err(ScanError::from)?;
    Ok(issues.into_iter().filter(|i| state.is_none_or(|s| i.state == s)).collect())
}

/// The issue with signature `sig`, and its regression case's file when one
/// is kept.
pub fn show(
    data_dir: Option<&Path>,
    out: Option<&Path>,
    sig: &str,
) -> Result<(IssueLine, Option<PathBuf>), IssuesError> {
    let out = out_folder(data_dir, out)?;
    let view = LedgerView::open(&out).map_err(ScanError::from)?;
    let issue = match view {
        Some(v) => v.issue(sig).map_err(ScanError::from)?,
        None => None,
    };
    let issue = issue.ok_or_else(|| IssuesError::Unknown(sig.to_owned()))?;
    Ok((issue, crate::core::regression::find_case(&out, sig)))
}

/// What to fix or reopen.
#[derive(Debug, Clone, Copy)]
pub enum Change<'a> {
    /// Mark it fixed, with the operator's note; its regression case is
    /// captured through the sources this config makes.
    Fix {
        note: Option<&'a str>,
        config: &'a Config,
    },
    Reopen,
}

/// Fixes or reopens `sig`; its fire is signed with the key in `key_file`
/// (else the folder's default key file). With it, what opening the key did
/// when it did more than open it ([`crate::firelog::KeyOpened::notice`]).
pub fn change(
    data_dir: Option<&Path>,
    out: Option<&Path>,
    key_file: Option<&Path>,
    sig: &str,
    what: Change<'_>,
) -> Result<(StateChange, Option<String>), IssuesError> {
    let data_dir = resolve_data_dir(data_dir)?;
    let out = out_dir::prepare(out, &data_dir).map_err(ScanError::from)?;
    crate::firelog::KeyFile::locate_outside(&out, key_file, &data_dir)
        .map_err(|e| ScanError::Ledger(crate::ledger::LedgerError::Key(Box::new(e))))?;
    let mut ledger = Ledger::open(&out).map_err(ScanError::from)?;
    let notice = ledger.open_signing_key(key_file).map_err(ScanError::from)?.notice();
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0);
    let change = match what {
        Change::Fix { note, config } => {
            let mut change = ledger.fix_issue(sig, now, note)?;
            let at = (out.as_path(), data_dir.as_path());
            change.case = Some(capture_fixed(&ledger, &change, at, config, &[], now));
            change
        }
        Change::Reopen => ledger.reopen_issue(sig, now)?,
    };
    Ok((change, notice))
}
