//! One writer per output folder, by a lock the operating system releases
//! when the process dies.
//!
//! It owns `ledger.lock` in the output folder: an exclusive advisory lock
//! (`flock` on Unix, `LockFileEx` on Windows, through the standard library)
//! held for as long as a [`Ledger`](super::Ledger) lives, with the holder's
//! process id written inside so that a refusal can say who holds it. A crash,
//! a SIGKILL or a power cut releases it: there is no stale lock to clean up.
//! It never waits: a second writer is refused at once, and readers
//! ([`LedgerView`](super::LedgerView)) never take it.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

pub const LOCK_FILE: &str = "ledger.lock";

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error(
        "output folder {dir} is in use by another sentinel-host (pid {holder}): one process writes an output folder at a time; wait for it, stop it, or choose another --out"
    )]
    Held { dir: PathBuf, holder: String },
    #[error("cannot lock {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The output folder's writer lock, released when dropped.
#[derive(Debug)]
pub struct WriterLock {
    _file: File,
}

impl WriterLock {
    /// Takes the lock of the output folder `dir`, or says who holds it.
    pub fn acquire(dir: &Path) -> Result<Self, LockError> {
        let path = dir.join(LOCK_FILE);
        let io = |source| LockError::Io { path: path.clone(), source };
        let mut opts = OpenOptions::new();
        opts.read(true).write(true).create(true).truncate(false);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            // Never through a link planted at its name: the pid is written into it.
            opts.mode(0o600).custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
        }
        let mut file = opts.open(&path).map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = holder.trim();
                let holder =
                    if holder.is_empty() || !holder.bytes().all(|b| b.is_ascii_digit()) { "unknown" } else { holder };
                return Err(LockError::Held { dir: dir.to_owned(), holder: holder.to_owned() });
            }
            Err(TryLockError::Error(e)) => return Err(io(e)),
        }
        file.set_len(0).and_then(|()| file.rewind()).map_err(io)?;
        write!(file, "{}", std::process::id()).and_then(|()| file.flush()).map_err(io)?;
        Ok(WriterLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_writer_is_refused_naming_the_holder_and_the_lock_is_released_on_drop() {
        let tmp = tempfile::tempdir().unwrap();
        let first = WriterLock::acquire(tmp.path()).unwrap();
        match WriterLock::acquire(tmp.path()) {
            Err(LockError::Held { holder, .. }) => assert_eq!(holder, std::process::id().to_string()),
            other => panic!("expected a refusal, got {other:?}"),
        }
        drop(first);
        WriterLock::acquire(tmp.path()).expect("free again once the holder is gone");
    }
}
