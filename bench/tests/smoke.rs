//! The benchmark runs end to end on a small data dir, so `cargo xtask bench`
//! cannot rot between the runs that write docs/benchmarks.md. It asserts what
//! the run checks and produces, never a time: every shipped Rust detector
//! with a native twin (the scanner's five; the stock sentinels read roles
//! the benchmark's data has none of) reports as many observations as a
//! component as its native twin does, as unmetered and as its core-module
//! peer (`suite::run` fails otherwise; the peers are built from
//! `bench/peer/` as the run builds them), the second scan of unchanged data takes the fast path, the
//! full scan's phases fit in it, and every ratio and table is there.

use std::path::PathBuf;

use sentinel_bench::report;
use sentinel_bench::suite::{self, Options};

#[test]
fn the_benchmark_runs_and_component_and_native_twins_agree() {
    let root = xtask::guest::repo_root();
    let target = root.join("target");
    // The shipped detectors, built as the e2e tests build them (and sharing
    // their compiled-component cache), then the Rust ones alone: those have
    // native twins, and a cold start stays quick without the big ports.
    let built = target.join("bench-smoke").join("all");
    let cache = target.join("e2e").join("cache");
    xtask::guest::build_detectors_with(
        &root,
        &built,
        &xtask::guest::BuildOptions { target_dir: target.clone(), cache_dir: Some(cache.clone()) },
    )
    .expect("the shipped detectors build and load");
    let rust = tempfile::tempdir().unwrap();
    let mut names = Vec::new();
    for d in xtask::guest::detectors_under(&root.join("detectors")).unwrap() {
        // The stock sentinels read roles the benchmark's data has none of: they
        // would measure nothing, and have no native twin.
        if d.lang == xtask::guest::Lang::Rust && sentinel_bench::native::twin(&d.name).is_some() {
            let file = format!("{}.wasm", d.name);
            std::fs::copy(built.join(&file), rust.path().join(&file)).unwrap();
            names.push(d.name);
        }
    }
    // The core-module peers, built as `cargo xtask bench` builds them.
    let peers = sentinel_bench::peer::build(&root, &target).expect("the peers build");
    let work = tempfile::tempdir().unwrap();
    let opts = Options {
        detectors: PathBuf::from(rust.path()),
        peers: Some(peers.clone()),
        host: None,
        cache: Some(cache),
        sizes: vec![2_000],
        work: work.path().to_owned(),
        reps: Some(1),
        batch_rows: 64,
        // Not a timed test: a detector descheduled past 100 ms on a machine
        // busy with other tests must not fail it (the benchmark itself runs
        // under the product's limits).
        limits: sentinel_host::runtime::Limits {
            deadline: std::time::Duration::from_secs(60),
            ..sentinel_host::runtime::Limits::default()
        },
    };
    let r = suite::run(&opts, &mut |_| {}).expect("the benchmark runs");

    assert_eq!(r.startup.detectors, names.len());
    assert_eq!(r.sizes.len(), 1);
    let size = &r.sizes[0];
    // The floors ran (on a copy: the suite's fast-path check would fail had
    // the sqlite3 shell touched the data dir).
    assert!(size.ndjson_lines_ms > 0.0);
    assert_eq!(size.sqlite_shell_ms.is_some(), sentinel_bench::floors::sqlite_shell_available());
    assert!(size.records >= 1_500 && size.delivered > 0 && size.observations > 0, "{size:?}");
    for name in &names {
        let d = size.detectors.iter().find(|d| &d.name == name).unwrap_or_else(|| panic!("{name} measured"));
        assert!(d.ratio.is_some() && d.native_ns_per_record.is_some(), "{name} has a native twin");
        // Run again without fuel or deadline (the suite fails if it reports
        // otherwise than the metered component).
        assert!(d.unmetered_ratio.is_some() && d.unmetered_ns_per_record.is_some_and(|u| u > 0.0), "{name} unmetered");
        assert!(d.records > 0, "{name} got records");
        // Its peer ran with the same fuel and epoch and agreed on the
        // observations (the suite fails otherwise).
        if sentinel_bench::peer::file(&peers, name).is_file() {
            assert!(d.peer_ns_per_record.is_some_and(|p| p > 0.0) && d.peer_ratio.is_some(), "{name} peer");
            assert!(r.ratios.contains_key(&format!("{}.{name}.component_over_peer", size.records)));
        }
        assert!(r.ratios.contains_key(&format!("{}.{name}.component_over_native", size.records)));
    }
    // The quick mode a guest or engine change is judged by: the same table,
    // for the detectors asked for.
    let only = suite::detectors_only(&opts, &["cost".to_owned()], &mut |_| {}).expect("the detector table runs");
    assert_eq!(only.len(), 1);
    let cost: Vec<&str> = only[0].1.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(cost, ["cost"]);
    assert!(only[0].1[0].ratio.is_some() && only[0].1[0].wall_ratio.is_some());
    assert!(report::detector_lines(&only).contains("| cost |"));
    // The full scan reported its phases, and they fit in it.
    let phases = size.phases.expect("the full scan's phases");
    assert!(phases.read_ms > 0.0 && phases.commit_ms > 0.0, "{phases:?}");
    assert!(phases.read_ms + phases.decide_ms + phases.commit_ms + phases.export_ms <= size.full_scan_ms, "{phases:?}");
    // The peers of the two detectors the issue starts with were built, and
    // their agreement is a count greater than zero, not 0 = 0.
    for name in ["cost", "tool_error"] {
        assert!(sentinel_bench::peer::file(&peers, name).is_file(), "{name} has a peer");
        let d = size.detectors.iter().find(|d| d.name == name).unwrap();
        assert!(d.observations > 0 && d.peer_ratio.is_some(), "{name}: {} observations", d.observations);
    }
    assert!(r.targets.iter().any(|t| t.name.starts_with("canonical ABI")), "{:?}", r.targets);
    let tables = r.markdown();
    for heading in
        ["### Targets", "### Scan, raw read", "### Where the full scan's time goes", "### Detectors", "### Start-up"]
    {
        assert!(tables.contains(heading), "{heading} in the tables");
    }
    let doc = report::splice(&std::fs::read_to_string(root.join("docs/benchmarks.md")).unwrap(), &tables);
    assert!(doc.contains("## Reading the results"), "the prose around the tables is kept");
}
