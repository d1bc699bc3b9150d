//! `replay --regressions`: every fixed issue's regression case of an output
//! folder, run against the detectors of a folder.
//!
//! It owns finding the cases (the output folder chosen as a scan would,
//! nothing created), loading the detectors (each case runs against the one
//! of its name) and the results, one a case: passed when the build still
//! produces the fixed issue's signature, failed when it does not although a
//! build did before (the ledger's baseline), never-produced when no build
//! ever has (the record alone does not make the issue). A case whose
//! detector is not in the folder, or that cannot be read, fails (nothing
//! would catch the issue coming back). It never writes and never touches the
//! data dir.

use std::path::{Path, PathBuf};

use crate::core::regression::check::{CaseRun, Verdict, run_case};
use crate::core::regression::{RegressionError, case_files, read_case};
use crate::runtime::{LoadedDetector, Runtime, RuntimeError};
use crate::scan::{ScanError, resolve_data_dir};

/// Why the cases could not be run at all.
#[derive(Debug, thiserror::Error)]
pub enum RegressionsError {
    #[error(transparent)]
    Scan(#[from] ScanError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Case(#[from] RegressionError),
}

/// The output folder's cases, sorted, and the folder.
pub fn cases(data_dir: Option<&Path>, out: Option<&Path>) -> Result<(PathBuf, Vec<PathBuf>), RegressionsError> {
    let data_dir = resolve_data_dir(data_dir)?;
    let out = crate::base::out_dir::choose(out, &data_dir).map_err(ScanError::from)?;
    let files = case_files(&out, None)?;
    Ok((out, files))
}

fn failed(path: PathBuf, detector: String, sig: String, why: String) -> CaseRun {
    CaseRun { path, detector, sig, passed: false, verdict: Verdict::Failed { why } }
}

/// Whether some build produced `sig`'s case before, as the output folder's
/// ledger remembers (read-only; no ledger: none has).
pub fn produced_before(out: &Path) -> Result<impl Fn(&str) -> bool, RegressionsError> {
    let view = crate::ledger::LedgerView::open(out).map_err(ScanError::from)?;
    Ok(move |sig: &str| {
        let key = crate::ledger::MetaKey::RegressionProduced(sig.to_owned());
        view.as_ref().is_some_and(|v| v.meta(&key).ok().flatten().is_some())
    })
}

/// Runs each case file against the detector of its name in `detectors`; a
/// case no build has produced before (`produced_before`) is
/// [`Verdict::NeverProduced`] when this one does not either.
pub fn run(
    runtime: &Runtime,
    detectors: &Path,
    files: &[PathBuf],
    produced_before: &dyn Fn(&str) -> bool,
) -> Result<Vec<CaseRun>, RegressionsError> {
    let loaded: Vec<LoadedDetector> = runtime.load_dir(detectors)?.into_iter().filter_map(Result::ok).collect();
    let mut runs = Vec::with_capacity(files.len());
    for path in files {
        let case = match read_case(path) {
            Ok(c) => c,
            Err(e) => {
                let why = crate::base::sanitize::one_line(&crate::base::errors::error_chain(&e)).into_owned();
                runs.push(failed(path.clone(), String::new(), String::new(), why));
                continue;
            }
        };
        let Some(detector) = loaded.iter().find(|d| d.descriptor.name == case.detector) else {
            let why = format!("no detector named {} loads from {}", case.detector, detectors.display());
            runs.push(failed(path.clone(), case.detector, case.expect_sig, why));
            continue;
        };
        let verdict = run_case(runtime, detector, &case).against_baseline(produced_before(&case.expect_sig));
        let passed = verdict.passed();
        runs.push(CaseRun { path: path.clone(), detector: case.detector, sig: case.expect_sig, passed, verdict });
    }
    Ok(runs)
}
