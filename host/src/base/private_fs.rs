//! Files and folders only this user may read: the output folder's rules for
//! writing, shared by the ledger, its exports, the compiled-component cache
//! and the schedules.
//!
//! It owns creating folders `0700` and refusing one that is not this user's
//! own (another user's, one group or others can write, a symlink), creating
//! files `0600` from their first byte and never through a link (`openat`
//! with `O_CREAT | O_EXCL | O_NOFOLLOW` in the folder opened once), and
//! replacing a file atomically (a temporary file under a name no one can
//! guess, fsync, rename, fsync of the folder). It never decides where
//! anything goes (`base::out_dir` does) and never reads what it writes.

use std::io::Write;
use std::path::Path;

/// What [`write_atomic`]'s temporary file is named: `.<name>` + this +
/// the writer's process id, `-` and [`random_suffix`].
pub const TEMP_MARK: &str = ".tmp";

/// Why a folder is not one this user may keep private files in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotOurs {
    #[error("it is a symlink")]
    Symlink,
    #[error("it is not a folder")]
    NotAFolder,
    #[error("it is owned by uid {owner}, not by this user (uid {us})")]
    Owner { owner: u32, us: u32 },
    #[error("group or others can write it (mode {mode:04o})")]
    Writable { mode: u32 },
}

/// The [`NotOurs`] a [`create_dir`] error carries, if that is why it failed.
pub fn not_ours(e: &std::io::Error) -> Option<&NotOurs> {
    e.get_ref().and_then(|inner| inner.downcast_ref::<NotOurs>())
}

/// 16 hex digits from the operating system's randomness: the part of a
/// temporary name no one else can guess.
pub fn random_suffix() -> std::io::Result<String> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes)
        .map_err(|e| std::io::Error::other(format!("no randomness for a temporary name: {e}")))?;
    Ok(crate::base::hex(&bytes))
}

/// A temporary name for `name` beside it: `.<name><mark><pid>-<random>`.
pub fn temp_name(name: &str, mark: &str) -> std::io::Result<String> {
    Ok(format!(".{name}{mark}{}-{}", std::process::id(), random_suffix()?))
}

/// Replaces `path` with `bytes`, atomically and `0600`: a new temporary file
/// beside it under a name no one can guess (created `O_EXCL | O_NOFOLLOW`
/// in the folder opened once), fsync, rename over `path` (a symlink there is
/// replaced, never followed), fsync of the folder. A reader sees the old
/// file or the new one, never a part.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let (dir, name) = split(path)?;
    let dir = Dir::open(dir)?;
    let tmp = temp_name(name, TEMP_MARK)?;
    let written = dir.create(&tmp).and_then(|mut f| {
        f.write_all(bytes)?;
        f.sync_all()
    });
    if let Err(e) = written.and_then(|()| dir.rename(&tmp, name)) {
        dir.remove(&tmp);
        return Err(e);
    }
    dir.sync();
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

/// A new file, `0600` from the start: created in its folder with
/// `O_CREAT | O_EXCL | O_NOFOLLOW`, so whatever already stands at `path` (a
/// file, a symlink planted there) makes it fail, never written through.
pub fn create_file(path: &Path) -> std::io::Result<std::fs::File> {
    let (dir, name) = split(path)?;
    Dir::open(dir)?.create(name)
}

/// A file opened to read, never through a symlink at its last step
/// (`O_NOFOLLOW`: `ELOOP`), and a FIFO planted there never blocks the open
/// (`O_NONBLOCK`). The caller checks what it opened is a regular file.
pub fn open_no_follow(path: &Path) -> std::io::Result<std::fs::File> {
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    opts.open(path)
}

/// A file opened to append to, created `0600` when missing; a symlink at
/// `path` makes it fail (`O_NOFOLLOW`), never written through.
pub fn open_append(path: &Path) -> std::io::Result<std::fs::File> {
    let mut opts = std::fs::OpenOptions::new();
    opts.append(true).create(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600).custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    }
    opts.open(path)
}

/// Creates `path` (and its missing parents) `0700`, then opens it
/// `O_DIRECTORY | O_NOFOLLOW` and refuses it unless this user owns it and
/// neither group nor others can write it ([`NotOurs`], which
/// [`not_ours`] reads back from the error); a folder that passes is set to
/// `0700`. Another user's folder is never changed.
pub fn create_dir(path: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(path)?;
        own_dir(path)
    }
    #[cfg(not(unix))]
    {
        std::fs::create_dir_all(path)
    }
}

/// Checks the folder at `path` is this user's and writable by no one else,
/// on the folder itself opened without following a link, and sets it `0700`.
#[cfg(unix)]
fn own_dir(path: &Path) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let refused = |why: NotOurs| std::io::Error::new(std::io::ErrorKind::PermissionDenied, why);
    let dir = match open_dir(path, true) {
        Ok(d) => d,
        // A link is refused with ELOOP, or ENOTDIR where `O_DIRECTORY` is checked first (Linux).
        Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) => {
            let link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
            return Err(refused(if link { NotOurs::Symlink } else { NotOurs::NotAFolder }));
        }
        Err(e) => return Err(e),
    };
    let meta = dir.metadata()?;
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let us = unsafe { libc::geteuid() };
    if meta.uid() != us {
        return Err(refused(NotOurs::Owner { owner: meta.uid(), us }));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(refused(NotOurs::Writable { mode: meta.mode() & 0o7777 }));
    }
    // Set even when it already is: a folder that cannot be changed (an
    // immutable one) is refused here, before anything is written in it.
    // SAFETY: a valid open descriptor of the folder just checked.
    if unsafe { libc::fchmod(dir.as_raw_fd(), 0o700) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Sets a file this user owns to `0600`, if it exists and is not a symlink
/// (a link is never followed to change what it points to).
pub fn restrict(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file()) {
            let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
        }
    }
    #[cfg(not(unix))]
    let _ = path;
}

/// `path`'s folder (`.` when it has none) and its file name.
fn split(path: &Path) -> std::io::Result<(&Path, &str)> {
    let name = path.file_name().and_then(|n| n.to_str()).ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{} has no file name", path.display()))
    })?;
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    Ok((dir, name))
}

/// A folder opened once, whose files are created, renamed and removed
/// relative to it (`openat`, `renameat`, `unlinkat`): what the names mean
/// cannot change between the steps.
struct Dir {
    #[cfg(unix)]
    fd: std::fs::File,
    #[cfg(not(unix))]
    path: std::path::PathBuf,
}

/// Opens a folder for [`Dir`]: `O_DIRECTORY`, and `O_NOFOLLOW` when `nofollow`.
#[cfg(unix)]
fn open_dir(path: &Path, nofollow: bool) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let flags = libc::O_DIRECTORY | libc::O_CLOEXEC | if nofollow { libc::O_NOFOLLOW } else { 0 };
    std::fs::OpenOptions::new().read(true).custom_flags(flags).open(path)
}

#[cfg(unix)]
fn c_name(name: &str) -> std::io::Result<std::ffi::CString> {
    if name.contains('/') || name.is_empty() || name == "." || name == ".." {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("`{name}` is not a file name")));
    }
    std::ffi::CString::new(name).map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "a NUL in a name"))
}

#[cfg(unix)]
impl Dir {
    fn open(path: &Path) -> std::io::Result<Dir> {
        Ok(Dir { fd: open_dir(path, false)? })
    }

    /// A new `0600` file `name`: `O_CREAT | O_EXCL | O_NOFOLLOW`.
    fn create(&self, name: &str) -> std::io::Result<std::fs::File> {
        use std::os::fd::{AsRawFd, FromRawFd};
        let name = c_name(name)?;
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: a valid folder descriptor and a NUL-terminated name; the
        // mode is passed as the variadic argument `O_CREAT` reads.
        let fd = unsafe { libc::openat(self.fd.as_raw_fd(), name.as_ptr(), flags, 0o600 as libc::c_uint) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened and is owned by nothing else.
        Ok(unsafe { std::fs::File::from_raw_fd(fd) })
    }

    fn rename(&self, from: &str, to: &str) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        let (from, to) = (c_name(from)?, c_name(to)?);
        let fd = self.fd.as_raw_fd();
        // SAFETY: a valid folder descriptor and NUL-terminated names.
        if unsafe { libc::renameat(fd, from.as_ptr(), fd, to.as_ptr()) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    fn remove(&self, name: &str) {
        use std::os::fd::AsRawFd;
        if let Ok(name) = c_name(name) {
            // SAFETY: a valid folder descriptor and a NUL-terminated name.
            unsafe { libc::unlinkat(self.fd.as_raw_fd(), name.as_ptr(), 0) };
        }
    }

    fn sync(&self) {
        let _ = self.fd.sync_all();
    }
}

#[cfg(not(unix))]
impl Dir {
    fn open(path: &Path) -> std::io::Result<Dir> {
        Ok(Dir { path: path.to_owned() })
    }

    fn create(&self, name: &str) -> std::io::Result<std::fs::File> {
        std::fs::OpenOptions::new().write(true).create_new(true).open(self.path.join(name))
    }

    fn rename(&self, from: &str, to: &str) -> std::io::Result<()> {
        std::fs::rename(self.path.join(from), self.path.join(to))
    }

    fn remove(&self, name: &str) {
        let _ = std::fs::remove_file(self.path.join(name));
    }

    fn sync(&self) {}
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

    #[test]
    fn temporary_names_cannot_be_guessed() {
        let (a, b) = (temp_name("x.json", TEMP_MARK).unwrap(), temp_name("x.json", TEMP_MARK).unwrap());
        assert_ne!(a, b);
        let prefix = format!(".x.json{TEMP_MARK}{}-", std::process::id());
        for n in [&a, &b] {
            let random = n.strip_prefix(&prefix).unwrap_or_else(|| panic!("{n}"));
            assert!(random.len() == 16 && random.bytes().all(|c| c.is_ascii_hexdigit()), "{n}");
        }
    }

    #[test]
    fn a_symlink_at_a_name_the_host_creates_is_replaced_or_refused_never_written_through() {
        let tmp = tempfile::tempdir().unwrap();
        let victim = tmp.path().join("victim");
        std::fs::write(&victim, b"untouched").unwrap();
        let dir = tmp.path().join("out");
        create_dir(&dir).unwrap();
        // A link at the name an atomic write replaces: the link goes, the file it named stays.
        std::os::unix::fs::symlink(&victim, dir.join("issues.jsonl")).unwrap();
        write_atomic(&dir.join("issues.jsonl"), b"ours").unwrap();
        assert!(std::fs::symlink_metadata(dir.join("issues.jsonl")).unwrap().is_file());
        assert_eq!(std::fs::read(dir.join("issues.jsonl")).unwrap(), b"ours");
        // The name older versions gave the temporary file, `.<name>.tmp<pid>`,
        // planted as a link: never used, so never followed.
        let old_name = dir.join(format!(".x.json{TEMP_MARK}{}", std::process::id()));
        std::os::unix::fs::symlink(&victim, &old_name).unwrap();
        write_atomic(&dir.join("x.json"), b"x").unwrap();
        assert!(std::fs::symlink_metadata(&old_name).unwrap().file_type().is_symlink());
        // A link where a new file goes (a segment written ahead): refused.
        std::os::unix::fs::symlink(&victim, dir.join("segment")).unwrap();
        assert!(create_file(&dir.join("segment")).is_err());
        // A dangling link too: O_EXCL never creates its target.
        std::os::unix::fs::symlink(tmp.path().join("planted"), dir.join("dangling")).unwrap();
        assert!(create_file(&dir.join("dangling")).is_err());
        assert!(!tmp.path().join("planted").exists());
        assert_eq!(std::fs::read(&victim).unwrap(), b"untouched");
        assert_eq!(std::fs::metadata(&victim).unwrap().permissions().mode() & 0o777, 0o644, "never chmodded");
    }

    #[test]
    fn a_folder_others_can_write_or_a_symlinked_one_is_refused_and_left_as_it_is() {
        let tmp = tempfile::tempdir().unwrap();
        let open = tmp.path().join("open");
        std::fs::create_dir(&open).unwrap();
        for mode in [0o777, 0o770, 0o702, 0o1777] {
            std::fs::set_permissions(&open, std::fs::Permissions::from_mode(mode)).unwrap();
            let e = create_dir(&open).unwrap_err();
            assert!(matches!(not_ours(&e), Some(NotOurs::Writable { .. })), "{mode:o}: {e}");
            assert_eq!(std::fs::metadata(&open).unwrap().permissions().mode() & 0o7777, mode, "left as it was");
        }
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(tmp.path().join("mine"), &link).unwrap();
        std::fs::create_dir(tmp.path().join("mine")).unwrap();
        let e = create_dir(&link).unwrap_err();
        assert_eq!(not_ours(&e), Some(&NotOurs::Symlink), "{e}");
        // A folder of ours that only we can write is made 0700.
        let mine = tmp.path().join("mine");
        std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o755)).unwrap();
        create_dir(&mine).unwrap();
        assert_eq!(std::fs::metadata(&mine).unwrap().permissions().mode() & 0o777, 0o700);
    }

    #[test]
    fn another_users_folder_is_refused_and_never_changed() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("SKIPPED: another_users_folder_is_refused_and_never_changed needs root to chown a folder");
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let theirs = tmp.path().join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
        let e = create_dir(&theirs).unwrap_err();
        assert_eq!(not_ours(&e), Some(&NotOurs::Owner { owner: 65534, us: 0 }), "{e}");
        assert_eq!(std::fs::metadata(&theirs).unwrap().permissions().mode() & 0o777, 0o755, "not chmodded");
    }
}
