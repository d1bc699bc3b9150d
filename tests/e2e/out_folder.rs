//! The output folder is ours or refused: another user's folder, or one that
//! group or others can write, is refused with exit 6 naming it and what is
//! wrong, and left as it was; a symlink planted at a name the host writes is
//! replaced or refused, never written through (docs/cli.md, the output folder).

#![cfg(unix)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use xtask::datagen::{self, DataSpec};

use crate::support::*;

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A run into `out` that must be refused with exit 6, naming `out` and `why`.
fn refused(s: &Scratch, out: &Path, why: &str) {
    let data = s.path("data");
    if !data.exists() {
        datagen::generate(&data, &DataSpec::default()).unwrap();
    }
    let o = run(&s.detectors_with(&[]), &data, out, &["--no-fast-path"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(6), "{stderr}");
    assert!(stderr.contains(&out.display().to_string()) && stderr.contains(why), "{stderr}");
    assert!(listing(out).is_empty(), "nothing written into a refused folder: {:?}", listing(out));
}

#[test]
fn an_output_folder_another_user_owns_is_refused_with_exit_6_and_left_as_it_is() {
    if !is_root() {
        eprintln!("SKIPPED an_output_folder_another_user_owns_is_refused: chown to another uid needs root");
        return;
    }
    let s = Scratch::new();
    let out = s.path("theirs");
    std::fs::create_dir(&out).unwrap();
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::chown(&out, Some(65534), Some(65534)).unwrap();
    refused(&s, &out, "owned by uid 65534, not by this user (uid 0)");
    assert_eq!(mode(&out), 0o755, "another user's folder is never chmodded");
    assert_eq!(std::fs::metadata(&out).map(|m| std::os::unix::fs::MetadataExt::uid(&m)).unwrap(), 65534);
}

#[test]
fn a_group_or_world_writable_output_folder_is_refused_with_exit_6_and_left_as_it_is() {
    let s = Scratch::new();
    for m in [0o777, 0o770, 0o1777] {
        let out = s.path(&format!("open-{m:o}"));
        std::fs::create_dir(&out).unwrap();
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(m)).unwrap();
        refused(&s, &out, &format!("group or others can write it (mode {m:04o})"));
        assert_eq!(mode(&out), m, "left as it was");
    }
}

#[test]
fn a_symlink_planted_at_a_name_the_host_writes_is_never_written_through() {
    let s = Scratch::new();
    let data = s.path("data");
    datagen::generate(&data, &DataSpec::default()).unwrap();
    let detectors = s.detectors_with(&[]);
    let out = s.path("out");
    let first = run(&detectors, &data, &out, &["--no-fast-path"]);
    assert_eq!(first.status.code(), Some(0), "{}", String::from_utf8_lossy(&first.stderr));
    assert_eq!(mode(&out), 0o700);

    // The attacker's files, outside the folder, and links to them where the
    // host replaces its exports after every scan.
    let victim = |name: &str| s.path(&format!("victim-{name}"));
    for name in ["issues.jsonl", "fires.head.json"] {
        std::fs::write(victim(name), b"untouched").unwrap();
        std::fs::set_permissions(victim(name), std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::remove_file(out.join(name)).unwrap();
        std::os::unix::fs::symlink(victim(name), out.join(name)).unwrap();
    }
    let again = run(&detectors, &data, &out, &["--no-fast-path"]);
    assert_eq!(again.status.code(), Some(0), "{}", String::from_utf8_lossy(&again.stderr));
    for name in ["issues.jsonl", "fires.head.json"] {
        assert!(std::fs::symlink_metadata(out.join(name)).unwrap().is_file(), "{name}: the link was replaced");
        assert_eq!(std::fs::read(victim(name)).unwrap(), b"untouched", "{name}: nothing written through the link");
        assert_eq!(mode(&victim(name)), 0o644, "{name}: the link's target is not chmodded");
    }
    assert!(!issues(&out).is_empty());
    assert_eq!(crate::ledger::verify(&out)["ok"], true);

    // A link at the writer lock, which the host writes its pid into: refused.
    let lock = out.join("ledger.lock");
    std::fs::write(victim("lock"), b"untouched").unwrap();
    let _ = std::fs::remove_file(&lock);
    std::os::unix::fs::symlink(victim("lock"), &lock).unwrap();
    let locked = run(&detectors, &data, &out, &["--no-fast-path"]);
    let stderr = String::from_utf8_lossy(&locked.stderr);
    assert_eq!(locked.status.code(), Some(6), "{stderr}");
    assert!(stderr.contains("ledger.lock"), "{stderr}");
    assert_eq!(std::fs::read(victim("lock")).unwrap(), b"untouched");

    // A link at the store itself, to a ledger kept elsewhere: SQLite is told
    // not to follow it, so that ledger is never written.
    std::fs::remove_file(&lock).unwrap();
    std::fs::rename(out.join("ledger.db"), victim("ledger.db")).unwrap();
    let kept = std::fs::read(victim("ledger.db")).unwrap();
    std::os::unix::fs::symlink(victim("ledger.db"), out.join("ledger.db")).unwrap();
    let linked = run(&detectors, &data, &out, &["--no-fast-path"]);
    let stderr = String::from_utf8_lossy(&linked.stderr);
    assert_eq!(linked.status.code(), Some(6), "{stderr}");
    assert!(stderr.contains("ledger.db"), "{stderr}");
    assert_eq!(std::fs::read(victim("ledger.db")).unwrap(), kept, "nothing written through the link");
}
