//! `cargo xtask new-detector NAME --lang rust|python|js`: a new detector
//! folder that builds, passes its own replay case and loads in the host.
//!
//! The folder is `detectors/<name with - for _>/`: the sources from
//! `xtask/templates/` (a detector that reports turns that did not end ok),
//! and `cases/example.json`, a replay case it passes. A Rust detector is also
//! added to the workspace's members. Nothing existing is ever overwritten.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::json;

use crate::guest::Lang;

const RUST_CARGO: &str = include_str!("../templates/rust-Cargo.toml");
const RUST_LIB: &str = include_str!("../templates/rust-lib.rs");
const PYTHON_APP: &str = include_str!("../templates/python-app.py");
const JS_DETECTOR: &str = include_str!("../templates/js-detector.js");

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
    let type_name: String =
        name.split('_').filter(|w| !w.is_empty()).map(|w| w[..1].to_ascii_uppercase() + &w[1..]).collect();
    let fill = |t: &str| t.replace("{{name}}", name).replace("{{Type}}", &type_name);
    let write = |rel: &str, text: String| -> Result<()> {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
    };
    match lang {
        Lang::Rust => {
            write("Cargo.toml", fill(RUST_CARGO))?;
            write("src/lib.rs", fill(RUST_LIB))?;
            add_member(root, &format!("detectors/{folder}"))?;
        }
        Lang::Python => write(Lang::Python.marker(), fill(PYTHON_APP))?,
        Lang::Js => write(Lang::Js.marker(), fill(JS_DETECTOR))?,
    }
    let mut case = serde_json::to_string_pretty(&example_case(name))?;
    case.push('\n');
    write("cases/example.json", case)?;
    Ok(dir)
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
        let mut texts = vec![(Lang::Python, "template".to_owned(), PYTHON_APP.to_owned())];
        texts.push((Lang::Js, "template".to_owned(), JS_DETECTOR.to_owned()));
        for d in crate::guest::detectors_under(&root.join("detectors")).unwrap() {
            if d.lang != Lang::Rust {
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
