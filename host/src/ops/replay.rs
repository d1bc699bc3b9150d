//! Replay cases: a detector run against recorded input, its observations
//! compared exactly with what is expected (in the style of `promtool test
//! rules`).
//!
//! A case is a JSON file: the scan time, config values, optional state, the
//! batches of records to push (in order), and the exact observations expected
//! (an empty list means "must not fire"). The case runs in the same sandbox
//! as a scan, through the real component. Observations are compared as the
//! ledger would see them: the signature appears hashed (`sig`), never raw.
//! This module reads case files and never writes, except when asked to bless
//! a case (rewrite its expectation with what the detector produced).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ledger::issue_sig;
pub use crate::model::case_rows::CaseBatch;
use crate::model::case_rows::pack;
use crate::model::observation::{ConfigValue, ObservationRef, Observations};
use crate::runtime::{CallFailure, LoadedDetector, PreparedBatch, Runtime, ScanContext};

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("case {path}: cannot read it")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("case {path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error("case {path}: cannot write the blessed expectation")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A case file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    #[serde(default)]
    pub description: String,
    pub scan_time: i64,
    /// Values for the detector's config keys; others keep their defaults.
    #[serde(default)]
    pub config: serde_json::Map<String, Value>,
    /// State bytes from a previous scan, as a UTF-8 string.
    #[serde(default)]
    pub state: Option<String>,
    pub records: Vec<CaseBatch>,
    pub expect: Vec<Value>,
}

/// How one case went.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CaseResult {
    pub path: PathBuf,
    pub description: String,
    pub passed: bool,
    /// What the detector produced, in the case's shape.
    pub got: Vec<Value>,
    /// Why it failed: the first differences, or the failure of a call.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub differences: Vec<String>,
}

/// An observation in the case's shape: what the ledger would keep.
pub fn observation_json(o: ObservationRef<'_>) -> Value {
    let mut m = serde_json::Map::new();
    m.insert("kind".into(), o.kind.into());
    m.insert("sig".into(), issue_sig(o.kind, o.grouping_version, o.signature).into());
    m.insert("title".into(), o.title.into());
    m.insert("origin".into(), o.origin.as_str().into());
    m.insert("severity".into(), o.severity.as_str().into());
    for (k, v) in [("tool", o.tool), ("botId", o.bot_id), ("threadId", o.thread_id), ("turnId", o.turn_id)] {
        if let Some(v) = v {
            m.insert(k.into(), v.into());
        }
    }
    m.insert("at".into(), o.at.into());
    m.insert("occurrence".into(), o.occurrence.into());
    m.insert("evidenceRef".into(), serde_json::json!({"source": o.evidence_source, "id": o.evidence_id}));
    m.insert("wastedTurns".into(), o.wasted_turns.into());
    m.insert("groupingVersion".into(), o.grouping_version.into());
    Value::Object(m)
}

fn config_value(v: &Value) -> Option<ConfigValue> {
    Some(match v {
        Value::Bool(b) => ConfigValue::Boolean(*b),
        Value::Number(n) if n.is_i64() => ConfigValue::Integer(n.as_i64()?),
        Value::Number(n) => ConfigValue::Float(n.as_f64()?),
        Value::String(s) => ConfigValue::Text(s.clone()),
        _ => return None,
    })
}

/// The detector's config for `case`: each key's default unless the case sets it.
fn case_config(detector: &LoadedDetector, case: &Case, path: &Path) -> Result<Vec<(String, ConfigValue)>, ReplayError> {
    let mut config = Vec::new();
    for key in &detector.descriptor.config {
        let value = match case.config.get(&key.name) {
            None => key.default.clone(),
            Some(v) => config_value(v).and_then(|v| crate::scan::coerce(&v, &key.default)).ok_or_else(|| {
                ReplayError::Invalid {
                    path: path.to_owned(),
                    message: format!("config `{}` must be {}, got {v}", key.name, key.default.type_name()),
                }
            })?,
        };
        config.push((key.name.clone(), value));
    }
    if let Some(unknown) = case.config.keys().find(|k| !detector.descriptor.config.iter().any(|c| c.name == **k)) {
        return Err(ReplayError::Invalid {
            path: path.to_owned(),
            message: format!("config key `{unknown}` is not one of the detector's"),
        });
    }
    Ok(config)
}

/// Runs the case at `path` against `detector`. With `bless`, a failing
/// case's expectation is rewritten with what the detector produced.
pub fn run_case(
    runtime: &Runtime,
    detector: &LoadedDetector,
    path: &Path,
    bless: bool,
) -> Result<CaseResult, ReplayError> {
    let text = std::fs::read_to_string(path).map_err(|source| ReplayError::Read { path: path.to_owned(), source })?;
    let mut case: Case = serde_json::from_str(&text)
        .map_err(|e| ReplayError::Invalid { path: path.to_owned(), message: e.to_string() })?;
    let config = case_config(detector, &case, path)?;
    let config_text: Vec<String> = config.iter().filter_map(|(_, v)| serde_json::to_string(v).ok()).collect();
    let ctx = ScanContext {
        scan_time_ms: case.scan_time,
        window_start_ms: 0,
        config,
        state: case.state.as_ref().map(|s| s.as_bytes().to_vec()),
    };
    let outcome = (|| -> Result<Observations, CallFailure> {
        let mut scan = runtime.start_scan(detector, ctx)?;
        for b in &case.records {
            scan.push(&PreparedBatch::new(pack(b)))?;
        }
        Ok(scan.finish()?.observations)
    })();
    let call_failed = outcome.is_err();
    let (got, mut differences) = match outcome {
        Ok(obs) => (obs.iter().map(observation_json).collect::<Vec<_>>(), Vec::new()),
        Err(f) => (Vec::new(), vec![format!("{f}")]),
    };
    if differences.is_empty() {
        if got.len() != case.expect.len() {
            differences.push(format!("expected {} observations, got {}", case.expect.len(), got.len()));
        }
        for (i, (want, have)) in case.expect.iter().zip(&got).enumerate() {
            if want != have {
                differences.push(format!("observation {i}: expected {want}, got {have}"));
            }
        }
    }
    // Blessing records what a detector that ran produced; a failed call is
    // never written down as the expectation, nor a title that still holds a
    // raw value (a normalizer bug would be pinned as expected).
    let refused = (bless && !differences.is_empty() && !call_failed)
        .then(|| {
            let cells = || case.records.iter().flat_map(|b| &b.rows).flat_map(|r| r.values());
            let texts: Vec<&str> = cells().filter_map(Value::as_str).collect();
            // Numbers the detector may take from typed cells (an exit code) or the config (a threshold).
            let typed: Vec<String> =
                cells().filter(|v| v.is_number()).map(ToString::to_string).chain(config_text.iter().cloned()).collect();
            got.iter().filter_map(|o| o["title"].as_str()).find_map(|t| {
                crate::ops::blessing::raw_value(t, &texts, &typed)
                    .map(|why| format!("not blessed: title {t:?} holds a raw {why}"))
            })
        })
        .flatten();
    differences.extend(refused.clone());
    let passed = differences.is_empty();
    if bless && !passed && !call_failed && refused.is_none() {
        case.expect = got.clone();
        let mut out = serde_json::to_string_pretty(&case).unwrap_or_default();
        out.push('\n');
        std::fs::write(path, out).map_err(|source| ReplayError::Write { path: path.to_owned(), source })?;
    }
    Ok(CaseResult { path: path.to_owned(), description: case.description, passed, got, differences })
}

/// The `*.json` case files in `dir`, sorted.
pub fn case_files(dir: &Path) -> Result<Vec<PathBuf>, ReplayError> {
    let entries = std::fs::read_dir(dir).map_err(|source| ReplayError::Read { path: dir.to_owned(), source })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    Ok(files)
}
