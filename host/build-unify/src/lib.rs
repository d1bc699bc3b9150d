//! No code: this crate exists for its `Cargo.toml`, which names the features
//! of the WebAssembly tooling crates that wasmtime's macros and sentinel-host
//! both build, so that cargo compiles each of them once (see the manifest).
//!
//! Owns: nothing at run time. Never: code, or a dependency the two sides do
//! not already share.

#[cfg(test)]
mod tests {
    use serde_json::Value;
    use std::process::Command;

    /// The version of `dep` that package `of` resolves to, from `cargo metadata`.
    fn version_of(meta: &Value, of: &str, dep: &str) -> String {
        let packages = meta["packages"].as_array().unwrap();
        let name_of = |id: &str| {
            let p = packages.iter().find(|p| p["id"] == id).unwrap();
            (p["name"].as_str().unwrap().to_owned(), p["version"].as_str().unwrap().to_owned())
        };
        let nodes = meta["resolve"]["nodes"].as_array().unwrap();
        let node =
            nodes.iter().find(|n| name_of(n["id"].as_str().unwrap()).0 == of).unwrap_or_else(|| panic!("no {of}"));
        let found = node["deps"].as_array().unwrap().iter().map(|d| name_of(d["pkg"].as_str().unwrap()));
        found.filter(|(name, _)| name == dep).map(|(_, v)| v).next().unwrap_or_else(|| panic!("{of} has no {dep}"))
    }

    /// The pins in the manifest and in the workspace's `wit-parser` and
    /// `wit-component` are wasmtime's versions: after a wasmtime upgrade that
    /// moved them, this fails instead of the build quietly compiling the
    /// stack twice again (or a third copy, for this crate alone).
    #[test]
    fn the_stack_unified_is_the_one_wasmtime_builds() {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.toml");
        let out = Command::new(cargo)
            .args(["metadata", "--format-version", "1", "--locked", "--manifest-path", manifest])
            .output()
            .unwrap();
        assert!(out.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&out.stderr));
        let meta: Value = serde_json::from_slice(&out.stdout).unwrap();
        let wasmtime_parser = version_of(&meta, "wasmtime-environ", "wasmparser");
        assert_eq!(version_of(&meta, "sentinel-build-unify", "wasmparser"), wasmtime_parser);
        assert_eq!(
            version_of(&meta, "sentinel-build-unify", "wasm-encoder"),
            version_of(&meta, "wasmtime-environ", "wasm-encoder")
        );
        let macro_component = version_of(&meta, "wasmtime-internal-wit-bindgen", "wit-component");
        assert_eq!(version_of(&meta, "sentinel-host", "wit-component"), macro_component);
        assert_eq!(
            version_of(&meta, "sentinel-host", "wit-parser"),
            version_of(&meta, "wasmtime-internal-wit-bindgen", "wit-parser")
        );
    }
}
