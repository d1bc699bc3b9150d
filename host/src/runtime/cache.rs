//! The compiled-component cache: a component compiled once is kept as
//! native code, keyed by the sha256 of its file and by the engine (wasmtime
//! version and configuration), so a scheduled run does not compile every
//! detector again.
//!
//! The cache lives in a private folder (the output folder's `cache/` by
//! default, `0700`, entries `0600`) that only sentinel writes, because
//! loading native code is only as safe as the file it comes from. A changed
//! component has another sha256 and is compiled again; an entry that cannot
//! be loaded is discarded and replaced. The cache never touches the data dir.

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
}

impl CacheUse {
    /// `off`, `hit`, `miss` or `replaced`, as summaries show it.
    pub fn label(self) -> &'static str {
        match self {
            CacheUse::Off => "off",
            CacheUse::Hit => "hit",
            CacheUse::Miss => "miss",
            CacheUse::Replaced => "replaced",
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
        let engine_key = crate::hex(&h.0.finalize()[..8]);
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
        if entry.is_file() {
            // SAFETY: entries are written only by `store` below, from
            // `Component::serialize` of this engine configuration, into a
            // folder only this user can write (0700).
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
        }
        Ok((component, used))
    }

    fn store(&self, component: &Component, entry: &Path) -> std::io::Result<()> {
        let bytes = component.serialize().map_err(|e| std::io::Error::other(format!("{e:#}")))?;
        crate::private_fs::create_dir(&self.dir)?;
        crate::private_fs::write_atomic(entry, &bytes)
    }
}
