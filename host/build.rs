//! The commit `sentinel-host --version` names.
//!
//! Owns reading it: `SENTINEL_GIT_COMMIT` when set (a build from a source
//! tarball, which has no `.git`, says which commit it is), else `git
//! rev-parse` in the repository being built, else `unknown` (no git, or not a
//! checkout): the build never fails for it. It never looks at whether the
//! tree has uncommitted changes (that would rerun on every edit).
//!
//! The script runs again only when the commit can have changed: `HEAD`, the
//! branch it names, or `packed-refs` moved.

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_owned())
}

fn main() {
    println!("cargo:rerun-if-env-changed=SENTINEL_GIT_COMMIT");
    let commit = std::env::var("SENTINEL_GIT_COMMIT").ok().filter(|c| !c.is_empty()).or_else(|| {
        let commit = git(&["rev-parse", "--short=12", "HEAD"])?;
        // The files whose change means another commit (worktrees included:
        // git names where each one is).
        let mut watched = vec!["HEAD".to_owned(), "packed-refs".to_owned()];
        watched.extend(git(&["symbolic-ref", "-q", "HEAD"]));
        for name in watched {
            if let Some(path) = git(&["rev-parse", "--path-format=absolute", "--git-path", &name]).map(PathBuf::from)
                && path.exists()
            {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
        Some(commit)
    });
    // Without git, run again only when this script changes.
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-env=SENTINEL_GIT_COMMIT={}", commit.as_deref().unwrap_or("unknown"));
}
