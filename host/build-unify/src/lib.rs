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

    /// The output of `cargo <args>` on the workspace, which must succeed.
    fn cargo(args: &[&str]) -> String {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.toml");
        let out = Command::new(cargo).args(args).args(["--locked", "--manifest-path", manifest]).output().unwrap();
        assert!(out.status.success(), "cargo {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    fn metadata() -> Value {
        serde_json::from_str(&cargo(&["metadata", "--format-version", "1"])).unwrap()
    }

    /// `cargo tree` of the workspace, one `name vX.Y.Z|features` line per node.
    fn tree(args: &[&str]) -> Vec<String> {
        let args = [&["tree", "--prefix", "none", "-f", "{p}|{f}"][..], args].concat();
        cargo(&args).lines().map(str::to_owned).collect()
    }

    /// `name vX.Y.Z` and the features of one tree line (less the `(*)` of a
    /// node shown before).
    fn node(line: &str) -> (String, String) {
        let (package, features) = line.split_once('|').unwrap();
        let features = features.trim().trim_end_matches("(*)").trim();
        (package.split_whitespace().take(2).collect::<Vec<_>>().join(" "), features.to_owned())
    }

    /// What the crate is for: every crate wit-component needs appears in
    /// sentinel-host's build (its dependencies and wasmtime's macros alike)
    /// with one feature set, so cargo compiles it once. `cargo tree` resolves
    /// the macros' side apart as cargo does; without the build dependency on
    /// this crate, several show two (serde, serde_json, wasmparser, ...).
    #[test]
    fn each_crate_of_the_stack_is_built_with_one_feature_set() {
        let component = format!("wit-component@{}", version_of(&metadata(), "sentinel-host", "wit-component"));
        let stack: std::collections::BTreeSet<String> =
            tree(&["-p", &component, "-e", "normal"]).iter().map(|l| node(l).0).collect();
        let mut features: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> = Default::default();
        for (package, f) in tree(&["-p", "sentinel-host", "-e", "normal,build"]).iter().map(|l| node(l)) {
            features.entry(package).or_default().insert(f);
        }
        assert!(stack.len() > 10, "the stack read: {stack:?}");
        let twice: Vec<_> = stack.iter().filter(|p| features.get(*p).is_some_and(|f| f.len() > 1)).collect();
        assert!(
            twice.is_empty(),
            "built twice, with different features: {:?}",
            twice.iter().map(|p| (p, &features[*p])).collect::<Vec<_>>()
        );
    }

    /// The pins in the manifest and in the workspace's `wit-parser` and
    /// `wit-component` are wasmtime's versions: after a wasmtime upgrade that
    /// moved them, this fails instead of the build quietly compiling the
    /// stack twice again (or a third copy, for this crate alone).
    #[test]
    fn the_stack_unified_is_the_one_wasmtime_builds() {
        let meta = metadata();
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
