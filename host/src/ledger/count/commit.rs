//! The commit: one scan's staged observations become counts, in the one
//! transaction that also moves the detectors' positions, state and health.
//!
//! It owns that transaction and what follows it (the exports); the rule each
//! observation is counted by is [`super::rule`], the entries it appends to the
//! fire log are built by [`super::fires`]. It never stores a grouping key or
//! an occurrence key as given: only their hashes.

use std::collections::{BTreeMap, HashMap};

use rusqlite::params;

use super::fires::{fact_fire, occurrence_fire};
use super::rule::{CommitReport, Counts, IssueDelta, Sums, count_one, read_floors, stored_issue};
use super::staging::Incoming;
use super::tally::Tally;
use crate::firelog::{FireBody, FireEntry};
use crate::ledger::export::ahead::AheadWriter;
use crate::ledger::export::checkpoint::Checkpoint;
use crate::ledger::export::segments::Appender;
use crate::ledger::meta::{self, MetaEntry, MetaKey};
use crate::ledger::{Health, Ledger, LedgerError};
use crate::model::observation::Observation;

/// Everything one scan commits.
#[derive(Debug, Default)]
pub struct ScanCommit<'a> {
    pub observations: &'a [Observation],
    /// Where each source is read from by a detector that has no position of
    /// its own yet (a newly added one): the end of its latest read.
    pub cursors: BTreeMap<String, String>,
    /// Each detector's position in each source, `(detector, source)`: moved
    /// only for a detector whose scan completed, so one that failed or did not
    /// run reads the same records again when it next runs.
    pub positions: BTreeMap<(String, String), Option<String>>,
    pub states: BTreeMap<String, Option<Vec<u8>>>,
    /// Each detector's health after this scan, committed with the rest.
    pub health: Vec<Health>,
    pub scan_time: i64,
    /// Each detector's version, for its fires.
    pub versions: BTreeMap<String, String>,
    /// Bookkeeping the scan keeps between runs (the fast-path stamp, the
    /// next wake, cadences).
    pub meta: Vec<MetaEntry>,
}

/// Counting straight into the store, in the commit's transaction.
struct Direct<'a, 't> {
    tx: &'a rusqlite::Transaction<'t>,
    appender: &'a mut Appender,
    scan_time: i64,
    versions: &'a BTreeMap<String, String>,
}

impl Counts for Direct<'_, '_> {
    fn first_occurrence(&mut self, key: &str) -> rusqlite::Result<bool> {
        Ok(self.tx.prepare_cached("INSERT OR IGNORE INTO occurrences(key) VALUES(?1)")?.execute([key])? == 1)
    }

    fn first_turn(&mut self, sig: &str, turn: &str) -> rusqlite::Result<bool> {
        Ok(self
            .tx
            .prepare_cached("INSERT OR IGNORE INTO issue_turns(sig, turn_id) VALUES(?1, ?2)")?
            .execute(params![sig, turn])?
            == 1)
    }

    fn stored_issue(&mut self, sig: &str) -> rusqlite::Result<Option<(i64, String)>> {
        stored_issue(self.tx, sig)
    }

    fn fire(&mut self, o: &Incoming) -> rusqlite::Result<()> {
        self.appender.append(self.tx, occurrence_fire(o, self.scan_time, self.versions))
    }
}

impl Ledger {
    /// Commits one scan in one transaction, then exports `issues.jsonl`.
    pub fn commit(&mut self, scan: ScanCommit<'_>) -> Result<CommitReport, LedgerError> {
        // Observations passed here are staged like the scan's own: one way in
        // to the counts.
        self.stage(scan.observations.iter().map(Observation::view))?;
        tracing::debug!("ledger commit begin");
        let mut tally = self.tally.take().filter(|t| t.matches(scan.scan_time, &scan.versions));
        // Dropped unfinished should the commit fail: nothing written ahead is kept.
        let ahead = tally.as_mut().and_then(Tally::take_ahead);
        let tx = ScanTx::begin(&mut self.conn, &self.db_path)?;
        let counted = match tally {
            // Counted while records flowed: moved into the store as it is.
            Some(tally) => tx.move_tally(tally)?,
            None => tx.count_staged(self.staging, &scan)?,
        };
        if self.staging {
            tx.run("DELETE FROM temp.staged", "cannot clear staged observations")?;
        }
        let mut report = counted.sums.report;
        tx.write_issues(&counted.sums.issues)?;
        tx.forget_old_days(scan.scan_time)?;
        report.regressed = crate::ledger::lifecycle::mark_regressions(&tx.tx, &counted.sums.issues, scan.scan_time)
            .map_err(tx.e("cannot mark a regression"))?;
        tx.write_bookkeeping(&scan)?;
        let (fires, health_spent) = tx.append_health(&scan)?;
        report.fires = fires - counted.fires_before;
        self.fire_append_time = counted.appended + health_spent;
        crate::ledger::count::test_hook::pause("commit-transaction");
        tx.commit()?;
        tracing::debug!(counted = report.counted, "ledger commit done");
        crate::ledger::count::test_hook::pause("commit-export");
        report.total_issues = self.total_issues()?;
        self.export_committed(scan.scan_time, ahead)?;
        Ok(report)
    }

    /// The exports after a commit (`issues.jsonl`, the fire log's segments
    /// and head), with the store's checkpoint beside them. The segments the
    /// scan wrote ahead (`ahead`) are put in place, not written again.
    fn export_committed(&mut self, scan_time: i64, ahead: Option<AheadWriter>) -> Result<(), LedgerError> {
        let exporting = std::time::Instant::now();
        let checkpoint = Checkpoint::start(&self.db_path);
        self.export()?;
        tracing::debug!("issues exported");
        let ready = ahead.map(AheadWriter::finish).unwrap_or_default();
        self.export_fires_with(scan_time, ready)?;
        tracing::debug!("fire log exported");
        checkpoint.finish();
        self.export_time = exporting.elapsed();
        meta::write(&self.conn, &MetaKey::ExportPending, None).map_err(self.err("cannot mark the export"))?;
        Ok(())
    }
}

/// A scan's transaction, and the store's path its errors name.
pub(super) struct ScanTx<'t> {
    tx: rusqlite::Transaction<'t>,
    path: &'t std::path::Path,
}

/// What counting left for the rest of the commit.
pub(super) struct Counted {
    pub(super) sums: Sums,
    /// The fire log's length before this scan.
    fires_before: u64,
    /// Time spent sealing and appending the occurrences' fires.
    appended: std::time::Duration,
}

impl<'t> ScanTx<'t> {
    pub(super) fn begin(conn: &'t mut rusqlite::Connection, path: &'t std::path::Path) -> Result<Self, LedgerError> {
        let tx = conn.transaction().map_err(|source| LedgerError::Store {
            path: path.to_owned(),
            action: "cannot begin the scan transaction",
            source,
        })?;
        Ok(ScanTx { tx, path })
    }

    fn e(&self, action: &'static str) -> impl FnOnce(rusqlite::Error) -> LedgerError + '_ {
        move |source| LedgerError::Store { path: self.path.to_owned(), action, source }
    }

    fn run(&self, sql: &str, action: &'static str) -> Result<(), LedgerError> {
        self.tx.execute(sql, []).map(drop).map_err(self.e(action))
    }

    /// Moves a scan's tally into the store.
    fn move_tally(&self, tally: Tally) -> Result<Counted, LedgerError> {
        let (fires_before, appended) = (tally.fires_before(), tally.spent());
        let sums = tally.into_store(&self.tx).map_err(self.e("cannot count"))?;
        Ok(Counted { sums, fires_before, appended })
    }

    /// Counts the staged observations (`staged`: there are any) in the
    /// order they were staged.
    pub(super) fn count_staged(&self, staged: bool, scan: &ScanCommit<'_>) -> Result<Counted, LedgerError> {
        let tx = &self.tx;
        if staged {
            floor_kinds_with_new_rules(tx).map_err(self.e("cannot set the count floor"))?;
        }
        let floors = read_floors(tx).map_err(self.e("cannot read the count floor"))?;
        let mut appender = Appender::open(tx).map_err(self.e("cannot read the fire log"))?;
        let fires_before = appender.count();
        let mut sums = Sums::default();
        if staged {
            let read = "cannot read staged observations";
            let mut stmt = tx
                .prepare(
                    "SELECT kind, sig, occ, title, origin, severity, tool, bot_id, thread_id, turn_id, at,
                            evidence_source, evidence_id, wasted_turns, grouping_version, detector, probation
                     FROM temp.staged ORDER BY seq",
                )
                .map_err(self.e(read))?;
            let mut rows = stmt.query([]).map_err(self.e(read))?;
            let mut direct =
                Direct { tx, appender: &mut appender, scan_time: scan.scan_time, versions: &scan.versions };
            while let Some(r) = rows.next().map_err(self.e(read))? {
                let incoming = Incoming::from_row(r).map_err(self.e(read))?;
                count_one(&mut direct, &floors, &mut sums, incoming).map_err(self.e("cannot count"))?;
            }
        }
        appender.flush(tx).map_err(self.e("cannot append to the fire log"))?;
        Ok(Counted { sums, fires_before, appended: appender.spent })
    }

    fn write_issues(&self, issues: &HashMap<String, IssueDelta>) -> Result<(), LedgerError> {
        for (sig, d) in issues {
            d.write(&self.tx, sig).map_err(self.e("cannot write an issue"))?;
        }
        Ok(())
    }

    /// The per-day history keeps [`crate::ledger::ISSUE_DAYS_KEPT`] days
    /// before the scan's, the per-hour one [`crate::ledger::ISSUE_HOURS_KEPT`]
    /// hours (by the indexes on `day` and `hour`: the cost of a scan's
    /// pruning does not grow with the folder's age).
    fn forget_old_days(&self, scan_time: i64) -> Result<(), LedgerError> {
        let oldest = crate::base::calendar::day_of(scan_time) - crate::ledger::ISSUE_DAYS_KEPT;
        self.tx
            .prepare_cached("DELETE FROM issue_days WHERE day < ?1")
            .and_then(|mut s| s.execute([oldest]))
            .map_err(self.e("cannot prune the issues' per-day history"))?;
        let oldest_hour = scan_time.div_euclid(3_600_000) - crate::ledger::ISSUE_HOURS_KEPT;
        self.tx
            .prepare_cached("DELETE FROM issue_hours WHERE hour < ?1")
            .and_then(|mut s| s.execute([oldest_hour]))
            .map_err(self.e("cannot prune the issues' per-hour history"))?;
        Ok(())
    }

    /// Each source's latest end, each detector's positions and state, the
    /// scan's own keys, and the mark that the exports are still to write.
    fn write_bookkeeping(&self, scan: &ScanCommit<'_>) -> Result<(), LedgerError> {
        let tx = &self.tx;
        for (source, value) in &scan.cursors {
            tx.execute(
                "INSERT INTO cursors(source, value) VALUES(?1, ?2) ON CONFLICT(source) DO UPDATE SET value = excluded.value",
                params![source, value],
            )
            .map_err(self.e("cannot store a cursor"))?;
        }
        for ((detector, source), value) in &scan.positions {
            tx.prepare_cached(
                "INSERT INTO positions(detector, source, value) VALUES(?1, ?2, ?3)
                 ON CONFLICT(detector, source) DO UPDATE SET value = excluded.value",
            )
            .and_then(|mut s| s.execute(params![detector, source, value]))
            .map_err(self.e("cannot store a position"))?;
        }
        for entry in &scan.meta {
            meta::write(tx, &entry.key(), entry.text().as_deref()).map_err(self.e("cannot store scan bookkeeping"))?;
        }
        // Cleared once issues.jsonl is written: a crash in between is seen
        // by the next run, which writes it again.
        meta::write(tx, &MetaKey::ExportPending, Some("1")).map_err(self.e("cannot mark the export"))?;
        for (detector, state) in &scan.states {
            tx.execute(
                "INSERT INTO detector_state(detector, state) VALUES(?1, ?2)
                 ON CONFLICT(detector) DO UPDATE SET state = excluded.state",
                params![detector, state],
            )
            .map_err(self.e("cannot store a detector state"))?;
        }
        Ok(())
    }

    /// Each detector's health, with the fire of a quarantine this scan
    /// started; returns the fire log's length after it and the time spent.
    fn append_health(&self, scan: &ScanCommit<'_>) -> Result<(u64, std::time::Duration), LedgerError> {
        let tx = &self.tx;
        let mut appender = Appender::open(tx).map_err(self.e("cannot read the fire log"))?;
        for h in &scan.health {
            let before = crate::ledger::store::read_one_health(tx, &h.detector)
                .map_err(self.e("cannot read detector health"))?;
            if let Some(entry) = quarantine_fire(before.as_ref(), h, scan) {
                appender.append(tx, entry.view()).map_err(self.e("cannot append to the fire log"))?;
            }
            crate::ledger::store::write_health(tx, h).map_err(self.e("cannot store detector health"))?;
        }
        appender.flush(tx).map_err(self.e("cannot append to the fire log"))?;
        Ok((appender.count(), appender.spent))
    }

    fn commit(self) -> Result<(), LedgerError> {
        let path = self.path.to_owned();
        self.tx.commit().map_err(|source| LedgerError::Store { path, action: "cannot commit the scan", source })
    }
}

/// A quarantine is a fact: the fire of a detector that this scan benched.
fn quarantine_fire(before: Option<&Health>, after: &Health, scan: &ScanCommit<'_>) -> Option<FireEntry> {
    let was = before.is_some_and(|b| matches!(b.state, crate::model::standing::State::Quarantined { .. }));
    let until = match after.state {
        crate::model::standing::State::Quarantined { until } if !was => until,
        _ => return None,
    };
    let reason = format!(
        "{} failures in a row (last: {}); quarantined until {until} ms",
        after.failures_in_a_row,
        after.last_failure.map_or_else(|| "unknown".to_owned(), |f| f.to_string())
    );
    let version = scan.versions.get(&after.detector).cloned();
    Some(fact_fire(&after.detector, scan.scan_time, version, FireBody::Quarantine { reason }))
}

/// The reset rule, applied when a kind's grouping rules change: a kind
/// staged with a grouping version newer than every stored issue of that kind
/// gets the count floor a reset gives (its newest `lastAt`), so an
/// occurrence already counted under the old rules, whose key the new rules
/// may have changed (`retry_loop` keys hold the signature), is never counted
/// again under the new ones.
fn floor_kinds_with_new_rules(tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT INTO count_floor(kind, at)
         SELECT i.kind, MAX(i.last_at) FROM issues i
         JOIN (SELECT kind, MAX(grouping_version) AS v FROM temp.staged GROUP BY kind) s ON s.kind = i.kind
         GROUP BY i.kind HAVING MAX(i.grouping_version) < MAX(s.v)
         ON CONFLICT(kind) DO UPDATE SET at = MAX(at, excluded.at)",
        [],
    )?;
    Ok(())
}
