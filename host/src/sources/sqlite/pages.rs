//! One source's read of a database on one handle, page after page, with no
//! transaction held between two pages.
//!
//! It owns keeping the handle across pages (opened once, its statements
//! prepared once a read through the statement cache, its page cache kept:
//! SQLite itself checks at each read's start, by the WAL index or the file
//! change counter, whether the database changed since) and the per-page
//! rules a one-page read ([`super::with_db`]) has always had: each page has
//! its own wall-clock budget, and a page read `immutable=1` while a `-wal`
//! appeared is read again in the normal mode. A quiescent (`immutable=1`)
//! handle is kept only while its file is seen unchanged: SQLite cannot see
//! a change under it, so before each page the file's [`Stamp`] (device,
//! inode, size, modification and change times) is taken again, and any
//! difference (a writer that came, wrote, checkpointed and left no `-wal`
//! behind) opens the handle afresh. A file modified less than [`SETTLED`]
//! before it was opened is never kept (a later write may fall in the same
//! timestamp tick: git's "racily clean" rule); its pages open afresh, as
//! every quiescent page did before. It never holds a read transaction
//! between pages (each page's statement runs to its end and is reset, so a
//! checkpoint is never blocked), and never writes.

use std::path::Path;
use std::time::{Duration, SystemTime};

use rusqlite::Connection;

use super::{OpenMode, QUERY_BUDGET, explain_interrupt, open, wal_path};
use crate::base::harden::rearm;

/// How long before a quiescent handle's open its file must have last been
/// modified for the handle to be kept across pages.
pub const SETTLED: Duration = Duration::from_secs(2);

/// What a change to a file moves, from its metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    modified: Option<SystemTime>,
    changed: (i64, i64),
}

impl Stamp {
    fn of(path: &Path) -> Option<Stamp> {
        let m = std::fs::symlink_metadata(path).ok()?;
        #[cfg(unix)]
        let (dev, ino, changed) = {
            use std::os::unix::fs::MetadataExt;
            (m.dev(), m.ino(), (m.ctime(), m.ctime_nsec()))
        };
        // Elsewhere the size and modification time alone.
        #[cfg(not(unix))]
        let (dev, ino, changed) = (0, 0, (0, 0));
        Some(Stamp { dev, ino, len: m.len(), modified: m.modified().ok(), changed })
    }

    /// Whether the file was last modified at least [`SETTLED`] before `now`.
    fn settled(&self, now: SystemTime) -> bool {
        self.modified.is_some_and(|m| now.duration_since(m).is_ok_and(|d| d >= SETTLED))
    }
}

/// A handle on one database for the pages of one read.
pub struct PagedRead<'p> {
    path: &'p Path,
    conn: Connection,
    mode: OpenMode,
    /// A private copy's folder (an orphaned `-wal`), kept while the handle is.
    _copy: Option<tempfile::TempDir>,
    /// Whether a page has run on this handle.
    used: bool,
    /// A quiescent handle's file as it was just before the open, when it
    /// had settled: the handle is kept while the file still has it.
    stamp: Option<Stamp>,
    /// Handles opened by this read (the first included).
    opens: usize,
}

impl<'p> PagedRead<'p> {
    pub fn open(path: &'p Path) -> rusqlite::Result<PagedRead<'p>> {
        let stamp = Stamp::of(path).filter(|s| s.settled(SystemTime::now()));
        let (conn, mode, copy) = open(path)?;
        let stamp = stamp.filter(|_| mode == OpenMode::Quiescent);
        Ok(PagedRead { path, conn, mode, _copy: copy, used: false, stamp, opens: 1 })
    }

    /// Handles opened by this read so far: one, unless a quiescent file
    /// changed (or had not settled) or a writer appeared.
    pub fn opens(&self) -> usize {
        self.opens
    }

    fn reopen(&mut self) -> rusqlite::Result<()> {
        let opens = self.opens;
        *self = PagedRead::open(self.path)?;
        self.opens = opens + 1;
        Ok(())
    }

    /// Runs one page's `read`, on a fresh budget.
    pub fn run<T>(&mut self, read: impl Fn(&Connection) -> rusqlite::Result<T>) -> rusqlite::Result<T> {
        if self.used && self.mode == OpenMode::Quiescent && (self.stamp.is_none() || self.stamp != Stamp::of(self.path))
        {
            self.reopen()?;
        }
        self.used = true;
        rearm(&mut self.conn, QUERY_BUDGET)?;
        let result = read(&self.conn).map_err(explain_interrupt);
        if self.mode == OpenMode::Quiescent && wal_path(self.path).exists() {
            // A writer appeared: what immutable read may be stale. The new
            // handle (normal mode now) is kept for the pages after this one.
            self.reopen()?;
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
        let db = quiescent(dir.path());
        let mut read = PagedRead::open(&db).unwrap();
        assert_eq!(read.mode, OpenMode::Quiescent);
        assert_eq!(read.run(count).unwrap(), 1);
        let writer = Connection::open(&db).unwrap();
        writer.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
        writer.execute("INSERT INTO t VALUES (2)", []).unwrap();
        assert_eq!(read.run(count).unwrap(), 2, "the row only in the -wal is read");
        assert_eq!(read.mode, OpenMode::ReadOnly);
    }

    /// Sets `path`'s modification time an hour back, so its handle may be kept.
    fn settle(path: &Path) {
        let hour_ago = SystemTime::now() - Duration::from_secs(3600);
        std::fs::File::options().write(true).open(path).unwrap().set_modified(hour_ago).unwrap();
    }

    /// A WAL database with no `-wal`, of one row.
    fn quiescent(dir: &Path) -> std::path::PathBuf {
        let db = dir.join("m.db");
        let c = Connection::open(&db).unwrap();
        c.pragma_update(None, "journal_mode", "WAL").unwrap();
        c.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1);").unwrap();
        drop(c);
        assert!(!wal_path(&db).exists(), "the last close checkpointed and removed the -wal");
        db
    }

    /// A quiescent file that has settled keeps its handle across pages: one
    /// open for the whole read, not one a page.
    #[test]
    fn a_settled_quiescent_handle_is_kept_across_pages() {
        let dir = tempfile::tempdir().unwrap();
        let db = quiescent(dir.path());
        settle(&db);
        assert_eq!(opens_over_three_pages(&db), 1);
    }

    /// The handles a read of three pages of `db` opened.
    fn opens_over_three_pages(db: &Path) -> usize {
        let mut read = PagedRead::open(db).unwrap();
        assert_eq!(read.mode, OpenMode::Quiescent);
        for _ in 0..3 {
            assert_eq!(read.run(count).unwrap(), 1);
        }
        read.opens()
    }

    /// Between two pages a writer comes, commits and goes, its last close
    /// checkpointing and removing the `-wal`: no `-wal` says so, but the
    /// file's stamp moved, so the kept immutable handle (whose page cache
    /// holds the old pages) is opened afresh and the new row read.
    #[test]
    fn a_quiescent_file_written_between_pages_with_no_wal_left_is_read_afresh() {
        let dir = tempfile::tempdir().unwrap();
        let db = quiescent(dir.path());
        settle(&db);
        let mut read = PagedRead::open(&db).unwrap();
        assert_eq!(read.run(count).unwrap(), 1);
        let writer = Connection::open(&db).unwrap();
        writer.execute("INSERT INTO t VALUES (2)", []).unwrap();
        drop(writer);
        assert!(!wal_path(&db).exists());
        assert_eq!(read.run(count).unwrap(), 2, "the row the writer checkpointed in is read");
        assert_eq!(read.mode, OpenMode::Quiescent);
        assert_eq!(read.opens(), 2);
    }

    /// A file modified just before the open may be modified again within
    /// the same timestamp tick: its handle is never kept.
    #[test]
    fn a_quiescent_file_modified_just_before_the_open_opens_afresh_each_page() {
        let dir = tempfile::tempdir().unwrap();
        let db = quiescent(dir.path());
        assert_eq!(opens_over_three_pages(&db), 3);
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
