//! The Debian package tested as a user installs it (a step of `cargo xtask
//! test`; we are root on a Debian machine, as CI is).
//!
//! It owns one run: pack the binary and detectors the tests used
//! ([`xtask::dist`]), `dpkg -i` it, `systemd-analyze verify` the unit, scan
//! a generated data dir with the installed binary as the `sentinel` user
//! (`runuser`) into the package's output folder, read `man sentinel-host`,
//! then `dpkg -r` and check that only what the operator owns stays, and
//! `dpkg --purge`. It leaves the machine as it found it: the package purged,
//! and the state folder and the user removed when this run made them. It
//! refuses to run where sentinel-host is already installed (it would replace
//! someone's install).

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail, ensure};
use xtask::dist::run as must;
use xtask::{datagen, dist, guest};

const PACKAGE: &str = "sentinel-host";

fn installed() -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f", "${Status}", PACKAGE])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("ok installed"))
}

fn user_exists() -> bool {
    Command::new("getent").args(["passwd", dist::USER]).output().is_ok_and(|o| o.status.success())
}

/// Purges the package when dropped, however the test ended, and removes the
/// state folder and the user when the test made them.
struct Cleanup {
    user_was_there: bool,
    state_was_there: bool,
    keys_were_there: bool,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = Command::new("dpkg").args(["--purge", PACKAGE]).output();
        if !self.state_was_there {
            let _ = std::fs::remove_dir_all(dist::STATE_DIR);
        }
        if !self.keys_were_there {
            let _ = std::fs::remove_dir_all(dist::KEY_DIR);
        }
        if !self.user_was_there {
            let _ = Command::new("userdel").arg(dist::USER).output();
            let _ = Command::new("groupdel").arg(dist::USER).output();
        }
    }
}

/// The binary and detectors the test build made, else built now.
fn inputs(root: &Path, profile: &str) -> Result<dist::Inputs> {
    let binary = dist::binary_of(root, profile);
    if !binary.is_file() {
        crate::step(
            "cargo build -p sentinel-host",
            crate::cargo(root).args(["build", "-p", PACKAGE, "--profile", profile]),
        )?;
    }
    // The e2e tests built every shipped detector here.
    let detectors = root.join("target/e2e/detectors");
    let built = std::fs::read_dir(&detectors).map(|d| d.filter_map(Result::ok).count()).unwrap_or(0);
    if built < guest::detectors_under(&root.join("detectors"))?.len() {
        guest::build_detectors_with(root, &detectors, &guest::BuildOptions::for_repo(root))?;
    }
    Ok(dist::Inputs { binary, detectors, profile: profile.to_owned() })
}

/// Why this machine cannot run the test, if it cannot: it installs a
/// Debian package, so it needs dpkg and root.
fn cannot_run_here() -> Option<&'static str> {
    let says = |program: &str, args: &[&str]| {
        Command::new(program).args(args).output().ok().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    if !cfg!(target_os = "linux") || says("dpkg", &["--version"]).is_none() {
        Some("not a Debian system (no dpkg)")
    } else if says("id", &["-u"]).as_deref() != Some("0") {
        Some("not root (dpkg -i needs root)")
    } else {
        None
    }
}

pub fn run(root: &Path, profile: &str) -> Result<()> {
    if let Some(why) = cannot_run_here() {
        // CI is a Debian machine where we are root: there it must run.
        ensure!(std::env::var_os("CI").is_none(), "the package test cannot run here: {why}");
        eprintln!("==> the package test is SKIPPED here: {why}; CI runs it");
        return Ok(());
    }
    let started = std::time::Instant::now();
    ensure!(
        !installed(),
        "{PACKAGE} is installed on this machine: the package test would replace it (dpkg -r it first)"
    );
    crate::ensure_debian_tool("systemd-analyze", "systemd", "the package test verifies the unit")?;
    crate::ensure_debian_tool("man", "man-db", "the package test reads the installed man page")?;
    eprintln!("==> the Debian package: built, installed, run as `{}`, removed", dist::USER);
    let made = dist::package(&inputs(root, profile)?, &root.join("target/dist/package-test"))?;
    eprintln!("    {} ({} KiB)", made.deb.display(), std::fs::metadata(&made.deb)?.len() / 1024);
    let _cleanup = Cleanup {
        user_was_there: user_exists(),
        state_was_there: Path::new(dist::STATE_DIR).exists(),
        keys_were_there: Path::new(dist::KEY_DIR).exists(),
    };
    must("dpkg -i", Command::new("dpkg").arg("-i").arg(&made.deb))?;
    let files = must("dpkg -L", Command::new("dpkg").args(["-L", PACKAGE]))?;
    let unit = Path::new("/").join(dist::UNIT_FILE);
    must("systemd-analyze verify", Command::new("systemd-analyze").arg("verify").arg(&unit))?;
    scan_as_the_user(&made)?;
    let page = must("man sentinel-host", Command::new("man").args(["-P", "cat", PACKAGE]).env("MANWIDTH", "100"))?;
    ensure!(page.contains("sentinel-host") && page.contains("check-install"), "man sentinel-host: {page}");
    must("dpkg -r", Command::new("dpkg").args(["-r", PACKAGE]))?;
    removed_but_what_the_operator_owns(&files)?;
    must("dpkg --purge", Command::new("dpkg").args(["--purge", PACKAGE]))?;
    ensure!(!Path::new("/").join(dist::DEFAULTS_FILE).exists(), "the purge left /{}", dist::DEFAULTS_FILE);
    eprintln!(
        "==> the package installed, ran as `{}` and was removed cleanly ({} s)",
        dist::USER,
        started.elapsed().as_secs()
    );
    Ok(())
}

/// A generated data dir scanned with the installed binary and detectors as
/// the `sentinel` user, into the package's output folder.
fn scan_as_the_user(made: &dist::Made) -> Result<()> {
    let data = std::env::temp_dir().join(format!("sentinel-package-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data);
    datagen::generate(&data, &datagen::DataSpec::default())?;
    // Readable by the `sentinel` user, as an application's data dir must be.
    must("chmod", Command::new("chmod").arg("-R").arg("a+rX").arg(&data))?;
    let scan = Command::new("runuser")
        .args(["-u", dist::USER, "--", "/usr/bin/sentinel-host", "run", "--once", "--json"])
        .arg("--detectors")
        .arg(Path::new("/").join(dist::DETECTORS))
        .arg("--data-dir")
        .arg(&data)
        .args(["--out", dist::STATE_DIR, "--cache-dir", dist::CACHE_DIR])
        // The user's own config home (its home is the state folder: the key
        // goes beside it, in dist::KEY_DIR), not the test runner's.
        .env_remove("XDG_CONFIG_HOME")
        // As every test scan but the deadline's own (docs/testing.md): a
        // loaded machine must not fail a detector here.
        .args(["--deadline-ms", "60000"])
        .output();
    let _ = std::fs::remove_dir_all(&data);
    let scan = scan.context("cannot run runuser")?;
    let summary = String::from_utf8_lossy(&scan.stdout);
    ensure!(scan.status.success(), "the installed scan failed: {}{summary}", String::from_utf8_lossy(&scan.stderr));
    let summary: serde_json::Value = serde_json::from_str(&summary).context("the scan's summary")?;
    let detectors = summary["detectors"].as_array().context("the summary lists detectors")?;
    let not_ok: Vec<&serde_json::Value> = detectors.iter().filter(|d| d["status"] != "ok").collect();
    ensure!(!detectors.is_empty() && not_ok.is_empty(), "detectors not ok: {not_ok:#?}");
    // The output folder and what it holds are the user's alone.
    let uid: u32 =
        must("id -u", Command::new("id").args(["-u", dist::USER]))?.trim().parse().context("the user's uid")?;
    // The signing key beside the output folder, never in it.
    ensure!(!Path::new(dist::STATE_DIR).join("fire-key.ed25519").exists(), "the signing key is in the output folder");
    let key = signing_key()?;
    for path in ["", "issues.jsonl"].map(|rel| Path::new(dist::STATE_DIR).join(rel)).into_iter().chain([key]) {
        let mode = if path.is_dir() { 0o700 } else { 0o600 };
        let meta = std::fs::metadata(&path).with_context(|| format!("the scan wrote no {}", path.display()))?;
        let (owner, bits) = (meta.uid(), meta.mode() & 0o777);
        ensure!(owner == uid && bits == mode, "{}: owner {owner}, mode {bits:o}", path.display());
    }
    let issues = std::fs::read_to_string(Path::new(dist::STATE_DIR).join("issues.jsonl"))?;
    ensure!(issues.lines().count() > 0, "the installed scan found no issue in the generated data dir");
    eprintln!("    {} detectors ok, {} issues, version {}", detectors.len(), issues.lines().count(), made.version);
    Ok(())
}

/// The state folder's signing key: the one `*.ed25519` in the key folder.
fn signing_key() -> Result<PathBuf> {
    let keys: Vec<PathBuf> = std::fs::read_dir(dist::KEY_DIR)
        .with_context(|| format!("no key folder {}", dist::KEY_DIR))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "ed25519"))
        .collect();
    ensure!(keys.len() == 1, "{} holds {} signing keys: {keys:?}", dist::KEY_DIR, keys.len());
    Ok(keys[0].clone())
}

/// After `dpkg -r`: every file the package installed is gone, and the cache;
/// the operator's things stay (the state folder with its fire log and key,
/// the `sentinel` user, the conffile until a purge).
fn removed_but_what_the_operator_owns(files: &str) -> Result<()> {
    let conffile = PathBuf::from("/").join(dist::DEFAULTS_FILE);
    let left: Vec<&str> = files.lines().filter(|f| Path::new(f).is_file() && Path::new(f) != conffile).collect();
    ensure!(left.is_empty(), "dpkg -r left the package's files: {left:?}");
    for gone in [Path::new(dist::CACHE_DIR), &Path::new("/").join(dist::DETECTORS)] {
        ensure!(!gone.exists(), "dpkg -r left {}", gone.display());
    }
    for stays in [Path::new(dist::STATE_DIR).join("issues.jsonl"), signing_key()?, conffile] {
        ensure!(stays.exists(), "dpkg -r removed {}, which is the operator's", stays.display());
    }
    if !user_exists() {
        bail!("dpkg -r removed the `{}` user, which owns {}", dist::USER, dist::STATE_DIR);
    }
    Ok(())
}
