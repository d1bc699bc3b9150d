//! A detector build that no longer produces a fixed issue's signature: its
//! `diagnostic` fire, recorded once per (build, signature).
//!
//! It owns which (build, signature) pairs were run already (the bookkeeping
//! key [`MetaKey::RegressionChecked`]: a pass, no build ever producing it, or
//! the warning's fire), the first build that produced a case's signature (its
//! baseline, [`MetaKey::RegressionProduced`]: only a case some build produced
//! can be lost by another), the check-and-record of a warning in one
//! transaction with the fire appended to the log (chained, signed and
//! exported like every fire, so the dispatcher delivers it) and kept in the
//! issue's history, and [`CaseCapture`], what a fix did about its case, as
//! the fix's answer carries it. It never runs a detector and never reads a
//! case: the core's regression check does ([`crate::core`] sits above the
//! ledger).

use super::meta::{self, MetaKey};
use super::{Ledger, LedgerError};
use crate::firelog::{FireBody, FireType};

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
    /// Whether this build's case of this signature was run already (it
    /// passed, or it was warned about): it is not run again.
    pub fn regression_checked(&self, build: &str, sig: &str) -> Result<bool, LedgerError> {
        Ok(self.meta(&MetaKey::RegressionChecked(format!("{build}.{sig}")))?.is_some())
    }

    /// Remembers that this build produces this signature (the first such
    /// build is the case's baseline).
    pub fn regression_passed(&mut self, build: &str, sig: &str) -> Result<(), LedgerError> {
        let path = self.db_path.clone();
        let e = move |source| LedgerError::Store {
            path: path.clone(),
            action: "cannot record a regression case's pass",
            source,
        };
        let tx = self.conn.transaction().map_err(&e)?;
        meta::write(&tx, &MetaKey::RegressionChecked(format!("{build}.{sig}")), Some("pass")).map_err(&e)?;
        let baseline = MetaKey::RegressionProduced(sig.to_owned());
        if meta::read_text(&tx, &baseline).map_err(&e)?.is_none() {
            meta::write(&tx, &baseline, Some(build)).map_err(&e)?;
        }
        tx.commit().map_err(&e)
    }

    /// The build that first produced this case's signature, if one has.
    pub fn regression_produced(&self, sig: &str) -> Result<Option<String>, LedgerError> {
        self.meta(&MetaKey::RegressionProduced(sig.to_owned()))
    }

    /// Remembers that this build does not produce a signature no build has
    /// produced yet (the record alone does not make the issue: nothing to
    /// guard, no warning); it is not run again.
    pub fn regression_never_produced(&mut self, build: &str, sig: &str) -> Result<(), LedgerError> {
        let key = MetaKey::RegressionChecked(format!("{build}.{sig}"));
        meta::write(&self.conn, &key, Some("never")).map_err(self.err("cannot record a regression case's run"))
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
        let key = MetaKey::RegressionChecked(format!("{}.{}", blind.build, blind.sig));
        let tx = self.conn.transaction().map_err(&e)?;
        if meta::read_text(&tx, &key).map_err(&e)?.is_some_and(|v| v.starts_with("fire:")) {
            return Ok(None);
        }
        let reason = format!(
            "detector {} (build {}) no longer produces the fixed issue {}: {}",
            blind.detector,
            &blind.build[..blind.build.len().min(16)],
            blind.sig,
            blind.why
        );
        let kind = Some(super::lifecycle::kind_of(blind.sig).to_owned());
        let body = FireBody::Diagnostic { reason, kind, sig: Some(blind.sig.to_owned()) };
        let entry = super::count::fires::fact_fire(blind.detector, at, blind.version.clone(), body);
        let mut appender = super::export::segments::Appender::open(&tx).map_err(&e)?;
        appender.append(&tx, entry.view()).map_err(&e)?;
        appender.flush(&tx).map_err(&e)?;
        let seq = appender.count();
        // In the history too: its page tells the update blind to it.
        super::lifecycle::remember(&tx, blind.sig, seq, FireType::Diagnostic, at).map_err(&e)?;
        meta::write(&tx, &key, Some(&format!("fire:{seq}"))).map_err(&e)?;
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
        assert!(!l.regression_checked("aa", "tool_error:0123456789abcdef").unwrap());
        let first = l.warn_blind_build(&blind("aa"), 10).unwrap();
        assert!(first.is_some());
        assert!(l.regression_checked("aa", "tool_error:0123456789abcdef").unwrap());
        assert_eq!(l.warn_blind_build(&blind("aa"), 20).unwrap(), None, "the same build again: no second fire");
        assert!(l.warn_blind_build(&blind("bb"), 30).unwrap().is_some(), "another build is warned about");
        l.regression_passed("cc", "tool_error:0123456789abcdef").unwrap();
        assert!(l.regression_checked("cc", "tool_error:0123456789abcdef").unwrap(), "a pass is not run again");
        l.regression_passed("dd", "tool_error:0123456789abcdef").unwrap();
        assert_eq!(l.regression_produced("tool_error:0123456789abcdef").unwrap().as_deref(), Some("cc"), "the first");
        assert_eq!(l.regression_produced("tool_error:ffffffffffffffff").unwrap(), None);
        l.regression_never_produced("ee", "tool_error:ffffffffffffffff").unwrap();
        assert!(l.regression_checked("ee", "tool_error:ffffffffffffffff").unwrap());
        assert_eq!(l.regression_produced("tool_error:ffffffffffffffff").unwrap(), None, "never produced: no baseline");
        let lines: Vec<String> = l
            .conn
            .prepare("SELECT line FROM fires ORDER BY seq")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(lines.len(), 2);
        let history: i64 = l
            .conn
            .query_row(
                "SELECT COUNT(*) FROM issue_events WHERE sig = ?1 AND type = 'diagnostic'",
                [blind("aa").sig],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(history, 2, "each warning is in the issue's history");
        let fire: crate::firelog::FireEntry = serde_json::from_str(&lines[0]).unwrap();
        assert_eq!((fire.fire_type(), fire.detector.as_str()), (FireType::Diagnostic, "tool_error"));
        assert_eq!(fire.body.sig(), Some("tool_error:0123456789abcdef"));
        assert!(fire.body.reason().unwrap().contains("no longer produces"), "{:?}", fire.body.reason());
        assert!(crate::ledger::verify_out_dir(dir.path(), None).ok, "the chain still verifies");
    }
}
