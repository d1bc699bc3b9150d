//! The contract as files: every WIT version this binary speaks, as text and
//! as the binary WIT package (`sentinel-host wit`).
//!
//! Owns: the list of WIT versions the host speaks (the text compiled into
//! the binary from the same files the runtime's bindings are generated
//! from: `wit/detector.wit` for the newest, `wit/since_v<version>/` for each
//! older release), and writing each one out as `<dir>/sentinel-detector-<version>/
//! detector.wit` (a folder any bindings generator takes) and
//! `<dir>/sentinel-detector-<version>.wasm` (the binary encoding `wasm-tools
//! component wit --wasm` makes, through `wit-component`, the crate that tool
//! uses). Never: loading components or checking them (that is
//! [`crate::runtime`]); it never writes outside the folder it is given.

use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::runtime::capabilities::WIT_VERSION;

/// One WIT version the host speaks: its version and its text, exactly as the
/// host's bindings were generated from it.
#[derive(Debug, Clone, Copy)]
pub struct WitVersion {
    pub version: &'static str,
    pub text: &'static str,
}

/// Every WIT version this binary speaks, oldest first.
pub const VERSIONS: &[WitVersion] = &[
    WitVersion { version: "0.1.0", text: include_str!("../../../wit/since_v0.1.0/detector.wit") },
    WitVersion { version: WIT_VERSION, text: include_str!("../../../wit/detector.wit") },
];

#[derive(Debug, Error)]
pub enum WitExportError {
    #[error("the WIT text of sentinel:detector@{version} does not parse")]
    Parse {
        version: &'static str,
        #[source]
        source: anyhow::Error,
    },
    #[error("cannot encode sentinel:detector@{version} as a binary WIT package")]
    Encode {
        version: &'static str,
        #[source]
        source: anyhow::Error,
    },
    #[error("this host does not speak sentinel:detector@{0} (it speaks {spoken})", spoken = crate::runtime::capabilities::spoken())]
    UnknownVersion(String),
    #[error("cannot write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The folder and file a version is written to, under `dir`.
pub fn stem(version: &str) -> String {
    format!("sentinel-detector-{version}")
}

impl WitVersion {
    /// The binary WIT package: a component that holds only the package's
    /// types, the encoding registries carry.
    pub fn encode(&self) -> Result<Vec<u8>, WitExportError> {
        let mut resolve = wit_parser::Resolve::default();
        let pkg = resolve
            .push_str(format!("{}.wit", stem(self.version)), self.text)
            .map_err(|source| WitExportError::Parse { version: self.version, source })?;
        wit_component::encode(&resolve, pkg).map_err(|source| WitExportError::Encode { version: self.version, source })
    }
}

/// Writes every version under `dir` (created if missing) and returns the
/// paths written: per version, the `.wit` file, then the `.wasm` package.
pub fn write_all(dir: &Path) -> Result<Vec<PathBuf>, WitExportError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| WitExportError::Write { path, source }
    };
    let mut written = Vec::new();
    for v in VERSIONS {
        let folder = dir.join(stem(v.version));
        std::fs::create_dir_all(&folder).map_err(io(&folder))?;
        let text = folder.join("detector.wit");
        std::fs::write(&text, v.text).map_err(io(&text))?;
        written.push(text);
        let wasm = dir.join(format!("{}.wasm", stem(v.version)));
        std::fs::write(&wasm, v.encode()?).map_err(io(&wasm))?;
        written.push(wasm);
    }
    Ok(written)
}

/// `sentinel-host wit`: without `out`, the text of `version` (the newest
/// when `None`) to `stdout`; with it, the files [`write_all`] writes for every
/// version, one path a line.
pub fn run(out: Option<&Path>, version: Option<&str>, stdout: &mut impl std::io::Write) -> Result<(), WitExportError> {
    let shown = |source| WitExportError::Write { path: PathBuf::from("<stdout>"), source };
    match out {
        None => {
            let wanted = version.unwrap_or(WIT_VERSION);
            let v = VERSIONS
                .iter()
                .find(|v| v.version == wanted)
                .ok_or_else(|| WitExportError::UnknownVersion(wanted.to_owned()))?;
            stdout.write_all(v.text.as_bytes()).map_err(shown)?;
        }
        Some(dir) => {
            for path in write_all(dir)? {
                writeln!(stdout, "{}", path.display()).map_err(shown)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::capabilities::WIT_PACKAGE;

    #[test]
    fn every_version_names_the_package_and_version_it_is_listed_under() {
        for v in VERSIONS {
            assert!(v.text.contains(&format!("package {WIT_PACKAGE}@{};", v.version)), "{}", v.version);
        }
        assert_eq!(VERSIONS.last().map(|v| v.version), Some(WIT_VERSION), "the newest is the one the runtime binds");
    }

    #[test]
    fn the_binary_package_decodes_back_to_the_same_interfaces() {
        let dir = tempfile::tempdir().unwrap();
        let written = write_all(dir.path()).unwrap();
        assert_eq!(written.len(), 2 * VERSIONS.len());
        let bytes = std::fs::read(dir.path().join(format!("{}.wasm", stem(WIT_VERSION)))).unwrap();
        let decoded = wit_component::decode(&bytes).unwrap();
        let resolve = decoded.resolve();
        let pkg = &resolve.packages[decoded.package()];
        assert_eq!(pkg.name.to_string(), format!("{WIT_PACKAGE}@{WIT_VERSION}"));
        let mut interfaces: Vec<&str> = pkg.interfaces.keys().map(String::as_str).collect();
        interfaces.sort();
        assert_eq!(interfaces, ["detector", "host", "types"]);
        assert!(pkg.worlds.contains_key("detector-world"));
        let text = std::fs::read_to_string(dir.path().join(stem(WIT_VERSION)).join("detector.wit")).unwrap();
        assert_eq!(text, VERSIONS[VERSIONS.len() - 1].text);
    }

    #[test]
    fn every_version_the_runtime_loads_is_exported_and_the_newest_is_printed() {
        let listed: Vec<&str> = VERSIONS.iter().map(|v| v.version).collect();
        assert_eq!(listed, crate::runtime::capabilities::WIT_VERSIONS);
        let mut out = Vec::new();
        run(None, None, &mut out).unwrap();
        assert!(String::from_utf8(out).unwrap().contains(&format!("package {WIT_PACKAGE}@{WIT_VERSION};")));
        let mut out = Vec::new();
        run(None, Some("0.1.0"), &mut out).unwrap();
        assert!(String::from_utf8(out).unwrap().contains("package sentinel:detector@0.1.0;"));
        let err = run(None, Some("9.9.9"), &mut Vec::new()).unwrap_err().to_string();
        assert!(err.contains("@9.9.9") && err.contains("0.1.0 and sentinel:detector@0.2.0"), "{err}");
    }
}
