//! Building components: the shipped detectors and the hostile test fixtures.
//!
//! Every component is built from source with cargo for `wasm32-wasip2` (the
//! target is installed with rustup when missing) in the `guest` profile, into
//! a target dir of its own so a build started from inside a test never waits
//! on the test's own cargo lock. Each built component is then loaded by the
//! real host runtime, so anything the host would refuse fails the build.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

pub const TARGET: &str = "wasm32-wasip2";
pub const PROFILE: &str = "guest";

/// The repository root (the parent of `xtask/`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in the repository").to_owned()
}

fn cargo() -> Command {
    let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    // A build started from a build script or a test must not inherit these.
    for var in ["CARGO_TARGET_DIR", "RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "CARGO_BUILD_TARGET"] {
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

fn names(p: &[GuestPackage]) -> String {
    p.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", ")
}

/// A component placed in a detectors folder.
#[derive(Debug, Clone)]
pub struct Built {
    pub name: String,
    pub path: PathBuf,
    pub size: u64,
    pub sha256: String,
}

/// Builds every shipped detector under `detectors/` and copies each to
/// `dest/<name>.wasm`. Each one is then loaded by the host runtime; a
/// component the host would refuse fails the build with the host's reason.
pub fn build_detectors(root: &Path, dest: &Path) -> Result<Vec<Built>> {
    let packages = packages_under(&root.join("detectors"))?;
    let target_dir = root.join("target").join("guest");
    let built = build(&root.join("Cargo.toml"), &packages, &target_dir)?;
    std::fs::create_dir_all(dest).with_context(|| format!("cannot create {}", dest.display()))?;
    let runtime = sentinel_host::runtime::Runtime::new(sentinel_host::runtime::Limits::default())?;
    let mut out = Vec::new();
    for (pkg, src) in packages.iter().zip(built) {
        let name = pkg.name.replace('-', "_");
        let path = dest.join(format!("{name}.wasm"));
        let tmp = dest.join(format!(".{name}.wasm.tmp"));
        std::fs::copy(&src, &tmp).with_context(|| format!("cannot copy {} to {}", src.display(), tmp.display()))?;
        std::fs::rename(&tmp, &path)?;
        let bytes = std::fs::read(&path)?;
        if let Err(e) = runtime.load(&path) {
            let _ = std::fs::remove_file(&path);
            return Err(anyhow::Error::new(e).context(format!("detector {name} would be refused by the host")));
        }
        out.push(Built { name, path, size: bytes.len() as u64, sha256: sentinel_host::hex(&Sha256::digest(&bytes)) });
    }
    Ok(out)
}

/// Builds the hostile and helper fixtures of `tests/guests` and returns
/// `(package name, component path)` pairs. They are not checked: some exist
/// precisely to be refused.
pub fn build_fixtures(root: &Path) -> Result<Vec<(String, PathBuf)>> {
    let guests = root.join("tests").join("guests");
    let packages = packages_under(&guests)?;
    let built = build(&guests.join("Cargo.toml"), &packages, &root.join("target").join("guest-fixtures"))?;
    Ok(packages.into_iter().map(|p| p.name).zip(built).collect())
}
