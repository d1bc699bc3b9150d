//! `detectors inspect`: every detector file as an operator sees it.
//!
//! It owns reading each component's descriptor and capabilities outside a
//! scan (through a runtime that reuses the scans' compiled-code cache and
//! never creates one) and its health from the output folder's ledger, read
//! through a [`LedgerView`] (never the writer's lock). It never runs a
//! detector's scan and never writes.

use std::path::Path;

use serde::Serialize;

use crate::base::out_dir;
use crate::ledger::LedgerView;
use crate::model::standing::Health;
use crate::runtime::{Limits, Runtime, RuntimeError};
use crate::scan::{ScanError, resolve_data_dir};

/// One detector file as an operator sees it: what it is, what it may do,
/// and how it has fared.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DetectorInfo {
    #[serde(flatten)]
    pub inspection: crate::runtime::Inspection,
    /// From the ledger of the output folder, when there is one.
    pub health: Option<Health>,
    /// A stock sentinel's cadence class.
    pub class: Option<crate::config::stock::Class>,
    /// When its cooldown next makes it due (ms), as the last scan planned it.
    pub next_due: Option<i64>,
}

/// Inspects every `*.wasm` in `detectors_dir`, with health from the ledger of
/// the output folder for `data_dir` (nothing is created when it has none).
pub fn inspect_detectors(
    detectors_dir: &Path,
    data_dir: Option<&Path>,
    out: Option<&Path>,
) -> Result<Vec<DetectorInfo>, ScanError> {
    let out = resolve_data_dir(data_dir).ok().and_then(|d| out_dir::choose(out, &d).ok());
    let runtime = runtime_for_checks(out.as_deref())?;
    let files = crate::runtime::detector_files(detectors_dir)?;
    // A reader: never the writer's lock, never a migration, never blocks a scan.
    let view = out.as_deref().map(LedgerView::open).transpose()?.flatten();
    let healths: Vec<Health> = match &view {
        Some(view) => view.health()?,
        None => Vec::new(),
    };
    let mut infos = Vec::with_capacity(files.len());
    for f in &files {
        let inspection = runtime.inspect(f);
        let name = inspection.descriptor.as_ref().map(|d| d.name.clone()).unwrap_or_default();
        let health = healths.iter().find(|h| h.detector == name).cloned();
        let next_due = match &view {
            Some(v) => v.meta_ms(&crate::ledger::MetaKey::Due(name.clone()))?,
            None => None,
        };
        let class = crate::config::stock::find(&name).map(|s| s.class);
        infos.push(DetectorInfo { inspection, health, class, next_due });
    }
    Ok(infos)
}

/// A runtime for checking detectors outside a scan (`detectors inspect`,
/// `check-install`): it reuses the compiled code scans left in the user
/// cache folder (or, from before it, in the output folder), when there is
/// any, and never creates a cache of its own.
pub(crate) fn runtime_for_checks(out: Option<&Path>) -> Result<Runtime, RuntimeError> {
    let runtime = Runtime::new(Limits::default())?;
    let legacy = out.map(|o| o.join("cache"));
    Ok(match out_dir::user_cache_dir().into_iter().chain(legacy).find(|c| c.is_dir()) {
        Some(cache) => runtime.with_cache(cache),
        None => runtime,
    })
}
