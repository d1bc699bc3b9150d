//! The compiled-component cache: a second run loads compiled code instead of
//! compiling; a changed or corrupt entry is never used.

use serde_json::Value;

use crate::support::*;

fn scan_with_cache(s: &Scratch, cache: &std::path::Path) -> Value {
    let data = s.path("data");
    std::fs::create_dir_all(&data).unwrap();
    let o = sentinel_host()
        .args(["run", "--once", "--json", "--no-fast-path", "--detectors"])
        .arg(s.path("detectors"))
        .arg("--data-dir")
        .arg(&data)
        .arg("--out")
        .arg(s.path("out"))
        .arg("--cache-dir")
        .arg(cache)
        .args(["--deadline-ms", TEST_DEADLINE_MS])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn cache_of(summary: &Value, name: &str) -> String {
    detector(summary, name)["cache"].as_str().unwrap().to_owned()
}

/// Issue 18: the compiled code `build-detectors` leaves in the user cache
/// folder (the harness builds and loads every shipped detector exactly as
/// it does, into `shared_cache()`) is what a scan into a fresh output folder
/// loads when no `--cache-dir` is given: nothing is compiled again.
#[test]
fn the_first_scan_into_a_fresh_output_folder_after_a_build_starts_warm() {
    let s = Scratch::new();
    let names: Vec<String> =
        xtask::guest::detectors_under(&root().join("detectors")).unwrap().into_iter().map(|d| d.name).collect();
    let detectors = s.detectors_in("detectors", &names.iter().map(String::as_str).collect::<Vec<_>>(), &[]);
    let data = s.path("data");
    std::fs::create_dir_all(&data).unwrap();
    let out = s.path("fresh-out");
    let o = sentinel_host()
        .env("XDG_CACHE_HOME", user_cache_home())
        .args(["run", "--once", "--json", "--detectors"])
        .arg(&detectors)
        .arg("--data-dir")
        .arg(&data)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let summary: Value = serde_json::from_slice(&o.stdout).unwrap();
    for name in &names {
        assert_eq!(cache_of(&summary, name), "hit", "{name} was compiled again: {summary:#}");
    }
    assert!(names.iter().any(|n| n.ends_with("_py")) && names.iter().any(|n| n.ends_with("_js")), "{names:?}");
    assert!(!out.join("cache").exists(), "a cache folder was made in the output folder");
}

#[test]
fn a_second_run_loads_compiled_components_and_a_corrupt_entry_is_replaced() {
    let s = Scratch::new();
    s.detectors_with(&[]);
    let cache = s.path("cache");
    assert_eq!(cache_of(&scan_with_cache(&s, &cache), "cost"), "miss");
    assert_eq!(cache_of(&scan_with_cache(&s, &cache), "cost"), "hit");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&cache).unwrap().permissions().mode() & 0o777, 0o700);
    }
    // Corrupt every entry: each is discarded and compiled again.
    for entry in std::fs::read_dir(&cache).unwrap() {
        std::fs::write(entry.unwrap().path(), b"not compiled code").unwrap();
    }
    let summary = scan_with_cache(&s, &cache);
    assert_eq!(cache_of(&summary, "cost"), "replaced");
    assert_eq!(detector(&summary, "cost")["status"], "ok");
    assert_eq!(cache_of(&scan_with_cache(&s, &cache), "cost"), "hit");
}

#[test]
fn a_changed_component_is_compiled_again() {
    let s = Scratch::new();
    s.detectors_with(&[]);
    let cache = s.path("cache");
    assert_eq!(cache_of(&scan_with_cache(&s, &cache), "cost"), "miss");
    // The same detector with one more custom section: another file, another key.
    let path = s.path("detectors/cost.wasm");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(&[0x00, 0x05, 0x04, b'n', b'o', b't', b'e']);
    std::fs::write(&path, bytes).unwrap();
    let summary = scan_with_cache(&s, &cache);
    assert_eq!(detector(&summary, "cost")["status"], "ok", "{summary:#}");
    assert_eq!(cache_of(&summary, "cost"), "miss");
    assert_eq!(cache_of(&summary, "turn_stop"), "hit");
}
