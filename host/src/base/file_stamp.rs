//! A file's stamp: one line of its metadata that moves whenever a user can
//! change its content, for the fast path's data-dir stamp and the ledger's
//! record of the fire-log files it exported.
//!
//! It owns which metadata goes in (path, size, modification time, change
//! time, inode): a rewrite to the same size with the modification time put
//! back (`touch -r`) still moves the change time, which only the kernel
//! sets. It never reads a file's content and never follows a decision of its
//! own about what a change means.

use std::path::Path;
use std::time::UNIX_EPOCH;

/// `path size mtime_ns ctime_ns inode`, or `path -` when there is nothing to
/// stat.
pub fn line(p: &Path) -> String {
    match std::fs::metadata(p) {
        Ok(m) => {
            let mtime = m.modified().ok().and_then(|t| t.duration_since(UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos());
            #[cfg(unix)]
            let (ctime, ino) = {
                use std::os::unix::fs::MetadataExt;
                (i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec()), m.ino())
            };
            #[cfg(not(unix))]
            let (ctime, ino) = (0i128, 0u64);
            format!("{} {} {mtime} {ctime} {ino}", p.display(), m.len())
        }
        Err(_) => format!("{} -", p.display()),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_same_size_rewrite_with_the_mtime_put_back_moves_the_stamp() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"aaaa").unwrap();
        let mtime = std::fs::metadata(&p).unwrap().modified().unwrap();
        let before = super::line(&p);
        // The change time moves by the kernel's clock tick (at most 10 ms).
        std::thread::sleep(std::time::Duration::from_millis(20));
        let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        std::io::Write::write_all(&mut &f, b"bbbb").unwrap();
        f.set_modified(mtime).unwrap();
        drop(f);
        assert_eq!(std::fs::metadata(&p).unwrap().modified().unwrap(), mtime, "the mtime was put back");
        assert_ne!(super::line(&p), before, "the change time moved");
        assert_eq!(super::line(&dir.path().join("none")), format!("{} -", dir.path().join("none").display()));
    }
}
