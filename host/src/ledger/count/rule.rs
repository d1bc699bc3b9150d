//! The counting rule: how one observation is counted, wherever the counts
//! are kept (the store in the commit's transaction, or the scan's tally).
//!
//! It owns the hashes (an issue's signature, an occurrence's key), each
//! occurrence counted once and never below its kind's floor after a reset, a
//! turn wasted once per issue, and the issues summed in memory per issue and
//! written once ([`IssueDelta`]). It never stores a grouping key or an
//! occurrence key as given: only their hashes. It never opens a transaction:
//! the commit ([`super::commit`]) and the tally ([`super::tally`]) bring one.

use std::collections::{BTreeMap, HashMap};

use rusqlite::{OptionalExtension, params};
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::staging::Incoming;
use crate::model::observation::Severity;

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
    /// Fixed issues this commit counted a new occurrence of.
    pub regressed: u64,
}

/// SHA-256 over `parts`, a zero byte between each two.
pub(in crate::ledger) fn sha(parts: &[&str]) -> [u8; 32] {
    let mut h = Sha256::new();
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            h.update([0u8]);
        }
        h.update(p.as_bytes());
    }
    h.finalize().into()
}

pub(in crate::ledger) fn sha_hex(parts: &[&str]) -> String {
    crate::base::hex(&sha(parts))
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
pub(in crate::ledger) fn occurrence_key(kind: &str, occurrence: &str) -> String {
    sha_hex(&[kind, occurrence])[..32].to_owned()
}

/// What one scan changes of one issue, summed in memory (one entry per
/// issue, not per observation) and written once at the end of the commit.
pub(in crate::ledger) struct IssueDelta {
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
    /// The detector of the last occurrence counted.
    detector: String,
    /// Occurrences and wasted turns counted this scan per hour of their `at`
    /// (hours since the epoch): what the threshold rule's window reads, and
    /// (summed by day when written) what the per-day history gains.
    hours: BTreeMap<i64, (i64, i64)>,
}

impl IssueDelta {
    /// Occurrences this scan counted.
    pub(in crate::ledger) fn counted(&self) -> i64 {
        self.count
    }

    /// The detector of the last occurrence this scan counted.
    pub(in crate::ledger) fn detector(&self) -> &str {
        &self.detector
    }

    fn apply(&mut self, o: Incoming, wasted: i64) {
        self.count += 1;
        let hour = self.hours.entry(o.at.div_euclid(HOUR_MS)).or_default();
        (hour.0, hour.1) = (hour.0 + 1, hour.1 + wasted);
        self.detector.clone_from(&o.detector);
        self.wasted += wasted;
        self.first_at = self.first_at.min(o.at);
        self.last_at = self.last_at.max(o.at);
        self.severity = self.severity.max(o.severity);
        if o.at >= self.evidence_at {
            self.evidence_at = o.at;
            self.evidence = Some(o);
        }
    }

    pub(in crate::ledger) fn write(&self, tx: &rusqlite::Transaction<'_>, sig: &str) -> rusqlite::Result<()> {
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
                    first.origin.as_str(),
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
        self.write_days(tx, sig)
    }

    /// Adds this scan's occurrences to the issue's count per day.
    fn write_days(&self, tx: &rusqlite::Transaction<'_>, sig: &str) -> rusqlite::Result<()> {
        let mut add = tx.prepare_cached(
            "INSERT INTO issue_days(sig, day, count) VALUES(?1, ?2, ?3)
             ON CONFLICT(sig, day) DO UPDATE SET count = count + excluded.count",
        )?;
        // A day's count is its hours' (an hour never spans two UTC days).
        let mut days: BTreeMap<i64, i64> = BTreeMap::new();
        for (hour, (n, _)) in &self.hours {
            *days.entry(hour.div_euclid(24)).or_default() += n;
        }
        for (day, n) in &days {
            add.execute(params![sig, day, n])?;
        }
        let mut add = tx.prepare_cached(
            "INSERT INTO issue_hours(sig, hour, count, wasted) VALUES(?1, ?2, ?3, ?4)
             ON CONFLICT(sig, hour) DO UPDATE SET count = count + excluded.count, wasted = wasted + excluded.wasted",
        )?;
        for (hour, (n, wasted)) in &self.hours {
            add.execute(params![sig, hour, n, wasted])?;
        }
        Ok(())
    }
}

/// An hour, ms.
const HOUR_MS: i64 = 3_600_000;

/// Where counting checks and records what it counted: the store itself, in
/// the commit's transaction (`commit`'s `Direct`), or the scan's tally while records
/// still flow ([`super::tally`]), which the commit then moves into the store.
pub(in crate::ledger) trait Counts {
    /// Records an occurrence key; false when it was already counted.
    fn first_occurrence(&mut self, key: &str) -> rusqlite::Result<bool>;
    /// Records a turn wasted for an issue; false when it already was.
    fn first_turn(&mut self, sig: &str, turn: &str) -> rusqlite::Result<bool>;
    /// The stored issue's evidence time and severity, if it exists.
    fn stored_issue(&mut self, sig: &str) -> rusqlite::Result<Option<(i64, String)>>;
    /// Appends the fire of an occurrence counted for the first time.
    fn fire(&mut self, o: &Incoming) -> rusqlite::Result<()>;
}

/// What one detector's observations add to the store in one scan, as the
/// count attributes it: the fires it counted first, the issues it opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Added {
    pub fires: u64,
    pub issues: u64,
}

/// What counting has summed so far: the report, one delta per issue, and
/// what each detector added.
#[derive(Default)]
pub(in crate::ledger) struct Sums {
    pub(in crate::ledger) report: CommitReport,
    pub(in crate::ledger) issues: HashMap<String, IssueDelta>,
    pub(in crate::ledger) by_detector: HashMap<String, Added>,
}

/// `detector`'s entry in `by_detector`, made on its first use (a lookup,
/// with no allocation, on every later one).
fn added<'m>(by_detector: &'m mut HashMap<String, Added>, detector: &str) -> &'m mut Added {
    if !by_detector.contains_key(detector) {
        by_detector.insert(detector.to_owned(), Added::default());
    }
    by_detector.get_mut(detector).expect("just inserted")
}

/// A stored issue's evidence time and severity.
pub(in crate::ledger) fn stored_issue(
    conn: &rusqlite::Connection,
    sig: &str,
) -> rusqlite::Result<Option<(i64, String)>> {
    conn.prepare_cached("SELECT evidence_at, severity FROM main.issues WHERE sig = ?1")?
        .query_row([sig], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
}

/// Counts one observation: once per occurrence key, not below its kind's
/// floor, a turn wasted once per issue; the issue's change is summed into
/// `sums`.
pub(in crate::ledger) fn count_one(
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
    added(&mut sums.by_detector, &o.detector).fires += 1;
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
            added(&mut sums.by_detector, &o.detector).issues += 1;
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
                detector: o.detector.clone(),
                hours: BTreeMap::from([(at.div_euclid(HOUR_MS), (1, w))]),
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
                detector: String::new(),
                hours: BTreeMap::new(),
            };
            d.apply(o, wasted);
            d
        }
    };
    sums.issues.insert(sig, delta);
    Ok(())
}

/// The count floor of every kind that has one.
pub(in crate::ledger) fn read_floors(conn: &rusqlite::Connection) -> rusqlite::Result<HashMap<String, i64>> {
    let mut stmt = conn.prepare("SELECT kind, at FROM main.count_floor")?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    rows.collect()
}
