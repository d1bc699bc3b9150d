//! `cargo xtask dist`: sentinel-host as people install an agent, a Debian
//! package and a tarball of the same tree.
//!
//! It owns laying out that tree under `target/dist/` and packing it: the
//! binary in `/usr/bin`, the built detectors in `/usr/lib/sentinel/detectors`,
//! the man pages and shell completions the binary generates from its own clap
//! definition (`sentinel-host generate`), the systemd system unit
//! `sentinel-host.service` (the long-running mode as the `sentinel` user), its
//! sysusers.d and tmpfiles.d entries (that user, and its 0700 output folder
//! `/var/lib/sentinel`, signing-key folder `/var/lib/sentinel-keys` and
//! cache `/var/cache/sentinel`), the unit's settings
//! `/etc/default/sentinel-host` (a conffile), an example sentinels file, and
//! the maintainer scripts (`templates/dist/`). `/etc/gateway/sentinels.yaml`
//! is the operator's and is not shipped, so no upgrade or removal touches it.
//! The `.deb` is made by `dpkg-deb`, the tarball by `tar`. It never installs
//! anything (the package test does, `cargo xtask test`).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

const UNIT: &str = include_str!("../templates/dist/sentinel-host.service");
const SYSUSERS: &str = include_str!("../templates/dist/sysusers.conf");
const TMPFILES: &str = include_str!("../templates/dist/tmpfiles.conf");
const DEFAULTS: &str = include_str!("../templates/dist/default");
const CONTROL: &str = include_str!("../templates/dist/control");
const SCRIPTS: [(&str, &str); 3] = [
    ("postinst", include_str!("../templates/dist/postinst")),
    ("prerm", include_str!("../templates/dist/prerm")),
    ("postrm", include_str!("../templates/dist/postrm")),
];

/// Where the package puts each thing.
pub const BIN: &str = "usr/bin/sentinel-host";
pub const DETECTORS: &str = "usr/lib/sentinel/detectors";
pub const UNIT_FILE: &str = "usr/lib/systemd/system/sentinel-host.service";
pub const DEFAULTS_FILE: &str = "etc/default/sentinel-host";
pub const STATE_DIR: &str = "/var/lib/sentinel";
/// The fire log's signing key of the state folder: the folder beside it
/// (the `sentinel` user's home is the state folder, so its config home
/// would lie inside it).
pub const KEY_DIR: &str = "/var/lib/sentinel-keys";
pub const CACHE_DIR: &str = "/var/cache/sentinel";
pub const USER: &str = "sentinel";
/// The generated completions: the file `sentinel-host generate` writes, and
/// where each shell's loader looks for it.
const COMPLETIONS: [(&str, &str); 3] = [
    ("sentinel-host.bash", "usr/share/bash-completion/completions/sentinel-host"),
    ("_sentinel-host", "usr/share/zsh/vendor-completions/_sentinel-host"),
    ("sentinel-host.fish", "usr/share/fish/vendor_completions.d/sentinel-host.fish"),
];

/// What goes in: a binary and a folder of built detectors.
#[derive(Debug, Clone)]
pub struct Inputs {
    pub binary: PathBuf,
    pub detectors: PathBuf,
    /// The cargo profile the binary was built in: `release` packs with xz
    /// (what a release ships), any other with a fast gzip (a test's package).
    pub profile: String,
}

/// What came out.
#[derive(Debug, Clone)]
pub struct Made {
    pub deb: PathBuf,
    pub tarball: PathBuf,
    /// The laid-out tree (without `DEBIAN/`, as in the tarball).
    pub root: PathBuf,
    pub version: String,
}

/// Where cargo puts a profile's binary.
pub fn binary_of(root: &Path, profile: &str) -> PathBuf {
    let dir = if profile == "dev" || profile == "test" { "debug" } else { profile };
    root.join("target").join(dir).join("sentinel-host")
}

/// Runs `cmd` and returns its stdout; a failure names `what` and quotes its stderr.
pub fn run(what: &str, cmd: &mut Command) -> Result<String> {
    let out = cmd.output().with_context(|| format!("cannot run {what}"))?;
    if !out.status.success() {
        bail!("{what} failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("cannot chmod {}", path.display()))
}

#[cfg(not(unix))]
fn set_mode(_: &Path, _: u32) -> Result<()> {
    bail!("packaging needs a Unix system (file modes)")
}

/// Writes `bytes` to `tree/rel` with `mode`, creating its folders.
fn put(tree: &Path, rel: &str, bytes: &[u8], mode: u32) -> Result<PathBuf> {
    let path = tree.join(rel);
    let dir = path.parent().context("a file in a folder")?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
    set_mode(&path, mode)?;
    Ok(path)
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
}

/// The Debian architecture of this machine.
fn arch() -> String {
    run("dpkg --print-architecture", Command::new("dpkg").arg("--print-architecture"))
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| if cfg!(target_arch = "aarch64") { "arm64" } else { "amd64" }.to_owned())
}

/// Lays out the package's tree in `tree` and returns the package version.
fn lay_out(inputs: &Inputs, tree: &Path, scratch: &Path) -> Result<String> {
    // `sentinel-host 0.1.0 (1ee818c12ab3)`: the version is the second word.
    let said = run("sentinel-host --version", Command::new(&inputs.binary).arg("--version"))?;
    let version = said.split_whitespace().nth(1).context("sentinel-host --version names no version")?.to_owned();
    put(tree, BIN, &read(&inputs.binary)?, 0o755)?;
    let mut detectors = 0;
    for entry in
        std::fs::read_dir(&inputs.detectors).with_context(|| format!("cannot list {}", inputs.detectors.display()))?
    {
        let path = entry?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if name.ends_with(".wasm") && !name.starts_with('.') {
            put(tree, &format!("{DETECTORS}/{name}"), &read(&path)?, 0o644)?;
            detectors += 1;
        }
    }
    if detectors == 0 {
        bail!("no detectors in {}: build them first", inputs.detectors.display());
    }
    // The man pages and completions, from the binary's own definition.
    let generated = scratch.join("generated");
    let _ = std::fs::remove_dir_all(&generated);
    run("sentinel-host generate", Command::new(&inputs.binary).arg("generate").arg("--out").arg(&generated))?;
    for entry in std::fs::read_dir(generated.join("man"))? {
        let page = entry?.path();
        let name = page.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        // gzip -n: no name or time in the header, so the same page packs the same.
        let gz = Command::new("gzip").args(["-9", "-n", "-c"]).arg(&page).output().context("cannot run gzip")?;
        if !gz.status.success() {
            bail!("gzip {} failed", page.display());
        }
        put(tree, &format!("usr/share/man/man1/{name}.gz"), &gz.stdout, 0o644)?;
    }
    for (file, to) in COMPLETIONS {
        put(tree, to, &read(&generated.join("completions").join(file))?, 0o644)?;
    }
    put(tree, UNIT_FILE, UNIT.as_bytes(), 0o644)?;
    put(tree, "usr/lib/sysusers.d/sentinel-host.conf", SYSUSERS.as_bytes(), 0o644)?;
    put(tree, "usr/lib/tmpfiles.d/sentinel-host.conf", TMPFILES.as_bytes(), 0o644)?;
    put(tree, DEFAULTS_FILE, DEFAULTS.as_bytes(), 0o644)?;
    let example = crate::gateway::sentinels_yaml("http://127.0.0.1:8080/metrics");
    put(tree, "usr/share/doc/sentinel-host/examples/sentinels.yaml", example.as_bytes(), 0o644)?;
    Ok(version)
}

/// Every folder under `dir` 0755, whatever the umask made it: the
/// `sentinel` user reads the detectors.
fn open_folders(dir: &Path) -> Result<()> {
    set_mode(dir, 0o755)?;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            open_folders(&entry.path())?;
        }
    }
    Ok(())
}

/// The size of everything under `dir`, in KiB (the control file's `Installed-Size`).
fn kib_under(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        total += if meta.is_dir() { kib_under(&entry.path())? } else { meta.len().div_ceil(1024) };
    }
    Ok(total)
}

/// Builds the package and the tarball from `inputs` into `out` (made anew).
pub fn package(inputs: &Inputs, out: &Path) -> Result<Made> {
    let _ = std::fs::remove_dir_all(out);
    let tree = out.join("root");
    std::fs::create_dir_all(&tree).with_context(|| format!("cannot create {}", tree.display()))?;
    let version = lay_out(inputs, &tree, out)?;
    open_folders(&tree)?;
    let arch = arch();
    let stem = format!("sentinel-host_{version}_{arch}");
    let tarball = out.join(format!("{stem}.tar.gz"));
    let level = if inputs.profile == "release" { "-9" } else { "-1" };
    run(
        "tar",
        Command::new("tar")
            .args(["--owner=0", "--group=0", "--numeric-owner", "--sort=name"])
            .arg("--use-compress-program")
            .arg(format!("gzip -n {level}"))
            .arg("-cf")
            .arg(&tarball)
            .arg("-C")
            .arg(&tree)
            .args(["etc", "usr"]),
    )?;
    // DEBIAN/ goes in after the tarball, which has only the installed tree.
    let control = CONTROL
        .replace("{version}", &version)
        .replace("{arch}", &arch)
        .replace("{installed_kib}", &kib_under(&tree)?.to_string());
    put(&tree, "DEBIAN/control", control.as_bytes(), 0o644)?;
    put(&tree, "DEBIAN/conffiles", format!("/{DEFAULTS_FILE}\n").as_bytes(), 0o644)?;
    for (name, text) in SCRIPTS {
        put(&tree, &format!("DEBIAN/{name}"), text.as_bytes(), 0o755)?;
    }
    set_mode(&tree.join("DEBIAN"), 0o755)?;
    let deb = out.join(format!("{stem}.deb"));
    let compression: &[&str] = if inputs.profile == "release" { &["-Zxz"] } else { &["-Zgzip", "-z1"] };
    run(
        "dpkg-deb --build",
        Command::new("dpkg-deb").arg("--root-owner-group").args(compression).arg("--build").arg(&tree).arg(&deb),
    )?;
    std::fs::remove_dir_all(tree.join("DEBIAN"))?;
    Ok(Made { deb, tarball, root: tree, version })
}
