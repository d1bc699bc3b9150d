//! The library's folders import one way (docs/architecture.md): every
//! `crate::` path outside tests names only a folder below its own in
//! [`ORDER`], so no import circle can form between folders. The check reads
//! the sources as text; a folder added to `host/src` must be placed in the
//! order, or this fails naming it.

use std::path::Path;

/// The folders from the top down: each may use only those after it. (`cli`
/// is the binary, over the library: it may use any of them.)
const ORDER: &[&str] = &[
    "cli",
    "ops",
    "watch",
    "community",
    "fleet",
    "core",
    "scan",
    "sources",
    "report",
    "ledger",
    "config",
    "runtime",
    "firelog",
    "model",
    "base",
];

/// `watch` and `ops` sit side by side: neither uses the other.
fn rank(folder: &str) -> Option<usize> {
    let rank = ORDER.iter().position(|f| *f == folder)?;
    Some(if folder == "ops" { rank + 1 } else { rank })
}

fn rs_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rs_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `(line, used folder)` for every `crate::x` outside comments and
/// before the file's `#[cfg(test)]` module.
fn uses(file: &Path) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(file).unwrap();
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.starts_with("#[cfg(test)]") {
            break;
        }
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            out.push((i + 1, name));
        }
    }
    out
}

#[test]
fn every_folder_imports_only_the_folders_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rs_files(&src, &mut files);
    let mut wrong = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(&src).unwrap();
        let first = rel.components().next().unwrap().as_os_str().to_string_lossy().into_owned();
        let folder = first.trim_end_matches(".rs");
        // The binary's `crate::` is itself; lib.rs only declares.
        if folder == "lib" || folder == "cli" {
            continue;
        }
        let Some(own) = rank(folder) else {
            wrong.push(format!("{}: the folder `{folder}` has no place in ORDER", rel.display()));
            continue;
        };
        for (line, used) in uses(file) {
            if used == folder {
                continue;
            }
            match rank(&used) {
                Some(r) if r > own => {}
                _ => wrong.push(format!("{}:{line}: `{folder}` uses `crate::{used}`", rel.display())),
            }
        }
    }
    assert!(wrong.is_empty(), "imports against the layering:\n{}", wrong.join("\n"));
}
