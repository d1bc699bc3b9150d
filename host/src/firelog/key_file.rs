//! Where the fire log's signing key lives, and opening it.
//!
//! It owns the key file's place (`--key-file` or the config file's
//! `[fire_log] key_file`, else `<config home>/openmausbot-sentinel/keys/
//! out-<first 16 hex of sha256(resolved output folder)>.ed25519`, and beside
//! the output folder, in `<folder>-keys/`, when the config home lies inside
//! it: a service user whose home is its state folder), the checks at every
//! open (a regular file, never through a symlink, owned by this user, no
//! bit for group or others; its folder not writable by others), writing a
//! new key `0600`, moving an older release's `fire-key.ed25519` out of the
//! output folder once, and the next key a rotation keeps beside the file
//! (`.next`) until its entry is committed. It never signs, never reads the
//! ledger, and never decides on its own that a missing key may be made: its
//! caller says whether the folder already holds a signed log.

use std::path::{Path, PathBuf};

use ed25519_dalek::SigningKey;
use sha2::{Digest, Sha256};

use super::KEY_FILE;
use super::key::{KeyError, generate, parse_key};

/// The folder under the config home that holds the keys.
pub const KEY_DIR: &str = "keys";
/// What a rotation's next key is named until its entry is committed.
const NEXT_SUFFIX: &str = ".next";
/// A key file is 64 hex digits; anything much longer is not one.
const MAX_KEY_BYTES: u64 = 4096;

/// One output folder's key file: where it is, for which folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyFile {
    path: PathBuf,
    out: PathBuf,
}

/// How [`KeyFile::open`] came by the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenedHow {
    /// It was there.
    Existing,
    /// It was in the output folder (an older release's place), and was moved
    /// to the key file; `from` is gone.
    Moved { from: PathBuf },
    /// None was there and the folder holds no signed log yet: a new one.
    Generated,
}

/// A signing key opened for an output folder.
#[derive(Debug, Clone)]
pub struct KeyOpened {
    pub key: SigningKey,
    pub path: PathBuf,
    pub how: OpenedHow,
}

impl KeyOpened {
    /// What the operator is told when the key did not simply open: the
    /// move of an older folder's key, or a new key.
    pub fn notice(&self) -> Option<String> {
        let kid = super::kid(&self.key.verifying_key());
        match &self.how {
            OpenedHow::Existing => None,
            OpenedHow::Moved { from } => Some(format!(
                "moved the signing key {kid} out of the output folder: {} is now {} (0600); keep it out of any copy of the folder",
                from.display(),
                self.path.display()
            )),
            OpenedHow::Generated => Some(format!(
                "generated the signing key {kid} for a new fire log at {} (0600); keep a copy of fires.pub.json elsewhere to verify against",
                self.path.display()
            )),
        }
    }
}

/// `out-<first 16 hex of sha256(resolved output folder path)>`: the key's
/// name, stable for as long as the folder stays where it is.
pub fn name_for(out: &Path) -> String {
    let resolved = crate::base::out_dir::resolve(out);
    let digest = Sha256::digest(resolved.to_string_lossy().as_bytes());
    format!("out-{}", &crate::base::hex(&digest)[..16])
}

/// The config home: `$XDG_CONFIG_HOME` when absolute, else `~/.config`.
fn config_home() -> Option<PathBuf> {
    let xdg = std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from).filter(|p| p.is_absolute());
    xdg.or_else(|| crate::base::out_dir::home().map(|h| h.join(".config")))
}

/// The folder the default key file of `out` lives in.
pub fn default_folder(out: &Path) -> Result<PathBuf, KeyError> {
    Ok(default_folder_in(&config_home().ok_or(KeyError::NoHome)?, out))
}

/// [`default_folder`] with the config home given.
fn default_folder_in(config_home: &Path, out: &Path) -> PathBuf {
    let out = crate::base::out_dir::resolve(out);
    let folder = crate::base::out_dir::resolve(&config_home.join(crate::base::out_dir::APP_DIR).join(KEY_DIR));
    if !folder.starts_with(&out) {
        return folder;
    }
    // A service user whose home is its state folder (the package's
    // `sentinel`, home /var/lib/sentinel): the folder beside it.
    let name = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "sentinel".into());
    out.with_file_name(format!("{name}-keys"))
}

impl KeyFile {
    /// The key file of output folder `out`: `given` (resolved), else the
    /// default. Refused when it lies inside the folder.
    pub fn locate(out: &Path, given: Option<&Path>) -> Result<KeyFile, KeyError> {
        let out = crate::base::out_dir::resolve(out);
        let path = match given {
            Some(p) => crate::base::out_dir::resolve(p),
            None => default_folder(&out)?.join(format!("{}.ed25519", name_for(&out))),
        };
        if path.starts_with(&out) {
            return Err(KeyError::InsideOutput { path, out });
        }
        Ok(KeyFile { path, out })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// [`KeyFile::locate`], refused as well when the key file would lie
    /// inside `data_dir` (the watched application's, never written): a
    /// config home or a `--key-file` under it.
    pub fn locate_outside(out: &Path, given: Option<&Path>, data_dir: &Path) -> Result<KeyFile, KeyError> {
        let file = KeyFile::locate(out, given)?;
        let data_dir = crate::base::out_dir::resolve(data_dir);
        if file.path.starts_with(&data_dir) {
            return Err(KeyError::InsideDataDir { path: file.path, data_dir });
        }
        Ok(file)
    }

    /// Where a rotation keeps the next key until its entry is committed.
    pub fn next_path(&self) -> PathBuf {
        let name = self.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        self.path.with_file_name(format!("{name}{NEXT_SUFFIX}"))
    }

    /// The key, moving an older folder's key out first: read and checked,
    /// or, when there is none, generated when `signed_log` is false, else
    /// refused ([`KeyError::Missing`]).
    pub fn open(&self, signed_log: bool) -> Result<KeyOpened, KeyError> {
        let moved = self.move_out_of_folder()?;
        let opened = |key, how| KeyOpened { key, path: self.path.clone(), how };
        match read_checked(&self.path)? {
            Some(key) => Ok(opened(key, moved.map_or(OpenedHow::Existing, |from| OpenedHow::Moved { from }))),
            None if signed_log => Err(KeyError::Missing { path: self.path.clone(), out: self.out.clone() }),
            None => {
                let key = generate()?;
                self.write(&key)?;
                Ok(opened(key, OpenedHow::Generated))
            }
        }
    }

    /// The key when there is one (an older folder's moved out first),
    /// checked as [`KeyFile::open`] checks it; `None` when there is none.
    pub fn read(&self) -> Result<Option<SigningKey>, KeyError> {
        self.move_out_of_folder()?;
        read_checked(&self.path)
    }

    /// Writes `key` as the key file, `0600`, its folder made `0700` when missing.
    pub fn write(&self, key: &SigningKey) -> Result<(), KeyError> {
        write_key(&self.path, key)
    }

    /// Writes the rotation's next key beside the key file.
    pub fn write_next(&self, key: &SigningKey) -> Result<(), KeyError> {
        write_key(&self.next_path(), key)
    }

    /// The rotation's next key, when one was left (checked as a key file is).
    pub fn read_next(&self) -> Result<Option<SigningKey>, KeyError> {
        read_checked(&self.next_path())
    }

    /// Puts the next key in place of the key file (its entry is committed).
    pub fn commit_next(&self) -> Result<(), KeyError> {
        std::fs::rename(self.next_path(), &self.path)
            .map_err(|source| KeyError::Io { path: self.path.clone(), source })?;
        crate::base::private_fs::sync_parent(&self.path);
        Ok(())
    }

    /// Removes a next key whose entry was never committed.
    pub fn drop_next(&self) -> Result<(), KeyError> {
        let next = self.next_path();
        std::fs::remove_file(&next).map_err(|source| KeyError::Io { path: next, source })
    }

    /// Moves an older release's `fire-key.ed25519` out of the output folder
    /// to the key file (the same key already there: the folder's copy is
    /// only removed); returns where it was, when it was there.
    fn move_out_of_folder(&self) -> Result<Option<PathBuf>, KeyError> {
        let old = self.out.join(KEY_FILE);
        let Some(key) = read_checked(&old)? else { return Ok(None) };
        match read_checked(&self.path)? {
            Some(there) if there.to_bytes() == key.to_bytes() => {}
            Some(_) => return Err(KeyError::TwoKeys { moved: old, path: self.path.clone() }),
            None => self.write(&key)?,
        }
        std::fs::remove_file(&old).map_err(|source| KeyError::Io { path: old.clone(), source })?;
        crate::base::private_fs::sync_parent(&old);
        tracing::debug!(from = %old.display(), to = %self.path.display(), "moved the signing key out of the output folder");
        Ok(Some(old))
    }
}

fn write_key(path: &Path, key: &SigningKey) -> Result<(), KeyError> {
    let io = |source| KeyError::Io { path: path.to_owned(), source };
    if let Some(folder) = path.parent() {
        if !folder.exists() {
            crate::base::private_fs::create_dir(folder).map_err(io)?;
        }
        check_folder(folder)?;
    }
    crate::base::private_fs::write_atomic(path, crate::base::hex(&key.to_bytes()).as_bytes()).map_err(io)
}

/// The key at `path`, after every check; `None` when there is no file.
fn read_checked(path: &Path) -> Result<Option<SigningKey>, KeyError> {
    use std::io::Read as _;
    let mut file = match crate::base::private_fs::open_no_follow(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if is_link_error(&e) => {
            return Err(unsafe_key(path, "it is a symbolic link (a key is read only from a file of its own)"));
        }
        Err(source) => return Err(KeyError::Io { path: path.to_owned(), source }),
    };
    let meta = file.metadata().map_err(|source| KeyError::Io { path: path.to_owned(), source })?;
    if !meta.is_file() {
        return Err(unsafe_key(path, "it is not a regular file"));
    }
    check_owner_and_mode(path, &meta)?;
    if let Some(folder) = path.parent() {
        check_folder(folder)?;
    }
    let mut text = String::new();
    file.by_ref()
        .take(MAX_KEY_BYTES)
        .read_to_string(&mut text)
        .map_err(|_| KeyError::Malformed { path: path.to_owned() })?;
    parse_key(&text, path).map(Some)
}

fn unsafe_key(path: &Path, problem: impl Into<String>) -> KeyError {
    KeyError::Unsafe { path: path.to_owned(), problem: problem.into() }
}

fn is_link_error(e: &std::io::Error) -> bool {
    #[cfg(unix)]
    {
        e.raw_os_error() == Some(libc::ELOOP)
    }
    #[cfg(not(unix))]
    {
        let _ = e;
        false
    }
}

#[cfg(unix)]
fn check_owner_and_mode(path: &Path, meta: &std::fs::Metadata) -> Result<(), KeyError> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        return Err(unsafe_key(path, format!("it is owned by uid {}, not by this user (uid {me})", meta.uid())));
    }
    let mode = meta.mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(unsafe_key(
            path,
            format!(
                "its mode is {mode:04o}: group or others may read or write it (chmod 600 it; if someone else may have read it, then `key rotate`)"
            ),
        ));
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_owner_and_mode(_: &Path, _: &std::fs::Metadata) -> Result<(), KeyError> {
    Ok(())
}

/// A key's folder: another user must not be able to replace what is in it
/// (writable by group or others only with the sticky bit, owned by this
/// user or root).
#[cfg(unix)]
fn check_folder(folder: &Path) -> Result<(), KeyError> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(folder).map_err(|source| KeyError::Io { path: folder.to_owned(), source })?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let mode = meta.mode();
    let problem = if meta.uid() != me && meta.uid() != 0 {
        Some(format!("its folder is owned by uid {}, not by this user (uid {me})", meta.uid()))
    } else if mode & 0o022 != 0 && mode & 0o1000 == 0 {
        Some(format!("its folder {} is writable by group or others ({:04o})", folder.display(), mode & 0o7777))
    } else {
        None
    };
    problem.map_or(Ok(()), |p| Err(unsafe_key(folder, p)))
}

#[cfg(not(unix))]
fn check_folder(_: &Path) -> Result<(), KeyError> {
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn setup() -> (tempfile::TempDir, PathBuf, KeyFile) {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("out");
        crate::base::private_fs::create_dir(&out).unwrap();
        let file = KeyFile::locate(&out, Some(&tmp.path().join("keys/k.ed25519"))).unwrap();
        (tmp, out, file)
    }

    #[test]
    fn a_key_is_generated_only_for_a_folder_with_no_signed_log() {
        let (_tmp, out, file) = setup();
        let err = file.open(true).unwrap_err();
        assert!(matches!(err, KeyError::Missing { .. }) && err.to_string().contains("k.ed25519"), "{err}");
        assert!(!file.path().exists(), "a missing key is never made for a signed log");
        let made = file.open(false).unwrap();
        assert_eq!(made.how, OpenedHow::Generated);
        assert_eq!(std::fs::metadata(file.path()).unwrap().permissions().mode() & 0o777, 0o600);
        let again = file.open(true).unwrap();
        assert_eq!((again.how, again.key.to_bytes()), (OpenedHow::Existing, made.key.to_bytes()));
        assert!(!out.join(KEY_FILE).exists());
    }

    #[test]
    fn a_key_group_or_others_can_read_or_behind_a_link_is_refused() {
        let (tmp, _out, file) = setup();
        file.open(false).unwrap();
        std::fs::set_permissions(file.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = file.open(true).unwrap_err();
        assert!(matches!(err, KeyError::Unsafe { .. }) && err.to_string().contains("0644"), "{err}");
        std::fs::set_permissions(file.path(), std::fs::Permissions::from_mode(0o600)).unwrap();
        let link = KeyFile::locate(&tmp.path().join("out"), Some(&tmp.path().join("keys/link.ed25519"))).unwrap();
        std::os::unix::fs::symlink(file.path(), link.path()).unwrap();
        assert!(matches!(link.open(true), Err(KeyError::Unsafe { .. })));
    }

    #[test]
    fn an_older_folders_key_is_moved_out_once() {
        let (_tmp, out, file) = setup();
        let key = generate().unwrap();
        crate::base::private_fs::write_atomic(&out.join(KEY_FILE), crate::base::hex(&key.to_bytes()).as_bytes())
            .unwrap();
        let opened = file.open(true).unwrap();
        assert_eq!(opened.how, OpenedHow::Moved { from: out.join(KEY_FILE) });
        assert_eq!(opened.key.to_bytes(), key.to_bytes());
        assert!(!out.join(KEY_FILE).exists(), "the folder's copy is gone");
        assert_eq!(file.open(true).unwrap().how, OpenedHow::Existing, "moved once");
    }

    #[test]
    fn a_key_file_inside_the_output_folder_is_refused() {
        let (tmp, out, _) = setup();
        let err = KeyFile::locate(&out, Some(&out.join("sub/k.ed25519"))).unwrap_err();
        assert!(matches!(err, KeyError::InsideOutput { .. }), "{err}");
        // A config home inside the folder (a service user whose home is its
        // state folder): the default goes beside it.
        assert_eq!(default_folder_in(&out.join(".config"), &out), tmp.path().join("out-keys"));
        let home = tmp.path().join("home/.config");
        assert_eq!(default_folder_in(&home, &out), home.join("openmausbot-sentinel/keys"));
    }
}
