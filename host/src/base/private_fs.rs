//! Files and folders only this user may read: the output folder's rules for
//! writing, shared by the ledger, its exports, the compiled-component cache
//! and the schedules.
//!
//! It owns creating folders `0700`, files `0600` from their first byte, and
//! replacing a file atomically (temporary file, fsync, rename, fsync of the
//! folder). It never decides where anything goes (`base::out_dir` does) and
//! never reads what it writes.

use std::io::Write;
use std::path::Path;

/// What [`write_atomic`]'s temporary file is named: `.<name>` + this +
/// the writer's process id.
pub const TEMP_MARK: &str = ".tmp";

/// Replaces `path` with `bytes`, atomically and `0600`: a temporary file
/// beside it (named for this process), fsync, rename, fsync of the folder. A
/// reader sees the old file or the new one, never a part.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}{TEMP_MARK}{}", std::process::id()));
    {
        let mut f = create_file(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    sync_parent(path);
    Ok(())
}

/// Fsyncs the folder holding `path`, so a rename or a new file in it survives
/// a crash (Unix; elsewhere a no-op).
pub fn sync_parent(path: &Path) {
    #[cfg(unix)]
    if let Some(dir) = path.parent()
        && let Ok(d) = std::fs::File::open(dir)
    {
        let _ = d.sync_all();
    }
    #[cfg(not(unix))]
    let _ = path;
}

/// A new (or truncated) file, `0600` from the start.
pub fn create_file(path: &Path) -> std::io::Result<std::fs::File> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    opts.open(path)
}

/// Creates `path` (and its parents) `0700`.
pub fn create_dir(path: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(path)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))
    }
    #[cfg(not(unix))]
    {
        std::fs::create_dir_all(path)
    }
}

/// Sets a file this user owns to `0600`, if it exists.
pub fn restrict(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if path.exists() {
            let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
        }
    }
    #[cfg(not(unix))]
    let _ = path;
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn an_atomic_write_is_private_and_leaves_no_temporary_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b");
        create_dir(&dir).unwrap();
        assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
        let f = dir.join("x.json");
        write_atomic(&f, b"one").unwrap();
        write_atomic(&f, b"two").unwrap();
        assert_eq!(std::fs::read(&f).unwrap(), b"two");
        assert_eq!(std::fs::metadata(&f).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "no temporary file left");
    }
}
