//! `cargo xtask new-detector NAME --lang rust|python|js` makes a detector
//! that builds, passes its own replay case and runs in a scan: checked for
//! every language in a scratch copy of the parts of the repository a
//! detector needs (the WIT package, the Rust SDK, the toolchain pins), built
//! with the repository's target folder and toolchains.
//!
//! A test binary of its own, so that its builds and compiles (tens of
//! seconds of both cores) never run beside the end-to-end tests that hold
//! detectors to a 100 ms deadline: cargo runs test binaries one at a time.

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
        .map(|l| if l.starts_with("members = [") { "members = [\"sdk\"]" } else { l })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(dir.join("Cargo.toml"), manifest + "\n").unwrap();
    std::fs::copy(real.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    for sub in ["wit", "sdk/src", "sdk/src/normalize", "sdk/python", "sdk/js"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
        for e in std::fs::read_dir(real.join(sub)).unwrap() {
            let p = e.unwrap().path();
            if p.is_file() {
                std::fs::copy(&p, dir.join(sub).join(p.file_name().unwrap())).unwrap();
            }
        }
    }
    std::fs::copy(real.join("sdk/Cargo.toml"), dir.join("sdk/Cargo.toml")).unwrap();
    std::fs::create_dir_all(dir.join("detectors")).unwrap();
}

#[test]
fn a_new_detector_in_each_language_builds_passes_its_case_and_runs() {
    let s = Scratch::new();
    let repo = s.path("repo");
    std::fs::create_dir_all(&repo).unwrap();
    scratch_repo(&repo);
    let langs = [("fresh_rust", Lang::Rust), ("fresh_py", Lang::Python), ("fresh_js", Lang::Js)];
    for (name, lang) in langs {
        let dir = xtask::scaffold::new_detector(&repo, name, lang).unwrap();
        assert!(dir.join(lang.marker()).is_file() && dir.join("cases/example.json").is_file());
    }
    assert!(xtask::scaffold::new_detector(&repo, "fresh_py", Lang::Js).is_err(), "a taken name is refused");

    let out = s.path("built");
    let built = xtask::guest::build_detectors_with(&repo, &out, &build_options()).expect("the new detectors build");
    assert_eq!(built.iter().map(|b| b.name.as_str()).collect::<Vec<_>>(), ["fresh_js", "fresh_py", "fresh_rust"]);

    for (name, _) in langs {
        let cases = repo.join("detectors").join(name.replace('_', "-")).join("cases");
        let o = replay(&out.join(format!("{name}.wasm")), &cases);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{name}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
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
