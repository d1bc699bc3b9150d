//! Detectors in other languages: the Python and C ports of `cost` and the
//! JavaScript port of `queue_wait` return exactly the observations their Rust
//! originals return on the same generated data (compared one by one, and as
//! the issues a scan keeps), ship the same replay cases, and beside their
//! originals count nothing twice. (They pass the capability rules: the build
//! behind `shipped_detectors` loads every component with the host's runtime.)

use crate::support::*;

/// (Rust original, its port, the port's folder).
const TWINS: &[(&str, &str, &str)] =
    &[("cost", "cost_py", "cost-py"), ("queue_wait", "queue_wait_js", "queue-wait-js"), ("cost", "cost_c", "cost-c")];

/// A data dir with a few hundred turns and queue waits, and thresholds low
/// enough that both detectors fire often.
fn data(s: &Scratch) -> std::path::PathBuf {
    let dir = s.path("data");
    let spec = xtask::datagen::DataSpec { seed: 11, turns_per_thread: 30, ..Default::default() };
    xtask::datagen::generate(&dir, &spec).unwrap();
    dir
}

/// The thresholds every scan and replay here uses, as flags and as config.
const COST_USD: f64 = 3.25;
const QUEUE_WAIT_S: u64 = 150;

fn flags() -> [String; 4] {
    ["--cost".into(), COST_USD.to_string(), "--queue-wait".into(), QUEUE_WAIT_S.to_string()]
}

fn scan_with(detectors: &std::path::Path, data: &std::path::Path, out: &std::path::Path) -> serde_json::Value {
    let flags = flags();
    let o = run(detectors, data, out, &flags.each_ref().map(String::as_str));
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn each_port_observes_exactly_what_its_rust_original_does() {
    let s = Scratch::new();
    let data = data(&s);
    for (original, port, _) in TWINS {
        // Folders named after the port: an original may have several.
        let a = scan_with(
            &s.detectors_in(&format!("d-{port}-original"), &[original], &[]),
            &data,
            &s.path(&format!("out-{port}-original")),
        );
        let b = scan_with(&s.detectors_in(&format!("d-{port}"), &[port], &[]), &data, &s.path(&format!("out-{port}")));
        let (da, db) = (detector(&a, original), detector(&b, port));
        assert_eq!((da["status"].as_str(), db["status"].as_str()), (Some("ok"), Some("ok")), "{a:#}\n{b:#}");
        let n = da["observations"].as_u64().unwrap();
        assert!(n >= 10, "{original} fires often enough on this data to compare ({n})");
        assert_eq!(db["observations"].as_u64(), Some(n), "{port} reports as many observations as {original}");
        // The issues hold everything an observation carries but the detector's
        // name: signature, title, origin, severity, ids, times, counts, evidence.
        let (ia, ib) = (issues(&s.path(&format!("out-{port}-original"))), issues(&s.path(&format!("out-{port}"))));
        assert!(!ia.is_empty());
        assert_eq!(ia, ib, "{port} and {original} keep the same issues");
        // Together, every observation of the port is an occurrence the
        // original reported too: counted once.
        let both = scan_with(
            &s.detectors_in(&format!("d-both-{port}"), &[original, port], &[]),
            &data,
            &s.path(&format!("out-both-{port}")),
        );
        assert_eq!(both["issues"]["counted"].as_u64(), Some(n), "{both:#}");
        assert_eq!(both["issues"]["repeated"].as_u64(), Some(n), "{both:#}");
        assert_eq!(issues(&s.path(&format!("out-both-{port}"))), ia);
    }
}

#[test]
fn each_port_ships_its_originals_replay_cases_unchanged() {
    let dets = xtask::guest::detectors_under(&root().join("detectors")).unwrap();
    for (original, port, folder) in TWINS {
        let o = dets.iter().find(|d| d.name == *original).unwrap();
        let p = dets.iter().find(|d| d.name == *port).unwrap();
        assert!(p.dir.ends_with(folder));
        assert_eq!(listing(&o.dir.join("cases")), listing(&p.dir.join("cases")), "{port}");
        for case in listing(&o.dir.join("cases")) {
            let (a, b) =
                (std::fs::read(o.dir.join("cases").join(&case)), std::fs::read(p.dir.join("cases").join(&case)));
            assert_eq!(a.unwrap(), b.unwrap(), "{port}: cases/{case} differs from {original}'s");
        }
    }
}

/// Every batch the default sources read from `data`, in the host's order.
fn batches(data: &std::path::Path, scan_time_ms: i64) -> Vec<sentinel_host::model::record::Batch> {
    let mut out = Vec::new();
    for source in sentinel_host::sources::default_sources() {
        let ctx = sentinel_host::sources::ReadContext { data_dir: data, scan_time_ms, batch_rows: 256, cursor: None };
        source
            .read(&ctx, &mut |b| {
                out.push(b);
                Ok(())
            })
            .unwrap();
    }
    out
}

/// The observations of `detector` over `batches`, one by one, in the shape a
/// replay case expects them (everything but the detector's name).
fn observations(
    runtime: &sentinel_host::runtime::Runtime,
    detector: &std::path::Path,
    batches: &[sentinel_host::model::record::Batch],
    scan_time_ms: i64,
) -> Vec<serde_json::Value> {
    use sentinel_host::model::observation::ConfigValue;
    let d = runtime.load(detector).unwrap();
    let config = d
        .descriptor
        .config
        .iter()
        .map(|k| {
            let v = match k.name.as_str() {
                "cost" => ConfigValue::Float(COST_USD),
                "queue_wait" => ConfigValue::DurationMs(QUEUE_WAIT_S * 1000),
                _ => k.default.clone(),
            };
            (k.name.clone(), v)
        })
        .collect();
    let ctx = sentinel_host::runtime::ScanContext { scan_time_ms, window_start_ms: 0, config, state: None };
    let mut scan = runtime.start_scan(&d, ctx).unwrap();
    for b in batches {
        if d.descriptor.subscriptions.iter().any(|s| s.source == b.source && s.kind == b.kind) {
            scan.push(&sentinel_host::runtime::PreparedBatch::new(b.clone())).unwrap();
        }
    }
    scan.finish().unwrap().observations.iter().map(sentinel_host::ops::replay::observation_json).collect()
}

#[test]
fn each_port_returns_the_same_observations_one_by_one_in_the_same_order() {
    let s = Scratch::new();
    let data = data(&s);
    let scan_time = 1_791_999_000_000;
    let batches = batches(&data, scan_time);
    let runtime = sentinel_host::runtime::Runtime::new(sentinel_host::runtime::Limits::default())
        .unwrap()
        .with_cache(shared_cache());
    for (original, port, _) in TWINS {
        let a = observations(&runtime, &shipped_detectors().join(format!("{original}.wasm")), &batches, scan_time);
        let b = observations(&runtime, &shipped_detectors().join(format!("{port}.wasm")), &batches, scan_time);
        assert!(a.len() >= 10, "{original}: {}", a.len());
        assert_eq!(a, b, "{port} and {original}");
    }
}
