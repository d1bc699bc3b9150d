//! The Python and JavaScript toolchains, and the components built with them.
//!
//! Each toolchain is pinned in the repository (`sdk/python/requirements.txt`,
//! `sdk/js/toolchain/package.json` with its `package-lock.json`) and installed on first
//! use into `target/toolchains/`: a venv made with `python3 -m venv` and pip
//! for componentize-py, `npm ci` for componentize-js. An install is redone
//! only when its pin files change. A missing `python3` or `npm` is an error
//! that says what to install, never a silent skip.
//!
//! A component is kept in `target/guest-other/` under a hash of everything
//! that goes into it (the toolchain pins, the WIT package, the detector's
//! sources), because neither tool builds byte-identical output twice and a
//! build takes seconds: an unchanged detector keeps its component, and so its
//! compiled-cache entry. Installs and builds take a file lock, so two builds
//! started at once (tests do) never install into the same folder together.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

use super::{DetectorSource, Lang};

/// The pin files of a toolchain, relative to the repository root.
fn pins(lang: Lang) -> &'static [&'static str] {
    match lang {
        Lang::Python => &["sdk/python/requirements.txt"],
        Lang::Js => &["sdk/js/toolchain/package.json", "sdk/js/toolchain/package-lock.json"],
        Lang::Rust | Lang::C => &[],
    }
}

pub(super) fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
}

/// A hash of the pin files: what an install and every build depend on.
fn pins_hash(root: &Path, lang: Lang) -> Result<String> {
    let mut h = Sha256::new();
    for p in pins(lang) {
        h.update(p.as_bytes());
        h.update(read(&root.join(p))?);
    }
    Ok(sentinel_host::base::hex(&h.finalize()[..16]))
}

/// Holds an exclusive lock on `dir/.lock` while alive.
pub(super) struct Lock(std::fs::File);

impl Lock {
    pub(super) fn take(dir: &Path) -> Result<Lock> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let path = dir.join(".lock");
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        f.lock().with_context(|| format!("cannot lock {}", path.display()))?;
        Ok(Lock(f))
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

pub(super) fn run(what: &str, cmd: &mut Command) -> Result<()> {
    let out = cmd.output().with_context(|| format!("cannot start {what}"))?;
    if !out.status.success() {
        bail!(
            "{what} failed ({})\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// True when `program --version` runs.
fn found(program: &str) -> bool {
    Command::new(program).arg("--version").output().is_ok_and(|o| o.status.success())
}

/// Fails, saying what to install, when a program the toolchain of `lang`
/// is installed with is missing (`found` tells whether a program runs).
fn require(lang: Lang, found: impl Fn(&str) -> bool) -> Result<()> {
    match lang {
        Lang::Python if !found("python3") => bail!(
            "building Python detectors needs python3 (3.10 or newer, with venv) on PATH: \
             install it (Debian: apt-get install python3 python3-venv)"
        ),
        Lang::Js if !found("npm") || !found("node") => bail!(
            "building JavaScript detectors needs node (20 or newer) and npm on PATH: \
             install them (Debian: apt-get install nodejs npm)"
        ),
        _ => Ok(()),
    }
}

/// Installs the toolchain of `lang` into `target/toolchains/<lang>` unless
/// the installed one has the same pins, and returns the command that builds
/// a component with it.
pub fn ensure(root: &Path, lang: Lang, target_dir: &Path) -> Result<PathBuf> {
    let dir = target_dir.join("toolchains").join(lang.as_str());
    let _lock = Lock::take(&dir)?;
    let stamp = dir.join(".pins");
    // A venv holds absolute paths: one copied from elsewhere is installed again.
    let want = format!("{} {}", pins_hash(root, lang)?, dir.display());
    let tool = match lang {
        Lang::Python => dir.join("venv").join("bin").join("componentize-py"),
        Lang::Js => dir.join("node_modules").join(".bin").join("componentize-js"),
        Lang::Rust | Lang::C => bail!("the {} toolchain is not installed here", lang.as_str()),
    };
    if tool.is_file() && std::fs::read_to_string(&stamp).is_ok_and(|s| s.trim() == want) {
        return Ok(tool);
    }
    match lang {
        Lang::Python => {
            require(lang, found)?;
            eprintln!("installing componentize-py into {}", dir.display());
            let venv = dir.join("venv");
            if !venv.join("bin").join("python").is_file() {
                run("python3 -m venv", Command::new("python3").arg("-m").arg("venv").arg(&venv))?;
            }
            run(
                "pip install -r sdk/python/requirements.txt",
                Command::new(venv.join("bin").join("python"))
                    .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r"])
                    .arg(root.join("sdk/python/requirements.txt")),
            )?;
        }
        Lang::Js => {
            require(lang, found)?;
            eprintln!("installing componentize-js into {} (npm ci)", dir.display());
            for f in ["package.json", "package-lock.json"] {
                std::fs::copy(root.join("sdk/js/toolchain").join(f), dir.join(f))
                    .with_context(|| format!("cannot copy sdk/js/toolchain/{f} to {}", dir.display()))?;
            }
            run("npm ci", Command::new("npm").args(["ci", "--no-audit", "--no-fund"]).current_dir(&dir))?;
        }
        Lang::Rust | Lang::C => unreachable!(),
    }
    if !tool.is_file() {
        bail!("the {} toolchain installed no {}", lang.as_str(), tool.display());
    }
    std::fs::write(&stamp, &want).with_context(|| format!("cannot write {}", stamp.display()))?;
    Ok(tool)
}

/// The SDK module every detector of `lang` is built with, beside its own
/// files: the reader of the host's packed batches.
fn shared(root: &Path, lang: Lang) -> PathBuf {
    match lang {
        Lang::Python => root.join("sdk/python/sentinel_batch.py"),
        Lang::Js => root.join("sdk/js/sentinel-batch.js"),
        Lang::Rust | Lang::C => unreachable!("Rust and C detectors are built elsewhere"),
    }
}

/// The files that go into a detector's component, as (file name, bytes):
/// every `.py` or `.js` file of its folder (not its cases), then the SDK's
/// module. Read once, for the build's key and for staging.
fn sources(root: &Path, src: &DetectorSource) -> Result<Vec<(String, Vec<u8>)>> {
    let ext = if src.lang == Lang::Python { "py" } else { "js" };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&src.dir)
        .with_context(|| format!("cannot list {}", src.dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == ext))
        .collect();
    files.sort();
    let sdk = shared(root, src.lang);
    let sdk_name = sdk.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut out = Vec::with_capacity(files.len() + 1);
    for f in files {
        let name = f.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if name == sdk_name {
            bail!(
                "{} has a file of its own named {sdk_name}, the name of the SDK's module: rename it",
                src.dir.display()
            );
        }
        out.push((name, read(&f)?));
    }
    out.push((sdk_name, read(&sdk)?));
    Ok(out)
}

/// Builds the Python or JavaScript detector `src` (or reuses the component
/// built from the same inputs) and returns the component's path.
pub fn build_component(root: &Path, src: &DetectorSource, target_dir: &Path) -> Result<PathBuf> {
    let tool = ensure(root, src.lang, target_dir)?;
    let wit = root.join("wit");
    let mut h = Sha256::new();
    h.update(src.lang.as_str());
    h.update(pins_hash(root, src.lang)?);
    for f in std::fs::read_dir(&wit).with_context(|| format!("cannot list {}", wit.display()))? {
        let f = f?.path();
        if f.extension().is_some_and(|x| x == "wit") {
            h.update(read(&f)?);
        }
    }
    let files = sources(root, src)?;
    for (name, bytes) in &files {
        h.update(name);
        h.update(bytes);
    }
    let key = sentinel_host::base::hex(&h.finalize()[..8]);
    let out_dir = target_dir.join("guest-other");
    let _lock = Lock::take(&out_dir)?;
    let out = out_dir.join(format!("{}-{key}.wasm", src.name));
    if out.is_file() {
        return Ok(out);
    }
    eprintln!("building {} ({}) with {}", src.name, src.lang.as_str(), tool.display());
    let tmp = out_dir.join(format!(".{}-{key}.wasm.tmp", src.name));
    // Both tools build from a staged copy: the detector's files and the SDK's
    // module side by side (componentize-py also leaves `__pycache__` beside
    // the modules it imports, and componentize-js resolves relative imports
    // from the working directory), so the sources stay untouched and every
    // build sees the same tree.
    let staged = out_dir.join("src").join(&src.name);
    let _ = std::fs::remove_dir_all(&staged);
    std::fs::create_dir_all(&staged).with_context(|| format!("cannot create {}", staged.display()))?;
    for (name, bytes) in &files {
        let to = staged.join(name);
        std::fs::write(&to, bytes).with_context(|| format!("cannot write {}", to.display()))?;
    }
    let mut cmd = Command::new(&tool);
    match src.lang {
        Lang::Python => {
            cmd.arg("-d")
                .arg(&wit)
                .args(["-w", "detector-world", "componentize", "app", "-p"])
                .arg(&staged)
                .arg("-o")
                .arg(&tmp);
        }
        Lang::Js => {
            // HTTP and the fetch event are left out: the host refuses `wasi:http`.
            cmd.current_dir(&staged)
                .arg(staged.join(Lang::Js.marker()))
                .arg("--wit")
                .arg(&wit)
                .args(["--world-name", "detector-world", "-d", "http", "-d", "fetch-event", "-o"])
                .arg(&tmp);
        }
        Lang::Rust | Lang::C => unreachable!(),
    }
    run(&format!("building {} with {}", src.name, tool.display()), &mut cmd)?;
    remove_older(&out_dir, &src.name);
    std::fs::rename(&tmp, &out).with_context(|| format!("cannot move {} to {}", tmp.display(), out.display()))?;
    Ok(out)
}

/// Drops the components of earlier versions of detector `name` from `out_dir`.
pub(super) fn remove_older(out_dir: &Path, name: &str) {
    if let Ok(entries) = std::fs::read_dir(out_dir) {
        for e in entries.filter_map(Result::ok) {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.starts_with(&format!("{name}-")) && n.ends_with(".wasm") {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_interpreter_is_an_error_that_says_what_to_install() {
        let none = |_: &str| false;
        let py = require(Lang::Python, none).unwrap_err().to_string();
        assert!(py.contains("needs python3") && py.contains("apt-get install python3"), "{py}");
        let js = require(Lang::Js, |p: &str| p == "node").unwrap_err().to_string();
        assert!(js.contains("needs node") && js.contains("npm"), "{js}");
        assert!(require(Lang::Python, |_: &str| true).is_ok());
    }
}
