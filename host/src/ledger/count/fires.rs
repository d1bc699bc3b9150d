//! The fire log's entries a scan or a command records: an occurrence
//! counted for the first time, and every other fact (a change to a
//! detector's health or an issue's state, a digest, a key change).
//!
//! It owns building those entries from what was counted; it never seals,
//! stores or exports one (the fire log's format and the ledger's export do).

use std::collections::BTreeMap;

use super::staging::Incoming;
use crate::firelog::{FireBody, FireEntry, FireEntryRef};

/// The fire of an occurrence counted for the first time.
pub(in crate::ledger) fn occurrence_fire<'a>(
    o: &'a Incoming,
    scan_time: i64,
    versions: &'a BTreeMap<String, String>,
) -> FireEntryRef<'a> {
    FireEntryRef {
        recorded_at: scan_time,
        at: o.at,
        detector: &o.detector,
        detector_version: versions.get(&o.detector).map(String::as_str),
        probation: o.probation,
        body: FireBody::Occurrence {
            kind: &o.kind,
            sig: &o.sig,
            origin: o.origin,
            severity: o.severity,
            tool: o.tool.as_deref(),
            bot_id: o.bot_id.as_deref(),
            thread_id: o.thread_id.as_deref(),
            turn_id: o.turn_id.as_deref(),
            evidence_source: &o.evidence_source,
            evidence_id: &o.evidence_id,
        },
    }
}

/// The fire of anything but an occurrence (a change to a detector's health
/// or to an issue's state, a diagnostic, a digest, a key change): recorded
/// when it held, by `detector`, never on probation.
pub(in crate::ledger) fn fact_fire(detector: &str, at: i64, version: Option<String>, body: FireBody) -> FireEntry {
    FireEntry {
        seq: 0,
        recorded_at: at,
        at,
        detector: detector.to_owned(),
        detector_version: version,
        probation: false,
        body,
        prev: String::new(),
        hash: String::new(),
    }
}
