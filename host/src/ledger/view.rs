//! The read-only view of a ledger: what `detectors list`, `verify` and the
//! watch API read while a scan may be writing.
//!
//! It owns a connection opened with `SQLITE_OPEN_READONLY` on a store in WAL
//! mode, so it never blocks the writer and the writer never blocks it (a
//! reader sees the last committed scan). It never takes the writer lock,
//! never creates, migrates or repairs anything: a missing store is "no
//! ledger yet", a store of another schema version is read as far as it goes.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};

use super::export::{IssueLine, read_issues};
use super::store::{check_header, read_health, read_meta};
use super::{Health, LedgerError, STORE_FILE};

/// A read-only view of the ledger of one output folder.
#[derive(Debug)]
pub struct LedgerView {
    db_path: PathBuf,
    conn: Connection,
}

impl LedgerView {
    /// Opens the ledger in `dir` for reading; `None` when there is none yet.
    pub fn open(dir: &Path) -> Result<Option<Self>, LedgerError> {
        let db_path = dir.join(STORE_FILE);
        if !std::fs::metadata(&db_path).is_ok_and(|m| m.is_file() && m.len() > 0) {
            return Ok(None);
        }
        check_header(&db_path)?;
        let conn = Connection::open_with_flags(
            &db_path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI,
        )
        .map_err(|source| LedgerError::Store {
            path: db_path.clone(),
            action: "cannot open for reading",
            source,
        })?;
        Ok(Some(LedgerView { db_path, conn }))
    }

    fn err(&self, action: &'static str) -> impl FnOnce(rusqlite::Error) -> LedgerError + '_ {
        move |source| LedgerError::Store { path: self.db_path.clone(), action, source }
    }

    pub fn issues(&self) -> Result<Vec<IssueLine>, LedgerError> {
        read_issues(&self.conn).map_err(self.err("cannot read issues"))
    }

    pub fn health(&self) -> Result<Vec<Health>, LedgerError> {
        read_health(&self.conn).map_err(self.err("cannot read detector health"))
    }

    /// The fire-log head this ledger last signed (its anchor).
    pub fn fire_head(&self) -> Result<Option<crate::firelog::Head>, LedgerError> {
        Ok(self.meta("fires_head")?.and_then(|h| serde_json::from_str(&h).ok()))
    }

    /// The ledger's copy of one fire-log entry's hash.
    pub fn fire_hash(&self, seq: u64) -> Result<Option<String>, LedgerError> {
        use rusqlite::OptionalExtension;
        self.conn
            .query_row("SELECT hash FROM fires WHERE seq = ?1", [seq as i64], |r| r.get(0))
            .optional()
            .map_err(self.err("cannot read the fire log"))
    }

    pub fn meta(&self, key: &str) -> Result<Option<String>, LedgerError> {
        read_meta(&self.conn, key).map_err(self.err("cannot read scan bookkeeping"))
    }
}
