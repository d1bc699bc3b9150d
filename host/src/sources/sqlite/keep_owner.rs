//! SQLite's unix VFS, run as root, `fchown`s every `-wal` and `-shm` it
//! opens to the database file's owner, even when only reading: the owner
//! stays the same, but the application's files change (their change time
//! moves), and the fast path's stamp, which counts a change time, saw a new
//! `-wal` after every scan of a live WAL database and never let a scan stop
//! early.
//!
//! It owns replacing that one system call of SQLite's, once per process and
//! before the first database is opened, with one that changes nothing
//! (SQLite's own `xSetSystemCall`, the interface its test suite uses for
//! this). It never replaces any other call, and never chowns anything: the
//! host creates no file beside a database, so there is no owner to fix.

use std::sync::Once;

/// `fchown` that leaves the file as it is, and says it succeeded.
unsafe extern "C" fn keep_owner(_fd: libc::c_int, _uid: libc::uid_t, _gid: libc::gid_t) -> libc::c_int {
    0
}

/// Installs [`keep_owner`] in place of SQLite's `fchown`, once.
pub(super) fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        type Fchown = unsafe extern "C" fn(libc::c_int, libc::uid_t, libc::gid_t) -> libc::c_int;
        // SAFETY: `sqlite3_vfs_find(NULL)` initialises SQLite and returns
        // the default VFS (static, never freed) or NULL. The unix VFS's
        // system-call table stores a generic function pointer per name and
        // calls the `fchown` entry with `fchown`'s own signature, which
        // `keep_owner` has, so the transmute only erases the type the table
        // stores. It is set before this process opens its first database
        // through this module (callers of `open` come after).
        unsafe {
            let vfs = rusqlite::ffi::sqlite3_vfs_find(std::ptr::null());
            if vfs.is_null() {
                return;
            }
            if let Some(set) = (*vfs).xSetSystemCall {
                let call = std::mem::transmute::<Fchown, unsafe extern "C" fn()>(keep_owner as Fchown);
                set(vfs, c"fchown".as_ptr(), Some(call));
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use crate::base::file_stamp;

    /// As root (CI runs so), a read of a live WAL database changed its
    /// `-wal`'s and `-shm`'s change time before this, and with it the fast
    /// path's stamp of the `-wal` (`base::file_stamp`): every scan was full.
    #[test]
    fn a_read_as_root_leaves_the_live_wal_and_shm_as_they_were() {
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!(
                "SKIPPED: a_read_as_root_leaves_the_live_wal_and_shm_as_they_were: SQLite chowns nothing unless root"
            );
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("app.db");
        let writer = rusqlite::Connection::open(&db).unwrap();
        writer.pragma_update(None, "journal_mode", "wal").unwrap();
        writer.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1);").unwrap();
        let (wal, shm) = (super::super::wal_path(&db), super::super::shm_path(&db));
        let before = (file_stamp::line(&wal), file_stamp::line(&shm));
        // The change time moves by the kernel's clock tick (at most 10 ms).
        std::thread::sleep(std::time::Duration::from_millis(20));
        let (conn, mode, _) = super::super::open(&db).unwrap();
        assert_eq!(mode, super::super::OpenMode::ReadOnly);
        let n: i64 = conn.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 1);
        drop(conn);
        assert_eq!(
            (file_stamp::line(&wal), file_stamp::line(&shm)),
            before,
            "the read changed the application's -wal or -shm"
        );
        drop(writer);
    }
}
