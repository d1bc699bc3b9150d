//! Regression cases: a fixed issue's evidence record kept as a replayable
//! case, so a detector update that would no longer catch the issue coming
//! back is told, not silent.
//!
//! It owns the case file (`regressions/<detector>/<sig>.json` in the output
//! folder, `0600` in `0700` folders: it holds a raw record, which never
//! leaves the output folder), finding and writing it when an issue is fixed
//! ([`capture`]: the record read again read-only through the scan's own
//! source), and running it against a detector build ([`check`]: does the
//! build still produce the signature). It never writes into the data dir,
//! never counts an occurrence and never decides an issue's state (the
//! ledger does).

pub mod capture;
pub mod check;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ledger::EvidenceRef;
use crate::model::case_rows::CaseBatch;

/// The folder of the output folder the cases are kept in.
pub const REGRESSIONS_DIR: &str = "regressions";

/// Why a case could not be kept or read.
#[derive(Debug, thiserror::Error)]
pub enum RegressionError {
    #[error("regression case {path}: cannot read it")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("regression case {path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error("regression case {path}: cannot write it")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A fixed issue's case: the records to push (the evidence record, and the
/// reference records read beside it) and the signature the detector must
/// still produce from them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegressionCase {
    #[serde(default)]
    pub description: String,
    /// The detector that reported the issue (its descriptor's name).
    pub detector: String,
    /// The signature, as the ledger keeps it: what must be produced.
    pub expect_sig: String,
    pub evidence_ref: EvidenceRef,
    /// When the issue was fixed and the record captured, ms.
    pub captured_at: i64,
    /// The scan time the case is run at (the capture's), ms.
    pub scan_time: i64,
    /// The config file's values for the detector at the capture.
    #[serde(default)]
    pub config: serde_json::Map<String, Value>,
    pub records: Vec<CaseBatch>,
}

/// A name safe as one path component: letters, digits, `_`, `.` and `-`
/// kept, anything else `-` (a signature's `:` included).
fn component(name: &str) -> String {
    let s: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '_' | '-') { c } else { '-' }).collect();
    if s.is_empty() { "-".to_owned() } else { s }
}

/// Where the case of `sig`, reported by `detector`, is kept.
pub fn case_path(out: &Path, detector: &str, sig: &str) -> PathBuf {
    out.join(REGRESSIONS_DIR).join(component(detector)).join(format!("{}.json", component(sig)))
}

/// The case of `sig`, if one is kept (under any detector's folder).
pub fn find_case(out: &Path, sig: &str) -> Option<PathBuf> {
    let name = format!("{}.json", component(sig));
    let dirs = std::fs::read_dir(out.join(REGRESSIONS_DIR)).ok()?;
    dirs.filter_map(Result::ok).map(|d| d.path().join(&name)).find(|p| p.is_file())
}

/// Reads the case at `path`.
pub fn read_case(path: &Path) -> Result<RegressionCase, RegressionError> {
    let text =
        std::fs::read_to_string(path).map_err(|source| RegressionError::Read { path: path.to_owned(), source })?;
    serde_json::from_str(&text).map_err(|e| RegressionError::Invalid { path: path.to_owned(), message: e.to_string() })
}

/// Every case file, sorted by path; only those of `detector` when given.
pub fn case_files(out: &Path, detector: Option<&str>) -> Result<Vec<PathBuf>, RegressionError> {
    let root = out.join(REGRESSIONS_DIR);
    let dirs: Vec<PathBuf> = match detector {
        Some(d) => vec![root.join(component(d))],
        None => match std::fs::read_dir(&root) {
            Ok(entries) => entries.filter_map(Result::ok).map(|e| e.path()).collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(source) => return Err(RegressionError::Read { path: root, source }),
        },
    };
    let mut files = Vec::new();
    for dir in dirs {
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory) => continue,
            Err(source) => return Err(RegressionError::Read { path: dir, source }),
        };
        let regular = |p: &PathBuf| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file());
        files.extend(
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "json") && regular(p)),
        );
    }
    files.sort();
    Ok(files)
}

/// Writes `case` where it is kept: folders `0700`, the file `0600`,
/// replaced atomically (a fix of the same issue again captures anew).
pub fn write_case(out: &Path, case: &RegressionCase) -> Result<PathBuf, RegressionError> {
    let path = case_path(out, &case.detector, &case.expect_sig);
    let w = |path: &Path| {
        let path = path.to_owned();
        move |source| RegressionError::Write { path, source }
    };
    let root = out.join(REGRESSIONS_DIR);
    crate::base::private_fs::create_dir(&root).map_err(w(&root))?;
    let dir = path.parent().unwrap_or(&root).to_owned();
    crate::base::private_fs::create_dir(&dir).map_err(w(&dir))?;
    let mut text = serde_json::to_string_pretty(case).unwrap_or_default();
    text.push('\n');
    crate::base::private_fs::write_atomic(&path, text.as_bytes()).map_err(w(&path))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case() -> RegressionCase {
        RegressionCase {
            description: String::new(),
            detector: "tool_error".into(),
            expect_sig: "tool_error:0123456789abcdef".into(),
            evidence_ref: EvidenceRef { source: "messages".into(), id: "m1".into() },
            captured_at: 1,
            scan_time: 1,
            config: serde_json::Map::new(),
            records: Vec::new(),
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_case_is_written_private_and_found_again_by_its_signature() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = write_case(dir.path(), &case()).unwrap();
        assert!(path.ends_with("regressions/tool_error/tool_error-0123456789abcdef.json"), "{}", path.display());
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let folder = dir.path().join(REGRESSIONS_DIR);
        assert_eq!(std::fs::metadata(&folder).unwrap().permissions().mode() & 0o777, 0o700);
        assert_eq!(read_case(&path).unwrap(), case());
        assert_eq!(find_case(dir.path(), "tool_error:0123456789abcdef"), Some(path.clone()));
        assert_eq!(case_files(dir.path(), None).unwrap(), std::slice::from_ref(&path));
        assert_eq!(case_files(dir.path(), Some("tool_error")).unwrap(), [path]);
        assert!(case_files(dir.path(), Some("other")).unwrap().is_empty());
        assert_eq!(component("../a b"), "---a-b", "a name never climbs out of its folder");
    }
}
