//! Counting: one scan's staged observations become counts, in the one
//! transaction that also moves the detectors' positions, state and health.
//!
//! It owns the commit: each occurrence counted once (by a hash of its kind and
//! key), never below its kind's floor after a reset, a turn wasted once per
//! issue, the issues summed in memory per issue and written once. It never
//! stores a grouping key or an occurrence key as given: only their hashes.

use std::collections::{BTreeMap, HashMap};

use rusqlite::{OptionalExtension, params};
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::ahead::AheadWriter;
use super::checkpoint::Checkpoint;
use super::fires::Appender;
use super::staging::Incoming;
use super::tally::Tally;
use super::{Health, Ledger, LedgerError};
use crate::firelog::{FireEntry, FireEntryRef, FireType};
use crate::observation::{Observation, Severity};

/// What one commit changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CommitReport {
    /// Occurrences counted for the first time: each is a fire.
    pub counted: u64,
    /// Entries appended to the fire log: the fires, and quarantines.
    pub fires: u64,
    /// Occurrences already counted by an earlier scan.
    pub repeated: u64,
    /// Occurrences not counted because a state reset kept newer ones.
    pub below_floor: u64,
    pub new_issues: u64,
    pub updated_issues: u64,
    pub total_issues: u64,
}

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
    /// Bookkeeping the scan keeps between runs (the fast-path stamp): a
    /// `None` value deletes the key.
    pub meta: Vec<(String, Option<String>)>,
}

/// SHA-256 over `parts`, a zero byte between each two.
pub(super) fn sha(parts: &[&str]) -> [u8; 32] {
    let mut h = Sha256::new();
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            h.update([0u8]);
        }
        h.update(p.as_bytes());
    }
    h.finalize().into()
}

pub(super) fn sha_hex(parts: &[&str]) -> String {
    crate::hex(&sha(parts))
}

/// The issue signature: `kind:` and 16 hex digits of a hash of the kind,
/// the grouping rules' version and the detector's grouping key. The key
/// itself is never stored. Version 1 hashes as if there were no version, so
/// signatures stay stable until the rules first change.
pub fn issue_sig(kind: &str, grouping_version: u32, signature: &str) -> String {
    let hash = if grouping_version <= 1 {
        sha_hex(&[kind, signature])
    } else {
        sha_hex(&[kind, &grouping_version.to_string(), signature])
    };
    format!("{kind}:{}", &hash[..16])
}

/// The key an occurrence is counted once under: its kind and the detector's
/// occurrence key, whichever detector reported it. Two detectors reporting
/// the same occurrence of the same kind (a detector and its port to another
/// language, say) describe one event, so it is counted once. Up to schema
/// version 1 the detector's name was part of the key.
pub(super) fn occurrence_key(kind: &str, occurrence: &str) -> String {
    sha_hex(&[kind, occurrence])[..32].to_owned()
}

/// What one scan changes of one issue, summed in memory (one entry per
/// issue, not per observation) and written once at the end of the commit.
pub(super) struct IssueDelta {
    /// For a new issue, its first observation (kind, origin, tool, rules);
    /// `None` for an issue already in the store, which the delta is added to.
    first: Option<Incoming>,
    count: i64,
    wasted: i64,
    first_at: i64,
    last_at: i64,
    severity: Severity,
    /// The newest observation's evidence (ties: the later one), when it is
    /// at least as new as the stored evidence.
    evidence: Option<Incoming>,
    evidence_at: i64,
}

impl IssueDelta {
    fn apply(&mut self, o: Incoming, wasted: i64) {
        self.count += 1;
        self.wasted += wasted;
        self.first_at = self.first_at.min(o.at);
        self.last_at = self.last_at.max(o.at);
        self.severity = self.severity.max(o.severity);
        if o.at >= self.evidence_at {
            self.evidence_at = o.at;
            self.evidence = Some(o);
        }
    }

    fn write(&self, tx: &rusqlite::Transaction<'_>, sig: &str) -> rusqlite::Result<()> {
        let ev = self.evidence.as_ref();
        match &self.first {
            Some(first) => {
                let ev = ev.unwrap_or(first);
                tx.prepare_cached(
                    "INSERT INTO issues(sig, kind, title, origin, severity, tool, bot_id, thread_id, turn_id, first_at,
                                        last_at, count, wasted_turns, evidence_source, evidence_id, evidence_at,
                                        grouping_version, probation)
                     VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)",
                )?
                .execute(params![
                    sig,
                    first.kind,
                    ev.title,
                    first.origin,
                    self.severity.as_str(),
                    first.tool,
                    ev.bot_id,
                    ev.thread_id,
                    ev.turn_id,
                    self.first_at,
                    self.last_at,
                    self.count,
                    self.wasted,
                    ev.evidence_source,
                    ev.evidence_id,
                    self.evidence_at,
                    first.grouping_version,
                    ev.probation
                ])?;
            }
            None => {
                tx.prepare_cached(
                    "UPDATE issues SET count = count + ?2, wasted_turns = wasted_turns + ?3,
                            first_at = MIN(first_at, ?4), last_at = MAX(last_at, ?5), severity = ?6
                     WHERE sig = ?1",
                )?
                .execute(params![
                    sig,
                    self.count,
                    self.wasted,
                    self.first_at,
                    self.last_at,
                    self.severity.as_str()
                ])?;
                if let Some(ev) = ev {
                    tx.prepare_cached(
                        "UPDATE issues SET title = ?2, bot_id = ?3, thread_id = ?4, turn_id = ?5,
                                evidence_source = ?6, evidence_id = ?7, evidence_at = ?8, probation = ?9
                         WHERE sig = ?1",
                    )?
                    .execute(params![
                        sig,
                        ev.title,
                        ev.bot_id,
                        ev.thread_id,
                        ev.turn_id,
                        ev.evidence_source,
                        ev.evidence_id,
                        ev.at,
                        ev.probation
                    ])?;
                }
            }
        }
        Ok(())
    }
}

/// Where counting checks and records what it counted: the store itself, in
/// the commit's transaction ([`Direct`]), or the scan's tally while records
/// still flow ([`super::tally`]), which the commit then moves into the store.
pub(super) trait Counts {
    /// Records an occurrence key; false when it was already counted.
    fn first_occurrence(&mut self, key: &str) -> rusqlite::Result<bool>;
    /// Records a turn wasted for an issue; false when it already was.
    fn first_turn(&mut self, sig: &str, turn: &str) -> rusqlite::Result<bool>;
    /// The stored issue's evidence time and severity, if it exists.
    fn stored_issue(&mut self, sig: &str) -> rusqlite::Result<Option<(i64, String)>>;
    /// Appends the fire of an occurrence counted for the first time.
    fn fire(&mut self, o: &Incoming) -> rusqlite::Result<()>;
}

/// What counting has summed so far: the report, one delta per issue.
#[derive(Default)]
pub(super) struct Sums {
    pub(super) report: CommitReport,
    pub(super) issues: HashMap<String, IssueDelta>,
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

/// A stored issue's evidence time and severity.
pub(super) fn stored_issue(conn: &rusqlite::Connection, sig: &str) -> rusqlite::Result<Option<(i64, String)>> {
    conn.prepare_cached("SELECT evidence_at, severity FROM main.issues WHERE sig = ?1")?
        .query_row([sig], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
}

/// Counts one observation: once per occurrence key, not below its kind's
/// floor, a turn wasted once per issue; the issue's change is summed into
/// `sums`.
pub(super) fn count_one(
    c: &mut dyn Counts,
    floors: &HashMap<String, i64>,
    sums: &mut Sums,
    o: Incoming,
) -> rusqlite::Result<()> {
    let report = &mut sums.report;
    if !c.first_occurrence(&o.occ)? {
        report.repeated += 1;
        return Ok(());
    }
    if floors.get(&o.kind).is_some_and(|&floor| o.at <= floor) {
        // Older than what a reset kept: it may have been counted before.
        report.below_floor += 1;
        return Ok(());
    }
    report.counted += 1;
    c.fire(&o)?;
    let wasted = match (&o.turn_id, o.wasted_turns) {
        (_, 0) => 0,
        (Some(turn), w) => {
            if c.first_turn(&o.sig, turn)? {
                i64::from(w)
            } else {
                0
            }
        }
        (None, w) => i64::from(w),
    };
    if let Some(d) = sums.issues.get_mut(&o.sig) {
        report.updated_issues += 1;
        d.apply(o, wasted);
        return Ok(());
    }
    let stored = c.stored_issue(&o.sig)?;
    let sig = o.sig.clone();
    let delta = match stored {
        None => {
            report.new_issues += 1;
            let w = wasted;
            let at = o.at;
            IssueDelta {
                count: 1,
                wasted: w,
                first_at: at,
                last_at: at,
                severity: o.severity,
                evidence_at: at,
                evidence: None,
                first: Some(o),
            }
        }
        Some((evidence_at, severity)) => {
            report.updated_issues += 1;
            let mut d = IssueDelta {
                first: None,
                count: 0,
                wasted: 0,
                first_at: i64::MAX,
                last_at: i64::MIN,
                severity: Severity::parse(&severity).unwrap_or(Severity::Low),
                evidence: None,
                evidence_at,
            };
            d.apply(o, wasted);
            d
        }
    };
    sums.issues.insert(sig, delta);
    Ok(())
}

/// The count floor of every kind that has one.
pub(super) fn read_floors(conn: &rusqlite::Connection) -> rusqlite::Result<HashMap<String, i64>> {
    let mut stmt = conn.prepare("SELECT kind, at FROM main.count_floor")?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    rows.collect()
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
        tx.write_bookkeeping(&scan)?;
        let (fires, health_spent) = tx.append_health(&scan)?;
        report.fires = fires - counted.fires_before;
        self.fire_append_time = counted.appended + health_spent;
        crate::test_hook::pause("commit-transaction");
        tx.commit()?;
        tracing::debug!(counted = report.counted, "ledger commit done");
        crate::test_hook::pause("commit-export");
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
        self.conn
            .execute("DELETE FROM meta WHERE key = 'export_pending'", [])
            .map_err(self.err("cannot mark the export"))?;
        Ok(())
    }
}

/// A scan's transaction, and the store's path its errors name.
struct ScanTx<'t> {
    tx: rusqlite::Transaction<'t>,
    path: &'t std::path::Path,
}

/// What counting left for the rest of the commit.
struct Counted {
    sums: Sums,
    /// The fire log's length before this scan.
    fires_before: u64,
    /// Time spent sealing and appending the occurrences' fires.
    appended: std::time::Duration,
}

impl<'t> ScanTx<'t> {
    fn begin(conn: &'t mut rusqlite::Connection, path: &'t std::path::Path) -> Result<Self, LedgerError> {
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
    fn count_staged(&self, staged: bool, scan: &ScanCommit<'_>) -> Result<Counted, LedgerError> {
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
        for (key, value) in &scan.meta {
            match value {
                Some(v) => tx.execute(
                    "INSERT INTO meta(key, value) VALUES(?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    params![key, v],
                ),
                None => tx.execute("DELETE FROM meta WHERE key = ?1", [key]),
            }
            .map_err(self.e("cannot store scan bookkeeping"))?;
        }
        // Cleared once issues.jsonl is written: a crash in between is seen
        // by the next run, which writes it again.
        self.run(
            "INSERT INTO meta(key, value) VALUES('export_pending', '1') ON CONFLICT(key) DO UPDATE SET value = '1'",
            "cannot mark the export",
        )?;
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
            let before =
                super::store::read_one_health(tx, &h.detector).map_err(self.e("cannot read detector health"))?;
            if let Some(entry) = quarantine_fire(before.as_ref(), h, scan) {
                appender.append(tx, entry.view()).map_err(self.e("cannot append to the fire log"))?;
            }
            super::store::write_health(tx, h).map_err(self.e("cannot store detector health"))?;
        }
        appender.flush(tx).map_err(self.e("cannot append to the fire log"))?;
        Ok((appender.count(), appender.spent))
    }

    fn commit(self) -> Result<(), LedgerError> {
        let path = self.path.to_owned();
        self.tx.commit().map_err(|source| LedgerError::Store { path, action: "cannot commit the scan", source })
    }
}

/// The fire of an occurrence counted for the first time.
pub(super) fn occurrence_fire<'a>(
    o: &'a Incoming,
    scan_time: i64,
    versions: &'a BTreeMap<String, String>,
) -> FireEntryRef<'a> {
    FireEntryRef {
        fire_type: FireType::Occurrence,
        recorded_at: scan_time,
        at: o.at,
        detector: &o.detector,
        detector_version: versions.get(&o.detector).map(String::as_str),
        kind: Some(&o.kind),
        sig: Some(&o.sig),
        origin: Some(&o.origin),
        severity: Some(o.severity.as_str()),
        tool: o.tool.as_deref(),
        bot_id: o.bot_id.as_deref(),
        thread_id: o.thread_id.as_deref(),
        turn_id: o.turn_id.as_deref(),
        evidence_source: Some(&o.evidence_source),
        evidence_id: Some(&o.evidence_id),
        probation: o.probation,
        reason: None,
    }
}

/// A quarantine is a fact: the fire of a detector that this scan benched.
fn quarantine_fire(before: Option<&Health>, after: &Health, scan: &ScanCommit<'_>) -> Option<FireEntry> {
    let was = before.is_some_and(|b| matches!(b.state, crate::health::State::Quarantined { .. }));
    let until = match after.state {
        crate::health::State::Quarantined { until } if !was => until,
        _ => return None,
    };
    Some(health_fire(
        FireType::Quarantine,
        after,
        scan.scan_time,
        scan.versions.get(&after.detector).cloned(),
        format!(
            "{} failures in a row (last: {}); quarantined until {until} ms",
            after.failures_in_a_row,
            after.last_failure.as_deref().unwrap_or("unknown")
        ),
    ))
}

/// The fire of a change to a detector's health.
pub(super) fn health_fire(
    fire_type: FireType,
    h: &Health,
    at: i64,
    version: Option<String>,
    reason: String,
) -> FireEntry {
    FireEntry {
        seq: 0,
        fire_type,
        recorded_at: at,
        at,
        detector: h.detector.clone(),
        detector_version: version,
        kind: None,
        sig: None,
        origin: None,
        severity: None,
        tool: None,
        bot_id: None,
        thread_id: None,
        turn_id: None,
        evidence_source: None,
        evidence_id: None,
        probation: false,
        reason: Some(reason),
        prev: String::new(),
        hash: String::new(),
    }
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
