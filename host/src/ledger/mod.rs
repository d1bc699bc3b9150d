//! The ledger: what sentinel remembers, in one SQLite store in the output
//! folder, and the files it exports there.
//!
//! One transaction per scan commits together each detector's source
//! positions, the occurrence keys already counted, the issues upserted by
//! signature and the detectors' state blobs, so a crash can never leave a
//! position advanced past an occurrence that was not counted, or count one
//! twice. The ledger stores hashes of signatures and occurrence keys,
//! references and normalized titles, never raw content. It never touches the
//! data dir.
//!
//! It is split by job: [`store`] opens, migrates and reads the store and
//! applies the operator's commands; [`count`] is the scan's count (its rule,
//! the staging that holds its observations, the tally that counts them as
//! they come, the commit); [`export`] writes the files beside the store
//! (`issues.jsonl`, the fire log's segments and head, segments written ahead
//! while a scan runs, the checkpoint of the store's log); [`view`] is the
//! read-only view readers use; [`lock`] makes sure one process writes an
//! output folder, and `leftovers` removes, once it holds the lock, the
//! temporary files a writer that died left; `signing` opens the signing key
//! (its file outside the folder) and rotates it; [`verify_out_dir`] checks the
//! exported fire log against the store; [`lifecycle`] keeps the issues'
//! states, [`daily`] the daily digest's bookkeeping and [`threshold`] the
//! threshold rule's crossings. Only a [`Ledger`] writes, and only
//! one exists per output folder at a time (it holds the [`WriterLock`]).

pub mod count;
pub mod daily;
pub mod export;
mod fire_filters;
mod leftovers;
pub mod lifecycle;
pub mod lock;
pub mod meta;
mod regression;
mod signing;
pub mod store;
pub mod threshold;
mod verify;
pub mod view;

use std::path::{Path, PathBuf};

use rusqlite::Connection;
use serde::Serialize;

pub use crate::model::standing::Health;
pub use count::commit::ScanCommit;
pub use count::rule::{Added, CommitReport, issue_sig};
pub use export::issues::{EvidenceRef, IssueLine};
pub use lifecycle::{IssueState, LifecycleError, StateChange};
pub use lock::{LockError, WriterLock};
pub use meta::{MetaEntry, MetaKey};
pub use regression::{BlindBuild, CaseCapture};
pub use signing::KeyRotated;
pub use store::Admin;
pub use verify::{Folder, verify_folder, verify_out_dir, verify_out_dir_from};
pub use view::{FireFact, FireFilter, FireSample, FireTallyRow, IssueDayCount, LedgerView};

/// Bumped whenever the store's shape, or the meaning of what it stores,
/// changes. Version 2: occurrence keys no longer include the detector name.
/// Version 3: each detector keeps its own position in each source
/// (`positions`), and the operator's enable/disable (`detector_admin`); a
/// version 2 store is carried over as is (the source cursors become the
/// starting position of every detector), nothing is reset. The issues'
/// states (`issue_state`) came later as a table of its own: an older store
/// gains it empty (every issue open), nothing else changes.
pub const SCHEMA_VERSION: i64 = 3;

pub const STORE_FILE: &str = "ledger.db";
pub const ISSUES_FILE: &str = "issues.jsonl";
/// Days of each issue's per-day occurrence count the store keeps (the
/// status page's trend and `report`'s longest period read within them).
pub const ISSUE_DAYS_KEPT: i64 = 400;
/// Hours of each issue's per-hour occurrence and wasted-turn counts the
/// store keeps: the threshold rule's longest window (a week).
pub const ISSUE_HOURS_KEPT: i64 = 168;

#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("ledger {path}: {action}")]
    Store {
        path: PathBuf,
        action: &'static str,
        #[source]
        source: rusqlite::Error,
    },
    #[error(
        "ledger {path} has schema version {found}, newer than this release ({SCHEMA_VERSION}); use the newer sentinel-host"
    )]
    NewerSchema { path: PathBuf, found: i64 },
    #[error(
        "{path} is not a sentinel ledger (another program's database?); it was left untouched: move it away or choose another --out"
    )]
    Foreign { path: PathBuf },
    #[error("{path} is not a SQLite database (corrupt?); it was left untouched: move it away or choose another --out")]
    Corrupt { path: PathBuf },
    #[error("{path} is a symlink: the store is never opened through one; it was left untouched")]
    Linked { path: PathBuf },
    #[error("cannot write {path}")]
    Export {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The store is behind the exported fire log (a new or replaced
    /// `ledger.db`) and the exported log does not verify: the chain cannot be
    /// continued from it, and nothing was written.
    #[error(
        "cannot continue the fire log from its exported files: {}: {problem}; nothing was written. The exported log is the record: put back an intact copy of the fires-* files and fires.head.json, or move them all away to start a new log (docs/cli.md)",
        export::continued::place(.path, .line, .seq)
    )]
    ExportedLog { path: PathBuf, line: Option<u64>, seq: Option<u64>, problem: String },
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error(transparent)]
    Key(Box<crate::firelog::KeyError>),
}

/// The ledger of one output folder: its only writer.
#[derive(Debug)]
pub struct Ledger {
    dir: PathBuf,
    db_path: PathBuf,
    conn: Connection,
    reset: Option<String>,
    /// The staging table exists on this connection.
    staging: bool,
    /// The scan in flight's count, while it can still be trusted.
    tally: Option<count::tally::Tally>,
    /// Held for as long as this ledger lives: no other process writes here.
    _lock: WriterLock,
    /// The key every head is signed with, once opened ([`Ledger::open_signing_key`]).
    signer: Option<ed25519_dalek::SigningKey>,
    /// Time the last commit spent appending to, and exporting, the fire log.
    fire_append_time: std::time::Duration,
    fire_export_time: std::time::Duration,
    /// Time the last commit spent on its exports after the transaction
    /// (`issues.jsonl`, the fire log's segments and head).
    export_time: std::time::Duration,
}

/// What a reset kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResetReport {
    pub issues_kept: u64,
    /// Every fire is kept: the fire log is never cleared, never rewritten.
    pub fires_kept: u64,
}

/// `PRAGMA application_id` of a sentinel ledger ("SENT").
pub const APPLICATION_ID: i64 = 0x5345_4e54;

impl Ledger {
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn issues_path(&self) -> PathBuf {
        self.dir.join(ISSUES_FILE)
    }

    fn err(&self, action: &'static str) -> impl FnOnce(rusqlite::Error) -> LedgerError + '_ {
        move |source| LedgerError::Store { path: self.db_path.clone(), action, source }
    }
}

#[cfg(test)]
pub(in crate::ledger) mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::model::observation::Origin;
    use crate::model::observation::{Observation, Severity};

    /// An observation of `tool_error` for the ledger's tests (shared by its modules').
    pub(in crate::ledger) fn obs(occurrence: &str, signature: &str, turn: &str, at: i64) -> Observation {
        Observation {
            detector: "d".into(),
            kind: "tool_error".into(),
            signature: signature.into(),
            grouping_version: 1,
            title: "t".into(),
            origin: Origin::Harness,
            severity: Severity::High,
            tool: Some("x".into()),
            bot_id: None,
            thread_id: None,
            turn_id: Some(turn.into()),
            at,
            occurrence: occurrence.into(),
            evidence_source: "messages".into(),
            evidence_id: occurrence.into(),
            wasted_turns: 1,
            probation: false,
        }
    }

    #[test]
    fn leftovers_are_swept_only_by_the_writer_that_holds_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let first = Ledger::open(dir.path()).unwrap();
        // What a writer that is still running has in flight is not touched.
        let in_flight = dir.path().join(".fires-000001.ndjson.ahead4242");
        std::fs::write(&in_flight, b"{}").unwrap();
        assert!(matches!(Ledger::open(dir.path()), Err(LedgerError::Lock(_))));
        assert!(in_flight.exists(), "a refused writer sweeps nothing");
        // Once that writer is gone (a crash, here a drop), the next one removes it.
        drop(first);
        let _second = Ledger::open(dir.path()).unwrap();
        assert!(!in_flight.exists(), "a dead writer's segment written ahead is removed");
    }

    #[test]
    fn a_store_from_before_probation_gains_the_column_and_keeps_its_issues() {
        let dir = tempfile::tempdir().unwrap();
        let mut l = Ledger::open(dir.path()).unwrap();
        l.commit(ScanCommit { observations: &[obs("o1", "k", "t1", 1)], ..Default::default() }).unwrap();
        l.conn.execute_batch("ALTER TABLE issues DROP COLUMN probation").unwrap();
        drop(l);
        let mut l = Ledger::open(dir.path()).unwrap();
        assert_eq!(l.reset, None, "no state reset: only a column with a default was added");
        let on_probation = Observation { probation: true, ..obs("o2", "k", "t2", 2) };
        l.commit(ScanCommit { observations: &[on_probation], ..Default::default() }).unwrap();
        let issues = l.issues().unwrap();
        assert_eq!((issues.len(), issues[0].count, issues[0].probation), (1, 2, true));
        assert!(std::fs::read_to_string(l.issues_path()).unwrap().contains("\"probation\":true"));
    }

    #[test]
    fn a_new_store_has_large_pages_and_an_older_store_keeps_its_own() {
        let page_size = |l: &Ledger| -> i64 { l.conn.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap() };
        let dir = tempfile::tempdir().unwrap();
        let mut l = Ledger::open(dir.path()).unwrap();
        assert_eq!(page_size(&l), 65536);
        l.begin_scan(1, BTreeMap::new()).unwrap();
        let temp: i64 = l.conn.query_row("PRAGMA temp.page_size", [], |r| r.get(0)).unwrap();
        assert_eq!(temp, 4096, "the temporary tables keep small pages (their journal is in memory)");
        l.commit(ScanCommit { observations: &[obs("o1", "k", "t1", 1)], ..Default::default() }).unwrap();
        // A store created with SQLite's default pages, as every store was.
        let older = tempfile::tempdir().unwrap();
        Connection::open(older.path().join(STORE_FILE))
            .unwrap()
            .execute_batch(&format!("PRAGMA page_size = 4096; PRAGMA application_id = {APPLICATION_ID};"))
            .unwrap();
        let mut l = Ledger::open(older.path()).unwrap();
        assert_eq!(page_size(&l), 4096);
        let r = l.commit(ScanCommit { observations: &[obs("o1", "k", "t1", 1)], ..Default::default() }).unwrap();
        assert_eq!((r.counted, r.total_issues), (1, 1));
        assert!(crate::ledger::verify_out_dir(older.path(), None).ok);
    }

    #[test]
    fn new_grouping_rules_never_count_an_old_occurrence_again() {
        // Each bump the normalizer made: 1 → 2 (error formats), 2 → 3 (parameters).
        for (before, after) in [(1, 2), (2, 3)] {
            let dir = tempfile::tempdir().unwrap();
            let mut l = Ledger::open(dir.path()).unwrap();
            let old = Observation { grouping_version: before, ..obs("occ-1", "old key", "t1", 100) };
            l.commit(ScanCommit { observations: std::slice::from_ref(&old), ..Default::default() }).unwrap();
            // The new rules change both the signature and the occurrence key
            // of the same event, seen again by the trailing window, and see a
            // new one later.
            let again = Observation {
                grouping_version: after,
                signature: "new key".into(),
                occurrence: "new-occ-1".into(),
                ..old.clone()
            };
            let newer = Observation { at: 200, occurrence: "new-occ-2".into(), ..again.clone() };
            let r = l.commit(ScanCommit { observations: &[again, newer], ..Default::default() }).unwrap();
            assert_eq!((r.counted, r.below_floor), (1, 1), "{before} → {after}: the old event is not counted again");
            let issues = l.issues().unwrap();
            let versions: Vec<_> = issues.iter().map(|i| (i.grouping_version, i.count)).collect();
            assert_eq!(versions, vec![(before, 1), (after, 1)], "the old issue is kept, the new rules start one");
        }
    }

    #[test]
    fn an_occurrence_is_counted_once_and_a_turn_wasted_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut l = Ledger::open(dir.path()).unwrap();
        let first = [obs("m1", "s", "t1", 10), obs("m2", "s", "t1", 20)];
        let r = l.commit(ScanCommit { observations: &first, ..Default::default() }).unwrap();
        assert_eq!((r.counted, r.new_issues, r.updated_issues), (2, 1, 1));
        let again = [obs("m2", "s", "t1", 20), obs("m3", "s", "t2", 5)];
        let r = l.commit(ScanCommit { observations: &again, ..Default::default() }).unwrap();
        assert_eq!((r.counted, r.repeated), (1, 1));
        let issues = l.issues().unwrap();
        assert_eq!(issues.len(), 1);
        assert_eq!((issues[0].count, issues[0].wasted_turns), (3, 2));
        assert_eq!((issues[0].first_at, issues[0].last_at), (5, 20));
        // The latest evidence wins, not the latest scan.
        assert_eq!(issues[0].evidence_ref.id, "m2");
    }

    fn with_detector(mut o: Observation, detector: &str) -> Observation {
        o.detector = detector.into();
        o
    }

    #[test]
    fn staged_observations_count_exactly_as_passed_ones() {
        let scans: Vec<Vec<Observation>> = vec![
            vec![obs("m1", "s", "t1", 10), obs("m2", "s", "t1", 20), obs("m3", "other", "t2", 15)],
            vec![
                obs("m2", "s", "t1", 20),
                obs("m4", "s", "t3", 5),
                obs("m5", "s", "t3", 30),
                obs("m6", "other", "t2", 1),
            ],
        ];
        let passed = tempfile::tempdir().unwrap();
        let staged = tempfile::tempdir().unwrap();
        let mut a = Ledger::open(passed.path()).unwrap();
        let mut b = Ledger::open(staged.path()).unwrap();
        for scan in &scans {
            let ra = a.commit(ScanCommit { observations: scan, ..Default::default() }).unwrap();
            // Staged in two calls, as a detector's pushes would be.
            b.stage(scan[..1].iter().map(Observation::view)).unwrap();
            b.stage(scan[1..].iter().map(Observation::view)).unwrap();
            let rb = b.commit(ScanCommit::default()).unwrap();
            assert_eq!(ra, rb);
        }
        assert_eq!(std::fs::read(a.issues_path()).unwrap(), std::fs::read(b.issues_path()).unwrap());
        let issues = b.issues().unwrap();
        let s = issues.iter().find(|i| i.first_at == 5).unwrap();
        assert_eq!(
            (s.count, s.wasted_turns, s.last_at, s.evidence_ref.id.as_str()),
            (4, 2, 30, "m5"),
            "two turns wasted: t1 and t3"
        );
    }

    #[test]
    fn a_failed_detectors_staged_observations_are_not_counted() {
        let dir = tempfile::tempdir().unwrap();
        let mut l = Ledger::open(dir.path()).unwrap();
        let first =
            [with_detector(obs("m1", "s", "t1", 10), "good"), with_detector(obs("m2", "bad", "t1", 11), "gone")];
        l.stage(first.iter().map(Observation::view)).unwrap();
        l.stage([with_detector(obs("m3", "bad", "t2", 12), "gone").view()]).unwrap();
        l.unstage("gone").unwrap();
        let r = l.commit(ScanCommit::default()).unwrap();
        assert_eq!((r.counted, r.new_issues), (1, 1));
        // Nothing staged is left over for the next commit.
        let r = l.commit(ScanCommit::default()).unwrap();
        assert_eq!(r.counted, 0);
        assert_eq!(l.issues().unwrap().len(), 1);
    }

    #[test]
    fn a_staging_run_counts_what_separate_stages_count() {
        let calls = [
            vec![with_detector(obs("m1", "s", "t1", 10), "good"), with_detector(obs("m2", "bad", "t1", 11), "gone")],
            vec![with_detector(obs("m3", "s", "t2", 12), "good"), with_detector(obs("m1", "s", "t1", 10), "other")],
        ];
        let (one, each) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (mut a, mut b) = (Ledger::open(one.path()).unwrap(), Ledger::open(each.path()).unwrap());
        a.begin_scan(0, BTreeMap::new()).unwrap();
        b.begin_scan(0, BTreeMap::new()).unwrap();
        let mut run = a.staging_run().unwrap();
        for call in &calls {
            run.stage(call.iter().map(Observation::view)).unwrap();
            b.stage(call.iter().map(Observation::view)).unwrap();
        }
        run.unstage("gone").unwrap();
        b.unstage("gone").unwrap();
        run.finish().unwrap();
        assert_eq!(a.commit(ScanCommit::default()).unwrap(), b.commit(ScanCommit::default()).unwrap());
        assert_eq!(std::fs::read(a.issues_path()).unwrap(), std::fs::read(b.issues_path()).unwrap());
        assert_eq!(a.issues().unwrap()[0].count, 2, "m1 once, m3; gone's m2 dropped");
    }

    #[test]
    fn an_unfinished_staging_run_leaves_nothing_and_the_ledger_usable() {
        let dir = tempfile::tempdir().unwrap();
        let mut l = Ledger::open(dir.path()).unwrap();
        {
            let mut run = l.staging_run().unwrap();
            run.stage([obs("m1", "s", "t1", 10).view()]).unwrap();
            // Dropped without finish: the scan it served failed.
        }
        l.stage([obs("m2", "s", "t1", 20).view()]).unwrap();
        let r = l.commit(ScanCommit::default()).unwrap();
        assert_eq!(r.counted, 1, "only what was staged after the dropped run");
    }

    #[test]
    fn one_occurrence_reported_by_two_detectors_is_counted_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut l = Ledger::open(dir.path()).unwrap();
        let rust = obs("m1", "s", "t1", 10);
        let twin = Observation { detector: "d_py".into(), ..rust.clone() };
        // In one scan, and again in the next: one count, one wasted turn.
        let r = l.commit(ScanCommit { observations: &[rust.clone(), twin.clone()], ..Default::default() }).unwrap();
        assert_eq!((r.counted, r.repeated), (1, 1));
        let r = l.commit(ScanCommit { observations: &[twin], ..Default::default() }).unwrap();
        assert_eq!((r.counted, r.repeated), (0, 1));
        // The same occurrence key under another kind is another event.
        let other_kind = Observation { kind: "retry_loop".into(), ..rust };
        assert_eq!(l.commit(ScanCommit { observations: &[other_kind], ..Default::default() }).unwrap().counted, 1);
        let issues = l.issues().unwrap();
        let tool_error = issues.iter().find(|i| i.kind == "tool_error").unwrap();
        assert_eq!((tool_error.count, tool_error.wasted_turns), (1, 1));
    }

    #[test]
    fn no_new_data_leaves_issues_jsonl_byte_identical() {
        let dir = tempfile::tempdir().unwrap();
        let mut l = Ledger::open(dir.path()).unwrap();
        let o = [obs("m1", "s", "t1", 10)];
        l.commit(ScanCommit { observations: &o, ..Default::default() }).unwrap();
        let before = std::fs::read(l.issues_path()).unwrap();
        l.commit(ScanCommit { observations: &o, ..Default::default() }).unwrap();
        assert_eq!(before, std::fs::read(l.issues_path()).unwrap());
    }

    #[test]
    fn the_signature_text_is_never_stored() {
        let dir = tempfile::tempdir().unwrap();
        let mut l = Ledger::open(dir.path()).unwrap();
        let o = [obs("m1", "secret-grouping-text", "t1", 10)];
        l.commit(ScanCommit { observations: &o, ..Default::default() }).unwrap();
        drop(l);
        for entry in std::fs::read_dir(dir.path()).unwrap() {
            let bytes = std::fs::read(entry.unwrap().path()).unwrap();
            assert!(!bytes.windows(20).any(|w| w == b"secret-grouping-text"));
        }
    }

    #[test]
    fn an_older_schema_drops_state_keeps_issues_and_counts_only_newer_occurrences() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut l = Ledger::open(dir.path()).unwrap();
            let o = [obs("m1", "s", "t1", 10), obs("m2", "s", "t1", 20)];
            let mut cursors = BTreeMap::new();
            cursors.insert("messages".to_owned(), "{\"hwm\":20}".to_owned());
            let mut h = Health::new("d");
            h.failures_in_a_row = 1;
            let health = vec![h];
            l.commit(ScanCommit { observations: &o, cursors, health, ..Default::default() }).unwrap();
            l.conn.execute("UPDATE meta SET value = '0' WHERE key = 'schema_version'", []).unwrap();
        }
        let mut l = Ledger::open(dir.path()).unwrap();
        assert!(l.reset_reason().unwrap().contains("schema version 0"));
        assert_eq!(l.cursor("messages").unwrap(), None, "cursors reset");
        assert_eq!(l.health().unwrap()[0].failures_in_a_row, 1, "health is not state: it survives a reset");
        assert_eq!(l.issues().unwrap()[0].count, 2, "issues kept");
        // Seen again after the reset: m2 (at 20) and a late m3 (at 15) are not
        // counted, a newer m4 (at 30) is.
        let again = [obs("m2", "s", "t1", 20), obs("m3", "s", "t1", 15), obs("m4", "s", "t2", 30)];
        let r = l.commit(ScanCommit { observations: &again, ..Default::default() }).unwrap();
        assert_eq!((r.counted, r.below_floor), (1, 2));
        assert_eq!(l.issues().unwrap()[0].count, 3);
        drop(l);
        assert!(Ledger::open(dir.path()).unwrap().reset_reason().is_none(), "a reset happens once");
    }

    #[test]
    fn a_missing_store_is_rebuilt_from_issues_jsonl_without_double_counting() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut l = Ledger::open(dir.path()).unwrap();
            l.commit(ScanCommit { observations: &[obs("m1", "s", "t1", 10)], ..Default::default() }).unwrap();
        }
        for f in [STORE_FILE, "ledger.db-wal", "ledger.db-shm"] {
            let _ = std::fs::remove_file(dir.path().join(f));
        }
        let mut l = Ledger::open(dir.path()).unwrap();
        assert!(l.reset_reason().unwrap().contains("1 issues imported"));
        let r = l.commit(ScanCommit { observations: &[obs("m1", "s", "t1", 10)], ..Default::default() }).unwrap();
        assert_eq!(r.counted, 0);
        assert_eq!(l.issues().unwrap()[0].count, 1);
    }

    #[test]
    fn a_foreign_or_corrupt_store_is_refused_and_left_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(STORE_FILE);
        {
            let c = Connection::open(&path).unwrap();
            c.execute_batch("CREATE TABLE their_data(x); INSERT INTO their_data VALUES (42);").unwrap();
        }
        let before = std::fs::read(&path).unwrap();
        assert!(matches!(Ledger::open(dir.path()), Err(LedgerError::Foreign { .. })));
        assert_eq!(std::fs::read(&path).unwrap(), before);

        std::fs::write(&path, b"this is not a database, it is a text file that happens to be here").unwrap();
        let before = std::fs::read(&path).unwrap();
        let err = Ledger::open(dir.path()).unwrap_err();
        assert!(matches!(err, LedgerError::Corrupt { .. }), "{err}");
        assert!(err.to_string().contains("left untouched"));
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }
}
