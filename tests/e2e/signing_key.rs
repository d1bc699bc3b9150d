//! The fire log's signing key lives outside the output folder: an attacker
//! holding only the folder cannot forge a log a kept public key accepts; a
//! missing key is never made again for a signed log; an older folder's key
//! is moved out once; a key file others could read or another user owns is
//! refused; `key rotate` hands over to a new key that `verify` follows, and
//! a lost key is a finding.

use std::path::{Path, PathBuf};
use std::process::Output;

use ed25519_dalek::SigningKey;
use sentinel_host::firelog::{FireBody, FireEntry, HEAD_FILE, PUBLIC_KEY_FILE, PublicKeyFile, sign_head, unhex32};
use xtask::datagen::{self, Activity};

use crate::support::*;

/// The exit code of a missing or refused signing key (docs/cli.md).
const SIGNING_KEY: i32 = 15;

struct Folder {
    s: Scratch,
    data: PathBuf,
    detectors: PathBuf,
    out: PathBuf,
}

/// A data dir with `n` failed tool calls, and its output folder.
fn folder(n: usize) -> Folder {
    let s = Scratch::new();
    let data = s.path("data");
    std::fs::create_dir_all(&data).unwrap();
    add_failures(&data, 0, n);
    let detectors = s.detectors_with(&[]);
    let out = s.path("out");
    Folder { s, data, detectors, out }
}

fn add_failures(data: &Path, from: usize, to: usize) {
    for i in from..to {
        let (id, output) = (format!("m{i}"), format!("no layer {i} in /x{i}"));
        datagen::insert_activity(data, &Activity::failed(&id, 1_000 + i as i64, "t1", "Bash", &output)).unwrap();
    }
}

impl Folder {
    /// `run --once --json` with the user config folder in the scratch folder.
    fn run(&self, extra: &[&str]) -> Output {
        let mut c = run_command(&self.detectors, &self.data, &self.out);
        c.env("XDG_CONFIG_HOME", self.s.path("config")).args(["--once", "--json"]).args(extra);
        run_within(c, std::time::Duration::from_secs(300))
    }

    fn scan(&self, extra: &[&str]) -> Output {
        let o = self.run(extra);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        o
    }

    /// `verify --json`, with a kept public key when given: (exit code, JSON).
    fn verify(&self, public_key: Option<&Path>) -> (Option<i32>, serde_json::Value) {
        let mut c = sentinel_host();
        c.args(["verify", "--json", "--out"]).arg(&self.out);
        if let Some(k) = public_key {
            c.arg("--public-key").arg(k);
        }
        let o = c.output().unwrap();
        (o.status.code(), serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o))))
    }

    fn rotate(&self, key_file: &Path) -> Output {
        let mut c = sentinel_host();
        c.env("XDG_CONFIG_HOME", self.s.path("config"))
            .args(["key", "rotate", "--json", "--data-dir"])
            .arg(&self.data)
            .arg("--out")
            .arg(&self.out)
            .arg("--key-file")
            .arg(key_file);
        c.output().unwrap()
    }

    /// The folder's `fires.pub.json`, copied out of it (what a careful
    /// operator keeps elsewhere).
    fn keep_public_key(&self, name: &str) -> PathBuf {
        let kept = self.s.path(name);
        std::fs::copy(self.out.join(PUBLIC_KEY_FILE), &kept).unwrap();
        kept
    }

    /// The default key file: the only one under the scratch config home.
    fn default_key_file(&self) -> PathBuf {
        let dir = self.s.path("config/openmausbot-sentinel/keys");
        let keys: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "ed25519"))
            .collect();
        assert_eq!(keys.len(), 1, "{keys:?}");
        keys[0].clone()
    }
}

fn text(o: &Output) -> String {
    format!("stdout: {}\nstderr: {}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// The attacker, with the output folder's files and nothing else: cuts the
/// log to its first `keep` entries, re-signs the head with whatever signing
/// key the folder holds (a key of its own when it holds none), publishes
/// that key as `fires.pub.json`, and rewrites the ledger's anchor (its copy
/// of the head and of the entries) to match. Returns whether the folder
/// held a key to forge with.
fn forge(out: &Path, keep: usize) -> bool {
    let mut segments: Vec<PathBuf> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("fires-"))
        .collect();
    segments.sort();
    let lines: Vec<String> = segments
        .iter()
        .flat_map(|p| std::fs::read_to_string(p).unwrap().lines().map(str::to_owned).collect::<Vec<_>>())
        .collect();
    assert!(lines.len() > keep, "a log of {} entries to cut to {keep}", lines.len());
    for p in &segments {
        std::fs::remove_file(p).unwrap();
    }
    std::fs::write(out.join("fires-000001.ndjson"), lines[..keep].iter().map(|l| format!("{l}\n")).collect::<String>())
        .unwrap();
    let last: FireEntry = serde_json::from_str(&lines[keep - 1]).unwrap();
    // Whatever in the folder holds a key: 32 bytes of hex.
    let found = std::fs::read_dir(out)
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.unwrap().path()).ok())
        .find_map(|t| unhex32(t.trim()))
        .map(|seed| SigningKey::from_bytes(&seed));
    let key = found.clone().unwrap_or_else(|| SigningKey::from_bytes(&[42; 32]));
    let head = sign_head(&key, keep as u64, &unhex32(&last.hash).unwrap(), last.recorded_at);
    let head_json = serde_json::to_string_pretty(&head).unwrap();
    std::fs::write(out.join(HEAD_FILE), &head_json).unwrap();
    std::fs::write(out.join(PUBLIC_KEY_FILE), serde_json::to_string(&PublicKeyFile::of(&key.verifying_key())).unwrap())
        .unwrap();
    let db = rusqlite::Connection::open(out.join("ledger.db")).unwrap();
    db.execute("DELETE FROM fires WHERE seq > ?1", [keep as i64]).unwrap();
    db.execute("UPDATE meta SET value = ?1 WHERE key = 'fires_head'", [&head_json]).unwrap();
    found.is_some()
}

/// `docs/verify_fires.py OUT [KEY]`'s exit code.
fn python_verify(out: &Path, public_key: Option<&Path>) -> Option<i32> {
    let mut c = std::process::Command::new("python3");
    c.arg(root().join("docs/verify_fires.py")).arg(out);
    if let Some(k) = public_key {
        c.arg(k);
    }
    let o = c.output().expect("python3 runs");
    eprintln!("verify_fires.py: {}", text(&o));
    o.status.code()
}

#[test]
fn the_output_folder_alone_cannot_forge_a_cut_log_a_kept_public_key_accepts() {
    let f = folder(8);
    f.scan(&[]);
    let kept = f.keep_public_key("kept.pub.json");
    assert_eq!(f.verify(Some(&kept)).0, Some(0));
    assert!(!listing(&f.out).iter().any(|n| n.contains("key")), "no key in the folder: {:?}", listing(&f.out));
    // The same attacker against the layout of an older release (the key
    // beside the log) succeeds: what stops it is only where the key is.
    let old_layout = folder(8);
    old_layout.scan(&[]);
    let old_kept = old_layout.keep_public_key("kept.pub.json");
    std::fs::copy(old_layout.default_key_file(), old_layout.out.join("fire-key.ed25519")).unwrap();
    assert!(forge(&old_layout.out, 5), "the older layout hands the key out with the folder");
    assert_eq!(old_layout.verify(Some(&old_kept)).0, Some(0), "forged with the folder's own key: it passes");

    assert!(!forge(&f.out, 5), "the folder holds no key to forge with");
    let (code, v) = f.verify(Some(&kept));
    assert_eq!(code, Some(12), "{v:#}");
    assert!(v["finding"]["problem"].as_str().unwrap().contains("another key"), "{v:#}");
}

#[test]
fn a_missing_key_with_a_signed_log_fails_naming_the_file_and_is_not_made_again() {
    let f = folder(3);
    let first = f.scan(&[]);
    let stderr = String::from_utf8_lossy(&first.stderr);
    let key = f.default_key_file();
    assert!(stderr.contains("generated the signing key") && stderr.contains(&*key.to_string_lossy()), "{stderr}");
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&key).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    let kept = f.keep_public_key("kept.pub.json");
    std::fs::remove_file(&key).unwrap();
    add_failures(&f.data, 3, 5);
    let o = f.run(&[]);
    assert_eq!(o.status.code(), Some(SIGNING_KEY), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&*key.to_string_lossy()) && err.contains("never made silently"), "{err}");
    assert!(!key.exists(), "no new key was made");
    assert_eq!(f.verify(Some(&kept)).0, Some(0), "nothing was signed with another key");
}

#[test]
fn an_older_folders_key_is_moved_out_once_and_keeps_signing() {
    let f = folder(3);
    f.scan(&[]);
    let kept = f.keep_public_key("kept.pub.json");
    // An older release's layout: the key beside the log.
    let key = f.default_key_file();
    std::fs::rename(&key, f.out.join("fire-key.ed25519")).unwrap();
    add_failures(&f.data, 3, 4);
    let o = f.scan(&[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("moved the signing key") && err.contains("fire-key.ed25519"), "{err}");
    assert!(!f.out.join("fire-key.ed25519").exists(), "the folder's copy is gone");
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&key).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    assert_eq!(f.verify(Some(&kept)).0, Some(0), "the same key signs on");
    add_failures(&f.data, 4, 5);
    let again = f.scan(&[]);
    assert!(!String::from_utf8_lossy(&again.stderr).contains("moved"), "moved once");
}

#[test]
fn a_key_file_others_can_read_or_another_user_owns_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let f = folder(2);
    let key = f.s.path("keys/mine.ed25519");
    let flag = key.to_string_lossy().into_owned();
    f.scan(&["--key-file", &flag]);
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = f.run(&["--key-file", &flag]);
    assert_eq!(o.status.code(), Some(SIGNING_KEY), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&flag) && err.contains("0644"), "{err}");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    f.scan(&["--key-file", &flag]);
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        std::os::unix::fs::chown(&key, Some(65534), None).unwrap();
        let o = f.run(&["--key-file", &flag]);
        assert_eq!(o.status.code(), Some(SIGNING_KEY), "{}", text(&o));
        assert!(String::from_utf8_lossy(&o.stderr).contains("owned by uid 65534"), "{}", text(&o));
    } else {
        eprintln!("not root: the other owner's key is left to a run as root");
    }
}

#[test]
fn key_rotate_then_scan_then_verify_with_the_old_public_key_passes() {
    let f = folder(3);
    let key = f.s.path("keys/k.ed25519");
    let flag = key.to_string_lossy().into_owned();
    f.scan(&["--key-file", &flag]);
    let old = f.keep_public_key("old.pub.json");
    let o = f.rotate(&key);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["recorded"], "key-rotation", "{r:#}");
    add_failures(&f.data, 3, 6);
    f.scan(&["--key-file", &flag]);
    let (code, v) = f.verify(Some(&old));
    assert_eq!(code, Some(0), "{v:#}");
    assert_eq!(v["head"]["kid"], r["kid"], "the head is signed by the new key");
    assert_eq!(python_verify(&f.out, Some(&old)), Some(0), "the independent verifier follows the rotation too");
    let entries = fire_entries(&f.out);
    let rotation = entries.iter().find(|e| e["type"] == "key-rotation").expect("a key-rotation entry");
    assert!(rotation["key"]["signature"].is_string() && rotation["key"]["publicKey"].is_string(), "{rotation:#}");
    // The attacker rewrites the rotation to hand over to a key of its own,
    // chains every entry again and signs the head with that key: the old
    // key never signed that hand-over.
    let forger = SigningKey::from_bytes(&[9; 32]);
    let seg = f.out.join("fires-000001.ndjson");
    let mut prev = [0u8; 32];
    let mut lines = Vec::new();
    for line in std::fs::read_to_string(&seg).unwrap().lines() {
        let mut e: FireEntry = serde_json::from_str(line).unwrap();
        if let FireBody::KeyRotation { key, .. } | FireBody::KeyLost { key, .. } = &mut e.body {
            key.public_key = sentinel_host::base::hex(forger.verifying_key().as_bytes());
        }
        prev = e.seal(&prev);
        lines.push(serde_json::to_string(&e).unwrap() + "\n");
    }
    std::fs::write(&seg, lines.concat()).unwrap();
    let head = sign_head(&forger, lines.len() as u64, &prev, 1);
    std::fs::write(f.out.join(HEAD_FILE), serde_json::to_string(&head).unwrap()).unwrap();
    let (code, v) = f.verify(Some(&old));
    assert_eq!(code, Some(12), "{v:#}");
    assert!(v["finding"]["problem"].as_str().unwrap().contains("not signed by the key it replaces"), "{v:#}");
}

#[test]
fn a_lost_key_rotated_is_a_finding_verify_reports() {
    let f = folder(3);
    let key = f.s.path("keys/k.ed25519");
    let flag = key.to_string_lossy().into_owned();
    f.scan(&["--key-file", &flag]);
    let old = f.keep_public_key("old.pub.json");
    std::fs::remove_file(&key).unwrap();
    let o = f.rotate(&key);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["recorded"], "key-lost", "{r:#}");
    f.scan(&["--key-file", &flag]);
    for kept in [None, Some(old.as_path())] {
        let (code, v) = f.verify(kept);
        assert_eq!(code, Some(12), "{v:#}");
        assert!(v["finding"]["problem"].as_str().unwrap().contains("key-lost"), "{v:#}");
    }
    assert_eq!(python_verify(&f.out, Some(&old)), Some(1), "the independent verifier reports it too");
    let human = sentinel_host().args(["verify", "--out"]).arg(&f.out).output().unwrap();
    assert!(String::from_utf8_lossy(&human.stdout).contains("key-lost"), "{}", text(&human));
    // The operator vouches for the new key by keeping its public half.
    let new = f.keep_public_key("new.pub.json");
    assert_eq!(f.verify(Some(&new)).0, Some(0));
    assert_eq!(python_verify(&f.out, Some(&new)), Some(0));
}

#[test]
fn the_config_files_key_file_is_the_key_and_key_file_overrides_it() {
    let f = folder(2);
    let config = f.s.path("etc/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, "[fire_log]\nkey_file = \"keys/from-config.ed25519\"\n").unwrap();
    let flag = config.to_string_lossy().into_owned();
    f.scan(&["--config", &flag]);
    assert!(f.s.path("etc/keys/from-config.ed25519").is_file(), "the key is where the config file says");
    assert!(!f.s.path("config/openmausbot-sentinel/keys").exists(), "not at the default");
    // --key-file wins: a key file that is not there, for a signed log, is refused.
    let other = f.s.path("elsewhere.ed25519").to_string_lossy().into_owned();
    let o = f.run(&["--config", &flag, "--key-file", &other]);
    assert_eq!(o.status.code(), Some(SIGNING_KEY), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("elsewhere.ed25519"), "{}", text(&o));
}

#[test]
fn a_key_file_that_would_lie_inside_the_data_dir_is_refused_and_nothing_is_written_there() {
    let f = folder(2);
    let before = listing(&f.data);
    // A config home under the data dir (where the default key file goes), and a --key-file there.
    let mut c = run_command(&f.detectors, &f.data, &f.out);
    c.env("XDG_CONFIG_HOME", f.data.join("config")).args(["--once", "--json"]);
    let o = run_within(c, std::time::Duration::from_secs(300));
    assert_eq!(o.status.code(), Some(SIGNING_KEY), "{}", text(&o));
    assert!(text(&o).contains("inside the data dir"), "{}", text(&o));
    let o = f.rotate(&f.data.join("k.ed25519"));
    assert_eq!(o.status.code(), Some(SIGNING_KEY), "{}", text(&o));
    assert_eq!(listing(&f.data), before, "the data dir is as it was");
}
