//! The fire log in the store: entries appended in the commit's transaction,
//! and exported after it as segments and a signed head.
//!
//! It owns the `fires` table (never rewritten, never pruned, kept across a
//! state reset), appending entries chained to the last one in the same
//! transaction as the counts they record (so a crash can never leave a fire
//! without its count or a count without its fire), and the export: closed
//! segments written once, the open one appended to (replaced whole from the
//! store only when the file no longer holds a prefix of it: a torn or altered
//! export) and the head replaced atomically after every commit, and again at
//! the next open after a crash in between. An exported fire's bytes are never
//! written again.
//! The format is [`crate::firelog`]'s; what counts as a fire is the commit's
//! decision ([`crate::ledger::count::fires`]).

use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::{Connection, OptionalExtension};

use super::ahead::{AheadWriter, Ready};
use crate::firelog::{self, FireEntryRef, Head, PublicKeyFile, SEGMENT_ENTRIES};
use crate::ledger::meta::{self, MetaKey};
use crate::ledger::{Ledger, LedgerError};

/// Entries inserted by one statement: appends are buffered and written this
/// many at a time (one multi-row `INSERT`), in the same transaction.
const INSERT_ROWS: usize = 64;

/// Appends entries after the last one, chaining each to it. Entries are
/// sealed at once and written in groups of [`INSERT_ROWS`];
/// [`Appender::flush`] writes the rest, and must run before the
/// transaction commits.
pub(in crate::ledger) struct Appender {
    /// Where the entries go: the store's `fires`, or a scan's tally.
    table: &'static str,
    seq: u64,
    prev: [u8; 32],
    /// Sealed and not yet inserted.
    pending: Vec<Row>,
    /// Time spent appending, for the summary.
    pub spent: Duration,
    /// Where each sealed line is also handed, so that the segments it
    /// closes are written while the scan goes on (the tally's appender).
    ahead: Option<AheadWriter>,
}

/// A sealed entry waiting to be inserted: its row of `fires`, with the
/// filter columns ([`crate::ledger::fire_filters`]).
struct Row {
    seq: i64,
    hash: String,
    line: String,
    detector: String,
    kind: Option<String>,
    fire_type: &'static str,
}

impl Appender {
    /// Starts after the last entry in the store.
    pub fn open(conn: &Connection) -> rusqlite::Result<Self> {
        Self::open_into(conn, "main.fires")
    }

    /// Starts after the last entry in the store, writing into `table`
    /// (`seq`, `hash` and `line` columns, as the store's `fires`).
    pub fn open_into(conn: &Connection, table: &'static str) -> rusqlite::Result<Self> {
        let last: Option<(i64, String)> = conn
            .query_row("SELECT seq, hash FROM fires ORDER BY seq DESC LIMIT 1", [], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        let (seq, prev) = match last {
            Some((seq, hash)) => (seq as u64, firelog::unhex32(&hash).unwrap_or([0; 32])),
            None => (0, [0; 32]),
        };
        Ok(Appender { table, seq, prev, pending: Vec::with_capacity(INSERT_ROWS), spent: Duration::ZERO, ahead: None })
    }

    /// Hands every line sealed from now on to `ahead` as well.
    pub fn writing_ahead(mut self, ahead: AheadWriter) -> Self {
        self.ahead = Some(ahead);
        self
    }

    /// Stops handing lines ahead; returns the writer they went to.
    pub fn take_ahead(&mut self) -> Option<AheadWriter> {
        self.ahead.take()
    }

    /// Seals `entry` as the next one and stores it.
    pub fn append(&mut self, conn: &Connection, entry: FireEntryRef<'_>) -> rusqlite::Result<()> {
        let t = Instant::now();
        self.seq += 1;
        let (hash, line) = entry.seal(self.seq, &self.prev);
        self.prev = hash;
        if let Some(ahead) = &mut self.ahead {
            ahead.push(self.seq, &line);
        }
        self.pending.push(Row {
            seq: self.seq as i64,
            hash: crate::base::hex(&hash),
            line,
            detector: entry.detector.to_owned(),
            kind: entry.body.kind().map(str::to_owned),
            fire_type: entry.fire_type().as_str(),
        });
        if self.pending.len() == INSERT_ROWS {
            self.insert(conn)?;
        }
        self.spent += t.elapsed();
        Ok(())
    }

    /// Writes what is still buffered.
    pub fn flush(&mut self, conn: &Connection) -> rusqlite::Result<()> {
        let t = Instant::now();
        self.insert(conn)?;
        self.spent += t.elapsed();
        Ok(())
    }

    fn insert(&mut self, conn: &Connection) -> rusqlite::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let rows = vec!["(?, ?, ?, ?, ?, ?)"; self.pending.len()].join(", ");
        let mut stmt = conn.prepare_cached(&format!(
            "INSERT INTO {}(seq, hash, line, detector, kind, type) VALUES {rows}",
            self.table
        ))?;
        let params = self
            .pending
            .iter()
            .flat_map(|r| [&r.seq as &dyn rusqlite::ToSql, &r.hash, &r.line, &r.detector, &r.kind, &r.fire_type]);
        stmt.execute(rusqlite::params_from_iter(params))?;
        self.pending.clear();
        Ok(())
    }

    pub fn count(&self) -> u64 {
        self.seq
    }

    /// The next entry's sequence number and the hash it chains to.
    pub fn next_position(&self) -> (u64, [u8; 32]) {
        (self.seq + 1, self.prev)
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
        self.export_fires_with(signed_at, Ready::default())
    }

    /// [`Ledger::export_fires`], putting in place the segments a scan wrote
    /// ahead (`ready`) instead of writing them from the store.
    pub(in crate::ledger) fn export_fires_with(&mut self, signed_at: i64, mut ready: Ready) -> Result<(), LedgerError> {
        let t = Instant::now();
        let count = self.fire_count()?;
        let closed_before: u64 = meta::read_parsed(&self.conn, &MetaKey::FiresClosed, str::parse::<u64>)
            .map_err(self.err("cannot read scan bookkeeping"))?
            .unwrap_or(0);
        let last_segment = count.div_ceil(SEGMENT_ENTRIES);
        let mut moved = None;
        for index in (closed_before + 1)..=last_segment {
            let path = self.dir.join(firelog::segment_name(index));
            if ready.put(index, &path) {
                moved = Some(path);
            } else {
                self.write_segment(index)?;
            }
        }
        if let Some(path) = moved {
            // The renames survive a crash once their folder is synced.
            crate::base::private_fs::sync_parent(&path);
        }
        let closed = count / SEGMENT_ENTRIES;
        let key = self.signing_key()?;
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
        // an exported head put back to an older one. And what the files look
        // like as this export left them: anything else that changes them ends
        // the fast path (the health source verifies them).
        let files = self.fire_files_stamp();
        let tx = self.conn.transaction().map_err(|source| LedgerError::Store {
            path: self.db_path.clone(),
            action: "cannot store the fire log's head",
            source,
        })?;
        for (key, value) in
            [(MetaKey::FiresClosed, closed.to_string()), (MetaKey::FiresHead, head_json), (MetaKey::FiresFiles, files)]
        {
            meta::write(&tx, &key, Some(&value)).map_err(|source| LedgerError::Store {
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

    /// The stamp ([`crate::base::file_stamp`]) of every fire-log file in the
    /// output folder (segments, head, public key), by name.
    fn fire_files_stamp(&self) -> String {
        let mut names: Vec<String> = std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| firelog::is_log_file(n))
            .collect();
        names.sort();
        names.iter().map(|n| crate::base::file_stamp::line(&self.dir.join(n)) + "\n").collect()
    }

    /// Whether the fire log's files are exactly as this ledger's last export
    /// left them (no one else wrote, replaced, touched or removed one).
    pub fn fire_files_as_exported(&self) -> Result<bool, LedgerError> {
        Ok(self.meta(&MetaKey::FiresFiles)?.is_some_and(|s| s == self.fire_files_stamp()))
    }

    /// The head this ledger last signed, as it exported it.
    pub fn fire_head(&self) -> Result<Option<Head>, LedgerError> {
        meta::read_parsed(&self.conn, &MetaKey::FiresHead, |h| serde_json::from_str(h))
            .map_err(self.err("cannot read the fire log's head"))
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
        let path = self.dir.join(firelog::segment_name(index));
        match exported_prefix(&path, &buf) {
            // Already as the store has it: not touched.
            Some(held) if held == buf.len() => Ok(()),
            Some(held) => append(&path, &buf[held..]).map_err(|source| LedgerError::Export { path, source }),
            None => self.write(&firelog::segment_name(index), &buf),
        }
    }

    fn write(&self, name: &str, bytes: &[u8]) -> Result<(), LedgerError> {
        let path = self.dir.join(name);
        crate::base::private_fs::write_atomic(&path, bytes).map_err(|source| LedgerError::Export { path, source })
    }

    fn export_err(&self, name: &str, e: serde_json::Error) -> LedgerError {
        LedgerError::Export { path: self.dir.join(name), source: std::io::Error::other(e) }
    }

    /// Time the last commit spent on the fire log (appending and exporting).
    /// Appending includes the sealing the scan's staging thread did while
    /// records flowed, so part of it overlaps the read, not the commit.
    pub fn fire_log_time(&self) -> Duration {
        self.fire_append_time + self.fire_export_time
    }

    /// Time the last commit spent writing its exports after the transaction
    /// (`issues.jsonl`, the fire log's segments and signed head).
    pub fn export_time(&self) -> Duration {
        self.export_time
    }
}

/// How many bytes of `bytes` the regular file at `path` already holds, when
/// it holds a prefix of them: the segment is then only appended to, so an
/// exported fire's bytes are never written again. `None` (no file, a link,
/// other bytes: an export a crash tore, or a file someone changed) means the
/// segment is replaced whole from the store.
fn exported_prefix(path: &Path, bytes: &[u8]) -> Option<usize> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.file_type().is_file() || meta.len() > bytes.len() as u64 {
        return None;
    }
    let held = std::fs::read(path).ok()?;
    bytes.starts_with(&held).then_some(held.len())
}

/// Appends `bytes` to the segment at `path` (never through a link) and syncs it.
fn append(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut opts = std::fs::OpenOptions::new();
    opts.append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NOFOLLOW);
    }
    let mut file = opts.open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}
