//! The lints, run inside the test build instead of beside it.
//!
//! It owns one thing: making a cargo command compile the workspace's own
//! crates with `clippy-driver` and `-D warnings`, which is what `cargo
//! clippy` does, but under `cargo test` instead of `cargo check`. Cargo gives
//! `RUSTC_WORKSPACE_WRAPPER` to workspace members only, so every dependency
//! is compiled once, by rustc, for the lints and the tests alike (`cargo
//! clippy` checks each one again in its own mode), and each workspace target
//! the test build compiles (libraries, binaries, tests, benches, examples,
//! build scripts) is linted. A lint that fires fails the build before any
//! test runs. It never changes what is compiled: clippy-driver is rustc with
//! the lints added.
//!
//! The wrapper is part of every workspace unit's fingerprint, so the build
//! and the run of the tests both go through here (or the run compiles the
//! workspace again); builds started from inside the tests drop it
//! ([`crate::guest`] removes it, as it does `RUSTFLAGS`).

use std::path::PathBuf;
use std::process::Command;

/// The variables this sets, which a nested build must not inherit.
pub const VARS: [&str; 2] = ["RUSTC_WORKSPACE_WRAPPER", "CLIPPY_ARGS"];

/// clippy-driver of the toolchain that runs this cargo (beside its `cargo`
/// binary), else the one on `PATH` (the rustup proxy).
fn clippy_driver() -> PathBuf {
    std::env::var_os("CARGO")
        .map(|cargo| PathBuf::from(cargo).with_file_name(format!("clippy-driver{}", std::env::consts::EXE_SUFFIX)))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("clippy-driver"))
}

/// `cmd` with the workspace's crates compiled by clippy-driver, every
/// warning an error (clippy-driver reads its own arguments from
/// `CLIPPY_ARGS`, each followed by `__CLIPPY_HACKERY__`, as `cargo clippy`
/// passes them).
pub fn linted(cmd: &mut Command) -> &mut Command {
    cmd.env(VARS[0], clippy_driver()).env(VARS[1], "-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A crate of its own (its own workspace and target folder) with a
    /// library, a test and a bench target; `warn_in` puts a warning into one
    /// of them: rustc's unused variable in the test and the bench, a lint
    /// only clippy has (`len_zero`) in the library.
    fn scratch(dir: &std::path::Path, warn_in: Option<&str>) {
        let body = |target: &str| match (warn_in == Some(target), target) {
            (false, _) => "",
            (true, "lib") => "let _ = vec![1u8].len() == 0;",
            (true, _) => "let unused = 1;",
        };
        let files = [
            ("Cargo.toml", "[package]\nname = \"scratch\"\nversion = \"0.0.0\"\nedition = \"2024\"\n\n[workspace]\n\n[[bench]]\nname = \"b\"\nharness = false\n".to_owned()),
            ("src/lib.rs", format!("pub fn f() {{ {} }}\n", body("lib"))),
            ("tests/t.rs", format!("#[test]\nfn t() {{ {} }}\n", body("test"))),
            ("benches/b.rs", format!("fn main() {{ {} }}\n", body("bench"))),
        ];
        for (rel, text) in files {
            let path = dir.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
    }

    fn linted_build_passes(dir: &std::path::Path) -> bool {
        let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
        cmd.current_dir(dir).args(["test", "--all-targets", "--no-run", "--quiet"]);
        for var in ["CARGO_TARGET_DIR", "RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "CARGO_BUILD_TARGET"] {
            cmd.env_remove(var);
        }
        linted(&mut cmd).output().unwrap().status.success()
    }

    #[test]
    fn the_linted_test_build_fails_on_a_warning_in_a_test_or_a_bench_target() {
        let dir = tempfile::tempdir().unwrap();
        scratch(dir.path(), None);
        assert!(linted_build_passes(dir.path()), "a crate without a warning builds");
        for target in ["test", "bench", "lib"] {
            scratch(dir.path(), Some(target));
            assert!(!linted_build_passes(dir.path()), "an unused variable in the {target} target fails the build");
        }
    }
}
