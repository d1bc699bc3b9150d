//! The fire log's entries a scan or a command records: an occurrence
//! counted for the first time, a change to a detector's health.
//!
//! It owns building those entries from what was counted; it never seals,
//! stores or exports one (the fire log's format and the ledger's export do).

use std::collections::BTreeMap;

use super::staging::Incoming;
use crate::firelog::{FireEntry, FireEntryRef, FireType};
use crate::ledger::Health;

/// The fire of an occurrence counted for the first time.
pub(in crate::ledger) fn occurrence_fire<'a>(
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
        origin: Some(o.origin),
        severity: Some(o.severity),
        tool: o.tool.as_deref(),
        bot_id: o.bot_id.as_deref(),
        thread_id: o.thread_id.as_deref(),
        turn_id: o.turn_id.as_deref(),
        evidence_source: Some(&o.evidence_source),
        evidence_id: Some(&o.evidence_id),
        probation: o.probation,
        reason: None,
        key: None,
    }
}

/// The fire of a change to a detector's health.
pub(in crate::ledger) fn health_fire(
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
        key: None,
        prev: String::new(),
        hash: String::new(),
    }
}
