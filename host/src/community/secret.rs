//! The install's community secret: the key of its period pseudonyms.
//!
//! It owns the secret file: 32 random bytes in hex, made once (written
//! whole, then linked in place), `0600`, beside the fire log's signing key
//! (its key file's name with the extension `.community`), never inside the
//! output folder. Beside the key
//! rather than in the folder because an output folder that is lost and
//! built again from the data dir counts the same occurrences again: with the
//! same secret its records get the same keys, and the re-put overwrites
//! them; a new secret would add every week a second time. Read, it must be a
//! regular file of this user's, no symlink, no bit for group or others. It
//! never reads the ledger and never sends anything.

use std::path::{Path, PathBuf};

use super::CommunityError;
use crate::firelog::KeyFile;

/// Bytes of randomness in a secret.
const SECRET_BYTES: usize = 32;

/// Where the secret of output folder `out` lives, given the signing key's
/// file as `run` takes it (`--key-file` or `[fire_log] key_file`).
pub fn path(out: &Path, key_file: Option<&Path>) -> Result<PathBuf, CommunityError> {
    Ok(KeyFile::locate(out, key_file)?.path().with_extension("community"))
}

/// The secret at `path`, made when there is none.
pub fn open_or_create(path: &Path) -> Result<Vec<u8>, CommunityError> {
    if let Some(secret) = read(path)? {
        return Ok(secret);
    }
    let mut secret = vec![0u8; SECRET_BYTES];
    getrandom::fill(&mut secret).map_err(CommunityError::Random)?;
    let io = |source| CommunityError::Secret { path: path.to_owned(), source };
    if let Some(folder) = path.parent().filter(|f| !f.exists()) {
        crate::base::private_fs::create_dir(folder).map_err(io)?;
    }
    // Written whole under a temporary name, then linked in place: a reader
    // never sees a part, and of two processes making it at once one wins.
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(crate::base::private_fs::temp_name(&name, ".new").map_err(io)?);
    let written = crate::base::private_fs::create_file(&tmp).and_then(|mut f| {
        use std::io::Write as _;
        f.write_all(crate::base::hex(&secret).as_bytes())?;
        f.sync_all()
    });
    let linked = written.and_then(|()| std::fs::hard_link(&tmp, path));
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => {
            crate::base::private_fs::sync_parent(path);
            Ok(secret)
        }
        // Another process made it first: its secret is the install's.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read(path)?
            .ok_or_else(|| CommunityError::BadSecret { path: path.to_owned(), problem: "it vanished".into() }),
        Err(e) => Err(io(e)),
    }
}

/// The secret at `path` after its checks; `None` when there is no file.
fn read(path: &Path) -> Result<Option<Vec<u8>>, CommunityError> {
    use std::io::Read as _;
    let bad = |problem: &str| CommunityError::BadSecret { path: path.to_owned(), problem: problem.into() };
    let mut file = match crate::base::private_fs::open_no_follow(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(CommunityError::Secret { path: path.to_owned(), source }),
    };
    let meta = file.metadata().map_err(|source| CommunityError::Secret { path: path.to_owned(), source })?;
    if !meta.is_file() {
        return Err(bad("it is not a regular file"));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        // SAFETY: geteuid has no preconditions and cannot fail.
        if meta.uid() != unsafe { libc::geteuid() } || meta.mode() & 0o077 != 0 {
            return Err(bad("it must be this user's and 0600"));
        }
    }
    let mut text = String::new();
    file.by_ref().take(256).read_to_string(&mut text).map_err(|_| bad("it is not text"))?;
    let text = text.trim();
    crate::firelog::unhex32(text).map(|b| Some(b.to_vec())).ok_or_else(|| bad("it is not 32 bytes of hex"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_secret_is_made_once_0600_and_read_back_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys/out-x.community");
        let first = open_or_create(&path).unwrap();
        assert_eq!(first.len(), SECRET_BYTES);
        assert_eq!(open_or_create(&path).unwrap(), first);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
            assert!(matches!(open_or_create(&path), Err(CommunityError::BadSecret { .. })), "readable by others");
        }
    }

    #[test]
    fn the_secret_lies_beside_the_signing_key_never_in_the_output_folder() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let key = dir.path().join("elsewhere/fire.ed25519");
        assert_eq!(path(&out, Some(&key)).unwrap(), crate::base::out_dir::resolve(&key).with_extension("community"));
        assert!(path(&out, Some(&out.join("k.ed25519"))).is_err(), "inside the output folder: refused");
    }
}
