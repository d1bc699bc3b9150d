//! A detector build that no longer produces a fixed issue's signature: its
//! `diagnostic` fire, recorded once per (build, signature).
//!
//! It owns the check-and-record of that warning in one transaction: the
//! bookkeeping key [`MetaKey::RegressionWarned`] and the fire appended to
//! the log (chained, signed and exported like every fire, so the dispatcher
//! delivers it); and [`CaseCapture`], what a fix did about its case, as the
//! fix's answer carries it. It never runs a detector and never reads a case: the core's
//! regression check does ([`crate::core`] sits above the ledger).

use super::meta::{self, MetaKey};
use super::{Ledger, LedgerError};
use crate::firelog::FireType;
use crate::model::standing::Health;

/// What a fix did about its regression case.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase", tag = "case")]
pub enum CaseCapture {
    /// The evidence record was found; its case is kept at `path`.
    #[serde(rename = "captured")]
    Captured { path: std::path::PathBuf },
    /// No case was kept, and why.
    #[serde(rename = "none")]
    NotCaptured { why: String },
}

/// What the warning names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlindBuild<'a> {
    pub detector: &'a str,
    pub version: Option<String>,
    /// The detector file's sha256.
    pub build: &'a str,
    /// The fixed issue's signature it no longer produces.
    pub sig: &'a str,
    /// Why, one line (what it produced instead, or its failure).
    pub why: String,
}

impl Ledger {
    /// Whether this build was already warned about for this signature.
    pub fn blind_build_warned(&self, build: &str, sig: &str) -> Result<bool, LedgerError> {
        Ok(self.meta(&MetaKey::RegressionWarned(format!("{build}.{sig}")))?.is_some())
    }

    /// Appends the `diagnostic` fire for `blind` unless this build was warned
    /// about for this signature before: `Some(seq)` of the new fire, else
    /// `None`.
    pub fn warn_blind_build(&mut self, blind: &BlindBuild<'_>, at: i64) -> Result<Option<u64>, LedgerError> {
        let path = self.db_path.clone();
        let e = move |source| LedgerError::Store {
            path: path.clone(),
            action: "cannot record a detector update's lost regression case",
            source,
        };
        let key = MetaKey::RegressionWarned(format!("{}.{}", blind.build, blind.sig));
        let tx = self.conn.transaction().map_err(&e)?;
        if meta::read_text(&tx, &key).map_err(&e)?.is_some() {
            return Ok(None);
        }
        let reason = format!(
            "detector {} (build {}) no longer produces the fixed issue {}: {}",
            blind.detector,
            &blind.build[..blind.build.len().min(16)],
            blind.sig,
            blind.why
        );
        let mut entry = super::count::fires::health_fire(
            FireType::Diagnostic,
            &Health::new(blind.detector),
            at,
            blind.version.clone(),
            reason,
        );
        entry.sig = Some(blind.sig.to_owned());
        entry.kind = blind.sig.split(':').next().map(str::to_owned);
        let mut appender = super::export::segments::Appender::open(&tx).map_err(&e)?;
        appender.append(&tx, entry.view()).map_err(&e)?;
        appender.flush(&tx).map_err(&e)?;
        let seq = appender.count();
        meta::write(&tx, &key, Some(&seq.to_string())).map_err(&e)?;
        tx.commit().map_err(&e)?;
        self.export_fires(at)?;
        Ok(Some(seq))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blind_build_is_warned_about_once_per_build_and_signature() {
        let dir = tempfile::tempdir().unwrap();
        let mut l = Ledger::open(dir.path()).unwrap();
        let blind = |build: &'static str| BlindBuild {
            detector: "tool_error",
            version: Some("0.2.0".into()),
            build,
            sig: "tool_error:0123456789abcdef",
            why: "produced nothing".into(),
        };
        assert!(!l.blind_build_warned("aa", "tool_error:0123456789abcdef").unwrap());
        let first = l.warn_blind_build(&blind("aa"), 10).unwrap();
        assert!(first.is_some());
        assert!(l.blind_build_warned("aa", "tool_error:0123456789abcdef").unwrap());
        assert_eq!(l.warn_blind_build(&blind("aa"), 20).unwrap(), None, "the same build again: no second fire");
        assert!(l.warn_blind_build(&blind("bb"), 30).unwrap().is_some(), "another build is warned about");
        let lines: Vec<String> = l
            .conn
            .prepare("SELECT line FROM fires ORDER BY seq")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(lines.len(), 2);
        let fire: crate::firelog::FireEntry = serde_json::from_str(&lines[0]).unwrap();
        assert_eq!((fire.fire_type, fire.detector.as_str()), (FireType::Diagnostic, "tool_error"));
        assert_eq!(fire.sig.as_deref(), Some("tool_error:0123456789abcdef"));
        assert!(fire.reason.as_deref().unwrap().contains("no longer produces"), "{:?}", fire.reason);
        assert!(crate::ledger::verify_out_dir(dir.path(), None).ok, "the chain still verifies");
    }
}
