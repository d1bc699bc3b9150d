//! The compiled-component cache: a component compiled once is kept as
//! native code, keyed by the sha256 of its file and by the engine (wasmtime
//! version and configuration), so a scheduled run does not compile every
//! detector again.
//!
//! The cache lives in a private folder (the per-OS user cache folder by
//! default, shared by every output folder: `out_dir::cache_dir`; `0700`,
//! entries `0600`) that only sentinel writes, because
//! loading native code is only as safe as the file it comes from. A changed
//! component has another sha256 and is compiled again; an entry that cannot
//! be loaded is discarded and replaced. A component compiled here is used
//! as mapped from the entry just stored, as a cached one is: its code stays
//! file-backed. The cache never touches the data dir.
//!
//! Trust is checked, not assumed: an entry is loaded only when the folder and
//! the entry are what `lstat` says they are (a real folder and a regular file,
//! not symbolic links), belong to the current user, and are writable by
//! nobody else. Anything else is never deserialized: the component is
//! compiled from its file instead (`distrusted`), and nothing is stored into
//! a folder that is not trusted.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// Feeds `Hash` into sha256, so the key is stable across processes.
struct ShaHasher(Sha256);

impl Hasher for ShaHasher {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

/// What the cache did for one component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheUse {
    /// No cache configured.
    Off,
    Hit,
    /// Compiled, and stored for next time.
    Miss,
    /// An entry was there but could not be loaded: discarded, compiled again.
    Replaced,
    /// The folder or the entry failed the ownership and permission check:
    /// compiled from the file, the cache left alone.
    Distrusted,
}

impl CacheUse {
    /// `off`, `hit`, `miss` or `replaced`, as summaries show it.
    pub fn label(self) -> &'static str {
        match self {
            CacheUse::Off => "off",
            CacheUse::Hit => "hit",
            CacheUse::Miss => "miss",
            CacheUse::Replaced => "replaced",
            CacheUse::Distrusted => "distrusted",
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct ComponentCache {
    dir: PathBuf,
    engine_key: String,
}

impl ComponentCache {
    pub(crate) fn new(engine: &Engine, dir: PathBuf) -> Self {
        let mut h = ShaHasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut h);
        env!("CARGO_PKG_VERSION").hash(&mut h);
        let engine_key = crate::base::hex(&h.0.finalize()[..8]);
        ComponentCache { dir, engine_key }
    }

    fn entry(&self, sha256: &str) -> PathBuf {
        self.dir.join(format!("{sha256}-{}.cwasm", self.engine_key))
    }

    /// The compiled component for `bytes` (whose sha256 is given), from the
    /// cache when possible. Cache trouble never fails a load: it only costs a
    /// compilation.
    pub(crate) fn load(&self, engine: &Engine, sha256: &str, bytes: &[u8]) -> wasmtime::Result<(Component, CacheUse)> {
        let entry = self.entry(sha256);
        let mut used = CacheUse::Miss;
        if let Err(why) = trusted(&self.dir, true) {
            tracing::warn!(dir = %self.dir.display(), why, "not using the component cache");
            return Ok((Component::new(engine, bytes)?, CacheUse::Distrusted));
        }
        let present = std::fs::symlink_metadata(&entry).is_ok();
        if present && let Err(why) = trusted(&entry, false) {
            tracing::warn!(entry = %entry.display(), why, "not loading a cache entry");
            // The folder is ours: the entry can be replaced by a good one.
            let _ = std::fs::remove_file(&entry);
            let component = Component::new(engine, bytes)?;
            let _ = self.store(&component, &entry);
            return Ok((component, CacheUse::Distrusted));
        }
        if present {
            // SAFETY: entries are written only by `store` below, from
            // `Component::serialize` of this engine configuration, into a
            // folder only this user can write (0700); `trusted` checked just
            // now that the folder and the entry are still so.
            match unsafe { Component::deserialize_file(engine, &entry) } {
                Ok(c) => return Ok((c, CacheUse::Hit)),
                Err(e) => {
                    tracing::warn!(entry = %entry.display(), error = %e, "discarding a cache entry that cannot be loaded");
                    let _ = std::fs::remove_file(&entry);
                    used = CacheUse::Replaced;
                }
            }
        }
        let component = Component::new(engine, bytes)?;
        if let Err(e) = self.store(&component, &entry) {
            tracing::warn!(entry = %entry.display(), error = %e, "cannot store a compiled component");
            return Ok((component, used));
        }
        Ok((self.mapped(engine, &entry).unwrap_or(component), used))
    }

    /// The entry just stored, mapped from its file: the compiled code is
    /// then file-backed pages the kernel can share and drop, and memories
    /// start as copy-on-write images of the file, where the component
    /// compiled in this process would hold its code (hundreds of MB for the
    /// Python and JavaScript detectors) in anonymous memory for as long as
    /// the long-running mode keeps it loaded.
    fn mapped(&self, engine: &Engine, entry: &Path) -> Option<Component> {
        trusted(&self.dir, true).ok()?;
        trusted(entry, false).ok()?;
        // SAFETY: `store` just wrote this entry from `Component::serialize`
        // of this engine configuration into a folder only this user can
        // write; `trusted` checked the folder and the entry again just now.
        unsafe { Component::deserialize_file(engine, entry) }
            .inspect_err(|e| tracing::warn!(entry = %entry.display(), error = %e, "cannot map a stored component"))
            .ok()
    }

    fn store(&self, component: &Component, entry: &Path) -> std::io::Result<()> {
        if std::fs::symlink_metadata(&self.dir).is_ok() && trusted(&self.dir, true).is_err() {
            return Err(std::io::Error::other("the cache folder is not trusted"));
        }
        let bytes = component.serialize().map_err(|e| std::io::Error::other(format!("{e:#}")))?;
        crate::base::private_fs::create_dir(&self.dir)?;
        crate::base::private_fs::write_atomic(entry, &bytes)
    }
}

/// Whether `path` may be trusted: the right type (not a link), owned by the
/// current user, writable by no one else. A folder that does not exist yet
/// is trusted (it will be created private).
fn trusted(path: &Path, dir: bool) -> Result<(), &'static str> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if dir && e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(_) => return Err("cannot be read"),
    };
    if meta.file_type().is_symlink() {
        return Err("is a symbolic link");
    }
    if dir != meta.is_dir() || (!dir && !meta.is_file()) {
        return Err(if dir { "is not a folder" } else { "is not a regular file" });
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        if meta.uid() != me {
            return Err("belongs to another user");
        }
        if meta.mode() & 0o022 != 0 {
            return Err("is writable by group or others");
        }
    }
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn only_private_real_entries_of_ours_are_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        assert!(trusted(&cache, true).is_ok(), "a folder not made yet");
        std::fs::create_dir(&cache).unwrap();
        std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(trusted(&cache, true).is_ok());
        let entry = cache.join("e.cwasm");
        std::fs::write(&entry, b"x").unwrap();
        std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(trusted(&entry, false).is_ok());
        std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert_eq!(trusted(&entry, false), Err("is writable by group or others"));
        std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert_eq!(trusted(&cache, true), Err("is writable by group or others"));
        let link = dir.path().join("link.cwasm");
        std::os::unix::fs::symlink(&entry, &link).unwrap();
        assert_eq!(trusted(&link, false), Err("is a symbolic link"));
        assert_eq!(trusted(&entry, true), Err("is not a folder"));
    }
}
