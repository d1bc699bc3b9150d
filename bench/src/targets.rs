//! The targets issue #39 set, each judged from figures one run measured:
//! the reader and the scan against the floor, the sandbox's cost split into
//! metering, the rest of the sandbox and the canonical ABI, the long-running
//! mode's resident memory, and the targets kept from before (fast path,
//! warm start, fire decision, memory growth, scan time per record).
//!
//! Owns the rules (which figure, which size, which limit); never measures,
//! and never writes a table (the report does).

use crate::report::{DetectorResult, Report, SizeResult, Target};

fn target(name: &str, measured: f64, limit: f64, detail: String) -> Target {
    Target { name: name.into(), measured, limit, met: measured <= limit, detail }
}

/// The detector of the largest size with the highest `figure`, and it.
fn worst(detectors: &[DetectorResult], figure: impl Fn(&DetectorResult) -> Option<f64>) -> Option<(f64, &str)> {
    detectors.iter().filter_map(|d| figure(d).map(|f| (f, d.name.as_str()))).max_by(|a, b| a.0.total_cmp(&b.0))
}

/// A detector's figure a target judges.
type Figure = fn(&DetectorResult) -> Option<f64>;

/// Every target the report's figures allow, in the page's order.
pub fn compute(r: &Report) -> Vec<Target> {
    let Some(largest) = r.sizes.last() else { return Vec::new() };
    let mut t = floor_targets(largest);
    t.extend(sandbox_targets(largest));
    t.extend(kept_targets(r));
    t.extend(memory_targets(r, largest));
    t
}

/// The reader and the whole scan against what SQLite and the disk allow.
fn floor_targets(z: &SizeResult) -> Vec<Target> {
    let Some(floor) = z.floor_ms() else { return Vec::new() };
    let at = || format!("at {} records ({floor:.0} ms floor)", z.records);
    vec![
        target("raw read / floor", z.raw_read_ms / floor, 1.3, at()),
        target("full scan / floor", z.full_scan_ms / floor, 2.0, at()),
    ]
}

/// The sandbox's cost, worst shipped Rust detector at the largest size,
/// split where the runner can split it: metering (component over the same
/// component unmetered), the rest of the sandbox (unmetered over native),
/// all of it (component over native) and the canonical ABI's share
/// (component over its core-module peer on the same engine).
fn sandbox_targets(z: &SizeResult) -> Vec<Target> {
    let n = z.records;
    let rows: [(&str, f64, Figure); 4] = [
        ("metering: component / unmetered (worst detector)", 1.25, DetectorResult::metering_ratio),
        ("sandbox without metering: unmetered / native (worst detector)", 2.0, |d| d.unmetered_ratio),
        ("component / native (worst detector)", 2.5, |d| d.ratio),
        ("canonical ABI: component / core-module peer (worst detector)", 1.2, |d| d.peer_ratio),
    ];
    rows.into_iter()
        .filter_map(|(name, limit, figure)| {
            worst(&z.detectors, figure).map(|(f, d)| target(name, f, limit, format!("{d} at {n} records")))
        })
        .collect()
}

/// The targets met before #39, kept: the fast path, the warm start, the
/// fire decision.
fn kept_targets(r: &Report) -> Vec<Target> {
    let mut t = Vec::new();
    if let Some(s) = r.sizes.iter().max_by(|a, b| a.fast_path_over_scan().total_cmp(&b.fast_path_over_scan())) {
        let at = format!("at {} records", s.records);
        t.push(target("fast path vs full scan (worst size)", s.fast_path_over_scan(), 0.05, at));
    }
    let st = &r.startup;
    let detail = format!("{} detectors", st.detectors);
    t.push(target("warm start vs cold start", st.warm_ms / st.cold_ms, 0.05, detail));
    let samples: usize = r.sizes.iter().flat_map(|s| &s.detectors).map(|d| d.fire_samples).sum();
    let fires = r.sizes.iter().flat_map(|s| s.detectors.iter().map(move |d| (d.fire_max_us, &d.name, s.records)));
    if let Some((max, name, records)) = fires.max_by(|a, b| a.0.total_cmp(&b.0)) {
        t.push(target(
            "fire decision (finish), ms: worst of every sample",
            max / 1e3,
            1.0,
            format!("{name} at {records} records; {samples} samples in all, so the worst stands for p99"),
        ));
    }
    t
}

/// Memory and time as the data grows, and the long-running mode's
/// resident memory.
fn memory_targets(r: &Report, largest: &SizeResult) -> Vec<Target> {
    let mut t = Vec::new();
    if r.sizes.len() > 1 {
        let (a, first) = (&r.sizes[r.sizes.len() - 2], &r.sizes[0]);
        t.push(target(
            "peak memory, largest vs next size",
            largest.peak_rss_kib as f64 / a.peak_rss_kib as f64,
            2.0,
            format!("{} vs {} records", largest.records, a.records),
        ));
        t.push(target(
            "scan time per record, largest vs smallest (linear = 1)",
            largest.scan_ms_per_record() / first.scan_ms_per_record(),
            1.25,
            format!("{} vs {} records", largest.records, first.records),
        ));
    }
    if let Some(l) = &r.long_running {
        let mib = |kib: u64| kib as f64 / 1024.0;
        t.push(target(
            "long-running resident memory (VmRSS, median of runs), every shipped detector vs those written in Rust",
            l.every_over_rust(),
            2.0,
            format!(
                "{:.0} vs {:.0} MiB ({:.0} vs {:.0} anonymous), {} vs {} detectors, {} runs each, {} records",
                mib(l.every_rss_kib),
                mib(l.rust_rss_kib),
                mib(l.every_anon_kib),
                mib(l.rust_anon_kib),
                l.every_detectors,
                l.rust_detectors,
                l.runs,
                l.records
            ),
        ));
    }
    t
}
