//! Opening an application's SQLite database without ever writing, creating
//! or locking anything beside it.
//!
//! The journal mode decides how it is opened; the database header says which
//! (bytes 18-19: 2 for WAL, 1 for a rollback journal). A **rollback-journal**
//! database (an outbox often is one) is opened `SQLITE_OPEN_READONLY` with its
//! normal shared lock: the application writing it in place takes the
//! exclusive lock to commit, so a read never sees a page mid-write, and a
//! reader in rollback mode creates no file. A **WAL** database with a `-wal`
//! file (the application is running, or stopped without a final checkpoint)
//! is opened `SQLITE_OPEN_READONLY`: the application's own `-wal` and `-shm`
//! are used and the newest rows, which live only in the `-wal`, are read. A
//! WAL database with no `-wal` is quiescent and wholly in its main file; a
//! read-only WAL connection would then create `-wal` and `-shm` files in the
//! data dir, so it (and only it) is opened `immutable=1` instead, which reads
//! the main file and creates nothing. (The scanner spec says "never
//! immutable" because immutable skips the `-wal`; with no `-wal` there is
//! nothing to skip.) If a `-wal` appears while such a read runs, the caller
//! reads again in the normal mode. A `-wal`
//! without its `-shm` (a writer that crashed, or a cleaned-up `-shm`) still
//! holds committed rows, but reading it in place would create the `-shm`: the
//! database and its `-wal` are then copied to a private temporary folder and
//! read there.
//!
//! The file is untrusted, its schema included: every connection is hardened
//! before its first query ([`harden`]): defensive mode, an untrusted schema
//! (functions with side effects and virtual tables the schema names are not
//! run from views or triggers), a cap on the length of any value or
//! statement, no `ATTACH`, and a wall-clock budget per query enforced by a
//! progress handler, so a recursive view or an expensive generated column
//! costs that source one error, not a hang. Before SQLite opens anything, the
//! database, its `-wal` and its `-shm` must be regular files reached without a
//! symbolic link ([`safe_fs::check_regular`]): SQLite opening a FIFO
//! would block.
//!
//! The copy made for an orphaned `-wal` is bounded: both files together at
//! most [`MAX_COPY_BYTES`], and only when the temporary folder has twice that
//! room to spare. It lives in a private folder named after the process,
//! removed when the read returns; a folder left by a process that crashed is
//! removed by the next read that makes a copy.
//!
//! SQLite run as root would `fchown` the application's `-wal` and `-shm` on
//! every open (to their own owner: only their change time moves); that one
//! system call is replaced by one that changes nothing ([`keep_owner`]).
//!
//! A read of many pages keeps one handle ([`pages`]). The sources over
//! SQLite databases live beside it: `messages.db` ([`messages`], its rows'
//! JSON classified by [`activity`]), `runtime.db`'s queue ([`queue`]) and configured read-only queries
//! ([`query`]).

mod activity;
mod keep_owner;
pub mod messages;
#[cfg(test)]
mod messages_oracle;
pub mod pages;
pub mod query;
pub mod queue;

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

pub use crate::base::harden::{MAX_SQL_BYTES, MAX_VALUE_BYTES, harden};
use crate::sources::files::safe_fs;

/// The wall-clock budget of one query (one page) on a watched database.
pub const QUERY_BUDGET: Duration = Duration::from_secs(10);
/// The database and its orphaned `-wal` together, at most, for a copy.
pub const MAX_COPY_BYTES: u64 = 1 << 30;
/// The prefix of the private folders holding copies.
const COPY_PREFIX: &str = "sentinel-sqlite-";

/// How a database was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// `SQLITE_OPEN_READONLY`, sharing the writer's `-wal` and `-shm`.
    ReadOnly,
    /// `immutable=1`: a WAL database with no `-wal`, so nothing could be skipped.
    Quiescent,
    /// `SQLITE_OPEN_READONLY` on a rollback-journal database, under its
    /// normal shared lock.
    Shared,
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

/// Whether the database's header records WAL mode (its read and write
/// versions, bytes 18 and 19, are 2). A file shorter than the header (a
/// database not yet written) is not WAL.
fn header_says_wal(path: &Path) -> rusqlite::Result<bool> {
    use std::io::Read;
    let mut header = [0u8; 20];
    let file = safe_fs::open_regular(path).map_err(|e| cant_open(format!("{}: {e}", path.display())))?;
    let mut read = 0;
    let mut file = file.take(header.len() as u64);
    while read < header.len() {
        match file.read(&mut header[read..]) {
            Ok(0) => break,
            Ok(n) => read += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(cant_open(format!("{}: {e}", path.display()))),
        }
    }
    Ok(read == header.len() && header[18] == 2 && header[19] == 2)
}

fn cant_open(message: String) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CANTOPEN), Some(message))
}

/// Whether `path` (a database or one of its companions) exists, refusing
/// anything that is not a regular file reached without a link.
fn present(path: &Path) -> rusqlite::Result<bool> {
    safe_fs::check_regular(path).map_err(|e| cant_open(format!("{}: {e}", path.display())))
}

/// Whether a folder in the temporary folder is a copy left by a process of
/// ours that is gone.
fn stale_copy(entry: &std::fs::DirEntry) -> bool {
    let name = entry.file_name();
    let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(COPY_PREFIX)) else { return false };
    let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else { return false };
    if pid == std::process::id() {
        return false;
    }
    if cfg!(target_os = "linux") {
        return !Path::new("/proc").join(pid.to_string()).exists();
    }
    // Elsewhere, without a cheap liveness test: older than a day.
    entry.metadata().and_then(|m| m.modified()).is_ok_and(|t| t.elapsed().is_ok_and(|e| e.as_secs() > 86_400))
}

/// Removes copies left by processes that crashed (others' users' folders
/// cannot be removed: the temporary folder is sticky).
fn sweep_stale_copies(tmp: &Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else { return };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) && stale_copy(&entry) {
            // remove_dir_all does not follow links inside the folder.
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Bytes free for an unprivileged user under `dir`, when the platform says.
#[cfg(unix)]
fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: `c` is a valid NUL-terminated path and `st` a writable statvfs.
    let rc = unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: statvfs returned 0, so it filled `st`.
    let st = unsafe { st.assume_init() };
    #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
    Some((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

#[cfg(not(unix))]
fn free_bytes(_dir: &Path) -> Option<u64> {
    None
}

/// Copies at most `cap` bytes of a regular file; more is an error.
fn copy_capped(from: &Path, to: &Path, cap: u64) -> std::io::Result<u64> {
    use std::io::Read;
    let src = safe_fs::open_regular(from).map_err(std::io::Error::other)?;
    let mut dst = std::fs::File::create_new(to)?;
    let n = std::io::copy(&mut src.take(cap + 1), &mut dst)?;
    if n > cap {
        return Err(std::io::Error::other(format!("{} grew past the copy cap while copied", from.display())));
    }
    Ok(n)
}

/// Copies the database and its orphaned `-wal` into a private folder, bounded.
fn copy_orphan(path: &Path, wal: &Path) -> Result<(tempfile::TempDir, PathBuf), String> {
    let size = |p: &Path| std::fs::symlink_metadata(p).map(|m| m.len()).map_err(|e| format!("{}: {e}", p.display()));
    let total = size(path)?.saturating_add(size(wal)?);
    if total > MAX_COPY_BYTES {
        return Err(format!(
            "the database and its orphaned -wal hold {total} bytes, over the copy cap of {MAX_COPY_BYTES} bytes"
        ));
    }
    let tmp = std::env::temp_dir();
    sweep_stale_copies(&tmp);
    if let Some(free) = free_bytes(&tmp)
        && free < total.saturating_mul(2)
    {
        return Err(format!("{} has {free} bytes free, too few to copy {total} bytes", tmp.display()));
    }
    let dir = tempfile::Builder::new()
        .prefix(&format!("{COPY_PREFIX}{}-", std::process::id()))
        .tempdir_in(&tmp)
        .map_err(|e| format!("cannot make a private folder in {}: {e}", tmp.display()))?;
    let db = dir.path().join("db");
    let copied = copy_capped(path, &db, MAX_COPY_BYTES)
        .and_then(|n| copy_capped(wal, &wal_path(&db), MAX_COPY_BYTES.saturating_sub(n)));
    copied.map_err(|e| format!("cannot copy the database and its orphaned -wal to read them: {e}"))?;
    Ok((dir, db))
}

/// Opens `path` read-only, choosing the mode by its journal mode and whether
/// a `-wal` (and its `-shm`) exist. A copy lives as long as the returned folder.
pub fn open(path: &Path) -> rusqlite::Result<(Connection, OpenMode, Option<tempfile::TempDir>)> {
    keep_owner::install();
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_NOFOLLOW;
    let wal = wal_path(path);
    if !present(path)? {
        return Err(cant_open(format!("{}: not found", path.display())));
    }
    let (has_wal, has_shm) = (present(&wal)?, present(&shm_path(path))?);
    if has_wal && !has_shm {
        let (dir, db) = copy_orphan(path, &wal).map_err(cant_open)?;
        let mut conn = Connection::open_with_flags(&db, flags)?;
        harden(&mut conn, QUERY_BUDGET)?;
        return Ok((conn, OpenMode::Copied, Some(dir)));
    }
    let (mut conn, mode) = if has_wal {
        (Connection::open_with_flags(path, flags)?, OpenMode::ReadOnly)
    } else if !header_says_wal(path)? {
        (Connection::open_with_flags(path, flags)?, OpenMode::Shared)
    } else {
        (Connection::open_with_flags(immutable_uri(path), flags | OpenFlags::SQLITE_OPEN_URI)?, OpenMode::Quiescent)
    };
    harden(&mut conn, QUERY_BUDGET)?;
    Ok((conn, mode, None))
}

/// Names the budget when the progress handler stopped a query.
fn explain_interrupt(e: rusqlite::Error) -> rusqlite::Error {
    match e {
        rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::OperationInterrupted => {
            let budget = QUERY_BUDGET.as_secs();
            rusqlite::Error::SqliteFailure(
                f,
                Some(format!("the query ran past its wall-clock budget of {budget} s and was stopped")),
            )
        }
        e => e,
    }
}

/// Runs `read` on a fresh read-only handle, closed on return. A quiescent
/// read is repeated in the normal mode if a writer appeared meanwhile.
/// (A read of one page; a read of many keeps its handle: [`pages::PagedRead`].)
pub fn with_db<T>(path: &Path, read: impl Fn(&Connection) -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    pages::PagedRead::open(path)?.run(read)
}

/// Refuses a view or a virtual table standing in for a table the host reads
/// by name (`messages`, `assignment_events`): only an ordinary table's rows
/// are the application's data, and a view is code the schema's author runs in
/// our process. A configured query may read views (its author is the
/// operator); the query budget bounds them all the same.
pub fn require_table(conn: &Connection, table: &str) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached("SELECT type, sql FROM sqlite_schema WHERE name = ?1 COLLATE NOCASE")?;
    let mut rows = stmt.query([table])?;
    let Some(row) = rows.next()? else {
        // A missing table is SQLite's own "no such table" error, from the query.
        return Ok(());
    };
    let (kind, sql): (String, Option<String>) = (row.get(0)?, row.get(1)?);
    let is_virtual = sql.is_some_and(|s| {
        let words: Vec<&str> = s.split_whitespace().take(2).collect();
        words.len() == 2 && words[1].eq_ignore_ascii_case("VIRTUAL")
    });
    let what = match kind.as_str() {
        "table" if !is_virtual => return Ok(()),
        "table" => "a virtual table".to_owned(),
        "view" => "a view".to_owned(),
        other => format!("a {other}"),
    };
    Err(rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ERROR),
        Some(format!("`{table}` is {what}; only an ordinary table is read as the application's data")),
    ))
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
    fn a_rollback_journal_database_is_read_under_its_shared_lock_creating_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("outbox.db");
        let writer = Connection::open(&db).unwrap();
        writer.execute_batch("PRAGMA journal_mode=DELETE; CREATE TABLE t(x); INSERT INTO t VALUES (1);").unwrap();
        writer.busy_timeout(Duration::ZERO).unwrap();
        let before = listing(dir.path());
        assert_eq!(open(&db).unwrap().1, OpenMode::Shared, "never immutable: the writer writes in place");
        // While a read is inside its query, the writer cannot commit: the
        // read holds the shared lock (immutable=1 would hold none).
        let blocked = with_db(&db, |c| {
            let mut stmt = c.prepare("SELECT x FROM t")?;
            let mut rows = stmt.query([])?;
            let _first = rows.next()?;
            Ok(writer.execute("INSERT INTO t VALUES (2)", []).map_err(|e| e.to_string()))
        })
        .unwrap();
        assert!(blocked.unwrap_err().contains("locked"), "the commit waits for the read");
        writer.execute("INSERT INTO t VALUES (3)", []).unwrap();
        let n: i64 = with_db(&db, |c| c.query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0))).unwrap();
        assert_eq!(n, 2);
        assert_eq!(listing(dir.path()), before, "no file created beside the database");
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

#[cfg(all(test, unix))]
mod hardening_tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_recursive_query_is_stopped_by_the_wall_clock_budget() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("h.db");
        Connection::open(&db)
            .unwrap()
            .execute_batch(
                "CREATE VIEW forever AS WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT x FROM n;",
            )
            .unwrap();
        let mut conn = Connection::open_with_flags(&db, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
        harden(&mut conn, Duration::from_millis(200)).unwrap();
        let started = Instant::now();
        let err = conn.query_row("SELECT count(*) FROM forever", [], |r| r.get::<_, i64>(0)).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
        let err = explain_interrupt(err);
        assert!(err.to_string().contains("wall-clock budget"), "{err}");
    }

    #[test]
    fn defensive_mode_and_the_length_limit_hold() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("h.db");
        Connection::open(&db).unwrap().execute_batch("CREATE TABLE t(x)").unwrap();
        let mut conn = Connection::open_with_flags(&db, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
        harden(&mut conn, QUERY_BUDGET).unwrap();
        let err = conn
            .query_row(&format!("SELECT zeroblob({})", MAX_VALUE_BYTES as i64 + 1), [], |r| r.get::<_, Vec<u8>>(0))
            .unwrap_err();
        assert!(err.to_string().contains("too big"), "{err}");
        assert!(conn.execute_batch("ATTACH ':memory:' AS other").is_err(), "no ATTACH");
        use rusqlite::config::DbConfig;
        assert!(conn.db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE).unwrap());
        assert!(!conn.db_config(DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA).unwrap());
    }

    #[test]
    fn a_fifo_or_a_link_in_place_of_a_database_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("m.db");
        assert!(std::process::Command::new("mkfifo").arg(&db).status().unwrap().success());
        let err = with_db(&db, |c| c.query_row("SELECT 1", [], |r| r.get::<_, i64>(0))).unwrap_err();
        assert!(err.to_string().contains("a FIFO"), "{err}");
        std::fs::remove_file(&db).unwrap();
        Connection::open(dir.path().join("real.db")).unwrap().execute_batch("CREATE TABLE t(x)").unwrap();
        std::os::unix::fs::symlink(dir.path().join("real.db"), &db).unwrap();
        let err = with_db(&db, |c| c.query_row("SELECT 1", [], |r| r.get::<_, i64>(0))).unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
    }

    #[test]
    fn a_copy_left_by_a_crashed_process_is_swept() {
        let tmp = tempfile::tempdir().unwrap();
        // No process has this id on Linux (pid_max is at most 2^22).
        let stale = tmp.path().join(format!("{COPY_PREFIX}99999999-abc"));
        std::fs::create_dir(&stale).unwrap();
        std::fs::write(stale.join("db"), b"x").unwrap();
        let mine = tmp.path().join(format!("{COPY_PREFIX}{}-abc", std::process::id()));
        std::fs::create_dir(&mine).unwrap();
        let other = tmp.path().join("unrelated-99999999");
        std::fs::create_dir(&other).unwrap();
        sweep_stale_copies(tmp.path());
        assert!(!stale.exists() || !cfg!(target_os = "linux"));
        assert!(mine.exists() && other.exists());
    }
}
