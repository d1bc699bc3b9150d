//! The ledger: what sentinel remembers, in one SQLite store in the output
//! folder, and the `issues.jsonl` it exports.
//!
//! One transaction per scan commits together the source cursors, the
//! occurrence keys already counted, the issues upserted by signature and the
//! detectors' state blobs, so a crash can never leave a cursor advanced past
//! an occurrence that was not counted, or count one twice. After each commit
//! `issues.jsonl` is rewritten atomically (temp file, fsync, rename). The
//! ledger stores hashes of signatures and occurrence keys, references and
//! normalized titles, never raw content. It never touches the data dir.

pub mod out_dir;

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::observation::{Observation, Severity};

/// Bumped whenever the store's shape, or the meaning of what it stores,
/// changes. Version 2: occurrence keys no longer include the detector name.
pub const SCHEMA_VERSION: i64 = 2;

pub const STORE_FILE: &str = "ledger.db";
pub const ISSUES_FILE: &str = "issues.jsonl";

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
    #[error("cannot write {path}")]
    Export {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The ledger of one output folder.
#[derive(Debug)]
pub struct Ledger {
    dir: PathBuf,
    db_path: PathBuf,
    conn: Connection,
    reset: Option<String>,
    /// The staging table exists on this connection.
    staging: bool,
}

/// What a reset kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResetReport {
    pub issues_kept: u64,
}

/// `PRAGMA application_id` of a sentinel ledger ("SENT").
pub const APPLICATION_ID: i64 = 0x5345_4e54;

/// Refuses a file that is not SQLite at all, before SQLite touches it.
fn check_header(path: &Path) -> Result<(), LedgerError> {
    use std::io::Read;
    let mut header = [0u8; 16];
    let ok = std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut header)).is_ok();
    if ok && &header == b"SQLite format 3\0" { Ok(()) } else { Err(LedgerError::Corrupt { path: path.to_owned() }) }
}

/// What one commit changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CommitReport {
    /// Occurrences counted for the first time.
    pub counted: u64,
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
    pub cursors: BTreeMap<String, String>,
    pub states: BTreeMap<String, Option<Vec<u8>>>,
    /// Each detector's health after this scan, committed with the rest.
    pub health: Vec<Health>,
    pub scan_time: i64,
    /// Bookkeeping the scan keeps between runs (the fast-path stamp): a
    /// `None` value deletes the key.
    pub meta: Vec<(String, Option<String>)>,
}

pub use crate::health::Health;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS cursors(source TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS occurrences(key TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS issues(
    sig TEXT PRIMARY KEY, kind TEXT NOT NULL, title TEXT NOT NULL,
    origin TEXT NOT NULL, severity TEXT NOT NULL, tool TEXT,
    bot_id TEXT, thread_id TEXT, turn_id TEXT,
    first_at INTEGER NOT NULL, last_at INTEGER NOT NULL, count INTEGER NOT NULL,
    wasted_turns INTEGER NOT NULL,
    evidence_source TEXT NOT NULL, evidence_id TEXT NOT NULL, evidence_at INTEGER NOT NULL,
    grouping_version INTEGER NOT NULL DEFAULT 1, probation INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS issue_turns(sig TEXT NOT NULL, turn_id TEXT NOT NULL,
    PRIMARY KEY(sig, turn_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS detector_state(detector TEXT PRIMARY KEY, state BLOB);
CREATE TABLE IF NOT EXISTS count_floor(kind TEXT PRIMARY KEY, at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS detector_health(
    detector TEXT PRIMARY KEY, state TEXT NOT NULL, quarantined_until INTEGER, probation_left INTEGER,
    failures_in_a_row INTEGER NOT NULL, failures_total INTEGER NOT NULL, last_failure TEXT,
    last_scan_at INTEGER NOT NULL);
";

fn sha_hex(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            h.update([0u8]);
        }
        h.update(p.as_bytes());
    }
    crate::hex(&h.finalize())
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
fn occurrence_key(o: &Observation) -> String {
    sha_hex(&[&o.kind, &o.occurrence])[..32].to_owned()
}

/// The staging table: observations of the scan in flight, as the ledger
/// will count them (hashes instead of grouping keys and occurrences), kept
/// out of memory until the commit. A temporary table: it lives in a private
/// temporary file, never in the store, and dies with the connection.
const STAGING: &str = "
PRAGMA temp_store = FILE;
CREATE TEMP TABLE IF NOT EXISTS staged(
    seq INTEGER PRIMARY KEY, detector TEXT NOT NULL, kind TEXT NOT NULL, sig TEXT NOT NULL, occ TEXT NOT NULL,
    title TEXT NOT NULL, origin TEXT NOT NULL, severity TEXT NOT NULL, tool TEXT,
    bot_id TEXT, thread_id TEXT, turn_id TEXT, at INTEGER NOT NULL,
    evidence_source TEXT NOT NULL, evidence_id TEXT NOT NULL, wasted_turns INTEGER NOT NULL,
    grouping_version INTEGER NOT NULL, probation INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS temp.staged_detector ON staged(detector);
DELETE FROM temp.staged;
";

/// One observation on its way into the counts.
struct Incoming {
    kind: String,
    sig: String,
    occ: String,
    title: String,
    origin: String,
    severity: Severity,
    tool: Option<String>,
    bot_id: Option<String>,
    thread_id: Option<String>,
    turn_id: Option<String>,
    at: i64,
    evidence_source: String,
    evidence_id: String,
    wasted_turns: u32,
    grouping_version: u32,
    probation: bool,
}

impl Incoming {
    /// A row of `temp.staged`, selected in [`Ledger::commit`]'s column order.
    fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(Incoming {
            kind: r.get(0)?,
            sig: r.get(1)?,
            occ: r.get(2)?,
            title: r.get(3)?,
            origin: r.get(4)?,
            severity: Severity::parse(&r.get::<_, String>(5)?).unwrap_or(Severity::Low),
            tool: r.get(6)?,
            bot_id: r.get(7)?,
            thread_id: r.get(8)?,
            turn_id: r.get(9)?,
            at: r.get(10)?,
            evidence_source: r.get(11)?,
            evidence_id: r.get(12)?,
            wasted_turns: r.get(13)?,
            grouping_version: r.get(14)?,
            probation: r.get(15)?,
        })
    }
}

/// What one scan changes of one issue, summed in memory (one entry per
/// issue, not per observation) and written once at the end of the commit.
struct IssueDelta {
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

/// Counts one observation: once per occurrence key, not below its kind's
/// floor, a turn wasted once per issue; the issue's change is summed into
/// `issues`.
fn count_one(
    tx: &rusqlite::Transaction<'_>,
    floors: &HashMap<String, i64>,
    report: &mut CommitReport,
    issues: &mut HashMap<String, IssueDelta>,
    o: Incoming,
) -> rusqlite::Result<()> {
    if tx.prepare_cached("INSERT OR IGNORE INTO occurrences(key) VALUES(?1)")?.execute([&o.occ])? == 0 {
        report.repeated += 1;
        return Ok(());
    }
    if floors.get(&o.kind).is_some_and(|&floor| o.at <= floor) {
        // Older than what a reset kept: it may have been counted before.
        report.below_floor += 1;
        return Ok(());
    }
    report.counted += 1;
    let wasted = match (&o.turn_id, o.wasted_turns) {
        (_, 0) => 0,
        (Some(turn), w) => {
            let first = tx
                .prepare_cached("INSERT OR IGNORE INTO issue_turns(sig, turn_id) VALUES(?1, ?2)")?
                .execute(params![o.sig, turn])?;
            if first == 1 { i64::from(w) } else { 0 }
        }
        (None, w) => i64::from(w),
    };
    if let Some(d) = issues.get_mut(&o.sig) {
        report.updated_issues += 1;
        d.apply(o, wasted);
        return Ok(());
    }
    let stored: Option<(i64, String)> = tx
        .prepare_cached("SELECT evidence_at, severity FROM issues WHERE sig = ?1")?
        .query_row([&o.sig], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
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
    issues.insert(sig, delta);
    Ok(())
}

impl Ledger {
    /// Opens (or creates) the ledger in `dir`, which must already exist.
    ///
    /// A store of an older schema version has its state dropped and started
    /// again (see [`Ledger::reset_state`]); a missing store with an
    /// `issues.jsonl` beside it is rebuilt from that file the same way. A
    /// file that is not a sentinel ledger is refused, never overwritten.
    pub fn open(dir: &Path) -> Result<Self, LedgerError> {
        let db_path = dir.join(STORE_FILE);
        let err = |action| {
            let path = db_path.clone();
            move |source| LedgerError::Store { path, action, source }
        };
        let existed = std::fs::metadata(&db_path).map(|m| m.len() > 0).unwrap_or(false);
        if existed {
            check_header(&db_path)?;
        }
        let conn = Connection::open(&db_path).map_err(err("cannot open"))?;
        restrict(&db_path);
        if existed {
            let app: i64 = conn.query_row("PRAGMA application_id", [], |r| r.get(0)).map_err(err("cannot read"))?;
            if app != APPLICATION_ID {
                return Err(LedgerError::Foreign { path: db_path });
            }
        } else {
            conn.pragma_update(None, "application_id", APPLICATION_ID).map_err(err("cannot initialise"))?;
        }
        conn.pragma_update(None, "journal_mode", "WAL").map_err(err("cannot set WAL mode"))?;
        conn.pragma_update(None, "synchronous", "FULL").map_err(err("cannot set synchronous"))?;
        // Occurrence keys are hashes, inserted in random order, so a big scan
        // touches pages all over the store: a fixed 8 MiB page cache (instead
        // of SQLite's 2 MiB) keeps more of them, and memory stays bounded.
        conn.pragma_update(None, "cache_size", -8192).map_err(err("cannot set the cache size"))?;
        conn.execute_batch(SCHEMA).map_err(err("cannot create the schema"))?;
        add_probation_column(&conn).map_err(err("cannot add the probation column"))?;
        for suffix in ["-wal", "-shm"] {
            restrict(&dir.join(format!("{STORE_FILE}{suffix}")));
        }
        let version: Option<i64> = conn
            .query_row("SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'schema_version'", [], |r| r.get(0))
            .optional()
            .map_err(err("cannot read the schema version"))?;
        let mut ledger = Ledger { dir: dir.to_owned(), db_path: db_path.clone(), conn, reset: None, staging: false };
        match version {
            Some(v) if v > SCHEMA_VERSION => return Err(LedgerError::NewerSchema { path: db_path, found: v }),
            Some(v) if v == SCHEMA_VERSION => {}
            Some(v) => {
                ledger
                    .reset_state(&format!("the ledger had schema version {v}, this release writes {SCHEMA_VERSION}"))?;
            }
            None if existed => {
                ledger.reset_state("the ledger had no schema version")?;
            }
            None => {
                let imported = ledger.import_issues()?;
                match imported {
                    Some(n) => {
                        ledger.reset_state(&format!(
                            "{STORE_FILE} was missing: {n} issues imported from {ISSUES_FILE}"
                        ))?;
                    }
                    None => ledger.write_version()?,
                }
            }
        }
        Ok(ledger)
    }

    /// Why this open started the state again, if it did.
    pub fn reset_reason(&self) -> Option<&str> {
        self.reset.as_deref()
    }

    fn write_version(&self) -> Result<(), LedgerError> {
        self.conn
            .execute(
                "INSERT INTO meta(key, value) VALUES('schema_version', ?1)
                 ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                [SCHEMA_VERSION.to_string()],
            )
            .map_err(self.err("cannot write the schema version"))?;
        Ok(())
    }

    /// Drops the state and starts again, keeping the issues: source cursors
    /// reset, occurrence keys and detector state cleared. So that nothing is
    /// counted twice, from now on an occurrence is counted only when it is
    /// newer than the newest one already recorded for its kind. This loses
    /// at most a result that landed late, and never counts anything twice.
    pub fn reset_state(&mut self, reason: &str) -> Result<ResetReport, LedgerError> {
        let path = self.db_path.clone();
        let e = |action: &'static str| {
            let path = path.clone();
            move |source| LedgerError::Store { path, action, source }
        };
        let tx = self.conn.transaction().map_err(e("cannot begin the reset"))?;
        tx.execute_batch(
            "DROP TABLE IF EXISTS cursors; DROP TABLE IF EXISTS occurrences; DROP TABLE IF EXISTS detector_state;
             DELETE FROM meta WHERE key IN ('fast_stamp', 'next_wake');",
        )
        .map_err(e("cannot drop the old state"))?;
        tx.execute_batch(SCHEMA).map_err(e("cannot create the schema"))?;
        tx.execute(
            "INSERT INTO count_floor(kind, at) SELECT kind, MAX(last_at) FROM issues GROUP BY kind
             ON CONFLICT(kind) DO UPDATE SET at = MAX(at, excluded.at)",
            [],
        )
        .map_err(e("cannot set the count floor"))?;
        tx.execute(
            "INSERT INTO meta(key, value) VALUES('schema_version', ?1) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            [SCHEMA_VERSION.to_string()],
        )
        .map_err(e("cannot write the schema version"))?;
        tx.commit().map_err(e("cannot commit the reset"))?;
        let issues_kept =
            self.conn.query_row("SELECT COUNT(*) FROM issues", [], |r| r.get::<_, i64>(0)).map_err(e("cannot count"))?
                as u64;
        tracing::info!(reason, issues_kept, "ledger state started again");
        self.reset = Some(reason.to_owned());
        Ok(ResetReport { issues_kept })
    }

    /// Seeds the issues table from an `issues.jsonl` left without its store.
    /// Returns how many issues were imported, or `None` when there is no file.
    fn import_issues(&mut self) -> Result<Option<u64>, LedgerError> {
        let path = self.issues_path();
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(LedgerError::Export { path, source }),
        };
        let db = self.db_path.clone();
        let tx = self.conn.transaction().map_err(|source| LedgerError::Store {
            path: db.clone(),
            action: "cannot import issues",
            source,
        })?;
        let mut n = 0;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let Ok(i) = serde_json::from_str::<IssueLine>(line) else {
                tracing::warn!(file = %path.display(), "skipping an unreadable line of issues.jsonl");
                continue;
            };
            tx.execute(
                "INSERT OR IGNORE INTO issues(sig, kind, title, origin, severity, tool, bot_id, thread_id, turn_id,
                        first_at, last_at, count, wasted_turns, evidence_source, evidence_id, evidence_at,
                        grouping_version, probation)
                 VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?11, ?16, ?17)",
                params![
                    i.sig,
                    i.kind,
                    i.title,
                    i.origin,
                    i.severity,
                    i.tool,
                    i.bot_id,
                    i.thread_id,
                    i.turn_id,
                    i.first_at,
                    i.last_at,
                    i.count,
                    i.wasted_turns,
                    i.evidence_ref.source,
                    i.evidence_ref.id,
                    i.grouping_version,
                    i.probation
                ],
            )
            .map_err(|source| LedgerError::Store {
                path: db.clone(),
                action: "cannot import an issue",
                source,
            })?;
            n += 1;
        }
        tx.commit().map_err(|source| LedgerError::Store {
            path: db.clone(),
            action: "cannot import issues",
            source,
        })?;
        Ok(Some(n))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn issues_path(&self) -> PathBuf {
        self.dir.join(ISSUES_FILE)
    }

    fn err(&self, action: &'static str) -> impl FnOnce(rusqlite::Error) -> LedgerError + '_ {
        move |source| LedgerError::Store { path: self.db_path.clone(), action, source }
    }

    /// A bookkeeping value stored by an earlier scan.
    pub fn meta(&self, key: &str) -> Result<Option<String>, LedgerError> {
        self.conn
            .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
            .optional()
            .map_err(self.err("cannot read scan bookkeeping"))
    }

    /// Writes `issues.jsonl` again if the last commit did not get to it.
    pub fn finish_pending_export(&self) -> Result<(), LedgerError> {
        if self.meta("export_pending")?.is_some() {
            self.export()?;
            self.conn
                .execute("DELETE FROM meta WHERE key = 'export_pending'", [])
                .map_err(self.err("cannot mark the export"))?;
        }
        Ok(())
    }

    pub fn total_issues(&self) -> Result<u64, LedgerError> {
        Ok(self
            .conn
            .query_row("SELECT COUNT(*) FROM issues", [], |r| r.get::<_, i64>(0))
            .map_err(self.err("cannot count issues"))? as u64)
    }

    pub fn cursor(&self, source: &str) -> Result<Option<String>, LedgerError> {
        self.conn
            .query_row("SELECT value FROM cursors WHERE source = ?1", [source], |r| r.get(0))
            .optional()
            .map_err(self.err("cannot read a cursor"))
    }

    pub fn state(&self, detector: &str) -> Result<Option<Vec<u8>>, LedgerError> {
        Ok(self
            .conn
            .query_row("SELECT state FROM detector_state WHERE detector = ?1", [detector], |r| {
                r.get::<_, Option<Vec<u8>>>(0)
            })
            .optional()
            .map_err(self.err("cannot read a detector state"))?
            .flatten())
    }

    /// Stages observations of the scan in flight for its commit, so they
    /// need not be held in memory. Nothing is counted until
    /// [`Ledger::commit`]; the staging dies with the connection.
    pub fn stage(&mut self, observations: &[Observation]) -> Result<(), LedgerError> {
        if observations.is_empty() {
            return Ok(());
        }
        let path = self.db_path.clone();
        let e = move |source| LedgerError::Store { path: path.clone(), action: "cannot stage observations", source };
        if !self.staging {
            self.conn.execute_batch(STAGING).map_err(&e)?;
            self.staging = true;
        }
        let tx = self.conn.transaction().map_err(&e)?;
        {
            let mut stmt = tx
                .prepare_cached(
                    "INSERT INTO temp.staged(detector, kind, sig, occ, title, origin, severity, tool, bot_id, thread_id,
                                             turn_id, at, evidence_source, evidence_id, wasted_turns, grouping_version,
                                             probation)
                     VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
                )
                .map_err(&e)?;
            for o in observations {
                stmt.execute(params![
                    o.detector,
                    o.kind,
                    issue_sig(&o.kind, o.grouping_version, &o.signature),
                    occurrence_key(o),
                    o.title,
                    o.origin.as_str(),
                    o.severity.as_str(),
                    o.tool,
                    o.bot_id,
                    o.thread_id,
                    o.turn_id,
                    o.at,
                    o.evidence_source,
                    o.evidence_id,
                    o.wasted_turns,
                    o.grouping_version,
                    o.probation
                ])
                .map_err(&e)?;
            }
        }
        tx.commit().map_err(&e)
    }

    /// Drops what `detector` staged this scan: it failed, and a failed
    /// detector's partial report is not counted.
    pub fn unstage(&mut self, detector: &str) -> Result<(), LedgerError> {
        if !self.staging {
            return Ok(());
        }
        self.conn
            .execute("DELETE FROM temp.staged WHERE detector = ?1", [detector])
            .map_err(self.err("cannot unstage"))?;
        Ok(())
    }

    /// Commits one scan in one transaction, then exports `issues.jsonl`.
    pub fn commit(&mut self, scan: ScanCommit<'_>) -> Result<CommitReport, LedgerError> {
        let path = self.db_path.clone();
        let e = |action: &'static str| {
            let path = path.clone();
            move |source| LedgerError::Store { path, action, source }
        };
        // Observations passed here are staged like the scan's own: one way in
        // to the counts.
        self.stage(scan.observations)?;
        tracing::debug!("ledger commit begin");
        let tx = self.conn.transaction().map_err(e("cannot begin the scan transaction"))?;
        if self.staging {
            floor_kinds_with_new_rules(&tx).map_err(e("cannot set the count floor"))?;
        }
        let floors: std::collections::HashMap<String, i64> = {
            let mut stmt = tx.prepare("SELECT kind, at FROM count_floor").map_err(e("cannot read the count floor"))?;
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).map_err(e("cannot read the count floor"))?;
            rows.collect::<Result<_, _>>().map_err(e("cannot read the count floor"))?
        };
        let mut report = CommitReport::default();
        let mut issues: HashMap<String, IssueDelta> = HashMap::new();
        if self.staging {
            let mut stmt = tx
                .prepare(
                    "SELECT kind, sig, occ, title, origin, severity, tool, bot_id, thread_id, turn_id, at,
                            evidence_source, evidence_id, wasted_turns, grouping_version, probation
                     FROM temp.staged ORDER BY seq",
                )
                .map_err(e("cannot read staged observations"))?;
            let mut rows = stmt.query([]).map_err(e("cannot read staged observations"))?;
            while let Some(r) = rows.next().map_err(e("cannot read staged observations"))? {
                let incoming = Incoming::from_row(r).map_err(e("cannot read staged observations"))?;
                count_one(&tx, &floors, &mut report, &mut issues, incoming).map_err(e("cannot count"))?;
            }
            drop(rows);
            drop(stmt);
            tx.execute("DELETE FROM temp.staged", []).map_err(e("cannot clear staged observations"))?;
        }
        for (sig, d) in &issues {
            d.write(&tx, sig).map_err(e("cannot write an issue"))?;
        }
        for (source, value) in &scan.cursors {
            tx.execute(
                "INSERT INTO cursors(source, value) VALUES(?1, ?2) ON CONFLICT(source) DO UPDATE SET value = excluded.value",
                params![source, value],
            )
            .map_err(e("cannot store a cursor"))?;
        }
        for (key, value) in &scan.meta {
            match value {
                Some(v) => tx.execute(
                    "INSERT INTO meta(key, value) VALUES(?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    params![key, v],
                ),
                None => tx.execute("DELETE FROM meta WHERE key = ?1", [key]),
            }
            .map_err(e("cannot store scan bookkeeping"))?;
        }
        // Cleared once issues.jsonl is written: a crash in between is seen
        // by the next run, which writes it again.
        tx.execute(
            "INSERT INTO meta(key, value) VALUES('export_pending', '1') ON CONFLICT(key) DO UPDATE SET value = '1'",
            [],
        )
        .map_err(e("cannot mark the export"))?;
        for (detector, state) in &scan.states {
            tx.execute(
                "INSERT INTO detector_state(detector, state) VALUES(?1, ?2)
                 ON CONFLICT(detector) DO UPDATE SET state = excluded.state",
                params![detector, state],
            )
            .map_err(e("cannot store a detector state"))?;
        }
        for h in &scan.health {
            let (until, left) = match h.state {
                crate::health::State::Quarantined { until } => (Some(until), None),
                crate::health::State::Probation { clean_left } => (None, Some(clean_left)),
                crate::health::State::Ok => (None, None),
            };
            tx.execute(
                "INSERT INTO detector_health(detector, state, quarantined_until, probation_left, failures_in_a_row,
                                            failures_total, last_failure, last_scan_at)
                 VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                 ON CONFLICT(detector) DO UPDATE SET state = excluded.state,
                    quarantined_until = excluded.quarantined_until, probation_left = excluded.probation_left,
                    failures_in_a_row = excluded.failures_in_a_row, failures_total = excluded.failures_total,
                    last_failure = excluded.last_failure, last_scan_at = excluded.last_scan_at",
                params![
                    h.detector,
                    h.state.label(),
                    until,
                    left,
                    h.failures_in_a_row,
                    h.failures_total,
                    h.last_failure,
                    h.last_scan_at
                ],
            )
            .map_err(e("cannot store detector health"))?;
        }
        tx.commit().map_err(e("cannot commit the scan"))?;
        tracing::debug!(counted = report.counted, "ledger commit done");
        report.total_issues = self.total_issues()?;
        self.export()?;
        self.conn.execute("DELETE FROM meta WHERE key = 'export_pending'", []).map_err(e("cannot mark the export"))?;
        Ok(report)
    }

    /// Every detector's health, by name.
    pub fn health(&self) -> Result<Vec<Health>, LedgerError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT detector, state, quarantined_until, probation_left, failures_in_a_row, failures_total,
                        last_failure, last_scan_at
                 FROM detector_health ORDER BY detector",
            )
            .map_err(self.err("cannot read detector health"))?;
        let rows = stmt
            .query_map([], |r| {
                let state = match r.get::<_, String>(1)?.as_str() {
                    "quarantined" => {
                        crate::health::State::Quarantined { until: r.get::<_, Option<i64>>(2)?.unwrap_or(0) }
                    }
                    "probation" => {
                        crate::health::State::Probation { clean_left: r.get::<_, Option<u32>>(3)?.unwrap_or(1) }
                    }
                    _ => crate::health::State::Ok,
                };
                Ok(Health {
                    detector: r.get(0)?,
                    state,
                    failures_in_a_row: r.get(4)?,
                    failures_total: r.get(5)?,
                    last_failure: r.get(6)?,
                    last_scan_at: r.get(7)?,
                })
            })
            .map_err(self.err("cannot read detector health"))?;
        rows.collect::<Result<_, _>>().map_err(self.err("cannot read detector health"))
    }

    /// Every issue, in `issues.jsonl` order (first seen, then signature).
    pub fn issues(&self) -> Result<Vec<IssueLine>, LedgerError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT sig, kind, title, origin, severity, tool, bot_id, thread_id, turn_id, first_at, last_at,
                        count, wasted_turns, evidence_source, evidence_id, grouping_version, probation
                 FROM issues ORDER BY first_at, sig",
            )
            .map_err(self.err("cannot read issues"))?;
        let rows = stmt
            .query_map([], |r| {
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
                })
            })
            .map_err(self.err("cannot read issues"))?;
        rows.collect::<Result<_, _>>().map_err(self.err("cannot read issues"))
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
        write_private_atomic(&target, &buf).map_err(io)
    }
}

/// Replaces `path` with `bytes`, atomically and `0600`: a temporary file
/// beside it (named for this process), fsync, rename, fsync of the folder. A
/// reader sees the old file or the new one, never a part.
pub(crate) fn write_private_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp{}", std::process::id()));
    {
        let mut f = private_file(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    #[cfg(unix)]
    if let Some(dir) = path.parent()
        && let Ok(d) = std::fs::File::open(dir)
    {
        let _ = d.sync_all();
    }
    Ok(())
}

/// A new file, `0600` from the start.
pub(crate) fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    opts.open(path)
}

/// Sets a file the ledger owns to `0600`, if it exists.
fn restrict(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if path.exists() {
            let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
        }
    }
    #[cfg(not(unix))]
    let _ = path;
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

/// Adds `issues.probation` to a store written before it existed (a column
/// with a default: no state is lost, nothing is recounted).
fn add_probation_column(conn: &Connection) -> rusqlite::Result<()> {
    let has: bool =
        conn.query_row("SELECT COUNT(*) > 0 FROM pragma_table_info('issues') WHERE name = 'probation'", [], |r| {
            r.get(0)
        })?;
    if !has {
        conn.execute_batch("ALTER TABLE issues ADD COLUMN probation INTEGER NOT NULL DEFAULT 0")?;
    }
    Ok(())
}

fn one() -> u32 {
    1
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct EvidenceRef {
    pub source: String,
    pub id: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observation::Origin;

    fn obs(occurrence: &str, signature: &str, turn: &str, at: i64) -> Observation {
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
    fn new_grouping_rules_never_count_an_old_occurrence_again() {
        let dir = tempfile::tempdir().unwrap();
        let mut l = Ledger::open(dir.path()).unwrap();
        let old = obs("occ-1", "old key", "t1", 100);
        l.commit(ScanCommit { observations: std::slice::from_ref(&old), ..Default::default() }).unwrap();
        // Version 2 rules change both the signature and the occurrence key
        // of the same event, seen again by the trailing window, and see a
        // new one later.
        let again = Observation {
            grouping_version: 2,
            signature: "new key".into(),
            occurrence: "v2-occ-1".into(),
            ..old.clone()
        };
        let newer = Observation { at: 200, occurrence: "v2-occ-2".into(), ..again.clone() };
        let r = l.commit(ScanCommit { observations: &[again, newer], ..Default::default() }).unwrap();
        assert_eq!((r.counted, r.below_floor), (1, 1), "the old event is not counted again, the new one is");
        let issues = l.issues().unwrap();
        assert_eq!(issues.len(), 2, "the old issue is kept, the new rules start a new one");
        assert_eq!(issues.iter().map(|i| (i.grouping_version, i.count)).collect::<Vec<_>>(), vec![(1, 1), (2, 1)]);
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
            b.stage(&scan[..1]).unwrap();
            b.stage(&scan[1..]).unwrap();
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
        l.stage(&[with_detector(obs("m1", "s", "t1", 10), "good"), with_detector(obs("m2", "bad", "t1", 11), "gone")])
            .unwrap();
        l.stage(&[with_detector(obs("m3", "bad", "t2", 12), "gone")]).unwrap();
        l.unstage("gone").unwrap();
        let r = l.commit(ScanCommit::default()).unwrap();
        assert_eq!((r.counted, r.new_issues), (1, 1));
        // Nothing staged is left over for the next commit.
        let r = l.commit(ScanCommit::default()).unwrap();
        assert_eq!(r.counted, 0);
        assert_eq!(l.issues().unwrap().len(), 1);
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
