//! The threshold rule: an issue whose occurrences or wasted turns in a
//! rolling window reach a configured number records a `threshold` fire,
//! once per crossing ("immediately when an issue crosses a threshold").
//!
//! It owns the crossing's bookkeeping (`issue_thresholds`: the issues over
//! the threshold when last looked at) and its fire. The window is read from
//! the per-hour counts the scans' commits keep (`issue_hours`, by the index
//! on `hour`: the same cost on a year-old folder), counted in whole hours:
//! the current hour and the `window_hours - 1` before it. An issue that
//! falls back under the threshold is armed again; crossing again fires
//! again. It never counts an occurrence (that is [`super::count`]).

use std::collections::{BTreeMap, BTreeSet};

use rusqlite::params;

use super::export::segments::Appender;
use super::lifecycle::{issue_fire, last_detector, remember};
use super::{Ledger, LedgerError};
use crate::firelog::{FireBody, FireType};

/// When an issue is over the threshold: at least `count` occurrences, or
/// at least `wasted_turns` wasted turns, in its last `window_hours` hours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThresholdRule {
    pub count: Option<i64>,
    pub wasted_turns: Option<i64>,
    pub window_hours: i64,
}

impl ThresholdRule {
    fn reason(&self, count: i64, wasted: i64) -> String {
        let over = match (self.count, self.wasted_turns) {
            (Some(c), _) if count >= c => format!("count threshold {c}"),
            (_, Some(w)) => format!("wasted turns threshold {w}"),
            _ => String::new(),
        };
        format!("{count} occurrences, {wasted} wasted turns in the last {}h ({over})", self.window_hours)
    }
}

impl Ledger {
    /// Looks at every issue against `rule` at `now`: a `threshold` fire for
    /// each that crossed it since the last look (their sequence numbers),
    /// the others that fell back armed again. One transaction; the log
    /// exported when it grew.
    pub fn mark_thresholds(&mut self, rule: &ThresholdRule, now: i64) -> Result<Vec<u64>, LedgerError> {
        let path = self.db_path.clone();
        let e = move |source| LedgerError::Store { path: path.clone(), action: "cannot mark a threshold", source };
        let tx = self.conn.transaction().map_err(&e)?;
        let over = over_threshold(&tx, rule, now).map_err(&e)?;
        let crossed: BTreeSet<String> = {
            let mut stmt = tx.prepare_cached("SELECT sig FROM issue_thresholds").map_err(&e)?;
            let rows = stmt.query_map([], |r| r.get(0)).map_err(&e)?;
            rows.collect::<rusqlite::Result<_>>().map_err(&e)?
        };
        for gone in crossed.iter().filter(|s| !over.contains_key(*s)) {
            tx.execute("DELETE FROM issue_thresholds WHERE sig = ?1", [gone]).map_err(&e)?;
        }
        let mut fired = Vec::new();
        let new: Vec<_> = over.iter().filter(|(s, _)| !crossed.contains(*s)).collect();
        if !new.is_empty() {
            let mut appender = Appender::open(&tx).map_err(&e)?;
            for (sig, (kind, count, wasted)) in new {
                let detector = last_detector(&tx, sig).map_err(&e)?;
                let reason = rule.reason(*count, *wasted);
                let body = FireBody::Threshold { kind: kind.clone(), sig: sig.clone(), reason };
                let entry = issue_fire(&detector, now, body);
                appender.append(&tx, entry.view()).map_err(&e)?;
                remember(&tx, sig, appender.count(), FireType::Threshold, now).map_err(&e)?;
                tx.execute("INSERT INTO issue_thresholds(sig, crossed_at) VALUES(?1, ?2)", params![sig, now])
                    .map_err(&e)?;
                fired.push(appender.count());
            }
            appender.flush(&tx).map_err(&e)?;
        }
        tx.commit().map_err(&e)?;
        if !fired.is_empty() {
            self.export_fires(now)?;
        }
        Ok(fired)
    }
}

/// The issues over `rule` at `now`: signature → (kind, count, wasted turns).
fn over_threshold(
    tx: &rusqlite::Transaction<'_>,
    rule: &ThresholdRule,
    now: i64,
) -> rusqlite::Result<BTreeMap<String, (String, i64, i64)>> {
    let first_hour = now.div_euclid(3_600_000) - rule.window_hours + 1;
    let mut stmt = tx.prepare_cached(
        "SELECT h.sig, i.kind, SUM(h.count), SUM(h.wasted) FROM issue_hours h JOIN issues i ON i.sig = h.sig
         WHERE h.hour >= ?1 GROUP BY h.sig
         HAVING (?2 IS NOT NULL AND SUM(h.count) >= ?2) OR (?3 IS NOT NULL AND SUM(h.wasted) >= ?3)",
    )?;
    let rows = stmt.query_map(params![first_hour, rule.count, rule.wasted_turns], |r| {
        Ok((r.get::<_, String>(0)?, (r.get(1)?, r.get(2)?, r.get(3)?)))
    })?;
    rows.collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::ScanCommit;
    use crate::ledger::tests::obs;
    use crate::model::observation::Observation;

    #[test]
    fn an_issue_crossing_the_threshold_fires_once_and_again_only_after_falling_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut l = Ledger::open(dir.path()).unwrap();
        let h = 3_600_000;
        let t = 1_000 * h;
        let rule = ThresholdRule { count: Some(3), wasted_turns: None, window_hours: 2 };
        let scan = |l: &mut Ledger, keys: &[&str], at: i64| {
            let observations: Vec<Observation> = keys.iter().map(|k| obs(k, "s", k, at)).collect();
            l.commit(ScanCommit { scan_time: at, observations: &observations, ..Default::default() }).unwrap();
        };
        scan(&mut l, &["a", "b"], t);
        assert!(l.mark_thresholds(&rule, t).unwrap().is_empty(), "two of three");
        scan(&mut l, &["c"], t + 1);
        assert_eq!(l.mark_thresholds(&rule, t + 1).unwrap().len(), 1, "crossed");
        scan(&mut l, &["d"], t + 2);
        assert!(l.mark_thresholds(&rule, t + 2).unwrap().is_empty(), "still over: no second fire");
        // Two hours later the window holds none of them: armed again.
        assert!(l.mark_thresholds(&rule, t + 2 * h).unwrap().is_empty());
        scan(&mut l, &["e", "f", "g"], t + 2 * h + 5);
        assert_eq!(l.mark_thresholds(&rule, t + 2 * h + 5).unwrap().len(), 1, "crossed again");
        let wasted = ThresholdRule { count: None, wasted_turns: Some(3), window_hours: 1 };
        let dir2 = tempfile::tempdir().unwrap();
        let mut l2 = Ledger::open(dir2.path()).unwrap();
        scan(&mut l2, &["x", "y", "z"], t);
        assert_eq!(l2.mark_thresholds(&wasted, t).unwrap().len(), 1, "three wasted turns");
    }
}
