//! The human summary of a scan: a few lines, failures first-class.

use std::fmt::Write;

use sentinel_host::ScanReport;
use sentinel_host::scan::{DetectorStatus, SourceStatus};

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
            SourceStatus::Ok if src.skipped > 0 => {
                format!("{} {} records ({} skipped)", src.name, src.records, src.skipped)
            }
            SourceStatus::Ok => format!("{} {} records", src.name, src.records),
            SourceStatus::Missing => format!("{} missing", src.name),
            SourceStatus::NotRead => format!("{} not read (its readers wait)", src.name),
            SourceStatus::Failed => format!("{} FAILED", src.name),
        })
        .collect();
    let _ = writeln!(s, "  sources: {}", sources.join(", "));
    for src in r.sources.iter().filter(|s| s.error.is_some()) {
        let _ = writeln!(s, "    {}: {}", src.name, src.error.as_deref().unwrap_or_default());
    }
    let count = |status: DetectorStatus| r.detectors.iter().filter(|d| d.status == status).count();
    let waiting = count(DetectorStatus::NotDue);
    let disabled = count(DetectorStatus::Disabled);
    let _ = writeln!(
        s,
        "  detectors: {} ok, {} failed, {} refused{}{}",
        count(DetectorStatus::Ok),
        count(DetectorStatus::Failed),
        count(DetectorStatus::Refused),
        if waiting > 0 { format!(", {waiting} waiting for their cadence") } else { String::new() },
        if disabled > 0 { format!(", {disabled} disabled") } else { String::new() }
    );
    for d in &r.detectors {
        match &d.failure {
            None if d.status == DetectorStatus::NotDue => {
                let _ = writeln!(s, "    not due  {}: next due at {} ms", d.name, d.next_due.unwrap_or_default());
            }
            None if d.status == DetectorStatus::Disabled => match &d.note {
                Some(note) => {
                    let _ = writeln!(s, "    disabled {}: {note}", d.name);
                }
                None => {
                    let _ = writeln!(s, "    disabled {}: not run until enabled; it then reads what it missed", d.name);
                }
            },
            None => {
                let _ = writeln!(
                    s,
                    "    ok       {} {}: {} records, {} observations, decision in {:.2} ms{}{}",
                    d.name,
                    d.version.as_deref().unwrap_or(""),
                    d.records,
                    d.observations,
                    d.finish_us as f64 / 1000.0,
                    if d.probation { " [PROBATION]" } else { "" },
                    d.note.as_deref().map(|n| format!(" ({n})")).unwrap_or_default()
                );
            }
            Some(f) => {
                let phase = f.phase.as_deref().map(|p| format!(" in {p}")).unwrap_or_default();
                let status = serde_json::to_value(d.status).ok().and_then(|v| v.as_str().map(str::to_owned));
                let status = status.unwrap_or_default();
                let _ = writeln!(s, "    {status:<8} {}: {}{}: {}", d.name, f.kind, phase, f.message);
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

/// `detectors list` and `detectors inspect`.
pub fn detectors(infos: &[sentinel_host::scan::DetectorInfo], full: bool) -> String {
    let mut s = String::new();
    for info in infos {
        let i = &info.inspection;
        let name = i.descriptor.as_ref().map_or_else(
            || i.path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default(),
            |d| d.name.clone(),
        );
        let health = match (&i.error, &info.health) {
            (Some(_), _) => "refused".to_owned(),
            (None, Some(h)) => match h.state {
                sentinel_host::health::State::Quarantined { until } => format!("quarantined until {until}"),
                other => other.label().to_owned(),
            },
            (None, None) => "ok (never run here)".to_owned(),
        };
        let _ = writeln!(
            s,
            "{name:<20} {:<8} wit {:<6} {:<24} {:>9} bytes  sha256 {}",
            i.descriptor.as_ref().map_or("-", |d| d.version.as_str()),
            i.wit_version.as_deref().unwrap_or("-"),
            health,
            i.size.unwrap_or(0),
            i.sha256.as_deref().map_or("-", |h| &h[..16.min(h.len())])
        );
        if !full {
            continue;
        }
        let _ = writeln!(s, "  file: {}", i.path.display());
        if let Some(e) = &i.error {
            let _ = writeln!(s, "  refused: {e}");
        }
        if let Some(d) = &i.descriptor {
            let _ = writeln!(s, "  emits: {}", d.emits.join(", "));
            for sub in &d.subscriptions {
                let _ = writeln!(s, "  reads: {} / {}", sub.source, sub.kind);
            }
            for k in &d.config {
                let _ = writeln!(
                    s,
                    "  config: {} = {} ({}) {}",
                    k.name,
                    serde_json::to_string(&k.default).unwrap_or_default(),
                    k.default.type_name(),
                    k.doc
                );
            }
        }
        for (import, verdict) in &i.imports {
            let _ = writeln!(s, "  import: {import}: {verdict}");
        }
        if let Some(h) = &info.health {
            let _ = writeln!(
                s,
                "  health: {} failures in a row, {} in all, last: {}",
                h.failures_in_a_row,
                h.failures_total,
                h.last_failure.as_deref().unwrap_or("none")
            );
        }
    }
    s
}

/// What `verify` found, in a few lines.
pub fn verification(v: &sentinel_host::firelog::Verification) -> String {
    let mut s = String::new();
    match &v.finding {
        None => {
            let _ = writeln!(
                s,
                "ok: {} fires in {} segments, chained, head signed by {}{}",
                v.entries,
                v.segments,
                v.kid.as_deref().unwrap_or("?"),
                if v.ledger_checked { ", matching the ledger" } else { "" }
            );
        }
        Some(f) => {
            let place: Vec<String> =
                [f.file.clone(), f.line.map(|l| format!("line {l}")), f.seq.map(|q| format!("entry {q}"))]
                    .into_iter()
                    .flatten()
                    .collect();
            let _ = writeln!(s, "BROKEN: {}: {}", place.join(", "), f.problem);
            let _ = writeln!(s, "  checked {} entries in {} segments before it", v.entries, v.segments);
        }
    }
    let _ = writeln!(s, "  log {}; key from {}", v.dir.display(), v.key_from);
    s
}
