//! The heat of each sentinel: the rule, and the window of newest fires it
//! is counted over.
//!
//! It owns the rule (`clamp01(0.7 * fires_1h / 5 + 0.3 * fires_24h / 24)`,
//! cold below 0.15, warm below 0.6, hot from 0.6, counted over the newest
//! [`HEAT_WINDOW`] fire-log entries) and a copy of that window kept between
//! requests: each read fetches only the entries committed since the last
//! one, so `/v1/sentinels` costs the same whatever the log's size. It never
//! writes, never holds a ledger handle between reads and never trusts its
//! copy over the log: a log that shrank (a new ledger in the folder) is read
//! again from the start.

use std::collections::{HashMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::ledger::{FireSample, LedgerError, LedgerView};

/// The newest fires the heat is counted over (a flood saturates the heat
/// long before this).
pub const HEAT_WINDOW: u32 = 10_000;

const HOUR_MS: i64 = 3_600_000;

/// How hot a sentinel runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Band {
    Cold,
    Warm,
    Hot,
}

impl Band {
    /// The name the JSON shows (and the page's CSS class).
    pub fn as_str(self) -> &'static str {
        match self {
            Band::Cold => "cold",
            Band::Warm => "warm",
            Band::Hot => "hot",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Heat {
    pub value: f64,
    pub band: Band,
    pub fires_1h: u64,
    pub fires_24h: u64,
}

impl Heat {
    pub fn of(fires_1h: u64, fires_24h: u64) -> Heat {
        let value = (0.7 * fires_1h as f64 / 5.0 + 0.3 * fires_24h as f64 / 24.0).clamp(0.0, 1.0);
        let band = if value < 0.15 {
            Band::Cold
        } else if value < 0.6 {
            Band::Warm
        } else {
            Band::Hot
        };
        Heat { value, band, fires_1h, fires_24h }
    }
}

/// The newest [`HEAT_WINDOW`] fire-log entries, newest first, as of the
/// last [`refresh`](HeatWindow::refresh).
#[derive(Debug, Default)]
pub struct HeatWindow {
    newest_first: VecDeque<FireSample>,
}

impl HeatWindow {
    fn last_seq(&self) -> i64 {
        self.newest_first.front().map_or(0, |s| s.seq)
    }

    /// Brings the window up to the log's last commit.
    pub fn refresh(&mut self, view: &LedgerView) -> Result<(), LedgerError> {
        if view.last_fire_seq()? < self.last_seq() {
            self.newest_first.clear();
        }
        let new = view.fire_samples(self.last_seq(), HEAT_WINDOW)?;
        self.take(new);
        Ok(())
    }

    /// Adds entries read newest first, all newer than the window's.
    fn take(&mut self, newer: Vec<FireSample>) {
        for sample in newer.into_iter().rev() {
            self.newest_first.push_front(sample);
        }
        self.newest_first.truncate(HEAT_WINDOW as usize);
    }

    /// Fires per detector that warm it (occurrences and diagnostic fires)
    /// in the hour and the day before `now` (ms).
    pub fn counts(&self, now: i64) -> HashMap<String, (u64, u64)> {
        let (since_1h, since_24h) = (now - HOUR_MS, now - 24 * HOUR_MS);
        let mut counts: HashMap<String, (u64, u64)> = HashMap::new();
        for fact in self.newest_first.iter().filter_map(|s| s.fact.as_ref()) {
            if fact.at < since_24h {
                break;
            }
            if !fact.fire_type.warms() {
                continue;
            }
            let c = counts.entry(fact.detector.clone()).or_default();
            c.1 += 1;
            if fact.at >= since_1h {
                c.0 += 1;
            }
        }
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::firelog::FireType;
    use crate::ledger::FireFact;

    fn sample(seq: i64, detector: &str, at: i64, fire_type: FireType) -> FireSample {
        FireSample { seq, fact: Some(FireFact { detector: detector.into(), at, fire_type }) }
    }

    #[test]
    fn heat_follows_the_rule_and_its_bands() {
        assert_eq!(Heat::of(0, 0).band, Band::Cold);
        assert_eq!(Heat::of(0, 0).value, 0.0);
        // 0.3 * 11/24 = 0.1375: still cold; 12/24 -> 0.15: warm.
        assert_eq!(Heat::of(0, 11).band, Band::Cold);
        assert_eq!(Heat::of(0, 12).band, Band::Warm);
        // 0.7 * 4/5 = 0.56 + 0.3 * 4/24 = 0.05 -> 0.61: hot.
        assert_eq!(Heat::of(4, 4).band, Band::Hot);
        assert_eq!(Heat::of(100, 1000).value, 1.0, "clamped");
    }

    #[test]
    fn the_window_counts_the_hour_and_the_day_and_skips_health_changes() {
        let now = 100 * HOUR_MS;
        let mut w = HeatWindow::default();
        w.take(vec![
            sample(4, "a", now - 10, FireType::Occurrence),
            sample(3, "a", now - 2 * HOUR_MS, FireType::Diagnostic),
            sample(2, "a", now - 3 * HOUR_MS, FireType::Quarantine),
            sample(1, "b", now - 25 * HOUR_MS, FireType::Occurrence),
        ]);
        let c = w.counts(now);
        assert_eq!(c.get("a"), Some(&(1, 2)));
        assert_eq!(c.get("b"), None, "older than a day");
    }

    #[test]
    fn a_refresh_adds_only_newer_entries_and_keeps_the_newest_window() {
        let mut w = HeatWindow::default();
        w.take((1..=3).rev().map(|s| sample(s, "a", s, FireType::Occurrence)).collect());
        assert_eq!(w.last_seq(), 3);
        let n = i64::from(HEAT_WINDOW);
        w.take((4..=n + 2).rev().map(|s| sample(s, "a", s, FireType::Occurrence)).collect());
        assert_eq!(w.newest_first.len(), HEAT_WINDOW as usize);
        assert_eq!(w.newest_first.front().map(|s| s.seq), Some(n + 2));
        assert_eq!(w.newest_first.back().map(|s| s.seq), Some(3), "the oldest beyond the window fell off");
    }

    #[test]
    fn a_refresh_reads_the_commits_since_the_last_one_from_the_real_ledger() {
        use crate::model::standing::{Policy, quarantine_by_hand, release};
        let tmp = tempfile::tempdir().unwrap();
        let mut ledger = crate::ledger::Ledger::open(tmp.path()).unwrap();
        let p = Policy::default();
        ledger.change_health("d", 1, |h| quarantine_by_hand(h, 1, &p)).unwrap();
        let mut w = HeatWindow::default();
        w.refresh(&LedgerView::open(tmp.path()).unwrap().unwrap()).unwrap();
        assert_eq!(w.newest_first.len(), 1);
        ledger.change_health("d", 2, |h| release(h, &p)).unwrap();
        w.refresh(&LedgerView::open(tmp.path()).unwrap().unwrap()).unwrap();
        let seqs: Vec<i64> = w.newest_first.iter().map(|s| s.seq).collect();
        assert_eq!(seqs, [2, 1], "the new entry in front, the old one kept, none twice");
        assert!(w.newest_first.iter().all(|s| s.fact.as_ref().is_some_and(|f| f.detector == "d")));
        assert_eq!(w.newest_first.iter().filter_map(|s| s.fact.as_ref().map(|f| f.at)).collect::<Vec<_>>(), [2, 1]);
        assert!(w.counts(3).is_empty(), "health changes do not warm, even within the hour");
    }
}
