//! Running a regression case against a detector build: does it still
//! produce the fixed issue's signature?
//!
//! It owns the case's run (in the same sandbox and through the same calls as
//! a scan: the detector's own config keys from the case, only the batches it
//! subscribes to), the [`Verdict`], and the check the core makes when it has
//! just loaded a changed detector file: each of that detector's cases run,
//! and a build that no longer produces a case's signature warned about once
//! (a `diagnostic` fire through the ledger, and a line for the scan's
//! summary). It never writes a case and never reads the data dir.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{RegressionCase, case_files, read_case};
use crate::ledger::{BlindBuild, Ledger, LedgerError, issue_sig};
use crate::model::case_rows::pack;
use crate::model::observation::{ConfigValue, Observations};
use crate::runtime::{CallFailure, LoadedDetector, PreparedBatch, Runtime, ScanContext};
use crate::scan::RegressionWarning;

/// How a case went against one build.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "verdict")]
pub enum Verdict {
    /// The signature is still produced: the issue coming back is caught.
    #[serde(rename = "produced")]
    Produced,
    /// The detector ran and did not produce it; what it produced instead.
    #[serde(rename = "not-produced")]
    NotProduced { got: Vec<String> },
    /// The case could not be run (a config value that does not fit, a
    /// failed call).
    #[serde(rename = "failed")]
    Failed { why: String },
    /// Not produced, and no build ever has: the record alone does not make
    /// the issue (a loop needs its earlier failures), so the case guards
    /// nothing. Neither a pass nor a failure.
    #[serde(rename = "never-produced")]
    NeverProduced { got: Vec<String> },
}

impl Verdict {
    pub fn passed(&self) -> bool {
        *self == Verdict::Produced
    }

    /// Whether the issue coming back would go unseen: not produced although
    /// a build produced it before, or not run at all.
    pub fn failed(&self) -> bool {
        matches!(self, Verdict::NotProduced { .. } | Verdict::Failed { .. })
    }

    /// `NotProduced` as `NeverProduced` when no build has produced the
    /// signature before (`produced_before` false).
    pub fn against_baseline(self, produced_before: bool) -> Verdict {
        match self {
            Verdict::NotProduced { got } if !produced_before => Verdict::NeverProduced { got },
            v => v,
        }
    }

    /// One line saying why it did not pass.
    pub fn why(&self) -> String {
        match self {
            Verdict::Produced => "the signature is still produced".into(),
            Verdict::NotProduced { got } if got.is_empty() => "it produced nothing from the case".into(),
            Verdict::NotProduced { got } => format!("it produced {} instead", got.join(", ")),
            Verdict::Failed { why } => why.clone(),
            Verdict::NeverProduced { .. } => {
                "no build has produced the signature from the record alone: the case guards nothing".into()
            }
        }
    }
}

fn config_value(v: &serde_json::Value) -> Option<ConfigValue> {
    Some(match v {
        serde_json::Value::Bool(b) => ConfigValue::Boolean(*b),
        serde_json::Value::Number(n) if n.is_i64() => ConfigValue::Integer(n.as_i64()?),
        serde_json::Value::Number(n) => ConfigValue::Float(n.as_f64()?),
        serde_json::Value::String(s) => ConfigValue::Text(s.clone()),
        _ => return None,
    })
}

/// The detector's config: its defaults, the case's values where they fit
/// a key it declares (keys it no longer has are left out).
fn config(detector: &LoadedDetector, case: &RegressionCase) -> Result<Vec<(String, ConfigValue)>, String> {
    let mut out = Vec::new();
    for key in &detector.descriptor.config {
        let value = match case.config.get(&key.name) {
            None => key.default.clone(),
            Some(v) => config_value(v).and_then(|v| crate::scan::coerce(&v, &key.default)).ok_or_else(|| {
                format!("config `{}` must be {}, the case holds {v}", key.name, key.default.type_name())
            })?,
        };
        out.push((key.name.clone(), value));
    }
    Ok(out)
}

/// Runs `case` against `detector`.
pub fn run_case(runtime: &Runtime, detector: &LoadedDetector, case: &RegressionCase) -> Verdict {
    let config = match config(detector, case) {
        Ok(c) => c,
        Err(why) => return Verdict::Failed { why },
    };
    let subs = &detector.descriptor.subscriptions;
    let ctx = ScanContext { scan_time_ms: case.scan_time, window_start_ms: 0, config, state: None };
    let outcome = (|| -> Result<Observations, CallFailure> {
        let mut scan = runtime.start_scan(detector, ctx)?;
        for b in case.records.iter().filter(|b| subs.iter().any(|s| s.source == b.source && s.kind == b.kind)) {
            scan.push(&PreparedBatch::new(pack(b)))?;
        }
        Ok(scan.finish()?.observations)
    })();
    match outcome {
        Err(f) => Verdict::Failed { why: crate::base::sanitize::one_line(&f.to_string()).into_owned() },
        Ok(obs) => {
            let mut got: Vec<String> = obs.iter().map(|o| issue_sig(o.kind, o.grouping_version, o.signature)).collect();
            if got.contains(&case.expect_sig) {
                return Verdict::Produced;
            }
            got.sort();
            got.dedup();
            Verdict::NotProduced { got }
        }
    }
}

/// A case file read back and run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CaseRun {
    pub path: PathBuf,
    pub detector: String,
    pub sig: String,
    pub passed: bool,
    #[serde(flatten)]
    pub verdict: Verdict,
}

/// The cases of `detector` it no longer passes, each warned about once per
/// (build, signature): a `diagnostic` fire and a warning for the summary.
/// Only a case some build produced before can be lost (the first build that
/// produces it is its baseline). Each (build, signature) is run once: a pass
/// is remembered too. A case that cannot be read is logged and passed over.
pub fn check_build(
    runtime: &Runtime,
    ledger: &mut Ledger,
    out: &Path,
    detector: &LoadedDetector,
    at: i64,
) -> Result<Vec<RegressionWarning>, LedgerError> {
    let name = &detector.descriptor.name;
    let files = case_files(out, Some(name)).unwrap_or_else(|e| {
        tracing::warn!(error = %crate::base::errors::error_chain(&e), "cannot list the regression cases");
        Vec::new()
    });
    let mut warnings = Vec::new();
    for path in files {
        let case = match read_case(&path) {
            Ok(c) if c.detector == *name => c,
            Ok(_) => continue,
            Err(e) => {
                tracing::warn!(error = %crate::base::errors::error_chain(&e), "passing over a regression case");
                continue;
            }
        };
        if ledger.regression_checked(&detector.sha256, &case.expect_sig)? {
            continue;
        }
        let produced_before = ledger.regression_produced(&case.expect_sig)?.is_some();
        let verdict = run_case(runtime, detector, &case).against_baseline(produced_before);
        if verdict.passed() {
            ledger.regression_passed(&detector.sha256, &case.expect_sig)?;
            continue;
        }
        if let Verdict::NeverProduced { .. } = verdict {
            tracing::info!(detector = %name, sig = %case.expect_sig, "{}", verdict.why());
            ledger.regression_never_produced(&detector.sha256, &case.expect_sig)?;
            continue;
        }
        let blind = BlindBuild {
            detector: name,
            version: Some(detector.descriptor.version.clone()),
            build: &detector.sha256,
            sig: &case.expect_sig,
            why: verdict.why(),
        };
        if let Some(fire_seq) = ledger.warn_blind_build(&blind, at)? {
            let (sig, why) = (case.expect_sig.clone(), blind.why);
            warnings.push(RegressionWarning { detector: name.clone(), sig, fire_seq, why });
        }
    }
    Ok(warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_case_not_produced_is_a_failure_only_against_a_baseline() {
        let not = || Verdict::NotProduced { got: vec!["tool_error:ffffffffffffffff".into()] };
        assert!(not().against_baseline(true).failed(), "a build produced it before: lost");
        let never = not().against_baseline(false);
        assert!(matches!(never, Verdict::NeverProduced { .. }) && !never.failed() && !never.passed());
        assert!(Verdict::Produced.against_baseline(false).passed());
        let call = Verdict::Failed { why: "trap".into() };
        assert!(call.clone().against_baseline(false).failed(), "a case that cannot run is a failure");
        assert!(not().why().contains("tool_error:ffffffffffffffff"));
        assert_eq!(Verdict::NotProduced { got: Vec::new() }.why(), "it produced nothing from the case");
    }
}
