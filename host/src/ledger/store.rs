//! The store: opening, migrating and reading `ledger.db`, and the operator's
//! commands that change it outside a scan.
//!
//! It owns the schema and its versions (an older store is carried over or its
//! state started again, a newer or foreign one refused, never overwritten),
//! the reads a scan needs (positions, state, health, bookkeeping) and the
//! admin writes (quarantine, release, enable, disable, wake), each in a
//! transaction of its own. It never counts (that is [`super::count`]).

use std::path::Path;

use rusqlite::{Connection, OptionalExtension, params};

use super::export::continued;
use super::export::issues::IssueLine;
use super::meta::{self, MetaKey};
use super::{
    APPLICATION_ID, Health, ISSUES_FILE, Ledger, LedgerError, ResetReport, SCHEMA_VERSION, STORE_FILE, WriterLock,
};
use crate::firelog::FireBody;
use crate::model::failure::Failure;
use crate::model::standing::State;

pub(super) const SCHEMA: &str = "
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
CREATE INDEX IF NOT EXISTS issues_by_kind ON issues(kind);
CREATE TABLE IF NOT EXISTS issue_turns(sig TEXT NOT NULL, turn_id TEXT NOT NULL,
    PRIMARY KEY(sig, turn_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS detector_state(detector TEXT PRIMARY KEY, state BLOB);
CREATE TABLE IF NOT EXISTS count_floor(kind TEXT PRIMARY KEY, at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS positions(detector TEXT NOT NULL, source TEXT NOT NULL, value TEXT,
    PRIMARY KEY(detector, source)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS fires(seq INTEGER PRIMARY KEY, hash TEXT NOT NULL, line TEXT NOT NULL,
    detector TEXT, kind TEXT, type TEXT);
CREATE TABLE IF NOT EXISTS detector_admin(detector TEXT PRIMARY KEY, disabled INTEGER NOT NULL DEFAULT 0,
    wake INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS detector_health(
    detector TEXT PRIMARY KEY, state TEXT NOT NULL, quarantined_until INTEGER, probation_left INTEGER,
    failures_in_a_row INTEGER NOT NULL, failures_total INTEGER NOT NULL, last_failure TEXT,
    last_scan_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS issue_state(sig TEXT PRIMARY KEY, state TEXT NOT NULL, fixed_at INTEGER, note TEXT);
CREATE TABLE IF NOT EXISTS issue_days(sig TEXT NOT NULL, day INTEGER NOT NULL, count INTEGER NOT NULL,
    PRIMARY KEY(sig, day)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS issue_days_by_day ON issue_days(day);
CREATE TABLE IF NOT EXISTS issue_hours(sig TEXT NOT NULL, hour INTEGER NOT NULL, count INTEGER NOT NULL,
    wasted INTEGER NOT NULL, PRIMARY KEY(sig, hour)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS issue_hours_by_hour ON issue_hours(hour);
CREATE TABLE IF NOT EXISTS issue_thresholds(sig TEXT PRIMARY KEY, crossed_at INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS issue_events(sig TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL,
    at INTEGER NOT NULL, PRIMARY KEY(sig, seq)) WITHOUT ROWID;
";

/// The page size of a new store: SQLite's largest. A big scan's commit
/// writes every new fire line (about 530 bytes each, 92 MB at 1 M records)
/// through the write-ahead log, one frame a page: with 4 KiB pages that was
/// about 31 k frames, each its own write and checksum, and the commit and
/// the checkpoint beside the exports took 1.25 s and 0.24 s at 1 M records;
/// with 64 KiB pages, 0.74 s and 0.07 s (docs/benchmarks.md). A
/// store created with another page size keeps it (changing it would mean
/// rewriting the whole file).
const PAGE_SIZE: i64 = 65536;
/// The temporary tables' page size: SQLite's default.
const TEMP_PAGE_SIZE: i64 = 4096;

/// Refuses a file that is not SQLite at all, before SQLite touches it.
pub(super) fn check_header(path: &Path) -> Result<(), LedgerError> {
    use std::io::Read;
    let mut header = [0u8; 16];
    let ok = std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut header)).is_ok();
    if ok && &header == b"SQLite format 3\0" { Ok(()) } else { Err(LedgerError::Corrupt { path: path.to_owned() }) }
}

/// What the operator set for one detector, outside its health.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Admin {
    /// Not run until enabled again; its positions stay where they are.
    pub disabled: bool,
    /// Run at the next scan whatever its cadence says (a force-wake).
    pub wake: bool,
}

impl Ledger {
    /// Opens (or creates) the ledger in `dir`, which must already exist.
    ///
    /// A store of an older schema version has its state dropped and started
    /// again (see [`Ledger::reset_state`]); a missing store with an
    /// `issues.jsonl` beside it is rebuilt from that file the same way. A
    /// store behind the exported fire log (new, lost, an older copy) takes
    /// the log's entries from the verified files, so the chain goes on and no
    /// exported byte is written again; a log that does not verify is refused
    /// ([`LedgerError::ExportedLog`]). A
    /// file that is not a sentinel ledger is refused, never overwritten. The
    /// ledger holds the output folder's [`WriterLock`] until it is dropped:
    /// while another process holds it, this fails with [`LockError::Held`].
    pub fn open(dir: &Path) -> Result<Self, LedgerError> {
        // The lock first: a second writer is refused before it reads anything.
        let lock = WriterLock::acquire(dir)?;
        // With the lock held nobody else writes here: a temporary file is a
        // dead writer's, and the store holds what it was for.
        let swept = super::leftovers::sweep(dir);
        if swept > 0 {
            tracing::debug!(dir = %dir.display(), swept, "removed temporary files a writer that died left");
        }
        let db_path = dir.join(STORE_FILE);
        let err = |action| {
            let path = db_path.clone();
            move |source| LedgerError::Store { path, action, source }
        };
        // Never through a symlink planted at its name (the output folder's
        // rule; the folder is this user's alone, so only this user plants one).
        if std::fs::symlink_metadata(&db_path).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(LedgerError::Linked { path: db_path });
        }
        let existed = std::fs::metadata(&db_path).map(|m| m.len() > 0).unwrap_or(false);
        if existed {
            check_header(&db_path)?;
        }
        let exported = continued::checked_before_creating(dir, existed)?;
        let mut conn = Connection::open(&db_path).map_err(err("cannot open"))?;
        crate::base::private_fs::restrict(&db_path);
        configure(&mut conn, dir, &db_path, existed)?;
        let version: Option<i64> = conn
            .query_row("SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'schema_version'", [], |r| r.get(0))
            .optional()
            .map_err(err("cannot read the schema version"))?;
        let mut ledger = Ledger {
            dir: dir.to_owned(),
            db_path: db_path.clone(),
            conn,
            reset: None,
            staging: false,
            tally: None,
            _lock: lock,
            signer: None,
            fire_append_time: std::time::Duration::ZERO,
            fire_export_time: std::time::Duration::ZERO,
            export_time: std::time::Duration::ZERO,
        };
        ledger.carry_over(version, existed)?;
        // Whatever happened to the store, the exported log is the record: a
        // store behind it (new, lost, an older copy) takes its entries first.
        ledger.go_on_from_export(exported)?;
        Ok(ledger)
    }

    /// Carries a store of schema `version` over to this release's (see
    /// [`Ledger::open`]).
    fn carry_over(&mut self, version: Option<i64>, existed: bool) -> Result<(), LedgerError> {
        match version {
            Some(v) if v > SCHEMA_VERSION => {
                return Err(LedgerError::NewerSchema { path: self.db_path.clone(), found: v });
            }
            Some(v) if v == SCHEMA_VERSION => {}
            // Version 3 only added tables (created above): carried over as is.
            Some(2) => self.write_version()?,
            Some(v) => {
                self.reset_state(&format!("the ledger had schema version {v}, this release writes {SCHEMA_VERSION}"))?;
            }
            None if existed => {
                self.reset_state("the ledger had no schema version")?;
            }
            None => match self.import_issues()? {
                Some(n) => {
                    self.reset_state(&format!("{STORE_FILE} was missing: {n} issues imported from {ISSUES_FILE}"))?;
                }
                None => self.write_version()?,
            },
        }
        Ok(())
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

    /// Drops the state and starts again, keeping the issues and every fire
    /// (the `fires` table is never touched): source cursors
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
        self.tally = None;
        let tx = self.conn.transaction().map_err(e("cannot begin the reset"))?;
        tx.execute_batch(
            "DROP TABLE IF EXISTS cursors; DROP TABLE IF EXISTS positions; DROP TABLE IF EXISTS occurrences;
             DROP TABLE IF EXISTS detector_state;
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
        let fires_kept = self.fire_count()?;
        tracing::info!(reason, issues_kept, fires_kept, "ledger state started again");
        self.reset = Some(reason.to_owned());
        Ok(ResetReport { issues_kept, fires_kept })
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
            .and_then(|_| {
                // The state a fix gave it survives the store's loss.
                if i.state == super::IssueState::Open {
                    return Ok(0);
                }
                tx.execute(
                    "INSERT OR IGNORE INTO issue_state(sig, state, fixed_at, note) VALUES(?1, ?2, ?3, ?4)",
                    params![i.sig, i.state.as_str(), i.fixed_at, i.fix_note],
                )
            })
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

    /// A bookkeeping value as text.
    pub fn meta(&self, key: &MetaKey) -> Result<Option<String>, LedgerError> {
        meta::read_text(&self.conn, key).map_err(self.err("cannot read scan bookkeeping"))
    }

    /// A bookkeeping time, ms.
    pub fn meta_ms(&self, key: &MetaKey) -> Result<Option<i64>, LedgerError> {
        meta::read_parsed(&self.conn, key, str::parse::<i64>).map_err(self.err("cannot read scan bookkeeping"))
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

    /// Where `detector` is in `source` (`None`: at the start): its own
    /// position, or, for a detector that has none yet (one added to an
    /// output folder that already has a history), where the source's latest
    /// read ended, as before positions were kept per detector.
    pub fn position(&self, detector: &str, source: &str) -> Result<Option<String>, LedgerError> {
        let own: Option<Option<String>> = self
            .conn
            .prepare_cached("SELECT value FROM positions WHERE detector = ?1 AND source = ?2")
            .and_then(|mut s| s.query_row([detector, source], |r| r.get(0)).optional())
            .map_err(self.err("cannot read a position"))?;
        match own {
            Some(p) => Ok(p),
            None => self.cursor(source),
        }
    }

    /// The next scan reads again even when no file changed (an operator's
    /// command changed what it would do).
    fn forget_fast_stamp(&self) -> Result<(), LedgerError> {
        self.conn
            .execute("DELETE FROM meta WHERE key = 'fast_stamp'", [])
            .map_err(self.err("cannot store scan bookkeeping"))?;
        Ok(())
    }

    /// Every detector's health, by name.
    pub fn health(&self) -> Result<Vec<Health>, LedgerError> {
        read_health(&self.conn).map_err(self.err("cannot read detector health"))
    }

    /// What the operator set for `detector`.
    pub fn admin(&self, detector: &str) -> Result<Admin, LedgerError> {
        Ok(self
            .conn
            .query_row("SELECT disabled, wake FROM detector_admin WHERE detector = ?1", [detector], |r| {
                Ok(Admin { disabled: r.get(0)?, wake: r.get(1)? })
            })
            .optional()
            .map_err(self.err("cannot read the operator's settings"))?
            .unwrap_or_default())
    }

    /// Stores what the operator set for `detector`, in a transaction of its own.
    pub fn set_admin(&mut self, detector: &str, admin: &Admin) -> Result<(), LedgerError> {
        self.conn
            .execute(
                "INSERT INTO detector_admin(detector, disabled, wake) VALUES(?1, ?2, ?3)
                 ON CONFLICT(detector) DO UPDATE SET disabled = excluded.disabled, wake = excluded.wake",
                params![detector, admin.disabled, admin.wake],
            )
            .map_err(self.err("cannot store the operator's settings"))?;
        self.forget_fast_stamp()?;
        Ok(())
    }

    /// Replaces `detector`'s health with what `change` makes of it, in a
    /// transaction of its own (a quarantine or a release by hand), with its
    /// fire (a quarantine or a release) when the state changed.
    pub fn change_health(
        &mut self,
        detector: &str,
        at: i64,
        change: impl FnOnce(Health) -> Health,
    ) -> Result<Health, LedgerError> {
        let path = self.db_path.clone();
        let e =
            move |source| LedgerError::Store { path: path.clone(), action: "cannot change detector health", source };
        let tx = self.conn.transaction().map_err(&e)?;
        let current = read_one_health(&tx, detector).map_err(&e)?.unwrap_or_else(|| Health::new(detector));
        let after = change(current.clone());
        let reason = || "by the operator".to_owned();
        let body = match (current.state, after.state) {
            (a, b) if a.standing() == b.standing() => None,
            (_, State::Quarantined { .. }) => Some(FireBody::Quarantine { reason: reason() }),
            (State::Quarantined { .. }, _) => Some(FireBody::Release { reason: reason() }),
            _ => None,
        };
        let fired = body.is_some();
        if let Some(body) = body {
            let entry = super::count::fires::fact_fire(&after.detector, at, None, body);
            let mut appender = super::export::segments::Appender::open(&tx).map_err(&e)?;
            appender.append(&tx, entry.view()).map_err(&e)?;
            appender.flush(&tx).map_err(&e)?;
        }
        write_health(&tx, &after).map_err(&e)?;
        tx.execute("DELETE FROM meta WHERE key = 'fast_stamp'", []).map_err(&e)?;
        tx.commit().map_err(&e)?;
        if fired {
            self.export_fires(at)?;
        }
        Ok(after)
    }
}

impl Ledger {
    /// Appends a diagnostic fire for `detector` (a force-wake by the
    /// operator), in a transaction of its own, and exports the log; returns
    /// its sequence number.
    pub fn diagnostic_fire(
        &mut self,
        detector: &str,
        version: Option<String>,
        at: i64,
        reason: String,
    ) -> Result<u64, LedgerError> {
        let path = self.db_path.clone();
        let e =
            move |source| LedgerError::Store { path: path.clone(), action: "cannot record a diagnostic fire", source };
        let tx = self.conn.transaction().map_err(&e)?;
        let body = FireBody::Diagnostic { reason, kind: None, sig: None };
        let entry = super::count::fires::fact_fire(detector, at, version, body);
        let mut appender = super::export::segments::Appender::open(&tx).map_err(&e)?;
        appender.append(&tx, entry.view()).map_err(&e)?;
        appender.flush(&tx).map_err(&e)?;
        let seq = appender.count();
        tx.commit().map_err(&e)?;
        self.export_fires(at)?;
        Ok(seq)
    }
}

/// Every detector's health, by name.
pub(super) fn read_health(conn: &Connection) -> rusqlite::Result<Vec<Health>> {
    let mut stmt = conn.prepare(
        "SELECT detector, state, quarantined_until, probation_left, failures_in_a_row, failures_total,
                        last_failure, last_scan_at
                 FROM detector_health ORDER BY detector",
    )?;
    let rows = stmt.query_map([], |r| {
        let state = match r.get::<_, String>(1)?.as_str() {
            "quarantined" => State::Quarantined { until: r.get::<_, Option<i64>>(2)?.unwrap_or(0) },
            "probation" => State::Probation { clean_left: r.get::<_, Option<u32>>(3)?.unwrap_or(1) },
            _ => State::Ok,
        };
        Ok(Health {
            detector: r.get(0)?,
            state,
            failures_in_a_row: r.get(4)?,
            failures_total: r.get(5)?,
            last_failure: r.get::<_, Option<String>>(6)?.map(|f| parse_failure(6, &f)).transpose()?,
            last_scan_at: r.get(7)?,
        })
    })?;
    rows.collect()
}

/// A stored `last_failure`, read back as the [`Failure`] it was written
/// from; text that is not one is an error of the read, naming it.
fn parse_failure(column: usize, text: &str) -> rusqlite::Result<Failure> {
    text.parse()
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(column, rusqlite::types::Type::Text, Box::new(e)))
}

/// One detector's health, if it has any yet.
pub(super) fn read_one_health(conn: &Connection, detector: &str) -> rusqlite::Result<Option<Health>> {
    Ok(read_health(conn)?.into_iter().find(|h| h.detector == detector))
}

/// Stores one detector's health.
pub(super) fn write_health(tx: &Connection, h: &Health) -> rusqlite::Result<()> {
    let (until, left) = match h.state {
        State::Quarantined { until } => (Some(until), None),
        State::Probation { clean_left } => (None, Some(clean_left)),
        State::Ok => (None, None),
    };
    tx.prepare_cached(
        "INSERT INTO detector_health(detector, state, quarantined_until, probation_left, failures_in_a_row,
                                    failures_total, last_failure, last_scan_at)
         VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT(detector) DO UPDATE SET state = excluded.state,
            quarantined_until = excluded.quarantined_until, probation_left = excluded.probation_left,
            failures_in_a_row = excluded.failures_in_a_row, failures_total = excluded.failures_total,
            last_failure = excluded.last_failure, last_scan_at = excluded.last_scan_at",
    )?
    .execute(params![
        h.detector,
        h.state.label(),
        until,
        left,
        h.failures_in_a_row,
        h.failures_total,
        h.last_failure.map(|f| f.to_string()),
        h.last_scan_at
    ])?;
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

/// The store's settings and schema on a connection just opened: the
/// application id checked (an existing store) or set (a new one), pages,
/// journal, sync, cache and checkpoint, the schema and its migrations, and
/// the store's companions made private.
fn configure(conn: &mut Connection, dir: &Path, db_path: &Path, existed: bool) -> Result<(), LedgerError> {
    let err = |action| {
        let path = db_path.to_owned();
        move |source| LedgerError::Store { path, action, source }
    };
    if existed {
        let app: i64 = conn.query_row("PRAGMA application_id", [], |r| r.get(0)).map_err(err("cannot read"))?;
        if app != APPLICATION_ID {
            return Err(LedgerError::Foreign { path: db_path.to_owned() });
        }
    } else {
        // Before the first write, which fixes it for the store's life.
        conn.pragma_update(None, "page_size", PAGE_SIZE).map_err(err("cannot initialise"))?;
        conn.pragma_update(None, "application_id", APPLICATION_ID).map_err(err("cannot initialise"))?;
    }
    // The temporary tables (staging, the tally) keep SQLite's default pages:
    // a page size set for the store would carry over to them, and with
    // 64 KiB pages their in-memory journal made a big scan's peak memory
    // grow by about 32 MiB at 1 M records.
    conn.pragma_update(Some("temp"), "page_size", TEMP_PAGE_SIZE).map_err(err("cannot initialise"))?;
    conn.pragma_update(None, "journal_mode", "WAL").map_err(err("cannot set WAL mode"))?;
    conn.pragma_update(None, "synchronous", "FULL").map_err(err("cannot set synchronous"))?;
    // Occurrence keys are hashes, inserted in random order, so a big scan
    // touches pages all over the store: a fixed 8 MiB page cache (instead
    // of SQLite's 2 MiB) keeps more of them, and memory stays bounded.
    conn.pragma_update(None, "cache_size", -8192).map_err(err("cannot set the cache size"))?;
    // A commit never checkpoints inside itself: the scan's commit does it
    // beside its exports (`checkpoint`).
    super::export::checkpoint::disable_automatic(conn).map_err(err("cannot set the checkpoint"))?;
    conn.execute_batch(SCHEMA).map_err(err("cannot create the schema"))?;
    add_probation_column(conn).map_err(err("cannot add the probation column"))?;
    let filled = super::fire_filters::migrate(conn).map_err(err("cannot index the fire log's filters"))?;
    if filled > 0 {
        tracing::info!(filled, "the fire log's filter columns were added and filled from its entries");
    }
    for suffix in ["-wal", "-shm"] {
        crate::base::private_fs::restrict(&dir.join(format!("{STORE_FILE}{suffix}")));
    }
    Ok(())
}
