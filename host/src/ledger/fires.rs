//! The fire log in the store: entries appended in the commit's transaction,
//! and exported after it as segments and a signed head.
//!
//! It owns the `fires` table (never rewritten, never pruned, kept across a
//! state reset), appending entries chained to the last one in the same
//! transaction as the counts they record (so a crash can never leave a fire
//! without its count or a count without its fire), and the export: closed
//! segments written once, the open one and the head replaced atomically
//! after every commit, and again at the next open after a crash in between.
//! The format is [`crate::firelog`]'s; what counts as a fire is the commit's
//! decision ([`super::counting`]).

use std::time::{Duration, Instant};

use rusqlite::{Connection, OptionalExtension, params};

use super::{Ledger, LedgerError};
use crate::firelog::{self, FireEntry, Head, PublicKeyFile, SEGMENT_ENTRIES};

/// Appends entries after the last one, chaining each to it.
pub(super) struct Appender {
    seq: u64,
    prev: [u8; 32],
    /// Time spent appending, for the summary.
    pub spent: Duration,
}

impl Appender {
    /// Starts after the last entry in the store.
    pub fn open(conn: &Connection) -> rusqlite::Result<Self> {
        let last: Option<(i64, String)> = conn
            .query_row("SELECT seq, hash FROM fires ORDER BY seq DESC LIMIT 1", [], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        let (seq, prev) = match last {
            Some((seq, hash)) => (seq as u64, firelog::unhex32(&hash).unwrap_or([0; 32])),
            None => (0, [0; 32]),
        };
        Ok(Appender { seq, prev, spent: Duration::ZERO })
    }

    /// Seals `entry` as the next one and stores it.
    pub fn append(&mut self, conn: &Connection, mut entry: FireEntry) -> rusqlite::Result<()> {
        let t = Instant::now();
        self.seq += 1;
        entry.seq = self.seq;
        self.prev = entry.seal(&self.prev);
        let line = serde_json::to_string(&entry).map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
        conn.prepare_cached("INSERT INTO fires(seq, hash, line) VALUES(?1, ?2, ?3)")?.execute(params![
            entry.seq as i64,
            entry.hash,
            line
        ])?;
        self.spent += t.elapsed();
        Ok(())
    }

    pub fn count(&self) -> u64 {
        self.seq
    }
}

impl Ledger {
    /// How many entries the fire log holds.
    pub fn fire_count(&self) -> Result<u64, LedgerError> {
        self.conn
            .query_row("SELECT COALESCE(MAX(seq), 0) FROM fires", [], |r| r.get::<_, i64>(0))
            .map(|n| n as u64)
            .map_err(self.err("cannot count fires"))
    }

    /// Writes the fire log's segments that changed since the last export,
    /// then the signed head and the public key. `signed_at` is the scan time.
    pub fn export_fires(&mut self, signed_at: i64) -> Result<(), LedgerError> {
        let t = Instant::now();
        let count = self.fire_count()?;
        let closed_before: u64 = self.meta("fires_closed")?.and_then(|v| v.parse().ok()).unwrap_or(0);
        let last_segment = count.div_ceil(SEGMENT_ENTRIES);
        for index in (closed_before + 1)..=last_segment {
            self.write_segment(index)?;
        }
        let closed = count / SEGMENT_ENTRIES;
        let key = firelog::signing_key(&self.dir).map_err(|e| LedgerError::Key(Box::new(e)))?;
        let last_hash: Option<String> = self
            .conn
            .query_row("SELECT hash FROM fires WHERE seq = ?1", [count as i64], |r| r.get(0))
            .optional()
            .map_err(self.err("cannot read the last fire"))?;
        let hash = last_hash.as_deref().and_then(firelog::unhex32).unwrap_or([0; 32]);
        let head = firelog::sign_head(&key, count, &hash, signed_at);
        let head_json = serde_json::to_string_pretty(&head).map_err(|e| self.export_err(firelog::HEAD_FILE, e))?;
        let public = PublicKeyFile::of(&key.verifying_key());
        let public_json =
            serde_json::to_string_pretty(&public).map_err(|e| self.export_err(firelog::PUBLIC_KEY_FILE, e))?;
        self.write(firelog::PUBLIC_KEY_FILE, public_json.as_bytes())?;
        self.write(firelog::HEAD_FILE, head_json.as_bytes())?;
        // The anchor: the ledger keeps the head it signed, so `verify` can tell
        // an exported head put back to an older one.
        let tx = self.conn.transaction().map_err(|source| LedgerError::Store {
            path: self.db_path.clone(),
            action: "cannot store the fire log's head",
            source,
        })?;
        for (key, value) in [("fires_closed", closed.to_string()), ("fires_head", head_json)] {
            tx.execute(
                "INSERT INTO meta(key, value) VALUES(?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                params![key, value],
            )
            .map_err(|source| LedgerError::Store {
                path: self.db_path.clone(),
                action: "cannot store the fire log's head",
                source,
            })?;
        }
        tx.commit().map_err(|source| LedgerError::Store {
            path: self.db_path.clone(),
            action: "cannot store the fire log's head",
            source,
        })?;
        self.fire_export_time = t.elapsed();
        Ok(())
    }

    /// The head this ledger last signed, as it exported it.
    pub fn fire_head(&self) -> Result<Option<Head>, LedgerError> {
        Ok(self.meta("fires_head")?.and_then(|h| serde_json::from_str(&h).ok()))
    }

    fn write_segment(&self, index: u64) -> Result<(), LedgerError> {
        let first = (index - 1) * SEGMENT_ENTRIES + 1;
        let last = index * SEGMENT_ENTRIES;
        let mut stmt = self
            .conn
            .prepare_cached("SELECT line FROM fires WHERE seq BETWEEN ?1 AND ?2 ORDER BY seq")
            .map_err(self.err("cannot read fires"))?;
        let mut buf = Vec::new();
        let mut rows = stmt.query([first as i64, last as i64]).map_err(self.err("cannot read fires"))?;
        while let Some(r) = rows.next().map_err(self.err("cannot read fires"))? {
            let line: String = r.get(0).map_err(self.err("cannot read fires"))?;
            buf.extend(line.as_bytes());
            buf.push(b'\n');
        }
        self.write(&firelog::segment_name(index), &buf)
    }

    fn write(&self, name: &str, bytes: &[u8]) -> Result<(), LedgerError> {
        let path = self.dir.join(name);
        crate::private_fs::write_atomic(&path, bytes).map_err(|source| LedgerError::Export { path, source })
    }

    fn export_err(&self, name: &str, e: serde_json::Error) -> LedgerError {
        LedgerError::Export { path: self.dir.join(name), source: std::io::Error::other(e) }
    }

    /// Time the last commit spent on the fire log (appending and exporting).
    pub fn fire_log_time(&self) -> Duration {
        self.fire_append_time + self.fire_export_time
    }
}
