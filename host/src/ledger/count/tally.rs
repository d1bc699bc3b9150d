//! The tally: a scan's counting done while its records still flow, so that
//! the commit after the last batch only moves it into the store.
//!
//! It owns the scan's temporary count, never the store: the occurrence keys
//! and wasted turns first seen in this scan (in memory, 16 bytes each, the
//! turns themselves appended to a temporary table of the ledger's
//! connection, like the staging), the fire log entries sealed in order after
//! the store's last one (another), and the issues' deltas in memory, counted by
//! [`super::rule`]'s own rule as each observation is staged.
//! It never writes the store before the commit, and it never guesses: when
//! the commit's count could differ from what was tallied, because a
//! detector failed and its part is dropped ([`Ledger::unstage`]) or an
//! observation carries grouping rules newer than its kind's stored issues
//! (the commit would move a count floor first), the tally is abandoned and
//! the commit counts the staged observations itself, as it always did.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use rusqlite::{Connection, params};

use super::fires::occurrence_fire;
use super::rule::{Counts, Sums, count_one, read_floors, sha, stored_issue};
use super::staging::Incoming;
use crate::ledger::export::ahead::AheadWriter;
use crate::ledger::export::segments::Appender;
use crate::ledger::{Ledger, LedgerError};

const TALLY: &str = "
PRAGMA temp_store = FILE;
PRAGMA temp.journal_mode = MEMORY;
CREATE TEMP TABLE IF NOT EXISTS tally_new_turns(sig TEXT NOT NULL, turn_id TEXT NOT NULL);
CREATE TEMP TABLE IF NOT EXISTS tally_fires(seq INTEGER PRIMARY KEY, hash TEXT NOT NULL, line TEXT NOT NULL,
    detector TEXT, kind TEXT, type TEXT);
DELETE FROM temp.tally_new_turns;
DELETE FROM temp.tally_fires;
";

/// One scan's count so far.
pub(in crate::ledger) struct Tally {
    scan_time: i64,
    versions: BTreeMap<String, String>,
    floors: HashMap<String, i64>,
    /// The newest grouping rules among each kind's stored issues.
    stored_rules: HashMap<String, u32>,
    sums: Sums,
    /// The occurrence keys first counted this scan, as the 128 bits their 32
    /// hex digits spell. In memory (16 bytes a key and the set's spare room):
    /// in a temporary table's index each key touched a random page of a file
    /// bigger than its cache (the profile is in docs/benchmarks.md).
    occurrences: HashSet<u128>,
    /// The wasted turns first counted this scan, by [`turn_bits`]; the turns
    /// themselves wait in `temp.tally_new_turns`, appended, with no index.
    turns: HashSet<u128>,
    /// The fire log's chain as the tally extends it, into `temp.tally_fires`.
    fires: Appender,
    fires_before: u64,
}

impl std::fmt::Debug for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tally")
            .field("scan_time", &self.scan_time)
            .field("counted", &self.sums.report.counted)
            .field("fires", &(self.fires.count() - self.fires_before))
            .finish_non_exhaustive()
    }
}

impl Tally {
    /// Whether the commit is the one this tally was started for.
    pub(in crate::ledger) fn matches(&self, scan_time: i64, versions: &BTreeMap<String, String>) -> bool {
        self.scan_time == scan_time && &self.versions == versions
    }

    pub(in crate::ledger) fn fires_before(&self) -> u64 {
        self.fires_before
    }

    /// The segments this tally's fires close, being written ahead.
    pub(in crate::ledger) fn take_ahead(&mut self) -> Option<AheadWriter> {
        self.fires.take_ahead()
    }

    /// What each detector added so far, as the commit would move it.
    pub(in crate::ledger) fn by_detector(&self) -> &HashMap<String, super::rule::Added> {
        &self.sums.by_detector
    }

    /// Time spent sealing fires.
    pub(in crate::ledger) fn spent(&self) -> Duration {
        self.fires.spent
    }

    /// False when `o` would make the commit move its kind's count floor.
    pub(in crate::ledger) fn can_count(&self, o: &Incoming) -> bool {
        self.stored_rules.get(&o.kind).is_none_or(|&stored| o.grouping_version <= stored)
    }

    /// Counts one staged observation.
    pub(in crate::ledger) fn count(&mut self, conn: &Connection, o: Incoming) -> rusqlite::Result<()> {
        let mut c = Temporary {
            conn,
            occurrences: &mut self.occurrences,
            turns: &mut self.turns,
            fires: &mut self.fires,
            scan_time: self.scan_time,
            versions: &self.versions,
        };
        count_one(&mut c, &self.floors, &mut self.sums, o)
    }

    /// Moves the tally into the store, in the commit's transaction; returns
    /// its sums.
    pub(in crate::ledger) fn into_store(mut self, tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<Sums> {
        self.fires.flush(tx)?;
        // In key order, as the store's index keeps them.
        let mut keys: Vec<u128> = self.occurrences.drain().collect();
        keys.sort_unstable();
        insert_keys(tx, &keys)?;
        tx.execute_batch(
            "INSERT INTO main.issue_turns(sig, turn_id) SELECT sig, turn_id FROM temp.tally_new_turns
                 ORDER BY sig, turn_id;
             DELETE FROM temp.tally_new_turns;",
        )?;
        tx.execute_batch(MOVE_FIRES)?;
        tx.execute_batch("DELETE FROM temp.tally_fires")?;
        Ok(self.sums)
    }
}

/// Keys inserted by one statement when the tally moves its occurrence keys
/// into the store: one multi-row `INSERT` per group, not one statement a key.
const KEY_ROWS: usize = 128;

/// Inserts occurrence keys into the store, as the 32 hex digits they were
/// counted under ([`key_bits`] read them), in the order given.
fn insert_keys(tx: &rusqlite::Transaction<'_>, keys: &[u128]) -> rusqlite::Result<()> {
    let statement = |rows: usize| format!("INSERT INTO main.occurrences(key) VALUES {}", vec!["(?)"; rows].join(", "));
    let mut full = tx.prepare_cached(&statement(KEY_ROWS))?;
    let mut hexed: Vec<String> = Vec::with_capacity(KEY_ROWS);
    for group in keys.chunks(KEY_ROWS) {
        hexed.clear();
        hexed.extend(group.iter().map(|key| crate::base::hex(&key.to_be_bytes())));
        if group.len() == KEY_ROWS {
            full.execute(rusqlite::params_from_iter(&hexed))?;
        } else {
            tx.prepare(&statement(group.len()))?.execute(rusqlite::params_from_iter(&hexed))?;
        }
    }
    Ok(())
}

/// The tally's fires into the store, in rowid order (the chain's): `SELECT *`
/// from a table of the same schema, with no column list, `WHERE` or `ORDER
/// BY`, so that SQLite copies each row's record as it is (its transfer
/// optimization) instead of decoding and encoding it again: 92 MB of lines
/// at 1 M records.
const MOVE_FIRES: &str = "INSERT INTO main.fires SELECT * FROM temp.tally_fires";

/// Counting into the tally's temporary tables: the store is only read.
struct Temporary<'a> {
    conn: &'a Connection,
    occurrences: &'a mut HashSet<u128>,
    turns: &'a mut HashSet<u128>,
    fires: &'a mut Appender,
    scan_time: i64,
    versions: &'a BTreeMap<String, String>,
}

impl Counts for Temporary<'_> {
    fn first_occurrence(&mut self, key: &str) -> rusqlite::Result<bool> {
        let bits = key_bits(key)?;
        if self.occurrences.contains(&bits) {
            return Ok(false);
        }
        // Counted before when the store has it.
        if self.conn.prepare_cached("SELECT 1 FROM main.occurrences WHERE key = ?1")?.exists([key])? {
            return Ok(false);
        }
        self.occurrences.insert(bits);
        Ok(true)
    }

    fn first_turn(&mut self, sig: &str, turn: &str) -> rusqlite::Result<bool> {
        let bits = turn_bits(sig, turn);
        if self.turns.contains(&bits) {
            return Ok(false);
        }
        let mut stored = self.conn.prepare_cached("SELECT 1 FROM main.issue_turns WHERE sig = ?1 AND turn_id = ?2")?;
        if stored.exists(params![sig, turn])? {
            return Ok(false);
        }
        self.turns.insert(bits);
        // Appended, in no order: the move into the store sorts them once.
        self.conn
            .prepare_cached("INSERT INTO temp.tally_new_turns(sig, turn_id) VALUES(?1, ?2)")?
            .execute(params![sig, turn])?;
        Ok(true)
    }

    fn stored_issue(&mut self, sig: &str) -> rusqlite::Result<Option<(i64, String)>> {
        stored_issue(self.conn, sig)
    }

    fn fire(&mut self, o: &Incoming) -> rusqlite::Result<()> {
        self.fires.append(self.conn, occurrence_fire(o, self.scan_time, self.versions))
    }
}

/// A wasted turn's identity in the tally: 128 bits of SHA-256 over its
/// issue and turn, as an occurrence key is 128 bits of SHA-256 over its kind
/// and occurrence ([`super::rule::occurrence_key`]).
fn turn_bits(sig: &str, turn: &str) -> u128 {
    let digest = sha(&[sig, turn]);
    let mut bits = [0u8; 16];
    bits.copy_from_slice(&digest[..16]);
    u128::from_be_bytes(bits)
}

/// The 128 bits an occurrence key's 32 hex digits spell
/// ([`super::rule::occurrence_key`] makes every key so).
fn key_bits(key: &str) -> rusqlite::Result<u128> {
    let lower_hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
    match u128::from_str_radix(key, 16) {
        // The digits alone (no sign) and lowercase: the key reads back as itself.
        Ok(bits) if key.len() == 32 && key.bytes().all(lower_hex) => Ok(bits),
        _ => {
            Err(rusqlite::Error::ToSqlConversionFailure(format!("occurrence key {key:?} is not 32 hex digits").into()))
        }
    }
}

impl Ledger {
    /// Starts a scan's staging: drops whatever a scan that stopped before
    /// its commit left staged, and starts counting as observations are
    /// staged, for the commit of the scan at `scan_time` by detectors of
    /// `versions` (a commit of another scan counts the staged observations
    /// itself).
    pub fn begin_scan(&mut self, scan_time: i64, versions: BTreeMap<String, String>) -> Result<(), LedgerError> {
        self.tally = None;
        self.clear_staged()?;
        let path = self.db_path.clone();
        let e = move |source| LedgerError::Store { path: path.clone(), action: "cannot start counting", source };
        self.conn.execute_batch(TALLY).map_err(&e)?;
        // The store's filter indexes, so the move into it copies records.
        self.conn.execute_batch(&crate::ledger::fire_filters::indexes("temp", "tally_fires")).map_err(&e)?;
        let floors = read_floors(&self.conn).map_err(&e)?;
        let stored_rules = {
            let mut stmt =
                self.conn.prepare("SELECT kind, MAX(grouping_version) FROM main.issues GROUP BY kind").map_err(&e)?;
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).map_err(&e)?;
            rows.collect::<Result<HashMap<String, u32>, _>>().map_err(&e)?
        };
        let fires = Appender::open_into(&self.conn, "temp.tally_fires").map_err(&e)?;
        let seq = fires.count();
        let fires = fires.writing_ahead(AheadWriter::new(&self.dir, seq));
        self.tally = Some(Tally {
            scan_time,
            versions,
            floors,
            stored_rules,
            sums: Sums::default(),
            occurrences: HashSet::new(),
            turns: HashSet::new(),
            fires,
            fires_before: seq,
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::ScanCommit;
    use crate::model::observation::{Observation, Origin, Severity};

    fn obs(detector: &str, occurrence: &str, signature: &str, turn: &str, at: i64) -> Observation {
        Observation {
            detector: detector.into(),
            kind: "tool_error".into(),
            signature: signature.into(),
            grouping_version: 1,
            title: format!("title of {signature}"),
            origin: Origin::Shell,
            severity: if at % 2 == 0 { Severity::High } else { Severity::Low },
            tool: Some("bash".into()),
            bot_id: Some("bot-1".into()),
            thread_id: None,
            turn_id: Some(turn.into()),
            at,
            occurrence: occurrence.into(),
            evidence_source: "messages".into(),
            evidence_id: occurrence.into(),
            wasted_turns: 1,
            probation: detector == "on_probation",
        }
    }

    fn versions() -> BTreeMap<String, String> {
        ["a", "b", "on_probation"].iter().map(|d| (d.to_string(), "1.0.0".to_owned())).collect()
    }

    /// Issues, fire log lines, counted keys, wasted turns.
    type Contents = (Vec<crate::ledger::IssueLine>, Vec<String>, Vec<String>, Vec<(String, String)>);

    /// Everything a commit leaves: issues, the fire log's lines, the counted
    /// keys and wasted turns.
    fn contents(l: &Ledger) -> Contents {
        let all = |sql: &str| -> Vec<String> {
            let mut stmt = l.conn.prepare(sql).unwrap();
            stmt.query_map([], |r| r.get(0)).unwrap().collect::<Result<_, _>>().unwrap()
        };
        let mut stmt = l.conn.prepare("SELECT sig, turn_id FROM issue_turns ORDER BY sig, turn_id").unwrap();
        let turns = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().collect::<Result<_, _>>().unwrap();
        (
            l.issues().unwrap(),
            all("SELECT line FROM fires ORDER BY seq"),
            all("SELECT key FROM occurrences ORDER BY key"),
            turns,
        )
    }

    /// Runs the same scans through two ledgers, one counting as it stages
    /// (`begin_scan`) and one counting at the commit; `between` runs on both
    /// after the staging of each scan (an `unstage`, say). Returns whether
    /// the tally survived to the last commit.
    fn alike(scans: &[Vec<Vec<Observation>>], between: impl Fn(&mut Ledger)) -> bool {
        let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (mut tallied, mut counted) = (Ledger::open(d1.path()).unwrap(), Ledger::open(d2.path()).unwrap());
        let mut survived = false;
        for (i, scan) in scans.iter().enumerate() {
            let commit = || ScanCommit { scan_time: 1000 + i as i64, versions: versions(), ..Default::default() };
            tallied.begin_scan(1000 + i as i64, versions()).unwrap();
            for call in scan {
                tallied.stage(call.iter().map(Observation::view)).unwrap();
                counted.stage(call.iter().map(Observation::view)).unwrap();
            }
            between(&mut tallied);
            between(&mut counted);
            survived = tallied.tally.is_some();
            assert_eq!(tallied.commit(commit()).unwrap(), counted.commit(commit()).unwrap(), "scan {i}");
            assert_eq!(contents(&tallied), contents(&counted), "scan {i}");
        }
        assert_eq!(std::fs::read(tallied.issues_path()).unwrap(), std::fs::read(counted.issues_path()).unwrap());
        // The fire log's segments: those the tally wrote ahead are the bytes
        // the export writes from the store, and nothing else is left.
        assert_eq!(segments(d1.path()), segments(d2.path()));
        assert!(crate::ledger::verify_out_dir(d1.path(), None).ok);
        survived
    }

    /// The fire log's segment files and every hidden (temporary) file, with
    /// their bytes.
    fn segments(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
        let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name().unwrap().to_str().is_none_or(|n| n.starts_with("fires-") || n.starts_with('.')))
            .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
            .collect();
        files.sort();
        files
    }

    fn scans() -> Vec<Vec<Vec<Observation>>> {
        vec![
            vec![
                vec![obs("a", "m1", "s", "t1", 10), obs("a", "m2", "s", "t1", 20), obs("a", "m3", "z", "t2", 15)],
                // The same occurrence from another detector, and a turn wasted again.
                vec![obs("b", "m1", "s", "t1", 10), obs("on_probation", "m4", "s", "t1", 40)],
            ],
            vec![
                // A new occurrence in a turn the store already counted as wasted.
                vec![
                    obs("a", "m2", "s", "t1", 20),
                    obs("a", "m5", "s", "t3", 5),
                    obs("b", "m6", "z", "t2", 31),
                    obs("a", "m9", "s", "t1", 70),
                ],
                vec![obs("on_probation", "m7", "y", "t9", 50), obs("b", "m7", "y", "t9", 50)],
            ],
        ]
    }

    #[test]
    fn an_occurrence_key_is_held_as_the_bits_it_spells_and_reads_back_as_itself() {
        let key = crate::ledger::count::rule::occurrence_key("tool_error", "m1");
        let bits = key_bits(&key).unwrap();
        assert_eq!(format!("{bits:032x}"), key);
        for bad in
            ["", "0f", &key.to_uppercase(), &format!("+{}", &key[1..]), &format!("{key}0"), &key.replace('a', "g")]
        {
            if bad != key {
                assert!(key_bits(bad).is_err(), "{bad:?}");
            }
        }
    }

    #[test]
    fn the_tallys_fires_move_into_the_store_as_records_not_decoded() {
        let d = tempfile::tempdir().unwrap();
        let mut l = Ledger::open(d.path()).unwrap();
        l.begin_scan(1000, versions()).unwrap();
        let mut stmt = l.conn.prepare(&format!("EXPLAIN {MOVE_FIRES}")).unwrap();
        let ops: Vec<String> = stmt.query_map([], |r| r.get(1)).unwrap().collect::<Result<_, _>>().unwrap();
        assert!(ops.iter().any(|op| op == "RowCell"), "the transfer copies records: {ops:?}");
        assert!(!ops.iter().any(|op| op == "Column"), "no column is decoded: {ops:?}");
    }

    #[test]
    fn a_tallied_scan_commits_exactly_what_counting_at_the_commit_does() {
        assert!(alike(&scans(), |_| {}), "nothing failed: the tally was used");
    }

    #[test]
    fn a_failed_detectors_part_abandons_the_tally_and_the_commit_counts() {
        assert!(!alike(&scans(), |l| l.unstage("b").unwrap()), "b staged in every scan");
        // A detector that had staged nothing leaves nothing to undo.
        assert!(alike(&scans(), |l| l.unstage("never-staged").unwrap()));
    }

    #[test]
    fn segments_written_ahead_are_the_bytes_the_export_writes_from_the_store() {
        // Four entries a segment in tests: 3 fires, then 10 (the scan starts
        // in the middle of segment 1, closes 2 and 3, leaves 4 open), then 1.
        let call = |from: i64, n: i64| -> Vec<Observation> {
            (from..from + n).map(|i| obs("a", &format!("w{i}"), &format!("s{}", i % 3), &format!("t{i}"), i)).collect()
        };
        let scans = vec![vec![call(0, 3)], vec![call(3, 4), call(7, 6)], vec![call(13, 1)]];
        assert!(alike(&scans, |_| {}));
        // Abandoned: nothing written ahead is kept, the export writes it all.
        assert!(!alike(&scans, |l| l.unstage("a").unwrap()));
    }

    #[test]
    fn occurrence_keys_moved_in_groups_are_the_keys_counting_at_the_commit_stores() {
        // More than two full groups of keys and a remainder, some repeated.
        let call: Vec<Observation> = (0..(2 * KEY_ROWS as i64 + 45))
            .map(|i| obs("a", &format!("k{}", i % 290), "s", &format!("t{i}"), i))
            .collect();
        assert!(alike(&[vec![call]], |_| {}));
    }

    #[test]
    fn newer_grouping_rules_leave_the_count_to_the_commit() {
        let mut scans = scans();
        let newer = Observation { grouping_version: 2, signature: "s2".into(), ..obs("a", "m1-v2", "s", "t1", 10) };
        scans[1][0].push(newer);
        scans[1][0].push(obs("a", "m8", "s", "t4", 60));
        assert!(!alike(&scans, |_| {}));
    }
}
