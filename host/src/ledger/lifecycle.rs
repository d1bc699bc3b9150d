//! An issue's life: `open`, `fixed` by the operator, `regressed` when a new
//! occurrence is counted after its fix.
//!
//! It owns the `issue_state` table (no row: open), the [`IssueState`] a line
//! of `issues.jsonl` carries, the operator's fix and reopen (each in a
//! transaction of its own, with its `fix` or `reopen` fire) and the
//! regressions a scan's commit marks in its own transaction (with their
//! `regression` fires). It never counts an occurrence (that is
//! [`super::count`]) and never reads the data dir.

use std::collections::HashMap;

use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};

use super::count::rule::IssueDelta;
use super::export::segments::Appender;
use super::{Ledger, LedgerError};
use crate::firelog::{FireBody, FireEntry, FireType};

/// Where an issue stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IssueState {
    #[default]
    Open,
    /// Marked fixed by the operator.
    Fixed,
    /// Seen again after it was marked fixed.
    Regressed,
}

impl IssueState {
    pub fn as_str(self) -> &'static str {
        match self {
            IssueState::Open => "open",
            IssueState::Fixed => "fixed",
            IssueState::Regressed => "regressed",
        }
    }

    /// The state named `name` (`open`, `fixed`, `regressed`).
    pub fn parse(name: &str) -> Option<IssueState> {
        [IssueState::Open, IssueState::Fixed, IssueState::Regressed].into_iter().find(|s| s.as_str() == name)
    }

    /// A stored state; an unknown text is an error of the read, naming it.
    pub(in crate::ledger) fn from_column(column: usize, text: Option<String>) -> rusqlite::Result<IssueState> {
        match text {
            None => Ok(IssueState::Open),
            Some(t) => IssueState::parse(&t).ok_or_else(|| {
                rusqlite::Error::FromSqlConversionFailure(
                    column,
                    rusqlite::types::Type::Text,
                    format!("unknown issue state `{t}`").into(),
                )
            }),
        }
    }
}

/// Why an operator's change to an issue was refused.
#[derive(Debug, thiserror::Error)]
pub enum LifecycleError {
    #[error("no issue has the signature `{0}`")]
    Unknown(String),
    #[error("issue `{sig}` is already {}", state.as_str())]
    Already { sig: String, state: IssueState },
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

/// What an operator's fix or reopen did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StateChange {
    pub sig: String,
    pub state: IssueState,
    /// The fire log entry that records it.
    pub fire_seq: u64,
    /// The detector that last reported the issue (empty when no fire names one).
    #[serde(skip)]
    pub detector: String,
    /// What a fix did about the issue's regression case (the core's capture
    /// fills it in; `None` for a reopen).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub case: Option<crate::ledger::CaseCapture>,
}

/// An issue's stored state, its fix time and note.
pub(in crate::ledger) fn read_state(
    conn: &Connection,
    sig: &str,
) -> rusqlite::Result<(IssueState, Option<i64>, Option<String>)> {
    let row = conn
        .prepare_cached("SELECT state, fixed_at, note FROM main.issue_state WHERE sig = ?1")?
        .query_row([sig], |r| Ok((r.get::<_, String>(0)?, r.get(1)?, r.get(2)?)))
        .optional()?;
    match row {
        None => Ok((IssueState::Open, None, None)),
        Some((s, at, note)) => Ok((IssueState::from_column(0, Some(s))?, at, note)),
    }
}

fn write_state(
    conn: &Connection,
    sig: &str,
    state: IssueState,
    fixed_at: Option<i64>,
    note: Option<&str>,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO main.issue_state(sig, state, fixed_at, note) VALUES(?1, ?2, ?3, ?4)
         ON CONFLICT(sig) DO UPDATE SET state = excluded.state, fixed_at = excluded.fixed_at, note = excluded.note",
    )?
    .execute(params![sig, state.as_str(), fixed_at, note])?;
    Ok(())
}

/// Remembers an issue's fix, reopen or regression (fire `seq`) in its
/// history, so an issue's page reads them by its key, not from the log.
pub(in crate::ledger) fn remember(
    conn: &Connection,
    sig: &str,
    seq: u64,
    fire_type: FireType,
    at: i64,
) -> rusqlite::Result<()> {
    conn.prepare_cached("INSERT OR REPLACE INTO main.issue_events(sig, seq, type, at) VALUES(?1, ?2, ?3, ?4)")?
        .execute(params![sig, i64::try_from(seq).unwrap_or(i64::MAX), fire_type.as_str(), at])?;
    Ok(())
}

/// The detector that last reported `sig` (its newest occurrence fire), for
/// the operator's fires; empty when the log holds none.
pub(in crate::ledger) fn last_detector(conn: &Connection, sig: &str) -> rusqlite::Result<String> {
    let needle = format!("\"sig\":{}", serde_json::Value::String(sig.to_owned()));
    let line: Option<String> = conn
        .query_row("SELECT line FROM main.fires WHERE instr(line, ?1) > 0 ORDER BY seq DESC LIMIT 1", [needle], |r| {
            r.get(0)
        })
        .optional()?;
    Ok(line.and_then(|l| serde_json::from_str::<FireEntry>(&l).ok()).map(|f| f.detector).unwrap_or_default())
}

/// The fire of a change to an issue's state, by `detector` (the one that
/// last reported it).
pub(in crate::ledger) fn issue_fire(detector: &str, at: i64, body: FireBody) -> FireEntry {
    super::count::fires::fact_fire(detector, at, None, body)
}

/// The kind an issue signature names (what precedes its first `:`).
pub(in crate::ledger) fn kind_of(sig: &str) -> &str {
    sig.split(':').next().unwrap_or_default()
}

/// Marks every fixed issue this scan counted a new occurrence of as
/// regressed, with its `regression` fire, in the scan's transaction.
pub(in crate::ledger) fn mark_regressions(
    tx: &rusqlite::Transaction<'_>,
    issues: &HashMap<String, IssueDelta>,
    scan_time: i64,
) -> rusqlite::Result<u64> {
    let mut fixed: Vec<(&String, &IssueDelta)> = Vec::new();
    for (sig, d) in issues {
        if d.counted() > 0 && read_state(tx, sig)?.0 == IssueState::Fixed {
            fixed.push((sig, d));
        }
    }
    if fixed.is_empty() {
        return Ok(0);
    }
    // In signature order: the same scan appends the same entries.
    fixed.sort_by(|a, b| a.0.cmp(b.0));
    let mut appender = Appender::open(tx)?;
    for (sig, d) in &fixed {
        let (_, fixed_at, note) = read_state(tx, sig)?;
        write_state(tx, sig, IssueState::Regressed, fixed_at, note.as_deref())?;
        let reason = format!("{} new occurrence(s) after the fix", d.counted());
        let body = FireBody::Regression { kind: kind_of(sig).to_owned(), sig: sig.to_string(), reason };
        let entry = issue_fire(d.detector(), scan_time, body);
        appender.append(tx, entry.view())?;
        remember(tx, sig, appender.count(), FireType::Regression, scan_time)?;
    }
    appender.flush(tx)?;
    Ok(fixed.len() as u64)
}

impl Ledger {
    /// Marks issue `sig` fixed at `at`, with the operator's `note`: its
    /// `fix` fire is appended and the log and `issues.jsonl` exported.
    pub fn fix_issue(&mut self, sig: &str, at: i64, note: Option<&str>) -> Result<StateChange, LifecycleError> {
        self.change_state(sig, at, IssueState::Fixed, note)
    }

    /// Sets a fixed or regressed issue open again, with its `reopen` fire.
    pub fn reopen_issue(&mut self, sig: &str, at: i64) -> Result<StateChange, LifecycleError> {
        self.change_state(sig, at, IssueState::Open, None)
    }

    fn change_state(
        &mut self,
        sig: &str,
        at: i64,
        to: IssueState,
        note: Option<&str>,
    ) -> Result<StateChange, LifecycleError> {
        let path = self.db_path.clone();
        let e =
            move |source| LedgerError::Store { path: path.clone(), action: "cannot change an issue's state", source };
        let tx = self.conn.transaction().map_err(&e)?;
        let kind: Option<String> =
            tx.query_row("SELECT kind FROM issues WHERE sig = ?1", [sig], |r| r.get(0)).optional().map_err(&e)?;
        let Some(kind) = kind else { return Err(LifecycleError::Unknown(sig.to_owned())) };
        let (state, _, _) = read_state(&tx, sig).map_err(&e)?;
        if state == to {
            return Err(LifecycleError::Already { sig: sig.to_owned(), state });
        }
        let sig_owned = sig.to_owned();
        let (body, fixed_at) = match to {
            IssueState::Fixed => (FireBody::Fix { kind, sig: sig_owned, reason: note.map(str::to_owned) }, Some(at)),
            _ => (FireBody::Reopen { kind, sig: sig_owned }, None),
        };
        let fire_type = body.fire_type();
        write_state(&tx, sig, to, fixed_at, note).map_err(&e)?;
        let detector = last_detector(&tx, sig).map_err(&e)?;
        let entry = issue_fire(&detector, at, body);
        let mut appender = Appender::open(&tx).map_err(&e)?;
        appender.append(&tx, entry.view()).map_err(&e)?;
        appender.flush(&tx).map_err(&e)?;
        let fire_seq = appender.count();
        remember(&tx, sig, fire_seq, fire_type, at).map_err(&e)?;
        tx.commit().map_err(&e)?;
        self.export()?;
        self.export_fires(at)?;
        Ok(StateChange { sig: sig.to_owned(), state: to, fire_seq, detector, case: None })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::ScanCommit;
    use crate::model::observation::{Observation, Origin, Severity};

    fn obs(occurrence: &str, at: i64) -> Observation {
        Observation {
            detector: "d".into(),
            kind: "tool_error".into(),
            signature: "s".into(),
            grouping_version: 1,
            title: "t".into(),
            origin: Origin::Harness,
            severity: Severity::High,
            tool: None,
            bot_id: None,
            thread_id: None,
            turn_id: None,
            at,
            occurrence: occurrence.into(),
            evidence_source: "messages".into(),
            evidence_id: occurrence.into(),
            wasted_turns: 1,
            probation: false,
        }
    }

    fn fire_types(l: &Ledger) -> Vec<String> {
        let mut stmt = l.conn.prepare("SELECT line FROM fires ORDER BY seq").unwrap();
        let lines: Vec<String> = stmt.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
        lines.iter().map(|l| serde_json::from_str::<FireEntry>(l).unwrap().fire_type().as_str().to_owned()).collect()
    }

    #[test]
    fn a_fixed_issue_seen_again_is_regressed_with_its_fire_and_reopen_and_fix_again_work() {
        let dir = tempfile::tempdir().unwrap();
        let mut l = Ledger::open(dir.path()).unwrap();
        l.commit(ScanCommit { observations: &[obs("m1", 10)], scan_time: 100, ..Default::default() }).unwrap();
        let sig = l.issues().unwrap()[0].sig.clone();
        let fixed = l.fix_issue(&sig, 200, Some("patched the <tool>")).unwrap();
        assert_eq!(fixed.state, IssueState::Fixed);
        assert!(matches!(l.fix_issue(&sig, 201, None), Err(LifecycleError::Already { .. })));
        let line = std::fs::read_to_string(l.issues_path()).unwrap();
        assert!(line.contains("\"state\":\"fixed\"") && line.contains("\"fixedAt\":200"), "{line}");
        // The same occurrence seen again is no regression: it was counted before.
        let r = l.commit(ScanCommit { observations: &[obs("m1", 10)], scan_time: 300, ..Default::default() }).unwrap();
        assert_eq!((r.regressed, l.issues().unwrap()[0].state), (0, IssueState::Fixed));
        let r = l.commit(ScanCommit { observations: &[obs("m2", 20)], scan_time: 400, ..Default::default() }).unwrap();
        assert_eq!(r.regressed, 1);
        let issue = &l.issues().unwrap()[0];
        assert_eq!((issue.state, issue.fixed_at), (IssueState::Regressed, Some(200)));
        // Seen again while regressed: no second regression fire.
        let r = l.commit(ScanCommit { observations: &[obs("m3", 30)], scan_time: 500, ..Default::default() }).unwrap();
        assert_eq!(r.regressed, 0);
        l.reopen_issue(&sig, 600).unwrap();
        assert_eq!(l.issues().unwrap()[0].state, IssueState::Open);
        assert!(matches!(l.reopen_issue(&sig, 601), Err(LifecycleError::Already { .. })));
        l.fix_issue(&sig, 700, None).unwrap();
        assert_eq!(
            fire_types(&l),
            ["occurrence", "fix", "occurrence", "regression", "occurrence", "reopen", "fix"],
            "every change is a fact in the log"
        );
        assert!(matches!(l.fix_issue("tool_error:nope", 1, None), Err(LifecycleError::Unknown(_))));
        assert!(crate::ledger::verify_out_dir(dir.path(), None).ok, "the chain still verifies");
    }

    #[test]
    fn a_store_from_before_issue_states_gains_them_all_open_and_a_lost_store_keeps_a_fix() {
        let dir = tempfile::tempdir().unwrap();
        let mut l = Ledger::open(dir.path()).unwrap();
        l.commit(ScanCommit { observations: &[obs("m1", 10)], ..Default::default() }).unwrap();
        l.conn.execute_batch("DROP TABLE issue_state").unwrap();
        drop(l);
        let view = crate::ledger::LedgerView::open(dir.path()).unwrap().expect("a store");
        let page = view.issues_page(None, 10, None, None).expect("a read before the new writer's first open");
        assert_eq!(page[0].1.state, IssueState::Open, "the stand-in table reads every issue as open");
        drop(view);
        let mut l = Ledger::open(dir.path()).unwrap();
        assert_eq!(l.reset_reason(), None, "only a table was added: nothing reset");
        let sig = l.issues().unwrap()[0].sig.clone();
        assert_eq!(l.issues().unwrap()[0].state, IssueState::Open);
        l.fix_issue(&sig, 50, Some("n")).unwrap();
        drop(l);
        for f in [crate::ledger::STORE_FILE, "ledger.db-wal", "ledger.db-shm"] {
            let _ = std::fs::remove_file(dir.path().join(f));
        }
        let l = Ledger::open(dir.path()).unwrap();
        let issue = &l.issues().unwrap()[0];
        assert_eq!((issue.state, issue.fixed_at, issue.fix_note.as_deref()), (IssueState::Fixed, Some(50), Some("n")));
    }
}
