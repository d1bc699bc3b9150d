//! Loading detectors: a file becomes a checked, pre-instantiated component.
//!
//! Loading refuses, with an error naming the file and the reason, anything
//! that is too large, not a component, built against another version of the
//! WIT package, or importing a capability the host does not grant. A loaded
//! detector has described itself once, inside the same sandbox a scan gets.
//! Loading never runs a detector's scan code and never reads the data dir.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Store;
use wasmtime::component::Component;

use super::bindings::{DetectorWorldPre, guest, types};
use super::capabilities::{self, Refusal, WIT_PACKAGE, WIT_VERSION};
use super::sandbox::StoreData;
use super::session::{CallFailure, Phase, classify_failure, convert_config_value};
use super::{Runtime, RuntimeError};
use crate::observation::{ConfigKey, Descriptor, Subscription};

/// The detector files of a folder: every `*.wasm` file directly in it, in
/// name order (the order they load and run in).
pub fn detector_files(dir: &Path) -> Result<Vec<PathBuf>, RuntimeError> {
    let entries =
        std::fs::read_dir(dir).map_err(|source| RuntimeError::DetectorsDir { path: dir.to_owned(), source })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "wasm") && p.is_file())
        .collect();
    files.sort();
    Ok(files)
}

/// A detector ready to scan: its component pre-instantiated against the
/// host's linker, and what it said about itself.
pub struct LoadedDetector {
    pub path: PathBuf,
    pub sha256: String,
    pub size: u64,
    pub descriptor: Descriptor,
    /// Whether the compiled code came from the cache.
    pub cache: super::CacheUse,
    /// Every import of the component, with how the host grants it.
    pub imports: Vec<(String, capabilities::Grant)>,
    pub(crate) pre: DetectorWorldPre<StoreData>,
}

impl std::fmt::Debug for LoadedDetector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedDetector")
            .field("path", &self.path)
            .field("descriptor", &self.descriptor)
            .finish_non_exhaustive()
    }
}

/// Why a file could not be loaded as a detector.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("detector {path}: cannot read the file")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("detector {path}: component is {size} bytes, over the limit of {limit}")]
    TooLarge { path: PathBuf, size: u64, limit: u64 },
    #[error("detector {path}: not a WebAssembly component ({what})")]
    NotAComponent { path: PathBuf, what: &'static str },
    #[error("detector {path}: invalid component: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error(
        "detector {path}: built against {WIT_PACKAGE}@{found}, this host speaks {WIT_PACKAGE}@{WIT_VERSION}; rebuild it against wit/ of this release"
    )]
    UnsupportedVersion { path: PathBuf, found: String },
    #[error("detector {path}: exports no `{expected}` (it exports: {exports})")]
    NoDetectorExport { path: PathBuf, expected: String, exports: String },
    #[error("detector {path}: refused at load: {}", refusals(.refused))]
    RefusedImports { path: PathBuf, refused: Vec<(String, Refusal)> },
    #[error("detector {path}: describe failed")]
    Describe {
        path: PathBuf,
        #[source]
        failure: CallFailure,
    },
    #[error("detector {path}: invalid descriptor: {message}")]
    BadDescriptor { path: PathBuf, message: String },
    #[error("detector {path}: name `{name}` is already taken by {other}")]
    DuplicateName { path: PathBuf, name: String, other: PathBuf },
}

impl LoadError {
    pub fn path(&self) -> &Path {
        match self {
            LoadError::Read { path, .. }
            | LoadError::TooLarge { path, .. }
            | LoadError::NotAComponent { path, .. }
            | LoadError::Invalid { path, .. }
            | LoadError::UnsupportedVersion { path, .. }
            | LoadError::NoDetectorExport { path, .. }
            | LoadError::RefusedImports { path, .. }
            | LoadError::Describe { path, .. }
            | LoadError::BadDescriptor { path, .. }
            | LoadError::DuplicateName { path, .. } => path,
        }
    }
}

fn refusals(refused: &[(String, Refusal)]) -> String {
    refused.iter().map(|(import, reason)| format!("import `{import}` ({reason})")).collect::<Vec<_>>().join(", ")
}

/// What `sentinel-host detectors inspect` shows about one file, whether or
/// not it loads.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Inspection {
    pub path: PathBuf,
    pub size: Option<u64>,
    pub sha256: Option<String>,
    /// The version of `sentinel:detector` it exports, if any.
    pub wit_version: Option<String>,
    /// Every import with the host's verdict: `granted`, `virtualised` or
    /// `refused: <rule>`.
    pub imports: Vec<(String, String)>,
    pub descriptor: Option<Descriptor>,
    /// Whether its compiled code came from the cache: `hit`, `miss`,
    /// `replaced` or `off`; absent when it did not compile.
    pub cache: Option<&'static str>,
    /// Why it does not load, if it does not.
    pub error: Option<String>,
}

/// A component compiled from a file, not yet checked.
struct Compiled {
    size: u64,
    sha256: String,
    component: Component,
    cache: super::CacheUse,
}

/// Names a byte string that is not a component.
fn what_it_is(bytes: &[u8]) -> Option<&'static str> {
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Some("no wasm header");
    }
    match bytes[4..8] {
        [0x0d, 0x00, 0x01, 0x00] => None,
        [0x01, 0x00, 0x00, 0x00] => Some("a core wasm module; build for wasm32-wasip2 to get a component"),
        _ => Some("an unknown wasm encoding"),
    }
}

impl Runtime {
    /// Loads every `*.wasm` file directly inside `dir`, in name order. One bad
    /// file never stops the others: each gets its own result.
    pub fn load_dir(&self, dir: &Path) -> Result<Vec<Result<LoadedDetector, LoadError>>, RuntimeError> {
        let files = detector_files(dir)?;
        let mut out: Vec<Result<LoadedDetector, LoadError>> = Vec::with_capacity(files.len());
        for path in files {
            let loaded = self.load(&path).and_then(|d| {
                let taken = out.iter().flatten().find(|o| o.descriptor.name == d.descriptor.name);
                match taken {
                    Some(other) => Err(LoadError::DuplicateName {
                        path: path.clone(),
                        name: d.descriptor.name.clone(),
                        other: other.path.clone(),
                    }),
                    None => Ok(d),
                }
            });
            out.push(loaded);
        }
        Ok(out)
    }

    /// Everything about one file, for operators: it never fails, it reports.
    /// The component is compiled once, for both the listing and the checks.
    pub fn inspect(&self, path: &Path) -> Inspection {
        let mut i = Inspection {
            path: path.to_owned(),
            size: std::fs::metadata(path).ok().map(|m| m.len()),
            sha256: std::fs::read(path).ok().map(|b| crate::hex(&Sha256::digest(&b))),
            wit_version: None,
            imports: Vec::new(),
            descriptor: None,
            cache: None,
            error: None,
        };
        let checked = self.compile(path).and_then(|compiled| {
            i.cache = Some(compiled.cache.label());
            let ty = compiled.component.component_type();
            let prefix = format!("{WIT_PACKAGE}/detector@");
            i.wit_version = ty.exports(&self.engine).find_map(|(n, _)| n.strip_prefix(&prefix).map(str::to_owned));
            i.imports = ty
                .imports(&self.engine)
                .map(|(name, _)| {
                    let verdict = match capabilities::classify(name) {
                        Ok(capabilities::Grant::AsIs) => "granted".to_owned(),
                        Ok(capabilities::Grant::Virtualised) => "virtualised".to_owned(),
                        Err(reason) => format!("refused: {reason}"),
                    };
                    (name.to_owned(), verdict)
                })
                .collect();
            self.check(path, compiled)
        });
        match checked {
            Ok(d) => i.descriptor = Some(d.descriptor),
            Err(e) => i.error = Some(crate::errors::error_chain(&e)),
        }
        i
    }

    /// Loads and checks one component file.
    pub fn load(&self, path: &Path) -> Result<LoadedDetector, LoadError> {
        let compiled = self.compile(path)?;
        self.check(path, compiled)
    }

    /// Reads, checks the header and size, and compiles (through the cache).
    fn compile(&self, path: &Path) -> Result<Compiled, LoadError> {
        let p = || path.to_owned();
        let meta = std::fs::metadata(path).map_err(|source| LoadError::Read { path: p(), source })?;
        if meta.len() > self.limits.component_bytes {
            return Err(LoadError::TooLarge { path: p(), size: meta.len(), limit: self.limits.component_bytes });
        }
        let bytes = std::fs::read(path).map_err(|source| LoadError::Read { path: p(), source })?;
        if let Some(what) = what_it_is(&bytes) {
            return Err(LoadError::NotAComponent { path: p(), what });
        }
        let sha256 = crate::hex(&Sha256::digest(&bytes));
        let (component, cache) = match &self.cache {
            Some(c) => c.load(&self.engine, &sha256, &bytes),
            None => Component::new(&self.engine, &bytes).map(|c| (c, super::CacheUse::Off)),
        }
        .map_err(|e| LoadError::Invalid { path: p(), message: format!("{e:#}") })?;
        Ok(Compiled { size: meta.len(), sha256, component, cache })
    }

    /// The checks after compiling: WIT version, imports, `describe`.
    fn check(&self, path: &Path, compiled: Compiled) -> Result<LoadedDetector, LoadError> {
        let p = || path.to_owned();
        let Compiled { size, sha256, component, cache } = compiled;
        let ty = component.component_type();

        // The export names the WIT version the component was built against.
        let expected = capabilities::detector_export();
        let prefix = format!("{WIT_PACKAGE}/detector@");
        let exports: Vec<String> = ty.exports(&self.engine).map(|(n, _)| n.to_owned()).collect();
        if !exports.contains(&expected) {
            if let Some(found) = exports.iter().find_map(|e| e.strip_prefix(&prefix)) {
                return Err(LoadError::UnsupportedVersion { path: p(), found: found.to_owned() });
            }
            return Err(LoadError::NoDetectorExport {
                path: p(),
                expected,
                exports: if exports.is_empty() { "nothing".into() } else { exports.join(", ") },
            });
        }

        let mut imports = Vec::new();
        let mut refused = Vec::new();
        for (name, _) in ty.imports(&self.engine) {
            match capabilities::classify(name) {
                Ok(grant) => imports.push((name.to_owned(), grant)),
                Err(reason) => refused.push((name.to_owned(), reason)),
            }
        }
        if !refused.is_empty() {
            return Err(LoadError::RefusedImports { path: p(), refused });
        }

        let instance_pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(|e| LoadError::Invalid { path: p(), message: format!("{e:#}") })?;
        let pre = DetectorWorldPre::new(instance_pre)
            .map_err(|e| LoadError::Invalid { path: p(), message: format!("{e:#}") })?;

        let descriptor = self.describe(&pre, path)?;
        Ok(LoadedDetector { path: p(), sha256, size, descriptor, cache, imports, pre })
    }

    fn describe(&self, pre: &DetectorWorldPre<StoreData>, path: &Path) -> Result<Descriptor, LoadError> {
        let label = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let mut store = self.new_store(0);
        let fail = |store: &Store<StoreData>, e: wasmtime::Error| LoadError::Describe {
            path: path.to_owned(),
            failure: classify_failure(&label, Phase::Describe, store, &e, &self.limits),
        };
        self.arm(&mut store);
        let world = match pre.instantiate(&mut store) {
            Ok(w) => w,
            Err(e) => return Err(fail(&store, e)),
        };
        self.arm(&mut store);
        let raw = match world.sentinel_detector_detector().call_describe(&mut store) {
            Ok(d) => d,
            Err(e) => return Err(fail(&store, e)),
        };
        convert_descriptor(raw).map_err(|message| LoadError::BadDescriptor { path: path.to_owned(), message })
    }

    /// A fresh sandboxed store with the runtime's limits.
    pub(crate) fn new_store(&self, scan_time_ms: i64) -> Store<StoreData> {
        let mut store = Store::new(&self.engine, StoreData::new(&self.limits, scan_time_ms));
        store.limiter(|d| &mut d.limiter);
        store.epoch_deadline_trap();
        store
    }

    /// Refills fuel and restarts the deadline before a call.
    pub(crate) fn arm(&self, store: &mut Store<StoreData>) {
        // set_fuel only fails when fuel is not enabled, and it always is.
        let _ = store.set_fuel(self.limits.fuel_per_call);
        store.set_epoch_deadline(self.deadline_ticks());
    }
}

fn is_identifier(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
}

fn convert_descriptor(d: guest::Descriptor) -> Result<Descriptor, String> {
    if !is_identifier(&d.name) {
        return Err(format!("name `{}` must be 1-64 letters, digits, `_`, `-` or `.`", d.name.escape_debug()));
    }
    if d.emits.is_empty() {
        return Err("it emits no kind".into());
    }
    if let Some(bad) = d.emits.iter().find(|k| !is_identifier(k)) {
        return Err(format!("emitted kind `{}` is not an identifier", bad.escape_debug()));
    }
    let mut config: Vec<ConfigKey> = Vec::new();
    for key in d.config {
        if config.iter().any(|k| k.name == key.name) {
            return Err(format!("config key `{}` is declared twice", key.name));
        }
        config.push(ConfigKey { name: key.name, doc: key.doc, default: convert_config_value(key.default) });
    }
    Ok(Descriptor {
        name: d.name,
        version: d.version,
        emits: d.emits,
        subscriptions: d
            .subscriptions
            .into_iter()
            .map(|s: types::Subscription| Subscription { source: s.source, kind: s.kind })
            .collect(),
        config,
        cadence_seconds: d.cadence_seconds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_tell_modules_and_junk_from_components() {
        assert_eq!(what_it_is(b"hello world"), Some("no wasm header"));
        assert!(what_it_is(b"\0asm\x01\0\0\0").unwrap().starts_with("a core wasm module"));
        assert_eq!(what_it_is(b"\0asm\x0d\0\x01\0"), None);
    }
}
