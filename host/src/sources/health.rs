//! The health source: what the host knows about its own detectors and its
//! fire log, synthesized each scan for watch-health-watch.
//!
//! It owns reading the output folder's ledger read-only (as `detectors list`
//! does: no lock, never blocking the writer) and verifying the exported fire
//! log, and turning what it finds into rows of kind `health`: one per
//! quarantined detector, per detector on probation, per detector whose last
//! failure was a hard kill (deadline, fuel, memory), and one when the fire
//! log does not verify. Each row's `key` names the event (the detector and
//! when, or the failures counted so far), so the ledger counts it once however
//! many scans see it. It reports the state the previous scans committed. It
//! never writes, and it never reads the data dir.

use std::path::{Path, PathBuf};

use super::{ReadContext, Sink, Source, SourceError, SourceReport};
use crate::model::record::{BatchBuilder, Cell, Column};
use crate::model::standing::{Health, State};

const COLUMNS: &[Column] =
    &[Column::text("detector"), Column::text("event"), Column::text("detail"), Column::int("at"), Column::text("key")];

/// What a row of the health source reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HealthEvent {
    /// The detector is quarantined (the detail: its last failure).
    Quarantined,
    /// The detector is back on probation.
    Probation,
    /// The sandbox killed its last failed call (the detail: the kind).
    Killed,
    /// The fire log does not verify (the detail: where).
    ChainBroken,
}

impl HealthEvent {
    /// The `event` column's text.
    pub fn as_str(self) -> &'static str {
        match self {
            HealthEvent::Quarantined => "quarantined",
            HealthEvent::Probation => "probation",
            HealthEvent::Killed => "killed",
            HealthEvent::ChainBroken => "chain-broken",
        }
    }
}

/// One row of the health source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthRow {
    pub detector: String,
    pub event: HealthEvent,
    pub detail: Option<String>,
    pub at: i64,
    pub key: String,
}

/// The rows one detector's health gives.
pub fn rows_of(h: &Health) -> Vec<HealthRow> {
    let mut rows = Vec::new();
    let row = |event, detail: Option<String>, key: String| HealthRow {
        detector: h.detector.clone(),
        event,
        detail,
        at: h.last_scan_at,
        key,
    };
    match h.state {
        State::Quarantined { until } => {
            let detail = h.last_failure.map(|f| f.to_string());
            rows.push(row(HealthEvent::Quarantined, detail, format!("quarantined:{}:{until}", h.detector)));
        }
        State::Probation { .. } => {
            rows.push(row(HealthEvent::Probation, None, format!("probation:{}:{}", h.detector, h.failures_total)));
        }
        State::Ok => {}
    }
    if let Some(kind) = h.last_failure.map(|f| f.kind).filter(|k| k.is_kill()) {
        let key = format!("killed:{}:{}", h.detector, h.failures_total);
        rows.push(row(HealthEvent::Killed, Some(kind.label().to_owned()), key));
    }
    rows
}

/// Reads the health of the output folder `out`.
#[derive(Debug, Clone)]
pub struct HealthSource {
    pub out: PathBuf,
}

impl HealthSource {
    pub fn new(out: impl Into<PathBuf>) -> Self {
        HealthSource { out: out.into() }
    }

    fn rows(&self, scan_time: i64) -> Result<Vec<HealthRow>, SourceError> {
        let fail = |e: &dyn std::fmt::Display| SourceError::Read {
            source_name: crate::config::stock::HEALTH_ROLE.to_owned(),
            path: self.out.clone(),
            source: e.to_string().into(),
        };
        let mut rows = Vec::new();
        let mut anchored = false;
        if let Some(view) = crate::ledger::LedgerView::open(&self.out).map_err(|e| fail(&e))? {
            for h in view.health().map_err(|e| fail(&e))? {
                rows.extend(rows_of(&h));
            }
            anchored = view.fire_head().ok().flatten().is_some();
        }
        // A folder with no fire log yet (no fire ever) has nothing to verify;
        // one the ledger anchored, or with any of its files, must verify.
        let files = std::fs::read_dir(&self.out)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| crate::firelog::is_log_file(&e.file_name().to_string_lossy()));
        let v = (anchored || files).then(|| crate::ledger::verify_out_dir(&self.out, None));
        if let Some(v) = v.filter(|v| !v.ok) {
            let f = v.finding.as_ref();
            let place = f.map(|f| {
                format!(
                    "{}{}",
                    f.file.as_deref().unwrap_or("-"),
                    f.line.map(|l| format!(" line {l}")).unwrap_or_default()
                )
            });
            let seq = f.and_then(|f| f.seq).map_or_else(|| "-".to_owned(), |s| s.to_string());
            rows.push(HealthRow {
                detector: "fire-log".into(),
                event: HealthEvent::ChainBroken,
                detail: place.clone(),
                at: scan_time,
                key: format!("chain-broken:{}:{seq}", place.as_deref().unwrap_or("-")),
            });
        }
        Ok(rows)
    }
}

impl Source for HealthSource {
    fn evidence_columns(&self) -> &'static [&'static str] {
        &["detector"]
    }
    fn name(&self) -> &str {
        crate::config::stock::HEALTH_ROLE
    }
    fn kinds(&self) -> &'static [&'static str] {
        &["health"]
    }
    /// Nothing in the data dir: it changes only when a scan commits.
    fn watch(&self, _data_dir: &Path) -> Option<Vec<PathBuf>> {
        Some(Vec::new())
    }

    fn read(&self, ctx: &ReadContext<'_>, sink: &mut Sink<'_>) -> Result<SourceReport, SourceError> {
        let rows = self.rows(ctx.scan_time_ms)?;
        let stopped = |reason: String| SourceError::Stopped { source_name: self.name().to_owned(), reason };
        let mut builder = BatchBuilder::new(self.name(), "health", COLUMNS);
        for r in &rows {
            let row = [
                Cell::Text(&r.detector),
                Cell::Text(r.event.as_str()),
                r.detail.as_deref().map_or(Cell::Null, Cell::Text),
                Cell::Int(r.at),
                Cell::Text(&r.key),
            ];
            builder.push_row(&row).map_err(|e| stopped(e.to_string()))?;
        }
        if !builder.is_empty() {
            sink(builder.take()).map_err(stopped)?;
        }
        Ok(SourceReport { records: rows.len() as u64, ..SourceReport::default() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quarantine_after_a_kill_gives_both_rows_with_stable_keys() {
        let mut h = Health::new("endless_loop");
        h.state = State::Quarantined { until: 99 };
        h.failures_total = 2;
        h.last_failure = Some("deadline in push".parse().unwrap());
        h.last_scan_at = 7;
        let rows = rows_of(&h);
        assert_eq!(rows.iter().map(|r| r.event.as_str()).collect::<Vec<_>>(), ["quarantined", "killed"]);
        assert_eq!(rows[0].key, "quarantined:endless_loop:99");
        assert_eq!(rows[1].detail.as_deref(), Some("deadline"));
        // A failure that is not a kill is not reported as one.
        h.state = State::Ok;
        h.last_failure = Some("trap in push".parse().unwrap());
        assert!(rows_of(&h).is_empty());
    }

    #[test]
    fn an_empty_out_dir_has_no_rows_and_a_tampered_log_one() {
        let dir = tempfile::tempdir().unwrap();
        let src = HealthSource::new(dir.path());
        assert!(src.rows(1).unwrap().is_empty(), "no ledger, no fire log: nothing to say");
        std::fs::write(dir.path().join("fires-000001.ndjson"), "not json\n").unwrap();
        let rows = src.rows(1).unwrap();
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!(rows[0].event.as_str(), "chain-broken");
    }
}
