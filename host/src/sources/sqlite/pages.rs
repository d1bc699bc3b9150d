//! One source's read of a database on one handle, page after page, with no
//! transaction held between two pages.
//!
//! It owns keeping the handle across pages (opened once, its statements
//! prepared once a read through the statement cache, its page cache kept:
//! SQLite itself checks at each read's start, by the WAL index or the file
//! change counter, whether the database changed since) and the per-page
//! rules a one-page read ([`super::with_db`]) has always had: each page has its own wall-clock budget, and
//! a page read `immutable=1` while a `-wal` appeared is read again in the
//! normal mode. A quiescent (`immutable=1`) handle is the exception that is
//! not kept: SQLite cannot see a change under it, so each page opens afresh,
//! as every page did before. It never holds a read transaction between pages
//! (each page's statement runs to its end and is reset, so a checkpoint is
//! never blocked), and never writes.

use std::path::Path;

use rusqlite::Connection;

use super::{OpenMode, QUERY_BUDGET, explain_interrupt, open, wal_path};
use crate::base::harden::rearm;

/// A handle on one database for the pages of one read.
pub struct PagedRead<'p> {
    path: &'p Path,
    conn: Connection,
    mode: OpenMode,
    /// A private copy's folder (an orphaned `-wal`), kept while the handle is.
    _copy: Option<tempfile::TempDir>,
    /// Whether a page has run on this handle.
    used: bool,
}

impl<'p> PagedRead<'p> {
    pub fn open(path: &'p Path) -> rusqlite::Result<PagedRead<'p>> {
        let (conn, mode, copy) = open(path)?;
        Ok(PagedRead { path, conn, mode, _copy: copy, used: false })
    }

    /// Runs one page's `read`, on a fresh budget.
    pub fn run<T>(&mut self, read: impl Fn(&Connection) -> rusqlite::Result<T>) -> rusqlite::Result<T> {
        if self.used && self.mode == OpenMode::Quiescent {
            *self = PagedRead::open(self.path)?;
        }
        self.used = true;
        rearm(&mut self.conn, QUERY_BUDGET)?;
        let result = read(&self.conn).map_err(explain_interrupt);
        if self.mode == OpenMode::Quiescent && wal_path(self.path).exists() {
            // A writer appeared: what immutable read may be stale. The new
            // handle (normal mode now) is kept for the pages after this one.
            *self = PagedRead::open(self.path)?;
            self.used = true;
            return read(&self.conn).map_err(explain_interrupt);
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn count(c: &Connection) -> rusqlite::Result<i64> {
        c.prepare_cached("SELECT COUNT(*) FROM t")?.query_row([], |r| r.get(0))
    }

    /// Between two pages on one handle, a writer commits and a full
    /// checkpoint (TRUNCATE: it must wait for every reader) completes, and
    /// the next page sees the new rows: the handle kept holds no snapshot.
    #[test]
    fn a_kept_handle_holds_no_transaction_between_pages_and_sees_new_rows() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("m.db");
        let writer = Connection::open(&db).unwrap();
        writer.pragma_update(None, "journal_mode", "WAL").unwrap();
        writer.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1), (2);").unwrap();
        writer.busy_timeout(Duration::ZERO).unwrap();
        let mut read = PagedRead::open(&db).unwrap();
        assert_eq!(read.mode, OpenMode::ReadOnly);
        assert_eq!(read.run(count).unwrap(), 2);
        writer.execute("INSERT INTO t VALUES (3)", []).unwrap();
        let (busy, _, _): (i64, i64, i64) =
            writer.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap();
        assert_eq!(busy, 0, "the checkpoint was not blocked by the kept handle");
        assert_eq!(read.run(count).unwrap(), 3);
    }

    /// A quiescent database (WAL, no `-wal`) that a writer opens between two
    /// pages is read in the normal mode from then on, and its new rows seen.
    #[test]
    fn a_writer_appearing_between_pages_moves_the_read_out_of_immutable() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("m.db");
        {
            let c = Connection::open(&db).unwrap();
            c.pragma_update(None, "journal_mode", "WAL").unwrap();
            c.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1);").unwrap();
        }
        let mut read = PagedRead::open(&db).unwrap();
        assert_eq!(read.mode, OpenMode::Quiescent);
        assert_eq!(read.run(count).unwrap(), 1);
        let writer = Connection::open(&db).unwrap();
        writer.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
        writer.execute("INSERT INTO t VALUES (2)", []).unwrap();
        assert_eq!(read.run(count).unwrap(), 2, "the row only in the -wal is read");
        assert_eq!(read.mode, OpenMode::ReadOnly);
    }

    /// Each page has a budget of its own on a kept handle: re-armed, a
    /// query runs after the first budget would have run out; not re-armed, it
    /// is stopped.
    #[test]
    fn each_page_of_a_kept_handle_has_its_own_budget() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("m.db");
        Connection::open(&db).unwrap().execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1);").unwrap();
        let slow =
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000) SELECT COUNT(*) FROM n";
        let budget = Duration::from_millis(500);
        let mut conn = Connection::open(&db).unwrap();
        crate::base::harden::harden(&mut conn, budget).unwrap();
        std::thread::sleep(budget + Duration::from_millis(50));
        assert!(conn.query_row(slow, [], |r| r.get::<_, i64>(0)).is_err(), "the first budget ran out");
        rearm(&mut conn, budget).unwrap();
        assert_eq!(conn.query_row(slow, [], |r| r.get::<_, i64>(0)).unwrap(), 100_000);
    }
}
