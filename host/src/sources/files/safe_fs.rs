//! Opening files of the data dir (which the watched application writes, and
//! which the host treats as untrusted) so that no `open` can block and only
//! regular files are read.
//!
//! Owns: the one rule for which data-dir entries may be read (regular files,
//! not through a symbolic link as their last component), the non-blocking
//! open, and the size cap on whole-file reads. Never: parsing, cursors, or
//! writing anything.
//!
//! The symlink rule: the data dir itself and the folders the operator names
//! are resolved as given (the operator chose them); the files read inside
//! them are opened with `O_NOFOLLOW`, so a symbolic link the application (or
//! whoever can write there) plants cannot point the host at a file outside
//! the data dir (a device, `/proc`, another user's secrets). Such a link is a
//! warning naming it, like a FIFO.
//!
//! On Unix the open itself is `O_NONBLOCK | O_NOFOLLOW`: opening a FIFO with
//! no writer returns at once instead of waiting for one, and the type is then
//! checked on the open descriptor (`fstat`), so there is no check-then-open
//! race. SQLite opens its files itself: [`check_regular`] is the
//! check-before-open for those (a `lstat` of the database, its `-wal` and
//! `-shm`); the race left between that check and SQLite's own open is bounded
//! by the whole-scan watchdog.

use std::fs::File;
use std::io::Read;
use std::path::Path;

/// Bytes read from a JSON file at most (`bots.json`): a larger one is refused.
pub const MAX_JSON_BYTES: u64 = 16 << 20;

/// Why a data-dir entry was not read.
#[derive(Debug, thiserror::Error)]
pub enum UnsafeFile {
    #[error("not a regular file ({0}); skipped, never opened for reading")]
    NotRegular(&'static str),
    #[error("a symbolic link; skipped (files in the data dir are never read through a link)")]
    Symlink,
    #[error("{size} bytes, over the cap of {cap} bytes; skipped")]
    TooLarge { size: u64, cap: u64 },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl UnsafeFile {
    /// The file is not there (a missing file is reported, never an error).
    pub fn is_not_found(&self) -> bool {
        matches!(self, UnsafeFile::Io(e) if e.kind() == std::io::ErrorKind::NotFound)
    }
}

fn kind_of(ft: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            return "a FIFO";
        }
        if ft.is_socket() {
            return "a socket";
        }
        if ft.is_block_device() {
            return "a block device";
        }
        if ft.is_char_device() {
            return "a character device";
        }
    }
    if ft.is_dir() {
        return "a directory";
    }
    if ft.is_symlink() {
        return "a symbolic link";
    }
    "not a file"
}

/// Checks the metadata of an open or listed entry: regular files only.
fn regular(meta: &std::fs::Metadata) -> Result<(), UnsafeFile> {
    let ft = meta.file_type();
    if ft.is_symlink() {
        return Err(UnsafeFile::Symlink);
    }
    if !ft.is_file() {
        return Err(UnsafeFile::NotRegular(kind_of(&ft)));
    }
    Ok(())
}

/// Opens `path` for reading if it is a regular file reached without a
/// symbolic link as its last component; never blocks.
pub fn open_regular(path: &Path) -> Result<File, UnsafeFile> {
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_NOCTTY);
    }
    #[cfg(not(unix))]
    {
        // No FIFOs to block on a path here; refuse links before opening.
        regular(&std::fs::symlink_metadata(path)?)?;
    }
    let file = match opts.open(path) {
        Ok(f) => f,
        // O_NOFOLLOW on a link: ELOOP.
        #[cfg(unix)]
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(UnsafeFile::Symlink),
        Err(e) => return Err(e.into()),
    };
    regular(&file.metadata()?)?;
    // Reads of a regular file never block, O_NONBLOCK or not.
    Ok(file)
}

/// Checks, without opening, that `path` is a regular file and not a link: for
/// files another library opens (SQLite). `Ok(false)` when it is not there.
pub fn check_regular(path: &Path) -> Result<bool, UnsafeFile> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) => regular(&meta).map(|()| true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Reads a whole regular file of at most `cap` bytes.
pub fn read_capped(path: &Path, cap: u64) -> Result<Vec<u8>, UnsafeFile> {
    let file = open_regular(path)?;
    let size = file.metadata()?.len();
    if size > cap {
        return Err(UnsafeFile::TooLarge { size, cap });
    }
    let mut out = Vec::with_capacity(size as usize);
    // The file may grow while it is read: never read past the cap.
    file.take(cap + 1).read_to_end(&mut out)?;
    if out.len() as u64 > cap {
        return Err(UnsafeFile::TooLarge { size: out.len() as u64, cap });
    }
    Ok(out)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn mkfifo(path: &Path) {
        assert!(std::process::Command::new("mkfifo").arg(path).status().unwrap().success());
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bots.json");
        mkfifo(&p);
        let err = open_regular(&p).unwrap_err();
        assert!(matches!(err, UnsafeFile::NotRegular("a FIFO")), "{err}");
        assert!(matches!(check_regular(&p), Err(UnsafeFile::NotRegular("a FIFO"))));
    }

    #[test]
    fn a_symlink_is_refused_even_to_a_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("real"), b"{}").unwrap();
        std::os::unix::fs::symlink(dir.path().join("real"), dir.path().join("link")).unwrap();
        assert!(matches!(open_regular(&dir.path().join("link")), Err(UnsafeFile::Symlink)));
        assert!(matches!(check_regular(&dir.path().join("link")), Err(UnsafeFile::Symlink)));
        assert!(open_regular(&dir.path().join("real")).is_ok());
    }

    #[test]
    fn a_device_and_a_directory_are_refused() {
        assert!(matches!(open_regular(Path::new("/dev/zero")), Err(UnsafeFile::NotRegular("a character device"))));
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(open_regular(dir.path()), Err(UnsafeFile::NotRegular("a directory"))));
    }

    #[test]
    fn a_file_over_the_cap_is_refused_naming_sizes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("big.json");
        std::fs::write(&p, vec![b' '; 100]).unwrap();
        let err = read_capped(&p, 99).unwrap_err();
        assert_eq!(err.to_string(), "100 bytes, over the cap of 99 bytes; skipped");
        assert_eq!(read_capped(&p, 100).unwrap().len(), 100);
        assert!(read_capped(&dir.path().join("none"), 1).unwrap_err().is_not_found());
    }
}
