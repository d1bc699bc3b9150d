//! `report`: the friction digest of a period, from the command line.
//!
//! It owns the command's checks and steps: the period checked (not empty,
//! at most [`MAX_DAYS`]), the output folder chosen as a scan would, the
//! digest made through the read-only view ([`crate::report`]: a running
//! scan is never waited for). It never writes the output folder and never
//! touches the data dir.

use std::path::Path;

use crate::base::calendar::DAY_MS;
use crate::base::out_dir;
use crate::ledger::{ISSUE_DAYS_KEPT, LedgerView};
use crate::report::{Digest, Period};
use crate::scan::{ScanError, resolve_data_dir};

/// The longest period a digest covers (its trend has a point a day).
pub const MAX_DAYS: i64 = ISSUE_DAYS_KEPT;

/// Why a report could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Scan(#[from] ScanError),
    #[error("the period is {days} days long; a digest covers at most {MAX_DAYS}")]
    TooLong { days: i64 },
    #[error("the period is empty: it must end after it starts")]
    Empty,
}

/// The period of `since_ms` ending at `until` (ms since the epoch), checked.
pub fn period(since_ms: u64, until: i64) -> Result<Period, ReportError> {
    let length = i64::try_from(since_ms).unwrap_or(i64::MAX);
    if length == 0 {
        return Err(ReportError::Empty);
    }
    if length / DAY_MS > MAX_DAYS {
        return Err(ReportError::TooLong { days: length / DAY_MS });
    }
    Ok(Period { since: until.saturating_sub(length), until })
}

/// The digest of `period` for the output folder of `data_dir` (or `out`),
/// its costliest cut to `top` (0: all). An output folder with no ledger yet
/// has a quiet digest.
pub fn digest(data_dir: Option<&Path>, out: Option<&Path>, period: Period, top: usize) -> Result<Digest, ReportError> {
    let data_dir = resolve_data_dir(data_dir)?;
    let out = out_dir::prepare(out, &data_dir).map_err(ScanError::from)?;
    let view = LedgerView::open(&out).map_err(ScanError::from)?;
    Ok(crate::report::digest_of(view.as_ref(), period, top).map_err(ScanError::from)?)
}
