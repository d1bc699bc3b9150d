//! `cargo xtask new-detector NAME --lang rust|python|js [--standalone DIR]`:
//! a new detector that builds, passes its own replay case and loads in the
//! host.
//!
//! Inside the repository the folder is `detectors/<name with - for _>/`: the
//! sources from `xtask/templates/` (a detector that reports turns that did
//! not end ok), and `cases/example.json`, a replay case it passes. A Rust
//! detector is also added to the workspace's members. With `--standalone DIR`
//! it is a project of its own in DIR, for an author outside the repository:
//! the same detector and case, the WIT package (`sentinel-host wit`), the
//! build files of its language, which take the SDK as a package of this
//! checkout (pinned by version), and a README that says how to build, replay,
//! inspect and install it. Nothing existing is ever overwritten.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::json;

use crate::guest::Lang;

const RUST_CARGO: &str = include_str!("../templates/rust-Cargo.toml");
const RUST_LIB: &str = include_str!("../templates/rust-lib.rs");
const PYTHON_APP: &str = include_str!("../templates/python-app.py");
const JS_DETECTOR: &str = include_str!("../templates/js-detector.js");
const C_DETECTOR: &str = include_str!("../templates/c-detector.c");
const STANDALONE_RUST_CARGO: &str = include_str!("../templates/standalone/rust-Cargo.toml");
const STANDALONE_RUST_CARGO_CONFIG: &str = include_str!("../templates/standalone/rust-cargo-config.toml");
const STANDALONE_PY_REQUIREMENTS: &str = include_str!("../templates/standalone/python-requirements.txt");
const STANDALONE_JS_PACKAGE: &str = include_str!("../templates/standalone/js-package.json");
const STANDALONE_GITIGNORE: &str = include_str!("../templates/standalone/gitignore");
const STANDALONE_NPMRC: &str = include_str!("../templates/standalone/npmrc");
const STANDALONE_README: &str = include_str!("../templates/standalone/README.md");

/// Where a new detector lives, which decides how its sources reach the SDK.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Home {
    /// `detectors/` of the repository: built by `cargo xtask build-detectors`.
    Repo,
    /// A project of its own, built with its language's own commands.
    Standalone,
}

/// The template `t` for detector `name`, with every placeholder filled.
fn fill(t: &str, name: &str, home: Home) -> String {
    let type_name: String =
        name.split('_').filter(|w| !w.is_empty()).map(|w| w[..1].to_ascii_uppercase() + &w[1..]).collect();
    let (py_build, py_note, js_build, js_note, js_module) = match home {
        Home::Repo => (
            "Built with componentize-py against wit/detector.wit (world `detector-world`):\n\
             `cargo xtask build-detectors` does it, with the SDK's batch reader\n\
             (sdk/python/sentinel_batch.py) beside it.",
            "# Reading the host's packed batches: the SDK's module (sdk/python/sentinel_batch.py),\n\
             # which `cargo xtask build-detectors` builds into every Python detector.",
            "// Built with componentize-js against wit/detector.wit (world\n\
             // `detector-world`): `cargo xtask build-detectors` does it, with the SDK's\n\
             // batch reader (sdk/js/sentinel-batch.js) beside it. WIT `s64`/`u64` values\n\
             // are BigInts in JavaScript.",
            "// Reading the host's packed batches: the SDK's module (sdk/js/sentinel-batch.js),\n\
             // which `cargo xtask build-detectors` builds into every JavaScript detector.",
            "./sentinel-batch.js",
        ),
        Home::Standalone => (
            "Built with componentize-py against the WIT package in wit/ (world\n\
             `detector-world`), in a venv that holds the SDK's batch reader, the\n\
             `sentinel-batch` package (requirements.txt): see README.md.",
            "# Reading the host's packed batches: the SDK's `sentinel-batch` package.",
            "// Built with componentize-js against the WIT package in wit/ (world\n\
             // `detector-world`): `npm run build`, see README.md. WIT `s64`/`u64` values\n\
             // are BigInts in JavaScript.",
            "// Reading the host's packed batches: the SDK's `sentinel-batch` package\n\
             // (package.json). componentize-js resolves relative imports only.",
            "./node_modules/sentinel-batch/sentinel-batch.js",
        ),
    };
    let (build, note) = if t.starts_with("//") { (js_build, js_note) } else { (py_build, py_note) };
    t.replace("{{name}}", name)
        .replace("{{Type}}", &type_name)
        .replace("{{build}}", build)
        .replace("{{sdk_note}}", note)
        .replace("{{batch_module}}", js_module)
}

/// A detector name: lowercase ASCII letters, digits and `_`, starting with a letter.
pub fn check_name(name: &str) -> Result<()> {
    let ok = name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !ok {
        bail!("detector name `{name}` must be lowercase letters, digits and _, starting with a letter (at most 64)");
    }
    Ok(())
}

/// Creates the detector `name` in `root/detectors/` and returns its folder.
pub fn new_detector(root: &Path, name: &str, lang: Lang) -> Result<PathBuf> {
    check_name(name)?;
    let folder = name.replace('_', "-");
    let dir = root.join("detectors").join(&folder);
    if dir.exists() {
        bail!("{} already exists", dir.display());
    }
    let taken = crate::guest::detectors_under(&root.join("detectors"))?;
    if taken.iter().any(|d| d.name == name) {
        bail!("a detector named {name} already exists");
    }
    let fill = |t: &str| fill(t, name, Home::Repo);
    let write = |rel: &str, text: String| write_new(&dir, rel, text);
    match lang {
        Lang::Rust => {
            write("Cargo.toml", fill(RUST_CARGO))?;
            write("src/lib.rs", fill(RUST_LIB))?;
            add_member(root, &format!("detectors/{folder}"))?;
        }
        Lang::Python => write(Lang::Python.marker(), fill(PYTHON_APP))?,
        Lang::Js => write(Lang::Js.marker(), fill(JS_DETECTOR))?,
        Lang::C => write(Lang::C.marker(), fill(C_DETECTOR))?,
    }
    write("cases/example.json", case_text(name)?)?;
    Ok(dir)
}

/// Writes `text` to `dir/rel`, creating folders on the way.
fn write_new(dir: &Path, rel: &str, text: String) -> Result<()> {
    let path = dir.join(rel);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
    }
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
}

fn case_text(name: &str) -> Result<String> {
    let mut case = serde_json::to_string_pretty(&example_case(name))?;
    case.push('\n');
    Ok(case)
}

/// The versions a standalone project pins its toolchain to: the ones this
/// repository builds its own detectors with.
#[derive(Debug)]
struct Pins {
    componentize_py: String,
    componentize_js: String,
    preview2_shim: String,
}

fn pins(root: &Path) -> Result<Pins> {
    let req = root.join("sdk/python/requirements.txt");
    let req = std::fs::read_to_string(&req).with_context(|| format!("cannot read {}", req.display()))?;
    let componentize_py = req
        .lines()
        .find_map(|l| l.trim().strip_prefix("componentize-py=="))
        .context("sdk/python/requirements.txt pins no componentize-py==")?
        .to_owned();
    let pkg = root.join("sdk/js/toolchain/package.json");
    let pkg: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&pkg).with_context(|| format!("cannot read {}", pkg.display()))?)?;
    let dep = |n: &str| {
        pkg["dependencies"][n].as_str().map(str::to_owned).with_context(|| format!("sdk/js/toolchain pins no {n}"))
    };
    Ok(Pins {
        componentize_py,
        componentize_js: dep("@bytecodealliance/componentize-js")?,
        preview2_shim: dep("@bytecodealliance/preview2-shim")?,
    })
}

/// Creates the detector `name` as a project of its own in `dir` (which must
/// not exist, or be empty) and returns `dir`. `root` is the checkout whose
/// SDK it depends on.
pub fn new_standalone(root: &Path, name: &str, lang: Lang, dir: &Path) -> Result<PathBuf> {
    check_name(name)?;
    if lang == Lang::C {
        // Its build would need the bindings generator and a component
        // encoder as commands of their own (wit-bindgen-cli, wasm-tools),
        // which nothing here installs yet.
        bail!(
            "a standalone C project is not offered yet: make the detector in this repository \
             (cargo xtask new-detector {name} --lang c), or start from rust, python or js"
        );
    }
    if dir.read_dir().is_ok_and(|mut d| d.next().is_some()) {
        bail!("{} is not empty: a standalone detector starts in a new or empty folder", dir.display());
    }
    let sdk = |sub: &str| -> Result<String> {
        let p = root.join(sub);
        let p = p.canonicalize().with_context(|| format!("cannot find the SDK at {}", p.display()))?;
        Ok(p.display().to_string())
    };
    let pins = pins(root)?;
    let wit_version = sentinel_host::runtime::capabilities::WIT_VERSION;
    let folder = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| name.into());
    let fill = |t: &str| {
        fill(t, name, Home::Standalone)
            .replace("{{folder}}", &folder.to_ascii_lowercase())
            .replace("{{wit_version}}", wit_version)
            .replace("{{componentize_py}}", &pins.componentize_py)
            .replace("{{componentize_js}}", &pins.componentize_js)
            .replace("{{preview2_shim}}", &pins.preview2_shim)
    };
    let write = |rel: &str, text: String| write_new(dir, rel, text);
    match lang {
        Lang::Rust => {
            write("Cargo.toml", fill(STANDALONE_RUST_CARGO).replace("{{sdk}}", &sdk("sdk")?))?;
            write("src/lib.rs", fill(RUST_LIB))?;
            write(".cargo/config.toml", STANDALONE_RUST_CARGO_CONFIG.to_owned())?;
            // The versions this repository tests the SDK with; cargo drops what it does not use.
            let lock = std::fs::read_to_string(root.join("Cargo.lock")).context("cannot read Cargo.lock")?;
            write("Cargo.lock", lock)?;
        }
        Lang::Python => {
            write("app.py", fill(PYTHON_APP))?;
            write("requirements.txt", fill(STANDALONE_PY_REQUIREMENTS).replace("{{sdk}}", &sdk("sdk/python")?))?;
        }
        Lang::Js => {
            write("detector.js", fill(JS_DETECTOR))?;
            write("package.json", fill(STANDALONE_JS_PACKAGE).replace("{{sdk}}", &sdk("sdk/js")?))?;
            write(".npmrc", STANDALONE_NPMRC.to_owned())?;
        }
        Lang::C => unreachable!("refused above"),
    }
    write("cases/example.json", case_text(name)?)?;
    write(".gitignore", STANDALONE_GITIGNORE.to_owned())?;
    write("README.md", readme(&fill(STANDALONE_README), lang))?;
    sentinel_host::ops::wit_export::write_all(&dir.join("wit"))
        .with_context(|| format!("cannot write the WIT package into {}", dir.join("wit").display()))?;
    Ok(dir.to_owned())
}

/// The README template keeps, of its `<!-- lang -->` ... `<!-- end -->`
/// blocks, those of `lang`.
fn readme(text: &str, lang: Lang) -> String {
    let mut out = String::new();
    let mut keep = true;
    for line in text.lines() {
        if let Some(l) = line.strip_prefix("<!-- ").and_then(|l| l.strip_suffix(" -->")) {
            keep = l == "end" || l == lang.as_str();
            continue;
        }
        if keep {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The replay case every template passes: of two turns, the one that did
/// not end ok fires.
fn example_case(name: &str) -> serde_json::Value {
    let row = |id: &str, ok: bool, at: i64, turn: &str| {
        json!({"id": id, "ok": ok, "created_at": at, "bot_id": "bot-1", "thread_id": "th-1", "turn_id": turn,
               "stop_reason": if ok { "end_turn" } else { "error" }, "cost": 0.5})
    };
    json!({
        "description": "of two turns, the one that did not end ok fires",
        "scan_time": 1_791_895_800_000_i64,
        "config": {},
        "state": null,
        "records": [{"source": "events", "kind": "turn-completed",
                     "rows": [row("e1", true, 1000, "t1"), row("e2", false, 2000, "t2")]}],
        "expect": [{
            "kind": name,
            "sig": sentinel_host::ledger::issue_sig(name, 1, "bot-1"),
            "title": "a turn did not end ok",
            "origin": "harness",
            "severity": "low",
            "botId": "bot-1",
            "threadId": "th-1",
            "turnId": "t2",
            "at": 2000,
            "occurrence": "e2",
            "evidenceRef": {"source": "events", "id": "e2"},
            "wastedTurns": 1,
            "groupingVersion": 1
        }]
    })
}

/// Adds `member` to `[workspace] members` in `root/Cargo.toml`.
fn add_member(root: &Path, member: &str) -> Result<()> {
    let path = root.join("Cargo.toml");
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let start = text.find("members = [").with_context(|| format!("{} has no `members = [`", path.display()))?;
    let end = start + text[start..].find(']').with_context(|| format!("{}: unterminated members", path.display()))?;
    let list = text[start..end].trim_end().trim_end_matches(',');
    let updated = format!("{list}, \"{member}\"{}", &text[end..]);
    std::fs::write(&path, format!("{}{updated}", &text[..start]))
        .with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_standalone_readme_keeps_the_blocks_of_its_language_only() {
        let text = "top\n<!-- rust -->\ncargo\n<!-- python -->\npip\n<!-- end -->\nbottom\n";
        assert_eq!(readme(text, Lang::Python), "top\npip\nbottom\n");
        assert_eq!(readme(text, Lang::Rust), "top\ncargo\nbottom\n");
        for lang in [Lang::Rust, Lang::Python, Lang::Js] {
            let r = readme(STANDALONE_README, lang);
            assert!(!r.contains("<!--") && r.contains("sentinel-host replay"), "{}", lang.as_str());
        }
    }

    #[test]
    fn a_standalone_c_project_is_refused_with_what_to_do_instead() {
        let dir = tempfile::tempdir().unwrap();
        let e = new_standalone(&crate::guest::repo_root(), "x", Lang::C, &dir.path().join("x")).unwrap_err();
        assert!(e.to_string().contains("--lang c"), "{e}");
        assert!(!dir.path().join("x").exists(), "nothing is written");
    }

    /// The `[target.wasm32-wasip2]` table of a cargo config, from its header to the next one.
    fn wasm_target_table(config: &str) -> &str {
        let start = config.find("[target.wasm32-wasip2]").expect("a [target.wasm32-wasip2] table");
        let rest = &config[start..];
        rest[1..].find("\n[").map_or(rest, |end| &rest[..end + 1]).trim()
    }

    #[test]
    fn a_standalone_rust_detector_is_built_with_the_repositorys_guest_flags() {
        // The SDK's normalizer reads sixteen bytes at a time only with
        // `simd128`: a standalone project builds as the repository's guests do.
        let repo = std::fs::read_to_string(crate::guest::repo_root().join(".cargo/config.toml")).unwrap();
        assert!(wasm_target_table(&repo).contains("+simd128"), "{repo}");
        let dir = tempfile::tempdir().unwrap();
        let project = new_standalone(&crate::guest::repo_root(), "x", Lang::Rust, &dir.path().join("x")).unwrap();
        let written = std::fs::read_to_string(project.join(".cargo/config.toml")).unwrap();
        assert_eq!(wasm_target_table(&written), wasm_target_table(&repo));
    }

    #[test]
    fn names_are_identifiers() {
        assert!(check_name("slow_tool").is_ok());
        for bad in ["Slow", "1x", "a-b", "", "a b"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_rust_detector_joins_the_workspace_members() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("Cargo.toml"), "[workspace]\nmembers = [\"host\", \"sdk\"]\nexclude = []\n")
            .unwrap();
        add_member(dir.path(), "detectors/x").unwrap();
        let text = std::fs::read_to_string(dir.path().join("Cargo.toml")).unwrap();
        assert_eq!(text, "[workspace]\nmembers = [\"host\", \"sdk\", \"detectors/x\"]\nexclude = []\n");
    }

    /// The shipped Python and JavaScript detectors and the templates read
    /// batches with the SDK's one module, never a copy of it, so a fix to it
    /// reaches every detector.
    #[test]
    fn every_python_and_js_detector_reads_batches_with_the_sdks_module() {
        let root = crate::guest::repo_root();
        let import = |lang| match lang {
            Lang::Python => "from sentinel_batch import ",
            _ => "from './sentinel-batch.js';",
        };
        let mut texts = vec![(Lang::Python, "template".to_owned(), fill(PYTHON_APP, "x", Home::Repo))];
        texts.push((Lang::Js, "template".to_owned(), fill(JS_DETECTOR, "x", Home::Repo)));
        for d in crate::guest::detectors_under(&root.join("detectors")).unwrap() {
            if matches!(d.lang, Lang::Python | Lang::Js) {
                texts.push((d.lang, d.name.clone(), std::fs::read_to_string(d.dir.join(d.lang.marker())).unwrap()));
            }
        }
        assert!(texts.len() > 2, "shipped Python or JavaScript detectors are checked too");
        for (lang, name, text) in texts {
            assert!(text.contains(import(lang)), "{name} imports the SDK's batch reader");
            assert!(!text.contains("class Batch"), "{name} carries no copy of the batch reader");
        }
    }
}
