//! The benchmark's data dirs: the reference layout from `xtask::datagen`,
//! scaled to a record count, generated once per size and reused while the
//! spec is unchanged.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use xtask::datagen::{self, DataSpec};

/// A generated data dir and what it holds.
#[derive(Debug, Clone)]
pub struct DataSet {
    pub dir: PathBuf,
    /// Records written, of every kind (activity and text messages, queue
    /// events, turn events).
    pub records: usize,
    /// A scan time just after the last record.
    pub scan_time_ms: i64,
}

/// Six bots with 100 turns per thread; threads scale with the target. Each
/// turn writes 2 queue events, 1 text message, 4 tool calls and 2 turn events.
pub fn spec_for(target_records: usize) -> DataSpec {
    let per_turn = 9;
    let bots = 6;
    let turns_per_thread = 100;
    let threads = (target_records as f64 / (per_turn * bots * turns_per_thread) as f64).round().max(1.0) as usize;
    DataSpec { seed: 11, bots, threads_per_bot: threads, turns_per_thread, calls_per_turn: 4, ..DataSpec::default() }
}

/// Generates (or reuses) the data dir for `target_records` under `work`.
pub fn prepare(work: &Path, target_records: usize) -> Result<DataSet> {
    let spec = spec_for(target_records);
    let dir = work.join(format!("data-{target_records}"));
    let stamp = work.join(format!("data-{target_records}.spec"));
    let truth_file = work.join(format!("data-{target_records}.truth"));
    let wanted = format!("{spec:?}");
    if let (Ok(seen), Ok(truth)) = (std::fs::read_to_string(&stamp), std::fs::read_to_string(&truth_file))
        && seen == wanted
        && let Some((records, end)) = truth.trim().split_once(' ')
        && let (Ok(records), Ok(end)) = (records.parse(), end.parse::<i64>())
    {
        return Ok(DataSet { dir, records, scan_time_ms: end + 60_000 });
    }
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("cannot clear {}", dir.display()))?;
    }
    let truth = datagen::generate(&dir, &spec)?;
    std::fs::write(&truth_file, format!("{} {}", truth.records, truth.end_ms))?;
    std::fs::write(&stamp, wanted)?;
    Ok(DataSet { dir, records: truth.records, scan_time_ms: truth.end_ms + 60_000 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_scales_to_the_target_record_count() {
        for target in [10_000usize, 100_000, 1_000_000] {
            let s = spec_for(target);
            let records = s.bots * s.threads_per_bot * s.turns_per_thread * (5 + s.calls_per_turn);
            let off = (records as f64 - target as f64).abs() / target as f64;
            assert!(off < 0.1, "{target}: {records} records");
        }
    }
}
