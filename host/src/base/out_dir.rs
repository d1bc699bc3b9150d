//! Where sentinel writes: the output folder rules of the scanner spec.
//!
//! The default folder is per OS (XDG state dir on Linux, Application Support
//! on macOS, `%LOCALAPPDATA%` on Windows); a data dir other than the default
//! `~/.openmausbot` gets its own `data-<hash>` subfolder there. An explicit
//! `--out` is used as given. Either way the folder is refused when it lies
//! inside the data dir or inside a git repository (resolved through symlinks
//! and `..`), is created `0700`, an existing one is refused unless it is
//! this user's and no one else can write it, and this module never creates
//! anything inside the data dir.

use std::path::{Component, Path, PathBuf};

use sha2::{Digest, Sha256};

/// The folder name under the per-OS state directory.
pub const APP_DIR: &str = "openmausbot-sentinel";

#[derive(Debug, thiserror::Error)]
pub enum OutDirError {
    #[error("output folder {out} is inside the data dir {data_dir}: sentinel never writes into the folder it reads")]
    InsideDataDir { out: PathBuf, data_dir: PathBuf },
    #[error("output folder {out} is inside the git repository at {repo}: issues must not end up in a commit")]
    InsideGitRepo { out: PathBuf, repo: PathBuf },
    #[error("no default output folder: {0} is not set; pass --out")]
    NoHome(&'static str),
    #[error(
        "output folder {path} is refused: {why}; sentinel writes only into a folder of its own user that no one else can write"
    )]
    NotOurs { path: PathBuf, why: crate::base::private_fs::NotOurs },
    #[error("cannot create the output folder {path} or set it to mode 0700")]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The default data dir, `~/.openmausbot`.
pub fn default_data_dir() -> Option<PathBuf> {
    home().map(|h| h.join(".openmausbot"))
}

/// The per-OS user cache folder for compiled components, shared by every
/// output folder: `$XDG_CACHE_HOME/openmausbot-sentinel/components` when
/// that variable holds an absolute path (on any OS: it is how a test or a
/// user moves it), else `~/.cache/…` on Linux and other Unixes,
/// `~/Library/Caches/…` on macOS, `%LOCALAPPDATA%\openmausbot-sentinel\cache`
/// on Windows. `None` when none of those is known.
pub fn user_cache_dir() -> Option<PathBuf> {
    let xdg = std::env::var_os("XDG_CACHE_HOME").map(PathBuf::from).filter(|p| p.is_absolute());
    if let Some(xdg) = xdg {
        return Some(xdg.join(APP_DIR).join("components"));
    }
    if cfg!(windows) {
        let local = std::env::var_os("LOCALAPPDATA").filter(|v| !v.is_empty())?;
        Some(PathBuf::from(local).join(APP_DIR).join("cache"))
    } else if cfg!(target_os = "macos") {
        Some(home()?.join("Library/Caches").join(APP_DIR).join("components"))
    } else {
        Some(home()?.join(".cache").join(APP_DIR).join("components"))
    }
}

/// Where compiled components are kept when `--cache-dir` is not given: the
/// user cache folder ([`user_cache_dir`]), so `cargo xtask build-detectors`
/// and every output folder share one; `cache/` in the output folder when no
/// user cache folder is known or it lies inside the data dir (which is
/// never written).
pub fn cache_dir(out: &Path, data_dir: &Path) -> PathBuf {
    user_cache_dir().map(|c| resolve(&c)).filter(|c| !c.starts_with(data_dir)).unwrap_or_else(|| out.join("cache"))
}

/// The user's home folder (`HOME`, else `USERPROFILE`).
pub fn home() -> Option<PathBuf> {
    let set = |k| std::env::var_os(k).filter(|v| !v.is_empty());
    set("HOME").or_else(|| set("USERPROFILE")).map(PathBuf::from)
}

/// The per-OS base folder, before any `data-<hash>` subfolder.
pub fn default_base() -> Result<PathBuf, OutDirError> {
    if cfg!(target_os = "macos") {
        let home = home().ok_or(OutDirError::NoHome("HOME"))?;
        Ok(home.join("Library/Application Support").join(APP_DIR))
    } else if cfg!(windows) {
        let local = std::env::var_os("LOCALAPPDATA").ok_or(OutDirError::NoHome("LOCALAPPDATA"))?;
        Ok(PathBuf::from(local).join(APP_DIR))
    } else {
        match std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
            Some(state) => Ok(PathBuf::from(state).join(APP_DIR)),
            None => Ok(home().ok_or(OutDirError::NoHome("HOME"))?.join(".local/state").join(APP_DIR)),
        }
    }
}

/// `data-<first 12 hex of sha256(canonical data dir)>`.
pub fn data_subfolder(data_dir: &Path) -> String {
    let digest = Sha256::digest(data_dir.to_string_lossy().as_bytes());
    format!("data-{}", &crate::base::hex(&digest)[..12])
}

/// Resolves a path that may not exist yet: the longest existing ancestor is
/// canonicalized (following symlinks), the rest is appended with `..` folded.
pub fn resolve(path: &Path) -> PathBuf {
    let absolute =
        if path.is_absolute() { path.to_owned() } else { std::env::current_dir().unwrap_or_default().join(path) };
    let mut existing = absolute.clone();
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    loop {
        if let Ok(canon) = existing.canonicalize() {
            let mut out = canon;
            for part in rest.iter().rev() {
                match Path::new(part).components().next() {
                    Some(Component::ParentDir) => {
                        out.pop();
                    }
                    Some(Component::CurDir) | None => {}
                    _ => out.push(part),
                }
            }
            return out;
        }
        match (existing.file_name().map(|n| n.to_owned()), existing.parent().map(Path::to_owned)) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent;
            }
            _ => {
                // `..` as the last component has no file name: step up through it.
                if existing.ends_with("..") {
                    rest.push("..".into());
                    existing.pop();
                    continue;
                }
                return absolute;
            }
        }
    }
}

/// The git repository `path` lies in, found by walking up from it.
pub fn enclosing_git_repo(path: &Path) -> Option<PathBuf> {
    path.ancestors().find(|a| a.join(".git").exists()).map(Path::to_owned)
}

/// Chooses and checks the output folder, and creates it `0700`.
pub fn prepare(out: Option<&Path>, data_dir: &Path) -> Result<PathBuf, OutDirError> {
    let chosen = choose(out, data_dir)?;
    create(&chosen)?;
    Ok(chosen)
}

/// Creates the output folder `0700`, or refuses the one already there
/// unless it is this user's and no one else can write it
/// ([`OutDirError::NotOurs`]).
pub fn create(path: &Path) -> Result<(), OutDirError> {
    crate::base::private_fs::create_dir(path).map_err(|source| match crate::base::private_fs::not_ours(&source) {
        Some(why) => OutDirError::NotOurs { path: path.to_owned(), why: why.clone() },
        None => OutDirError::Create { path: path.to_owned(), source },
    })
}

/// Chooses and checks the output folder without creating anything.
pub fn choose(out: Option<&Path>, data_dir: &Path) -> Result<PathBuf, OutDirError> {
    let data_dir = resolve(data_dir);
    let chosen = match out {
        Some(o) => resolve(o),
        None => {
            let base = resolve(&default_base()?);
            let is_default_data = default_data_dir().map(|d| resolve(&d)) == Some(data_dir.clone());
            if is_default_data { base } else { base.join(data_subfolder(&data_dir)) }
        }
    };
    if chosen.starts_with(&data_dir) {
        return Err(OutDirError::InsideDataDir { out: chosen, data_dir });
    }
    if let Some(repo) = enclosing_git_repo(&chosen) {
        return Err(OutDirError::InsideGitRepo { out: chosen, repo });
    }
    Ok(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dotdot_and_symlinks_are_resolved_before_the_inside_check() {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        std::fs::create_dir(&data).unwrap();
        let sneaky = tmp.path().join("elsewhere/../data/out");
        assert!(matches!(prepare(Some(&sneaky), &data), Err(OutDirError::InsideDataDir { .. })));
        #[cfg(unix)]
        {
            let link = tmp.path().join("link");
            std::os::unix::fs::symlink(&data, &link).unwrap();
            assert!(matches!(prepare(Some(&link.join("out")), &data), Err(OutDirError::InsideDataDir { .. })));
        }
        assert!(!data.join("out").exists());
    }

    #[test]
    fn a_git_repository_is_found_walking_up() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        let data = tmp.path().join("data");
        std::fs::create_dir(&data).unwrap();
        let err = prepare(Some(&repo.join("a/b/out")), &data).unwrap_err();
        assert!(matches!(err, OutDirError::InsideGitRepo { .. }), "{err}");
        assert!(!repo.join("a").exists());
    }

    #[cfg(unix)]
    #[test]
    fn the_folder_is_created_private() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        std::fs::create_dir(&data).unwrap();
        let out = prepare(Some(&tmp.path().join("out/nested")), &data).unwrap();
        let mode = std::fs::metadata(&out).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o757)).unwrap();
        let err = prepare(Some(&out), &data).unwrap_err();
        assert!(matches!(err, OutDirError::NotOurs { .. }), "{err}");
        assert!(err.to_string().contains(&out.display().to_string()), "{err}");
        assert!(err.to_string().contains("group or others can write it (mode 0757)"), "{err}");
    }
}
