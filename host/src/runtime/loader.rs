//! Loading detectors: a file becomes a checked, pre-instantiated component.
//!
//! Loading refuses, with an error naming the file and the reason, anything
//! that is too large, not a component, built against another version of the
//! WIT package, or importing a capability the host does not grant. A loaded
//! detector has described itself once, inside the same sandbox a scan gets.
//! Loading never runs a detector's scan code and never reads the data dir.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Store;
use wasmtime::component::Component;

use super::bindings::{Pre, WitVersion, guest, types};
use super::capabilities::{self, Refusal, WIT_PACKAGE};
use super::sandbox::StoreData;
use super::session::{CallFailure, classify_failure, convert_config_value};
use super::{Runtime, RuntimeError};
use crate::model::failure::Phase;
use crate::model::observation::{ConfigKey, Descriptor, Subscription};

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
    pub(crate) pre: Pre,
}

impl LoadedDetector {
    /// The version of `sentinel:detector` it was built against.
    pub fn wit_version(&self) -> WitVersion {
        self.pre.version()
    }
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
        "detector {path}: built against {WIT_PACKAGE}@{found}, this host speaks {}; rebuild it against wit/ of this release",
        capabilities::spoken()
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
    #[error("detector {path}: name `{name}` is also declared by {other}; both are refused")]
    DuplicateName { path: PathBuf, name: String, other: PathBuf },
    #[error(
        "detector {path}: kind `{kind}` is also emitted by {other}, which is not its port (`<name>_<suffix>`); both are refused"
    )]
    KindClaimed { path: PathBuf, kind: String, other: PathBuf },
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
            | LoadError::DuplicateName { path, .. }
            | LoadError::KindClaimed { path, .. } => path,
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
        let mut out: Vec<Result<LoadedDetector, LoadError>> = files.iter().map(|path| self.load(path)).collect();
        let refusals = shared_refusals(&out.iter().map(|r| r.as_ref().ok()).collect::<Vec<_>>());
        for (i, e) in refusals {
            out[i] = Err(e);
        }
        Ok(out)
    }

    /// Everything about one file, for operators: it never fails, it reports.
    /// The component is compiled once, for both the listing and the checks.
    pub fn inspect(&self, path: &Path) -> Inspection {
        let mut i = Inspection {
            path: path.to_owned(),
            size: std::fs::metadata(path).ok().map(|m| m.len()),
            sha256: std::fs::read(path).ok().map(|b| crate::base::hex(&Sha256::digest(&b))),
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
            Err(e) => i.error = Some(crate::base::errors::error_chain(&e)),
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
        let sha256 = crate::base::hex(&Sha256::digest(&bytes));
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

        // The export names the WIT version the component was built against:
        // the newest, or an older one the host still speaks.
        let prefix = format!("{WIT_PACKAGE}/detector@");
        let exports: Vec<String> = ty.exports(&self.engine).map(|(n, _)| n.to_owned()).collect();
        let found = exports.iter().find_map(|e| e.strip_prefix(&prefix));
        let version = match found.map(|f| (f, WitVersion::parse(f))) {
            Some((_, Some(version))) => version,
            Some((found, None)) => return Err(LoadError::UnsupportedVersion { path: p(), found: found.to_owned() }),
            None => {
                return Err(LoadError::NoDetectorExport {
                    path: p(),
                    expected: capabilities::detector_export(),
                    exports: if exports.is_empty() { "nothing".into() } else { exports.join(", ") },
                });
            }
        };

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
        let pre =
            Pre::new(version, instance_pre).map_err(|e| LoadError::Invalid { path: p(), message: format!("{e:#}") })?;

        let descriptor = self.describe(&pre, path)?;
        Ok(LoadedDetector { path: p(), sha256, size, descriptor, cache, imports, pre })
    }

    fn describe(&self, pre: &Pre, path: &Path) -> Result<Descriptor, LoadError> {
        let label = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let mut store = self.new_store(0);
        let fail = |store: &Store<StoreData>, phase: Phase, e: wasmtime::Error| LoadError::Describe {
            path: path.to_owned(),
            failure: classify_failure(&label, phase, store, &e, &self.limits),
        };
        self.arm(&mut store);
        let world = match pre.instantiate(&mut store) {
            Ok(w) => w,
            Err(e) => return Err(fail(&store, Phase::Instantiate, e)),
        };
        self.arm(&mut store);
        let raw = match world.describe(&mut store) {
            Ok(d) => d,
            Err(e) => return Err(fail(&store, Phase::Describe, e)),
        };
        convert_descriptor(raw).map_err(|message| LoadError::BadDescriptor { path: path.to_owned(), message })
    }
}

/// Replaces each loaded detector named in `refusals` by its refusal.
/// The files refused because they share a name or a kind with another
/// (`loaded[i]` is `None` for a file that did not load): two components
/// declaring one name are both refused, each naming the other (the name keys
/// state and health, so neither may take the other's); then two emitting one
/// kind, unless one is the other's port. Pure: the caller decides what to do
/// with the refusals (the catalog keeps the components loaded, so removing
/// the squatter brings the original back without a reload).
pub fn shared_refusals(loaded: &[Option<&LoadedDetector>]) -> Vec<(usize, LoadError)> {
    let mut live = loaded.to_vec();
    let mut out = Vec::new();
    for (i, e) in name_refusals(&live) {
        out.push((i, e));
    }
    for (i, _) in &out {
        live[*i] = None;
    }
    out.extend(kind_refusals(&live));
    out
}

fn name_refusals(live: &[Option<&LoadedDetector>]) -> Vec<(usize, LoadError)> {
    let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, d) in live.iter().enumerate() {
        if let Some(d) = d {
            by_name.entry(d.descriptor.name.as_str()).or_default().push(i);
        }
    }
    let mut refusals = Vec::new();
    for (name, idx) in by_name.into_iter().filter(|(_, v)| v.len() > 1) {
        for &i in &idx {
            let other =
                idx.iter().find(|&&j| j != i).and_then(|&j| live[j]).map(|d| d.path.clone()).unwrap_or_default();
            let path = live[i].map(|d| d.path.clone()).unwrap_or_default();
            refusals.push((i, LoadError::DuplicateName { path, name: name.to_owned(), other }));
        }
    }
    refusals.sort_by_key(|(i, _)| *i);
    refusals
}

/// Whether detectors named `names` may all emit `kind`: one of them (or the
/// kind itself) is the base `B`, and every other is a port named `B_<suffix>`
/// (`cost` and `cost_py`; `cost_py` and `cost_js` share kind `cost`).
pub fn may_share_kind(kind: &str, names: &[&str]) -> bool {
    std::iter::once(kind)
        .chain(names.iter().copied())
        .any(|base| names.iter().all(|n| *n == base || n.strip_prefix(base).is_some_and(|rest| rest.starts_with('_'))))
}

/// A kind belongs to the detector that emits it: two detectors emitting one
/// kind are both refused unless one is the other's port (see
/// [`may_share_kind`]), so that a component dropped in the folder cannot
/// quietly write another detector's issues.
fn kind_refusals(live: &[Option<&LoadedDetector>]) -> Vec<(usize, LoadError)> {
    let mut by_kind: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, d) in live.iter().enumerate() {
        if let Some(d) = d {
            for kind in &d.descriptor.emits {
                by_kind.entry(kind.as_str()).or_default().push(i);
            }
        }
    }
    let mut refusals: Vec<(usize, LoadError)> = Vec::new();
    let mut kinds: Vec<_> = by_kind.into_iter().filter(|(_, v)| v.len() > 1).collect();
    kinds.sort();
    for (kind, idx) in kinds {
        let names: Vec<&str> = idx.iter().filter_map(|&i| live[i]).map(|d| d.descriptor.name.as_str()).collect();
        if may_share_kind(kind, &names) {
            continue;
        }
        for &i in &idx {
            if refusals.iter().any(|(r, _)| *r == i) {
                continue;
            }
            let other =
                idx.iter().find(|&&j| j != i).and_then(|&j| live[j]).map(|d| d.path.clone()).unwrap_or_default();
            let path = live[i].map(|d| d.path.clone()).unwrap_or_default();
            refusals.push((i, LoadError::KindClaimed { path, kind: kind.to_owned(), other }));
        }
    }
    refusals
}

fn is_identifier(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
}

/// Caps on what a descriptor may declare (docs/sandbox.md).
pub const MAX_EMITS: usize = 32;
pub const MAX_SUBSCRIPTIONS: usize = 32;
pub const MAX_CONFIG_KEYS: usize = 64;
/// Bytes of a config key's doc and of a text default.
pub const MAX_DOC_BYTES: usize = 1024;

/// A version: 1-64 letters, digits and `.+-_` (semver and its build tags).
fn is_version(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'+' | b'-' | b'_'))
}

/// Shown in an error: sanitized and cut, since the descriptor is untrusted.
fn shown(s: &str) -> String {
    let s = crate::base::sanitize::one_line(s);
    s.chars().take(80).collect()
}

fn check_counts(d: &guest::Descriptor) -> Result<(), String> {
    let counts = [
        ("emitted kinds", d.emits.len(), MAX_EMITS),
        ("subscriptions", d.subscriptions.len(), MAX_SUBSCRIPTIONS),
        ("config keys", d.config.len(), MAX_CONFIG_KEYS),
    ];
    for (what, n, max) in counts {
        if n > max {
            return Err(format!("{n} {what}, over the limit of {max}"));
        }
    }
    Ok(())
}

fn convert_descriptor(d: guest::Descriptor) -> Result<Descriptor, String> {
    if !is_identifier(&d.name) {
        return Err(format!("name `{}` must be 1-64 letters, digits, `_`, `-` or `.`", shown(&d.name)));
    }
    if !is_version(&d.version) {
        return Err(format!("version `{}` must be 1-64 letters, digits, `.`, `+`, `-` or `_`", shown(&d.version)));
    }
    check_counts(&d)?;
    if d.emits.is_empty() {
        return Err("it emits no kind".into());
    }
    let mut seen = HashSet::new();
    for kind in &d.emits {
        if !is_identifier(kind) {
            return Err(format!("emitted kind `{}` is not an identifier", shown(kind)));
        }
        if !seen.insert(kind.as_str()) {
            return Err(format!("kind `{kind}` is declared twice"));
        }
    }
    if let Some(bad) = d.subscriptions.iter().find(|s| !is_identifier(&s.source) || !is_identifier(&s.kind)) {
        return Err(format!("subscription `{}`/`{}` is not two identifiers", shown(&bad.source), shown(&bad.kind)));
    }
    let mut config: Vec<ConfigKey> = Vec::new();
    let mut keys = HashSet::new();
    for key in d.config {
        if !is_identifier(&key.name) {
            return Err(format!("config key `{}` is not an identifier", shown(&key.name)));
        }
        if !keys.insert(key.name.clone()) {
            return Err(format!("config key `{}` is declared twice", key.name));
        }
        let default_len = match &key.default {
            types::ConfigValue::Text(t) => t.len(),
            _ => 0,
        };
        if key.doc.len() > MAX_DOC_BYTES || default_len > MAX_DOC_BYTES {
            return Err(format!("config key `{}`: doc or default over {MAX_DOC_BYTES} bytes", key.name));
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
    fn a_port_shares_its_originals_kind_and_a_squatter_does_not() {
        assert!(may_share_kind("cost", &["cost", "cost_py"]));
        assert!(may_share_kind("cost", &["cost_py", "cost_js"]), "two ports of the kind");
        assert!(may_share_kind("queue_wait", &["queue_wait_js", "queue_wait"]));
        assert!(!may_share_kind("tool_error", &["tool_error", "aaa"]));
        assert!(!may_share_kind("tool_error", &["tool_error", "tool_errorx"]), "a port needs the `_`");
        assert!(!may_share_kind("x", &["cost", "cost_py", "other"]));
    }

    #[test]
    fn versions_are_plain_text() {
        assert!(is_version("0.1.0") && is_version("1.2.3-rc.1+build_7"));
        assert!(!is_version("") && !is_version("1\u{1b}[2J") && !is_version("v 1") && !is_version(&"9".repeat(65)));
        assert_eq!(shown("a\u{1b}[2J\u{202e}"), "a\\u{1b}[2J\\u{202e}");
    }

    #[test]
    fn headers_tell_modules_and_junk_from_components() {
        assert_eq!(what_it_is(b"hello world"), Some("no wasm header"));
        assert!(what_it_is(b"\0asm\x01\0\0\0").unwrap().starts_with("a core wasm module"));
        assert_eq!(what_it_is(b"\0asm\x0d\0\x01\0"), None);
    }
}
