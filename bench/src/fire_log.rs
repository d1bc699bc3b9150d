//! An output folder whose fire log holds a given number of fires, made
//! through the host's own ledger (the same commit, chain, segments and
//! signed head a scan makes), for `sentinel-watch-load`'s reads under a big
//! log: a million fires in well under a minute, where scanning a data set
//! that makes them would take many.
//!
//! It owns those folders (in the folder it is given, the temporary folder
//! for `sentinel-watch-load`, reused while their head says they hold the
//! count asked for) and their signing key file beside them. Nearly every fire is `tool_error`'s; the oldest
//! [`RARE`] are `cost`'s, so a page of `cost`'s fires reaches back to the
//! log's start. It never writes anywhere else, and never reads a data dir.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use sentinel_host::ledger::{Ledger, ScanCommit};
use sentinel_host::model::observation::{Observation, Origin, Severity};

/// The detector of most fires.
pub const BUSY: &str = "tool_error";
/// The detector of the log's oldest fires only.
pub const RARE: &str = "cost";
/// How many fires the rare detector has, all at the log's start.
pub const RARE_FIRES: u64 = 100;
/// Observations one commit takes (memory stays bounded).
const PER_COMMIT: u64 = 50_000;

/// A made folder: the output folder and its signing key file.
#[derive(Debug, Clone)]
pub struct FireLog {
    pub out: PathBuf,
    pub key_file: PathBuf,
    pub fires: u64,
}

/// The folder for `fires` under `work` (outside any git repository: an
/// output folder inside one is refused), made unless it already holds them.
pub fn prepare(work: &Path, fires: u64) -> Result<FireLog> {
    let root = work.join(format!("sentinel-bench-fire-log-{fires}"));
    let log = FireLog { out: root.join("out"), key_file: root.join("fire-key.ed25519"), fires };
    if held(&log.out) == Some(fires) {
        return Ok(log);
    }
    if root.exists() {
        std::fs::remove_dir_all(&root).with_context(|| format!("cannot clear {}", root.display()))?;
    }
    std::fs::create_dir_all(&log.out)?;
    let mut ledger = Ledger::open(&log.out).context("cannot open the ledger")?;
    ledger.open_signing_key(Some(&log.key_file)).context("cannot make the signing key")?;
    let versions: BTreeMap<String, String> =
        [BUSY, RARE].iter().map(|d| ((*d).to_owned(), "1.0.0".to_owned())).collect();
    let mut made = 0;
    while made < fires {
        let observations: Vec<Observation> = (made..fires.min(made + PER_COMMIT)).map(observation).collect();
        let report = ledger
            .commit(ScanCommit {
                observations: &observations,
                scan_time: 1_700_000_000_000 + made as i64,
                versions: versions.clone(),
                ..Default::default()
            })
            .context("cannot commit the fires")?;
        made += report.fires;
        if report.fires == 0 {
            anyhow::bail!("a commit of {} observations made no fire", observations.len());
        }
    }
    drop(ledger);
    Ok(log)
}

/// How many entries the folder's signed head says its log holds.
fn held(out: &Path) -> Option<u64> {
    let head: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("fires.head.json")).ok()?).ok()?;
    head["count"].as_u64()
}

/// The `i`th fire's observation: a new occurrence of one of 64 issues.
fn observation(i: u64) -> Observation {
    let detector = if i < RARE_FIRES { RARE } else { BUSY };
    Observation {
        detector: detector.to_owned(),
        kind: detector.to_owned(),
        signature: format!("{detector} bench issue {}", i % 64),
        grouping_version: 3,
        title: format!("bench issue {}", i % 64),
        origin: Origin::Shell,
        severity: Severity::High,
        tool: Some("bash".to_owned()),
        bot_id: Some(format!("bot-{}", i % 6)),
        thread_id: Some(format!("thread-{}", i / 100)),
        turn_id: Some(format!("turn-{i}")),
        at: 1_600_000_000_000 + i as i64,
        occurrence: format!("occurrence-{i}"),
        evidence_source: "messages".to_owned(),
        evidence_id: format!("m-{i}"),
        wasted_turns: 1,
        probation: false,
    }
}
