//! Opening an application's SQLite database without ever writing, creating
//! or locking anything beside it.
//!
//! When the database has a `-wal` file (the application is running, or
//! stopped without a final checkpoint), it is opened `SQLITE_OPEN_READONLY`:
//! the application's own `-wal` and `-shm` are used and the newest rows,
//! which live only in the `-wal`, are read. When it has no `-wal`, the
//! database is quiescent and wholly in its main file; a read-only WAL
//! connection would then create `-wal` and `-shm` files in the data dir, so
//! it is opened `immutable=1` instead, which reads the main file and creates
//! nothing. (The scanner spec says "never immutable" because immutable skips
//! the `-wal`; with no `-wal` there is nothing to skip.) If a `-wal` appears
//! while such a read runs, the caller reads again in the normal mode. A `-wal`
//! without its `-shm` (a writer that crashed, or a cleaned-up `-shm`) still
//! holds committed rows, but reading it in place would create the `-shm`: the
//! database and its `-wal` are then copied to a private temporary folder and
//! read there.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

/// How a database was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// `SQLITE_OPEN_READONLY`, sharing the writer's `-wal` and `-shm`.
    ReadOnly,
    /// `immutable=1`: no `-wal` existed, so nothing could be skipped.
    Quiescent,
    /// A private copy of the database and its orphaned `-wal`.
    Copied,
}

fn shm_path(db: &Path) -> PathBuf {
    let mut s = db.as_os_str().to_owned();
    s.push("-shm");
    PathBuf::from(s)
}

pub fn wal_path(db: &Path) -> PathBuf {
    let mut s = db.as_os_str().to_owned();
    s.push("-wal");
    PathBuf::from(s)
}

/// A `file:` URI for `path` with `immutable=1`, percent-encoding what a URI
/// filename may not hold.
fn immutable_uri(path: &Path) -> String {
    let mut uri = String::from("file:");
    for b in path.to_string_lossy().bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            uri.push(b as char);
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri.push_str("?immutable=1");
    uri
}

/// Opens `path` read-only, choosing the mode by whether a `-wal` (and its
/// `-shm`) exist. A copy lives as long as the returned folder.
pub fn open(path: &Path) -> rusqlite::Result<(Connection, OpenMode, Option<tempfile::TempDir>)> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let wal = wal_path(path);
    if wal.exists() && !shm_path(path).exists() {
        let copy = || -> std::io::Result<(tempfile::TempDir, PathBuf)> {
            let dir = tempfile::Builder::new().prefix("sentinel-sqlite-").tempdir()?;
            let db = dir.path().join("db");
            std::fs::copy(path, &db)?;
            std::fs::copy(&wal, wal_path(&db))?;
            Ok((dir, db))
        };
        let (dir, db) = copy().map_err(|e| {
            rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CANTOPEN),
                Some(format!("cannot copy the database and its orphaned -wal to read them: {e}")),
            )
        })?;
        let conn = Connection::open_with_flags(&db, flags)?;
        conn.busy_timeout(Duration::from_millis(250))?;
        return Ok((conn, OpenMode::Copied, Some(dir)));
    }
    let (conn, mode) = if wal.exists() {
        (Connection::open_with_flags(path, flags)?, OpenMode::ReadOnly)
    } else {
        (Connection::open_with_flags(immutable_uri(path), flags | OpenFlags::SQLITE_OPEN_URI)?, OpenMode::Quiescent)
    };
    conn.busy_timeout(Duration::from_millis(250))?;
    Ok((conn, mode, None))
}

/// Runs `read` on a fresh read-only handle, closed on return. A quiescent
/// read is repeated in the normal mode if a writer appeared meanwhile.
pub fn with_db<T>(path: &Path, read: impl Fn(&Connection) -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let (conn, mode, copy) = open(path)?;
    let result = read(&conn);
    drop(conn);
    drop(copy);
    if mode == OpenMode::Quiescent && wal_path(path).exists() {
        let (conn, _, _copy) = open(path)?;
        return read(&conn);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing(dir: &Path) -> Vec<String> {
        let mut v: Vec<_> =
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        v.sort();
        v
    }

    #[test]
    fn a_quiescent_wal_database_is_read_without_creating_files() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("odd name?#%.db");
        {
            let c = Connection::open(&db).unwrap();
            c.pragma_update(None, "journal_mode", "WAL").unwrap();
            c.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1), (2);").unwrap();
        }
        let before = listing(dir.path());
        let n: i64 = with_db(&db, |c| c.query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0))).unwrap();
        assert_eq!(n, 2);
        assert_eq!(listing(dir.path()), before);
    }

    #[test]
    fn an_orphaned_wal_is_read_from_a_copy_without_creating_its_shm() {
        let live = tempfile::tempdir().unwrap();
        let crashed = tempfile::tempdir().unwrap();
        let db = crashed.path().join("m.db");
        {
            let w = Connection::open(live.path().join("m.db")).unwrap();
            w.pragma_update(None, "journal_mode", "WAL").unwrap();
            w.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
            w.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1), (2), (3);").unwrap();
            // What a writer that crashed now leaves: the main file and the
            // -wal holding every row, no -shm.
            std::fs::copy(live.path().join("m.db"), &db).unwrap();
            std::fs::copy(wal_path(&live.path().join("m.db")), wal_path(&db)).unwrap();
        }
        let before = listing(crashed.path());
        let n: i64 = with_db(&db, |c| c.query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0))).unwrap();
        assert_eq!(n, 3, "the rows only in the orphaned -wal are read");
        assert_eq!(listing(crashed.path()), before, "no -shm created");
    }

    #[test]
    fn rows_only_in_the_wal_are_read_when_a_writer_is_live() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("m.db");
        let w = Connection::open(&db).unwrap();
        w.pragma_update(None, "journal_mode", "WAL").unwrap();
        w.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
        w.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1), (2), (3);").unwrap();
        let n: i64 = with_db(&db, |c| c.query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0))).unwrap();
        assert_eq!(n, 3);
        // The reader can never write.
        let err = with_db(&db, |c| c.execute("INSERT INTO t VALUES (4)", [])).unwrap_err();
        assert!(err.to_string().contains("readonly"), "{err}");
    }
}
