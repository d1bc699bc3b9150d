//! The human summary of a scan: a few lines, failures first-class.

use std::fmt::Write;

use sentinel_host::ScanReport;

pub fn human(r: &ScanReport) -> String {
    let mut s = String::new();
    if let Some(since) = r.unchanged_since {
        let _ = writeln!(
            s,
            "sentinel: nothing changed in {} since the last scan (at {since} ms); no rows read, {} issues in {}",
            r.data_dir.display(),
            r.issues.total_issues,
            r.issues_file.display()
        );
        return s;
    }
    let _ = writeln!(s, "sentinel: scanned {} in {} ms", r.data_dir.display(), r.elapsed_ms);
    if let Some(reason) = &r.state_reset {
        let _ = writeln!(s, "  state started again: {reason}; issues kept, only newer occurrences counted");
    }
    let sources: Vec<String> = r
        .sources
        .iter()
        .map(|src| match src.status {
            "ok" if src.skipped > 0 => format!("{} {} records ({} skipped)", src.name, src.records, src.skipped),
            "ok" => format!("{} {} records", src.name, src.records),
            "missing" => format!("{} missing", src.name),
            _ => format!("{} FAILED", src.name),
        })
        .collect();
    let _ = writeln!(s, "  sources: {}", sources.join(", "));
    for src in r.sources.iter().filter(|s| s.error.is_some()) {
        let _ = writeln!(s, "    {}: {}", src.name, src.error.as_deref().unwrap_or_default());
    }
    let count = |status: &str| r.detectors.iter().filter(|d| d.status == status).count();
    let _ = writeln!(s, "  detectors: {} ok, {} failed, {} refused", count("ok"), count("failed"), count("refused"));
    for d in &r.detectors {
        match &d.failure {
            None => {
                let _ = writeln!(
                    s,
                    "    ok       {} {}: {} records, {} observations, decision in {:.2} ms",
                    d.name,
                    d.version.as_deref().unwrap_or(""),
                    d.records,
                    d.observations,
                    d.finish_us as f64 / 1000.0
                );
            }
            Some(f) => {
                let phase = f.phase.as_deref().map(|p| format!(" in {p}")).unwrap_or_default();
                let _ = writeln!(s, "    {:<8} {}: {}{}: {}", d.status, d.name, f.kind, phase, f.message);
                if let Some(line) = f.stderr.as_deref().and_then(|e| e.lines().find(|l| !l.trim().is_empty())) {
                    let _ = writeln!(s, "             stderr: {line}");
                }
            }
        }
    }
    let _ = writeln!(
        s,
        "  issues: {} new, {} updated, {} total -> {}",
        r.issues.new_issues,
        r.issues.updated_issues,
        r.issues.total_issues,
        r.issues_file.display()
    );
    s
}
