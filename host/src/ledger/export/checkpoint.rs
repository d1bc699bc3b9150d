//! Checkpoints: moving what a commit wrote to the store's write-ahead log
//! into the store file, beside the exports instead of inside the commit.
//!
//! It owns when the writer's log is checkpointed. SQLite's automatic
//! checkpoint runs inside the `COMMIT` that takes the log past its
//! threshold, so a big scan's commit wrote its pages twice (the log, then the
//! store file, each synced) before it returned: about 0.7 s of a 1 s commit
//! at 1 M records. The writer's connection turns it off
//! ([`disable_automatic`]); after each scan's commit a second connection
//! runs a passive checkpoint ([`Checkpoint::start`]) while the writer writes
//! the exports, and the commit waits for both. Closing the writer checkpoints
//! whatever is left, as SQLite always does.
//!
//! It never changes what is durable (a commit is durable once its log is
//! synced: `synchronous = FULL`), never waits for a reader (a passive
//! checkpoint copies what no reader still needs and leaves the rest for the
//! next one), and never fails a scan: the scan is committed before it starts,
//! so a checkpoint that cannot run is logged and left to the next.

use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

use rusqlite::{Connection, OpenFlags};

/// Turns off the automatic checkpoint of the writer's connection.
pub(in crate::ledger) fn disable_automatic(conn: &Connection) -> rusqlite::Result<()> {
    conn.pragma_update(None, "wal_autocheckpoint", 0)
}

/// What one checkpoint did, in pages of the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::ledger) struct Done {
    /// Pages in the log.
    pub log: i64,
    /// Pages of it now in the store file.
    pub checkpointed: i64,
}

/// A passive checkpoint running on its own connection and thread.
pub(in crate::ledger) struct Checkpoint {
    db_path: PathBuf,
    thread: Option<JoinHandle<rusqlite::Result<Done>>>,
}

impl Checkpoint {
    /// Starts checkpointing the store at `db_path`. Should the thread not
    /// start, [`Checkpoint::finish`] runs the checkpoint itself.
    pub(in crate::ledger) fn start(db_path: &Path) -> Self {
        let path = db_path.to_owned();
        let thread = std::thread::Builder::new().name("ledger-checkpoint".into()).spawn(move || passive(&path)).ok();
        Checkpoint { db_path: db_path.to_owned(), thread }
    }

    /// Waits for the checkpoint; a failed one is logged, never returned.
    pub(in crate::ledger) fn finish(self) -> Option<Done> {
        let result = match self.thread {
            Some(t) => t.join().unwrap_or_else(|_| Err(rusqlite::Error::InvalidQuery)),
            None => passive(&self.db_path),
        };
        match result {
            Ok(done) => {
                tracing::debug!(log = done.log, checkpointed = done.checkpointed, "store checkpointed");
                Some(done)
            }
            Err(error) => {
                tracing::warn!(path = %self.db_path.display(), %error, "store checkpoint left to the next commit");
                None
            }
        }
    }
}

/// One passive checkpoint of the store's log, on a connection of its own.
fn passive(db_path: &Path) -> rusqlite::Result<Done> {
    // Never creates the store: it exists, the writer has just committed to it.
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(db_path, flags)?;
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| Ok(Done { log: r.get(1)?, checkpointed: r.get(2)? }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_past_the_threshold_leaves_the_log_to_the_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.db");
        let writer = Connection::open(&path).unwrap();
        writer.pragma_update(None, "journal_mode", "WAL").unwrap();
        disable_automatic(&writer).unwrap();
        let automatic: i64 = writer.query_row("PRAGMA wal_autocheckpoint", [], |r| r.get(0)).unwrap();
        assert_eq!(automatic, 0);
        // 8 MiB in one transaction: past SQLite's 1000-page threshold.
        writer.execute_batch("CREATE TABLE t(x BLOB); BEGIN;").unwrap();
        for _ in 0..2048 {
            writer.execute("INSERT INTO t(x) VALUES(zeroblob(4096))", []).unwrap();
        }
        writer.execute_batch("COMMIT").unwrap();
        let store_bytes = || std::fs::metadata(&path).unwrap().len();
        assert!(store_bytes() < 1 << 20, "the commit checkpointed by itself: the store file has {}", store_bytes());
        let done = Checkpoint::start(&path).finish().expect("the checkpoint runs");
        assert!(done.log > 1000, "{done:?}");
        assert_eq!(done.checkpointed, done.log, "no reader holds an old snapshot: everything is copied");
        assert!(store_bytes() >= 8 << 20, "the checkpoint moved the log into the store file");
        // The store file holds it all now; the writer still reads it.
        let rows: i64 = writer.query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0)).unwrap();
        assert_eq!(rows, 2048);
    }

    #[test]
    fn the_ledgers_writer_never_checkpoints_inside_a_commit() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = crate::ledger::Ledger::open(dir.path()).unwrap();
        let automatic: i64 = ledger.conn.query_row("PRAGMA wal_autocheckpoint", [], |r| r.get(0)).unwrap();
        assert_eq!(automatic, 0);
    }

    #[test]
    fn a_checkpoint_of_a_missing_store_is_logged_not_created() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gone.db");
        assert_eq!(Checkpoint::start(&path).finish(), None);
        assert!(!path.exists(), "a checkpoint never creates a store");
    }
}
