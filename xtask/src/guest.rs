//! Building components: the shipped detectors and the hostile test fixtures.
//!
//! A detector folder is written in Rust (it has a `Cargo.toml`), Python (an
//! `app.py`, built with componentize-py), JavaScript (a `detector.js`,
//! built with componentize-js) or C (a `detector.c`, built with clang and
//! wit-component, see `guest/c.rs`, behind xtask's `c` feature). Rust components are built from source with
//! cargo for `wasm32-wasip2` (the target is installed with rustup when
//! missing) in the `guest` profile, into a target dir of their own so a build
//! started from inside a test never waits on the test's own cargo lock. The
//! Python and JavaScript toolchains are pinned in `sdk/python` and `sdk/js`
//! and installed into `target/toolchains` on first use (see [`toolchain`]);
//! their components are kept by a hash of their inputs, so an unchanged
//! detector is not built again. Each built component is then loaded by the
//! real host runtime, so anything the host would refuse fails the build.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

#[cfg(feature = "c")]
pub mod c;
pub mod padding;
pub mod toolchain;

pub const TARGET: &str = "wasm32-wasip2";
pub const PROFILE: &str = "guest";

/// The repository root (the parent of `xtask/`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in the repository").to_owned()
}

fn cargo() -> Command {
    let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    // A build started from a build script or a test must not inherit these
    // (nor the linted test build's wrapper: the components are built as
    // `build-detectors` builds them, so each build reuses the other's).
    for var in ["CARGO_TARGET_DIR", "RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "CARGO_BUILD_TARGET"] {
        c.env_remove(var);
    }
    for var in crate::lints::VARS {
        c.env_remove(var);
    }
    c
}

/// Installs the `wasm32-wasip2` target with rustup when it is missing.
pub fn ensure_wasm_target() -> Result<()> {
    let out = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .context("cannot run `rustup target list --installed`: is rustup installed?")?;
    if String::from_utf8_lossy(&out.stdout).lines().any(|l| l.trim() == TARGET) {
        return Ok(());
    }
    eprintln!("installing the {TARGET} target with rustup");
    let status = Command::new("rustup").args(["target", "add", TARGET]).status().context("cannot run rustup")?;
    if !status.success() {
        bail!("`rustup target add {TARGET}` failed ({status})");
    }
    Ok(())
}

/// Installs rustup components (rustfmt, clippy) when they are missing.
pub fn ensure_components(components: &[&str]) -> Result<()> {
    let out = Command::new("rustup")
        .args(["component", "list", "--installed"])
        .output()
        .context("cannot run `rustup component list --installed`: is rustup installed?")?;
    let installed = String::from_utf8_lossy(&out.stdout).into_owned();
    for c in components {
        if installed.lines().any(|l| l.trim().starts_with(&format!("{c}-")) || l.trim() == *c) {
            continue;
        }
        eprintln!("installing the {c} component with rustup");
        let status = Command::new("rustup").args(["component", "add", c]).status().context("cannot run rustup")?;
        if !status.success() {
            bail!("`rustup component add {c}` failed ({status})");
        }
    }
    Ok(())
}

/// A Rust package that builds to a component: its package name and folder.
#[derive(Debug, Clone)]
pub struct GuestPackage {
    pub name: String,
    pub dir: PathBuf,
}

/// The packages in the folders directly under `parent` that have a Cargo.toml.
pub fn packages_under(parent: &Path) -> Result<Vec<GuestPackage>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(parent).with_context(|| format!("cannot list {}", parent.display()))? {
        let dir = entry?.path();
        let manifest = dir.join("Cargo.toml");
        if !manifest.is_file() {
            continue;
        }
        let text = std::fs::read_to_string(&manifest).with_context(|| format!("cannot read {}", manifest.display()))?;
        let name = text
            .lines()
            .skip_while(|l| l.trim() != "[package]")
            .find_map(|l| {
                l.trim()
                    .strip_prefix("name")
                    .map(|r| r.trim_start_matches([' ', '=']).trim().trim_matches('"').to_owned())
            })
            .with_context(|| format!("{} has no package name", manifest.display()))?;
        out.push(GuestPackage { name, dir });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Builds `packages` of the workspace at `manifest` and returns each
/// package's component path, in the same order.
pub fn build(manifest: &Path, packages: &[GuestPackage], target_dir: &Path) -> Result<Vec<PathBuf>> {
    if packages.is_empty() {
        return Ok(Vec::new());
    }
    ensure_wasm_target()?;
    let mut cmd = cargo();
    cmd.arg("build").arg("--manifest-path").arg(manifest).args(["--target", TARGET, "--profile", PROFILE]);
    cmd.arg("--target-dir").arg(target_dir);
    for p in packages {
        cmd.args(["-p", &p.name]);
    }
    let status = cmd.status().context("cannot run cargo")?;
    if !status.success() {
        bail!("building {} for {TARGET} failed ({status})", names(packages));
    }
    let out_dir = target_dir.join(TARGET).join(PROFILE);
    packages
        .iter()
        .map(|p| {
            let path = out_dir.join(format!("{}.wasm", p.name.replace('-', "_")));
            if path.is_file() { Ok(path) } else { bail!("{} built no component at {}", p.name, path.display()) }
        })
        .collect()
}

/// Builds every package of the workspace in `workspace` as a plain core
/// wasm module: for the same target and in the same profile as a component,
/// with the linker's component step skipped (`wasm-component-ld
/// --skip-wit-component`), so the code, its libc and its allocator are what
/// a component of it runs. The benchmark's canonical-ABI peers are built so
/// (`bench/peer/`). Returns the folder that holds the modules.
pub fn build_core_modules(workspace: &Path, target_dir: &Path) -> Result<PathBuf> {
    ensure_wasm_target()?;
    let mut cmd = cargo();
    cmd.arg("build").arg("--manifest-path").arg(workspace.join("Cargo.toml")).arg("--workspace");
    cmd.args(["--target", TARGET, "--profile", PROFILE]).arg("--target-dir").arg(target_dir);
    cmd.arg("--config").arg(format!("target.{TARGET}.rustflags=[\"-Clink-arg=--skip-wit-component\"]"));
    let status = cmd.status().context("cannot run cargo")?;
    if !status.success() {
        bail!("building the core modules of {} failed ({status})", workspace.display());
    }
    Ok(target_dir.join(TARGET).join(PROFILE))
}

fn names(p: &[GuestPackage]) -> String {
    p.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", ")
}

/// A component placed in a detectors folder.
#[derive(Debug, Clone)]
pub struct Built {
    pub name: String,
    pub lang: Lang,
    pub path: PathBuf,
    pub size: u64,
    pub sha256: String,
}

/// The language a detector folder is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    Rust,
    Python,
    Js,
    C,
}

impl Lang {
    pub const ALL: [Lang; 4] = [Lang::Rust, Lang::Python, Lang::Js, Lang::C];

    /// The file that marks a detector folder of this language.
    pub fn marker(self) -> &'static str {
        match self {
            Lang::Rust => "Cargo.toml",
            Lang::Python => "app.py",
            Lang::Js => "detector.js",
            Lang::C => "detector.c",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Python => "python",
            Lang::Js => "js",
            Lang::C => "c",
        }
    }
}

impl std::str::FromStr for Lang {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "rust" => Ok(Lang::Rust),
            "python" | "py" => Ok(Lang::Python),
            "js" | "javascript" => Ok(Lang::Js),
            "c" => Ok(Lang::C),
            other => Err(format!("unknown language `{other}` (rust, python, js or c)")),
        }
    }
}

/// One detector folder under `detectors/`: the component name (which is the
/// file name of `<name>.wasm`), its folder and its language.
#[derive(Debug, Clone)]
pub struct DetectorSource {
    pub name: String,
    pub dir: PathBuf,
    pub lang: Lang,
}

/// Every detector folder directly under `parent`, by name. A Rust detector is
/// named after its package, the others after their folder (`-` becomes `_`).
pub fn detectors_under(parent: &Path) -> Result<Vec<DetectorSource>> {
    let mut out: Vec<DetectorSource> = packages_under(parent)?
        .into_iter()
        .map(|p| DetectorSource { name: p.name.replace('-', "_"), dir: p.dir, lang: Lang::Rust })
        .collect();
    for entry in std::fs::read_dir(parent).with_context(|| format!("cannot list {}", parent.display()))? {
        let dir = entry?.path();
        for lang in [Lang::Python, Lang::Js, Lang::C] {
            if dir.join(lang.marker()).is_file() && !dir.join("Cargo.toml").is_file() {
                let folder = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                out.push(DetectorSource { name: folder.replace('-', "_"), dir: dir.clone(), lang });
            }
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    if let Some(w) = out.windows(2).find(|w| w[0].name == w[1].name) {
        bail!(
            "{} and {} both build {}.wasm: one detector per folder, named after it",
            w[0].dir.display(),
            w[1].dir.display(),
            w[0].name
        );
    }
    Ok(out)
}

/// Where a build keeps what it makes and what it installs.
#[derive(Debug, Clone)]
pub struct BuildOptions {
    /// The cargo target folder: Rust components under `guest/`, Python and
    /// JavaScript components under `guest-other/`, toolchains under
    /// `toolchains/`.
    pub target_dir: PathBuf,
    /// The compiled-component cache the load check fills (the host's
    /// `--cache-dir`), so a scan with the same cache starts without compiling.
    pub cache_dir: Option<PathBuf>,
}

impl BuildOptions {
    /// `target/` of the repository at `root`, and the user cache folder the
    /// host uses by default (so the first scan after a build starts warm);
    /// `target/component-cache/` when there is no user cache folder.
    pub fn for_repo(root: &Path) -> Self {
        let target_dir = root.join("target");
        let cache =
            sentinel_host::base::out_dir::user_cache_dir().unwrap_or_else(|| target_dir.join("component-cache"));
        BuildOptions { cache_dir: Some(cache), target_dir }
    }
}

/// Builds every shipped detector under `detectors/` and copies each to
/// `dest/<name>.wasm`. Each one is then loaded by the host runtime; a
/// component the host would refuse fails the build with the host's reason.
pub fn build_detectors(root: &Path, dest: &Path) -> Result<Vec<Built>> {
    build_detectors_with(root, dest, &BuildOptions::for_repo(root))
}

/// [`build_detectors`] with the build folders given.
pub fn build_detectors_with(root: &Path, dest: &Path, opts: &BuildOptions) -> Result<Vec<Built>> {
    build_detectors_in(root, dest, opts, &Lang::ALL)
}

/// [`build_detectors_with`], only the detectors written in one of `langs`
/// (the demo shows the Rust ones first).
pub fn build_detectors_in(root: &Path, dest: &Path, opts: &BuildOptions, langs: &[Lang]) -> Result<Vec<Built>> {
    let mut sources = detectors_under(&root.join("detectors"))?;
    sources.retain(|s| langs.contains(&s.lang));
    let mut rust: Vec<GuestPackage> = packages_under(&root.join("detectors"))?;
    rust.retain(|p| sources.iter().any(|s| s.dir == p.dir));
    let rust_built = build(&root.join("Cargo.toml"), &rust, &opts.target_dir.join("guest"))?;
    let mut components: Vec<(DetectorSource, PathBuf)> = Vec::new();
    for src in &sources {
        let path = match src.lang {
            Lang::Rust => rust
                .iter()
                .zip(&rust_built)
                .find(|(p, _)| p.dir == src.dir)
                .map(|(_, path)| path.clone())
                .with_context(|| format!("{} was not built", src.name))?,
            Lang::Python | Lang::Js => toolchain::build_component(root, src, &opts.target_dir)?,
            Lang::C => build_c(root, src, &opts.target_dir)?,
        };
        components.push((src.clone(), path));
    }
    std::fs::create_dir_all(dest).with_context(|| format!("cannot create {}", dest.display()))?;
    // The load check is about what the host refuses for what a component
    // imports and declares, under the product's limits but for the deadline:
    // a language runtime's `describe` on a machine busy compiling has taken
    // over 100 ms, and a build must not fail for the machine's load (the
    // benchmark measures time).
    let limits = sentinel_host::runtime::Limits {
        deadline: std::time::Duration::from_secs(60),
        ..sentinel_host::runtime::Limits::default()
    };
    let mut runtime = sentinel_host::runtime::Runtime::new(limits)?;
    if let Some(cache) = &opts.cache_dir {
        runtime = runtime.with_cache(cache.clone());
    }
    let mut out = Vec::new();
    for (src_dir, src) in components {
        let name = src_dir.name;
        let path = dest.join(format!("{name}.wasm"));
        let tmp = dest.join(format!(".{name}.wasm.tmp"));
        std::fs::copy(&src, &tmp).with_context(|| format!("cannot copy {} to {}", src.display(), tmp.display()))?;
        std::fs::rename(&tmp, &path)?;
        let loaded = match runtime.load(&path) {
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                return Err(anyhow::Error::new(e).context(format!("detector {name} would be refused by the host")));
            }
            Ok(loaded) if loaded.descriptor.name != name => {
                let _ = std::fs::remove_file(&path);
                bail!(
                    "detector folder {} builds {name}.wasm but describes itself as `{}`: name the folder after the detector",
                    src_dir.dir.display(),
                    loaded.descriptor.name
                );
            }
            Ok(loaded) => loaded,
        };
        // The load read and hashed the file already.
        out.push(Built { name, lang: src_dir.lang, path, size: loaded.size, sha256: loaded.sha256 });
    }
    Ok(out)
}

#[cfg(feature = "c")]
fn build_c(root: &Path, src: &DetectorSource, target_dir: &Path) -> Result<PathBuf> {
    c::build_component(root, src, target_dir)
}

/// Without the `c` feature (Cargo.toml) there is no C bindings generator to
/// build with: `cargo xtask` runs itself again with it before it gets here.
#[cfg(not(feature = "c"))]
fn build_c(_root: &Path, src: &DetectorSource, _target_dir: &Path) -> Result<PathBuf> {
    bail!(
        "{} is written in C: build it with xtask's `c` feature (cargo run -p xtask --features c -- build-detectors)",
        src.name
    )
}

/// Builds the hostile and helper fixtures of `tests/guests` and returns
/// `(package name, component path)` pairs. They are not checked: some exist
/// precisely to be refused.
pub fn build_fixtures(root: &Path) -> Result<Vec<(String, PathBuf)>> {
    let guests = root.join("tests").join("guests");
    let packages = packages_under(&guests)?;
    let target = root.join("target").join("guest-fixtures");
    let built = build(&guests.join("Cargo.toml"), &packages, &target)?;
    packages
        .into_iter()
        .zip(built)
        .map(|(p, path)| match padding::requested(&p.dir.join("Cargo.toml"))? {
            Some(pad) => {
                let dest = target.join("padded").join(path.file_name().context("a component file name")?);
                Ok((p.name, padding::pad(&path, pad, &dest)?))
            }
            None => Ok((p.name, path)),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_folders_building_one_name_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        for (folder, file) in [("a-b", "app.py"), ("a_b", "detector.js")] {
            std::fs::create_dir_all(dir.path().join(folder)).unwrap();
            std::fs::write(dir.path().join(folder).join(file), "").unwrap();
        }
        let e = detectors_under(dir.path()).unwrap_err().to_string();
        assert!(e.contains("both build a_b.wasm"), "{e}");
        // One folder each: fine.
        std::fs::remove_dir_all(dir.path().join("a_b")).unwrap();
        let found = detectors_under(dir.path()).unwrap();
        assert_eq!((found.len(), found[0].name.as_str(), found[0].lang), (1, "a_b", Lang::Python));
    }
}
