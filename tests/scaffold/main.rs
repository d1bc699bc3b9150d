//! `cargo xtask new-detector NAME --lang rust|python|js|c` makes a detector
//! that builds, passes its own replay case and runs in a scan: checked for
//! every language in a scratch copy of the parts of the repository a
//! detector needs (the WIT package, the Rust SDK, the toolchain pins), built
//! with the repository's target folder and toolchains.
//!
//! A test binary of its own, so that its builds and compiles (tens of
//! seconds of both cores) never run beside the end-to-end tests that hold
//! detectors to a 100 ms deadline: cargo runs test binaries one at a time.
//! With `--standalone`, the same for a project of its own outside the
//! repository, built with its language's own commands.

use std::path::Path;

use xtask::guest::Lang;

#[path = "../e2e/support.rs"]
#[allow(dead_code)]
mod support;

use support::*;

/// A scratch repository: the workspace with only the SDK as a member, the
/// lock file, `wit/`, `sdk/`, and an empty `detectors/`.
fn scratch_repo(dir: &Path) {
    let real = root();
    let manifest = std::fs::read_to_string(real.join("Cargo.toml")).unwrap();
    let manifest: String = manifest
        .lines()
        .filter(|l| !l.starts_with("exclude") && !l.starts_with("sentinel-host =") && !l.starts_with("xtask ="))
        // The proc macros named in the dev profile are the host's: with the
        // SDK alone, cargo would warn that each matches no package.
        .filter(|l| !l.ends_with("= { opt-level = 0 }"))
        .map(|l| if l.starts_with("members = [") { "members = [\"sdk\"]" } else { l })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(dir.join("Cargo.toml"), manifest + "\n").unwrap();
    std::fs::copy(real.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    for sub in [
        "wit",
        "sdk",
        "sdk/src",
        "sdk/src/normalize",
        "sdk/wit",
        "sdk/examples",
        "sdk/python",
        "sdk/js",
        "sdk/js/toolchain",
        "sdk/c",
    ] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
        for e in std::fs::read_dir(real.join(sub)).unwrap() {
            let p = e.unwrap().path();
            if p.is_file() {
                std::fs::copy(&p, dir.join(sub).join(p.file_name().unwrap())).unwrap();
            }
        }
    }
    std::fs::create_dir_all(dir.join("detectors")).unwrap();
}

#[test]
fn a_new_detector_in_each_language_builds_passes_its_case_and_runs() {
    let s = Scratch::new();
    let repo = s.path("repo");
    std::fs::create_dir_all(&repo).unwrap();
    scratch_repo(&repo);
    let langs = [("fresh_rust", Lang::Rust), ("fresh_py", Lang::Python), ("fresh_js", Lang::Js), ("fresh_c", Lang::C)];
    for (name, lang) in langs {
        let dir = xtask::scaffold::new_detector(&repo, name, lang).unwrap();
        assert!(dir.join(lang.marker()).is_file() && dir.join("cases/example.json").is_file());
    }
    assert!(xtask::scaffold::new_detector(&repo, "fresh_py", Lang::Js).is_err(), "a taken name is refused");

    let out = s.path("built");
    let built = xtask::guest::build_detectors_with(&repo, &out, &build_options()).expect("the new detectors build");
    assert_eq!(
        built.iter().map(|b| b.name.as_str()).collect::<Vec<_>>(),
        ["fresh_c", "fresh_js", "fresh_py", "fresh_rust"]
    );

    for (name, _) in langs {
        let cases = repo.join("detectors").join(name.replace('_', "-")).join("cases");
        passes_its_cases(name, &out.join(format!("{name}.wasm")), &cases);
    }

    let data = s.path("data");
    xtask::datagen::generate(&data, &xtask::datagen::DataSpec::default()).unwrap();
    let summary = scan(&out, &data, &s.path("out"));
    for (name, _) in langs {
        let d = detector(&summary, name);
        assert_eq!(d["status"], "ok", "{d:#}");
    }
    // The three report the same turns, and each its own kind.
    let counts: Vec<usize> = langs.iter().map(|(name, _)| issues_of(&s.path("out"), name).len()).collect();
    assert!(counts[0] > 0 && counts.iter().all(|&c| c == counts[0]), "{counts:?}");
}

/// `replay` of `wasm` against `cases` must pass (exit 0), or the test
/// fails with its output.
fn passes_its_cases(name: &str, wasm: &Path, cases: &Path) {
    let o = replay(wasm, cases);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{name}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Runs `cmd` in `dir`, which must succeed; returns its stdout.
fn must(what: &str, cmd: &mut std::process::Command) -> String {
    let o = cmd.output().unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    assert!(
        o.status.success(),
        "{what} failed ({}):\n{}{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A command with none of the build variables cargo gives a test (a
/// standalone project is built as its author would, from a plain shell).
fn plain(program: impl AsRef<std::ffi::OsStr>, dir: &Path) -> std::process::Command {
    let mut c = std::process::Command::new(program);
    c.current_dir(dir);
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy().into_owned();
        let set_by_cargo =
            ["CARGO_PKG_", "CARGO_BIN_", "CARGO_CRATE_", "CARGO_MANIFEST_", "CARGO_TARGET_", "CARGO_BUILD_"]
                .iter()
                .any(|p| k.starts_with(p));
        if set_by_cargo
            || ["RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "CARGO_PRIMARY_PACKAGE", "VIRTUAL_ENV"].contains(&k.as_str())
            || xtask::lints::VARS.contains(&k.as_str())
        {
            c.env_remove(&k);
        }
    }
    c
}

/// Builds the standalone project `dir` of `lang` with that language's own
/// commands only (cargo; venv, pip and componentize-py; npm) and returns
/// its component.
fn build_standalone(name: &str, lang: Lang, dir: &Path) -> std::path::PathBuf {
    match lang {
        Lang::Rust => {
            // Its own target folder, kept between runs (the Rust SDK's
            // dependencies compile once), outside the project as any would be.
            let target = root().join("target").join("standalone-rust");
            must(
                "cargo build --target wasm32-wasip2 --release",
                plain("cargo", dir)
                    .args(["build", "--quiet", "--target", "wasm32-wasip2", "--release"])
                    .env("CARGO_TARGET_DIR", &target),
            );
            target.join("wasm32-wasip2/release").join(format!("{name}.wasm"))
        }
        Lang::Python => {
            must("python3 -m venv .venv", plain("python3", dir).args(["-m", "venv", ".venv"]));
            let venv = dir.join(".venv");
            must(
                "pip install -r requirements.txt",
                plain(venv.join("bin/pip"), dir).args([
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                    "-r",
                    "requirements.txt",
                ]),
            );
            // What `. .venv/bin/activate` sets.
            let path = format!("{}:{}", venv.join("bin").display(), std::env::var("PATH").unwrap_or_default());
            must(
                "componentize-py",
                plain(venv.join("bin/componentize-py"), dir)
                    .env("VIRTUAL_ENV", &venv)
                    .env("PATH", path)
                    .args(["-d", "wit/sentinel-detector-0.2.0", "-w", "detector-world", "componentize", "app", "-o"])
                    .arg(format!("{name}.wasm")),
            );
            dir.join(format!("{name}.wasm"))
        }
        Lang::Js => {
            must("npm install", plain("npm", dir).args(["install", "--no-audit", "--no-fund", "--quiet"]));
            must("npm run build", plain("npm", dir).args(["run", "build", "--quiet"]));
            dir.join(format!("{name}.wasm"))
        }
        Lang::C => unreachable!("no standalone C project"),
    }
}

/// An author outside the repository: `new-detector --standalone` makes a
/// project in a temporary folder outside it, per language, that builds with
/// that language's own commands, taking the SDK as a package; the component
/// passes its replay case with the binary and scans beside the shipped
/// detectors. The SDKs also pack as their registries' packages.
#[test]
fn a_standalone_detector_in_each_language_builds_with_its_own_tools_replays_and_scans() {
    let s = Scratch::new();
    assert!(!s.path("").starts_with(root()), "the projects live outside the repository");
    let langs = [("outside_rust", Lang::Rust), ("outside_py", Lang::Python), ("outside_js", Lang::Js)];
    // The three projects are independent (own folders, own tools, own
    // target folder for the Rust one): built side by side, since most of
    // each is one process (pip, npm, componentize) holding one core or
    // waiting on its package cache. A panic in one fails the test.
    let built: Vec<(&str, std::path::PathBuf)> = std::thread::scope(|scope| {
        let builds: Vec<_> = langs
            .iter()
            .map(|&(name, lang)| {
                let dir = s.path(&name.replace('_', "-"));
                scope.spawn(move || {
                    xtask::scaffold::new_standalone(&root(), name, lang, &dir).unwrap();
                    for f in ["README.md", "cases/example.json", "wit/sentinel-detector-0.2.0/detector.wit"] {
                        assert!(dir.join(f).is_file(), "{name}: {f}");
                    }
                    let wasm = build_standalone(name, lang, &dir);
                    passes_its_cases(name, &wasm, &dir.join("cases"));
                    (name, wasm)
                })
            })
            .collect();
        builds.into_iter().map(|b| b.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect()
    });
    assert!(
        xtask::scaffold::new_standalone(&root(), "again", Lang::Rust, &s.path("outside-rust")).is_err(),
        "a folder that is not empty is refused"
    );

    // Installed next to the shipped detectors: each scans, beside them.
    let shipped: Vec<String> = xtask::guest::detectors_under(&root().join("detectors"))
        .unwrap()
        .into_iter()
        .filter(|d| d.lang == Lang::Rust)
        .map(|d| d.name)
        .collect();
    let detectors = s.detectors_in("installed", &shipped.iter().map(String::as_str).collect::<Vec<_>>(), &[]);
    for (name, wasm) in &built {
        std::fs::copy(wasm, detectors.join(format!("{name}.wasm"))).unwrap();
    }
    let data = s.path("data");
    xtask::datagen::generate(&data, &xtask::datagen::DataSpec::default()).unwrap();
    let summary = scan(&detectors, &data, &s.path("out"));
    for name in shipped.iter().map(String::as_str).chain(langs.iter().map(|(n, _)| *n)) {
        assert_eq!(detector(&summary, name)["status"], "ok", "{name}: {summary:#}");
    }
    let counts: Vec<usize> = langs.iter().map(|(name, _)| issues_of(&s.path("out"), name).len()).collect();
    assert!(counts[0] > 0 && counts.iter().all(|&c| c == counts[0]), "{counts:?}");

    // The SDKs pack: a wheel, an npm tarball, a crate that carries its WIT.
    let packs = s.path("packs");
    std::fs::create_dir_all(&packs).unwrap();
    let pip = s.path("outside-py/.venv/bin/pip");
    must(
        "pip wheel sdk/python",
        plain(&pip, &packs)
            .args(["wheel", "--quiet", "--disable-pip-version-check", "--no-deps", "-w"])
            .arg(&packs)
            .arg(root().join("sdk/python")),
    );
    assert!(packs.join("sentinel_batch-0.2.0-py3-none-any.whl").is_file(), "{:?}", listing(&packs));
    must("npm pack", plain("npm", &root().join("sdk/js")).args(["pack", "--quiet", "--pack-destination"]).arg(&packs));
    assert!(packs.join("sentinel-batch-0.2.0.tgz").is_file(), "{:?}", listing(&packs));
    let listed = must(
        "cargo package --list -p sentinel-sdk",
        plain("cargo", &root()).args(["package", "--list", "--allow-dirty", "-p", "sentinel-sdk"]),
    );
    for f in ["wit/detector.wit", "README.md", "examples/expensive_turn.rs", "src/lib.rs"] {
        assert!(listed.lines().any(|l| l == f), "the crate carries {f}:\n{listed}");
    }
}
