//! A pinned PyPI package in its own venv under `target/toolchains/`.
//!
//! It owns making the venv and installing `package==version` into it, and
//! keeping one whose probe still runs (a venv copied from elsewhere keeps
//! scripts whose `#!` names the old place). It never installs anything
//! unpinned and never touches the system's Python.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Result, bail};

/// The venv `target/toolchains/<name>` holding `package==version`; `probe`
/// (a path inside the venv and its arguments) must run for one to be kept.
pub(crate) fn ensure(root: &Path, name: &str, package: &str, version: &str, probe: (&str, &[&str])) -> Result<PathBuf> {
    let venv = root.join("target/toolchains").join(name);
    let pinned = venv.join(format!(".{package}-{version}"));
    let runs = || Command::new(venv.join(probe.0)).args(probe.1).output().is_ok_and(|o| o.status.success());
    if pinned.exists() && runs() {
        return Ok(venv);
    }
    let _ = std::fs::remove_dir_all(&venv);
    eprintln!("==> installing {package} {version} into {}", venv.display());
    let ok = Command::new("python3").arg("-m").arg("venv").arg(&venv).status().is_ok_and(|s| s.success());
    if !ok {
        bail!("cannot make a venv at {} (python3 with venv is needed)", venv.display());
    }
    let ok = Command::new(venv.join("bin/pip"))
        .args(["install", "--quiet", &format!("{package}=={version}")])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        bail!("cannot install {package} {version} from PyPI");
    }
    std::fs::write(&pinned, version)?;
    Ok(venv)
}
