//! The cap on what one detector adds in one scan: new fires and new issues
//! (`[limits] fires_per_scan`, docs/sandbox.md).
//!
//! It owns finding, before the commit, the detectors whose staged
//! observations would add more than their cap, counted exactly as the
//! commit will count them: from the scan's tally when it still holds (in
//! memory already: nothing is read), else by counting the staged
//! observations in a transaction that is rolled back. Without a tally, a
//! detector that staged no more rows than its cap cannot be over it (one
//! row adds at most one fire and one issue), so a scan where none did costs
//! one grouped read of the staging and no count. It never drops
//! what it finds (the scan unstages a detector over its cap and fails it)
//! and never writes the store.

use std::collections::{BTreeMap, HashMap};

use super::commit::{ScanCommit, ScanTx};
use super::rule::Added;
use crate::ledger::{Ledger, LedgerError};

impl Ledger {
    /// The detectors whose staged observations would add more new fires or
    /// more new issues than `cap` says for them, with what they would add,
    /// by name. `scan_time` and `versions` are the scan's, as its commit
    /// takes them.
    pub fn over_cap(
        &mut self,
        scan_time: i64,
        versions: &BTreeMap<String, String>,
        cap: impl Fn(&str) -> u64,
    ) -> Result<Vec<(String, Added)>, LedgerError> {
        if !self.staging {
            return Ok(Vec::new());
        }
        let added = match self.tally.as_ref().filter(|t| t.matches(scan_time, versions)) {
            // Counted as the rows were staged: nothing to read.
            Some(tally) => tally.by_detector().clone(),
            None if self.staged_over(&cap)?.is_empty() => return Ok(Vec::new()),
            None => self.count_dry(scan_time, versions)?,
        };
        let mut over: Vec<(String, Added)> = added
            .into_iter()
            .filter(|(detector, a)| {
                let cap = cap(detector);
                a.fires > cap || a.issues > cap
            })
            .collect();
        over.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(over)
    }

    /// The detectors that staged more rows than their cap.
    fn staged_over(&self, cap: &impl Fn(&str) -> u64) -> Result<Vec<String>, LedgerError> {
        let path = &self.db_path;
        let read =
            |source| LedgerError::Store { path: path.clone(), action: "cannot read staged observations", source };
        let mut stmt =
            self.conn.prepare("SELECT detector, COUNT(*) FROM temp.staged GROUP BY detector").map_err(&read)?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))).map_err(&read)?;
        let mut over = Vec::new();
        for row in rows {
            let (detector, staged) = row.map_err(&read)?;
            if u64::try_from(staged).unwrap_or(0) > cap(&detector) {
                over.push(detector);
            }
        }
        Ok(over)
    }

    /// What each detector's staged observations add, counted as the commit
    /// counts them, in a transaction rolled back.
    fn count_dry(
        &mut self,
        scan_time: i64,
        versions: &BTreeMap<String, String>,
    ) -> Result<HashMap<String, Added>, LedgerError> {
        let scan = ScanCommit { scan_time, versions: versions.clone(), ..ScanCommit::default() };
        let staged = self.staging;
        let tx = ScanTx::begin(&mut self.conn, &self.db_path)?;
        let counted = tx.count_staged(staged, &scan)?;
        // Dropped, not committed: the transaction rolls back.
        drop(tx);
        Ok(counted.sums.by_detector)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::ScanCommit;
    use crate::model::observation::{Observation, Origin, Severity};

    fn obs(detector: &str, occurrence: &str, signature: &str) -> Observation {
        Observation {
            detector: detector.into(),
            kind: "tool_error".into(),
            signature: signature.into(),
            grouping_version: 1,
            title: format!("title of {signature}"),
            origin: Origin::Shell,
            severity: Severity::High,
            tool: None,
            bot_id: None,
            thread_id: None,
            turn_id: None,
            at: 10,
            occurrence: occurrence.into(),
            evidence_source: "messages".into(),
            evidence_id: occurrence.into(),
            wasted_turns: 0,
            probation: false,
        }
    }

    fn versions() -> BTreeMap<String, String> {
        ["a", "b", "c"].iter().map(|d| (d.to_string(), "1.0.0".to_owned())).collect()
    }

    fn stage(l: &mut Ledger, observations: &[Observation]) {
        l.stage(observations.iter().map(Observation::view)).unwrap();
    }

    #[test]
    fn a_detector_over_its_cap_is_found_alike_from_the_tally_and_by_counting() {
        for abandoned in [false, true] {
            let d = tempfile::tempdir().unwrap();
            let mut l = Ledger::open(d.path()).unwrap();
            l.begin_scan(1000, versions()).unwrap();
            // a: five fresh keys in two issues; b: two fresh keys, each
            // reported twice (four rows, two fires).
            let a: Vec<_> = (0..5).map(|i| obs("a", &format!("a{i}"), &format!("s{}", i % 2))).collect();
            stage(&mut l, &a);
            stage(&mut l, &[obs("b", "b0", "t"), obs("b", "b1", "t"), obs("b", "b0", "t"), obs("b", "b1", "t")]);
            if abandoned {
                // A failed detector's part dropped: the tally is abandoned.
                stage(&mut l, &[obs("c", "c0", "u")]);
                l.unstage("c").unwrap();
            }
            assert_eq!(l.tally.is_some(), !abandoned);
            let over = l.over_cap(1000, &versions(), |_| 3).unwrap();
            assert_eq!(over, vec![("a".to_owned(), Added { fires: 5, issues: 2 })], "abandoned: {abandoned}");
            assert!(l.over_cap(1000, &versions(), |_| 5).unwrap().is_empty(), "the cap itself is allowed");
            // Counting to find it wrote nothing: the commit counts as before.
            let report = l.commit(ScanCommit { scan_time: 1000, versions: versions(), ..Default::default() }).unwrap();
            assert_eq!((report.counted, report.new_issues), (7, 3));
        }
    }

    #[test]
    fn what_the_store_already_counted_is_not_added_again() {
        let d = tempfile::tempdir().unwrap();
        let mut l = Ledger::open(d.path()).unwrap();
        let a: Vec<_> = (0..5).map(|i| obs("a", &format!("a{i}"), "s")).collect();
        stage(&mut l, &a);
        l.commit(ScanCommit { scan_time: 1000, versions: versions(), ..Default::default() }).unwrap();
        // The same five and one new: six rows, over a cap of 3 by rows, one fire by count.
        l.begin_scan(2000, versions()).unwrap();
        stage(&mut l, &a);
        stage(&mut l, &[obs("a", "a5", "s")]);
        assert!(l.over_cap(2000, &versions(), |_| 3).unwrap().is_empty());
        assert_eq!(
            l.over_cap(2000, &versions(), |_| 0).unwrap(),
            vec![("a".to_owned(), Added { fires: 1, issues: 0 })]
        );
    }

    #[test]
    fn dropping_one_detector_can_put_another_over_its_cap() {
        // a and b report the same keys; a, staged first, counts them. Once a
        // is dropped, b's rows are the first sight of them.
        let d = tempfile::tempdir().unwrap();
        let mut l = Ledger::open(d.path()).unwrap();
        l.begin_scan(1000, versions()).unwrap();
        let keys =
            |det: &str, n: usize| -> Vec<Observation> { (0..n).map(|i| obs(det, &format!("k{i}"), "s")).collect() };
        stage(&mut l, &keys("a", 6));
        stage(&mut l, &keys("b", 4));
        let cap = |name: &str| if name == "a" { 5 } else { 3 };
        assert_eq!(l.over_cap(1000, &versions(), cap).unwrap(), vec![("a".to_owned(), Added { fires: 6, issues: 1 })]);
        l.unstage("a").unwrap();
        assert_eq!(l.over_cap(1000, &versions(), cap).unwrap(), vec![("b".to_owned(), Added { fires: 4, issues: 1 })]);
    }
}
