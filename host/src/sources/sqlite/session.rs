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
pub struct Session<'p> {
    path: &'p Path,
    conn: Connection,
    mode: OpenMode,
    /// A private copy's folder (an orphaned `-wal`), kept while the handle is.
    _copy: Option<tempfile::TempDir>,
    /// Whether a page has run on this handle.
    used: bool,
}

impl<'p> Session<'p> {
    pub fn open(path: &'p Path) -> rusqlite::Result<Session<'p>> {
        let (conn, mode, copy) = open(path)?;
        Ok(Session { path, conn, mode, _copy: copy, used: false })
    }

    /// Runs one page's `read`, on a fresh budget.
    pub fn run<T>(&mut self, read: impl Fn(&Connection) -> rusqlite::Result<T>) -> rusqlite::Result<T> {
        if self.used && self.mode == OpenMode::Quiescent {
            *self = Session::open(self.path)?;
        }
        self.used = true;
        rearm(&mut self.conn, QUERY_BUDGET)?;
        let result = read(&self.conn).map_err(explain_interrupt);
        if self.mode == OpenMode::Quiescent && wal_path(self.path).exists() {
            // A writer appeared: what immutable read may be stale. The new
            // handle (normal mode now) is kept for the pages after this one.
            *self = Session::open(self.path)?;
            self.used = true;
            return read(&self.conn).map_err(explain_interrupt);
        }
        result
    }
}
