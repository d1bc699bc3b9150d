//! The daily digest, made by the scans themselves: the first scan at or after
//! the configured local hour (`[report] daily_at_hour`) writes the digest of
//! everything since the last one into the output folder and records a
//! `digest` fire, which the dispatcher delivers through its gate like any
//! other.
//!
//! It owns when a digest is due (the latest local `hour:00` at or before the
//! scan, later than the last digest's end: a machine off for three days
//! covers the whole stretch in one digest), the files' names
//! (`digests/digest-YYYY-MM-DD.{md,json}`, by the local date it is due,
//! `0600`), and the rule that a quiet period writes and sends nothing ("an
//! empty run is a correct run") while still moving the end on. The first
//! scan with the setting starts the series: no digest of the time before.
//! The same step applies the threshold rule ([`threshold_rule`]: `[report]
//! threshold_count` or `threshold_wasted_turns` in `threshold_window`) after
//! every scan. It never fails a scan (the caller logs a failure and the next
//! scan tries again: nothing is recorded until the files are written) and
//! never computes a digest itself ([`crate::report`]).

use std::path::{Path, PathBuf};

use crate::base::calendar::{self, DAY_MS, day_of};
use crate::config::ReportConfig;
use crate::ledger::threshold::ThresholdRule;
use crate::ledger::{ISSUE_DAYS_KEPT, Ledger, LedgerError, LedgerView};
use crate::report::{Format, Period, render};

/// The folder of the output folder the digests are written into.
pub const DIGESTS_DIR: &str = "digests";

/// Why a digest could not be made.
#[derive(Debug, thiserror::Error)]
pub enum DigestError {
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error("cannot write the digest {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A digest this scan made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Made {
    pub period: Period,
    /// Its Markdown file; `None` for a quiet period (nothing written).
    pub file: Option<PathBuf>,
    /// The `digest` fire's sequence number, for a period that was not quiet.
    pub fire: Option<u64>,
}

/// The threshold rule `cfg` sets, if it sets a count or a number of wasted
/// turns (the window in whole hours, checked when the config was loaded).
pub fn threshold_rule(cfg: &ReportConfig) -> Option<ThresholdRule> {
    if cfg.threshold_count.is_none() && cfg.threshold_wasted_turns.is_none() {
        return None;
    }
    let window_hours = crate::config::parse_duration(&cfg.threshold_window).map_or(1, |ms| (ms / 3_600_000) as i64);
    Some(ThresholdRule { count: cfg.threshold_count, wasted_turns: cfg.threshold_wasted_turns, window_hours })
}

/// The digest due at `now` for the output folder `out`, made and recorded,
/// or `None` when none is due (or `[report]` sets no hour).
pub fn if_due(ledger: &mut Ledger, out: &Path, cfg: &ReportConfig, now: i64) -> Result<Option<Made>, DigestError> {
    let Some(hour) = cfg.daily_at_hour else { return Ok(None) };
    let offset = calendar::local_offset_ms(now);
    let due = calendar::last_local_hour(now, hour, offset);
    let Some(last) = ledger.digest_until()? else {
        // The series starts here: the next digest covers from this hour on.
        ledger.record_digest(due, now, None)?;
        return Ok(None);
    };
    if last >= due {
        return Ok(None);
    }
    let period = Period { since: last.max(due - ISSUE_DAYS_KEPT * DAY_MS), until: due };
    let view = LedgerView::open(out)?;
    let digest = crate::report::digest_of(view.as_ref(), period, cfg.top)?;
    drop(view);
    if digest.is_quiet() {
        ledger.record_digest(due, now, None)?;
        return Ok(Some(Made { period, file: None, fire: None }));
    }
    let dir = out.join(DIGESTS_DIR);
    let write = |path: &Path, text: &str| {
        crate::base::private_fs::write_atomic(path, text.as_bytes())
            .map_err(|source| DigestError::Write { path: path.to_owned(), source })
    };
    crate::base::private_fs::create_dir(&dir).map_err(|source| DigestError::Write { path: dir.clone(), source })?;
    let name = format!("digest-{}", calendar::date(day_of(due + offset)));
    let (md, json) = (dir.join(format!("{name}.md")), dir.join(format!("{name}.json")));
    write(&json, &render::render(&digest, Format::Json))?;
    write(&md, &render::render(&digest, Format::Markdown))?;
    let summary = format!("{DIGESTS_DIR}/{name}.md: {}", render::summary(&digest));
    let fire = ledger.record_digest(due, now, Some(summary))?;
    Ok(Some(Made { period, file: Some(md), fire }))
}
