//! Settling: the detectors' decisions, their health, and where each one's
//! reads leave it, gathered into one commit.
//!
//! It owns the end of a scan before the commit: each running detector asked
//! to `finish` (its last observations staged, its state kept), the cap on
//! the new fires and issues one detector may add (one over it fails as
//! `over-limit`, and nothing of its scan is committed), each loaded
//! detector's health after this scan, and the positions: a detector that
//! completed moves to where its reads ended; every other keeps the position
//! it started from (pinned, when it had only the source's), so it reads the
//! same records again when it next runs cleanly. It never reads a source.

use std::collections::BTreeMap;

use super::fanout::stage;
use super::plan::{Slot, Unit};
use crate::ledger::{Ledger, LedgerError};
use crate::model::failure::FailureKind;
use crate::model::standing::{self, Health, Outcome, Policy};
use crate::sources::Source;

/// What settling gives the commit.
pub(crate) struct Settled {
    pub states: BTreeMap<String, Option<Vec<u8>>>,
    pub health: Vec<Health>,
    pub positions: Positions,
    pub cursors: BTreeMap<String, String>,
}

/// The whole of settling, in order: decisions, the fire cap, health, positions.
pub(crate) fn settle(
    plan: &mut super::plan::Plan<'_>,
    ledger: &mut Ledger,
    (ends, sources): (&Ends, &[Box<dyn Source>]),
    scan_time: i64,
    versions: &BTreeMap<String, String>,
    (fires_per_scan, policy): (usize, &Policy),
) -> Result<Settled, LedgerError> {
    let mut states = finish(&mut plan.slots, ledger)?;
    cap_fires(&mut plan.slots, ledger, &mut states, scan_time, versions, fires_per_scan)?;
    let health = health(&mut plan.slots, scan_time, policy);
    let (positions, cursors) = positions(&plan.slots, &plan.units, ends, sources);
    Ok(Settled { states, health, positions, cursors })
}

/// Asks every detector still running for its decision; returns the states
/// of those that completed.
pub(crate) fn finish(
    slots: &mut [Slot<'_>],
    ledger: &mut Ledger,
) -> Result<BTreeMap<String, Option<Vec<u8>>>, LedgerError> {
    let mut states = BTreeMap::new();
    for slot in slots.iter_mut() {
        let Some(scan) = slot.scan.take() else { continue };
        let before = scan.accepted();
        match scan.finish() {
            Ok(outcome) => {
                slot.summary.fill_stats(&outcome.stats);
                slot.summary.observations = before + outcome.observations.len();
                slot.summary.logs = outcome.logs.iter().map(|l| format!("{}: {}", l.level, l.message)).collect();
                if outcome.logs_dropped > 0 {
                    slot.summary.logs.push(format!("({} more lines dropped: log budget spent)", outcome.logs_dropped));
                }
                states.insert(slot.name().to_owned(), outcome.state);
                stage(ledger, outcome.observations, slot.probation)?;
                slot.completed = true;
            }
            Err(f) => {
                ledger.unstage(slot.name())?;
                slot.summary.fail(&f);
            }
        }
    }
    Ok(states)
}

/// Fails, as `over-limit`, every detector whose scan would add more new
/// fires or new issues than its cap: `fires_per_scan`, or the records it
/// was handed when they are more. Its observations are unstaged, its state
/// dropped and its positions kept (it did not complete), so the commit
/// holds nothing of its scan; the others' commit as they are. Dropping one
/// detector's part can give another the first sight of an occurrence both
/// reported, so the check runs again until no detector is over.
pub(crate) fn cap_fires(
    slots: &mut [Slot<'_>],
    ledger: &mut Ledger,
    states: &mut BTreeMap<String, Option<Vec<u8>>>,
    scan_time: i64,
    versions: &BTreeMap<String, String>,
    fires_per_scan: usize,
) -> Result<(), LedgerError> {
    let floor = u64::try_from(fires_per_scan).unwrap_or(u64::MAX);
    let cap_of = |slots: &[Slot<'_>], name: &str| {
        let records = slots.iter().find(|s| s.name() == name).map_or(0, |s| s.summary.records);
        floor.max(records)
    };
    loop {
        let over = ledger.over_cap(scan_time, versions, |name| cap_of(slots, name))?;
        if over.is_empty() {
            return Ok(());
        }
        for (name, added) in over {
            let cap = cap_of(slots, &name);
            ledger.unstage(&name)?;
            states.remove(&name);
            let Some(slot) = slots.iter_mut().find(|s| s.name() == name) else { continue };
            slot.completed = false;
            slot.summary.observations = 0;
            slot.summary.status = super::report::DetectorStatus::Failed;
            slot.summary.failure = Some(super::report::FailureSummary::new(
                FailureKind::OverLimit,
                format!(
                    "its scan would add {} new fires and {} new issues, over the limit of {cap} a scan \
                     (fires_per_scan {fires_per_scan}, or one per record it read: {}); nothing of it is committed",
                    added.fires, added.issues, slot.summary.records
                ),
            ));
        }
    }
}

/// Every loaded detector's health after this scan (a detector that did not
/// run keeps its own; so does one whose config did not fit it: that is the
/// operator's mistake, not the detector's failure, and it is not counted).
pub(crate) fn health(slots: &mut [Slot<'_>], scan_time: i64, policy: &Policy) -> Vec<Health> {
    use super::report::DetectorStatus as S;
    slots
        .iter_mut()
        .map(|slot| {
            let outcome = match (slot.summary.status, &slot.summary.failure) {
                (S::Ok, _) => Outcome::Clean,
                (S::Failed, Some(f)) if f.kind == FailureKind::BadConfig => Outcome::DidNotRun,
                (S::Failed, Some(f)) => Outcome::Failed(f.failure()),
                _ => Outcome::DidNotRun,
            };
            let after = standing::after(slot.health.clone(), &outcome, scan_time, policy);
            slot.summary.health = after.state.standing();
            after
        })
        .collect()
}

/// Where each read ended: its cursor, or `None` when it failed.
pub(crate) type Ends = Vec<Option<Option<String>>>;

/// Each detector's position in each source it reads, `(detector, source)`.
pub(crate) type Positions = BTreeMap<(String, String), Option<String>>;

/// Every detector's position in every source it reads after this scan, and
/// each source's latest end (where a detector new to it starts).
pub(crate) fn positions(
    slots: &[Slot<'_>],
    units: &[Unit],
    ends: &Ends,
    sources: &[Box<dyn Source>],
) -> (Positions, BTreeMap<String, String>) {
    let mut reached: BTreeMap<(usize, &str), &Option<String>> = BTreeMap::new();
    let mut cursors = BTreeMap::new();
    for (unit, end) in units.iter().zip(ends) {
        let Some(end) = end else { continue };
        let source = sources[unit.source].name();
        for &m in &unit.members {
            reached.insert((m, source), end);
        }
        if let Some(c) = end {
            cursors.insert(source.to_owned(), c.clone());
        }
    }
    let mut positions = BTreeMap::new();
    for (i, slot) in slots.iter().enumerate() {
        for (source, start) in &slot.positions {
            let end = match reached.get(&(i, source.as_str())) {
                Some(end) if slot.completed => (*end).clone(),
                _ => start.clone(),
            };
            positions.insert((slot.name().to_owned(), source.clone()), end);
        }
    }
    (positions, cursors)
}
