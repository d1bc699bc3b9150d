//! Capturing a fixed issue's case: its latest evidence record read again,
//! read-only, through the very source the scan reads it with.
//!
//! It owns finding the record an evidence reference names (the source of
//! that name read from its start, each batch's row whose evidence column
//! holds the id, the last one read winning), the reference records read
//! beside it (the bots a detector may normalize titles with), and the
//! case written into the output folder. A record that cannot be found any
//! more (rotated away, a row deleted, a source no longer configured) means
//! no case, said so, and never a failed fix. It never writes into the data
//! dir and never parses a data file itself (the [`Source`] does).

use std::path::Path;

use serde_json::Value;

use super::{RegressionCase, write_case};
use crate::ledger::IssueLine;
use crate::model::case_rows::CaseBatch;
use crate::model::observation::ConfigValue;
use crate::model::record::{Batch, Cell};
use crate::sources::{ReadContext, Source};

/// Rows of reference sources kept in a case, at most.
const REFERENCE_ROWS_MAX: usize = 10_000;

pub use crate::ledger::CaseCapture as Capture;

/// What a capture needs: where to read and write, and what was fixed.
pub struct CaptureInput<'a> {
    pub out: &'a Path,
    pub data_dir: &'a Path,
    /// The sources a scan reads (the config's), by the names detectors use.
    pub sources: &'a [Box<dyn Source>],
    /// The detector that last reported the issue.
    pub detector: &'a str,
    pub issue: &'a IssueLine,
    /// Config values given to detectors: `(detector, key, value)`.
    pub config: &'a [(String, String, ConfigValue)],
    pub at: i64,
}

/// Whether `cell` holds `id` (a number as its decimal text).
fn holds(cell: &Cell<'_>, id: &str) -> bool {
    match cell {
        Cell::Text(t) => *t == id,
        Cell::Int(i) => i.to_string() == id,
        _ => false,
    }
}

/// The rows of `batch` the evidence id names: by the source's evidence
/// column when the batch has one, else by any cell.
fn matching_rows(batch: &Batch, columns: &[&str], id: &str) -> Vec<usize> {
    let key = columns.iter().find_map(|name| batch.columns.iter().position(|c| c.name == *name));
    (0..batch.rows as usize)
        .filter(|&row| match key {
            Some(col) => holds(&batch.cell(col, row), id),
            None => (0..batch.columns.len()).any(|col| holds(&batch.cell(col, row), id)),
        })
        .collect()
}

fn read_all(source: &dyn Source, data_dir: &Path, at: i64, mut each: impl FnMut(Batch)) -> Result<(), String> {
    let ctx = ReadContext { data_dir, scan_time_ms: at, batch_rows: 1000, cursor: None };
    let report = source
        .read(&ctx, &mut |batch| {
            each(batch);
            Ok(())
        })
        .map_err(|e| crate::base::sanitize::one_line(&crate::base::errors::error_chain(&e)).into_owned())?;
    if report.missing { Err(format!("source {} is missing from the data dir", source.name())) } else { Ok(()) }
}

/// The latest record of `source` the evidence id names, as a case batch.
fn find_record(source: &dyn Source, data_dir: &Path, id: &str, at: i64) -> Result<Option<CaseBatch>, String> {
    let mut found = None;
    read_all(source, data_dir, at, |batch| {
        if let Some(&row) = matching_rows(&batch, source.evidence_columns(), id).last() {
            found = Some(CaseBatch::of_rows(&batch, &[row]));
        }
    })?;
    Ok(found)
}

/// The reference sources' records (read whole by every scan), bounded.
fn reference_records(sources: &[Box<dyn Source>], skip: &str, data_dir: &Path, at: i64) -> Vec<CaseBatch> {
    let mut out: Vec<CaseBatch> = Vec::new();
    let mut rows = 0usize;
    for source in sources.iter().filter(|s| s.is_reference() && s.name() != skip) {
        // A reference source that cannot be read is left out: the case
        // keeps the evidence record, which is what it is about.
        let _ = read_all(source.as_ref(), data_dir, at, |batch| {
            let take = (batch.rows as usize).min(REFERENCE_ROWS_MAX.saturating_sub(rows));
            if take > 0 {
                rows += take;
                out.push(CaseBatch::of_rows(&batch, &(0..take).collect::<Vec<_>>()));
            }
        });
    }
    out
}

fn config_json(values: &[(String, String, ConfigValue)], detector: &str) -> serde_json::Map<String, Value> {
    values
        .iter()
        .filter(|(d, _, _)| d == detector)
        .map(|(_, k, v)| {
            let v = match v {
                ConfigValue::Boolean(b) => Value::from(*b),
                ConfigValue::Integer(i) => Value::from(*i),
                ConfigValue::Float(f) => Value::from(*f),
                ConfigValue::Text(t) => Value::from(t.as_str()),
                ConfigValue::DurationMs(ms) => Value::from(format!("{ms}ms")),
            };
            (k.clone(), v)
        })
        .collect()
}

/// Finds the issue's latest evidence record and keeps its case; what
/// happened is the answer, never an error (a fix never fails for it).
pub fn capture(input: &CaptureInput<'_>) -> Capture {
    let none = |why: String| Capture::NotCaptured { why };
    let evidence = &input.issue.evidence_ref;
    if input.detector.is_empty() {
        return none("no fire names the detector that reported it".into());
    }
    let Some(source) = input.sources.iter().find(|s| s.name() == evidence.source) else {
        return none(format!("no configured source is named `{}`", evidence.source));
    };
    let record = match find_record(source.as_ref(), input.data_dir, &evidence.id, input.at) {
        Ok(Some(record)) => record,
        Ok(None) => return none(format!("record `{}` is no longer in source {}", evidence.id, evidence.source)),
        Err(why) => return none(format!("source {} could not be read: {why}", evidence.source)),
    };
    let mut records = reference_records(input.sources, &evidence.source, input.data_dir, input.at);
    records.push(record);
    let case = RegressionCase {
        description: format!("fixed issue {} ({}), captured from its evidence", input.issue.sig, input.issue.kind),
        detector: input.detector.to_owned(),
        expect_sig: input.issue.sig.clone(),
        evidence_ref: evidence.clone(),
        captured_at: input.at,
        scan_time: input.at,
        config: config_json(input.config, input.detector),
        records,
    };
    match write_case(input.out, &case) {
        Ok(path) => Capture::Captured { path },
        Err(e) => none(crate::base::sanitize::one_line(&crate::base::errors::error_chain(&e)).into_owned()),
    }
}

/// Keeps the regression case of the issue `change` just fixed, its record
/// read through the sources `config` makes; `extra` config values (the
/// flags') go with the config file's. The fix is committed already: what
/// goes wrong here is told in the answer, never an error.
pub fn capture_fixed(
    ledger: &crate::ledger::Ledger,
    change: &crate::ledger::StateChange,
    (out, data_dir): (&Path, &Path),
    config: &crate::config::Config,
    extra: &[(String, String, ConfigValue)],
    at: i64,
) -> Capture {
    let issue = match ledger.issue(&change.sig) {
        Ok(Some(issue)) => issue,
        Ok(None) => return Capture::NotCaptured { why: "the issue is gone".into() },
        Err(e) => {
            let why = crate::base::sanitize::one_line(&crate::base::errors::error_chain(&e)).into_owned();
            return Capture::NotCaptured { why };
        }
    };
    let mut values = config.detector_values();
    values.extend(extra.iter().cloned());
    let sources = config.sources();
    let input = CaptureInput {
        out,
        data_dir,
        sources: &sources,
        detector: &change.detector,
        issue: &issue,
        config: &values,
        at,
    };
    capture(&input)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::record::{BatchBuilder, Column};
    use crate::sources::{Sink, SourceError, SourceReport};

    /// A source of two `messages` rows (`m1`, `m2`), or a missing file.
    struct Fake {
        missing: bool,
    }

    impl Source for Fake {
        fn name(&self) -> &str {
            "messages"
        }
        fn kinds(&self) -> &'static [&'static str] {
            &["tool-failure"]
        }
        fn read(&self, ctx: &ReadContext<'_>, sink: &mut Sink<'_>) -> Result<SourceReport, SourceError> {
            if self.missing {
                return Ok(SourceReport::missing(ctx));
            }
            let mut b = BatchBuilder::new("messages", "tool-failure", &[Column::text("id"), Column::text("output")]);
            for (id, output) in [("m1", "first"), ("m2", "second")] {
                b.push_row(&[Cell::Text(id), Cell::Text(output)]).unwrap();
            }
            sink(b.take()).map_err(|reason| SourceError::Stopped { source_name: "messages".into(), reason })?;
            Ok(SourceReport::default())
        }
    }

    fn issue(evidence: &str) -> IssueLine {
        serde_json::from_value(serde_json::json!({
            "sig": "tool_error:0123456789abcdef", "kind": "tool_error", "title": "t", "origin": "shell",
            "severity": "medium", "firstAt": 1, "lastAt": 1, "count": 1, "wastedTurns": 0,
            "evidenceRef": {"source": "messages", "id": evidence}
        }))
        .unwrap()
    }

    fn capture_of(evidence: &str, missing: bool, out: &Path) -> Capture {
        let sources: Vec<Box<dyn Source>> = vec![Box::new(Fake { missing })];
        let issue = issue(evidence);
        let input = CaptureInput {
            out,
            data_dir: out,
            sources: &sources,
            detector: "tool_error",
            issue: &issue,
            config: &[("tool_error".into(), "harness_tools".into(), ConfigValue::Text("x*".into()))],
            at: 5,
        };
        capture(&input)
    }

    #[test]
    fn the_evidence_record_alone_is_kept_and_a_record_or_file_gone_is_no_case_said_so() {
        let dir = tempfile::tempdir().unwrap();
        let Capture::Captured { path } = capture_of("m2", false, dir.path()) else { panic!("m2 is there") };
        let case = super::super::read_case(&path).unwrap();
        assert_eq!(case.records.len(), 1);
        assert_eq!((case.records[0].rows.len(), &case.records[0].rows[0]["output"]), (1, &Value::from("second")));
        assert_eq!((case.scan_time, &case.config["harness_tools"]), (5, &Value::from("x*")));
        let why = |c: Capture| match c {
            Capture::NotCaptured { why } => why,
            Capture::Captured { path } => panic!("captured {}", path.display()),
        };
        assert!(why(capture_of("m9", false, dir.path())).contains("no longer in source messages"));
        assert!(why(capture_of("m1", true, dir.path())).contains("missing"));
    }

    #[test]
    fn the_evidence_column_names_the_row_and_a_source_without_one_is_matched_by_any_cell() {
        let cols = [Column::text("id"), Column::int("n")];
        let mut b = BatchBuilder::new("s", "k", &cols);
        b.push_row(&[Cell::Text("4"), Cell::Int(7)]).unwrap();
        b.push_row(&[Cell::Text("x"), Cell::Int(4)]).unwrap();
        let batch = b.take();
        assert_eq!(matching_rows(&batch, &["id"], "4"), [0], "the id column only");
        assert_eq!(matching_rows(&batch, &["url"], "4"), [0, 1], "no such column: any cell");
        assert!(matching_rows(&batch, &["id"], "m9").is_empty());
    }
}
