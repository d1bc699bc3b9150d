//! `issues.jsonl`: the issues as people and other programs read them.
//!
//! It owns that file (one line per issue, in the scanner spec's field
//! order), rewritten atomically after every commit and again at the next open
//! when a crash came between the commit and the write. Of the store it only
//! reads the issues, and clears the `export_pending` mark once a pending
//! export is written; it never writes anything else there.

use rusqlite::Connection;
use serde::Serialize;

use crate::ledger::lifecycle::IssueState;
use crate::ledger::meta::{self, MetaKey};
use crate::ledger::{Ledger, LedgerError};

impl Ledger {
    /// Every issue, in `issues.jsonl` order (first seen, then signature).
    pub fn issues(&self) -> Result<Vec<IssueLine>, LedgerError> {
        read_issues(&self.conn).map_err(self.err("cannot read issues"))
    }

    /// The issue with signature `sig`, if there is one (by its key).
    pub fn issue(&self, sig: &str) -> Result<Option<IssueLine>, LedgerError> {
        read_issue(&self.conn, sig).map_err(self.err("cannot read an issue"))
    }

    /// Writes `issues.jsonl` again if the last commit did not get to it.
    pub fn finish_pending_export(&mut self) -> Result<(), LedgerError> {
        if self.meta(&MetaKey::ExportPending)?.is_some() {
            self.export()?;
            let at = self.meta_ms(&MetaKey::LastScan)?.unwrap_or(0);
            self.export_fires(at)?;
            meta::write(&self.conn, &MetaKey::ExportPending, None).map_err(self.err("cannot mark the export"))?;
        }
        Ok(())
    }

    /// Rewrites `issues.jsonl` atomically: temp file, fsync, rename, fsync dir.
    pub fn export(&self) -> Result<(), LedgerError> {
        let issues = self.issues()?;
        let target = self.issues_path();
        let io = |source| LedgerError::Export { path: target.clone(), source };
        let mut buf = Vec::with_capacity(issues.len() * 400);
        for issue in &issues {
            serde_json::to_writer(&mut buf, issue).map_err(|e| io(std::io::Error::other(e)))?;
            buf.push(b'\n');
        }
        crate::base::private_fs::write_atomic(&target, &buf).map_err(io)
    }
}

/// Every issue, in `issues.jsonl` order (first seen, then signature).
pub(in crate::ledger) fn read_issues(conn: &Connection) -> rusqlite::Result<Vec<IssueLine>> {
    read_issues_where(conn, None)
}

/// The issue with signature `sig`, read by its key (an issue's page asks for one).
pub(in crate::ledger) fn read_issue(conn: &Connection, sig: &str) -> rusqlite::Result<Option<IssueLine>> {
    Ok(read_issues_where(conn, Some(sig))?.pop())
}

/// Every issue, or only the one with signature `only`.
fn read_issues_where(conn: &Connection, only: Option<&str>) -> rusqlite::Result<Vec<IssueLine>> {
    let mut stmt = conn.prepare_cached(
        "SELECT i.sig, kind, title, origin, severity, tool, bot_id, thread_id, turn_id, first_at, last_at,
                        count, wasted_turns, evidence_source, evidence_id, grouping_version, probation,
                        s.state, s.fixed_at, s.note
                 FROM issues i LEFT JOIN issue_state s ON s.sig = i.sig
                 WHERE ?1 IS NULL OR i.sig = ?1 ORDER BY first_at, i.sig",
    )?;
    let rows = stmt.query_map([only], |r| {
        Ok(IssueLine {
            sig: r.get(0)?,
            kind: r.get(1)?,
            title: r.get(2)?,
            origin: r.get(3)?,
            severity: r.get(4)?,
            tool: r.get(5)?,
            bot_id: r.get(6)?,
            thread_id: r.get(7)?,
            turn_id: r.get(8)?,
            first_at: r.get(9)?,
            last_at: r.get(10)?,
            count: r.get(11)?,
            wasted_turns: r.get(12)?,
            evidence_ref: EvidenceRef { source: r.get(13)?, id: r.get(14)? },
            grouping_version: r.get(15)?,
            probation: r.get(16)?,
            state: IssueState::from_column(17, r.get(17)?)?,
            fixed_at: r.get(18)?,
            fix_note: r.get(19)?,
        })
    })?;
    rows.collect()
}

/// One line of `issues.jsonl`, in the scanner spec's field order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IssueLine {
    pub sig: String,
    pub kind: String,
    pub title: String,
    pub origin: String,
    pub severity: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bot_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    pub first_at: i64,
    pub last_at: i64,
    pub count: i64,
    pub wasted_turns: i64,
    pub evidence_ref: EvidenceRef,
    /// The version of the grouping rules (the normalizer's, for the Rust
    /// detectors) that built this issue's signature.
    #[serde(default = "one")]
    pub grouping_version: u32,
    /// The newest occurrence was reported by a detector on probation (a
    /// field, never a title prefix, so titles stay stable across scans).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub probation: bool,
    /// Open, fixed by the operator, or regressed (seen again after a fix).
    #[serde(default)]
    pub state: IssueState,
    /// When the operator last marked it fixed, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed_at: Option<i64>,
    /// The operator's note with that fix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix_note: Option<String>,
}

fn one() -> u32 {
    1
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct EvidenceRef {
    pub source: String,
    pub id: String,
}
