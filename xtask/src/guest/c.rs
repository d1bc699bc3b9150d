//! Detectors written in C, and the toolchain that builds them.
//!
//! Owns: installing Debian's `clang`, `lld`, `wasi-libc` and the wasm32
//! compiler runtime with apt-get when they are missing (Linux only; elsewhere
//! an error that says what to install), generating the C bindings of
//! `wit/` with the `wit-bindgen-c` library (the generator `wit-bindgen c`
//! runs, at the Rust SDK's wit-bindgen version) into
//! `target/toolchains/c/bindings-<hash>/`, compiling a detector's `.c` files
//! with them and the C SDK (`sdk/c/sentinel_batch.h`) into a core module (`wasm32-wasi`, reactor), and making that a
//! component with `wit-component` and the WASI preview 1 reactor adapter of
//! our wasmtime release (the `wasi-preview1-component-adapter-provider`
//! crate). Never: loading or checking the component (the caller does, with
//! the host's runtime).
//!
//! Components are kept in `target/guest-other/` under a hash of their inputs,
//! as the Python and JavaScript ones are.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

use super::toolchain::{Lock, read, run};
use super::{DetectorSource, Lang};

/// The world every detector implements.
const WORLD: &str = "detector-world";
/// The C names wit-bindgen derives from [`WORLD`].
const BINDINGS_STEM: &str = "detector_world";
/// The version of the generator linked into xtask (Cargo.toml pins it).
const WIT_BINDGEN_C: &str = "0.61.1";
/// The clang target: wasm32 with WASI preview 1 (wasi-libc), made a
/// preview 2 component by the adapter.
const CLANG_TARGET: &str = "wasm32-wasi";
/// Debian's packages that build C for [`CLANG_TARGET`].
const DEBIAN_PACKAGES: &[&str] = &["clang", "lld", "wasi-libc", "libclang-rt-dev-wasm32"];

/// What is missing to compile C for wasm32-wasi, if anything.
fn missing() -> Option<String> {
    let clang = Command::new("clang").arg("--version").output();
    if !clang.is_ok_and(|o| o.status.success()) {
        return Some("clang".into());
    }
    if !Command::new("wasm-ld").arg("--version").output().is_ok_and(|o| o.status.success()) {
        return Some("wasm-ld (lld)".into());
    }
    // The sysroot and the compiler runtime, where this clang looks for them.
    for (what, arg) in
        [("wasi-libc", "-print-file-name=libc.a"), ("the wasm32 compiler runtime", "-print-libgcc-file-name")]
    {
        let out = Command::new("clang").args([&format!("--target={CLANG_TARGET}"), arg]).output();
        let path = out.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned()).unwrap_or_default();
        if !Path::new(&path).is_absolute() || !Path::new(&path).is_file() {
            return Some(what.into());
        }
    }
    None
}

/// Installs Debian's C-to-wasm toolchain with apt-get when part of it is
/// missing (`apt-get update` first, as a fresh machine's lists may be empty).
pub fn ensure() -> Result<()> {
    let Some(what) = missing() else { return Ok(()) };
    let packages = DEBIAN_PACKAGES.join(" ");
    if !cfg!(target_os = "linux") || Command::new("apt-get").arg("--version").output().is_err() {
        bail!(
            "building C detectors needs {what}: install clang, lld and wasi-libc for wasm32-wasi (Debian: apt-get install {packages})"
        );
    }
    eprintln!("installing the C toolchain with apt-get ({packages}): {what} is missing");
    run("apt-get update", Command::new("apt-get").args(["update", "-q"]))?;
    run(
        &format!("apt-get install {packages}"),
        Command::new("apt-get")
            .args(["install", "-y", "-q", "--no-install-recommends"])
            .args(DEBIAN_PACKAGES)
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )?;
    if let Some(what) = missing() {
        bail!("apt-get installed {packages} but {what} is still missing");
    }
    Ok(())
}

/// The `.wit` files of `wit/`, sorted, as (name, bytes).
fn wit_files(root: &Path) -> Result<Vec<(String, Vec<u8>)>> {
    let wit = root.join("wit");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&wit)
        .with_context(|| format!("cannot list {}", wit.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "wit"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|f| Ok((f.file_name().unwrap_or_default().to_string_lossy().into_owned(), read(&f)?)))
        .collect()
}

/// Generates the C bindings of `wit/` (unless made already from the same
/// WIT) and returns their folder: `detector_world.h`, `detector_world.c`
/// and `detector_world_component_type.o`.
pub fn bindings(root: &Path, target_dir: &Path) -> Result<PathBuf> {
    let mut h = Sha256::new();
    h.update(WIT_BINDGEN_C);
    for (name, bytes) in wit_files(root)? {
        h.update(name);
        h.update(bytes);
    }
    let base = target_dir.join("toolchains").join("c");
    let _lock = Lock::take(&base)?;
    let dir = base.join(format!("bindings-{}", sentinel_host::base::hex(&h.finalize()[..8])));
    if dir.join(format!("{BINDINGS_STEM}.h")).is_file() {
        return Ok(dir);
    }
    let mut resolve = wit_bindgen_core::wit_parser::Resolve::default();
    let (pkg, _) = resolve.push_dir(root.join("wit")).context("cannot read the WIT package in wit/")?;
    let world = resolve.select_world(&[pkg], Some(WORLD)).with_context(|| format!("wit/ has no world {WORLD}"))?;
    let mut files = wit_bindgen_core::Files::default();
    wit_bindgen_c::Opts::default()
        .build()
        .generate(&mut resolve, world, &mut files)
        .context("wit-bindgen could not generate the C bindings")?;
    let tmp = base.join(".bindings.tmp");
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    for (name, bytes) in files.iter() {
        std::fs::write(tmp.join(name), bytes).with_context(|| format!("cannot write {name} in {}", tmp.display()))?;
    }
    std::fs::rename(&tmp, &dir).with_context(|| format!("cannot move {} to {}", tmp.display(), dir.display()))?;
    Ok(dir)
}

/// The `.c` and `.h` files of a folder (a detector's, not its cases; the
/// SDK's), sorted.
fn sources(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "c" || x == "h"))
        .collect();
    files.sort();
    Ok(files)
}

/// The clang that compiles: its `--version` line goes into the build's key.
fn clang_version() -> Result<String> {
    let out = Command::new("clang").arg("--version").output().context("cannot run clang")?;
    Ok(String::from_utf8_lossy(&out.stdout).lines().next().unwrap_or_default().to_owned())
}

/// Builds the C detector `src` (or reuses the component built from the same
/// inputs) and returns the component's path.
pub fn build_component(root: &Path, src: &DetectorSource, target_dir: &Path) -> Result<PathBuf> {
    debug_assert_eq!(src.lang, Lang::C);
    ensure()?;
    let gen_dir = bindings(root, target_dir)?;
    let files = sources(&src.dir)?;
    let sdk = root.join("sdk/c");
    let mut h = Sha256::new();
    h.update(src.lang.as_str());
    h.update(clang_version()?);
    h.update(gen_dir.file_name().unwrap_or_default().as_encoded_bytes());
    h.update(wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER);
    for f in files.iter().chain(&sources(&sdk)?) {
        h.update(f.file_name().unwrap_or_default().as_encoded_bytes());
        h.update(read(f)?);
    }
    let key = sentinel_host::base::hex(&h.finalize()[..8]);
    let out_dir = target_dir.join("guest-other");
    let _lock = Lock::take(&out_dir)?;
    let out = out_dir.join(format!("{}-{key}.wasm", src.name));
    if out.is_file() {
        return Ok(out);
    }
    eprintln!("building {} (c) with clang and wit-component", src.name);
    let core = out_dir.join(format!(".{}-{key}.core.wasm", src.name));
    let mut cmd = Command::new("clang");
    cmd.arg(format!("--target={CLANG_TARGET}"))
        .args(["-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-mexec-model=reactor"])
        .arg("-I")
        .arg(&gen_dir)
        .arg("-I")
        .arg(&sdk)
        .args(files.iter().filter(|f| f.extension().is_some_and(|x| x == "c")))
        .arg(gen_dir.join(format!("{BINDINGS_STEM}.c")))
        .arg(gen_dir.join(format!("{BINDINGS_STEM}_component_type.o")))
        .arg("-o")
        .arg(&core);
    run(&format!("compiling {} with clang", src.name), &mut cmd)?;
    let module = read(&core)?;
    let component = wit_component_for_c::ComponentEncoder::default()
        .validate(true)
        .module(&module)
        .and_then(|e| {
            e.adapter(
                wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME,
                wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
            )
        })
        .and_then(|e| e.encode())
        .with_context(|| format!("cannot make a component of {}", core.display()))?;
    let _ = std::fs::remove_file(&core);
    // Drop the components of earlier versions of this detector.
    super::toolchain::remove_older(&out_dir, &src.name);
    let tmp = out_dir.join(format!(".{}-{key}.wasm.tmp", src.name));
    std::fs::write(&tmp, component).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &out).with_context(|| format!("cannot move {} to {}", tmp.display(), out.display()))?;
    Ok(out)
}
